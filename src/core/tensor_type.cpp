#include "safeweights/tensor_type.h"

#include <array>
#include <string>

namespace safeweights {
namespace {

using C = TypeClass;

constexpr TensorTypeInfo plain(TensorType t, std::string_view name, C cls, std::uint16_t bits) { return {t, name, cls, bits, 1, 0}; }
constexpr TensorTypeInfo block(TensorType t, std::string_view name, std::uint16_t elements, std::uint16_t bytes) {
  return {t, name, C::Quantized, 0, elements, bytes};
}

using T = TensorType;
// Bits of the plain types from the safetensors reference; blocks from ggml's type traits
// (shared/reference/gguf-and-pytorch.md, A5).
constexpr std::array<TensorTypeInfo, kTensorTypeCount> kTable = {{
    plain(T::BOOL, "BOOL", C::Bool, 8),
    plain(T::F4, "F4", C::Float, 4),
    plain(T::F6_E2M3, "F6_E2M3", C::Float, 6),
    plain(T::F6_E3M2, "F6_E3M2", C::Float, 6),
    plain(T::U8, "U8", C::Unsigned, 8),
    plain(T::I8, "I8", C::Signed, 8),
    plain(T::F8_E5M2, "F8_E5M2", C::Float, 8),
    plain(T::F8_E4M3, "F8_E4M3", C::Float, 8),
    plain(T::F8_E8M0, "F8_E8M0", C::Float, 8),
    plain(T::F8_E4M3FNUZ, "F8_E4M3FNUZ", C::Float, 8),
    plain(T::F8_E5M2FNUZ, "F8_E5M2FNUZ", C::Float, 8),
    plain(T::I16, "I16", C::Signed, 16),
    plain(T::U16, "U16", C::Unsigned, 16),
    plain(T::F16, "F16", C::Float, 16),
    plain(T::BF16, "BF16", C::Float, 16),
    plain(T::I32, "I32", C::Signed, 32),
    plain(T::U32, "U32", C::Unsigned, 32),
    plain(T::F32, "F32", C::Float, 32),
    plain(T::C64, "C64", C::Complex, 64),
    plain(T::F64, "F64", C::Float, 64),
    plain(T::I64, "I64", C::Signed, 64),
    plain(T::U64, "U64", C::Unsigned, 64),
    block(T::Q4_0, "Q4_0", 32, 18),
    block(T::Q4_1, "Q4_1", 32, 20),
    block(T::Q5_0, "Q5_0", 32, 22),
    block(T::Q5_1, "Q5_1", 32, 24),
    block(T::Q8_0, "Q8_0", 32, 34),
    block(T::Q8_1, "Q8_1", 32, 36),
    block(T::Q2_K, "Q2_K", 256, 84),
    block(T::Q3_K, "Q3_K", 256, 110),
    block(T::Q4_K, "Q4_K", 256, 144),
    block(T::Q5_K, "Q5_K", 256, 176),
    block(T::Q6_K, "Q6_K", 256, 210),
    block(T::Q8_K, "Q8_K", 256, 292),
    block(T::IQ2_XXS, "IQ2_XXS", 256, 66),
    block(T::IQ2_XS, "IQ2_XS", 256, 74),
    block(T::IQ3_XXS, "IQ3_XXS", 256, 98),
    block(T::IQ1_S, "IQ1_S", 256, 50),
    block(T::IQ4_NL, "IQ4_NL", 32, 18),
    block(T::IQ3_S, "IQ3_S", 256, 110),
    block(T::IQ2_S, "IQ2_S", 256, 82),
    block(T::IQ4_XS, "IQ4_XS", 256, 136),
    block(T::IQ1_M, "IQ1_M", 256, 56),
    block(T::TQ1_0, "TQ1_0", 256, 54),
    block(T::TQ2_0, "TQ2_0", 256, 66),
    block(T::MXFP4, "MXFP4", 32, 17),
    block(T::NVFP4, "NVFP4", 64, 36),
    block(T::Q1_0, "Q1_0", 128, 18),
    block(T::Q2_0, "Q2_0", 64, 18),
}};

constexpr bool table_is_indexed_by_enum() {
  for (std::size_t i = 0; i < kTable.size(); ++i) {
    if (static_cast<std::size_t>(kTable[i].type) != i) return false;
  }
  return true;
}
static_assert(table_is_indexed_by_enum(), "kTable rows must follow the TensorType enum order");

Error overflow() { return Error(ErrorKind::ValidationOverflow, "overflow computing buffer size from shape and/or element type"); }

}  // namespace

std::span<const TensorTypeInfo> tensor_type_table() noexcept { return kTable; }

const TensorTypeInfo& type_info(TensorType type) noexcept { return kTable[static_cast<std::size_t>(type)]; }

Result<std::uint64_t> tensor_nbytes(TensorType type, std::span<const std::uint64_t> shape) {
  const TensorTypeInfo& info = type_info(type);
  std::uint64_t elements = 1;
  for (std::uint64_t d : shape) {
    if (__builtin_mul_overflow(elements, d, &elements)) return overflow();
  }
  if (info.is_block()) {
    if (shape.empty() || shape.back() % info.block_elements != 0) {
      return Error(ErrorKind::InvalidBlockShape, std::string(info.name) + " stores blocks of " + std::to_string(info.block_elements) +
                                                     " elements along the innermost dimension, which is " +
                                                     (shape.empty() ? std::string("absent (a 0-dim tensor)") : std::to_string(shape.back())));
    }
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(elements / info.block_elements, std::uint64_t{info.block_bytes}, &bytes)) return overflow();
    return bytes;
  }
  std::uint64_t bits = 0;
  if (__builtin_mul_overflow(elements, std::uint64_t{info.bits}, &bits)) return overflow();
  if (bits % 8 != 0) {
    return Error(ErrorKind::MisalignedSlice, std::to_string(elements) + " elements of " + std::string(info.name) + " (" + std::to_string(info.bits) +
                                                 " bits each) do not fill a whole number of bytes");
  }
  return bits / 8;
}

std::uint64_t num_elements(std::span<const std::uint64_t> shape) noexcept {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) n *= d;
  return n;
}

}  // namespace safeweights
