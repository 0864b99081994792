// Sharded checkpoints written as transformers saves them: the shards, then the index that names them.
#include <algorithm>
#include <cstdio>
#include <unordered_set>

#include "core/status_macros.h"
#include "model/hf_index.h"
#include "model/multi_file_sink.h"
#include "safeweights/sharded.h"
#include "safetensors/writer.h"

namespace safeweights::safetensors {
namespace {

std::string in_folder(const std::string& folder, const std::string& name) { return folder.empty() ? name : folder + "/" + name; }

std::string shard_name(const std::string& prefix, std::size_t k, std::size_t count) {
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, "-%05zu-of-%05zu.safetensors", k + 1, count);
  return prefix + suffix;
}

}  // namespace

Result<std::unique_ptr<TensorSink>> create_sharded(const ShardedTarget& target, std::vector<TensorDecl> tensors,
                                                   const std::optional<MetadataEntries>& shard_metadata, const SplitLimits& limits, bool durable) {
  const std::string index_name = target.prefix + ".safetensors.index.json";
  const auto fail = [&](Error e) { return Result<std::unique_ptr<TensorSink>>(std::move(e.with_file(in_folder(target.folder, index_name)))); };
  // Names must be unique across the whole checkpoint, not just within each shard.
  std::vector<std::uint64_t> sizes(tensors.size());
  std::uint64_t total = 0;
  {
    std::unordered_set<std::string_view> names;
    names.reserve(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (!names.insert(tensors[i].name).second)
        return fail(std::move(Error(ErrorKind::DuplicateKey, "tensor name given more than once").with_tensor(tensors[i].name)));
      auto nbytes = tensor_nbytes(tensors[i].dtype, tensors[i].shape);
      if (!nbytes.is_ok()) return fail(std::move(error_of(nbytes).with_tensor(tensors[i].name)));
      sizes[i] = *nbytes;
      if (__builtin_add_overflow(total, sizes[i], &total)) {
        return fail(std::move(Error(ErrorKind::ValidationOverflow, "the checkpoint's total size overflows 64 bits").with_tensor(tensors[i].name)));
      }
    }
  }
  auto starts = plan_parts(tensors, sizes, limits);
  if (!starts.is_ok()) return fail(std::move(starts).error());
  const std::size_t count = starts->size();

  if (count == 1 && !target.index_when_one) {
    SW_ASSIGN_OR_RETURN(auto sink,
                        create_file(in_folder(target.folder, target.prefix + ".safetensors"), std::move(tensors), shard_metadata, durable));
    return std::unique_ptr<TensorSink>(std::move(sink));
  }
  std::vector<std::string> names(count);
  std::vector<std::pair<std::string_view, std::string_view>> weight_map;
  weight_map.reserve(tensors.size());
  for (std::size_t k = 0; k < count; ++k) {
    names[k] = shard_name(target.prefix, k, count);
    const std::size_t end = k + 1 < count ? (*starts)[k + 1] : tensors.size();
    for (std::size_t i = (*starts)[k]; i < end; ++i) weight_map.emplace_back(tensors[i].name, names[k]);
  }
  IndexFile index{in_folder(target.folder, index_name), hf_index_text({{"total_size", std::to_string(total)}}, std::move(weight_map)), durable};

  std::vector<std::unique_ptr<PlannedFileSink>> parts;
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t begin = (*starts)[k], end = k + 1 < count ? (*starts)[k + 1] : tensors.size();
    std::vector<TensorDecl> part(std::make_move_iterator(tensors.begin() + static_cast<std::ptrdiff_t>(begin)),
                                 std::make_move_iterator(tensors.begin() + static_cast<std::ptrdiff_t>(end)));
    SW_ASSIGN_OR_RETURN(auto sink, create_file(in_folder(target.folder, names[k]), std::move(part), shard_metadata, durable));
    parts.push_back(std::move(sink));
  }
  return std::unique_ptr<TensorSink>(std::make_unique<MultiFileSink>(index.path, std::move(parts), std::move(index)));
}

Result<ShardedWriteResult> write_sharded(const std::string& folder, std::span<const TensorData> tensors, const ShardOptions& options) {
  if (options.max_shard_bytes == 0) return Error(ErrorKind::InvalidArgument, "max_shard_bytes must be positive");
  const ShardedTarget target{folder, options.prefix, /*index_when_one=*/false};
  SW_ASSIGN_OR_RETURN(auto sink, create_sharded(target, std::vector<TensorDecl>(tensors.begin(), tensors.end()), options.shard_metadata,
                                                SplitLimits{options.max_shard_bytes, 0}, options.write.durable));
  // Every tensor's bytes checked before any is written (the declarations are valid: create planned them).
  for (const TensorData& t : tensors) {
    const std::uint64_t nbytes = tensor_nbytes(t.dtype, t.shape).value();
    if (t.data.size() != nbytes) return std::move(data_mismatch(t, nbytes).with_file(folder));
  }
  for (const TensorData& t : tensors) SW_RETURN_IF_ERROR(sink->write(t.name, t.data));
  SW_RETURN_IF_ERROR(sink->finish());
  ShardedWriteResult result;
  const std::size_t skip = folder.empty() ? 0 : folder.size() + 1;
  for (const std::string& path : sink->files()) result.files.push_back(path.substr(skip));
  if (result.files.size() > 1) {
    result.index_file = std::move(result.files.back());
    result.files.pop_back();
  }
  return result;
}

}  // namespace safeweights::safetensors
