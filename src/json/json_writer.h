// JSON output exactly as the reference's serde_json writes it. Internal.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace safeweights::json {

// Appends `"s"` with serde_json's escaping: `"` and `\` escaped, \b \t \n \f \r for those control
// bytes, \u00xx (lowercase hex) for the other bytes below 0x20, everything else (0x7F, non-ASCII UTF-8)
// written as is.
void append_string(std::string& out, std::string_view s);

// Appends a decimal integer.
void append_uint(std::string& out, std::uint64_t value);

}  // namespace safeweights::json
