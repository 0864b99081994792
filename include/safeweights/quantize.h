// safeweights/quantize.h — element conversion between F32 and the types a converter writes: F16,
// BF16 and ggml's block-quantized types, computed exactly as ggml's reference code computes them.
//
// quantize() turns float32 values into a type's bytes; dequantize() turns a type's bytes back into
// float32. For block types the element count must be a whole number of blocks (callers convert one row
// at a time: a row's length is the innermost dimension, a multiple of the block). F32 is accepted both
// ways (a copy), so a converter can treat every float type the same.
//
// Exactness: the output bytes of quantize() for Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 are those of ggml's
// reference quantizers, and for the K-quants those of llama.cpp's quantizer without an importance
// matrix; dequantize() matches ggml's dequantizers bit for bit. can_quantize()/can_dequantize() say
// which types are supported; any other type gets NotSupported naming it.
//
// Thread safety: pure functions of their arguments; call them from any thread on disjoint outputs.
#pragma once

#include <cstddef>
#include <span>

#include "safeweights/error.h"
#include "safeweights/tensor_type.h"

namespace safeweights {

bool can_quantize(TensorType type) noexcept;
bool can_dequantize(TensorType type) noexcept;

// dst.size() must equal tensor_nbytes(type, {src.size()}); InvalidArgument otherwise (or when src.size()
// is not a whole number of blocks).
Status quantize(TensorType type, std::span<const float> src, std::span<std::byte> dst);
// dst.size() elements are decoded from src, which must hold exactly that many elements of `type`.
Status dequantize(TensorType type, std::span<const std::byte> src, std::span<float> dst);

}  // namespace safeweights
