// Local-file ByteSources: a whole-file mapping, and positional reads for filesystems where mapping is
// slow or unsafe (NFS, Lustre, FUSE).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "io/posix_util.h"
#include "safeweights/source.h"

namespace safeweights {
namespace {

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// Opens `path` read-only and checks that it is a regular file. O_NONBLOCK makes opening a FIFO return
// at once instead of waiting for a writer; it has no effect on regular files.
Result<int> open_regular_file(const std::string& path, std::uint64_t* size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    ErrorKind kind = (err == ENOENT || err == ENOTDIR) ? ErrorKind::FileNotFound : ErrorKind::IoError;
    return Error(kind, "cannot open: " + errno_text(err)).with_file(path);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Error(ErrorKind::IoError, "cannot stat: " + errno_text(err)).with_file(path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error(ErrorKind::IoError, S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file")
        .with_file(path);
  }
  *size = static_cast<std::uint64_t>(st.st_size);
  return fd;
}

class PreadSource final : public ByteSource {
 public:
  PreadSource(std::string name, int fd, std::uint64_t size) : name_(std::move(name)), fd_(fd), size_(size) {}
  const std::string& name() const noexcept override { return name_; }
  std::uint64_t size() const noexcept override { return size_; }

  Status read_at(std::uint64_t offset, std::span<std::byte> dst) const override {
    SW_RETURN_IF_ERROR(check_range(offset, dst.size()));
    return pread_exact(fd_.get(), offset, dst, name_);
  }

  Status read_scatter(std::span<const ReadRequest> requests) const override {
    SW_RETURN_IF_ERROR(check_requests(requests));
    return pread_scatter(fd_.get(), requests, name_);
  }

  void hint(ByteRange range, AccessHint hint) const noexcept override {
    int advice = POSIX_FADV_NORMAL;
    switch (hint) {
      case AccessHint::Sequential: advice = POSIX_FADV_SEQUENTIAL; break;
      case AccessHint::Random: advice = POSIX_FADV_RANDOM; break;
      case AccessHint::WillNeed: advice = POSIX_FADV_WILLNEED; break;
      case AccessHint::DontNeed: advice = POSIX_FADV_DONTNEED; break;
      case AccessHint::Normal: break;
    }
    (void)::posix_fadvise(fd_.get(), static_cast<off_t>(range.offset), static_cast<off_t>(range.length), advice);
  }

 private:
  std::string name_;
  FileDescriptor fd_;
  std::uint64_t size_;
};

// Zero-copy views come from the mapping. Copies of large ranges (owned loads) go through pread on the
// kept descriptor instead: the kernel copies from the page cache without faulting the mapping in page
// by page, which is markedly faster for one-pass copies.
class MappedSource final : public ByteSource {
 public:
  MappedSource(std::string name, int fd, const std::byte* base, std::uint64_t size)
      : name_(std::move(name)), fd_(fd), base_(base), size_(size) {}
  ~MappedSource() override {
    if (size_ > 0) ::munmap(const_cast<std::byte*>(base_), static_cast<std::size_t>(size_));
  }
  const std::string& name() const noexcept override { return name_; }
  std::uint64_t size() const noexcept override { return size_; }
  const std::byte* mapped() const noexcept override { return base_; }

  Status read_at(std::uint64_t offset, std::span<std::byte> dst) const override {
    SW_RETURN_IF_ERROR(check_range(offset, dst.size()));
    if (dst.size() >= kPreadThreshold && fd_.get() >= 0) return pread_exact(fd_.get(), offset, dst, name_);
    if (!dst.empty()) std::memcpy(dst.data(), base_ + offset, dst.size());
    return Status::ok();
  }

  // Small runs are copied from the mapping; large ones, as in read_at, are read with pread, runs that
  // follow each other in the file with one preadv.
  Status read_scatter(std::span<const ReadRequest> requests) const override {
    SW_RETURN_IF_ERROR(check_requests(requests));
    std::vector<ReadRequest> large;
    for (const ReadRequest& r : requests) {
      if (r.dst.size() >= kPreadThreshold && fd_.get() >= 0) {
        large.push_back(r);
      } else if (!r.dst.empty()) {
        std::memcpy(r.dst.data(), base_ + r.offset, r.dst.size());
      }
    }
    return pread_scatter(fd_.get(), large, name_);
  }

  void hint(ByteRange range, AccessHint hint) const noexcept override {
    if (size_ == 0 || range.offset >= size_) return;
    int advice = MADV_NORMAL;
    switch (hint) {
      case AccessHint::Sequential: advice = MADV_SEQUENTIAL; break;
      case AccessHint::Random: advice = MADV_RANDOM; break;
      case AccessHint::WillNeed: advice = MADV_WILLNEED; break;
      case AccessHint::DontNeed: advice = MADV_DONTNEED; break;
      case AccessHint::Normal: break;
    }
    // madvise wants a page-aligned start.
    const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    std::uint64_t start = range.offset - range.offset % page;
    std::uint64_t end = range.length > size_ - range.offset ? size_ : range.offset + range.length;
    void* addr = const_cast<std::byte*>(base_) + start;
    const auto length = static_cast<std::size_t>(end - start);
#ifdef MADV_POPULATE_READ
    // About to read all of it: fill the page tables in one call (Linux 5.14+) instead of taking a
    // fault per page (or per 16 pages) while reading. Falls back to plain read-ahead advice.
    if (hint == AccessHint::WillNeed && ::madvise(addr, length, MADV_POPULATE_READ) == 0) return;
#endif
    (void)::madvise(addr, length, advice);
  }

 private:
  static constexpr std::size_t kPreadThreshold = 256u << 10;
  std::string name_;
  FileDescriptor fd_;
  const std::byte* base_;
  std::uint64_t size_;
};

// mmap(2) cannot map zero bytes; an empty file is "mapped" at a static address.
const std::byte kEmpty[1] = {};

}  // namespace

Result<SourcePtr> open_file(const std::string& path, FileBackend backend) {
  std::uint64_t size = 0;
  auto fd_or = open_regular_file(path, &size);
  if (!fd_or.is_ok()) return std::move(fd_or).status();
  int fd = fd_or.value();
  if (backend == FileBackend::Pread) return SourcePtr(std::make_shared<PreadSource>(path, fd, size));

  if (size == 0) return SourcePtr(std::make_shared<MappedSource>(path, fd, kEmpty, 0));
  if (size > static_cast<std::uint64_t>(SIZE_MAX)) {
    ::close(fd);
    return Error(ErrorKind::ResourceLimit, "file too large to map on this platform").with_file(path);
  }
  // Copy-on-write mappings reserve no swap up front (MAP_NORESERVE): only pages actually written are
  // charged, so mapping a file larger than RAM + swap still works as the read-only mapping does.
  const bool private_copy = backend == FileBackend::MmapPrivate;
  void* base = private_copy ? ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE | MAP_NORESERVE, fd, 0)
                            : ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    int err = errno;
    ::close(fd);
    return Error(ErrorKind::IoError, "cannot map: " + errno_text(err)).with_file(path);
  }
  return SourcePtr(std::make_shared<MappedSource>(path, fd, static_cast<const std::byte*>(base), size));
}

}  // namespace safeweights
