// Local-file ByteSources: a whole-file mapping, and positional reads for filesystems where mapping is
// slow or unsafe (NFS, Lustre, FUSE).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/fault_guard.h"
#include "io/posix_util.h"
#include "io/read_util.h"
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

// What a file that is not a regular one is, for a message: "is a FIFO, not a regular file".
std::string not_regular(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory";
  const char* what = S_ISFIFO(mode)   ? "a FIFO"
                     : S_ISSOCK(mode) ? "a socket"
                     : S_ISCHR(mode)  ? "a character device"
                     : S_ISBLK(mode)  ? "a block device"
                                      : "special";
  return std::string("is ") + what + ", not a regular file";
}

// Opens `path` read-only and checks that it is a regular file. The type is checked with stat(2) before
// opening, so a device or FIFO is never opened (opening a device can act on it); O_NONBLOCK keeps a
// FIFO put in the file's place between the two from blocking the open, and fstat(2) checks what was
// opened.
Result<int> open_regular_file(const std::string& path, struct stat* info) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    struct stat link {};
    if (err == ENOENT && ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
      return Error(ErrorKind::FileNotFound, "is a dangling symbolic link").with_file(path);
    }
  } else if (!S_ISREG(st.st_mode)) {
    return Error(ErrorKind::IoError, not_regular(st.st_mode)).with_file(path);
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    ErrorKind kind = (err == ENOENT || err == ENOTDIR) ? ErrorKind::FileNotFound : ErrorKind::IoError;
    return Error(kind, "cannot open: " + errno_text(err)).with_file(path);
  }
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Error(ErrorKind::IoError, "cannot stat: " + errno_text(err)).with_file(path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error(ErrorKind::IoError, not_regular(st.st_mode)).with_file(path);
  }
  *info = st;
  return fd;
}

// IoError when the open file is now shorter than `size`, the size it had when it was opened.
Status check_file_size(int fd, std::uint64_t size, const std::string& name) {
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) >= size) return Status::ok();
  return Error(ErrorKind::IoError, "unexpected end of file: the file shrank from " + std::to_string(size) + " to " + std::to_string(st.st_size) +
                                       " bytes while it was read")
      .with_file(name);
}

// Sources keep their descriptor only while few are kept: a checkpoint of thousands of shards must not
// run the process out of descriptors. Beyond a quarter of the soft RLIMIT_NOFILE (at most 1024), a new
// mapped source closes its descriptor and serves every read from the mapping (which holds none), and a
// new pread source reopens its file for each read (checking that it is still the same file).
std::atomic<long> g_kept_descriptors{0};

bool may_keep_descriptor() {
  struct rlimit limit {};
  long cap = 1024;
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    cap = std::min<long>(cap, static_cast<long>(limit.rlim_cur / 4));
  }
  if (g_kept_descriptors.fetch_add(1) < cap) return true;
  g_kept_descriptors.fetch_sub(1);
  return false;
}

