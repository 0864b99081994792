// safeweights/loader.h — loading tensors into memory at the speed of the hardware.
//
// A load has two steps. LoadPlan::make() decides where every tensor goes in one destination buffer and
// cuts the reading into large chunks; then a loader moves the bytes: load_into() / load_host() into host
// memory (the caller's or an owned allocation), or load_to_device() (safeweights/device.h) into device
// memory through pinned staging buffers. The plan is format-neutral: it takes TensorEntry values, so
// the tensors may come from one file, shards, DDUF entries, GGUF files or converted PyTorch checkpoints.
//
// Placement. Tensors that are dense in their file keep the file's layout: the destination holds the
// file's bytes from the first tensor (rounded down to a 4 KiB boundary) to the last, so the whole
// range is read with a few large reads and a tensor keeps its file offset modulo 4096 (its alignment).
// Other tensors (a sparse subset, a tensor whose file offset is not a multiple of its element size,
// a tensor-parallel shard) are packed, each at a 64-byte boundary. PlacedTensor says where each landed.
//
// Reading. Chunks are read on the shared thread pool (one thread per core by default), with positional
// reads (pread: from the page cache) or O_DIRECT reads (from the disk, bypassing the page cache);
// ReadMode::Auto picks O_DIRECT when most of the file is not in the page cache, and falls back to pread
// where O_DIRECT is refused (tmpfs, some network file systems) or for pieces that are not 4 KiB aligned.
//
// Tensor parallelism. With LoaderOptions::shard = {dim, rank, world}, every tensor with more than `dim`
// dimensions and at least `world` rows along `dim` is split along it as numpy.array_split does, and
// only this rank's part is read; the other tensors are read whole (replicated).
//
// Memory. The owned destination comes from allocate_uninitialized: load_host fails with ResourceLimit,
// before allocating, when the plan needs more than LoaderOptions::memory_limit or the process's memory
// budget (the smaller when both are set); loading itself allocates only small bookkeeping. A failed load leaves the caller's
// buffer with unspecified contents and frees what it took.
//
// Thread safety: a LoadPlan is immutable and may be used by several loads at once; it refers to the
// entries' sources, which must outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/slice.h"
#include "safeweights/tensor_file.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

enum class ReadMode : std::uint8_t {
  Auto,    // O_DIRECT when most of the data is not in the page cache, else pread
  Pread,   // positional reads through the page cache
  Direct,  // O_DIRECT where the file system allows it (pread where it does not)
};

// Tensor-parallel slicing: this process is `rank` of `world` and takes its part along `dim`.
struct TensorShard {
  unsigned dim = 0;
  std::uint64_t rank = 0;
  std::uint64_t world = 1;
};

struct LoaderOptions {
  unsigned threads = 0;           // 0: one per core
  std::uint64_t chunk_bytes = 0;  // 0: 16 MiB; rounded up to a multiple of 4 KiB
  ReadMode read = ReadMode::Auto;
  std::optional<TensorShard> shard;  // tensor-parallel loading
  std::uint64_t memory_limit = 0;    // load_host: the most host memory the destination may take (0: the
                                     // process's memory budget, memory_budget())
};

// Where one tensor landed in the destination.
struct PlacedTensor {
  TensorEntry entry;                 // the source tensor
  std::vector<std::uint64_t> shape;  // its shape, or its shard's
  std::uint64_t offset = 0;          // of its first byte in the destination
  std::uint64_t nbytes = 0;          // its bytes (or its shard's)
  bool sharded = false;              // only this rank's part was read
};

// One read of a plan: `length` bytes of `source` at `offset` to destination offset `dst`; or, when
// `tensor` >= 0, rows [row_begin, row_end) (along dimension 0) of that placed tensor's shard.
struct LoadChunk {
  const ByteSource* source = nullptr;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint64_t dst = 0;
  std::int64_t tensor = -1;
  std::uint64_t row_begin = 0;
  std::uint64_t row_end = 0;
};

class LoadPlan {
 public:
  // Every tensor of `file`, or the given entries (in that order; their sources must outlive the plan).
  static Result<LoadPlan> make(const TensorFile& file, const LoaderOptions& options = {});
  static Result<LoadPlan> make(std::span<const TensorEntry> entries, const LoaderOptions& options = {});

  std::span<const PlacedTensor> tensors() const noexcept { return tensors_; }
  std::span<const LoadChunk> chunks() const noexcept { return chunks_; }
  // Bytes of the destination (a multiple of 64).
  std::uint64_t size() const noexcept { return size_; }
  // Bytes the chunks read (the tensors plus the gaps between dense tensors).
  std::uint64_t read_bytes() const noexcept { return read_bytes_; }
  // Bytes at the start of the destination that hold the tensors read whole (all of it without a
  // shard): their placement and chunks do not depend on the shard's rank, so every rank of a shard
  // world lays out [0, replicated_size()) the same way. Shard parts come after it.
  std::uint64_t replicated_size() const noexcept { return replicated_size_; }
  std::uint64_t chunk_bytes() const noexcept { return chunk_bytes_; }
  const LoaderOptions& options() const noexcept { return options_; }
  // The slice of a sharded tensor's rows that a chunk with tensor >= 0 reads.
  SliceSpec shard_spec(const LoadChunk& chunk) const;

 private:
  friend class PlanBuilder;
  friend class GroupPlan;
  std::vector<PlacedTensor> tensors_;
  std::vector<LoadChunk> chunks_;
  std::uint64_t size_ = 0;
  std::uint64_t read_bytes_ = 0;
  std::uint64_t replicated_size_ = 0;
  std::uint64_t chunk_bytes_ = 0;
  LoaderOptions options_;
};

// Host memory holding a plan's destination; tensor i's bytes are at plan.tensors()[i].offset.
struct HostLoad {
  std::shared_ptr<std::byte[]> buffer;
  std::uint64_t size = 0;
  std::span<const std::byte> bytes_of(const PlacedTensor& t) const noexcept { return {buffer.get() + t.offset, static_cast<std::size_t>(t.nbytes)}; }
};

// Reads the plan into dst (dst.size() == plan.size(); InvalidArgument otherwise). Bytes of dst that no
// tensor covers (alignment padding) are left as they were.
Status load_into(const LoadPlan& plan, std::span<std::byte> dst);
// The same into an owned allocation (ResourceLimit, before allocating, beyond LoaderOptions::memory_limit
// or the memory budget).
Result<HostLoad> load_host(const LoadPlan& plan);

SAFEWEIGHTS_API_END
}  // namespace safeweights
