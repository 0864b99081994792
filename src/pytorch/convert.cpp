// Checkpoint -> safetensors: the reader's entries (already contiguous little-endian bytes) declared
// to the safetensors sink (safetensors::create) and copied with copy_tensors; --dedup leaves out names that are the
// same tensor as a kept one and records them in the metadata.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>

#include "core/status_macros.h"
#include "core/hash.h"
#include "pytorch/index.h"
#include "safeweights/cancel.h"
#include "safeweights/pytorch.h"
#include "safeweights/atomic_file.h"
#include "safeweights/safetensors_writer.h"
#include "safeweights/text.h"

namespace safeweights::pytorch {
namespace {

// The tensors of a checkpoint that are written: all of them, or one per storage with --dedup.
class Selection final : public TensorFile {
 public:
  Selection(const Checkpoint& from, std::vector<TensorEntry> entries, MetadataEntries metadata)
      : from_(from), entries_(std::move(entries)), metadata_(std::move(metadata)) {
    for (std::size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].name, i);
  }
  std::string_view format() const noexcept override { return from_.format(); }
  const std::string& name() const noexcept override { return from_.name(); }
  std::span<const TensorEntry> tensors() const noexcept override { return entries_; }
  const TensorEntry* find(std::string_view n) const noexcept override {
    auto it = index_.find(n);
    return it == index_.end() ? nullptr : &entries_[it->second];
  }
  const MetadataEntries* metadata() const noexcept override { return &metadata_; }

 private:
  const Checkpoint& from_;
  std::vector<TensorEntry> entries_;
  MetadataEntries metadata_;
  std::unordered_map<std::string_view, std::size_t, SeededHash> index_;
};

// A name is an alias when it is the same tensor as the kept one of its storage: both cover the whole
// storage with the same type and shape. The kept one is the smallest such name (as safetensors'
// convert.py chooses); views of other shapes are written with their own contents.
Selection select(const Checkpoint& c, bool dedup) {
  MetadataEntries metadata = c.metadata() ? *c.metadata() : MetadataEntries{};
  std::vector<TensorEntry> kept;
  if (!dedup) return Selection(c, std::vector<TensorEntry>(c.tensors().begin(), c.tensors().end()), metadata);
  std::unordered_map<std::string_view, const TensorEntry*, SeededHash> keeper;  // storage -> kept entry
  for (const TensorEntry& e : c.tensors()) {
    if (!c.covers_storage(e)) continue;
    auto [it, fresh] = keeper.emplace(c.storage_of(e), &e);
    if (!fresh && e.name < it->second->name) it->second = &e;
  }
  std::map<std::string, std::string> aliases;
  for (const TensorEntry& e : c.tensors()) {
    auto it = keeper.find(c.storage_of(e));
    const TensorEntry* k = it == keeper.end() ? nullptr : it->second;
    if (k && k != &e && c.covers_storage(e) && k->type == e.type && std::ranges::equal(k->shape, e.shape)) {
      aliases.emplace(std::string(e.name), std::string(k->name));
      continue;
    }
    kept.push_back(e);
  }
  for (auto& [alias, name] : aliases) metadata.emplace_back(alias, name);
  return Selection(c, std::move(kept), std::move(metadata));
}

// Forwards to the writer, reporting progress after each tensor, releasing its input pages, and
// checking for cancellation.
class ProgressSink final : public TensorSink {
 public:
  ProgressSink(TensorSink& to, const Selection& from, const ConvertOptions& options) : to_(to), from_(from), options_(options) {}
  Status write(std::string_view name, std::span<const std::byte> data) override { return to_.write(name, data); }
  Status write_chunk(std::string_view name, std::span<const std::byte> chunk) override {
    SW_RETURN_IF_ERROR(check_cancelled());
    SW_RETURN_IF_ERROR(to_.write_chunk(name, chunk));
    bytes_ += chunk.size();
    if (const TensorEntry* e = from_.find(name); e && (written_ += chunk.size()) == e->nbytes) {
      written_ = 0;
      ++tensors_;
      // Done with its pages: a mapped input then holds at most one tensor in memory (they stay in
      // the page cache, so a view of the same storage later faults them back cheaply).
      e->source->hint({e->offset, e->nbytes}, AccessHint::DontNeed);
      if (options_.progress) options_.progress(tensors_, bytes_);
    }
    return Status::ok();
  }
  Status finish() override { return to_.finish(); }

