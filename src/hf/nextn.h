// Next-token-prediction layers (DeepSeek's and GLM-4.5's NextN, Qwen's MTP): the blocks a checkpoint
// carries past num_hidden_layers, which llama.cpp's converter keeps by default (without --no-mtp) as
// layers num_hidden_layers + i of the file: the layer's usual attention and MLP tensors plus its own
// blk.N.nextn.{eh_proj, enorm, hnorm, embed_tokens, shared_head_head, shared_head_norm}, with
// {arch}.block_count counting them and {arch}.nextn_predict_layers saying how many. llama.cpp's graph
// for logits runs num_hidden_layers layers; the next-token layers serve its speculative decoding. The
// facts are llama.cpp's (conversion/glm.py's Glm4MoeModel, conversion/qwen.py's _QwenMtpMixin,
// gguf-py's tensor_mapping.py NEXTN_*, src/models/glm4-moe.cpp's loader). Internal to src/hf.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hf/arch.h"
#include "hf/hf_files.h"

namespace safeweights::hf {

// Reads config.json's count of next-token layers (Architecture::nextn_key) into c.nextn_layers and,
// when the key is given, writes {arch}.nextn_predict_layers as llama.cpp's converter writes it (0
// included). InvalidModelFolder for a count that is no integer or takes the layers past llama.cpp's
// limit.
Status read_nextn_layers(const JsonFile& file, ModelConfig& c);

// Whether `weights` holds any tensor of layer `hf` ("model.layers.N."): a folder saved by transformers
// has none (its modules have no next-token layer although config.json counts one), and llama.cpp's
// converter then writes the count with no tensors, which its loader accepts.
bool has_layer(const TensorFile& weights, const std::string& hf);

// The next-token layer's own tensors (`hf`: "model.layers.N.", `gg`: "blk.N."), after the layer's
// usual ones: eh_proj [hidden, 2 hidden], enorm and hnorm [hidden] required; embed_tokens and
// shared_head.head [vocab, hidden] and shared_head.norm [hidden] when present (llama.cpp's loader
// falls back to the model's own).
Status plan_nextn_tensors(const ModelConfig& c, const TensorFile& weights, const std::string& hf, const std::string& gg,
                          std::vector<ConvertTensor>& out);

}  // namespace safeweights::hf
