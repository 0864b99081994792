// The quantizers of ggml's first block types without weights (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1) eight
// blocks at a time on AVX2 (q8_lanes.cpp), for legacy.cpp: each block's statistics and codes in
// 8-float vectors, the eight blocks' scales (d and its inverse) one block a lane, every float
// operation the one ggml's reference quantizer does, so the bytes are its bytes. Internal to src/quant.
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <cstddef>

#include "safeweights/tensor_type.h"

namespace safeweights::quant {

// Quantizes 8 consecutive blocks of type (Q8_0, Q4_0, Q5_0, Q4_1 or Q5_1: 256 floats at src, 8 blocks
// at dst) and returns true; or returns false having written nothing, for any other type, when this
// build or CPU has no AVX2, or when a block needs the plain path (a value that is not finite, a scale
// whose codes could leave their range: an infinite inverse of a tiny d, Q4_1's and Q5_1's infinite
// max - min): the caller quantizes those 8 blocks itself.
bool quantize_8_blocks(TensorType type, const float* src, std::byte* dst) noexcept;

}  // namespace safeweights::quant
