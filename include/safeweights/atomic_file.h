// safeweights/atomic_file.h — write a file so that readers see either the old target or the new one.
//
// Every writer in the library goes through AtomicFile: it creates a temporary file in the target's
// folder (so the final rename cannot cross filesystems), writes into it, and commit() renames it over
// the target. If anything fails before commit() — a full disk, a crash of the producer, an exception —
// the destructor removes the temporary file and the target is untouched. A new file gets the ordinary
// permissions (0666 minus the process umask); replacing an existing file keeps that file's mode.
//
// Thread safety: an AtomicFile has a single owner. pwrite() calls at distinct offsets may come from
// several threads at once; nothing else may run concurrently with commit() or the destructor.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "safeweights/error.h"

namespace safeweights {

struct AtomicFileOptions {
  // Reserve this many bytes up front (fallocate), so a full disk fails before any data is written.
  std::uint64_t preallocate = 0;
  // fsync the data and the folder on commit, so the new file survives a power cut.
  bool durable = false;
};

class AtomicFile {
 public:
  static Result<AtomicFile> create(const std::string& target, const AtomicFileOptions& options = {});

  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // removes the temporary file unless committed

  // Appends at the current end of what append() has written.
  Status append(std::span<const std::byte> bytes);
  // Writes at an absolute offset (does not move the append position).
  Status pwrite(std::uint64_t offset, std::span<const std::byte> bytes);
  // Sets the final size (the file is truncated or extended with zeros).
  Status truncate(std::uint64_t size);

  // Closes the file, renames it over the target and (if durable) syncs the folder.
  Status commit();
  // Removes the temporary file now; the target stays as it was.
  void abandon() noexcept;

  const std::string& target() const noexcept { return target_; }
  const std::string& temp_path() const noexcept { return temp_; }
  std::uint64_t append_position() const noexcept { return position_; }

 private:
  AtomicFile(std::string target, std::string temp, int fd, bool durable)
      : target_(std::move(target)), temp_(std::move(temp)), fd_(fd), durable_(durable) {}

  std::string target_;
  std::string temp_;
  int fd_ = -1;
  bool durable_ = false;
  std::uint64_t position_ = 0;
};

}  // namespace safeweights
