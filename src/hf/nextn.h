// Next-token-prediction layers (DeepSeek's and GLM-4.5's NextN, Qwen's MTP): the blocks a checkpoint
// carries past num_hidden_layers, which llama.cpp's converter keeps by default (without --no-mtp) as
// layers num_hidden_layers + i of the file: the layer's usual attention and MLP tensors plus its own
// blk.N.nextn.{eh_proj, enorm, hnorm, embed_tokens, shared_head_head, shared_head_norm}, with
// {arch}.block_count counting them and {arch}.nextn_predict_layers saying how many. llama.cpp's graph
// for logits runs num_hidden_layers layers; the next-token layers serve its speculative decoding. The
// facts are llama.cpp's (conversion/glm.py's Glm4MoeModel, conversion/qwen.py's _QwenMtpMixin,
// gguf-py's tensor_mapping.py NEXTN_*, src/models/glm4-moe.cpp's and qwen35*.cpp's loaders). Internal to src/hf.
//
// DeepSeek and GLM save them as model.layers.N; Qwen3.5 and Qwen3-Next apart, under `mtp.` (a
// NextnLayout): mtp.layers.i is layer num_hidden_layers + i, and the first one's own tensors are
// mtp.fc (eh_proj), mtp.pre_fc_norm_embedding (enorm), mtp.pre_fc_norm_hidden (hnorm) and mtp.norm
// (shared_head.norm), as llama.cpp's converter renames them.
//
// Thread safety: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hf/arch.h"
#include "hf/hf_files.h"

namespace safeweights::hf {

// A next-token layer's own tensor under another name: `name` after the layout's prefix stands for the
// tensor `rule` ("eh_proj.weight": what DeepSeek and GLM name it after model.layers.N.).
struct NextnRename {
  std::string_view name;
  std::string_view rule;
};

// Next-token layers saved apart from model.layers (Architecture::nextn_layout).
struct NextnLayout {
  std::span<const std::string_view> prefixes;  // where the block may be, the first the weights use ("mtp.", "model.mtp.")
  std::span<const NextnRename> own;            // the first next-token layer's own tensors
  // How many llama.cpp runs (its converter gives the layers past the first none of their own tensors,
  // and its graph asserts one); more are refused.
  std::uint32_t max_layers;
};

// Qwen3.5's and Qwen3-Next's `mtp.*` (conversion/qwen.py's _QwenMtpMixin; src/models/qwen35.cpp's graph
// runs one MTP layer). Counted from the weights when config.json gives no mtp_num_hidden_layers.
inline constexpr std::array<std::string_view, 2> kQwenMtpPrefixes = {"mtp.", "model.mtp."};
inline constexpr std::array<NextnRename, 4> kQwenMtpOwn = {{
    {"fc.weight", "eh_proj.weight"},
    {"pre_fc_norm_embedding.weight", "enorm.weight"},
    {"pre_fc_norm_hidden.weight", "hnorm.weight"},
    {"norm.weight", "shared_head.norm.weight"},
}};
inline constexpr NextnLayout kQwenMtp{.prefixes = kQwenMtpPrefixes, .own = kQwenMtpOwn, .max_layers = 1};

// Reads config.json's count of next-token layers (Architecture::nextn_key) into c.nextn_layers and,
// when the key is given, writes {arch}.nextn_predict_layers as llama.cpp's converter writes it (0
// included). InvalidModelFolder for a count that is no integer or takes the layers past llama.cpp's
// limit. With a NextnLayout the count is kept for read_nextn_weights, which writes the key; a count
// past its max_layers is NotSupported naming the key.
Status read_nextn_layers(const JsonFile& file, ModelConfig& c);

// With a NextnLayout (after read_config): where the weights keep the block (c.nextn_prefix) and, when
// config.json counts none, how many layers they hold (the highest `layers.i` + 1, as llama.cpp's
// converter counts them), then {arch}.nextn_predict_layers when there are any. A count config.json
// gives for a block the weights lack is dropped with a note (llama.cpp does not load what its converter
// writes then). NotSupported naming a layer past the layout's max_layers. Without a layout, nothing.
Status read_nextn_weights(const TensorFile& weights, ModelConfig& c);

// The weights' prefix of layer `n` (names.prefix + "layers.N."; a next-token layer of a NextnLayout:
// "mtp.layers.i.").
std::string layer_prefix(const ModelConfig& c, const TextModelNames& names, std::uint32_t n);

// Whether `weights` hold any tensor of next-token layer `n` (its layer_prefix, or its own tensors
// under the layout's prefix): a folder saved by transformers has none (its modules have no next-token
// layer although config.json counts one), and llama.cpp's converter then writes the count with no
// tensors, which its loader accepts.
bool nextn_present(const ModelConfig& c, const TextModelNames& names, const TensorFile& weights, std::uint32_t n);

// Next-token layer `n`'s own tensors (as blk.N.nextn.*), after the layer's
// usual ones: eh_proj [hidden, 2 hidden], enorm and hnorm [hidden] required; embed_tokens and
// shared_head.head [vocab, hidden] and shared_head.norm [hidden] when present (llama.cpp's loader
// falls back to the model's own). With a NextnLayout, those of its `own` list under c.nextn_prefix.
Status plan_nextn_tensors(const ModelConfig& c, const TextModelNames& names, const TensorFile& weights, std::uint32_t n,
                          std::vector<ConvertTensor>& out);

}  // namespace safeweights::hf
