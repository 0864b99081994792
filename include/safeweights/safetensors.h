// safeweights/safetensors.h — reading safetensors files: strict header, zero-copy tensor views.
//
// Header::parse() applies every rule of the reference implementation (huggingface/safetensors) in the
// reference's order, so that any input the reference rejects fails here with the same ErrorKind. Then
// it applies our stricter rules (duplicate keys of any kind, array-form entries, object-form dtypes,
// and optionally unknown fields), which only inputs the reference accepts can reach. A parsed Header
// is immutable and trusted: nothing downstream re-checks it.
//
// Reader couples a Header with the ByteSource it came from and is the file's TensorFile: on a mapped
// source an entry's view() points into the mapping (no copy); on a pread source the bytes are read on
// demand into memory the caller gives (read()) or the caller asks to own (read_owned()); the loader
// (loader.h) reads them all.
//
// Thread safety: Header and Reader are immutable after construction; every const method may be
// called concurrently. Views stay valid as long as the Reader (or its source) lives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/slice.h"
#include "safeweights/source.h"
#include "safeweights/tensor_file.h"
#include "safeweights/tensor_type.h"

namespace safeweights::safetensors {
SAFEWEIGHTS_API_BEGIN

// The reference's cap on the JSON header length N (decimal, not MiB).
inline constexpr std::uint64_t kMaxHeaderSize = 100'000'000;
// Nesting depth at which serde_json (the reference's parser) gives up: 127 nested arrays/objects are
// accepted, 128 are not.
inline constexpr int kMaxJsonDepth = 128;

// The safetensors spelling of element types: the 22 header codes ("F32", "BF16", ...), exact and
// case-sensitive. Never accepts another format's names ("Q8_0" is not a safetensors dtype).
std::optional<TensorType> type_from_code(std::string_view code) noexcept;
// Whether a safetensors file can hold tensors of this type (the plain types), and the code it is
// written as (empty when it cannot).
bool can_store(TensorType type) noexcept;
std::string_view type_code(TensorType type) noexcept;

struct TensorInfo {
  std::string_view name;
  TensorType dtype;
  std::span<const std::uint64_t> shape;
  std::uint64_t begin;  // data_offsets[0], relative to the start of the data section
  std::uint64_t end;    // data_offsets[1]

  std::uint64_t nbytes() const noexcept { return end - begin; }
  std::uint64_t num_elements() const noexcept;  // product of shape (1 for a scalar)
};

using safeweights::MetadataEntries;  // tensor_file.h: one metadata type for every format

// The `__metadata__` of a parsed Header: keys and values in file order, as views into the Header's own
// copy of the header text (16 bytes per entry, no string of its own: 8M entries would otherwise cost a
// gigabyte). Valid as long as the Header.
class MetadataView {
 public:
  struct Entry {  // offsets and sizes in the header text (which is at most kMaxHeaderSize bytes)
    std::uint32_t key_offset, key_size, value_offset, value_size;
  };
  using value_type = std::pair<std::string_view, std::string_view>;
  class iterator {
   public:
    using value_type = MetadataView::value_type;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const char* text, const Entry* at) : text_(text), at_(at) {}
    value_type operator*() const noexcept { return pair_of(text_, *at_); }
    iterator& operator++() noexcept { return ++at_, *this; }
    iterator operator++(int) noexcept { return iterator(text_, at_++); }
    bool operator==(const iterator& o) const noexcept { return at_ == o.at_; }

   private:
    const char* text_ = nullptr;
    const Entry* at_ = nullptr;
  };

  MetadataView() = default;
  MetadataView(const char* text, std::span<const Entry> entries) : text_(text), entries_(entries) {}
  std::size_t size() const noexcept { return entries_.size(); }
  bool empty() const noexcept { return entries_.empty(); }
  value_type operator[](std::size_t i) const noexcept { return pair_of(text_, entries_[i]); }
  iterator begin() const noexcept { return iterator(text_, entries_.data()); }
  iterator end() const noexcept { return iterator(text_, entries_.data() + entries_.size()); }
  // An owned copy, for a caller that outlives the Header or needs MetadataEntries (e.g. a writer).
  MetadataEntries entries() const;

