// safeweights/dtype.h — the one table of element types, shared by every format.
//
// Each row names a type once: its safetensors header code, its size in bits, the numpy and torch names
// used by the Python layer, and the GGUF type id where GGUF has an equivalent. Later formats add
// columns, never a second table. The enum's order is the safetensors reference's declaration order,
// which its writer uses as a sort key (descending), so do not reorder it.
//
// Thread safety: everything here is immutable data; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace safeweights {

enum class Dtype : std::uint8_t {
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
};

inline constexpr int kDtypeCount = 22;

enum class DtypeClass : std::uint8_t { Bool, Unsigned, Signed, Float, Complex };

struct DtypeInfo {
  Dtype dtype;
  std::string_view name;        // safetensors header code: "F32"
  std::uint16_t bits;           // bits per element: 4 for F4, 6 for F6_*, 64 for C64
  DtypeClass cls;
  std::string_view numpy_name;  // numpy / ml_dtypes dtype name, empty when there is none
  std::string_view torch_name;  // torch.<name>, empty when there is none
  std::int16_t gguf_type;       // ggml_type id, -1 when GGUF has no equivalent
};

// The whole table, indexed by Dtype.
std::span<const DtypeInfo> dtype_table() noexcept;
const DtypeInfo& dtype_info(Dtype dtype) noexcept;
inline std::string_view dtype_name(Dtype dtype) noexcept { return dtype_info(dtype).name; }
inline std::uint16_t dtype_bits(Dtype dtype) noexcept { return dtype_info(dtype).bits; }

// Exact, case-sensitive lookup by safetensors header code ("BF16").
std::optional<Dtype> dtype_from_name(std::string_view name) noexcept;
// Lookup by numpy/torch name ("bfloat16", "float8_e4m3fn").
std::optional<Dtype> dtype_from_numpy_name(std::string_view name) noexcept;
std::optional<Dtype> dtype_from_torch_name(std::string_view name) noexcept;

}  // namespace safeweights
