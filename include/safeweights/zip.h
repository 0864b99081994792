// safeweights/zip.h — a strict reader and writer for uncompressed ZIP / ZIP64 archives.
//
// Archive::open() reads the end-of-central-directory records (classic and ZIP64), the central
// directory and every local header, and checks what a strict reader must: one unambiguous EOCD at the
// end of the file (a comment may not hide another), ZIP64 records that agree with the classic ones,
// well-formed extra fields, no encryption or multi-disk fields, local headers that agree with the
// central directory (name, flags, method, CRC, sizes), entries that lie inside the file in order
// without overlap, gaps, prepended or trailing bytes, unique names, and counts that agree with the
// bytes parsed. Each entry's data offset and length are exact, so an entry is a zero-copy sub-range of
// the archive's ByteSource. Nothing here inflates compressed entries.
//
// Two policies (ArchivePolicy) decide what else is accepted:
//   Strict     (the default; DDUF) no data descriptors (flag bit 3): every byte of the file is a
//              record the reader has checked, and each local header carries the entry's CRC and sizes.
//   Container  (PyTorch's torch.save, which writes through miniz as a stream) data descriptors are
//              allowed. An entry with flag bit 3 may leave its local CRC and sizes zero (then the
//              central directory's values rule), and its data must be followed by exactly one data
//              descriptor (signature optional; 8-byte sizes when the local header has a ZIP64 extra
//              block, else 4-byte) that agrees with the central directory on CRC and both sizes, and
//              by nothing else. Compressed entries are refused (ZipUnsupported): a reader of this
//              policy takes entries as zero-copy sub-ranges. Every other Strict check holds.
//   (Strict lists compressed entries and leaves them to the layer above: DDUF refuses them in the
//   reference's words.)
//
// Writer produces archives that CPython's zipfile, Info-ZIP and huggingface_hub read: stored entries,
// a ZIP64 extra in every local header, ZIP64 central records only where CPython would write them, a
// fixed 1980-01-01 timestamp. Optionally each entry's data starts on an N-byte boundary (padding in a
// local-header extra block), so that mapped data is aligned. It writes through an AtomicFile. Its own
// failures (a producer that ends early) are ZipWrite errors.
//
// Thread safety: Archive is immutable after open(); const methods may be called concurrently. Writer
// has a single owner.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "safeweights/atomic_file.h"
#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/source.h"

namespace safeweights::zip {
SAFEWEIGHTS_API_BEGIN

struct Entry {
  // A view into the archive's one copy of its central directory (valid as long as the Archive; a
  // Writer keeps its names itself): opening an archive of many entries allocates no string per entry.
  std::string_view name;
  std::uint64_t header_offset = 0;  // local file header
  std::uint64_t data_offset = 0;    // first byte of the entry's data
  std::uint64_t size = 0;           // uncompressed size (== compressed size when stored)
  std::uint64_t compressed_size = 0;
  std::uint32_t crc32 = 0;
  std::uint16_t method = 0;  // 0 = stored
  std::uint16_t flags = 0;
  // Bytes of the data descriptor after the data (signature included), 0 without one.
  std::uint64_t descriptor_size = 0;
  bool is_directory() const noexcept { return !name.empty() && name.back() == '/'; }
};

// What Archive::open accepts beyond the strict core (see the top of this file).
enum class ArchivePolicy {
  Strict,     // DDUF: no data descriptors
  Container,  // torch.save archives: data descriptors allowed, and verified against the central directory
};

struct ArchiveLimits {
  std::uint64_t max_entries = 1'000'000;
  std::uint64_t max_central_directory = 256ull << 20;
};

class Archive {
 public:
  // BadZipFile / ZipUnsupported on any structural problem; errors name the entry and byte offset.
  static Result<Archive> open(SourcePtr source, ArchivePolicy policy, const ArchiveLimits& limits = {});
  // ArchivePolicy::Strict.
  static Result<Archive> open(SourcePtr source, const ArchiveLimits& limits = {});

