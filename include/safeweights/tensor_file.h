// safeweights/tensor_file.h — the format-neutral view of a file of tensors, and of a writer.
//
// Every reader exposes its tensors as TensorEntry values (name, type, shape, and where the bytes are:
// a ByteSource, an offset in it, a length) through a TensorFile, whatever the format: one safetensors
// file, a sharded checkpoint, a .safetensors entry of a DDUF archive, a GGUF file or split model, a
// PyTorch checkpoint. Every writer implements TensorSink: the tensors' names, types and shapes (and the
// file's metadata) are declared when the sink is created, then their bytes arrive one tensor or chunk at a
// time, in any order, and finish() commits the output atomically. Conversion between formats is
// TensorFile -> per-tensor transform -> TensorSink, so no format knows another.
//
// Thread safety: a TensorFile is immutable after it is opened; all const methods may be called
// concurrently, and entries, views and sources stay valid as long as the TensorFile lives. A
// TensorSink has a single owner.
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
#include "safeweights/metadata.h"
#include "safeweights/slice.h"
#include "safeweights/source.h"
#include "safeweights/tensor_type.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

// A tensor, as every reader describes it.
struct TensorEntry {
  std::string_view name;
  TensorType type;
  std::span<const std::uint64_t> shape;  // row-major: the innermost dimension last
  const ByteSource* source = nullptr;    // holds the bytes (owned by the TensorFile)
  std::uint64_t offset = 0;              // of the first byte, in `source`
  std::uint64_t nbytes = 0;

  std::uint64_t num_elements() const noexcept { return safeweights::num_elements(shape); }

  // The bytes without a copy when the source is mapped; an empty span with data() == nullptr otherwise.
  std::span<const std::byte> view() const noexcept;
  // Copies the bytes into dst (dst.size() == nbytes).
  Status read(std::span<std::byte> dst) const;
  // The bytes in memory of their own, allocated within the memory budget (allocate_bytes).
  Result<std::vector<std::byte>> read_owned() const;
  // Plans a slice (numpy basic indexing); the plan's offsets are absolute in `source`.
  Result<SlicePlan> plan_slice(const SliceSpec& spec) const;
  // Reads a plan of plan_slice() into dst (dst.size() == plan.nbytes()).
  Status read_slice(const SlicePlan& plan, std::span<std::byte> dst) const;
};

class TensorFile {
 public:
  virtual ~TensorFile() = default;

  // The registry name of the format ("safetensors", "safetensors-index", ...).
  virtual std::string_view format() const noexcept = 0;
  // What to call the file in messages: a path, a URL, "archive!entry".
  virtual const std::string& name() const noexcept = 0;
  // Every tensor, in the order of its bytes in storage.
  virtual std::span<const TensorEntry> tensors() const noexcept = 0;
  // nullptr when there is no tensor of that name.
  virtual const TensorEntry* find(std::string_view name) const noexcept = 0;
  // The file's metadata (safeweights/metadata.h: a string map's keys under `safetensors.`); nullptr when
  // the file has none (as opposed to an empty set).
  virtual const Metadata* metadata() const noexcept = 0;
  // Where inside the file the tensors were read from (a PyTorch checkpoint: the top-level key chosen);
  // empty: the whole file.
  virtual std::string_view root() const noexcept { return {}; }
  // The storage `entry` reads from: equal for two tensors that share bytes (PyTorch tied weights and
  // views); empty when the format has no shared storage (every tensor its own).
  virtual std::string_view storage_of(const TensorEntry&) const noexcept { return {}; }
  // Whether `entry` is a plain copy of its whole storage (contiguous, from its first byte to its last).
  virtual bool covers_storage(const TensorEntry&) const noexcept { return false; }

  // TensorNotFound (naming the file) when absent.
  Result<const TensorEntry*> tensor(std::string_view name) const;
};

// One piece of a tensor a plan assembles (ConvertTensor::pieces): an input tensor, or a slice of it
// along one dimension (dimensions counted from the outermost, as shapes are written in safetensors and
// PyTorch order): the indices begin, begin + step, ... below end (end 0: the dimension's size).
// A fused MoE gate_up_proj [E, 2F, D] gives its gate as dim 1, [0, F) and its up as [F, 2F); gpt-oss's
// interleaved halves are step 2 from 0 and from 1. The defaults (begin 0, end 0, step 1) take the whole
// tensor, a scalar included. convert() checks the slice against the tensor's shape (InvalidSliceSpec for
// a missing dimension or step 0, SliceOutOfRange for an empty or outside range) and cuts a block type
// only between blocks (InvalidBlockShape); each message names the piece by its index and source.
struct TensorPiece {
  std::string source;
  std::uint32_t dim = 0;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t step = 1;
};

