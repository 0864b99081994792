// llama-quantize's file types (llama_ftype: Q4_K_M, IQ3_M, ...) and its choice of each tensor's type
// for one (llama_tensor_get_type and what it reads: the tensor's role from its name, the layer from
// blk.N., the layer, head, KV-head and expert counts from the metadata, the fallbacks for rows that are
// not a whole number of blocks, the tensors never quantized), at the pinned llama.cpp
// (scripts/llama-cpp.sh). Facts of llama.cpp's, so they live with the GGUF format; the conversion asks
// them through Format::plan_mix (src/gguf/format.cpp).
//
// Thread safety: pure functions and immutable tables.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/format.h"
#include "safeweights/metadata.h"
#include "safeweights/tensor_type.h"

namespace safeweights::gguf {

// One of llama-quantize's file types: its name, its llama_ftype number (general.file_type) and the
// type its quantized tensors get before the per-tensor rules (llama_ftype_get_default_type).
struct FileType {
  std::string_view name;
  std::uint32_t ftype;
  TensorType base;
};

// llama-quantize's list (QUANT_OPTIONS, less COPY), aliases included (Q4_K is Q4_K_M).
std::span<const FileType> file_types() noexcept;
// By name (case-insensitive) or number (digits only; the first entry with that number, as
// llama-quantize looks it up); nullptr when neither.
const FileType* find_file_type(std::string_view name_or_number) noexcept;

// What llama.cpp reads of a model to choose types.
struct ModelFacts {
  std::string arch;
  std::uint32_t n_layer = 0;
  std::uint32_t n_head = 0, n_head_kv = 0;  // of layer 0
  std::uint32_t n_expert = 0;
  bool is_70b = false;  // llama.cpp's LLM_TYPE_70B
  std::uint32_t n_gqa() const { return n_head_kv == 0 ? 0 : n_head / n_head_kv; }
};
// InvalidArgument naming the key when general.architecture or {arch}.block_count is missing or not
// what llama.cpp reads.
Result<ModelFacts> model_facts(const Metadata& metadata);

// The type of a tensor whose rows of `cols` elements are not a whole number of `type`'s blocks
// (tensor_type_fallback); `type` itself when they are. NotSupported for a type llama.cpp has no
// fallback for.
Result<TensorType> row_fallback(TensorType type, std::uint64_t cols);

// Tensor indices in llama.cpp's loader order: by the layer of a blk.N. name (others first), then by
// name. Its per-layer rules count tensors in this order, and --prune-layers renumbers blocks in it.
std::vector<std::size_t> llama_order(std::span<const MixTensor> tensors);

// llama-quantize's --prune-layers renaming (remap_layer): each tensor's name in the output, in
// `tensors`' order, empty for one left out; and the blocks kept, the block_count it writes. `prune`
// sorted; empty: every name its own.
struct PrunedNames {
  std::vector<std::string> names;
  std::uint32_t block_count = 0;
};
PrunedNames prune_layers(std::span<const MixTensor> tensors, std::span<const int> prune);

// One tensor's choice: its type, why, and whether llama.cpp would quantize it at all.
struct TypeChoice {
  TensorType type;
  std::string note;
  bool quantizable = false;       // tensor_allows_quantization
  bool requires_imatrix = false;  // tensor_requires_imatrix of the chosen type
};

// The types `file_type` with `knobs` gives `tensors`, in their order (the rules are applied in
// llama.cpp's order of tensors: by layer, then name). `has_imatrix`: importance data will be used
// (some rules depend on it).
Result<std::vector<TypeChoice>> choose_types(const FileType& file_type, const QuantizeMix& knobs, const ModelFacts& model,
                                             std::span<const MixTensor> tensors, bool has_imatrix);

}  // namespace safeweights::gguf