  const SourcePtr& source() const noexcept { return source_; }
  const std::string& name() const noexcept { return source_->name(); }
  // Central-directory order.
  const std::vector<Entry>& entries() const noexcept { return entries_; }
  const Entry* find(std::string_view name) const noexcept;
  bool uses_zip64() const noexcept { return zip64_; }

  // The entry's bytes as a source of their own ("archive!entry"), zero-copy.
  Result<SourcePtr> open_entry(const Entry& entry) const;

  // CRC-32 of the entry's bytes against the recorded value (CrcMismatch otherwise).
  Status verify_crc(const Entry& entry) const;
  // All entries, spread over `threads` threads (0: one per core, at most 8); the first failure in entry order.
  Status verify_all_crcs(unsigned threads = 0) const;
  // Hands the entry's bytes to `sink` in order, reading `chunk` bytes at a time, and checks their
  // CRC-32 in the same pass (each piece while it is still in cache): CrcMismatch after the last piece
  // when it differs, Interrupted when check_cancelled() says so between pieces. The sink has seen
  // wrong bytes by then: callers discard what it wrote on any error.
  Status copy_entry_checked(const Entry& entry, std::uint64_t chunk, const ByteSink& sink) const;

 private:
  Error crc_mismatch(const Entry& entry, std::uint32_t crc) const;
  // Archive::open's steps, in file order; fills entries_, sorted_ and zip64_.
  Status read_structure(const ByteSource& src, ArchivePolicy policy, const ArchiveLimits& limits);

  SourcePtr source_;
  std::unique_ptr<std::byte[]> directory_;  // the central directory, copied once: what names view
  std::vector<Entry> entries_;
  std::vector<std::size_t> sorted_;  // indices into entries_, sorted by name
  bool zip64_ = false;
};

// CRC-32 (IEEE) of bytes, continuing from `crc` (0 to start).
std::uint32_t crc32(std::uint32_t crc, std::span<const std::byte> bytes) noexcept;

struct WriterOptions {
  // Data of entries for which align_entry(name) is true starts on a multiple of this (0 or 1: none).
  std::uint32_t alignment = 0;
  std::function<bool(std::string_view name)> align_entry = [](std::string_view) { return true; };
  bool durable = false;
  // Called after each chunk of entry data with the number of data bytes written so far.
  std::function<void(std::uint64_t data_bytes)> progress;
};

// Produces an entry's bytes: called with successive chunks to fill; returns bytes written or an error.
using Producer = std::function<Result<std::size_t>(std::span<std::byte> chunk)>;

class Writer {
 public:
  static Result<Writer> create(const std::string& path, WriterOptions options = {});

  Writer(Writer&&) noexcept = default;
  Writer& operator=(Writer&&) noexcept = default;
  ~Writer() = default;  // an unfinished writer leaves no file behind

  // If adding an entry fails after its header was written (I/O error, producer error or short
  // producer), the writer is spent: every later call fails and no file is left behind.
  Status add_bytes(std::string_view name, std::span<const std::byte> bytes);
  // Copies a local file (mapped, CRC computed in the same pass).
  Status add_file(std::string_view name, const std::string& path);
  // `size` bytes from a producer, one chunk at a time.
  Status add_stream(std::string_view name, std::uint64_t size, const Producer& producer);
  // Writes the central directory and end records, then renames the file into place.
  Status finish();

  const std::string& path() const noexcept { return file_.target(); }
  std::uint64_t bytes_written() const noexcept { return file_.append_position(); }

 private:
  Writer(AtomicFile file, WriterOptions options) : file_(std::move(file)), options_(std::move(options)) {}
  Status write_entry(std::string_view name, std::uint64_t size, const Producer& producer);
  Status write_entry_bytes(Entry& entry, const std::string& extra, const Producer& producer);

  AtomicFile file_;
  WriterOptions options_;
  std::vector<Entry> entries_;
  std::unordered_set<std::string> names_;
  std::uint64_t data_bytes_ = 0;
  bool finished_ = false;
  // Set when an entry failed after its first byte was written: the archive can no longer be finished.
  std::optional<Error> failed_;
};

SAFEWEIGHTS_API_END
}  // namespace safeweights::zip
