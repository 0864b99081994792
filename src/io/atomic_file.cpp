#include "safeweights/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <utility>

#include "core/status_macros.h"
#include "core/strings.h"
#include "io/nameless.h"
#include "io/posix_util.h"
#include "safeweights/cancel.h"

namespace safeweights {
namespace {

// ---- the registry of named temporary files, for signal handlers --------------------------------------
// Fixed storage so that a handler touches no allocator: a slot is free (0), being filled (1) or holds a
// live name (2). A name longer than a slot, or more live names than slots, goes unregistered (it is
// still removed on every ordinary path; only a signal could leave it).
constexpr std::size_t kSlots = 128;
constexpr std::size_t kSlotBytes = 4096;
struct Slot {
  std::atomic<int> state{0};
  char path[kSlotBytes];
};
std::array<Slot, kSlots> g_slots;
static_assert(std::atomic<int>::is_always_lock_free);

int register_name(const std::string& path) noexcept {
  if (path.size() >= kSlotBytes) return -1;
  for (std::size_t i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (g_slots[i].state.compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
      std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
      g_slots[i].state.store(2, std::memory_order_release);
      return static_cast<int>(i);
    }
  }
  return -1;
}

void unregister_name(int slot) noexcept {
  if (slot >= 0) g_slots[static_cast<std::size_t>(slot)].state.store(0, std::memory_order_release);
}

extern "C" void cleanup_and_die(int sig) {
  const int saved = errno;
  remove_uncommitted_files();
  // SA_RESETHAND restored the default action; the signal, blocked while we run, is delivered on return.
  ::raise(sig);
  errno = saved;
}

// ---- names -------------------------------------------------------------------------------------------

std::string base_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string random_suffix() {
  static std::atomic<std::uint64_t> counter{0};
  thread_local std::mt19937_64 rng(std::random_device{}() ^ static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::uint64_t v = rng() ^ (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull) ^ static_cast<std::uint64_t>(::getpid());
  static const char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string s;
  for (int i = 0; i < 10; ++i) {
    s.push_back(kDigits[v % 36]);
    v /= 36;
  }
  return s;
}

std::string temp_name_for(const std::string& target) { return folder_of(target) + "/." + base_of(target) + ".sw-tmp-" + random_suffix(); }

Error create_error(int err, const std::string& folder, const std::string& target) {
  ErrorKind kind = err == ENOENT ? ErrorKind::FileNotFound : ErrorKind::IoError;
  return Error(kind, "cannot create a temporary file in " + folder + ": " + errno_text(err)).with_file(target);
}

// What an existing target that is neither a regular file nor a folder is, in words.
const char* special_kind(mode_t mode) {
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// What a streaming writer writes into in place: a byte stream's endpoints.
bool streamable(mode_t mode) { return S_ISCHR(mode) || S_ISFIFO(mode); }

Error special_target_error(mode_t mode, const std::string& target) {
  return Error(ErrorKind::UnsafePath,
               std::string("the output is ") + special_kind(mode) + ", not a regular file: it is never replaced by one (name a regular file)")
      .with_file(target);
}

// The name an existing regular file is committed under: the target itself, or the file a symbolic link
// there resolves to, so that the link stays a link.
Result<std::string> destination_of(const std::string& target) {
  struct stat link {};
  if (::lstat(target.c_str(), &link) != 0 || !S_ISLNK(link.st_mode)) return target;
  char* resolved = ::realpath(target.c_str(), nullptr);
  if (resolved == nullptr) return Error(ErrorKind::IoError, "cannot resolve the symbolic link: " + errno_text(errno)).with_file(target);
  std::string destination(resolved);
  std::free(resolved);
  return destination;
}

void sync_folder(const std::string& target) {
  int dir = ::open(folder_of(target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
}

}  // namespace

bool nameless_files_allowed() {
  const char* v = std::getenv("SAFEWEIGHTS_NAMED_TEMPFILES");
  return v == nullptr || *v == '\0' || std::strcmp(v, "0") == 0;
}

int open_nameless(int dirfd, const std::string& folder) { return ::openat(dirfd, folder.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666); }

// Kernels or filesystems without O_TMPFILE say so with one of these (before 3.11 the flag reads as
// O_DIRECTORY, hence EISDIR).
bool nameless_unsupported(int err) { return err == EOPNOTSUPP || err == EISDIR || err == EINVAL || err == ENOSYS; }

// /proc/self/fd works unprivileged; AT_EMPTY_PATH (needs CAP_DAC_READ_SEARCH) covers a missing /proc.
int link_nameless(int fd, int dirfd, const std::string& name) {
  char proc[48];
  std::snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  if (::linkat(AT_FDCWD, proc, dirfd, name.c_str(), AT_SYMLINK_FOLLOW) == 0) return 0;
  if (errno == EEXIST) return -1;
  const int first = errno;
  if (::linkat(fd, "", dirfd, name.c_str(), AT_EMPTY_PATH) == 0) return 0;
  if (errno != EEXIST) errno = first;
  return -1;
}

void remove_uncommitted_files() noexcept {
  for (Slot& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) == 2) ::unlink(slot.path);
  }
}

void install_cleanup_signal_handlers() noexcept {
  struct sigaction sa {};
  sa.sa_handler = cleanup_and_die;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
}

Result<AtomicFile> AtomicFile::create(const std::string& target, const AtomicFileOptions& options) {
  if (target.empty() || target.back() == '/') {
    return Error(ErrorKind::InvalidArgument, "output path must name a file").with_file(target);
  }
  // What the target is decides (links followed): see the header. Keep the mode of a file we replace; a
  // new file gets 0666 minus the umask from open(2) itself.
  struct stat existing {};
  const bool replacing = ::stat(target.c_str(), &existing) == 0;
  if (replacing && S_ISDIR(existing.st_mode)) {
    return Error(ErrorKind::IoError, "output path is a directory").with_file(target);
  }
  if (replacing && !S_ISREG(existing.st_mode)) {
    if (options.stream && streamable(existing.st_mode)) return open_stream(target);
    return special_target_error(existing.st_mode, target);
  }
  std::string destination = target;
  if (replacing) {
    SW_ASSIGN_OR_RETURN(destination, destination_of(target));
  }
  const std::string folder = folder_of(destination);

  int fd = -1;
  std::string temp;
  int slot = -1;
  if (!options.named_temporary && nameless_files_allowed()) {
    fd = open_nameless(AT_FDCWD, folder);
    if (fd < 0 && !nameless_unsupported(errno)) return create_error(errno, folder, target);
  }
  for (int attempt = 0; fd < 0 && attempt < 16; ++attempt) {
    // Registered before it exists, so that no signal finds the name unregistered.
    temp = temp_name_for(destination);
    slot = register_name(temp);
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) break;
    const int err = errno;
    unregister_name(slot);
    slot = -1;
    if (err != EEXIST) return create_error(err, folder, target);
  }
  if (fd < 0) return Error(ErrorKind::IoError, "cannot create a unique temporary file").with_file(target);

  AtomicFile file(target, std::move(destination), std::move(temp), fd, slot, options.durable);
  if (replacing && ::fchmod(fd, existing.st_mode & 07777) != 0) {
    return Error(ErrorKind::IoError, "cannot set file mode: " + errno_text(errno)).with_file(target);
  }
  if (options.preallocate > 0 && ::fallocate(fd, 0, 0, static_cast<off_t>(options.preallocate)) != 0) {
    int err = errno;
    // Filesystems without fallocate still work; only a real shortage of space is an error.
    if (err != EOPNOTSUPP && err != ENOSYS && err != EINVAL) {
      return Error(ErrorKind::IoError, "cannot reserve " + std::to_string(options.preallocate) + " bytes: " + errno_text(err)).with_file(target);
    }
  }
  return file;
}

Result<AtomicFile> AtomicFile::open_stream(const std::string& target) {
  // As a shell's `> target`: no O_TRUNC (a device has no contents to drop), and a FIFO's open waits for
  // its reader.
  const int fd = ::open(target.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return Error(ErrorKind::IoError, "cannot open the output: " + errno_text(errno)).with_file(target);
  AtomicFile file(target, target, {}, fd, -1, false);
  file.streaming_ = true;
  // What was opened is what is written into in place: never a regular file that took the name meanwhile.
  struct stat opened {};
  if (::fstat(fd, &opened) != 0) return Error(ErrorKind::IoError, "cannot examine the output: " + errno_text(errno)).with_file(target);
  if (!streamable(opened.st_mode)) return special_target_error(opened.st_mode, target);
  return file;
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : target_(std::move(other.target_)),
      destination_(std::move(other.destination_)),
      temp_(std::move(other.temp_)),
      fd_(other.fd_),
      slot_(other.slot_),
      durable_(other.durable_),
      streaming_(other.streaming_),
      position_(other.position_),
      streamed_(other.streamed_) {
  other.fd_ = -1;
  other.slot_ = -1;
  other.temp_.clear();
}

AtomicFile& AtomicFile::operator=(AtomicFile&& other) noexcept {
  if (this != &other) {
    abandon();
    target_ = std::move(other.target_);
    destination_ = std::move(other.destination_);
    temp_ = std::move(other.temp_);
    fd_ = other.fd_;
    slot_ = other.slot_;
    durable_ = other.durable_;
    streaming_ = other.streaming_;
    position_ = other.position_;
    streamed_ = other.streamed_;
    other.fd_ = -1;
    other.slot_ = -1;
    other.temp_.clear();
  }
  return *this;
}

AtomicFile::~AtomicFile() { abandon(); }

void AtomicFile::release_name() noexcept {
  unregister_name(slot_);
  slot_ = -1;
  temp_.clear();
}

void AtomicFile::abandon() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);  // a nameless file is freed here
    fd_ = -1;
  }
  if (!temp_.empty()) {
    ::unlink(temp_.c_str());
    release_name();
  }
}

Status AtomicFile::append(std::span<const std::byte> bytes) {
  SW_RETURN_IF_ERROR(pwrite(position_, bytes));
  position_ += bytes.size();
  return Status::ok();
}

Status AtomicFile::pwrite(std::uint64_t offset, std::span<const std::byte> bytes) {
  if (fd_ < 0) return Error(ErrorKind::InvalidArgument, "file already committed or abandoned").with_file(target_);
  if (streaming_) return write_stream(offset, bytes);
  auto status = pwrite_exact(fd_, offset, bytes, target_);
  if (!status.is_ok()) status.error().with_file(target_);
  return status;
}

Status AtomicFile::write_stream(std::uint64_t offset, std::span<const std::byte> bytes) {
  if (offset != streamed_) {
    return Error(ErrorKind::InvalidArgument, "the output is a stream, written in order: a write at byte " + std::to_string(offset) + " after " +
                                                 std::to_string(streamed_) + " bytes")
        .with_file(target_);
  }
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, std::min<std::size_t>(bytes.size() - done, std::size_t{1} << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Error(ErrorKind::IoError, n < 0 ? "write failed: " + errno_text(errno) : std::string("write made no progress"))
          .with_file(target_)
          .with_offset(streamed_);
    }
    done += static_cast<std::size_t>(n);
    streamed_ += static_cast<std::uint64_t>(n);
  }
  return Status::ok();
}

