// The JSON parser behind every format's schema: simdjson's DOM, with the few helpers the schema readers
// share. Internal. Only src/json and the schema files of the formats (src/<format>/*_json.cpp)
// include it, which keeps simdjson out of every other translation unit.
#pragma once

#include <simdjson.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "json/json_parse.h"

namespace safeweights::json {

using simdjson::dom::element;
using simdjson::dom::element_type;

// By-value accessors: value_unsafe() on a temporary simdjson_result returns a reference into it, which
// dangles if bound by a range-for. Callers have checked the type first.
inline simdjson::dom::object as_object(element e) {
  simdjson::dom::object o;
  if (e.get_object().get(o) != simdjson::SUCCESS) return {};
  return o;
}
inline simdjson::dom::array as_array(element e) {
  simdjson::dom::array a;
  if (e.get_array().get(a) != simdjson::SUCCESS) return {};
  return a;
}
inline std::string_view as_string(element e) {
  std::string_view s;
  if (e.get_string().get(s) != simdjson::SUCCESS) return {};
  return s;
}

// `s` in backquotes for a message, cut at 200 bytes.
std::string quoted(std::string_view s);

// Parses `text`, which must have kJsonPadding readable bytes after it, with a parser reused per thread
// (or, for a large document, one of its own, kept alive by `own`).
simdjson::error_code parse_padded(std::string_view text, int max_depth, std::unique_ptr<simdjson::dom::parser>& own,
                                  element& root);
// The same for text without padding (copied once into a padded buffer).
simdjson::error_code parse_document(std::string_view text, int max_depth, std::unique_ptr<simdjson::dom::parser>& own,
                                    element& root);

// Small objects (the usual 3-field tensor entry) are checked for duplicate keys pairwise; larger ones
// with a hash set, so a hostile header cannot make this quadratic.
class KeySet {
 public:
  bool insert(std::string_view key) {
    if (set_) return set_->insert(key).second;
    for (auto k : small_) {
      if (k == key) return false;
    }
    small_.push_back(key);
    if (small_.size() > 16) set_.emplace(small_.begin(), small_.end());
    return true;
  }

 private:
  std::vector<std::string_view> small_;
  std::optional<std::unordered_set<std::string_view>> set_;
};

}  // namespace safeweights::json
