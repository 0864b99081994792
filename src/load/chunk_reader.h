// Reads the chunks of a LoadPlan into memory: positional reads through the page cache, or O_DIRECT
// reads from the disk, and slices for tensor-parallel shards. Internal to the loaders.
//
// O_DIRECT needs the file offset, the destination address and the length to be multiples of the
// logical block size (4 KiB covers every common device); a chunk is read directly up to its last whole
// block when its file offset and destination line up, and the rest with pread. A file system that
// refuses O_DIRECT (tmpfs, some network and FUSE file systems) is read with pread instead.
//
// Thread safety: read() may be called from many threads at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>

#include "safeweights/loader.h"

namespace safeweights::load {

inline constexpr std::uint64_t kDirectAlign = 4096;

// Threads a load runs on: LoaderOptions::threads, or one per core.
unsigned loader_threads(const LoaderOptions& options);

class ChunkReader {
 public:
  // Decides the read mode (ReadMode::Auto: O_DIRECT when less than half of the data is in the page
  // cache and there are at least 64 MiB to read) and opens the O_DIRECT descriptors it needs.
  explicit ChunkReader(const LoadPlan& plan);
  ~ChunkReader();
  ChunkReader(const ChunkReader&) = delete;
  ChunkReader& operator=(const ChunkReader&) = delete;

  // Reads chunk into dst (dst.size() == chunk.length).
  Status read(const LoadChunk& chunk, std::span<std::byte> dst) const;
  // Whether any source is read with O_DIRECT.
  bool direct() const noexcept { return !direct_fds_.empty(); }
  // Bytes read with O_DIRECT so far (the rest of a direct source's bytes went through pread: pieces
  // whose file offset or destination is not 4 KiB aligned, and reads O_DIRECT refused).
  std::uint64_t direct_bytes() const noexcept { return direct_bytes_.load(); }
  // The descriptor `source` is read through (its O_DIRECT one when it is read directly) and the file
  // offset of its first byte; nullopt for a source that is not a region of a local file.
  std::optional<ByteSource::FileRegion> file_of(const ByteSource* source) const;

 private:
  Status read_direct(int fd, std::uint64_t file_offset, const LoadChunk& chunk, std::span<std::byte> dst) const;

  const LoadPlan& plan_;
  std::unordered_map<const ByteSource*, int> direct_fds_;  // O_DIRECT descriptor per source
  mutable std::atomic<std::uint64_t> direct_bytes_{0};
};

// Share of the pages of [offset, offset + length) of `source` that are in the page cache (1 when it
// cannot be told: memory, HTTP).
double resident_share(const ByteSource& source, std::uint64_t offset, std::uint64_t length);

}  // namespace safeweights::load
