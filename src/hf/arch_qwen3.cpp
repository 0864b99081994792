// Qwen3 (llama.cpp's "qwen3"): Llama's layer with RMS norms of each query and key head (q_norm, k_norm:
// attn_q_norm, attn_k_norm), NEOX rope (no permutation), no attention biases.
#include <array>

#include "hf/arch.h"
#include "hf/hf_files.h"

namespace safeweights::hf {

Status check_qwen_sliding_window(const JsonFile& file, ModelConfig& c);  // arch_qwen2.cpp

namespace {

constexpr std::array<std::string_view, 1> kClasses = {"Qwen3ForCausalLM"};

constexpr std::array<TensorRule, 2> kLayer = {{
    {"self_attn.q_norm.weight", "attn_q_norm.weight", Dim::HeadDim, Dim::None, Permute::None, true},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", Dim::HeadDim, Dim::None, Permute::None, true},
}};

}  // namespace

const Architecture& qwen3_architecture() {
  static constexpr Architecture kArch{
      .classes = kClasses, .name = "qwen3", .base = LayerBase::Llama, .layer = kLayer, .check = check_qwen_sliding_window};
  return kArch;
}

}  // namespace safeweights::hf
