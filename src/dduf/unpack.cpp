// DDUF unpacking, all or nothing: every entry is written and its CRC checked before the folder appears
// under its name, and nothing is ever written outside it.
//
// The folder is built beside the target, in `.<target>.sw-unpack-<pid>-<random>` (same parent, so the
// final rename cannot cross filesystems), and renamed into place at the end. Where the OS allows
// (O_TMPFILE, and few enough entries to hold one descriptor each), the entries are written as nameless
// files and the staging folder is only created, and the files named in it, once every byte is written
// and checked: a kill -9 during the long part leaves nothing at all. Otherwise the files are written
// into the staging folder directly. A staging folder left by a killed run (only possible in that
// fallback, or in the milliseconds of the naming step) is recognisable by its name and removed by the
// next unpack into the same target once its process is gone.
//
// Every path is opened relative to a folder descriptor with O_NOFOLLOW, O_DIRECTORY or O_EXCL, and the
// staging folder is new and ours: nothing the target or its surroundings contain (symlinks included)
// can redirect a write.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <utility>

#include "core/parallel.h"
#include "core/status_macros.h"
#include "core/strings.h"
#include "io/input_files.h"
#include "io/nameless.h"
#include "io/posix_util.h"
#include "safeweights/cancel.h"
#include "safeweights/dduf.h"

namespace safeweights::dduf {
namespace {

constexpr std::string_view kStagingTag = ".sw-unpack-";
constexpr std::uint64_t kCopyChunk = 8u << 20;

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Closes now and reports what close(2) says (delayed write errors).
  int close_checked() noexcept { return ::close(std::exchange(fd_, -1)); }

 private:
  int fd_ = -1;
};

Error io_error(const std::string& what, int err, const std::string& path) {
  return Error(ErrorKind::IoError, what + ": " + errno_text(err)).with_file(path);
}

// The folder `name` under `dirfd`, never through a symlink at that name.
int open_folder(int dirfd, const std::string& name) { return ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC); }

std::vector<std::string> list_folder(int dirfd) {
  std::vector<std::string> names;
  const int dup = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup < 0) return names;
  DIR* d = ::fdopendir(dup);
  if (d == nullptr) {
    ::close(dup);
    return names;
  }
  while (const dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  ::closedir(d);
  return names;
}

// Removes `name` under `dirfd` and everything below it; symlinks are removed, never followed.
void remove_tree(int dirfd, const std::string& name) {
  if (::unlinkat(dirfd, name.c_str(), 0) == 0 || errno == ENOENT) return;
  Fd dir(open_folder(dirfd, name));
  if (!dir) return;
  for (const std::string& child : list_folder(dir.get())) remove_tree(dir.get(), child);
  ::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR);
}

std::string staging_prefix(const std::string& base) { return "." + base + std::string(kStagingTag); }

std::string staging_name(const std::string& base) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return staging_prefix(base) + std::to_string(::getpid()) + "-" + std::to_string(rng() % 1000000000);
}

// Staging folders of this target whose process is gone (killed during an unpack) are removed.
void remove_stale_staging(int parent, const std::string& base) {
  const std::string prefix = staging_prefix(base);
  for (const std::string& name : list_folder(parent)) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) remove_tree(parent, name);
  }
}

enum class Existing { None, Empty, Full };

