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
  return open(index_path, uncached_resolver(), backend, options);
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

}  // namespace safeweights::safetensors
