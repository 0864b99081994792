// The index of a sharded PyTorch checkpoint (`pytorch_model.bin.index.json`: the safetensors index's
// schema, naming .bin shards), shared by the reader (open_checkpoint_index) and the folder converter.
// Internal to src/pytorch/.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "safeweights/error.h"
#include "safeweights/pytorch.h"
#include "safeweights/resolver.h"
#include "model/hf_index.h"

namespace safeweights::pytorch {

// transformers' index of .bin shards is a JSON object in a file named `*.bin.index.json`.
inline constexpr std::string_view kBinIndexSuffix = ".bin.index.json";
bool is_bin_index(std::span<const std::byte> head, std::string_view path);
// open_checkpoint_index() for such an index, open_checkpoint() for anything else.
Result<std::unique_ptr<Checkpoint>> open_checkpoint_or_index(const std::string& path, const FormatOptions& options);

// The index's weight map and metadata: InvalidIndex / DuplicateKey, ResourceLimit past 256 MiB.
Result<HfIndex> read_bin_index(const std::string& path, const Resolver& resolver);
// InvalidIndex unless `shard` is a plain file name (no folder, not `.` or `..`).
Status check_shard_name(const std::string& shard);

}  // namespace safeweights::pytorch
