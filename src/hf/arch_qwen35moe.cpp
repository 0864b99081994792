// Qwen3.5-MoE (llama.cpp's "qwen35moe", Qwen3_5MoeTextModel): Qwen3.5's hybrid attention (arch_qwen35.cpp,
// hf/linear_attention.h) with a mixture of experts in every layer: a softmax router (mlp.gate, kept F32)
// whose top num_experts_per_tok weights transformers always renormalizes (as llama.cpp does; the config
// has no norm_topk_prob), experts of moe_intermediate_size in both layouts (per expert, as transformers
// 5.24 saves them, and fused), and Qwen's shared expert with its sigmoid gate. config.json has no
// intermediate_size: no feed_forward_length is written, as llama.cpp's converter writes none. Its
// multi-token-prediction layer (mtp.*, experts included) is kept as Qwen3.5's (hf/nextn.h).
#include <array>

#include "hf/arch.h"
#include "hf/arch_qwen.h"
#include "hf/linear_attention.h"
#include "hf/moe.h"
#include "hf/nextn.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 2> kClasses = {"Qwen3_5MoeForCausalLM", "Qwen3_5MoeForConditionalGeneration"};
// As released: the text model of a vision checkpoint (hf/multimodal.h), its vision tower left out.
constexpr std::array<std::string_view, 1> kMultimodal = {"Qwen3_5MoeForConditionalGeneration"};
// The rope object's multimodal sections (hf/mrope.h), read by the check.
constexpr std::array<std::string_view, 2> kRopeKeys = {"mrope_section", "mrope_interleaved"};

constexpr std::array<TensorRule, 2> kLayer = {rows::kAttnNorm, rows::kPostAttentionNorm};

// transformers 5.24's Qwen3.5-MoE makes every layer sparse and reads no decoder_sparse_step.
constexpr MoeTable kExperts{.block = "mlp",
                            .expert = {"gate_proj", "up_proj", "down_proj"},
                            .shared = kQwenSharedExpert,
                            .normalizes = true,
                            .norm_key = false,
                            .sparse_step_keys = false,
                            .shared_ffn_key = true};

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(qwen35moe) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "qwen35moe",
                                      .base = LayerBase::None,
                                      .layer = kLayer,
                                      .norms_plus_one = true,
                                      .moe = &kExperts,
                                      .check = read_qwen35_linear_attention,
                                      .plan_attention = plan_hybrid_attention,
                                      .computed = compute_linear_attention,
                                      .optional_intermediate = true,
                                      .partial_rotary = true,
                                      .rope_keys = kRopeKeys,
                                      .multimodal = kMultimodal,
                                      .nextn_key = "mtp_num_hidden_layers",
                                      .nextn_layout = &kQwenMtp};
  return kArch;
}

}  // namespace safeweights::hf
