// Q8_0's quantizer eight blocks at a time on AVX2 (q8_lanes.cpp), for legacy.cpp's quantize_q8: each
// block's maximum and codes in 8-float vectors, the eight blocks' scales (absmax / 127 and its
// inverse) one block a lane, every float operation the one ggml's reference quantizer does, so the
// bytes are its bytes. Internal to src/quant.
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

}  // namespace safeweights::quant