 private:
  TensorSink& to_;
  const Selection& from_;
  const ConvertOptions& options_;
  std::uint64_t bytes_ = 0;
  std::uint64_t written_ = 0;  // of the current tensor
  std::size_t tensors_ = 0;
};

// Converts one file; the names written and their bytes.
struct Written {
  std::vector<std::string> names;
  std::uint64_t bytes = 0;
};

// `shard`: one file of a folder's index, which must be a checkpoint itself (never another index).
Result<Written> convert_file(const std::string& input, const std::string& output, const ConvertOptions& options, bool shard = false) {
  SW_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint,
                      shard ? open_checkpoint(input, options.read) : open_checkpoint_or_index(input, options.read));
  if (options.opened) options.opened(input, checkpoint->opened_key());
  const Selection selection = select(*checkpoint, options.dedup);
  Written written;
  for (const TensorEntry& e : selection.tensors()) {
    written.names.emplace_back(e.name);
    written.bytes += e.nbytes;
  }
  std::vector<TensorDecl> decls;
  decls.reserve(selection.tensors().size());
  for (const TensorEntry& e : selection.tensors())
    decls.push_back({std::string(e.name), e.type, std::vector<std::uint64_t>(e.shape.begin(), e.shape.end())});
  safetensors::WriteOptions write;
  write.durable = options.durable;
  SW_ASSIGN_OR_RETURN(std::unique_ptr<TensorSink> writer, safetensors::create(output, std::move(decls), *selection.metadata(), write));
  ProgressSink sink(*writer, selection, options);
  if (Status s = copy_tensors(selection, sink); !s.is_ok()) return error_of(s).with_file(input);
  return written;
}

// pytorch_model-00001-of-00002.bin -> model-00001-of-00002.safetensors (what the Hub's conversion names them).
Result<std::string> safetensors_name(const std::string& bin) {
  constexpr std::string_view kPrefix = "pytorch_model", kExt = ".bin";
  SW_RETURN_IF_ERROR(check_shard_name(bin));
  std::string out = bin;
  if (out.starts_with(kPrefix)) out = "model" + out.substr(kPrefix.size());
  if (out.ends_with(kExt)) out.resize(out.size() - kExt.size());
  return out + ".safetensors";
}

// transformers' json.dumps(index, indent=2, sort_keys=True).
std::string index_json(const std::map<std::string, std::string>& metadata, const std::map<std::string, std::string>& weight_map) {
  std::string out = "{\n  \"metadata\": {";
  bool first = true;
  for (const auto& [k, v] : metadata) {
    out += std::string(first ? "\n    " : ",\n    ") + json_quote(k) + ": " + (k == "total_size" ? v : json_quote(v));
    first = false;
  }
  out += "\n  },\n  \"weight_map\": {";
  first = true;
  for (const auto& [k, v] : weight_map) {
    out += std::string(first ? "\n    " : ",\n    ") + json_quote(k) + ": " + json_quote(v);
    first = false;
  }
  return out + "\n  }\n}\n";
}

// Removes the files a failed folder conversion committed (added only once committed, so a file that
// was there before and is left untouched by a failed write is never removed), then the folders it
// created (innermost first, each only if empty), unless disarmed.
struct Cleanup {
  std::vector<std::string> files;
  std::vector<std::filesystem::path> created;  // innermost first
  bool armed = true;
  ~Cleanup() {
    if (!armed) return;
    for (const std::string& f : files) std::remove(f.c_str());
    std::error_code ec;
    for (const auto& dir : created)
      if (!std::filesystem::remove(dir, ec)) break;
  }
};

