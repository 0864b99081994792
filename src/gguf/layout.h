// GGUF layout facts shared by the reader, the writer and the registration. Internal.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "safeweights/gguf.h"

namespace safeweights::gguf {

inline constexpr std::string_view kMagic = "GGUF";
inline constexpr std::uint32_t kWriteVersion = 3;
inline constexpr std::string_view kAlignmentKey = "general.alignment";
inline constexpr std::uint64_t kMaxKeyBytes = 65535;                        // the spec's limit
inline constexpr std::uint64_t kMaxStringBytes = std::uint64_t{1} << 30;    // ggml's GGUF_MAX_STRING_LENGTH
inline constexpr std::uint64_t kMaxArrayElements = std::uint64_t{1} << 30;  // ggml's GGUF_MAX_ARRAY_ELEMENTS

// Bytes of one element of a fixed-size type; 0 for STRING and ARRAY; -1 for an unknown type id.
inline int value_width(std::uint32_t type) noexcept {
  constexpr int kWidth[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  return type < 13 ? kWidth[type] : -1;
}
// The value as JSON: integers exact, floats in their shortest round-trip form (NaN and the infinities
// as the strings "NaN", "Infinity", "-Infinity"), strings with json_quote, arrays as arrays.
void append_value_json(std::string& out, const Value& value);

inline bool is_signed(ValueType t) noexcept {
  return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 || t == ValueType::INT64;
}

// `v` rounded up to a multiple of `alignment` (a power of two); false when that overflows.
inline bool align_up(std::uint64_t v, std::uint64_t alignment, std::uint64_t& out) noexcept {
  const std::uint64_t rem = v & (alignment - 1);
  if (rem == 0) {
    out = v;
    return true;
  }
  return !__builtin_add_overflow(v, alignment - rem, &out);
}

}  // namespace safeweights::gguf