Result<Existing> examine_target(int parent, const std::string& base, const std::string& path) {
  struct stat st {};
  if (::fstatat(parent, base.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return Existing::None;
    return io_error("cannot examine the folder", errno, path);
  }
  if (S_ISLNK(st.st_mode)) {
    return Error(ErrorKind::UnsafePath, "the folder to write is a symbolic link; name the folder it points to").with_file(path);
  }
  if (!S_ISDIR(st.st_mode)) return Error(ErrorKind::IoError, "exists and is not a folder").with_file(path);
  Fd dir(open_folder(parent, base));
  if (!dir) return io_error("cannot open the folder", errno, path);
  return list_folder(dir.get()).empty() ? Existing::Empty : Existing::Full;
}

// One descriptor per entry while nameless files wait for their names: stay well inside the limit.
std::size_t nameless_budget() {
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return 1024;
  return static_cast<std::size_t>(std::min<rlim_t>(lim.rlim_cur / 2, 4096));
}

// The staging folder and its component folders; removed with everything in it unless kept.
class Staging {
 public:
  Staging(int parent, const std::string& base, std::string path) : parent_(parent), name_(staging_name(base)), path_(std::move(path)) {}
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  ~Staging() {
    if (created_) remove_tree(parent_, name_);
  }

  Status create(const std::vector<std::string>& components) {
    if (::mkdirat(parent_, name_.c_str(), 0777) != 0) return io_error("cannot create the staging folder", errno, path_);
    created_ = true;
    root_ = Fd(open_folder(parent_, name_));
    if (!root_) return io_error("cannot open the staging folder", errno, path_);
    for (const std::string& c : components) {
      if (::mkdirat(root_.get(), c.c_str(), 0777) != 0) return io_error("cannot create folder", errno, path_ + "/" + c);
      Fd fd(open_folder(root_.get(), c));
      if (!fd) return io_error("cannot open folder", errno, path_ + "/" + c);
      folders_.emplace_back(c, std::move(fd));
    }
    return Status::ok();
  }

  // The folder descriptor an entry goes into, and its name there.
  std::pair<int, std::string> place(const std::string& entry) const {
    auto slash = entry.find('/');
    if (slash == std::string::npos) return {root_.get(), entry};
    const std::string component = entry.substr(0, slash);
    for (const auto& [name, fd] : folders_) {
      if (name == component) return {fd.get(), entry.substr(slash + 1)};
    }
    return {-1, entry};
  }

  const std::string& name() const noexcept { return name_; }
  // Nothing is under the staging name any more (it was renamed into place).
  void release() noexcept { created_ = false; }

 private:
  int parent_;
  std::string name_;
  std::string path_;
  bool created_ = false;
  Fd root_;
  std::vector<std::pair<std::string, Fd>> folders_;
};

// Writes the entry into `fd` (checking its CRC in the same pass); `path` names it in errors.
Status write_entry(const Reader& reader, const Entry& entry, int fd, const std::string& path) {
  const zip::Entry* ze = reader.archive().find(entry.filename);
  if (ze == nullptr) return Error(ErrorKind::InvalidArgument, "no entry named `" + entry.filename + "`").with_file(reader.name());
  // Reserve the space first: a full disk fails before the copy.
  if (entry.length > 0 && ::fallocate(fd, 0, 0, static_cast<off_t>(entry.length)) != 0 && errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL) {
    return io_error("cannot reserve " + std::to_string(entry.length) + " bytes", errno, path);
  }
  std::uint64_t at = 0;
  return reader.archive().copy_entry_checked(*ze, kCopyChunk, [&](std::span<const std::byte> piece) {
    Status s = pwrite_exact(fd, at, piece, path);
    at += piece.size();
    return s;
  });
}

// Renames the finished staging folder to the target. An existing non-empty target (replace given) is
// swapped with it in one step where the filesystem can (RENAME_EXCHANGE); the old tree is then under
// the staging name and goes with it.
Status move_into_place(int parent, const std::string& base, Staging& staging, Existing existing, const std::string& path) {
  const char* from = staging.name().c_str();
  const char* to = base.c_str();
  auto refused = [&](int err) {
    if (err == EEXIST || err == ENOTEMPTY) return Error(ErrorKind::IoError, "the folder was filled by someone else meanwhile").with_file(path);
    return io_error("cannot move the unpacked folder into place", err, path);
  };
  if (existing == Existing::Full) {
    if (::renameat2(parent, from, parent, to, RENAME_EXCHANGE) == 0) return Status::ok();
    if (errno != EINVAL && errno != ENOSYS) return refused(errno);
    // No exchange on this filesystem: the old folder steps aside under a staging name first.
    const std::string old = staging_name(base);
    if (::renameat(parent, to, parent, old.c_str()) != 0) return refused(errno);
    if (::renameat(parent, from, parent, to) != 0) {
      const int err = errno;
      ::renameat(parent, old.c_str(), parent, to);
      return refused(err);
    }
    staging.release();
    remove_tree(parent, old);
    return Status::ok();
  }
  int rc = existing == Existing::None ? ::renameat2(parent, from, parent, to, RENAME_NOREPLACE) : -1;
  // An empty folder is replaced by rename(2) itself, which refuses one that is no longer empty; so is
  // a missing one where the filesystem has no RENAME_NOREPLACE.
  if (existing == Existing::Empty || (rc != 0 && (errno == EINVAL || errno == ENOSYS))) rc = ::renameat(parent, from, parent, to);
  if (rc != 0) return refused(errno);
  staging.release();
  return Status::ok();
}

}  // namespace

