// A model written as several files (llama.cpp's split GGUF, transformers' sharded safetensors): where
// its tensors are cut into files, and the TensorSink that routes each tensor to the PlannedFileSink of
// its file and commits every file, then the index that names them, all or none. Internal.
//
// Thread safety: one owner, like every TensorSink.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/hash.h"
#include "model/planned_sink.h"
#include "safeweights/error.h"
#include "safeweights/tensor_file.h"

namespace safeweights {

// The first tensor of each file, in the given order: limits.starts when given (InvalidArgument unless
// it starts at 0 and increases within the tensors); else a tensor starts a new file when the current one
// already holds limits.max_tensors tensors or its bytes would pass limits.max_bytes; a tensor larger
// than max_bytes gets a file of its own (llama.cpp's gguf-split and transformers cut the same way).
// sizes[i] is what tensor i takes in a file, padding included. ValidationOverflow when a file's bytes
// overflow.
Result<std::vector<std::size_t>> plan_parts(std::span<const TensorDecl> tensors, std::span<const std::uint64_t> sizes, const SplitLimits& limits);

// A file a multi-file sink writes once every part is complete and commits after them (transformers'
// index, which must never name a shard that is not there). None when `path` is empty.
struct IndexFile {
  std::string path;
  std::string text;
  bool durable = false;
};

class MultiFileSink final : public TensorSink {
 public:
  // `parts` in file order. Their tensor names are unique across parts: the format's writer checks
  // that, with its own message, before it plans the parts. `display` names the output in errors.
  MultiFileSink(std::string display, std::vector<std::unique_ptr<PlannedFileSink>> parts, IndexFile index = {});

  Status write(std::string_view name, std::span<const std::byte> data) override;
  Status write_chunk(std::string_view name, std::span<const std::byte> chunk) override;
  Status copy_chunk(std::string_view name, const ByteSource& source, std::uint64_t offset, std::uint64_t length) override;
  // Every part complete first (else every part is discarded at once, as a single sink discards its
  // own); then the index file; then the renames in order, the index last, after one cancellation
  // check for the group. A failure in the middle removes the files already renamed, so the set is
  // never left partly written.
  Status finish() override;
  // The parts' paths in order, then the index's.
  std::span<const std::string> files() const noexcept override { return paths_; }

 private:
  Error finished_error() const;
  // The part tensor `name` is in.
  Result<PlannedFileSink*> part(std::string_view name);
  void abandon_all() noexcept;

  std::string display_;
  std::vector<std::unique_ptr<PlannedFileSink>> parts_;
  IndexFile index_;
  std::vector<std::string> paths_;
  // tensor name -> part; keys view the parts' declarations, which never move. Seeded: names come from input files.
  std::unordered_map<std::string_view, std::size_t, SeededHash> part_of_;
  bool finished_ = false;  // finish() was called: every later call is refused, as a single sink's is
};

}  // namespace safeweights
