// UTF-8 validity and the JSON string escape: text for machines (json_quote, error_json) needs both,
// and so do json/ and the formats, so they live here, below every other layer. Internal.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace safeweights {

// Whether `text` is valid UTF-8 (SIMD).
bool is_valid_utf8(std::string_view text) noexcept;

// Appends `"s"` with serde_json's escaping: `"` and `\` escaped, \b \t \n \f \r for those control
// bytes, \u00xx (lowercase hex) for the other bytes below 0x20, everything else (0x7F, non-ASCII UTF-8)
// written as is.
void append_json_string(std::string& out, std::string_view s);

}  // namespace safeweights
