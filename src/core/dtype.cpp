#include "safeweights/dtype.h"

#include <array>

namespace safeweights {
namespace {

using C = DtypeClass;

// Bits from the safetensors reference; numpy names follow numpy/ml_dtypes; GGUF ids from ggml's enum.
constexpr std::array<DtypeInfo, kDtypeCount> kTable = {{
    {Dtype::BOOL, "BOOL", 8, C::Bool, "bool", "bool", -1},
    {Dtype::F4, "F4", 4, C::Float, "float4_e2m1fn", "float4_e2m1fn_x2", -1},
    {Dtype::F6_E2M3, "F6_E2M3", 6, C::Float, "float6_e2m3fn", "", -1},
    {Dtype::F6_E3M2, "F6_E3M2", 6, C::Float, "float6_e3m2fn", "", -1},
    {Dtype::U8, "U8", 8, C::Unsigned, "uint8", "uint8", -1},
    {Dtype::I8, "I8", 8, C::Signed, "int8", "int8", 24},
    {Dtype::F8_E5M2, "F8_E5M2", 8, C::Float, "float8_e5m2", "float8_e5m2", -1},
    {Dtype::F8_E4M3, "F8_E4M3", 8, C::Float, "float8_e4m3fn", "float8_e4m3fn", -1},
    {Dtype::F8_E8M0, "F8_E8M0", 8, C::Float, "float8_e8m0fnu", "float8_e8m0fnu", -1},
    {Dtype::F8_E4M3FNUZ, "F8_E4M3FNUZ", 8, C::Float, "float8_e4m3fnuz", "float8_e4m3fnuz", -1},
    {Dtype::F8_E5M2FNUZ, "F8_E5M2FNUZ", 8, C::Float, "float8_e5m2fnuz", "float8_e5m2fnuz", -1},
    {Dtype::I16, "I16", 16, C::Signed, "int16", "int16", 25},
    {Dtype::U16, "U16", 16, C::Unsigned, "uint16", "uint16", -1},
    {Dtype::F16, "F16", 16, C::Float, "float16", "float16", 1},
    {Dtype::BF16, "BF16", 16, C::Float, "bfloat16", "bfloat16", 30},
    {Dtype::I32, "I32", 32, C::Signed, "int32", "int32", 26},
    {Dtype::U32, "U32", 32, C::Unsigned, "uint32", "uint32", -1},
    {Dtype::F32, "F32", 32, C::Float, "float32", "float32", 0},
    {Dtype::C64, "C64", 64, C::Complex, "complex64", "complex64", -1},
    {Dtype::F64, "F64", 64, C::Float, "float64", "float64", 28},
    {Dtype::I64, "I64", 64, C::Signed, "int64", "int64", 27},
    {Dtype::U64, "U64", 64, C::Unsigned, "uint64", "uint64", -1},
}};

constexpr bool table_is_indexed_by_enum() {
  for (std::size_t i = 0; i < kTable.size(); ++i) {
    if (static_cast<std::size_t>(kTable[i].dtype) != i) return false;
  }
  return true;
}
static_assert(table_is_indexed_by_enum(), "kTable rows must follow the Dtype enum order");

}  // namespace

std::span<const DtypeInfo> dtype_table() noexcept { return kTable; }

const DtypeInfo& dtype_info(Dtype dtype) noexcept { return kTable[static_cast<std::size_t>(dtype)]; }

std::optional<Dtype> dtype_from_name(std::string_view name) noexcept {
  // Called once per tensor of every header: compare only the codes of the same length and first letter.
  for (const auto& row : kTable) {
    if (row.name.size() == name.size() && row.name[0] == name[0] && row.name == name) return row.dtype;
  }
  return std::nullopt;
}

std::optional<Dtype> dtype_from_numpy_name(std::string_view name) noexcept {
  for (const auto& row : kTable) {
    if (!row.numpy_name.empty() && row.numpy_name == name) return row.dtype;
  }
  return std::nullopt;
}

std::optional<Dtype> dtype_from_torch_name(std::string_view name) noexcept {
  for (const auto& row : kTable) {
    if (!row.torch_name.empty() && row.torch_name == name) return row.dtype;
  }
  return std::nullopt;
}

}  // namespace safeweights
