// DDUF on top of the strict ZIP layer: huggingface_hub's rules in its order, then ours.
#include "safeweights/dduf.h"

#include <algorithm>
#include <filesystem>
#include <span>

#include "core/status_macros.h"
#include "io/input_files.h"
#include "io/read_util.h"
#include "json/dom.h"
#include "json/json_parse.h"

namespace safeweights::dduf {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kMaxModelIndex = 16u << 20;

Error corrupted(std::string message) { return Error(ErrorKind::DDUFCorruptedFile, std::move(message)); }
Error export_error(std::string message) { return Error(ErrorKind::DDUFExport, std::move(message)); }

// The ZIP writer's own failures (an entry's source ended early) are export failures to DDUF callers,
// as huggingface_hub raises DDUFExportError; the ZIP layer itself knows nothing of DDUF.
Status as_export_error(Status s) {
  if (s.is_ok() || s.error().kind() != ErrorKind::ZipWrite) return s;
  const ErrorContext& ctx = s.error().context();
  Error out(ErrorKind::DDUFExport, s.error().message());
  if (!ctx.file.empty()) out.with_file(ctx.file);
  if (!ctx.entry.empty()) out.with_entry(ctx.entry);
  if (!ctx.tensor.empty()) out.with_tensor(ctx.tensor);
  if (ctx.offset) out.with_offset(*ctx.offset);
  return out;
}

constexpr std::uint64_t kMaxJsonEntry = 256u << 20;

// The model_index.json to export, from the file at `path`; errors name `where` (the archive being
// written, or the folder being packed), as every export error does.
Result<std::string> read_model_index(const std::string& path, const std::string& where) {
  auto text = read_small_file(path, kMaxModelIndex);
  if (!text.is_ok() && text.error().kind() == ErrorKind::ResourceLimit) {
    return export_error("model_index.json larger than 16 MiB").with_file(where);
  }
  return text;
}

std::string config_file_list() {
  std::string s = "{";
  for (std::size_t i = 0; i < kFolderConfigFiles.size(); ++i) {
    s += (i ? ", '" : "'") + std::string(kFolderConfigFiles[i]) + "'";
  }
  return s + "}";
}

// The longest file or folder name Linux filesystems take (NAME_MAX): a longer path part cannot be
// unpacked anywhere.
constexpr std::size_t kMaxNamePart = 255;

// Rules beyond the reference's, for a name that passed them: every path part non-empty, not `.` or
// `..`, at most kMaxNamePart bytes, and nothing to strip (the reference strips a leading or trailing
// '/' and keys by the raw name).
Status check_strict_name(std::string_view raw) {
  if (!raw.empty() && (raw.front() == '/' || raw.back() == '/')) {
    return Error(ErrorKind::DDUFInvalidEntryName, "entry name may not start or end with '/': " + std::string(raw));
  }
  std::size_t start = 0;
  for (std::size_t i = 0; i <= raw.size(); ++i) {
    if (i == raw.size() || raw[i] == '/') {
      std::string_view part = raw.substr(start, i - start);
      if (part.empty() || part == "." || part == "..") {
        return Error(ErrorKind::DDUFInvalidEntryName, "entry name has an empty, '.' or '..' path part: " + std::string(raw));
      }
      if (part.size() > kMaxNamePart) {
        return Error(ErrorKind::DDUFInvalidEntryName, "entry name has a path part of " + std::to_string(part.size()) +
                                                          " bytes; no filesystem takes more than 255: " + std::string(raw.substr(0, 64)) + "...");
      }
      start = i + 1;
    }
  }
  return Status::ok();
}

// The component folders of `names` (what comes before a '/'), each once, sorted (so the first error
// found among them does not depend on the archive's order).
std::vector<std::string_view> folders_of(std::span<const std::string_view> names) {
  json::KeySet folders;
  for (std::string_view n : names) {
    if (const auto slash = n.find('/'); slash != std::string_view::npos) folders.insert(n.substr(0, slash));
  }
  std::vector<std::string_view> sorted = folders.keys();
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

// Names that a folder cannot hold together: a root file with the name of a component folder (such as a
// folder `model_index.json/`). The reference keys entries by name and accepts this; unpacking cannot.
// `folders`: folders_of(names).
Status check_file_folder_clash(std::span<const std::string_view> names, std::span<const std::string_view> folders) {
  json::KeySet files;
  files.reserve(names.size());
  for (std::string_view n : names) {
    if (n.find('/') == std::string_view::npos) files.insert(n);
  }
  for (std::string_view f : folders) {
    if (files.contains(f)) return corrupted("'" + std::string(f) + "' is both a file and a folder").with_entry(f);
  }
  return Status::ok();
}

// validate_entry_name without a copy: the name with its outer slashes removed, a view into `name`.
Result<std::string_view> checked_entry_name(std::string_view name) {
  // "." + name.split(".")[-1]: a name without a dot is its own extension, so a bare `json` passes.
  const std::size_t dot = name.rfind('.');
  const std::string_view after_dot = dot == std::string_view::npos ? name : name.substr(dot + 1);
  const bool allowed =
      std::any_of(kAllowedExtensions.begin(), kAllowedExtensions.end(), [&](std::string_view ext) { return ext.substr(1) == after_dot; });
  if (!allowed) return Error(ErrorKind::DDUFInvalidEntryName, "File type not allowed: " + std::string(name));
  if (name.find('\\') != std::string_view::npos) {
    return Error(ErrorKind::DDUFInvalidEntryName, "Entry names must use UNIX separators ('/'). Got " + std::string(name) + ".");
  }
  std::string_view stripped = name;
  while (!stripped.empty() && stripped.front() == '/') stripped.remove_prefix(1);
  while (!stripped.empty() && stripped.back() == '/') stripped.remove_suffix(1);
  if (std::count(stripped.begin(), stripped.end(), '/') > 1) {
    return Error(ErrorKind::DDUFInvalidEntryName, "DDUF only supports 1 level of directory. Got " + std::string(name) + ".");
  }
  return stripped;
}

std::vector<std::string_view> views_of(const std::vector<std::string>& names) { return {names.begin(), names.end()}; }

bool has_extension(std::string_view name, std::string_view ext) { return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext; }

// `folders`: folders_of(names).
Status check_structure(std::string_view model_index, std::span<const std::string_view> names, std::span<const std::string_view> folders) {
  json::TopLevel top;
  if (auto s = json::read_top_level(model_index, top); !s.is_ok()) {
    return corrupted("Invalid 'model_index.json': " + s.error().message());
  }
  if (top.python_type != "dict") {
    return corrupted("Invalid 'model_index.json' content. Must be a dictionary. Got <class '" + top.python_type + "'>.");
  }
  json::KeySet keys, present;
  for (const std::string& k : top.keys) keys.insert(k);
  present.reserve(names.size());
  for (std::string_view n : names) present.insert(n);
  std::string config;
  for (std::string_view folder : folders) {
    if (!keys.contains(folder)) return corrupted("Missing required entry '" + std::string(folder) + "' in 'model_index.json'.");
    bool has_config = false;
    for (auto cfg : kFolderConfigFiles) {
      config.assign(folder).append("/").append(cfg);
      has_config = has_config || present.contains(config);
    }
    if (!has_config) {
      return corrupted("Missing required file in folder '" + std::string(folder) + "'. Must contains at least one of " + config_file_list() + ".");
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::string> validate_entry_name(std::string_view name) {
  SW_ASSIGN_OR_RETURN(std::string_view stripped, checked_entry_name(name));
  return std::string(stripped);
}

Status validate_structure(std::string_view model_index, const std::vector<std::string>& names) {
  const std::vector<std::string_view> views = views_of(names);
  return check_structure(model_index, views, folders_of(views));
}

Result<Reader> Reader::open(const std::string& path, FileBackend backend) {
  SW_ASSIGN_OR_RETURN(SourcePtr source, open_file(path, backend));
  return open(std::move(source));
}

Result<Reader> Reader::open(SourcePtr source) {
  const std::string name = source->name();
  SW_ASSIGN_OR_RETURN(zip::Archive archive, zip::Archive::open(std::move(source)));
  Reader reader(std::move(archive));
  auto fail = [&](Error e) -> Result<Reader> { return std::move(e.with_file(name)); };

  // Per entry, in central-directory order: stored only, then the name rules.
  std::optional<Error> strict;
  // Names are views into the archive's one copy of the central directory, which the Reader keeps.
  std::vector<std::string_view> names;
  names.reserve(reader.archive_.entries().size());
  reader.entries_.reserve(reader.archive_.entries().size());
  for (const zip::Entry& e : reader.archive_.entries()) {
    if (e.method != 0) return fail(corrupted("Data must not be compressed in DDUF file.").with_entry(e.name));
    auto valid = checked_entry_name(e.name);
    if (!valid.is_ok()) {
      return fail(
          Error(ErrorKind::DDUFInvalidEntryName, "Invalid entry name in DDUF file: " + std::string(e.name) + " (" + valid.error().message() + ")")
              .with_entry(e.name));
    }
    if (!strict) {
      if (auto s = check_strict_name(e.name); !s.is_ok()) strict = error_of(s).with_entry(e.name);
    }
    reader.entries_.push_back({std::string(e.name), e.data_offset, e.size});
    names.push_back(e.name);
  }
  const zip::Entry* index = reader.archive_.find(kModelIndex);
  if (!index) return fail(corrupted("Missing required 'model_index.json' entry in DDUF file."));
  if (index->size > kMaxModelIndex) return fail(Error(ErrorKind::ResourceLimit, "model_index.json larger than 16 MiB").with_entry(kModelIndex));
  reader.model_index_.resize(static_cast<std::size_t>(index->size));
  SW_RETURN_IF_ERROR(reader.archive_.source()->read_at(
      index->data_offset, std::as_writable_bytes(std::span<char>(reader.model_index_.data(), reader.model_index_.size()))));
  const std::vector<std::string_view> folders = folders_of(names);
  if (auto s = check_structure(reader.model_index_, names, folders); !s.is_ok()) return fail(error_of(s).with_entry(kModelIndex));

  // Our stricter rules, only now: everything that would stop `unpack` is found here.
  if (strict) return fail(std::move(*strict));
  if (auto s = check_file_folder_clash(names, folders); !s.is_ok()) return fail(std::move(s.error()));
  json::TopLevel top;
  (void)json::read_top_level(reader.model_index_, top);  // already validated above
  if (top.duplicate_key) {
    return fail(Error(ErrorKind::DuplicateKey, "model_index.json repeats the key '" + *top.duplicate_key + "'").with_entry(kModelIndex));
  }
  reader.components_.assign(folders.begin(), folders.end());
  return reader;
}

const Entry* Reader::find(std::string_view filename) const noexcept {
  const zip::Entry* e = archive_.find(filename);
  if (!e) return nullptr;
  return &entries_[static_cast<std::size_t>(e - archive_.entries().data())];
}

Result<SourcePtr> Reader::open_entry(std::string_view filename) const {
  const zip::Entry* e = archive_.find(filename);
  if (!e) {
    return Error(ErrorKind::InvalidArgument, "no entry named `" + std::string(filename) + "`").with_file(name()).with_entry(filename);
  }
  return archive_.open_entry(*e);
}

Result<safetensors::Reader> Reader::open_safetensors(std::string_view filename, const safetensors::ReadOptions& options) const {
  SW_ASSIGN_OR_RETURN(SourcePtr source, open_entry(filename));
  auto reader = safetensors::Reader::open(std::move(source), options);
  if (!reader.is_ok()) {
    Error e = std::move(reader).error();
    // The entry source is named "archive!entry"; report the archive and the entry separately.
    ErrorContext ctx = e.context();
    Error out(e.kind(), e.message());
    out.with_file(name()).with_entry(filename);
    if (!ctx.tensor.empty()) out.with_tensor(ctx.tensor);
    if (ctx.offset) out.with_offset(*ctx.offset);
    return out;
  }
  return reader;
}

Status Reader::verify(const VerifyOptions& options) const {
  if (options.crc) SW_RETURN_IF_ERROR(archive_.verify_all_crcs(options.threads));
  if (!options.contents) return Status::ok();
  for (const Entry& e : entries_) {
    if (has_extension(e.filename, ".safetensors")) {
      auto r = open_safetensors(e.filename);
      if (!r.is_ok()) return std::move(r).status();
    } else if (has_extension(e.filename, ".json")) {
      SW_ASSIGN_OR_RETURN(SourcePtr src, open_entry(e.filename));
      auto read = read_small(*src, kMaxJsonEntry);
      if (!read.is_ok()) return error_of(read).with_file(name()).with_entry(e.filename);
      const std::string text = std::move(read).value();
      if (auto s = json::validate_json(text); !s.is_ok()) {
        return Error(ErrorKind::DDUFCorruptedFile, "entry is not valid JSON: " + s.error().message()).with_file(name()).with_entry(e.filename);
      }
    }
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------------
// Writing

Result<Exporter> Exporter::create(const std::string& path, const PackOptions& options) {
  zip::WriterOptions w;
  w.alignment = options.reference_layout ? 0 : options.alignment;
  w.align_entry = [](std::string_view name) { return has_extension(name, ".safetensors"); };
  w.durable = options.durable;
  if (options.progress) {
    auto progress = options.progress;
    w.progress = [progress](std::uint64_t done) { progress(done, 0); };
  }
  SW_ASSIGN_OR_RETURN(zip::Writer writer, zip::Writer::create(path, std::move(w)));
  return Exporter(std::move(writer));
}

Result<std::string> Exporter::admit(std::string_view name) {
  auto valid = validate_entry_name(name);
  if (!valid.is_ok()) {
    return Error(ErrorKind::DDUFInvalidEntryName, "Invalid entry name: " + std::string(name) + " (" + valid.error().message() + ")")
        .with_file(writer_.path())
        .with_entry(name);
  }
  std::string stored = std::move(valid).value();
  // Duplicates are judged on the name as written, so `/a.json` and `a.json` cannot both slip in.
  if (written_.count(stored)) {
    return export_error("Can't add duplicate entry: " + std::string(name)).with_file(writer_.path()).with_entry(name);
  }
  if (auto s = check_strict_name(stored); !s.is_ok()) return error_of(s).with_file(writer_.path());
  return stored;
}

Status Exporter::check_index(std::string_view name, std::string_view text) {
  if (name != kModelIndex) return Status::ok();
  json::TopLevel top;
  if (!json::read_top_level(text, top).is_ok()) return export_error("Failed to parse 'model_index.json'.").with_file(writer_.path());
  return Status::ok();
}

Status Exporter::record(Status written, std::string stored, std::string_view index_text) {
  written = as_export_error(std::move(written));
  if (!written.is_ok()) {
    // Bytes of a failed entry may already be in the file: the export cannot be completed.
    failed_ = written.error();
    return written;
  }
  if (stored == kModelIndex) {
    have_index_ = true;
    model_index_ = std::string(index_text);
  }
  written_.insert(stored);
  names_.push_back(std::move(stored));
  return Status::ok();
}

Status Exporter::add_bytes(std::string_view name, std::span<const std::byte> bytes) {
  if (failed_) return Error(failed_->kind(), "an earlier entry failed: " + failed_->message());
  SW_ASSIGN_OR_RETURN(std::string stored, admit(name));
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  SW_RETURN_IF_ERROR(check_index(stored, text));
  Status written = writer_.add_bytes(stored, bytes);
  return record(std::move(written), std::move(stored), text);
}

Status Exporter::add_file(std::string_view name, const std::string& path) {
  if (failed_) return Error(failed_->kind(), "an earlier entry failed: " + failed_->message());
  // The archive must not replace a file it packs (committing it would).
  InputFiles packed;
  packed.add(path);
  SW_RETURN_IF_ERROR(packed.check_output(writer_.path()));
  SW_ASSIGN_OR_RETURN(std::string stored, admit(name));
  std::string text;
  if (stored == kModelIndex) {
    SW_ASSIGN_OR_RETURN(text, read_model_index(path, writer_.path()));
    SW_RETURN_IF_ERROR(check_index(stored, text));
  }
  Status written = writer_.add_file(stored, path);
  return record(std::move(written), std::move(stored), text);
}

Status Exporter::add_stream(std::string_view name, std::uint64_t size, const zip::Producer& producer) {
  if (failed_) return Error(failed_->kind(), "an earlier entry failed: " + failed_->message());
  SW_ASSIGN_OR_RETURN(std::string stored, admit(name));
  if (stored != kModelIndex) {
    Status written = writer_.add_stream(stored, size, producer);
    return record(std::move(written), std::move(stored), {});
  }
  // The index is small: collect it while it streams through, then check it. Its bytes are in the file
  // by then, so a bad index ends the export.
  if (size > kMaxModelIndex) return export_error("model_index.json larger than 16 MiB").with_file(writer_.path());
  std::string text;
  Status written = writer_.add_stream(stored, size, [&](std::span<std::byte> chunk) -> Result<std::size_t> {
    SW_ASSIGN_OR_RETURN(std::size_t n, producer(chunk));
    text.append(reinterpret_cast<const char*>(chunk.data()), std::min(n, chunk.size()));
    return n;
  });
  if (written.is_ok()) written = check_index(stored, text);
  return record(std::move(written), std::move(stored), text);
}

Status Exporter::finish() {
  if (failed_) return Error(failed_->kind(), "an earlier entry failed: " + failed_->message());
  if (!have_index_) return export_error("Missing required 'model_index.json' entry in DDUF file.").with_file(writer_.path());
  const std::vector<std::string_view> names = views_of(names_), folders = folders_of(names);
  if (auto s = check_structure(model_index_, names, folders); !s.is_ok()) {
    return export_error("Invalid DDUF file structure. " + s.error().message()).with_file(writer_.path());
  }
  if (auto s = check_file_folder_clash(names, folders); !s.is_ok()) {
    return export_error("Invalid DDUF file structure. " + s.error().message()).with_file(writer_.path());
  }
  return writer_.finish();
}

Status pack_folder(const std::string& folder, const std::string& path, const PackOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return Error(ErrorKind::FileNotFound, "not a folder").with_file(folder);

  // Collect and check everything before writing: the reference's selection (regular files, allowed
  // suffix, at most one folder deep), then the name rules and the structure.
  std::vector<std::pair<std::string, std::string>> files;  // (entry name, path)
  std::uint64_t total = 0;
  for (auto it = fs::recursive_directory_iterator(folder, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() >= 1) it.disable_recursion_pending();
    std::error_code e2;
    if (!it->is_regular_file(e2)) continue;
    fs::path rel = it->path().lexically_relative(folder);
    std::string suffix = it->path().filename().extension().string();
    if (std::find(kAllowedExtensions.begin(), kAllowedExtensions.end(), suffix) == kAllowedExtensions.end()) continue;
    files.emplace_back(rel.generic_string(), it->path().string());
    total += it->file_size(e2);
  }
  if (ec) return Error(ErrorKind::IoError, "cannot list folder: " + ec.message()).with_file(folder);
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) {
    if ((a.first == kModelIndex) != (b.first == kModelIndex)) return a.first == kModelIndex;
    return a.first < b.first;
  });
  std::vector<std::string> names;
  for (const auto& [name, file] : files) {
    auto valid = validate_entry_name(name);
    if (!valid.is_ok())
      return Error(ErrorKind::DDUFInvalidEntryName, "Invalid entry name: " + name + " (" + valid.error().message() + ")").with_file(folder);
    if (auto s = check_strict_name(name); !s.is_ok()) return error_of(s).with_file(folder);
    names.push_back(name);
  }
  if (files.empty() || files.front().first != kModelIndex)
    return export_error("Missing required 'model_index.json' entry in DDUF file.").with_file(folder);
  {
    SW_ASSIGN_OR_RETURN(std::string text, read_model_index(files.front().second, folder));
    json::TopLevel top;
    if (!json::read_top_level(text, top).is_ok()) return export_error("Failed to parse 'model_index.json'.").with_file(folder);
    if (auto s = validate_structure(text, names); !s.is_ok())
      return export_error("Invalid DDUF file structure. " + s.error().message()).with_file(folder);
  }

  PackOptions opts = options;
  if (options.progress) {
    auto progress = options.progress;
    opts.progress = [progress, total](std::uint64_t done, std::uint64_t) { progress(done, total); };
  }
  SW_ASSIGN_OR_RETURN(Exporter exporter, Exporter::create(path, opts));
  for (const auto& [name, file] : files) SW_RETURN_IF_ERROR(exporter.add_file(name, file));
  return exporter.finish();
}

}  // namespace safeweights::dduf
