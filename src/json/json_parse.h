// JSON parsing shared by the formats, without simdjson in the interface: validation and the top level
// of a document (UTF-8 validity is core's, core/utf8.h). Internal. Schemas live with their formats
// (src/<format>/); they reach the parser itself through json/dom.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status_macros.h"
#include "safeweights/error.h"

namespace safeweights::json {

// Bytes the JSON parser may read past the end of its input: buffers handed to the *_padded functions
// must have this many readable bytes after the text.
inline constexpr std::size_t kJsonPadding = 64;

// Whether `text` is one valid JSON document (strict RFC 8259, UTF-8, depth-limited). On failure, the
// message says why.
Status validate_json(std::string_view text, int max_depth = 1024);

// The top level of a JSON document: its type as Python names it (dict, list, str, int, float, bool,
// NoneType) and, for an object, its keys in order. InvalidArgument when `text` is not valid JSON.
struct TopLevel {
  std::string python_type;
  std::vector<std::string> keys;
  std::optional<std::string> duplicate_key;  // the first key that repeats, if any
};
Status read_top_level(std::string_view text, TopLevel& out);

}  // namespace safeweights::json
