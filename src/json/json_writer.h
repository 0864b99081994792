// JSON output exactly as the reference's serde_json writes it (compact: no spaces): the integers of the
// safetensors header, and the library's one JSON writer (safeweights/text.h's JsonWriter, which builds
// the inspect documents) under the name the formats use. Internal.
//
// Thread safety: a Writer has one owner; the functions are pure.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>

#include "safeweights/text.h"

namespace safeweights::json {

// Appends a decimal integer.
inline void append_uint(std::string& out, std::uint64_t value) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  (void)ec;
  out.append(buf, end);
}

using Writer = JsonWriter;

}  // namespace safeweights::json