// The folders create_directories(folder) would create, innermost first. The path as given, not its
// lexical normal form: for `out/../x` create_directories makes `out` too.
std::vector<std::filesystem::path> missing_folders(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  std::filesystem::path start = folder;
  while (!start.empty() && !start.has_filename()) start = start.parent_path();  // a trailing '/'
  for (std::filesystem::path p = start; !p.empty() && !std::filesystem::exists(p, ec) && !ec; p = p.parent_path()) {
    if (p.has_filename() && p.filename() != "." && p.filename() != "..") out.push_back(p);  // `x/..` is not made
    if (p == p.parent_path()) break;
  }
  return out;
}

}  // namespace

Status convert_to_safetensors(const std::string& input, const std::string& output, const ConvertOptions& options) {
  return convert_file(input, output, options).status();
}

Result<std::vector<std::string>> convert_folder(const std::string& input_folder, const std::string& output_folder, const ConvertOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string index_path = input_folder + "/pytorch_model.bin.index.json";
  const std::string single = input_folder + "/pytorch_model.bin";
  const bool sharded = fs::exists(index_path, ec);
  if (!sharded && !fs::exists(single, ec))
    return Error(ErrorKind::FileNotFound, "neither pytorch_model.bin nor pytorch_model.bin.index.json in the folder").with_file(input_folder);
  Cleanup cleanup;
  cleanup.created = missing_folders(output_folder);
  fs::create_directories(output_folder, ec);
  if (ec) return Error(ErrorKind::IoError, "cannot create the output folder: " + ec.message()).with_file(output_folder);
  std::vector<std::string> written_files;
  if (!sharded) {
    SW_RETURN_IF_ERROR(convert_file(single, output_folder + "/model.safetensors", options).status());
    cleanup.armed = false;
    return std::vector<std::string>{"model.safetensors"};
  }
  SW_ASSIGN_OR_RETURN(HfIndex index, read_bin_index(index_path, plain_resolver()));
  std::map<std::string, std::set<std::string>> shards;  // shard file -> tensors the index puts there
  for (const auto& [tensor, file] : index.weight_map) shards[file].insert(tensor);
  std::map<std::string, std::string> weight_map;
  std::uint64_t total = 0;
  for (const auto& [bin, listed] : shards) {
    SW_ASSIGN_OR_RETURN(std::string name, safetensors_name(bin));
    auto done = convert_file(input_folder + "/" + bin, output_folder + "/" + name, options, /*shard=*/true);
    if (!done.is_ok()) return std::move(done).error();
    cleanup.files.push_back(output_folder + "/" + name);
    for (const std::string& tensor : done->names) {
      if (!listed.contains(tensor))
        return Error(ErrorKind::InvalidIndex, "tensor `" + tensor + "` of shard `" + bin + "` is not listed for it in the index")
            .with_file(index_path);
      weight_map[tensor] = name;
    }
    for (const std::string& tensor : listed)
      if (!weight_map.contains(tensor) && !options.dedup)
        return Error(ErrorKind::InvalidIndex, "the index lists `" + tensor + "` in `" + bin + "`, which does not hold it").with_file(index_path);
    total += done->bytes;
    written_files.push_back(name);
  }
  std::map<std::string, std::string> metadata(index.metadata.begin(), index.metadata.end());
  metadata["total_size"] = std::to_string(total);
  const std::string json = index_json(metadata, weight_map);
  SW_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::create(output_folder + "/model.safetensors.index.json", {json.size(), options.durable}));
  SW_RETURN_IF_ERROR(file.append(std::as_bytes(std::span<const char>(json.data(), json.size()))));
  SW_RETURN_IF_ERROR(file.commit());
  cleanup.armed = false;
  written_files.push_back("model.safetensors.index.json");
  return written_files;
}

}  // namespace safeweights::pytorch
