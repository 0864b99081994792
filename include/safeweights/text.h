// safeweights/text.h — text for people and for machines, shared by the formats' inspect output and the
// command-line tool: every JSON document either prints is built by the one JsonWriter below.
//
// Thread safety: pure functions; a JsonWriter has one owner.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

// Compact JSON (no spaces, as serde_json writes it) built in order, the writer of every JSON document
// the library and the CLI print (inspect, validate, diff and bench --json, error_json): it places the
// commas and colons, quotes strings as json_quote() does, and writes numbers only in forms JSON has.
// `JsonWriter w; w.object().key("a").uint(1).key("b").array().uint(2).end().end();` gives
// {"a":1,"b":[2]}. Misuse (a value where a key is due, an end() too many) is a programming error,
// caught by assert.
class JsonWriter {
 public:
  JsonWriter& object();  // {
  JsonWriter& array();   // [
  JsonWriter& end();     // } or ], whichever is open
  JsonWriter& key(std::string_view name);
  JsonWriter& string(std::string_view value);
  JsonWriter& uint(std::uint64_t value);
  JsonWriter& boolean(bool value);
  JsonWriter& null();
  // The shortest text that reads back as `value` (std::to_chars: 0.1, 1e+308); null for a NaN or an
  // infinity, which JSON cannot write.
  JsonWriter& number(double value);
  // `value` with `decimals` digits after the point (printf's %.Nf: 12.500); null for a NaN or an infinity.
  JsonWriter& fixed(double value, int decimals);
  // A value already written as JSON text (another document, a number in a form of its own).
  JsonWriter& raw(std::string_view json);
  // An array of integers: [1,2,3].
  JsonWriter& uints(std::span<const std::uint64_t> values);
  // The text so far; complete once every object and array is ended.
  std::string& text() { return out_; }

 private:
  void before_value();
  JsonWriter& open(char bracket);  // '{' or '['

  std::string out_;
  std::vector<char> open_;  // '{' or '[' for each open container, innermost last
  bool first_ = true;       // nothing written yet in the innermost container
};

SAFEWEIGHTS_API_END
}  // namespace safeweights
