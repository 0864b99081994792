// Chunk reads for the loaders: pread, O_DIRECT, shard slices (chunk_reader.h).
#include "load/chunk_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <thread>

#include "core/status_macros.h"

namespace safeweights::load {
namespace {

constexpr std::uint64_t kDirectMinimum = 64u << 20;
// O_DIRECT descriptors a load opens at most (one per file; a model of thousands of shards must not
// exhaust the descriptor limit): the files beyond are read with pread.
constexpr std::size_t kMaxDirectFiles = 64;

// A descriptor for O_DIRECT reads of the same open file (not of whatever now has its path): reopened
// through /proc/self/fd. -1 when the file system refuses O_DIRECT.
int open_direct(int fd) {
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  return ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
}

}  // namespace

double resident_share(const ByteSource& source, std::uint64_t offset, std::uint64_t length) {
  const auto region = source.file_region();
  if (length == 0 || !region) return 1.0;
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t start = region->offset + offset;
  const std::uint64_t first = start - start % page;
  const std::uint64_t pages = (start + length - first + page - 1) / page;
  // A mapping of our own (mincore needs one; creating it faults nothing in), asked about a sample of
  // evenly spaced pages: asking about every page of a large file costs more than a fast load.
  const std::size_t span = static_cast<std::size_t>(pages * page);
  void* map = ::mmap(nullptr, span, PROT_READ, MAP_SHARED, region->fd, static_cast<off_t>(first));
  if (map == MAP_FAILED) return 1.0;
  constexpr std::uint64_t kSamples = 256;
  const std::uint64_t step = std::max<std::uint64_t>(1, pages / kSamples);
  std::uint64_t asked = 0, in = 0;
  for (std::uint64_t p = 0; p < pages; p += step) {
    unsigned char resident = 0;
    if (::mincore(static_cast<char*>(map) + p * page, static_cast<std::size_t>(page), &resident) != 0) break;
    ++asked;
    in += resident & 1;
  }
  ::munmap(map, span);
  return asked == 0 ? 1.0 : static_cast<double>(in) / static_cast<double>(asked);
}

ChunkReader::ChunkReader(const LoadPlan& plan) : plan_(plan) {
  const ReadMode mode = plan.options().read;
  if (mode == ReadMode::Pread) return;
  // Bytes to read per source, and where they start and end.
  struct Extent {
    std::uint64_t begin = UINT64_MAX, end = 0, bytes = 0;
  };
  std::unordered_map<const ByteSource*, Extent> extents;
  for (const LoadChunk& c : plan.chunks()) {
    if (c.tensor >= 0) continue;
    Extent& e = extents[c.source];
    e.begin = std::min(e.begin, c.offset);
    e.end = std::max(e.end, c.offset + c.length);
    e.bytes += c.length;
  }
  for (const auto& [source, e] : extents) {
    const auto region = source->file_region();
    if (!region || direct_fds_.size() >= kMaxDirectFiles) continue;
    if (mode == ReadMode::Auto && (e.bytes < kDirectMinimum || resident_share(*source, e.begin, e.end - e.begin) >= 0.5)) continue;
    const int fd = open_direct(region->fd);
    if (fd >= 0) direct_fds_.emplace(source, fd);
  }
}

ChunkReader::~ChunkReader() {
  for (const auto& [source, fd] : direct_fds_) ::close(fd);
}

Status ChunkReader::read(const LoadChunk& chunk, std::span<std::byte> dst) const {
  if (chunk.tensor >= 0) {
    const PlacedTensor& t = plan_.tensors()[static_cast<std::size_t>(chunk.tensor)];
    auto slice = t.entry.plan_slice(plan_.shard_spec(chunk));
    if (!slice.is_ok()) return error_of(slice).with_tensor(t.entry.name);
    return read_slice(*chunk.source, *slice, dst);
  }
  auto it = direct_fds_.find(chunk.source);
  if (it != direct_fds_.end()) return read_direct(it->second, chunk.source->file_region()->offset + chunk.offset, chunk, dst);
  return chunk.source->read_at(chunk.offset, dst);
}

unsigned loader_threads(const LoaderOptions& options) {
  if (options.threads != 0) return options.threads;
  return std::max(1u, std::thread::hardware_concurrency());
}

std::optional<ByteSource::FileRegion> ChunkReader::file_of(const ByteSource* source) const {
  auto region = source->file_region();
  if (!region) return std::nullopt;
  if (auto it = direct_fds_.find(source); it != direct_fds_.end()) region->fd = it->second;
  return region;
}

// The whole blocks with O_DIRECT when the file offset and the destination line up, the rest (or all
// of it, when they do not) with pread. A read that O_DIRECT refuses (EINVAL: alignment rules stricter
// than 4 KiB) is retried with pread.
Status ChunkReader::read_direct(int fd, std::uint64_t file_offset, const LoadChunk& chunk, std::span<std::byte> dst) const {
  const bool lined_up = file_offset % kDirectAlign == 0 && reinterpret_cast<std::uintptr_t>(dst.data()) % kDirectAlign == 0;
  std::uint64_t done = 0;
  if (lined_up) {
    const std::uint64_t whole = dst.size() - dst.size() % kDirectAlign;
    while (done < whole) {
      const ssize_t n = ::pread(fd, dst.data() + done, static_cast<std::size_t>(whole - done), static_cast<off_t>(file_offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || n % static_cast<ssize_t>(kDirectAlign) != 0) break;  // the pread below finishes or reports it
      done += static_cast<std::uint64_t>(n);
    }
  }
  direct_bytes_ += done;
  if (done == dst.size()) return Status::ok();
  return chunk.source->read_at(chunk.offset + done, dst.subspan(static_cast<std::size_t>(done)));
}

}  // namespace safeweights::load
