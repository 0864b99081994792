// Granite (llama.cpp's "granite", convert_hf_to_gguf.py's GraniteModel, a LlamaModel): Llama's layer
// with q and k permuted, and four multipliers transformers applies, as llama.cpp's keys:
// embedding_multiplier (embedding_scale: the embeddings are multiplied by it), residual_multiplier
// (residual_scale: each block's output, before it joins the residual), attention_multiplier
// (attention.scale: the attention scores' scale, in place of 1/sqrt(head size)) and logits_scaling
// (logit_scale: the logits are divided by it).
#include <array>

#include "hf/arch.h"
#include "hf/config_rules.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"GraniteForCausalLM"};

constexpr std::array<TensorRule, 0> kLayer = {};

// transformers' multipliers -> llama.cpp's keys. llama.cpp's converter writes only those config.json
// gives; transformers' default for each is 1, while llama.cpp's loader reads an absent attention
// scale as 1/sqrt(head size) and refuses a file without logit_scale: every one is written, 1 when absent.
struct Multiplier {
  std::string_view hf;
  std::string_view gguf;  // after "granite."
};
constexpr std::array<Multiplier, 4> kMultipliers = {{
    {"attention_multiplier", "attention.scale"},
    {"embedding_multiplier", "embedding_scale"},
    {"residual_multiplier", "residual_scale"},
    {"logits_scaling", "logit_scale"},
}};

Status check(const JsonFile& file, ModelConfig& c) {
  SW_RETURN_IF_ERROR(refuse_true(file, "granite", {"attention_bias", "mlp_bias"}));
  // llama.cpp's converter drops head_dim (Granite's heads are hidden / heads wide): another is refused.
  if (c.head_dim && std::uint64_t{*c.head_dim} * c.num_attention_heads != c.hidden_size) {
    return refuse_key(file, "head_dim", "is not hidden_size / num_attention_heads: llama.cpp's granite architecture ignores head_dim");
  }
  c.head_dim.reset();
  for (const Multiplier& m : kMultipliers) {
    SW_ASSIGN_OR_RETURN(auto value, file.positive(file.root(), m.hf));
    SW_ASSIGN_OR_RETURN(float f, file.to_float32(m.hf, value.value_or(1.0)));
    c.arch_kv.push_back({"granite." + std::string(m.gguf), MetaValue::f32(f)});
  }
  return Status::ok();
}

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(granite) {
  static constexpr Architecture kArch{
      .classes = kClasses, .name = "granite", .base = LayerBase::LlamaPermuted, .layer = kLayer, .llama_keys = true, .check = check};
  return kArch;
}

}  // namespace safeweights::hf
