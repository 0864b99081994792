// The row codecs behind safeweights/quantize.h, one pair per type, and the byte helpers they share.
// Internal to src/quant.
//
// A codec works on whole blocks: quantize reads blocks x block_elements floats and writes blocks x
// block_bytes bytes; dequantize the reverse. Arguments were checked by quantize.cpp; a codec cannot fail
// and allocates nothing (but the grid quantizers' search tables, built once: iq_search.h). Every file
// here is compiled with -ffp-contract=off and without fast-math (CMakeLists.txt): exactness depends on
// evaluating float expressions as ggml's C code does.
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/little_endian.h"
#include "quant/float16.h"
#include "safeweights/tensor_type.h"

namespace safeweights::quant {

using QuantizeRow = void (*)(const float* src, std::byte* dst, std::size_t blocks);
using DequantizeRow = void (*)(const std::byte* src, float* dst, std::size_t blocks);
// One row of `row_length` elements (whole blocks) quantized with an importance weight per column, as
// ggml's quantize_<type>(..., quant_weights) does for one row (the path llama-quantize takes with an
// importance matrix); `importance` holds row_length floats and is never null.
using QuantizeWeightedRow = void (*)(const float* src, std::byte* dst, std::size_t row_length, const float* importance);

struct Codec {
  QuantizeRow quantize = nullptr;      // nullptr: quantizing to this type without weights is not supported
  DequantizeRow dequantize = nullptr;  // nullptr: dequantizing this type is not supported
  // nullptr: the type has no weighted path (ggml ignores an importance matrix for it: F16, BF16, Q8_0),
  // or it is not implemented yet (takes_importance() says which types have one in ggml).
  QuantizeWeightedRow quantize_weighted = nullptr;
};

// The codec of each family's types (a default Codec for types the family does not hold).
Codec float_codec(TensorType type) noexcept;    // F32, F16, BF16 (quantize.cpp)
Codec legacy_codec(TensorType type) noexcept;   // Q4_0 ... Q8_1 (legacy.cpp)
Codec k_codec(TensorType type) noexcept;        // Q2_K ... Q8_K (kquants.cpp)
Codec other_codec(TensorType type) noexcept;    // IQ4_*, TQ*, MXFP4 (other.cpp), and the grid types and NVFP4 below
Codec low_bit_codec(TensorType type) noexcept;  // Q1_0, Q2_0 (q1q2.cpp)
Codec iq_grid_codec(TensorType type) noexcept;  // IQ1_*, IQ2_*, IQ3_* (iq.cpp), reached through other_codec
Codec nvfp4_codec() noexcept;                   // NVFP4 (nvfp4.cpp), reached through other_codec

// Block fields at any alignment (blocks are packed: an 18-byte block puts its float16 scale at every
// even offset, a 17-byte one at odd ones), little-endian through core/little_endian.h.
inline std::uint16_t load_u16(const std::byte* p) noexcept { return le::u16(p); }
inline void store_u16(std::byte* p, std::uint16_t v) noexcept { le::store(p, v, 2); }
inline float load_f16(const std::byte* p) noexcept { return f16_to_f32(le::u16(p)); }
inline void store_f16(std::byte* p, float v) noexcept { le::store(p, f32_to_f16(v), 2); }
inline float load_f32(const std::byte* p) noexcept { return std::bit_cast<float>(le::u32(p)); }
inline void store_f32(std::byte* p, float v) noexcept { le::store(p, std::bit_cast<std::uint32_t>(v), 4); }
inline std::uint8_t load_u8(const std::byte* p) noexcept { return std::to_integer<std::uint8_t>(*p); }
inline std::int8_t load_i8(const std::byte* p) noexcept { return static_cast<std::int8_t>(load_u8(p)); }

}  // namespace safeweights::quant
