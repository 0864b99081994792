// safeweights/source.h — ByteSource, the one input interface every parser reads through.
//
// A ByteSource is a read-only, random-access sequence of bytes of known size: a memory-mapped file, a
// file read with pread (for network filesystems, where page faults are slow), a buffer in memory, a
// sub-range of another source (an archive entry), an HTTP(S) resource read with Range requests
// (http.h). Parsers never assume the whole input is mapped: they ask for the bytes they need with
// read_at() / read_scatter() / read_ranges(), and take the zero-copy path only when mapped() is non-null.
//
// Thread safety: every ByteSource is immutable after construction; all methods may be called
// concurrently from any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/slice.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

struct ByteRange {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

// One run of a scatter read: the dst.size() bytes starting at `offset` go to `dst`.
struct ReadRequest {
  std::uint64_t offset = 0;
  std::span<std::byte> dst;
};

// DontNeed: this process is done with the range. A mapping drops its pages from the process (its
// resident memory falls; the page cache keeps them for other readers); a positional reader holds
// none, so it does nothing (it never evicts the file from the page cache).
enum class AccessHint { Normal, Sequential, Random, WillNeed, DontNeed };

class ByteSource {
 public:
  virtual ~ByteSource() = default;

  // What to call this input in messages: a path, a URL, "path!entry", "<memory>".
  virtual const std::string& name() const noexcept = 0;
  virtual std::uint64_t size() const noexcept = 0;

  // The address of byte 0 when all bytes are addressable in memory (mapped file, buffer), else null.
  // The bytes stay valid as long as this source (or a source sharing it) is alive.
  virtual const std::byte* mapped() const noexcept { return nullptr; }

  // Copies exactly dst.size() bytes starting at `offset` into dst. OutOfRange if the range does not
  // lie inside [0, size()); IoError if the underlying read fails or comes up short.
  virtual Status read_at(std::uint64_t offset, std::span<std::byte> dst) const = 0;

  // Reads every request's bytes into that request's destination. Requests may come in any order and
  // be empty; destinations must not overlap one another. Every request is checked first: OutOfRange
  // (and nothing read) if one does not lie inside [0, size()). IoError as read_at; after an error the
  // destinations' contents are unspecified. The default reads the requests one by one with read_at.
  // Overrides: file sources read runs that follow each other in the file with one preadv; the HTTP
  // source keeps several requests in flight, merges nearby runs and writes straight into dst.
  virtual Status read_scatter(std::span<const ReadRequest> requests) const;

  // read_scatter into consecutive parts of one buffer: range i goes to dst right after range i - 1.
  // InvalidArgument unless dst.size() equals the sum of the lengths.
  Status read_ranges(std::span<const ByteRange> ranges, std::span<std::byte> dst) const;

  // IoError when the file under this source is now shorter than size() (another process truncated it
  // while it was open); OK otherwise, and always for sources that are not files. Lets a caller whose
  // write from a mapped view failed (write(2) reports EFAULT for a page that no longer exists) blame
  // the input rather than the output.
  virtual Status check_not_truncated() const { return Status::ok(); }

  // Advice about an upcoming access pattern (madvise / posix_fadvise / prefetch). Never required.
  virtual void hint(ByteRange /*range*/, AccessHint /*hint*/) const noexcept {}

  // The open local file under this source, for readers that bypass it (O_DIRECT loads): a descriptor
  // valid as long as this source lives, and the file offset of this source's byte 0. nullopt for
  // memory, HTTP and transformed sources, and for files whose descriptor was not kept.
  struct FileRegion {
    int fd = -1;
    std::uint64_t offset = 0;
  };
  virtual std::optional<FileRegion> file_region() const noexcept { return std::nullopt; }

  // A zero-copy view of [offset, offset + length) when mapped() is non-null and the range is inside
  // the source; an empty span with data() == nullptr otherwise.
  std::span<const std::byte> view(std::uint64_t offset, std::uint64_t length) const noexcept;