namespace {

// Per system call and per cancellation check: about 50 ms of copying at page-cache speed.
constexpr std::uint64_t kKernelCopyStep = 64u << 20;

// The errors with which copy_file_range says "not between these two files", not "the copy failed".
bool kernel_cannot_copy(int err) { return err == EXDEV || err == EINVAL || err == ENOSYS || err == EOPNOTSUPP || err == EBADF || err == ETXTBSY; }

}  // namespace

Status AtomicFile::copy_from(std::uint64_t at, const ByteSource& source, std::uint64_t offset, std::uint64_t length) {
  if (fd_ < 0) return Error(ErrorKind::InvalidArgument, "file already committed or abandoned").with_file(target_);
  SW_RETURN_IF_ERROR(source.check_range(offset, length));
  std::uint64_t done = 0;
  if (const auto region = source.file_region(); region && !streaming_) {
    while (done < length) {
      SW_RETURN_IF_ERROR(check_cancelled());
      auto in = static_cast<off_t>(region->offset + offset + done);
      auto out = static_cast<off_t>(at + done);
      const ssize_t n = ::copy_file_range(region->fd, &in, fd_, &out, static_cast<std::size_t>(std::min(kKernelCopyStep, length - done)), 0);
      if (n > 0) {
        done += static_cast<std::uint64_t>(n);
      } else if (n == 0) {
        return Error(ErrorKind::IoError, "the file ended " + std::to_string(length - done) + " bytes early (truncated while being copied?)")
            .with_file(source.name())
            .with_offset(offset + done);
      } else if (errno == EINTR) {
      } else if (kernel_cannot_copy(errno)) {
        break;  // the rest through a buffer
      } else {
        return Error(ErrorKind::IoError, "copy into the output failed: " + errno_text(errno)).with_file(target_);
      }
    }
  }
  std::uint64_t position = at + done;
  return copy_range(source, offset + done, length - done, copy_buffer_size(source), [&](std::span<const std::byte> part) -> Status {
    SW_RETURN_IF_ERROR(check_cancelled());
    SW_RETURN_IF_ERROR(pwrite(position, part));
    position += part.size();
    return Status::ok();
  });
}

