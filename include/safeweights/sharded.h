// safeweights/sharded.h — checkpoints split over several safetensors files plus an index.
//
// transformers saves large models as `model-00001-of-00003.safetensors`, ... together with
// `model.safetensors.index.json`: {"metadata": {"total_size": N}, "weight_map": {tensor: shard file}}.
// ShardedReader opens the index and every shard it names (each with the full safetensors checks) and
// presents one namespace of tensors. The index and the shards are opened through a Resolver, so a
// sharded checkpoint reads the same from a local folder and from URLs. It is strict: a shard file must be a plain file name in the index's
// folder, every tensor listed must be in the shard the index names, and every tensor in a shard must
// be listed for that shard. Writing is the registry's format "safetensors-index" (an output named
// PREFIX.safetensors.index.json: Format::create's sink, as convert() writes it); write_sharded() writes
// the same bytes from memory. Both cut the tensors into shards of at most max_shard_bytes of data the
// way transformers does (in the given order; a tensor larger than the limit gets a shard of its own)
// and commit the index after every shard, all files or none.
//
// Thread safety: ShardedReader is immutable after open(); its const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/export.h"
#include "safeweights/resolver.h"
#include "safeweights/safetensors.h"
#include "safeweights/safetensors_writer.h"

namespace safeweights::safetensors {
SAFEWEIGHTS_API_BEGIN

// A sharded checkpoint as a TensorFile: every shard's tensors, shard after shard; the index's metadata.
class ShardedReader final : public TensorFile {
 public:
  static Result<ShardedReader> open(const std::string& index_path, FileBackend backend = FileBackend::Mmap, const ReadOptions& options = {});
  // The same with the index and its shards opened through `resolver` (so over HTTP: shards are the
  // URLs beside the index's).
  static Result<ShardedReader> open(const std::string& index_path, const Resolver& resolver, FileBackend backend = FileBackend::Mmap,
                                    const ReadOptions& options = {});

  std::string_view format() const noexcept override { return "safetensors-index"; }
  const std::string& name() const noexcept override { return name_; }  // the index's path
  std::span<const TensorEntry> tensors() const noexcept override { return entries_; }
  const TensorEntry* find(std::string_view name) const noexcept override;
  const Metadata* metadata() const noexcept override { return &metadata_; }

  struct Location {
    const Reader* shard;
    const TensorInfo* info;
  };
  // The shard that holds a tensor, and its record there. TensorNotFound when absent.
  Result<Location> locate(std::string_view name) const;
  // All tensor names, sorted.
  const std::vector<std::string>& names() const noexcept { return names_; }
  const std::vector<Reader>& shards() const noexcept { return shards_; }
  const std::vector<std::string>& shard_files() const noexcept { return shard_files_; }
  // The index's "metadata" object with string values as they are and other values as JSON text.
  const std::map<std::string, std::string>& index_metadata() const noexcept { return index_metadata_; }

 private:
  std::string name_;
  std::vector<Reader> shards_;
  std::vector<std::string> shard_files_;
  std::vector<std::string> names_;
  std::map<std::string, std::size_t, std::less<>> shard_of_;  // tensor name -> index into shards_
  std::map<std::string, std::string> index_metadata_;
  std::vector<TensorEntry> entries_;
  std::vector<std::size_t> first_;  // index in entries_ of each shard's first tensor
  Metadata metadata_;               // index_metadata_ in TensorFile's form
};

struct ShardOptions {
  std::uint64_t max_shard_bytes = 5'000'000'000;  // transformers' default "5GB"
  std::string prefix = "model";                   // model-00001-of-00002.safetensors
  std::optional<MetadataEntries> shard_metadata = MetadataEntries{{"format", "pt"}};
  WriteOptions write;
};

struct ShardedWriteResult {
  std::vector<std::string> files;  // shard file names (in the folder), in order
  std::string index_file;          // empty when everything fit in one file (`{prefix}.safetensors`)
};

// Writes the tensors into `folder` (which must exist). With one shard the file is `{prefix}.safetensors`
// and no index is written, as transformers does.
Result<ShardedWriteResult> write_sharded(const std::string& folder, std::span<const TensorData> tensors, const ShardOptions& options = {});

SAFEWEIGHTS_API_END
}  // namespace safeweights::safetensors