 private:
  static value_type pair_of(const char* text, const Entry& e) noexcept {
    return {std::string_view(text + e.key_offset, e.key_size), std::string_view(text + e.value_offset, e.value_size)};
  }
  const char* text_ = nullptr;
  std::span<const Entry> entries_;
};

struct ReadOptions {
  // Reject fields other than dtype/shape/data_offsets inside a tensor entry. The reference ignores
  // them, so this is off by default; `safeweights validate --strict` turns it on.
  bool reject_unknown_fields = false;
};

class Header {
 public:
  // Reads and validates the header of the safetensors file held by `source` (the whole source is the
  // file: its size must match the data section exactly). Errors carry the source's name.
  static Result<Header> parse(const ByteSource& source, const ReadOptions& options = {});

  Header(Header&&) noexcept = default;
  Header& operator=(Header&&) noexcept = default;
  Header(const Header&) = delete;
  Header& operator=(const Header&) = delete;
  ~Header();

  std::uint64_t header_size() const noexcept { return header_size_; }     // N
  std::uint64_t data_start() const noexcept { return 8 + header_size_; }  // file offset of data
  std::uint64_t data_size() const noexcept { return data_size_; }
  std::uint64_t file_size() const noexcept { return data_start() + data_size_; }

  // Tensors in data-offset order (the order of their bytes in the file).
  std::span<const TensorInfo> tensors() const noexcept { return tensors_; }
  // nullptr when there is no tensor of that name. O(1).
  const TensorInfo* find(std::string_view name) const noexcept;

  // Whether `__metadata__` is present (and not null); its entries in file order.
  bool has_metadata() const noexcept { return has_metadata_; }
  MetadataView metadata() const noexcept { return MetadataView(text_, metadata_); }
  std::optional<std::string_view> metadata_value(std::string_view key) const noexcept;

 private:
  Header() = default;
  friend class HeaderBuilder;

  std::uint64_t header_size_ = 0;
  std::uint64_t data_size_ = 0;
  // Owns the header text (unescaped in place: the backing store of every TensorInfo::name and of the
  // metadata's keys and values), the tensors, their shapes and the metadata entries, which the spans
  // below view.
  std::shared_ptr<const void> storage_;
  const char* text_ = nullptr;
  std::span<const TensorInfo> tensors_;
  std::span<const MetadataView::Entry> metadata_;
  std::span<const std::uint64_t> index_;  // in storage_; open addressing: hash tag << 32 | position in tensors_ + 1 (0: empty)
  std::uint64_t index_seed_ = 0;
  bool has_metadata_ = false;
};

// One safetensors file (a path, a URL, or a member of an archive) as a TensorFile. Its TensorEntry list
// and its metadata are built on first use, so that open() costs no more than Header::parse.
class Reader final : public TensorFile {
 public:
  static Result<Reader> open(const std::string& path, FileBackend backend = FileBackend::Mmap, const ReadOptions& options = {});
  static Result<Reader> open(SourcePtr source, const ReadOptions& options = {});

  const Header& header() const noexcept { return *header_; }
  const ByteSource& source() const noexcept { return *source_; }
  const SourcePtr& source_ptr() const noexcept { return source_; }

  std::string_view format() const noexcept override { return "safetensors"; }
  const std::string& name() const noexcept override { return source_->name(); }
  std::span<const TensorEntry> tensors() const noexcept override;
  const TensorEntry* find(std::string_view name) const noexcept override;
  const Metadata* metadata() const noexcept override;

  // The tensor of a header record as every format describes it (safeweights/tensor_file.h), without
  // building the entry list: valid while this Reader lives.
  TensorEntry entry(const TensorInfo& info) const noexcept {
    return {info.name, info.dtype, info.shape, source_.get(), header_->data_start() + info.begin, info.nbytes()};
  }
  // Loading every tensor at once is the loader's (safeweights/loader.h): LoadPlan::make of this file,
  // then load_host or load_into.

 private:
  struct State;  // the Header and what is built from it on first use; shared by copies
  Reader(SourcePtr source, std::shared_ptr<State> state);
  SourcePtr source_;
  std::shared_ptr<State> state_;
  const Header* header_ = nullptr;  // in *state_
};

SAFEWEIGHTS_API_END
}  // namespace safeweights::safetensors
