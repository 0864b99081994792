// The JSON parser behind the formats' schemas (except the safetensors header, which json/pull.h reads in
// one pass): simdjson's DOM, with the few helpers the schema readers share. Internal. Only src/json and the schema files of the formats (src/<format>/*_json.cpp)
// include it, which keeps simdjson out of every other translation unit.
#pragma once

#include <simdjson.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/hash.h"
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
simdjson::error_code parse_padded(std::string_view text, int max_depth, std::unique_ptr<simdjson::dom::parser>& own, element& root);
// The same for text without padding (copied once into a padded buffer).
simdjson::error_code parse_document(std::string_view text, int max_depth, std::unique_ptr<simdjson::dom::parser>& own, element& root);

// The place of the first key that repeats within one object anywhere in `root`, at any depth: the key
// and the path of its object ("model.vocab", "added_tokens[3]"; empty at the top level). Python's json
// keeps the last of repeated keys and simdjson's lookups find the first, so a document that repeats a
// key means two things to two readers: its readers refuse it. Costs one KeySet per object on the way
// down (nesting is bounded by the parser's depth limit).
struct RepeatedKey {
  std::string key;
  std::string where;
};
std::optional<RepeatedKey> find_repeated_key(element root);

// The keys of one object, to find repeats. Small objects (the usual 3-field tensor entry) are checked
// pairwise; larger ones with an open-addressing table of indices under a seeded hash, so a hostile
// header can make this neither quadratic (crafted collisions) nor large: 16 bytes per key plus 4 to 8
// bytes of table, where a node-based set took about 70 (8.3M metadata keys cost 600 MB).
class KeySet {
 public:
  // Room for `n` keys up front (when the object's size is known), so the store never regrows.
  void reserve(std::size_t n) {
    keys_.reserve(n);
    if (n > kPairwise) rehash(table_size_for(n));
  }

  // True when `key` was not in the set (it is now).
  bool insert(std::string_view key) {
    if (slots_.empty()) {
      for (auto k : keys_) {
        if (k == key) return false;
      }
      keys_.push_back(key);
      if (keys_.size() > kPairwise) rehash(table_size_for(keys_.size()));
      return true;
    }
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash_key(key, seed()) & mask;; i = (i + 1) & mask) {
      if (slots_[i] == 0) {
        keys_.push_back(key);
        slots_[i] = static_cast<std::uint32_t>(keys_.size());
        break;
      }
      if (keys_[slots_[i] - 1] == key) return false;
    }
    if (keys_.size() * 2 > slots_.size()) rehash(slots_.size() * 2);
    return true;
  }
  bool contains(std::string_view key) const {
    if (slots_.empty()) return std::find(keys_.begin(), keys_.end(), key) != keys_.end();
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash_key(key, seed()) & mask;; i = (i + 1) & mask) {
      if (slots_[i] == 0) return false;
      if (keys_[slots_[i] - 1] == key) return true;
    }
  }
  // The keys, in the order they were first inserted.
  const std::vector<std::string_view>& keys() const noexcept { return keys_; }

 private:
  static constexpr std::size_t kPairwise = 16;
  static std::size_t table_size_for(std::size_t n) {
    std::size_t cap = 64;
    while (cap < n * 2) cap <<= 1;
    return cap;
  }
  void rehash(std::size_t cap) {
    slots_.assign(cap, 0);
    const std::size_t mask = cap - 1;
    for (std::size_t k = 0; k < keys_.size(); ++k) {
      std::size_t i = hash_key(keys_[k], seed()) & mask;
      while (slots_[i] != 0) i = (i + 1) & mask;
      slots_[i] = static_cast<std::uint32_t>(k + 1);
    }
  }
  static std::uint64_t seed() { return hash_seed(); }

  std::vector<std::string_view> keys_;
  std::vector<std::uint32_t> slots_;  // index + 1 into keys_; 0: empty. Empty vector: pairwise mode
};

}  // namespace safeweights::json
