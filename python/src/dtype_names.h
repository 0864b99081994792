// The Python layer's spelling of element types: numpy / ml_dtypes and torch names, mapped onto
// TensorType. The only place these names live in C++; python/safeweights/_dtypes.py reads them through
// _safeweights._dtype_table().
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "safeweights/tensor_type.h"

namespace safeweights::python {

struct PythonDtypeName {
  TensorType type;
  std::string_view numpy;  // numpy / ml_dtypes dtype name, empty when there is none
  std::string_view torch;  // torch.<name>, empty when there is none
};

// The types safetensors can store, in its reference's order.
inline constexpr std::array<PythonDtypeName, 22> kPythonDtypeNames = {{
    {TensorType::BOOL, "bool", "bool"},
    {TensorType::F4, "float4_e2m1fn", "float4_e2m1fn_x2"},
    {TensorType::F6_E2M3, "float6_e2m3fn", ""},
    {TensorType::F6_E3M2, "float6_e3m2fn", ""},
    {TensorType::U8, "uint8", "uint8"},
    {TensorType::I8, "int8", "int8"},
    {TensorType::F8_E5M2, "float8_e5m2", "float8_e5m2"},
    {TensorType::F8_E4M3, "float8_e4m3fn", "float8_e4m3fn"},
    {TensorType::F8_E8M0, "float8_e8m0fnu", "float8_e8m0fnu"},
    {TensorType::F8_E4M3FNUZ, "float8_e4m3fnuz", "float8_e4m3fnuz"},
    {TensorType::F8_E5M2FNUZ, "float8_e5m2fnuz", "float8_e5m2fnuz"},
    {TensorType::I16, "int16", "int16"},
    {TensorType::U16, "uint16", "uint16"},
    {TensorType::F16, "float16", "float16"},
    {TensorType::BF16, "bfloat16", "bfloat16"},
    {TensorType::I32, "int32", "int32"},
    {TensorType::U32, "uint32", "uint32"},
    {TensorType::F32, "float32", "float32"},
    {TensorType::C64, "complex64", "complex64"},
    {TensorType::F64, "float64", "float64"},
    {TensorType::I64, "int64", "int64"},
    {TensorType::U64, "uint64", "uint64"},
}};

inline std::optional<TensorType> type_from_numpy_name(std::string_view name) noexcept {
  for (const auto& row : kPythonDtypeNames)
    if (!row.numpy.empty() && row.numpy == name) return row.type;
  return std::nullopt;
}

inline std::optional<TensorType> type_from_torch_name(std::string_view name) noexcept {
  for (const auto& row : kPythonDtypeNames)
    if (!row.torch.empty() && row.torch == name) return row.type;
  return std::nullopt;
}

}  // namespace safeweights::python
