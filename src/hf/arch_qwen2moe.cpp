// Qwen2-MoE (llama.cpp's "qwen2moe", Qwen2MoeModel): Qwen2's attention (q, k, v biases, NEOX rope) and in
// every layer a mixture of experts of moe_intermediate_size whose top num_experts_per_tok weights are not
// renormalized (llama.cpp never does for qwen2moe: norm_topk_prob must be false), beside one shared
// expert of shared_expert_intermediate_size scaled by the sigmoid of its own gate (shared_expert_gate,
// kept F32). Both expert layouts: one tensor per expert, and transformers 5's fused experts.
#include <array>

#include "hf/arch.h"
#include "hf/arch_qwen.h"
#include "hf/moe.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"Qwen2MoeForCausalLM"};

constexpr MoeTable kExperts{
    .block = "mlp", .expert = {"gate_proj", "up_proj", "down_proj"}, .shared = kQwenSharedExpert, .normalizes = false, .shared_ffn_key = true};

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(qwen2moe) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "qwen2moe",
                                      .base = LayerBase::Llama,
                                      .layer = rows::kQkvBias,
                                      .moe = &kExperts,
                                      .check = check_qwen_sliding_window};
  return kArch;
}

}  // namespace safeweights::hf
