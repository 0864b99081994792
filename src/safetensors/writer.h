// The safetensors writer's internals that other files of the folder use: the reference writer's dtype order
// (its table is dtypes.cpp's spelling table) and the uncommitted write the sharded writer commits. Internal.
#pragma once

#include <cstdint>
#include <span>

#include "safeweights/atomic_file.h"
#include "safeweights/tensor_type.h"
#include "safeweights/safetensors_writer.h"
#include "safeweights/error.h"

namespace safeweights::safetensors {

// The reference writer's sort key for a dtype (its enum's declaration order); 0 when safetensors
// cannot store the type.
int writer_sort_rank(TensorType type) noexcept;

// Writes a complete file into a temporary file beside `path` without renaming it into place, so a
// caller writing several files (shards) can commit them all only once every one has been written.
Result<AtomicFile> write_uncommitted(const std::string& path, std::span<const TensorData> tensors, const std::optional<MetadataEntries>& metadata,
                                     const WriteOptions& options);

}  // namespace safeweights::safetensors