Status AtomicFile::truncate(std::uint64_t size) {
  if (fd_ < 0) return Error(ErrorKind::InvalidArgument, "file already committed or abandoned").with_file(target_);
  if (streaming_) {
    if (size == streamed_) return Status::ok();
    return Error(ErrorKind::InvalidArgument, "the output is a stream: it cannot be resized").with_file(target_);
  }
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    return Error(ErrorKind::IoError, "cannot set file size: " + errno_text(errno)).with_file(target_);
  }
  return Status::ok();
}

Status AtomicFile::commit() {
  if (fd_ < 0) return Error(ErrorKind::InvalidArgument, "file already committed or abandoned").with_file(target_);
  if (Status s = check_cancelled(); !s.is_ok()) return error_of(s).with_file(target_);
  return commit_unchecked();
}

Status AtomicFile::commit_all(std::span<AtomicFile* const> files) {
  for (const AtomicFile* f : files)
    if (f->fd_ < 0) return Error(ErrorKind::InvalidArgument, "file already committed or abandoned").with_file(f->target_);
  if (Status s = check_cancelled(); !s.is_ok()) return s;
  for (std::size_t k = 0; k < files.size(); ++k) {
    if (Status s = files[k]->commit_unchecked(); !s.is_ok()) {
      for (std::size_t j = 0; j < k; ++j)
        if (!files[j]->streaming_) ::unlink(files[j]->destination_.c_str());
      for (std::size_t j = k; j < files.size(); ++j) files[j]->abandon();
      return s;
    }
  }
  return Status::ok();
}

