// Qwen3-Next (llama.cpp's "qwen3next", Qwen3NextModel): the hybrid attention Qwen3.5 took over
// (hf/linear_attention.h), with the linear attention's projections fused as transformers saves them
// (in_proj_qkvz regrouped into attn_qkv and attn_gate, in_proj_ba as ssm_ba) and the value heads in
// transformers' order; (1 + weight) RMS norms; and Qwen2-MoE's experts with a shared expert and its
// sigmoid gate, renormalized (norm_topk_prob must be true: llama.cpp's qwen3next always renormalizes).
// Its multi-token-prediction layer (mtp.*) is kept as Qwen3.5's (hf/nextn.h); config.json has no count
// of it, so it is counted from the weights, as llama.cpp's converter counts it.
#include <array>

#include "hf/arch.h"
#include "hf/arch_qwen.h"
#include "hf/linear_attention.h"
#include "hf/moe.h"
#include "hf/nextn.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"Qwen3NextForCausalLM"};

constexpr std::array<TensorRule, 2> kLayer = {rows::kAttnNorm, rows::kPostAttentionNorm};

constexpr MoeTable kExperts{
    .block = "mlp", .expert = {"gate_proj", "up_proj", "down_proj"}, .shared = kQwenSharedExpert, .normalizes = true, .shared_ffn_key = true};

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(qwen3next) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "qwen3next",
                                      .base = LayerBase::None,
                                      .layer = kLayer,
                                      .norms_plus_one = true,
                                      .moe = &kExperts,
                                      .check = read_linear_attention,
                                      .plan_attention = plan_hybrid_attention,
                                      .computed = compute_linear_attention,
                                      .partial_rotary = true,
                                      .nextn_key = "mtp_num_hidden_layers",
                                      .nextn_layout = &kQwenMtp};
  return kArch;
}

}  // namespace safeweights::hf
