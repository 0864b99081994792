#include "safeweights/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <random>

#include "core/strings.h"
#include "io/posix_util.h"

namespace safeweights {
namespace {

std::string base_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string random_suffix() {
  static std::atomic<std::uint64_t> counter{0};
  thread_local std::mt19937_64 rng(std::random_device{}() ^
                                   static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::uint64_t v = rng() ^ (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull) ^ static_cast<std::uint64_t>(::getpid());
  static const char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string s;
  for (int i = 0; i < 10; ++i) {
    s.push_back(kDigits[v % 36]);
    v /= 36;
  }
  return s;
}

}  // namespace

Result<AtomicFile> AtomicFile::create(const std::string& target, const AtomicFileOptions& options) {
  if (target.empty() || target.back() == '/') {
    return Error(ErrorKind::InvalidArgument, "output path must name a file").with_file(target);
  }
  const std::string folder = folder_of(target);
  const std::string base = base_of(target);

  // Keep the mode of a file we replace; a new file gets 0666 minus the umask from open(2) itself.
  struct stat existing {};
  const bool replacing = ::stat(target.c_str(), &existing) == 0;
  if (replacing && S_ISDIR(existing.st_mode)) {
    return Error(ErrorKind::IoError, "output path is a directory").with_file(target);
  }

  for (int attempt = 0; attempt < 16; ++attempt) {
    std::string temp = folder + "/." + base + ".sw-tmp-" + random_suffix();
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
      if (errno == EEXIST) continue;
      int err = errno;
      ErrorKind kind = err == ENOENT ? ErrorKind::FileNotFound : ErrorKind::IoError;
      return Error(kind, "cannot create a temporary file in " + folder + ": " + errno_text(err)).with_file(target);
    }
    AtomicFile file(target, temp, fd, options.durable);
    if (replacing && ::fchmod(fd, existing.st_mode & 07777) != 0) {
      return Error(ErrorKind::IoError, "cannot set file mode: " + errno_text(errno)).with_file(target);
    }
    if (options.preallocate > 0) {
      if (::fallocate(fd, 0, 0, static_cast<off_t>(options.preallocate)) != 0) {
        int err = errno;
        // Filesystems without fallocate still work; only a real shortage of space is an error.
        if (err != EOPNOTSUPP && err != ENOSYS && err != EINVAL) {
          return Error(ErrorKind::IoError, "cannot reserve " + std::to_string(options.preallocate) +
                                               " bytes: " + errno_text(err))
              .with_file(target);
        }
      }
    }
    return file;
  }
  return Error(ErrorKind::IoError, "cannot create a unique temporary file").with_file(target);
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : target_(std::move(other.target_)),
      temp_(std::move(other.temp_)),
      fd_(other.fd_),
      durable_(other.durable_),
      position_(other.position_) {
  other.fd_ = -1;
  other.temp_.clear();
}

AtomicFile& AtomicFile::operator=(AtomicFile&& other) noexcept {
  if (this != &other) {
    abandon();
    target_ = std::move(other.target_);
    temp_ = std::move(other.temp_);
    fd_ = other.fd_;
    durable_ = other.durable_;
    position_ = other.position_;
    other.fd_ = -1;
    other.temp_.clear();
  }
  return *this;
}

AtomicFile::~AtomicFile() { abandon(); }

void AtomicFile::abandon() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!temp_.empty()) {
    ::unlink(temp_.c_str());
    temp_.clear();
  }
}

Status AtomicFile::append(std::span<const std::byte> bytes) {
  SW_RETURN_IF_ERROR(pwrite(position_, bytes));
  position_ += bytes.size();
  return Status::ok();
}

Status AtomicFile::pwrite(std::uint64_t offset, std::span<const std::byte> bytes) {
  if (fd_ < 0) return Error(ErrorKind::InvalidArgument, "file already committed or abandoned").with_file(target_);
  auto status = pwrite_exact(fd_, offset, bytes, temp_);
  if (!status.is_ok()) status.error().with_file(target_);
  return status;
}

Status AtomicFile::truncate(std::uint64_t size) {
  if (fd_ < 0) return Error(ErrorKind::InvalidArgument, "file already committed or abandoned").with_file(target_);
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    return Error(ErrorKind::IoError, "cannot set file size: " + errno_text(errno)).with_file(target_);
  }
  return Status::ok();
}

Status AtomicFile::commit() {
  if (fd_ < 0) return Error(ErrorKind::InvalidArgument, "file already committed or abandoned").with_file(target_);
  if (durable_ && ::fdatasync(fd_) != 0) {
    return Error(ErrorKind::IoError, "fdatasync failed: " + errno_text(errno)).with_file(target_);
  }
  int fd = fd_;
  fd_ = -1;
  // close() can report delayed write errors (NFS, quotas): they must fail the commit.
  if (::close(fd) != 0) {
    return Error(ErrorKind::IoError, "close failed: " + errno_text(errno)).with_file(target_);
  }
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    return Error(ErrorKind::IoError, "cannot rename into place: " + errno_text(errno)).with_file(target_);
  }
  temp_.clear();
  if (durable_) {
    int dir = ::open(folder_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      (void)::fsync(dir);
      ::close(dir);
    }
  }
  return Status::ok();
}

}  // namespace safeweights
