// safeweights/atomic_file.h — write a file so that readers see either the old target or the new one,
// and so that an interrupted writer leaves nothing behind.
//
// Every writer in the library goes through AtomicFile. Where the OS allows (Linux O_TMPFILE: ext4, xfs,
// btrfs, tmpfs, …) the file being written has no name at all until commit(): it lives in the target's
// folder (so it cannot end up on another filesystem) but no crash, kill -9 or power cut can leave it
// behind — the kernel frees it with the last descriptor. commit() gives it the target's name: a new
// target by linkat(2) straight to that name (which never replaces anything), an existing one by a link
// to a short-lived temporary name that is then renamed over the target (atomic replacement).
//
// Where O_TMPFILE is not supported (older kernels, NFS, …) AtomicFile falls back to a named temporary
// file `.<target>.sw-tmp-<random>` in the same folder. Its name is kept in a process-wide registry that
// remove_uncommitted_files() unlinks; install_cleanup_signal_handlers() makes SIGINT, SIGTERM and
// SIGHUP do that and then die of the signal, so Ctrl-C never leaves a name behind. Only kill -9 (or a
// crash) during such a write, or during the microseconds of the replacing rename, can leave one.
// AtomicFileOptions::named_temporary, or SAFEWEIGHTS_NAMED_TEMPFILES=1 in the environment, forces the
// fallback (for tests, and for filesystems whose O_TMPFILE misbehaves).
//
// If anything fails before commit() — a full disk, a crash of the producer, an exception — the
// destructor discards the file and the target is untouched. commit() first asks check_cancelled()
// (cancel.h): a Ctrl-C that arrived during a long write discards the file instead of committing it. A
// new file gets the ordinary permissions (0666 minus the process umask); replacing an existing file
// keeps that file's mode.
//
// Existing targets, by what the path resolves to (symbolic links followed, so a link is judged by the
// file it names):
// - a regular file is replaced as above, where it lies: through a symbolic link, the file it names is
//   replaced and the link stays (/dev/stderr redirected to a log names the log, not /dev);
// - a folder is refused (IoError);
// - a character device, a block device, a FIFO or a socket is never replaced with a regular file, which
//   would break every later `> /dev/null` or leave a FIFO's reader waiting forever: UnsafePath, naming
//   the path and what it is. Except for a writer that asks to stream (AtomicFileOptions::stream): a
//   character device (/dev/null, /dev/stdout on a terminal, /dev/full) or a FIFO (/dev/stdout on a
//   pipe) is then opened and written in place, in order, as `cat > target` does. A stream is not
//   atomic: bytes reach the reader as they are written, and a failure cannot take back those already
//   written. A write error fails the write (ENOSPC from /dev/full, EPIPE from a FIFO whose reader
//   left); pwrite() at any offset but the end of what was written, and truncate() to another size, are
//   InvalidArgument.
//
// Thread safety: an AtomicFile has a single owner. pwrite() calls at distinct offsets may come from
// several threads at once; nothing else may run concurrently with commit() or the destructor.
// remove_uncommitted_files() is async-signal-safe and may run at any time.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/source.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

struct AtomicFileOptions {
  // Reserve this many bytes up front (fallocate), so a full disk fails before any data is written.
  std::uint64_t preallocate = 0;
  // fsync the data and the folder on commit, so the new file survives a power cut.
  bool durable = false;
  // Use a named temporary file even where a nameless one is possible (the fallback's behaviour).
  bool named_temporary = false;
  // For a writer whose output is a byte stream written in order (`cat -o`): an existing character
  // device or FIFO target is written in place instead of refused (above).
  bool stream = false;
};

class AtomicFile {
 public:
  static Result<AtomicFile> create(const std::string& target, const AtomicFileOptions& options = {});

  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // discards the file unless committed

  // Appends at the current end of what append() has written.
  Status append(std::span<const std::byte> bytes);
  // Writes at an absolute offset (does not move the append position).
  Status pwrite(std::uint64_t offset, std::span<const std::byte> bytes);
  // Writes bytes [offset, offset + length) of `source` at `at` (does not move the append position).
  // When the source is a local file (ByteSource::file_region) the kernel copies them
  // (copy_file_range: no pass through user memory, and a reflink where the filesystem shares
  // extents); where it cannot (another filesystem, a kernel without it), and for other sources, they
  // pass through one buffer (copy_buffer_size: 256 KiB for a file, 8 MiB for HTTP). OutOfRange when
  // the range is not inside the source, IoError naming the source when it ends early (truncated
  // meanwhile), Interrupted on cancellation (checked every 64 MiB).
  Status copy_from(std::uint64_t at, const ByteSource& source, std::uint64_t offset, std::uint64_t length);
  // Sets the final size (the file is truncated or extended with zeros).
  Status truncate(std::uint64_t size);

  // Interrupted if cancellation was requested (the file is then discarded by the destructor or
  // abandon()); otherwise closes the file, gives it the target's name and (if durable) syncs the folder.
  Status commit();
  // Commits `files` in order after a single check_cancelled(), so that a cancellation cannot split the
  // group (multi-file outputs: split files, shards and their index). When one fails (a full disk at
  // close, the folder removed meanwhile) the files already committed are removed again and the rest
  // discarded, so the group is there whole or not at all.
  static Status commit_all(std::span<AtomicFile* const> files);
  // Discards the file now; the target stays as it was.
  void abandon() noexcept;

  const std::string& target() const noexcept { return target_; }
  // Whether the target is written in place as a stream (a character device or FIFO; see above).
  bool streaming() const noexcept { return streaming_; }
  // The temporary file's name, or empty while the file has none (O_TMPFILE).
  const std::string& temp_path() const noexcept { return temp_; }
  std::uint64_t append_position() const noexcept { return position_; }

 private:
  AtomicFile(std::string target, std::string destination, std::string temp, int fd, int slot, bool durable)
      : target_(std::move(target)), destination_(std::move(destination)), temp_(std::move(temp)), fd_(fd), slot_(slot), durable_(durable) {}
  static Result<AtomicFile> open_stream(const std::string& target);
  Status write_stream(std::uint64_t offset, std::span<const std::byte> bytes);
  Status commit_unchecked();
  Status commit_stream();
  Status commit_named();
  Status commit_nameless();
  void release_name() noexcept;

  std::string target_;       // as the caller named it, for messages
  std::string destination_;  // the name committed: target_, or the regular file a symbolic link names
  std::string temp_;
  int fd_ = -1;
  int slot_ = -1;  // the temporary name's place in the cleanup registry, -1 when none
  bool durable_ = false;
  bool streaming_ = false;
  std::uint64_t position_ = 0;
  std::uint64_t streamed_ = 0;  // bytes written so far into a stream
};

// Unlinks every named temporary file of this process that is not yet committed. Async-signal-safe
// (fixed-size storage, unlink(2) only): meant for signal handlers.
void remove_uncommitted_files() noexcept;

// SIGINT, SIGTERM and SIGHUP: remove_uncommitted_files(), then the signal's default action (the process
// dies of it at once, as the shell expects). For programs (the CLI), not for libraries' hosts.
void install_cleanup_signal_handlers() noexcept;

SAFEWEIGHTS_API_END
}  // namespace safeweights
