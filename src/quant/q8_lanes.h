// The quantizers of ggml's first block types without weights (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1) eight
// blocks at a time on AVX2 (q8_lanes.cpp), for legacy.cpp: each block's statistics and codes in
// 8-float vectors, the eight blocks' scales (d and its inverse) one block a lane, every float
// operation the one ggml's reference quantizer does, so the bytes are its bytes. Internal to src/quant.
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <cstddef>

namespace safeweights::quant {

// Quantizes 8 consecutive Q8_0 blocks (256 floats at src, 8 x 34 bytes at dst) and returns true; or
// returns false having written nothing, when this build or CPU has no AVX2 or a block needs the plain
// path (a value that is not finite, a scale whose codes could reach 127.5): the caller quantizes those
// 8 blocks itself.
bool quantize_q8_0_8_blocks(const float* src, std::byte* dst) noexcept;

// The same for Q4_0 (bits 4) and Q5_0 (bits 5): 8 x 18 or 8 x 22 bytes at dst. False, having written
// nothing, without AVX2 or where a block needs the plain path (a value that is not finite, a scale
// whose inverse is infinite).
bool quantize_symmetric_8_blocks(int bits, const float* src, std::byte* dst) noexcept;

// The same for Q4_1 (bits 4) and Q5_1 (bits 5): 8 x 20 or 8 x 24 bytes at dst; false also where a
// block's range (max - min) is infinite.
bool quantize_affine_8_blocks(int bits, const float* src, std::byte* dst) noexcept;

}  // namespace safeweights::quant
