// The strict JSON readers behind the formats, on simdjson. Internal: only src/json/*.cpp includes
// simdjson, which keeps build times down and the dependency in one place.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "safeweights/dtype.h"
#include "core/status_macros.h"
#include "safeweights/error.h"

namespace safeweights::json {

// A safetensors header as written, before the offset rules: every entry in file order (duplicate names
// included), names and dims in arenas.
struct RawHeader {
  struct Entry {
    std::uint64_t name_offset;  // into names
    std::uint32_t name_length;
    Dtype dtype;
    std::uint32_t rank;
    std::uint64_t dims_offset;  // into dims
    std::uint64_t begin;
    std::uint64_t end;
  };
  std::vector<Entry> entries;
  std::vector<char> names;
  std::vector<std::uint64_t> dims;
  bool has_metadata = false;
  std::vector<std::pair<std::string, std::string>> metadata;  // file order, duplicates included
  // The first violation of a rule stricter than the reference (DuplicateKey inside an entry or the
  // metadata, NonCanonicalEntry, UnknownField). Reported only after every reference rule has passed.
  std::optional<Error> strict_violation;
};

struct HeaderJsonOptions {
  bool reject_unknown_fields = false;
  int max_depth = 128;
};

// Bytes the JSON parser may read past the end of its input: buffers handed to the *_padded functions
// must have this many readable bytes after the text.
inline constexpr std::size_t kJsonPadding = 64;

// A per-thread buffer of at least n + kJsonPadding bytes (reused across calls, so repeated parses do
// not fault in fresh pages). Valid until the next call on the same thread.
char* scratch_buffer(std::size_t n);

// Parses the N header bytes (already known to fit in the file), which sit in a buffer with
// kJsonPadding readable bytes after them. Errors: InvalidHeader (not UTF-8),
// InvalidHeaderDeserialization (anything the reference's serde_json parse rejects).
Status parse_safetensors_header_padded(std::string_view header, const HeaderJsonOptions& options, RawHeader& out);

// A `*.safetensors.index.json`: {"metadata": {...}, "weight_map": {"tensor": "file", ...}}.
struct RawIndex {
  std::vector<std::pair<std::string, std::string>> weight_map;  // file order
  std::vector<std::pair<std::string, std::string>> metadata;    // values: strings as-is, others as JSON text
};
// InvalidIndex for malformed JSON or schema, DuplicateKey for repeated keys.
Status parse_index_json(std::string_view text, RawIndex& out);

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

// Whether `text` is valid UTF-8 (SIMD).
bool is_valid_utf8(std::string_view text) noexcept;

}  // namespace safeweights::json
