// Cohere / Command-R (llama.cpp's "command-r", its converter's CommandR2Model): LayerNorm without
// bias, the parallel block (attention and MLP read the same normed input: no post-attention norm),
// transformers' interleaved rope (llama.cpp's "normal" rope: no permutation), logit_scale, and the
// output always the embedding. Per-head q/k LayerNorms (use_qk_norm, Command R+) as llama.cpp's loader
// reads them: only on models of 64 layers or more, so use_qk_norm must say the same. Refused:
// attention biases (its command-r has none), rope scaling (its converter writes none).
#include <array>

#include "hf/arch.h"
#include "hf/arch_cohere.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"
#include "hf/multimodal.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"CohereForCausalLM"};

// llama.cpp's command-r loader reads attn_q_norm / attn_k_norm exactly when the model has this many
// layers or more (Command R+): use_qk_norm must say the same.
constexpr std::uint32_t kQkNormLayers = 64;

// transformers' per-head q/k LayerNorms ([heads, head_dim], no bias) as llama.cpp's, unchanged.
Status plan_layer(const ModelConfig& c, const TextModelNames& names, const TensorFile& weights, WithGenerated&, std::uint32_t n,
                  std::vector<ConvertTensor>& out) {
  if (c.num_hidden_layers < kQkNormLayers) return Status::ok();
  const std::string hf = names.prefix + "layers." + std::to_string(n) + ".self_attn.";
  const std::string gg = "blk." + std::to_string(n) + ".";
  const std::uint64_t head_dim = c.hidden_size / c.num_attention_heads;
  const std::uint64_t kv_heads = c.num_key_value_heads.value_or(c.num_attention_heads);
  for (const auto& [which, heads] : {std::pair<std::string, std::uint64_t>{"q", c.num_attention_heads}, {"k", kv_heads}}) {
    const std::vector<std::uint64_t> shape = {heads, head_dim};
    SW_RETURN_IF_ERROR(expect_tensor(weights, hf + which + "_norm.weight", gg + "attn_" + which + "_norm.weight", shape));
    out.push_back({.source = hf + which + "_norm.weight", .name = gg + "attn_" + which + "_norm.weight"});
  }
  return Status::ok();
}

Status check(const JsonFile& file, ModelConfig& c) {
  auto refuse = [&](const std::string& what) { return Error(ErrorKind::NotSupported, what).with_file(file.path()); };
  SW_ASSIGN_OR_RETURN(auto qk_norm, file.boolean(file.root(), "use_qk_norm"));
  if (qk_norm.value_or(false) && c.num_hidden_layers < kQkNormLayers) {
    return refuse("key `use_qk_norm` is true with " + std::to_string(c.num_hidden_layers) +
                  " layers: llama.cpp's command-r reads q/k norms only from 64 layers on");
  }
  if (!qk_norm.value_or(false) && c.num_hidden_layers >= kQkNormLayers) {
    return refuse("key `num_hidden_layers` is " + std::to_string(c.num_hidden_layers) +
                  ": llama.cpp's command-r requires q/k norms from 64 layers on, which use_qk_norm false leaves out");
  }
  if (c.head_dim && *c.head_dim != c.hidden_size / c.num_attention_heads) {
    return refuse("key `head_dim` is not hidden_size / num_attention_heads: llama.cpp's command-r architecture sizes heads so");
  }
  // The context llama.cpp's converter writes: model_max_length (the trained one) over max_position_embeddings.
  SW_ASSIGN_OR_RETURN(auto trained, file.count(file.root(), "model_max_length"));
  if (trained) c.max_position_embeddings = trained;
  return cohere::check_common(file, c);
}

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(cohere) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "command-r",
                                      .base = LayerBase::None,
                                      .layer = cohere::kLayer,
                                      .tied_output = true,
                                      .check = check,
                                      .plan_layer = plan_layer,
                                      .norm = Norm::LayerNormNoBias};
  return kArch;
}

namespace cohere {

Status check_common(const JsonFile& file, ModelConfig& c, bool zero_biases_left_out) {
  const std::string a(c.arch->name);
  auto refuse = [&](const std::string& what) { return Error(ErrorKind::NotSupported, what).with_file(file.path()); };
  SW_ASSIGN_OR_RETURN(auto bias, file.boolean(file.root(), "attention_bias"));
  if (bias.value_or(false) && !zero_biases_left_out)
    return refuse("key `attention_bias` is true: llama.cpp's " + a + " architecture has no attention biases");
  if (c.rope.type != "default") {
    return refuse("key " + json::quoted(c.rope.source) + " rope type " + json::quoted(c.rope.type) +
                  ": llama.cpp's converter writes no rope scaling for " + a);
  }
  SW_ASSIGN_OR_RETURN(auto scale, file.positive(file.root(), "logit_scale"));
  if (!scale) return file.bad("logit_scale", "is missing (llama.cpp needs " + a + ".logit_scale)");
  c.arch_kv.push_back({a + ".logit_scale", MetaValue::f32(static_cast<float>(*scale))});
  c.arch_kv.push_back({a + ".rope.scaling.type", MetaValue::string("none")});
  return Status::ok();
}

}  // namespace cohere

}  // namespace safeweights::hf