Status unpack(const Reader& reader, const std::string& folder, unsigned threads, bool replace) {
  std::string path = folder;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const std::string base = path.substr(path.find_last_of('/') + 1);
  if (base.empty() || base == "." || base == ".." || path == "/") {
    return Error(ErrorKind::InvalidArgument, "name the folder to write, not `.`, `..` or `/`").with_file(folder);
  }
  const std::string parent_path = folder_of(path);
  std::error_code ec;
  std::filesystem::create_directories(parent_path, ec);
  if (ec) return Error(ErrorKind::IoError, "cannot create folder: " + ec.message()).with_file(parent_path);
  Fd parent(::open(parent_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!parent) return io_error("cannot open folder", errno, parent_path);

  SW_ASSIGN_OR_RETURN(Existing existing, examine_target(parent.get(), base, path));
  if (existing == Existing::Full && !replace) {
    return Error(ErrorKind::InvalidArgument, "the folder is not empty (--force replaces it as a whole)").with_file(path);
  }
  if (existing == Existing::Full) {
    // The old tree goes as a whole: it must not hold the archive being read.
    InputFiles archive;
    archive.add(reader.name());
    SW_RETURN_IF_ERROR(archive.check_outside(path));
  }
  remove_stale_staging(parent.get(), base);

  const auto& entries = reader.entries();
  Staging staging(parent.get(), base, path);
  bool nameless = nameless_files_allowed() && entries.size() <= nameless_budget();
  if (nameless) {
    Fd probe(open_nameless(parent.get(), "."));
    if (!probe && !nameless_unsupported(errno)) return io_error("cannot create a file", errno, path);
    nameless = static_cast<bool>(probe);
  }
  if (!nameless) SW_RETURN_IF_ERROR(staging.create(reader.components()));

  std::vector<Fd> files(entries.size());
  auto write_one = [&](std::size_t i) -> Status {
    const std::string where = path + "/" + entries[i].filename;
    if (nameless) {
      files[i] = Fd(open_nameless(parent.get(), "."));
    } else {
      auto [dir, leaf] = staging.place(entries[i].filename);
      files[i] = Fd(::openat(dir, leaf.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666));
    }
    if (!files[i]) return io_error("cannot create file", errno, where);
    SW_RETURN_IF_ERROR(write_entry(reader, entries[i], files[i].get(), where));
    if (!nameless && files[i].close_checked() != 0) return io_error("close failed", errno, where);
    return Status::ok();
  };
  SW_RETURN_IF_ERROR(parallel_for(entries.size(), threads, write_one));

  // Every byte is written and checked: only now do the files get names.
  if (nameless) {
    SW_RETURN_IF_ERROR(staging.create(reader.components()));
    for (std::size_t i = 0; i < entries.size(); ++i) {
      auto [dir, leaf] = staging.place(entries[i].filename);
      if (link_nameless(files[i].get(), dir, leaf) != 0) return io_error("cannot name file", errno, path + "/" + entries[i].filename);
      if (files[i].close_checked() != 0) return io_error("close failed", errno, path + "/" + entries[i].filename);
    }
  }
  SW_RETURN_IF_ERROR(check_cancelled());
  return move_into_place(parent.get(), base, staging, existing, path);
}

}  // namespace safeweights::dduf
