// Cohere2 / Command R7B (llama.cpp's "cohere2"): Cohere's parallel block and bias-free LayerNorm, with
// sliding-window attention on three layers of four (layer_types must follow llama.cpp's fixed pattern)
// and rope on the sliding layers only (the full-attention layers have none, in transformers as in
// llama.cpp's graph). Its converter writes rope.dimension_count from rotary_pct, which transformers 5
// does not read: any value but 1 is refused.
#include <array>

#include "hf/arch.h"
#include "hf/arch_cohere.h"
#include "hf/arch_gemma.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"Cohere2ForCausalLM"};

// Sliding on layers 0, 1, 2, full on 3, and so on (llama.cpp's load_swa_pattern(ml, 4) default).
constexpr std::uint32_t kSlidingPattern = 4;

Status check(const JsonFile& file, ModelConfig& c) {
  auto refuse = [&](const std::string& what) { return Error(ErrorKind::NotSupported, what).with_file(file.path()); };
  const std::uint32_t head_dim = c.hidden_size / c.num_attention_heads;
  if (c.head_dim && *c.head_dim != head_dim) {
    return refuse("key `head_dim` is not hidden_size / num_attention_heads: llama.cpp's cohere2 architecture sizes heads so");
  }
  SW_ASSIGN_OR_RETURN(auto rotary_pct, file.positive(file.root(), "rotary_pct"));
  if (rotary_pct && *rotary_pct != 1.0) return refuse("key `rotary_pct` is not 1: transformers' Cohere2 rotates whole heads");
  SW_RETURN_IF_ERROR(gemma::check_common(file, c, kSlidingPattern));
  SW_RETURN_IF_ERROR(cohere::check_common(file, c));
  c.arch_kv.push_back({"cohere2.vocab_size", MetaValue::u32(c.vocab_size)});
  c.arch_kv.push_back({"cohere2.rope.dimension_count", MetaValue::u32(head_dim)});
  return Status::ok();
}

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(cohere2) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "cohere2",
                                      .base = LayerBase::None,
                                      .layer = cohere::kLayer,
                                      .tied_output = true,
                                      .check = check,
                                      .norm = Norm::LayerNormNoBias};
  return kArch;
}

}  // namespace safeweights::hf
