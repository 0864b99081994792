// Sharded checkpoints: transformers' `*.safetensors.index.json` plus its shard files.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/status_macros.h"
#include "core/utf8.h"
#include "io/read_util.h"
#include "model/hf_index.h"
#include "json/json_writer.h"
#include "safeweights/sharded.h"
#include "safetensors/writer.h"

namespace safeweights::safetensors {
namespace {

// A shard must be a plain file name next to the index: no folders, no way out of the folder.
Status check_shard_name(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos || name.find('\\') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    return Error(ErrorKind::InvalidIndex, "shard file name `" + name + "` must be a plain file name in the index's folder");
  }
  return Status::ok();
}

constexpr std::uint64_t kMaxIndexSize = 256u << 20;

}  // namespace

Result<ShardedReader> ShardedReader::open(const std::string& index_path, FileBackend backend, const ReadOptions& options) {
  return open(index_path, plain_resolver(), backend, options);
}

Result<ShardedReader> ShardedReader::open(const std::string& index_path, const Resolver& resolver, FileBackend backend, const ReadOptions& options) {
  SW_ASSIGN_OR_RETURN(SourcePtr index_source, resolver.open(index_path, FileBackend::Pread));
  auto text = read_small(*index_source, kMaxIndexSize);
  if (!text.is_ok()) return error_of(text).with_file(index_path);

  HfIndex raw;
  if (auto s = parse_hf_index(*text, raw); !s.is_ok()) {
    s.error().with_file(index_path);
    return std::move(s).error();
  }

  ShardedReader reader;
  reader.name_ = index_path;
  std::unordered_map<std::string, std::size_t> shard_index;
  for (const auto& [tensor, file] : raw.weight_map) {
    if (auto s = check_shard_name(file); !s.is_ok()) return error_of(s).with_file(index_path).with_tensor(tensor);
    auto [it, inserted] = shard_index.emplace(file, reader.shard_files_.size());
    if (inserted) reader.shard_files_.push_back(file);
    reader.shard_of_.emplace(tensor, it->second);
    reader.names_.push_back(tensor);
  }
  std::sort(reader.names_.begin(), reader.names_.end());
  for (auto& kv : raw.metadata) reader.index_metadata_.emplace(std::move(kv.first), std::move(kv.second));

  reader.shards_.reserve(reader.shard_files_.size());
  for (const std::string& file : reader.shard_files_) {
    SW_ASSIGN_OR_RETURN(SourcePtr source, resolver.open(sibling_name(index_path, file), backend));
    SW_ASSIGN_OR_RETURN(Reader shard, Reader::open(std::move(source), options));
    reader.shards_.push_back(std::move(shard));
  }

  // Both directions: every listed tensor is in its shard, every shard tensor is listed for that shard.
  for (const auto& [tensor, shard] : reader.shard_of_) {
    if (!reader.shards_[shard].header().find(tensor)) {
      return Error(ErrorKind::ShardMismatch, "the index lists this tensor in " + reader.shard_files_[shard] + ", which does not contain it")
          .with_file(index_path)
          .with_tensor(tensor);
    }
  }
  for (std::size_t s = 0; s < reader.shards_.size(); ++s) {
    for (const TensorInfo& info : reader.shards_[s].header().tensors()) {
      auto it = reader.shard_of_.find(info.name);
      if (it == reader.shard_of_.end() || it->second != s) {
        return Error(ErrorKind::ShardMismatch, "tensor in " + reader.shard_files_[s] + " is not listed for it in the index")
            .with_file(index_path)
            .with_tensor(info.name);
      }
    }
  }
  for (const Reader& shard : reader.shards_) {
    reader.first_.push_back(reader.entries_.size());
    for (const TensorInfo& info : shard.header().tensors()) reader.entries_.push_back(shard.entry(info));
  }
  reader.metadata_ = Metadata::from_string_map(MetadataEntries(reader.index_metadata_.begin(), reader.index_metadata_.end()));
  return reader;
}

