// DeepSeek-V3 (llama.cpp's "deepseek2", DeepseekV2Model): multi-head latent attention (hf/mla.h:
// low-rank queries, one compressed key/value head, kv_b_proj split into attn_k_b and attn_v_b), rope on
// the qk_rope_head_dim part of each head in interleaved pairs (no permutation: transformers'
// rope_interleave is llama.cpp's rope), the first first_k_dense_replace layers with the dense MLP and the
// others with n_routed_experts experts chosen by sigmoid scores plus e_score_correction_bias
// (exp_probs_b) within the topk_group best of n_group groups, weighted by routed_scaling_factor, and
// n_shared_experts shared experts. Both expert layouts (per-expert, as transformers 5.24 saves it, and
// the fused experts of its modules). The multi-token-prediction layers past num_hidden_layers are left
// out, as llama.cpp's converter leaves them. Refused by name: FP8 block-scaled checkpoints
// (quantization_config), rope scaling other than YaRN with mscale equal to mscale_all_dim,
// attention biases.
#include <array>
#include <limits>

#include "hf/arch.h"
#include "hf/generated.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"
#include "hf/mla.h"
#include "hf/moe.h"
#include "hf/multimodal.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"DeepseekV3ForCausalLM"};
// YaRN's keys its check maps (read into Rope by the shared reader).
constexpr std::array<std::string_view, 2> kRopeKeys = {"mscale", "mscale_all_dim"};

constexpr std::array<TensorRule, 2> kLayer = {rows::kAttnNorm, rows::kFfnNorm};

Error refused(const JsonFile& file, std::string_view key, const std::string& why) {
  return Error(ErrorKind::NotSupported, "key " + json::quoted(key) + " " + why).with_file(file.path());
}

// What transformers computes and llama.cpp's deepseek2 cannot: refused by the key that asks for it.
Status refuse_unconverted(const JsonFile& file, const ModelConfig& c) {
  const auto root = file.root();
  if (JsonFile::member(root, "quantization_config")) {
    return refused(file, "quantization_config",
                   "is set: quantized (FP8 block-scaled, weight_scale_inv) checkpoints are not converted; dequantize them first");
  }
  if (c.rope.type != "default" && c.rope.type != "yarn") {
    return Error(ErrorKind::NotSupported, json::quoted(c.rope.source) + " rope type " + json::quoted(c.rope.type) +
                                              " is not converted for DeepSeek-V3 (only YaRN, as DeepSeek's checkpoints have it)")
        .with_file(file.path());
  }
  SW_ASSIGN_OR_RETURN(auto bias, file.boolean(root, "attention_bias"));
  if (bias.value_or(false)) return refused(file, "attention_bias", "is true: llama.cpp's deepseek2 has no attention biases");
  // transformers' DeepseekV3 scores experts by sigmoid whatever the key says (llama.cpp by what it says).
  SW_ASSIGN_OR_RETURN(auto scoring, file.string(root, "scoring_func"));
  if (scoring && *scoring != "sigmoid") {
    return refused(file, "scoring_func", "is " + json::quoted(*scoring) + ": DeepseekV3ForCausalLM scores experts by sigmoid");
  }
  return Status::ok();
}

// DeepSeek's YaRN, with llama.cpp's keys for it: llama.cpp's deepseek2 scales attention by
// yarn_log_multiplier (0.1 mscale_all_dim), which gives transformers' logits when mscale equals
// mscale_all_dim (both 1 in DeepSeek-V3's checkpoints, 0.707 in V2's; measured within 3.2e-7 of the
// largest logit) and not otherwise (mscale 1 without mscale_all_dim: 2.6e-3).
Status read_yarn_keys(const JsonFile& file, ModelConfig& c) {
  if (c.rope.type != "yarn") return Status::ok();
  const std::string where = json::quoted(c.rope.source);
  auto refuse = [&](std::string_view key, const std::string& why) {
    return Error(ErrorKind::NotSupported, where + " key " + json::quoted(key) + " " + why).with_file(file.path());
  };
  if (!c.rope.mscale || !c.rope.mscale_all_dim || *c.rope.mscale != *c.rope.mscale_all_dim) {
    return refuse(c.rope.mscale ? "mscale" : "mscale_all_dim",
                  "must be given and equal mscale_all_dim: llama.cpp's deepseek2 scales attention by mscale_all_dim alone");
  }
  const auto object = *JsonFile::member(file.root(), c.rope.source);
  if (JsonFile::member(object, "attention_factor")) return refuse("attention_factor", "is set: llama.cpp's deepseek2 derives it from mscale_all_dim");
  const std::string a(c.arch->name);
  for (std::string_view key : {"beta_fast", "beta_slow"}) {  // written when given, as llama.cpp's converter does
    SW_ASSIGN_OR_RETURN(auto v, file.positive(object, key));
    if (v) c.arch_kv.push_back({a + ".rope.scaling.yarn_" + std::string(key), MetaValue::f32(static_cast<float>(*v))});
  }
  // llama.cpp's converter writes 0.1 x mscale_all_dim; its loader divides by 0.1 again.
  c.arch_kv.push_back({a + ".rope.scaling.yarn_log_multiplier", MetaValue::f32(static_cast<float>(0.1 * *c.rope.mscale_all_dim))});
  return Status::ok();
}

Status check(const JsonFile& file, ModelConfig& c) {
  SW_RETURN_IF_ERROR(refuse_unconverted(file, c));
  SW_RETURN_IF_ERROR(read_sigmoid_experts(file, c, SigmoidRouting{}));
  SW_RETURN_IF_ERROR(read_mla(file, c));
  return read_yarn_keys(file, c);
}

Status plan_layer(const ModelConfig& c, const TextModelNames& names, const TensorFile& weights, WithGenerated& generated, std::uint32_t n,
                  std::vector<ConvertTensor>& out) {
  const std::string hf = names.prefix + "layers." + std::to_string(n) + ".";
  const std::string gg = "blk." + std::to_string(n) + ".";
  SW_RETURN_IF_ERROR(plan_mla_attention(c, weights, generated, hf, gg, out));
  return plan_sigmoid_mlp(c, weights, hf, gg, n, out);
}

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(deepseek3) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "deepseek2",
                                      .base = LayerBase::None,
                                      .layer = kLayer,
                                      .check = check,
                                      .plan_layer = plan_layer,
                                      .drops_extra_layers = true,
                                      .rope_keys = kRopeKeys};
  return kArch;
}

}  // namespace safeweights::hf
