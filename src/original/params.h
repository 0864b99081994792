// Meta's and Mistral's params.json (the hyper-parameters of an original download) read as hostile
// input: every key either understood, known to change nothing, or refused by name. Internal to
// src/original.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "safeweights/error.h"
#include "safeweights/folder.h"

namespace safeweights::original {

struct Params {
  std::string path;  // for messages
  std::uint32_t dim = 0;
  std::uint32_t n_layers = 0;
  std::uint32_t n_heads = 0;
  std::optional<std::uint32_t> n_kv_heads;
  std::optional<std::uint32_t> head_dim;     // Mistral
  std::optional<std::uint32_t> hidden_dim;   // Mistral: the MLP's width, given
  std::optional<double> ffn_dim_multiplier;  // Meta: the MLP's width, computed
  std::optional<std::uint32_t> multiple_of;
  std::optional<double> norm_eps;
  std::optional<double> rope_theta;
  std::optional<std::uint32_t> vocab_size;  // none for Llama 2's -1
  bool use_scaled_rope = false;             // Llama 3.1+: llama3 rope scaling
  std::optional<bool> tied_embeddings;      // Mistral
  std::optional<std::uint32_t> sliding_window;
  std::optional<std::uint32_t> max_seq_len;  // max_seq_len or max_position_embeddings
};

// params.json of `folder`. InvalidModelFolder naming the file and the key for a malformed value;
// NotSupported naming the key for one that would change the model and is not converted (moe,
// vision_encoder, quantization, yarn, llama_4_scaling, a per-layer sliding window, another activation,
// any key not known).
Result<Params> read_params(const Folder& folder);

}  // namespace safeweights::original