Status AtomicFile::commit_unchecked() {
  if (streaming_) return commit_stream();
  if (durable_ && ::fdatasync(fd_) != 0) {
    return Error(ErrorKind::IoError, "fdatasync failed: " + errno_text(errno)).with_file(target_);
  }
  SW_RETURN_IF_ERROR(temp_.empty() ? commit_nameless() : commit_named());
  if (durable_) sync_folder(destination_);
  return Status::ok();
}

Status AtomicFile::commit_stream() {
  // close() reports what the device could not take late (delayed write errors).
  if (::close(std::exchange(fd_, -1)) != 0) return Error(ErrorKind::IoError, "close failed: " + errno_text(errno)).with_file(target_);
  return Status::ok();
}

Status AtomicFile::commit_named() {
  int fd = fd_;
  fd_ = -1;
  // close() can report delayed write errors (NFS, quotas): they must fail the commit.
  if (::close(fd) != 0) {
    return Error(ErrorKind::IoError, "close failed: " + errno_text(errno)).with_file(target_);
  }
  if (::rename(temp_.c_str(), destination_.c_str()) != 0) {
    return Error(ErrorKind::IoError, "cannot rename into place: " + errno_text(errno)).with_file(target_);
  }
  release_name();
  return Status::ok();
}

Status AtomicFile::commit_nameless() {
  auto failed = [&](const char* what, int err) { return Error(ErrorKind::IoError, std::string(what) + ": " + errno_text(err)).with_file(target_); };
  // A new target: the file gets its name in one step, and linkat never replaces a file that appeared
  // meanwhile (EEXIST: then replace it as below).
  if (link_nameless(fd_, AT_FDCWD, destination_) == 0) {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) {
      const int err = errno;
      ::unlink(destination_.c_str());
      return failed("close failed", err);
    }
    return Status::ok();
  }
  if (errno != EEXIST) return failed("cannot link into place", errno);
  // An existing target: a temporary name (registered, removed on every failure), renamed over it.
  for (int attempt = 0; attempt < 16 && temp_.empty(); ++attempt) {
    std::string temp = temp_name_for(destination_);
    const int slot = register_name(temp);
    if (link_nameless(fd_, AT_FDCWD, temp) == 0) {
      temp_ = std::move(temp);
      slot_ = slot;
      break;
    }
    const int err = errno;
    unregister_name(slot);
    if (err != EEXIST) return failed("cannot link into place", err);
  }
  if (temp_.empty()) return Error(ErrorKind::IoError, "cannot create a unique temporary file").with_file(target_);
  return commit_named();
}

}  // namespace safeweights
