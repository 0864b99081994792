// Percent-encoding of URL parts (RFC 3986), as S3's SigV4 and the Hub's resolve URLs want them. Internal.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace safeweights::uri {

// Every byte but the unreserved ones (A-Z a-z 0-9 - . _ ~), and '/' when keep_slash, as %XX (upper-case
// hex): the form SigV4's canonical URI and the Hub's resolve paths expect.
std::string percent_encode(std::string_view s, bool keep_slash);

// %XX escapes decoded; nullopt for a '%' not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view s);

// Whether `s` starts with `prefix`, ASCII case-insensitively (URL schemes).
bool starts_with_nocase(std::string_view s, std::string_view prefix) noexcept;

}  // namespace safeweights::uri