  // Checks that [offset, offset + length) lies inside the source (with overflow-safe arithmetic).
  Status check_range(std::uint64_t offset, std::uint64_t length) const;
  // check_range of every request, in order: the first one outside the source is the error.
  Status check_requests(std::span<const ReadRequest> requests) const;
};

using SourcePtr = std::shared_ptr<const ByteSource>;

// Hands the bytes [offset, offset + length) of `source` to `sink`, in order: in one piece straight
// from the mapping when there is one, else in pieces of at most `chunk` bytes read into one reused
// buffer. Stops at the first error of the read or of the sink. A view of a mapping is meant for system
// calls (write, pwrite), which report a file truncated under it as an error (EFAULT) rather than a
// signal; when the sink fails and the source was truncated, the source's error is returned.
using ByteSink = std::function<Status(std::span<const std::byte>)>;
// The buffer for copying out of `source` through memory: 256 KiB for a local file whose descriptor is
// kept (file_region(); small enough to be still in the CPU cache when it is written out;
// docs/PERFORMANCE.md, "PyTorch checkpoints"), 8 MiB for any other (an HTTP source pays a request per
// read).
std::uint64_t copy_buffer_size(const ByteSource& source) noexcept;
Status copy_range(const ByteSource& source, std::uint64_t offset, std::uint64_t length, std::uint64_t chunk, const ByteSink& sink);

// Reads a slice plan's bytes (slice.h) from `source` into dst (dst.size() == plan.nbytes()), in result
// order.
Status read_slice(const ByteSource& source, const SlicePlan& plan, std::span<std::byte> dst);

// Hands the plan's bytes, in result order, to `sink` in pieces of at most `chunk` bytes read into one
// reused buffer: memory follows the chunk, not the slice (a slice of a huge tensor streams). Stops at
// the first error of the read or the sink; ResourceLimit when the buffer cannot be had; Interrupted
// (check_cancelled) between pieces.
Status copy_slice(const ByteSource& source, const SlicePlan& plan, std::uint64_t chunk, const ByteSink& sink);

// Memory sized by an input or a request. Every buffer the library sizes from what a file or a server
// declares, or from what a caller asks for, comes from these: a size beyond the budget, or an allocation
// that fails, is a ResourceLimit error naming what was wanted and how much, never an exception.
// The budget is the machine's physical memory, or SAFEWEIGHTS_MEMORY_LIMIT (bytes) when that is set
// lower (read once, on first use).
std::uint64_t memory_budget() noexcept;
// `size` zeroed bytes.
Result<std::vector<std::byte>> allocate_bytes(std::uint64_t size, std::string_view what);
// `size` bytes left uninitialised (a destination about to be overwritten in full).
Result<std::unique_ptr<std::byte[]>> allocate_uninitialized(std::uint64_t size, std::string_view what);

// How a local file is read.
enum class FileBackend {
  Mmap,   // map the whole file once; tensors are pointers into the mapping (default)
  Pread,  // positional reads into caller or owned memory; no mapping (NFS, Lustre, FUSE)
  // Mapped privately and writable, copy-on-write: whoever holds a view may write through it, and the
  // writes land in private copies of the touched pages, never in the file. For frameworks that have
  // no read-only tensors (torch), so that a caller's in-place update cannot fault or corrupt the
  // file. The library itself never writes through it.
  MmapPrivate,
};

// The mapping fault guard: a process-wide side effect, and how to opt out.
//
// A file that another process truncates while it is mapped makes a read past its new end raise SIGBUS.
// So that such a read is an IoError naming the file instead of the end of the process, the library
// installs a SIGBUS handler (sigaction, once, on the first read it makes from a mapping or from memory:
// an Mmap source, or a memory_source, whose bytes may be a caller's mapping) and runs each of its own
// such reads inside a guarded section the handler jumps out of. Faults outside a
// section (a view the caller holds, another library's mapping) are passed to the handler installed before
// ours, or end the process as they would have without us.
//
// A host that owns SIGBUS (a runtime with its own handler, a crash reporter) can opt out:
// set_mapping_fault_guard(false), or SAFEWEIGHTS_NO_FAULT_GUARD=1 in the environment (read once, when
// the library is loaded). Then no handler is installed, and a mapped file that shrinks under a read is SIGBUS
// for the process, as with any mmap (the Pread backend never maps, so it never faults). Turning the
// guard off after the handler was installed leaves the handler in place, passing every fault on.
void set_mapping_fault_guard(bool enabled) noexcept;
bool mapping_fault_guard() noexcept;

// Opens a regular file. FileNotFound when it does not exist; IoError for other failures (permission,
// a directory, a FIFO: only regular files are read, so a FIFO can never make us block).
Result<SourcePtr> open_file(const std::string& path, FileBackend backend = FileBackend::Mmap);

// A source over memory the caller owns. `keepalive`, when given, is held as long as the source is.
SourcePtr memory_source(std::span<const std::byte> bytes, std::string name = "<memory>", std::shared_ptr<const void> keepalive = nullptr);
// A source that owns its bytes.
SourcePtr owned_memory_source(std::vector<std::byte> bytes, std::string name = "<memory>");

// The bytes [offset, offset + length) of `parent`, as a source of its own (it keeps `parent` alive).
// Mapped when the parent is. OutOfRange when the range does not lie inside the parent.
Result<SourcePtr> subrange_source(SourcePtr parent, std::uint64_t offset, std::uint64_t length, std::string name);

SAFEWEIGHTS_API_END
}  // namespace safeweights
