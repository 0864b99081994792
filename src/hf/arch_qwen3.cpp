// Qwen3 (llama.cpp's "qwen3"): Llama's layer with RMS norms of each query and key head (q_norm, k_norm:
// attn_q_norm, attn_k_norm), NEOX rope (no permutation), no attention biases.
#include <array>

#include "hf/arch.h"
#include "hf/arch_qwen.h"
#include "hf/hf_files.h"

namespace safeweights::hf {

namespace {

constexpr std::array<std::string_view, 1> kClasses = {"Qwen3ForCausalLM"};

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(qwen3) {
  static constexpr Architecture kArch{
      .classes = kClasses, .name = "qwen3", .base = LayerBase::Llama, .layer = rows::kQkNorm, .check = check_qwen_sliding_window};
  return kArch;
}

}  // namespace safeweights::hf
