// Qwen3.5 (llama.cpp's "qwen35", Qwen3_5TextModel): a hybrid of Gated DeltaNet linear-attention layers
// and gated full-attention layers (layer_types; hf/linear_attention.h plans both), with a dense SwiGLU
// MLP in every layer, RMS norms that scale by (1 + weight) (llama.cpp's converter writes weight + 1; the
// linear attention's own gated norm scales by its weight), partial NEOX rope (a quarter of each head by
// default) and untied or tied output. Multi-token-prediction layers (mtp.*, as released) kept as
// llama.cpp's converter keeps them (hf/nextn.h): one full-attention layer past num_hidden_layers with its
// nextn tensors, counted by mtp_num_hidden_layers or, without it, from the weights.
#include <array>

#include "hf/arch.h"
#include "hf/linear_attention.h"
#include "hf/nextn.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 2> kClasses = {"Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration"};
// As released: the text model of a vision checkpoint (hf/multimodal.h), its vision tower left out.
constexpr std::array<std::string_view, 1> kMultimodal = {"Qwen3_5ForConditionalGeneration"};
// The rope object's multimodal sections (hf/mrope.h), read by the check.
constexpr std::array<std::string_view, 2> kRopeKeys = {"mrope_section", "mrope_interleaved"};

constexpr std::array<TensorRule, 5> kLayer = {rows::kAttnNorm, rows::kPostAttentionNorm, rows::kGate, rows::kUp, rows::kDown};

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(qwen35) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "qwen35",
                                      .base = LayerBase::None,
                                      .layer = kLayer,
                                      .norms_plus_one = true,
                                      .check = read_qwen35_linear_attention,
                                      .plan_attention = plan_hybrid_attention,
                                      .computed = compute_linear_attention,
                                      .partial_rotary = true,
                                      .rope_keys = kRopeKeys,
                                      .multimodal = kMultimodal,
                                      .nextn_key = "mtp_num_hidden_layers",
                                      .nextn_layout = &kQwenMtp};
  return kArch;
}

}  // namespace safeweights::hf
