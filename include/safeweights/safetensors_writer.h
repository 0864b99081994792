// safeweights/safetensors_writer.h — writing safetensors files byte-identical to the reference.
//
// Layout::plan() decides everything before a byte is written: tensors ordered by dtype (the
// reference's enum order, descending) then by name, consecutive data offsets, and the header JSON
// exactly as the reference's serde_json writes it (compact, `__metadata__` first, fields
// dtype/shape/data_offsets, serde_json string escaping), padded with spaces to a multiple of 8.
// Metadata keys are written sorted (the reference writes them in random hash order, so sorted is the
// deterministic choice). Where the reference writes unreadable files we write valid ones: empty
// metadata with no tensors becomes `{"__metadata__":{}}`, and a tensor named `__metadata__` is refused.
//
// StreamWriter takes the tensors' names, dtypes and shapes up front and their bytes one tensor (or
// chunk) at a time, in any order, so no more than one tensor need be in memory. It writes through an
// AtomicFile: the target appears only when finish() succeeds; on any error it is left untouched.
//
// Thread safety: Layout is an immutable value. A StreamWriter has a single owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "safeweights/atomic_file.h"
#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/safetensors.h"
#include "safeweights/tensor_type.h"

namespace safeweights::safetensors {
SAFEWEIGHTS_API_BEGIN

using safeweights::TensorDecl;  // tensor_file.h: one declaration type for every writer

struct TensorData {
  std::string name;
  TensorType dtype;
  std::vector<std::uint64_t> shape;
  std::span<const std::byte> data;  // little-endian, C order; size must match shape x dtype
};

// nullopt: no `__metadata__`; an empty vector: `"__metadata__":{}`.
using Metadata = std::optional<MetadataEntries>;

class Layout {
 public:
  // DuplicateKey for repeated tensor names or metadata keys; ReservedTensorName for `__metadata__`;
  // ValidationOverflow / MisalignedSlice as the reader would report; HeaderTooLarge when the padded
  // header exceeds kMaxHeaderSize.
  static Result<Layout> plan(std::span<const TensorDecl> tensors, const Metadata& metadata);

  // The first 8 + N bytes of the file: length prefix, JSON, padding.
  const std::string& prefix() const noexcept { return prefix_; }
  std::uint64_t header_size() const noexcept { return prefix_.size() - 8; }
  std::uint64_t data_size() const noexcept { return data_size_; }
  std::uint64_t file_size() const noexcept { return prefix_.size() + data_size_; }

  struct Placement {
    std::size_t decl;     // index into the declarations passed to plan()
    std::uint64_t begin;  // data offset
    std::uint64_t end;
  };
  // In file order.
  const std::vector<Placement>& placements() const noexcept { return placements_; }
  // Placement of the declaration with this index.
  const Placement& placement_of(std::size_t decl) const noexcept { return placements_[by_decl_[decl]]; }

 private:
  std::string prefix_;
  std::uint64_t data_size_ = 0;
  std::vector<Placement> placements_;
  std::vector<std::size_t> by_decl_;
};

struct WriteOptions {
  bool durable = false;  // fsync file and folder before the rename
};

// The layout of these tensors, with each one's data length checked against its shape and dtype
// (InvalidTensorView otherwise, the reference writer's kind). Every writer of TensorData plans
// through this, so they all report the same kinds.
Result<Layout> plan_data(std::span<const TensorData> tensors, const Metadata& metadata = {});
// Writes the whole file planned by plan_data() into dst (dst.size() == layout.file_size()).
void serialize_into(const Layout& layout, std::span<const TensorData> tensors, std::span<std::byte> dst);
// The whole file in memory.
Result<std::vector<std::byte>> serialize(std::span<const TensorData> tensors, const Metadata& metadata = {});
// Writes the file atomically (temp file + rename).
Status write_file(const std::string& path, std::span<const TensorData> tensors,
                  const Metadata& metadata = {}, const WriteOptions& options = {});

// The safetensors TensorSink.
class StreamWriter final : public TensorSink {
 public:
  static Result<StreamWriter> create(const std::string& path, std::vector<TensorDecl> tensors,
                                     const Metadata& metadata = {}, const WriteOptions& options = {});

  StreamWriter(StreamWriter&&) noexcept = default;
  StreamWriter& operator=(StreamWriter&&) noexcept = default;
  ~StreamWriter() override = default;  // an unfinished writer leaves no file behind

  // A whole tensor (any order). InvalidArgument when the name is unknown, already written, or the
  // size is wrong.
  Status write(std::string_view name, std::span<const std::byte> data) override;
  // Part of a tensor: chunks of one tensor must come in order, starting at 0, without gaps.
  Status write_chunk(std::string_view name, std::span<const std::byte> chunk) override;
  // In the kernel when `source` is a local file (AtomicFile::copy_from).
  Status copy_chunk(std::string_view name, const ByteSource& source, std::uint64_t offset, std::uint64_t length) override;
  // InvalidArgument if any tensor is incomplete; otherwise commits the file.
  Status finish() override;

  const Layout& layout() const noexcept { return layout_; }

 private:
  StreamWriter(AtomicFile file, std::vector<TensorDecl> decls, Layout layout);
  Result<std::size_t> lookup(std::string_view name) const;
  // The index of tensor `name` and the file offset where its next `length` bytes go, checked.
  Result<std::pair<std::size_t, std::uint64_t>> next_chunk(std::string_view name, std::uint64_t length);

  AtomicFile file_;
  std::vector<TensorDecl> decls_;
  Layout layout_;
  std::vector<std::uint64_t> written_;  // bytes written per declaration
  // name -> declaration; views into decls_, whose strings never move (built on first use).
  mutable std::unordered_map<std::string_view, std::size_t> by_name_;
  bool finished_ = false;
};

SAFEWEIGHTS_API_END
}  // namespace safeweights::safetensors
