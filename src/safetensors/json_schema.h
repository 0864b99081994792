// The JSON schemas of safetensors: the header and the sharded-checkpoint index. Internal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "json/json_parse.h"
#include "safeweights/error.h"
#include "safeweights/tensor_type.h"

namespace safeweights::safetensors {

// A safetensors header as written, before the offset rules: every entry in file order (duplicate names
// included), names and dims in arenas.
struct RawHeader {
  // 40 bytes, written once per tensor. Offsets fit 32 bits: names and dims come from a header of at
  // most kMaxHeaderSize (1e8) bytes.
  struct Entry {
    std::uint32_t name_offset;  // into names
    std::uint32_t name_length;
    std::uint32_t dims_offset;  // into dims
    std::uint32_t rank;
    std::uint64_t begin;
    std::uint64_t end;
    TensorType dtype;
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

}  // namespace safeweights::safetensors
