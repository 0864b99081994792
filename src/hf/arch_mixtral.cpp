// Mixtral (llama.cpp's "llama" with experts: convert_hf_to_gguf.py registers MixtralForCausalLM on
// LlamaModel): Llama's attention, q and k permuted for llama.cpp's interleaved rope, and in every layer
// num_local_experts experts of intermediate_size (no expert_feed_forward_length key), the top
// num_experts_per_tok renormalized (transformers always renormalizes Mixtral's, as llama.cpp's llama
// graph does). One tensor per expert (block_sparse_moe.experts.N.w1 / w3 / w2: gate, up, down), as
// transformers 5.24 saves it and the Hub holds it, or transformers 5's fused mlp.experts.gate_up_proj /
// down_proj with the router at mlp.gate, which llama.cpp's converter does not read: we write the same
// file from it.
#include <array>

#include "hf/arch.h"
#include "hf/arch_llama.h"
#include "hf/moe.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"MixtralForCausalLM"};

constexpr MoeTable kExperts{.block = "block_sparse_moe",
                            .fused_block = "mlp",
                            .expert = {"w1", "w3", "w2"},
                            .norm_key = false,
                            .expert_ffn_key = false,
                            .sparse_step_keys = false};

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(mixtral) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "llama",
                                      .base = LayerBase::LlamaPermuted,
                                      .layer = {},
                                      .llama_keys = true,
                                      .llama3_rope = true,
                                      .moe = &kExperts,
                                      .check = check_llama_sliding_window};
  return kArch;
}

}  // namespace safeweights::hf
