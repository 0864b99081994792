// The JSON schema of the safetensors header. Internal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "json/json_parse.h"
#include "safeweights/error.h"
#include "safeweights/safetensors.h"
#include "safeweights/tensor_type.h"
#include "safetensors/header_memory.h"

namespace safeweights::safetensors {

// A safetensors header as written, before the offset rules: every entry in file order (duplicate names
// included). Each entry is already the TensorInfo the Header keeps, so no tensor is copied from one
// form into another: names point into the header text (unescaped in place), shapes into `dims`, and
// Header takes the text and both vectors over (moving a vector keeps its buffer).
struct RawHeader {
  // What the reader reserves for a header of n bytes: an entry per 48 bytes of text and three dimensions
  // each (a real entry takes 90 bytes or more). Reserved, not touched: pages never written are never
  // faulted in. Only a header of smaller entries regrows the arrays.
  static std::size_t entries_bound(std::size_t n) noexcept { return n / 48 + 16; }
  static std::size_t dims_bound(std::size_t n) noexcept { return entries_bound(n) * 3; }

  RawHeader() = default;
  // Arrays that take their first reservation from these blocks (Header's arena).
  RawHeader(Region* entries_block, Region* dims_block)
      : entries(PageAllocator<TensorInfo>(entries_block)), dims(PageAllocator<std::uint64_t>(dims_block)) {}

  std::vector<TensorInfo, PageAllocator<TensorInfo>> entries;
  // Reserved for three dimensions per entry; a header with more moves the buffer, and then the shapes
  // already read are rebased (read_shape).
  std::vector<std::uint64_t, PageAllocator<std::uint64_t>> dims;
  bool has_metadata = false;
  std::vector<MetadataView::Entry, PageAllocator<MetadataView::Entry>> metadata;  // file order, duplicates included; views into the text
  // The first violation of a rule stricter than the reference (DuplicateKey inside an entry or the
  // metadata, NonCanonicalEntry, UnknownField). Reported only after every reference rule has passed.
  std::optional<Error> strict_violation;
};

struct HeaderJsonOptions {
  bool reject_unknown_fields = false;
  int max_depth = 128;
};

// Parses the N header bytes at `text` (already known to fit in the file) in one pass, writing entries
// straight into `out`; `text` must have json::kJsonPadding writable bytes after it, and its strings are
// unescaped in place (names and metadata in `out` view it). Errors: InvalidHeader (not UTF-8),
// InvalidHeaderDeserialization (anything the reference's serde_json parse rejects), ResourceLimit.
// `original` holds the same N bytes at offset 8 (the file): on a syntax error it is read again, in
// pieces, for the errors simdjson finds before any other (an unclosed string, a control byte in one).
Status parse_safetensors_header_padded(char* text, std::size_t n, const HeaderJsonOptions& options, const ByteSource& original, RawHeader& out);

}  // namespace safeweights::safetensors
