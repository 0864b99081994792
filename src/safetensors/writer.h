// The safetensors writer's internals that other files of the folder use: the reference writer's dtype order
// (its table is dtypes.cpp's spelling table), the planned sink of one file and the sharded writer. Internal.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/planned_sink.h"
#include "safeweights/error.h"
#include "safeweights/safetensors_writer.h"
#include "safeweights/tensor_type.h"

namespace safeweights::safetensors {

// The reference writer's sort key for a dtype (its enum's declaration order); 0 when safetensors
// cannot store the type.
int writer_sort_rank(TensorType type) noexcept;

// InvalidTensorView naming the tensor: its data is not the `nbytes` its shape and dtype take.
Error data_mismatch(const TensorData& tensor, std::uint64_t nbytes);

// The planned sink of one file, for create() and for the sharded writer, which commits its shards and
// index together (model/multi_file_sink.h). Layout::plan's refusals, naming `path`.
Result<std::unique_ptr<PlannedFileSink>> create_file(const std::string& path, std::vector<TensorDecl> tensors,
                                                     const std::optional<MetadataEntries>& metadata, bool durable);

// Where and how a sharded checkpoint is written: `folder`/`prefix`-0000K-of-0000N.safetensors and
// `prefix`.safetensors.index.json. With one shard and !index_when_one, `prefix`.safetensors alone, as
// transformers saves a small model.
struct ShardedTarget {
  std::string folder;  // empty: the current folder
  std::string prefix = "model";
  bool index_when_one = true;
};

// The sink of a sharded checkpoint: the tensors cut into shards in the given order (plan_parts, on
// their data bytes), each shard a planned safetensors file with `shard_metadata`, and the index
// (transformers' bytes) written and committed after the shards, all or none.
Result<std::unique_ptr<TensorSink>> create_sharded(const ShardedTarget& target, std::vector<TensorDecl> tensors,
                                                   const std::optional<MetadataEntries>& shard_metadata, const SplitLimits& limits, bool durable);

}  // namespace safeweights::safetensors
