// safeweights/dduf.h — DDUF: a diffusion pipeline packed into one uncompressed ZIP64 archive.
//
// dduf::Reader opens an archive with the strict ZIP layer (zip.h), then applies huggingface_hub's DDUF
// rules in its order, so the first error matches the reference: per entry, stored only and the name
// rules (allowed extensions .json .model .safetensors .txt, UNIX separators, at most one folder level);
// then `model_index.json` present and a JSON object; then every folder a key of the index holding one
// of config.json / tokenizer_config.json / preprocessor_config.json / scheduler_config.json. Stricter
// rules of ours (no empty, `.` or `..` path parts, no leading or trailing `/`, no duplicate keys in
// model_index.json) are reported after those. Entries are zero-copy views of the archive; a
// `.safetensors` entry opens as a safetensors::Reader over that view.
//
// Exporter writes a DDUF from a sequence of entries (the caller's order, as the reference does);
// pack_folder() writes a folder deterministically (`model_index.json` first, then sorted names) after
// checking every name and the structure before the first byte. By default each `.safetensors` entry's
// data starts on a 4096-byte boundary; `reference_layout` writes the reference exporter's exact bytes.
// Output goes through an AtomicFile: on any error nothing is left behind.
//
// Thread safety: Reader is immutable after open(); const methods may be called concurrently. Exporter
// has a single owner.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/safetensors.h"
#include "safeweights/source.h"
#include "safeweights/zip.h"

namespace safeweights::dduf {
SAFEWEIGHTS_API_BEGIN

inline constexpr std::array<std::string_view, 4> kAllowedExtensions = {".json", ".model", ".safetensors", ".txt"};
inline constexpr std::array<std::string_view, 4> kFolderConfigFiles = {"config.json", "tokenizer_config.json", "preprocessor_config.json",
                                                                       "scheduler_config.json"};
inline constexpr std::string_view kModelIndex = "model_index.json";

// As huggingface_hub's DDUFEntry: where the entry's data starts in the archive, and its size.
struct Entry {
  std::string filename;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

struct VerifyOptions {
  bool crc = true;       // CRC-32 of every entry (parallel)
  bool contents = true;  // every .safetensors entry passes the safetensors rules, every .json entry parses
  unsigned threads = 0;  // 0: one per core, at most 8 (default_threads)
};

class Reader {
 public:
  static Result<Reader> open(const std::string& path, FileBackend backend = FileBackend::Mmap);
  static Result<Reader> open(SourcePtr source);

  const zip::Archive& archive() const noexcept { return archive_; }
  const std::string& name() const noexcept { return archive_.name(); }
  // Central-directory order.
  const std::vector<Entry>& entries() const noexcept { return entries_; }
  const Entry* find(std::string_view filename) const noexcept;
  // The folders (pipeline components) present in the archive, sorted.
  const std::vector<std::string>& components() const noexcept { return components_; }
  // The text of model_index.json (validated: a JSON object).
  const std::string& model_index() const noexcept { return model_index_; }

  // The entry's bytes as a source of their own, zero-copy (InvalidArgument if absent).
  Result<SourcePtr> open_entry(std::string_view filename) const;
  // A .safetensors entry as a safetensors file (all of its rules apply), without copying.
  Result<safetensors::Reader> open_safetensors(std::string_view filename, const safetensors::ReadOptions& options = {}) const;

  // Deep checks that opening does not do: CRCs, safetensors entries, JSON entries.
  Status verify(const VerifyOptions& options = {}) const;

 private:
  explicit Reader(zip::Archive archive) : archive_(std::move(archive)) {}
  zip::Archive archive_;
  std::vector<Entry> entries_;
  std::vector<std::string> components_;
  std::string model_index_;
};

// The reference's name rules, in its order; returns the name with leading and trailing '/' removed.
// DDUFInvalidEntryName with the reference's message otherwise.
Result<std::string> validate_entry_name(std::string_view name);

// The reference's structure rules: `model_index` (JSON text) is an object, and every folder among
// `names` is one of its keys and holds one of kFolderConfigFiles. DDUFCorruptedFile otherwise.
Status validate_structure(std::string_view model_index, const std::vector<std::string>& names);

struct PackOptions {
  std::uint32_t alignment = 4096;  // data of .safetensors entries starts on this boundary (0: none)
  bool reference_layout = false;   // the reference exporter's exact layout (no alignment padding)
  bool durable = false;            // fsync before the rename
  // Progress: bytes of entry data written so far, and the total (0 when unknown).
  std::function<void(std::uint64_t done, std::uint64_t total)> progress;
};

class Exporter {
 public:
  static Result<Exporter> create(const std::string& path, const PackOptions& options = {});

  // Each name is checked before its bytes are written (duplicates, name rules, and model_index.json
  // must be JSON); DDUFExport / DDUFInvalidEntryName otherwise. A failure after an entry's first byte
  // (I/O, the producer, a streamed index that is not JSON) ends the export: later calls fail and no
  // file is left behind. add_file refuses a file that is the archive's own output (InvalidArgument,
  // by device and inode: any path, symbolic or hard link), which committing would replace.
  Status add_bytes(std::string_view name, std::span<const std::byte> bytes);
  Status add_file(std::string_view name, const std::string& path);
  Status add_stream(std::string_view name, std::uint64_t size, const zip::Producer& producer);
  // Checks the structure (model_index.json present, folders) and commits; on failure nothing remains.
  Status finish();

 private:
  Exporter(zip::Writer writer) : writer_(std::move(writer)) {}
  Result<std::string> admit(std::string_view name);
  Status check_index(std::string_view name, std::string_view text);
  // Updates the exporter's state once an entry is written; a failed write ends the export.
  Status record(Status written, std::string stored, std::string_view index_text);

  zip::Writer writer_;
  std::vector<std::string> names_;  // as written, in order
  std::unordered_set<std::string> written_;
  std::string model_index_;
  bool have_index_ = false;
  std::optional<Error> failed_;
};

// Packs a diffusers folder: regular files with an allowed extension at most one folder deep, the
// index first, then sorted names. Names and structure are checked before the first byte is written; an
// output that is one of the files packed is refused (Exporter::add_file).
Status pack_folder(const std::string& folder, const std::string& path, const PackOptions& options = {});

// Writes every entry into `folder`, all or nothing: the folder is built beside it (a hidden sibling),
// every entry's CRC is checked while it is written, and only a complete folder is renamed into place.
// Nothing is ever written outside `folder`, whatever it or its surroundings contain (UnsafePath when
// `folder` itself is a symlink). A missing or empty folder is filled; a non-empty one is refused
// (InvalidArgument) unless `replace`, which swaps it as a whole for the new one (no stale files), and
// which refuses a folder that holds the archive being read (InvalidArgument: it would be removed).
// `threads` entries are written at once (0: one per core, at most 8). See src/dduf/unpack.cpp for what a kill -9
// can leave.
Status unpack(const Reader& reader, const std::string& folder, unsigned threads = 0, bool replace = false);

SAFEWEIGHTS_API_END
}  // namespace safeweights::dduf
