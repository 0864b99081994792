// The weights of an original download: its native files opened as one TensorFile (each tensor named
// "<shard>/<name>", shard 00 for a single file), and the transformers view over them (every tensor
// under transformers' name, assembled from the model-parallel shards as Meta split them, q and k in
// transformers' rotary order), checked against the hyper-parameters. Internal to src/original.
//
// Thread safety: a ShardSet is immutable once built (borrow() is part of building it); the functions
// are pure.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "original/layout.h"
#include "safeweights/error.h"
#include "safeweights/folder.h"
#include "safeweights/format.h"
#include "safeweights/tensor_file.h"

namespace safeweights::original {

class ShardSet final : public TensorFile {
 public:
  // Opens every file of `native` through `read`'s resolver (a pickle holding anything but tensors is
  // refused by the PyTorch reader, naming the file).
  static Result<std::unique_ptr<ShardSet>> open(const Folder& folder, const NativeWeights& native, const FormatOptions& read);

  std::size_t shard_count() const noexcept { return shards_.size(); }
  const TensorFile& shard(std::size_t i) const { return *shards_[i]; }
  // "00/layers.0.attention.wq.weight".
  static std::string key(std::size_t shard, std::string_view name);
  // Adds an entry of another file (which must outlive this one) under its own name: the tensors a plan
  // computes (rope_freqs), read through the same file as the weights.
  void borrow(const TensorEntry& entry);
  // Keeps `file` alive as long as this one (the file borrowed entries come from).
  void keep(std::unique_ptr<TensorFile> file) { kept_.push_back(std::move(file)); }

  std::string_view format() const noexcept override { return "original"; }
  const std::string& name() const noexcept override { return name_; }
  std::span<const TensorEntry> tensors() const noexcept override { return entries_; }
  const TensorEntry* find(std::string_view name) const noexcept override;
  const Metadata* metadata() const noexcept override { return nullptr; }

 private:
  std::string name_;
  std::vector<std::unique_ptr<TensorFile>> shards_;
  std::vector<std::unique_ptr<TensorFile>> kept_;
  std::deque<std::string> names_;  // stable addresses: entries' names point into it
  std::vector<TensorEntry> entries_;
  std::unordered_map<std::string_view, std::size_t> index_;
};

// The model's dimensions as params.json gives them, each checked against the tensors.
struct Dimensions {
  std::uint32_t hidden = 0;
  std::uint32_t layers = 0;
  std::uint32_t heads = 0;
  std::uint32_t kv_heads = 0;
  std::uint32_t head_dim = 0;
  std::uint32_t intermediate = 0;
  std::optional<std::uint32_t> vocab;     // none: the embeddings' rows
  bool tied = false;                      // no output.weight: the embeddings are the output
  std::uint32_t embeddings_join_dim = 1;  // Llama 1/2 and Mistral: 1 (ParallelEmbedding); Llama 3: 0
  std::string params_path;                // for messages
};

// A tensor of the transformers view: how it is written (from the shards) and what it is.
struct ViewTensor {
  ConvertTensor plan;
  TensorDecl decl;
};

// The transformers view of `weights`: every tensor checked (the shards agree in names, types and
// shapes; replicated norms agree byte for byte; each assembled shape is what `dims` implies; no tensor
// left without a transformers name). `dims.vocab` is set from the embeddings when params.json left it.
Result<std::vector<ViewTensor>> transformers_view(const ShardSet& weights, Dimensions& dims);

}  // namespace safeweights::original
