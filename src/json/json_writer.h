// JSON output exactly as the reference's serde_json writes it (compact: no spaces), and a writer that
// places the commas and colons (the inspect documents are built with it). Internal.
//
// Thread safety: a Writer has one owner; the functions are pure.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace safeweights::json {

// Appends a decimal integer.
void append_uint(std::string& out, std::uint64_t value);

// Compact JSON built in order: `Writer w; w.object().key("a").uint(1).key("b").array().uint(2).end().end();`
// gives {"a":1,"b":[2]}. Strings are quoted as safeweights::json_quote does (serde_json's escaping; bytes
// that are not valid UTF-8 become U+FFFD), so the document is valid JSON whatever a hostile file holds.
// Misuse (a value where a key is due, an end() too many) is a programming error, caught by assert.
class Writer {
 public:
  Writer& object();  // {
  Writer& array();   // [
  Writer& end();     // } or ], whichever is open
  Writer& key(std::string_view name);
  Writer& string(std::string_view value);
  Writer& uint(std::uint64_t value);
  Writer& boolean(bool value);
  Writer& null();
  // A value already written as JSON text (another document, a number in its canonical form).
  Writer& raw(std::string_view json);
  // An array of integers: [1,2,3].
  Writer& uints(std::span<const std::uint64_t> values);
  // The text so far; complete once every object and array is ended.
  std::string& text() { return out_; }

 private:
  void before_value();

  std::string out_;
  std::vector<char> open_;  // '{' or '[' for each open container, innermost last
  bool first_ = true;       // nothing written yet in the innermost container
};

}  // namespace safeweights::json