// A tensor to write: which input tensor, under which name, and whether its rows are reordered the way
// llama.cpp's converter permutes attention Q/K weights for rotary embeddings (0: as stored; n: with n
// heads), the rows of the assembled tensor when `pieces` assemble it.
struct ConvertTensor {
  std::string source{};  // empty when `pieces` assemble the tensor
  std::string name{};
  std::uint32_t permute_heads = 0;
  // The inverse of that permutation, with permute_heads heads (required): rows in llama.cpp's (and
  // Meta's) interleaved rotary order back to transformers' (Meta's original checkpoints to a
  // transformers folder; transformers' permute() in convert_llama_weights_to_hf.py).
  bool unpermute = false;
  // Assembled from several input tensors, all of one type: the pieces joined along `join_dim` (their
  // shapes equal on every other dimension: Meta's model-parallel shards), or with `stack` stacked along
  // a new outermost dimension (their shapes equal: per-expert MoE tensors into [E, ...]). Streamed: the
  // output is written in its order, reading the pieces' rows as they are needed. A tensor has a source
  // or pieces, not both; a piece's source that is missing is TensorNotFound, pieces of different types
  // or shapes InvalidArgument, naming the piece. The report's note says "joined from N" or "stacked
  // from N".
  std::vector<TensorPiece> pieces{};
  std::uint32_t join_dim = 0;
  bool stack = false;
  // The plan's own type for this tensor, over the type asked for (llama.cpp keeps MoE routers F32 at any
  // --type), through the same policy (integers kept, 1-D F32) and the output format's fallbacks
  // (Format::stored_type, can_hold); none: the requested type.
  std::optional<TensorType> type{};
};

// What to write: a plan provider's answer (hf::plan), or a caller's own; convert() (convert.h) carries it
// out. Here, in the neutral model, so that a plan provider needs nothing of the pipeline.
struct ConvertPlan {
  std::vector<ConvertTensor> tensors;  // empty: every input tensor, same name, file order
  Metadata metadata;                   // set over the carried metadata (a key replaced in place, else appended)
};

// A tensor to be written: its declaration.
struct TensorDecl {
  std::string name;
  TensorType dtype;
  std::vector<std::uint64_t> shape;
};

class TensorSink {
 public:
  virtual ~TensorSink() = default;  // an unfinished sink leaves nothing behind

  // A whole tensor (any order). InvalidArgument when the name is unknown, already written, or the
  // size is wrong.
  virtual Status write(std::string_view name, std::span<const std::byte> data) = 0;
  // Part of a tensor: chunks of one tensor come in order, starting at 0, without gaps.
  virtual Status write_chunk(std::string_view name, std::span<const std::byte> chunk) = 0;
  // The next chunk of a tensor, taken from bytes [offset, offset + length) of `source`: the same as
  // write_chunk of those bytes. The default reads them through one buffer (copy_buffer_size) or hands
  // over a mapping's view; the file writers override it to copy in the kernel when the source is a local
  // file (AtomicFile::copy_from).
  virtual Status copy_chunk(std::string_view name, const ByteSource& source, std::uint64_t offset, std::uint64_t length);
  // InvalidArgument if any tensor is incomplete; otherwise commits the output.
  virtual Status finish() = 0;
  // The files finish() commits, in order (one, or a split model's files).
  virtual std::span<const std::string> files() const noexcept = 0;
};

// Where a model written as several files is cut (GGUF: llama.cpp's split files; safetensors-index: the
// shards). 0: no limit.
struct SplitLimits {
  std::uint64_t max_bytes = 0;    // tensor bytes per file
  std::uint64_t max_tensors = 0;  // tensors per file
  // The cut itself, over the limits: the index of each file's first tensor in declaration order (0
  // first, increasing), as ConvertOptions::keep_split keeps an input's.
  std::vector<std::size_t> starts{};
  bool enabled() const noexcept { return max_bytes != 0 || max_tensors != 0 || !starts.empty(); }
};

// How a writer creates its output; a format ignores what it has no use for, and refuses what it cannot do.
struct WriteOptions {
  bool durable = false;         // fsync before the rename
  std::uint32_t alignment = 0;  // GGUF: the data alignment, a power of two; 0: the metadata's general.alignment, else 32
  SplitLimits split;            // GGUF's split files, safetensors-index's shards; a one-file format refuses it
};

// Copies one tensor's stored bytes into `to` as tensor `name` (declared with its type and shape)
// with copy_chunk: in the kernel between local files, else through one bounded buffer.
Status copy_tensor(const TensorEntry& entry, std::string_view name, TensorSink& to);
// copy_tensor of every tensor of `from` under its own name, then finish().
Status copy_tensors(const TensorFile& from, TensorSink& to);

SAFEWEIGHTS_API_END
}  // namespace safeweights
