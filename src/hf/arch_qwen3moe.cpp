// Qwen3-MoE (llama.cpp's "qwen3moe", Qwen3MoeModel): Qwen3's attention (per-head q_norm and k_norm,
// NEOX rope, no biases) with a mixture of experts in every layer: a softmax router (mlp.gate, kept F32),
// the top num_experts_per_tok experts renormalized (llama.cpp always renormalizes: norm_topk_prob must
// be true), experts of moe_intermediate_size, no shared expert. Both layouts users have: one tensor per
// expert (mlp.experts.N.gate_proj, as transformers 5.24 still saves it and the Hub's checkpoints hold it)
// and transformers 5's fused mlp.experts.gate_up_proj / down_proj.
#include <array>

#include "hf/arch.h"
#include "hf/arch_qwen.h"
#include "hf/moe.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"Qwen3MoeForCausalLM"};

constexpr MoeTable kExperts{.block = "mlp", .expert = {"gate_proj", "up_proj", "down_proj"}};

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(qwen3moe) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "qwen3moe",
                                      .base = LayerBase::Llama,
                                      .layer = rows::kQkNorm,
                                      .moe = &kExperts,
                                      .check = check_qwen_sliding_window};
  return kArch;
}

}  // namespace safeweights::hf