// A source's descriptor when the budget allows keeping it (counted until the source goes), else -1.
class KeptDescriptor {
 public:
  explicit KeptDescriptor(int fd) : fd_(fd >= 0 && may_keep_descriptor() ? fd : -1) {
    if (fd >= 0 && fd_ < 0) ::close(fd);
  }
  KeptDescriptor(const KeptDescriptor&) = delete;
  KeptDescriptor& operator=(const KeptDescriptor&) = delete;
  ~KeptDescriptor() {
    if (fd_ < 0) return;
    ::close(fd_);
    g_kept_descriptors.fetch_sub(1);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

class PreadSource final : public ByteSource {
 public:
  PreadSource(std::string name, int fd, const struct stat& info)
      : name_(std::move(name)), fd_(fd), size_(static_cast<std::uint64_t>(info.st_size)), dev_(info.st_dev), ino_(info.st_ino) {}
  const std::string& name() const noexcept override { return name_; }
  std::uint64_t size() const noexcept override { return size_; }

  Status read_at(std::uint64_t offset, std::span<std::byte> dst) const override {
    SW_RETURN_IF_ERROR(check_range(offset, dst.size()));
    return with_descriptor([&](int fd) { return pread_exact(fd, offset, dst, name_); });
  }

  Status read_scatter(std::span<const ReadRequest> requests) const override {
    SW_RETURN_IF_ERROR(check_requests(requests));
    return with_descriptor([&](int fd) { return pread_scatter(fd, requests, name_); });
  }

  Status check_not_truncated() const override {
    return with_descriptor([&](int fd) { return check_file_size(fd, size_, name_); });
  }

  std::optional<FileRegion> file_region() const noexcept override {
    if (fd_.get() < 0) return std::nullopt;
    return FileRegion{fd_.get(), 0};
  }

  void hint(ByteRange range, AccessHint hint) const noexcept override {
    int advice = POSIX_FADV_NORMAL;
    switch (hint) {
      case AccessHint::Sequential: advice = POSIX_FADV_SEQUENTIAL; break;
      case AccessHint::Random: advice = POSIX_FADV_RANDOM; break;
      case AccessHint::WillNeed: advice = POSIX_FADV_WILLNEED; break;
      // This process holds none of the bytes, so there is nothing to release: POSIX_FADV_DONTNEED
      // would evict the file from the page cache for everyone (a converted input read again, by us or
      // by the next command, would come from the disk).
      case AccessHint::DontNeed: return;
      case AccessHint::Normal: break;
    }
    if (fd_.get() >= 0) (void)::posix_fadvise(fd_.get(), static_cast<off_t>(range.offset), static_cast<off_t>(range.length), advice);
  }

 private:
  // Runs use(fd) on the kept descriptor, or on the file reopened for this one call.
  template <typename Use>
  Status with_descriptor(Use&& use) const {
    if (fd_.get() >= 0) return use(fd_.get());
    const int fd = ::open(name_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return Error(ErrorKind::IoError, "cannot reopen: " + errno_text(errno)).with_file(name_);
    FileDescriptor held(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_dev != dev_ || st.st_ino != ino_) {
      return Error(ErrorKind::IoError, "the file was replaced while it was open").with_file(name_);
    }
    return use(fd);
  }

  std::string name_;
  KeptDescriptor fd_;
  std::uint64_t size_;
  dev_t dev_;
  ino_t ino_;
};

// Zero-copy views come from the mapping. Copies of large ranges (owned loads) go through pread on the
// kept descriptor instead: the kernel copies from the page cache without faulting the mapping in page
// by page, which is markedly faster for one-pass copies.
class MappedSource final : public ByteSource {
 public:
  MappedSource(std::string name, int fd, const std::byte* base, std::uint64_t size) : name_(std::move(name)), fd_(fd), base_(base), size_(size) {}
  ~MappedSource() override {
    if (size_ > 0) ::munmap(const_cast<std::byte*>(base_), static_cast<std::size_t>(size_));
  }
  const std::string& name() const noexcept override { return name_; }
  std::uint64_t size() const noexcept override { return size_; }
  const std::byte* mapped() const noexcept override { return base_; }

  Status read_at(std::uint64_t offset, std::span<std::byte> dst) const override {
    SW_RETURN_IF_ERROR(check_range(offset, dst.size()));
    if (is_large(dst.size())) return pread_exact(fd_.get(), offset, dst, name_);
    return guarded_copy(dst.data(), base_ + offset, dst.size(), name_, offset);
  }

  // Small runs are copied from the mapping, all in one guarded section; large ones, as in read_at, are
  // read with pread, runs that follow each other in the file with one preadv.
  Status read_scatter(std::span<const ReadRequest> requests) const override {
    SW_RETURN_IF_ERROR(check_requests(requests));
    std::vector<ReadRequest> large;
    for (const ReadRequest& r : requests) {
      if (is_large(r.dst.size())) large.push_back(r);
    }
    SW_RETURN_IF_ERROR(copy_runs(base_, requests, pread_from(), name_));
    return pread_scatter(fd_.get(), large, name_);
  }

  Status check_not_truncated() const override { return check_file_size(fd_.get(), size_, name_); }

  std::optional<FileRegion> file_region() const noexcept override {
    if (fd_.get() < 0) return std::nullopt;
    return FileRegion{fd_.get(), 0};
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
  // Copies of at least this many bytes are read with pread (never, once the descriptor is gone).
  std::size_t pread_from() const noexcept { return fd_.get() >= 0 ? kPreadThreshold : SIZE_MAX; }
  bool is_large(std::size_t n) const noexcept { return n >= pread_from(); }
  std::string name_;
  KeptDescriptor fd_;
  const std::byte* base_;
  std::uint64_t size_;
};

// mmap(2) cannot map zero bytes; an empty file is "mapped" at a static address.
const std::byte kEmpty[1] = {};

}  // namespace

Result<SourcePtr> open_file(const std::string& path, FileBackend backend) {
  struct stat info {};
  auto fd_or = open_regular_file(path, &info);
  if (!fd_or.is_ok()) return std::move(fd_or).status();
  int fd = fd_or.value();
  if (backend == FileBackend::Pread) return SourcePtr(std::make_shared<PreadSource>(path, fd, info));

  const auto size = static_cast<std::uint64_t>(info.st_size);
  if (size == 0) {
    ::close(fd);  // nothing to read: no descriptor to keep
    return SourcePtr(std::make_shared<MappedSource>(path, -1, kEmpty, 0));
  }
  if (size > static_cast<std::uint64_t>(SIZE_MAX)) {
    ::close(fd);
    return Error(ErrorKind::ResourceLimit, "file too large to map on this platform").with_file(path);
  }
  // Copy-on-write mappings reserve no swap up front (MAP_NORESERVE): only pages actually written are
  // charged, so mapping a file larger than RAM + swap still works as the read-only mapping does.
  const bool private_copy = backend == FileBackend::MmapPrivate;
  void* base = private_copy ? ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0)
                            : ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    int err = errno;
    ::close(fd);
    return Error(ErrorKind::IoError, "cannot map: " + errno_text(err)).with_file(path);
  }
  return SourcePtr(std::make_shared<MappedSource>(path, fd, static_cast<const std::byte*>(base), size));
}

}  // namespace safeweights
