// safeweights/pytorch.h — PyTorch checkpoints (`torch.save` files: the ZIP format of torch >= 1.6 and
// the legacy pickle stream before it) read without running a byte of pickle, and converted to
// safetensors.
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
// Thread safety: a Checkpoint is immutable once opened (as every TensorFile); conversion functions
// may run concurrently on different outputs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/resolver.h"
#include "safeweights/source.h"
#include "safeweights/tensor_file.h"

namespace safeweights::pytorch {
SAFEWEIGHTS_API_BEGIN

struct CheckpointOptions {
  // Keep globals outside the allowlist as inert placeholders (training checkpoints with extra state);
  // modules such as os, subprocess and builtins are refused all the same.
  bool allow_unknown = false;
  // Read the tensors under this top-level key. Empty: under `state_dict`, `model` or `module` (the
  // first present whose value is a dict) when there is one, else the whole object.
  std::string key;
  FileBackend backend = FileBackend::Mmap;
  std::shared_ptr<const Resolver> resolver;  // plain files when null
};

class Checkpoint : public TensorFile {
 public:
  // "zip" or "legacy".
  virtual std::string_view container() const noexcept = 0;
  // The top-level key the tensors were read under; empty when read from the whole object.
  virtual const std::string& opened_key() const noexcept = 0;
  // Names whose bytes live in one storage (tied weights, views): one group per storage holding two or
  // more tensors, names in tensors() order.
  virtual const std::vector<std::vector<std::string_view>>& shared() const noexcept = 0;
  // Whether `entry` is a plain copy of its whole storage (contiguous, from its first byte to its
  // last): the tensor --dedup keeps for a storage.
  virtual bool covers_storage(const TensorEntry& entry) const noexcept = 0;
  // The storage `entry` reads from (equal for two names that share storage).
  virtual std::string_view storage_of(const TensorEntry& entry) const noexcept = 0;
};

// InvalidCheckpoint / InvalidPickle / UnsafePickle / NotSupported (TorchScript archives, tar-format
// files, quantized or sparse tensors) / ResourceLimit, and the ZIP layer's errors.
Result<std::unique_ptr<Checkpoint>> open_checkpoint(const std::string& path, const CheckpointOptions& options = {});
Result<std::unique_ptr<Checkpoint>> open_checkpoint(SourcePtr source, const CheckpointOptions& options = {});

// A sharded checkpoint: `pytorch_model.bin.index.json` (transformers' index, naming .bin shards) and
// the shards it names beside it, opened through options.resolver, as one Checkpoint (container()
// "index"; shared() per shard). Strict as the folder converter: a shard must be a plain file name,
// and each must hold exactly the tensors the index lists for it (InvalidIndex otherwise).
Result<std::unique_ptr<Checkpoint>> open_checkpoint_index(const std::string& index_path, const CheckpointOptions& options = {});

struct ConvertOptions {
  CheckpointOptions read;
  // Keep one copy per shared storage: names that are the same tensor as a kept one are left out and
  // recorded in `__metadata__` as "name": "kept name".
  bool dedup = false;
  bool durable = false;
  // Called once each checkpoint is open with its path and the top-level key its tensors are read
  // under (Checkpoint::opened_key(); empty for the whole object), before anything is written.
  std::function<void(const std::string& input, const std::string& key)> opened;
  // Called after each tensor with the tensors and bytes done so far.
  std::function<void(std::size_t tensors, std::uint64_t bytes)> progress;
};

// Converts one checkpoint to one safetensors file (metadata {"format": "pt"} plus aliases). Atomic:
// on any error the output does not exist (or is left as it was).
Status convert_to_safetensors(const std::string& input, const std::string& output, const ConvertOptions& options = {});

// Converts a Hugging Face folder: `pytorch_model.bin`, or the shards named by
// `pytorch_model.bin.index.json` (each shard must hold exactly the tensors the index lists for it),
// into `model.safetensors`, or one `.safetensors` per shard (pytorch_model-0000i-of-0000N.bin ->
// model-0000i-of-0000N.safetensors) plus `model.safetensors.index.json` (the input index's metadata,
// total_size recomputed, written last), in `output_folder` (created if missing). Each file is written
// atomically; on error the files this call wrote are removed. Returns the names written, in order.
Result<std::vector<std::string>> convert_folder(const std::string& input_folder, const std::string& output_folder,
                                                const ConvertOptions& options = {});

SAFEWEIGHTS_API_END
}  // namespace safeweights::pytorch
