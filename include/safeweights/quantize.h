// safeweights/quantize.h — element conversion between F32 and the types a converter writes: F16,
// BF16 and ggml's block-quantized types, computed exactly as ggml's reference code computes them.
//
// quantize() turns float32 values into a type's bytes; dequantize() turns a type's bytes back into
// float32. For block types the element count must be a whole number of blocks (callers convert one row
// at a time: a row's length is the innermost dimension, a multiple of the block). F32 is accepted both
// ways (a copy), so a converter can treat every float type the same.
//
// Supported: quantize() and dequantize() for F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_S, TQ1_0, TQ2_0, MXFP4, Q1_0 and Q2_0;
// dequantize() for IQ2_XXS, IQ2_XS, IQ1_S and IQ1_M too, which quantize only through quantize_rows()
// with importance (requires_importance()). The IQ types' weighted paths are ggml's (quantize_rows()).
// can_quantize()/can_dequantize() say exactly that; any other type gets NotSupported naming it.
//
// Exactness: the output bytes of quantize() are those of ggml's reference quantizers (Q4_0 ... Q8_1,
// Q8_K, F16, BF16, Q1_0, Q2_0), and for Q2_K ... Q6_K and the IQ, TQ and MXFP4 types those of llama.cpp's quantizer
// (ggml_quantize_chunk()) without an importance matrix; those of quantize_rows() with importance weights
// are those of ggml_quantize_chunk() with them as the imatrix (Q4_0 ... Q5_1, Q2_K ... Q6_K, the IQ
// types); dequantize() matches ggml's dequantizers bit for bit (Q8_1, which ggml never dequantizes,
// reads as q x d like Q8_0). This holds for every input, NaN and infinities included (for the IQ grid
// types: every input ggml does not abort on; ours writes a valid block for every input), but one corner:
// in a block holding NaNs of different payloads, which NaN an operation on two of them returns is not
// fixed by C (it follows the operand order a compiler picks), so there the K-quants' bytes can differ
// from a given ggml build. docs/GGUF.md ("Quantization") has the evidence: tests against ggml and gguf-py.
//
// Rows: each call converts whole blocks and allocates nothing (but the first quantizing to a grid type,
// IQ1_* to IQ3_*, which builds that type's search tables once for the process: a few MiB in all); it
// does not poll cancellation (a row is short), callers do between rows.
//
// Thread safety: pure functions of their arguments; call them from any thread on disjoint outputs (the
// search tables' one build is thread-safe, and the bytes do not depend on which thread does it).
#pragma once

#include <cstddef>
#include <span>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/tensor_type.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

bool can_quantize(TensorType type) noexcept;
bool can_dequantize(TensorType type) noexcept;

// dst.size() must equal tensor_nbytes(type, {src.size()}); InvalidArgument otherwise (or when src.size()
// is not a whole number of blocks).
Status quantize(TensorType type, std::span<const float> src, std::span<std::byte> dst);
// Importance-weighted quantization, as llama-quantize does it with an importance matrix (llama-imatrix's
// output): each row of `row_length` elements (a whole number of blocks) is quantized with `importance`,
// one weight per column (row_length floats), through ggml's weighted quantizer for the type. An empty
// `importance` is exactly quantize(). For a type whose ggml quantizer takes no weights (F32, F16, BF16,
// Q8_0) they are ignored, as ggml ignores them; a type whose weighted path this build lacks gets
// NotSupported naming it. src.size() must be a whole number of rows.
Status quantize_rows(TensorType type, std::span<const float> src, std::span<std::byte> dst, std::size_t row_length,
                     std::span<const float> importance);
// Whether ggml's quantizer for `type` takes importance weights (the legacy types but Q8_0, the
// K-quants, the IQ types), and whether it cannot quantize without them (IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M:
// quantize() refuses those, quantize_rows() wants `importance`).
bool takes_importance(TensorType type) noexcept;
bool requires_importance(TensorType type) noexcept;

// dst.size() elements are decoded from src, which must hold exactly that many elements of `type`.
Status dequantize(TensorType type, std::span<const std::byte> src, std::span<float> dst);

SAFEWEIGHTS_API_END
}  // namespace safeweights
