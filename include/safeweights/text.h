// safeweights/text.h — text for people and for machines, shared by the formats' inspect output and the
// command-line tool.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "safeweights/error.h"
#include "safeweights/export.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

// `s` as a JSON string with serde_json's escaping; bytes that are not valid UTF-8 (names and messages
// from a hostile file can hold them) each become U+FFFD, so the output is always valid JSON.
std::string json_quote(std::string_view s);
// Whether printable() keeps line feeds (multi-line reports) or escapes them (one field of a line).
enum class LineBreaks { Escape, Keep };
// `s` made safe to show on a terminal, for every human-readable output (reports and error messages):
// C0 control characters (a line feed kept when asked), DEL and bytes that are not valid UTF-8 become
// \xHH, C1 control characters (U+0080..U+009F) become \u{HH}. Names and messages from a hostile file
// then cannot move the cursor, recolour, retitle or clear the terminal, or overwrite a line with \r.
// Everything else is unchanged. JSON output uses json_quote instead, which keeps the exact text.
std::string printable(std::string_view s, LineBreaks line_breaks = LineBreaks::Escape);
// {"kind":..,"rule":..,"message":..,"file":..,"entry":..,"tensor":..,"offset":..} (rule, file, entry, tensor,
// offset when known; file is the one the error is in, a split sibling or shard of the file asked about).
std::string error_json(const Error& error);
// "1.5 GiB", "12 B".
std::string human_bytes(std::uint64_t bytes);
// Appends printf-formatted text.
void append_format(std::string& out, const char* format, ...) __attribute__((format(printf, 2, 3)));
// "[2, 3]".
std::string shape_string(std::span<const std::uint64_t> shape);

SAFEWEIGHTS_API_END
}  // namespace safeweights
