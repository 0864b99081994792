// safeweights/pytorch.h — PyTorch checkpoints (`torch.save` files: the ZIP format of torch >= 1.6 and
// the legacy pickle stream before it) read without running a byte of pickle. convert() (safeweights/
// convert.h) writes them in any format; convert_bin_folder() converts a transformers folder of them.
//
// The checkpoint's pickle is interpreted by a machine that calls nothing: globals resolve only
// against an allowlist (OrderedDict, torch's tensor and parameter rebuild functions, storage types,
// dtypes and a few inert value constructors); anything else is an UnsafePickle error naming it, or,
// with allow_unknown, an inert placeholder. Tensors are rebuilt from storage, dtype, offset, size and
// stride with every bound checked; a view or a non-contiguous tensor reads as its row-major
// contents, and big-endian storages are swapped, so every TensorEntry's bytes are the contiguous
// little-endian bytes a converter writes. docs/PYTORCH.md says what is read and how it differs from
// torch.load(weights_only=True).
//
// Thread safety: a Checkpoint is immutable once opened (as every TensorFile).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/format.h"
#include "safeweights/resolver.h"
#include "safeweights/source.h"
#include "safeweights/tensor_file.h"

namespace safeweights::pytorch {
SAFEWEIGHTS_API_BEGIN

class Checkpoint : public TensorFile {
 public:
  // "zip" or "legacy".
  virtual std::string_view container() const noexcept = 0;
  // Names whose bytes live in one storage (tied weights, views): one group per storage holding two or
  // more tensors, names in tensors() order.
  virtual const std::vector<std::vector<std::string_view>>& shared() const noexcept = 0;
  // root(): the top-level key the tensors were read under; storage_of() and covers_storage() say which
  // tensors share a storage (TensorFile).
};

// InvalidCheckpoint / InvalidPickle / UnsafePickle / NotSupported (TorchScript archives, tar-format
// files, quantized or sparse tensors) / ResourceLimit, and the ZIP layer's errors.
Result<std::unique_ptr<Checkpoint>> open_checkpoint(const std::string& path, const FormatOptions& options = {});
Result<std::unique_ptr<Checkpoint>> open_checkpoint(SourcePtr source, const FormatOptions& options = {});

// A sharded checkpoint: `pytorch_model.bin.index.json` (transformers' index, naming .bin shards) and
// the shards it names beside it, opened through options.resolver, as one Checkpoint (container()
// "index"; shared() per shard). Strict as the folder converter: a shard must be a plain file name,
// and each must hold exactly the tensors the index lists for it (InvalidIndex otherwise).
Result<std::unique_ptr<Checkpoint>> open_checkpoint_index(const std::string& index_path, const FormatOptions& options = {});

SAFEWEIGHTS_API_END
}  // namespace safeweights::pytorch
