// GLM-4.5-MoE (llama.cpp's "glm4moe", Glm4MoeModel in conversion/glm.py): Llama's attention with NEOX
// rope over the first partial_rotary_factor of each head (0.5 by default), q, k and v biases
// (attention_bias) and per-head RMS norms of queries and keys (use_qk_norm) when configured, a
// post-attention norm, then DeepSeek-V3's experts (hf/moe.h's read_sigmoid_experts: sigmoid scores
// plus e_score_correction_bias, routed_scaling_factor, norm_topk_prob, shared experts, the first
// first_k_dense_replace layers dense) in both layouts, without DeepSeek's groups (llama.cpp's glm4moe
// graph does not group: a topk_group below n_group is refused). The num_nextn_predict_layers
// next-token layers past num_hidden_layers are kept as llama.cpp's converter keeps them (hf/nextn.h).
// GLM's special tokens are hf/vocab.cpp's ([gMASK] bos, <|user|> eot, <|observation|> eom).
// GLM-4.5V (Glm4vMoeForConditionalGeneration, the same class in llama.cpp's converter): its text model, the
// vision tower left out (hf/multimodal.h), with its sectioned multimodal rope (hf/mrope.h).
// Refused by name: rope scaling (llama.cpp's converter writes none for GLM-4.5), quantized checkpoints.
#include <algorithm>
#include <array>

#include "hf/arch.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"
#include "hf/moe.h"
#include "hf/mrope.h"
#include "hf/multimodal.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 2> kClasses = {"Glm4MoeForCausalLM", "Glm4vMoeForConditionalGeneration"};
constexpr std::array<std::string_view, 1> kMultimodal = {"Glm4vMoeForConditionalGeneration"};
constexpr std::array<std::string_view, 1> kRopeKeys = {"mrope_section"};  // read by read_sectioned_mrope

constexpr std::array<TensorRule, 6> kLayer = {
    rows::kAttnNorm, rows::q(Permute::None), rows::k(Permute::None), rows::kV, rows::kO, rows::kPostAttentionNorm,
};

// Glm4MoeConfig's default rotary fraction, which llama.cpp's converter takes too.
constexpr double kDefaultPartialRotary = 0.5;

bool has_flag(const ModelConfig& c, std::string_view flag) { return std::find(c.arch_flags.begin(), c.arch_flags.end(), flag) != c.arch_flags.end(); }

Error refused(const JsonFile& file, std::string_view key, const std::string& why) {
  return Error(ErrorKind::NotSupported, "key " + json::quoted(key) + " " + why).with_file(file.path());
}

// rope.dimension_count: int(head_dim x partial_rotary_factor), as transformers and llama.cpp take it.
Status read_rotary(const JsonFile& file, ModelConfig& c) {
  if (c.rope.type != "default") {
    return Error(ErrorKind::NotSupported, json::quoted(c.rope.source) + " rope type " + json::quoted(c.rope.type) +
                                              ": llama.cpp's converter writes no rope scaling for glm4moe")
        .with_file(file.path());
  }
  SW_ASSIGN_OR_RETURN(auto top, file.positive(file.root(), "partial_rotary_factor"));
  if (top && c.rope.partial_rotary_factor && *top != *c.rope.partial_rotary_factor) {
    return file.bad("partial_rotary_factor", "differs from " + c.rope.source + ".partial_rotary_factor");
  }
  const double factor = c.rope.partial_rotary_factor.value_or(top.value_or(kDefaultPartialRotary));
  if (factor > 1.0) return file.bad("partial_rotary_factor", "is above 1");
  const std::uint32_t head_dim = c.head_dim.value_or(c.hidden_size / c.num_attention_heads);
  const auto rotary = static_cast<std::uint32_t>(factor * head_dim);
  if (rotary % 2 != 0) return file.bad("partial_rotary_factor", "rotates an odd number of each head's values: rotary embeddings need pairs");
  c.arch_kv.push_back({"glm4moe.rope.dimension_count", MetaValue::u32(rotary)});
  return read_sectioned_mrope(file, c, rotary);
}

Status check(const JsonFile& file, ModelConfig& c) {
  const auto root = file.root();
  if (JsonFile::member(root, "quantization_config")) {
    return refused(file, "quantization_config", "is set: quantized (FP8) checkpoints are not converted; dequantize them first");
  }
  SW_RETURN_IF_ERROR(read_rotary(file, c));
  SW_RETURN_IF_ERROR(read_sigmoid_experts(file, c, SigmoidRouting{.grouped = false, .norm_always = true, .vocab_key = false}));
  SW_ASSIGN_OR_RETURN(auto bias, file.boolean(root, "attention_bias"));
  if (bias.value_or(false)) c.arch_flags.emplace_back("attention_bias");
  SW_ASSIGN_OR_RETURN(auto qk_norm, file.boolean(root, "use_qk_norm"));
  if (qk_norm.value_or(false)) c.arch_flags.emplace_back("use_qk_norm");
  return Status::ok();
}

Status plan_layer(const ModelConfig& c, const TextModelNames& names, const TensorFile& weights, WithGenerated&, std::uint32_t n,
                  std::vector<ConvertTensor>& out) {
  const std::string hf = names.prefix + "layers." + std::to_string(n) + ".";
  const std::string gg = "blk." + std::to_string(n) + ".";
  if (has_flag(c, "attention_bias")) {
    for (const TensorRule& t : rows::kQkvBias) SW_RETURN_IF_ERROR(add_rule(c, weights, t, hf, gg, out));
  }
  if (has_flag(c, "use_qk_norm")) {
    for (const TensorRule& t : rows::kQkNorm) SW_RETURN_IF_ERROR(add_rule(c, weights, t, hf, gg, out));
  }
  return plan_sigmoid_mlp(c, weights, hf, gg, n, out);
}

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(glm4moe) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "glm4moe",
                                      .base = LayerBase::None,
                                      .layer = kLayer,
                                      .check = check,
                                      .plan_layer = plan_layer,
                                      .partial_rotary = true,
                                      .rope_keys = kRopeKeys,
                                      .multimodal = kMultimodal,
                                      .nextn_key = "num_nextn_predict_layers"};
  return kArch;
}

}  // namespace safeweights::hf