Result<ShardedReader::Location> ShardedReader::locate(std::string_view name) const {
  auto it = shard_of_.find(name);
  if (it == shard_of_.end()) {
    auto missing = tensor(name);  // TensorFile's TensorNotFound, naming the index
    return error_of(missing);
  }
  const Reader& shard = shards_[it->second];
  return Location{&shard, shard.header().find(name)};
}

const TensorEntry* ShardedReader::find(std::string_view name) const noexcept {
  auto it = shard_of_.find(name);
  if (it == shard_of_.end()) return nullptr;
  const Header& header = shards_[it->second].header();
  return &entries_[first_[it->second] + static_cast<std::size_t>(header.find(name) - header.tensors().data())];
}

Result<ShardedWriteResult> write_sharded(const std::string& folder, std::span<const TensorData> tensors, const ShardOptions& options) {
  if (options.max_shard_bytes == 0) return Error(ErrorKind::InvalidArgument, "max_shard_bytes must be positive");
  // Names must be unique across the whole checkpoint, not just within each shard.
  {
    std::unordered_set<std::string_view> names;
    names.reserve(tensors.size());
    for (const TensorData& t : tensors) {
      if (!names.insert(t.name).second) {
        return Error(ErrorKind::DuplicateKey, "tensor name given more than once").with_tensor(t.name);
      }
    }
  }
  // Split in the given order, as transformers does: a tensor that would overflow the current shard
  // starts a new one; one larger than the limit gets a shard of its own.
  std::vector<std::vector<std::size_t>> groups;
  std::uint64_t current = 0, total = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::uint64_t size = tensors[i].data.size();
    if (groups.empty() || (current + size > options.max_shard_bytes && current > 0)) {
      groups.emplace_back();
      current = 0;
    }
    groups.back().push_back(i);
    current += size;
    total += size;
  }
  if (groups.empty()) groups.emplace_back();

  ShardedWriteResult result;
  std::vector<AtomicFile> pending;  // committed together once every shard is written
  const std::size_t count = groups.size();
  char name_buf[64];
  for (std::size_t g = 0; g < count; ++g) {
    std::string name;
    if (count == 1) {
      name = options.prefix + ".safetensors";
    } else {
      std::snprintf(name_buf, sizeof name_buf, "-%05zu-of-%05zu.safetensors", g + 1, count);
      name = options.prefix + name_buf;
    }
    std::vector<TensorData> part;
    part.reserve(groups[g].size());
    for (std::size_t i : groups[g]) part.push_back(tensors[i]);
    SW_ASSIGN_OR_RETURN(AtomicFile file, write_uncommitted(folder + "/" + name, part, options.shard_metadata, options.write));
    pending.push_back(std::move(file));
    result.files.push_back(name);
  }
  if (count == 1) {
    SW_RETURN_IF_ERROR(AtomicFile::commit_all(pending));
    return result;
  }

  // transformers writes json.dumps(index, indent=2, sort_keys=True) + "\n".
  std::vector<std::pair<std::string_view, std::size_t>> entries;
  for (std::size_t g = 0; g < count; ++g) {
    for (std::size_t i : groups[g]) entries.emplace_back(tensors[i].name, g);
  }
  std::sort(entries.begin(), entries.end());
  std::string json = "{\n  \"metadata\": {\n    \"total_size\": ";
  json::append_uint(json, total);
  json += "\n  },\n  \"weight_map\": {";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    json += i ? ",\n    " : "\n    ";
    append_json_string(json, entries[i].first);
    json += ": ";
    append_json_string(json, result.files[entries[i].second]);
  }
  json += "\n  }\n}\n";
  result.index_file = options.prefix + ".safetensors.index.json";
  auto file = AtomicFile::create(folder + "/" + result.index_file, {json.size(), options.write.durable});
  Status s = file.is_ok() ? file->append(std::as_bytes(std::span<const char>(json.data(), json.size()))) : std::move(file).status();
  if (!s.is_ok()) return std::move(s).error();
  // Shards and index are committed together (the index last), after one cancellation check.
  pending.push_back(std::move(file).value());
  SW_RETURN_IF_ERROR(AtomicFile::commit_all(pending));
  return result;
}

}  // namespace safeweights::safetensors
