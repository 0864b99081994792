// safeweights/tensor_type.h — the one element-type model shared by every format.
//
// A TensorType is what a tensor's elements are, whatever file holds them. Plain types have a fixed
// width in bits (F32, BF16, the 4- and 6-bit floats, ...). Block-quantized types (ggml's Q8_0, Q4_K,
// ...) store elements in blocks of `block_elements` along the innermost dimension, each block
// `block_bytes` long; a tensor of such a type must have an innermost dimension that is a multiple of
// the block. tensor_nbytes() applies these rules in one place for every format.
//
// Formats spell types differently (safetensors "F32", GGUF type id 0, torch "FloatStorage", numpy
// "float32"). Each format keeps its own spelling table, in its own folder, mapped onto TensorType, so
// parsing one format's name never accepts another format's name. The canonical name below is only for
// messages and format-neutral output; for plain types it is the safetensors code, for block types
// ggml's name.
//
// The enum's values are our own and stable (append only). No format may use them as a sort key or a
// wire value: formats map through their spelling tables.
//
// Thread safety: everything here is immutable data; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "safeweights/error.h"
#include "safeweights/export.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

enum class TensorType : std::uint8_t {
  // Plain types: the safetensors dtypes.
  BOOL,
  F4,
  F6_E2M3,
  F6_E3M2,
  U8,
  I8,
  F8_E5M2,
  F8_E4M3,
  F8_E8M0,
  F8_E4M3FNUZ,
  F8_E5M2FNUZ,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  C64,
  F64,
  I64,
  U64,
  // Block-quantized types: ggml's.
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  Q8_0,
  Q8_1,
  Q2_K,
  Q3_K,
  Q4_K,
  Q5_K,
  Q6_K,
  Q8_K,
  IQ2_XXS,
  IQ2_XS,
  IQ3_XXS,
  IQ1_S,
  IQ4_NL,
  IQ3_S,
  IQ2_S,
  IQ4_XS,
  IQ1_M,
  TQ1_0,
  TQ2_0,
  MXFP4,
  NVFP4,
  Q1_0,
  Q2_0,
};

inline constexpr int kTensorTypeCount = 49;

enum class TypeClass : std::uint8_t { Bool, Unsigned, Signed, Float, Complex, Quantized };

struct TensorTypeInfo {
  TensorType type;
  std::string_view name;  // canonical name: "F32", "Q8_0"
  TypeClass cls;
  std::uint16_t bits;            // plain types: bits per element (4 for F4, 64 for C64); block types: 0
  std::uint16_t block_elements;  // elements per block: 1 for plain types
  std::uint16_t block_bytes;     // bytes per block: 0 for plain types

  bool is_block() const noexcept { return block_elements > 1; }
};

// The whole table, indexed by TensorType.
std::span<const TensorTypeInfo> tensor_type_table() noexcept;
const TensorTypeInfo& type_info(TensorType type) noexcept;
inline std::string_view type_name(TensorType type) noexcept { return type_info(type).name; }
// Bits per element of a plain type; 0 for a block type (ask type_info() for its block).
inline std::uint16_t type_bits(TensorType type) noexcept { return type_info(type).bits; }

// Bytes held by a tensor of this type and shape (row-major: the innermost dimension last). The element
// count is the product of the shape from the left with checked multiplication (so [2^40, 2^40, 0]
// overflows although it is empty, as the safetensors reference computes it).
//  - plain types: elements x bits, which must be a whole number of bytes (MisalignedSlice otherwise);
//  - block types: the innermost dimension must be a multiple of the block (InvalidBlockShape, also for
//    a 0-dim tensor), and the size is elements / block_elements x block_bytes.
// ValidationOverflow when a product overflows 64 bits.
Result<std::uint64_t> tensor_nbytes(TensorType type, std::span<const std::uint64_t> shape);

// Product of the shape (1 for a scalar). Precondition: the shape passed tensor_nbytes (no overflow).
std::uint64_t num_elements(std::span<const std::uint64_t> shape) noexcept;

SAFEWEIGHTS_API_END
}  // namespace safeweights
