// The integers of the safetensors header exactly as the reference's serde_json writes them. The
// library's one writer of JSON documents is safeweights/text.h's JsonWriter. Internal.
//
// Thread safety: the function is pure.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>

namespace safeweights::json {

// Appends a decimal integer.
inline void append_uint(std::string& out, std::uint64_t value) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  (void)ec;
  out.append(buf, end);
}

}  // namespace safeweights::json
