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
// create() takes the tensors' names, dtypes and shapes up front and returns a TensorSink that takes their
// bytes one tensor (or chunk) at a time, in any order, so no more than one tensor need be in memory. It
// writes through an AtomicFile: the target appears only when finish() succeeds; on any error it is left
// untouched.
//
// Thread safety: Layout is an immutable value. A sink has a single owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <memory>
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

// A declaration with its bytes: {name, dtype, shape, data}. (A constructor rather than aggregate
// initialisation through the base, so the four-value braces read as they always have, warning-free.)
struct TensorData : TensorDecl {
  TensorData() = default;
  TensorData(std::string tensor_name, TensorType type, std::vector<std::uint64_t> dims, std::span<const std::byte> bytes)
      : TensorDecl{std::move(tensor_name), type, std::move(dims)}, data(bytes) {}
  std::span<const std::byte> data;  // little-endian, C order; size must match shape x dtype
};

// nullopt: no `__metadata__`; an empty vector: `"__metadata__":{}`.

class Layout {
 public:
  // DuplicateKey for repeated tensor names or metadata keys; ReservedTensorName for `__metadata__`;
  // ValidationOverflow / MisalignedSlice as the reader would report; HeaderTooLarge when the padded
  // header exceeds kMaxHeaderSize.
  static Result<Layout> plan(std::span<const TensorDecl> tensors, const std::optional<MetadataEntries>& metadata);

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

// The layout of these tensors, with each one's data length checked against its shape and dtype
// (InvalidTensorView otherwise, the reference writer's kind). Every writer of TensorData plans
// through this, so they all report the same kinds.
Result<Layout> plan_data(std::span<const TensorData> tensors, const std::optional<MetadataEntries>& metadata = {});
// Writes the whole file planned by plan_data() into dst (dst.size() == layout.file_size()).
void serialize_into(const Layout& layout, std::span<const TensorData> tensors, std::span<std::byte> dst);
// The whole file in memory.
Result<std::vector<std::byte>> serialize(std::span<const TensorData> tensors, const std::optional<MetadataEntries>& metadata = {});
// Writes the file atomically (temp file + rename).
Status write_file(const std::string& path, std::span<const TensorData> tensors, const std::optional<MetadataEntries>& metadata = {},
                  const WriteOptions& options = {});

// The safetensors TensorSink: creates `path` for the declared tensors (laid out by Layout::plan, in the
// reference's order whatever the order declared: the bytes of serialize(); the header is written now),
// takes their bytes in any order, whole or in chunks (copy_chunk in the kernel from a local file), and
// commits the file atomically on finish(). The refusals of Layout::plan, with the
// path; the sink's own (an undeclared name, a tensor written twice, wrong sizes, an incomplete tensor at
// finish) are InvalidArgument naming the path and the tensor. An unfinished sink leaves no file behind.
Result<std::unique_ptr<TensorSink>> create(const std::string& path, std::vector<TensorDecl> tensors,
                                           const std::optional<MetadataEntries>& metadata = {}, const WriteOptions& options = {});

SAFEWEIGHTS_API_END
}  // namespace safeweights::safetensors
