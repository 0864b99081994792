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

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"DeepseekV3ForCausalLM"};
// YaRN's keys its check maps (read into Rope by the shared reader).
constexpr std::array<std::string_view, 2> kRopeKeys = {"mscale", "mscale_all_dim"};

constexpr std::array<TensorRule, 2> kLayer = {rows::kAttnNorm, rows::kFfnNorm};

constexpr MoeTable kExperts{.block = "mlp", .expert = {"gate_proj", "up_proj", "down_proj"}};

// llama.cpp's loader holds at most LLAMA_MAX_EXPERTS (llama-hparams.h) experts per layer.
constexpr std::int64_t kMaxExperts = 1024;
// gguf-py's ExpertGatingFuncType.SIGMOID.
constexpr std::uint32_t kSigmoidGating = 2;

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

// The experts: counts, groups, scaling and the dense leading layers, with llama.cpp's keys.
Status read_experts(const JsonFile& file, ModelConfig& c) {
  const auto root = file.root();
  const std::string a(c.arch->name);
  MoeConfig moe;
  SW_ASSIGN_OR_RETURN(moe.experts, file.required_count(root, "n_routed_experts", kMaxExperts));
  SW_ASSIGN_OR_RETURN(moe.used, file.required_count(root, "num_experts_per_tok", kMaxExperts));
  if (moe.used > moe.experts) return file.bad("num_experts_per_tok", "is above n_routed_experts");
  SW_ASSIGN_OR_RETURN(moe.ffn, file.required_count(root, "moe_intermediate_size"));
  SW_ASSIGN_OR_RETURN(auto shared, file.count(root, "n_shared_experts", kMaxExperts));
  if (!shared) return refused(file, "n_shared_experts", "is absent or 0: llama.cpp's deepseek2 needs shared experts");
  const std::uint64_t shared_ffn = std::uint64_t{moe.ffn} * *shared;  // llama.cpp's shared experts are one MLP this wide
  if (shared_ffn > std::numeric_limits<std::uint32_t>::max()) return file.bad("n_shared_experts", "times moe_intermediate_size overflows");
  moe.shared_ffn = static_cast<std::uint32_t>(shared_ffn);
  SW_ASSIGN_OR_RETURN(auto dense, file.integer(root, "first_k_dense_replace", 0, c.num_hidden_layers));
  moe.leading_dense = static_cast<std::uint32_t>(dense.value_or(0));
  SW_ASSIGN_OR_RETURN(auto groups, file.count(root, "n_group", kMaxExperts));
  SW_ASSIGN_OR_RETURN(auto groups_used, file.count(root, "topk_group", kMaxExperts));
  if (groups && moe.experts % *groups != 0) return file.bad("n_group", "does not divide n_routed_experts");
  if (groups_used && *groups_used > groups.value_or(1)) return file.bad("topk_group", "is above n_group");
  SW_ASSIGN_OR_RETURN(auto scale, file.positive(root, "routed_scaling_factor"));
  SW_ASSIGN_OR_RETURN(auto normalize, file.boolean(root, "norm_topk_prob"));
  auto u32 = [&](std::string key, std::uint32_t v) { c.arch_kv.push_back({a + "." + key, MetaValue::u32(v)}); };
  if (groups) u32("expert_group_count", *groups);
  if (groups_used) u32("expert_group_used_count", *groups_used);
  u32("expert_gating_func", kSigmoidGating);
  u32("leading_dense_block_count", moe.leading_dense);
  u32("vocab_size", c.vocab_size);
  u32("expert_feed_forward_length", moe.ffn);
  u32("expert_shared_count", *shared);
  if (scale) c.arch_kv.push_back({a + ".expert_weights_scale", MetaValue::f32(static_cast<float>(*scale))});
  if (normalize.value_or(false)) c.arch_kv.push_back({a + ".expert_weights_norm", MetaValue::boolean(true)});
  c.moe = moe;
  return Status::ok();
}

Status check(const JsonFile& file, ModelConfig& c) {
  SW_RETURN_IF_ERROR(refuse_unconverted(file, c));
  SW_RETURN_IF_ERROR(read_experts(file, c));
  SW_RETURN_IF_ERROR(read_mla(file, c));
  return read_yarn_keys(file, c);
}

Status plan_layer(const ModelConfig& c, const TensorFile& weights, WithGenerated& generated, std::uint32_t n, std::vector<ConvertTensor>& out) {
  const std::string hf = "model.layers." + std::to_string(n) + ".";
  const std::string gg = "blk." + std::to_string(n) + ".";
  SW_RETURN_IF_ERROR(plan_mla_attention(c, weights, generated, hf, gg, out));
  const MoeConfig& moe = *c.moe;
  auto add = [&](std::string from, std::string to, std::vector<std::uint64_t> shape) {
    SW_RETURN_IF_ERROR(expect_tensor(weights, hf + from, gg + to, shape));
    out.push_back({.source = hf + from, .name = gg + to});
    return Status::ok();
  };
  const std::uint64_t hidden = c.hidden_size;
  if (n < moe.leading_dense) {
    SW_RETURN_IF_ERROR(add("mlp.gate_proj.weight", "ffn_gate.weight", {c.intermediate_size, hidden}));
    SW_RETURN_IF_ERROR(add("mlp.up_proj.weight", "ffn_up.weight", {c.intermediate_size, hidden}));
    return add("mlp.down_proj.weight", "ffn_down.weight", {hidden, c.intermediate_size});
  }
  SW_RETURN_IF_ERROR(plan_experts(kExperts, moe, hidden, hf, gg, weights, out));
  SW_RETURN_IF_ERROR(add("mlp.gate.e_score_correction_bias", "exp_probs_b.bias", {moe.experts}));
  SW_RETURN_IF_ERROR(add("mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight", {moe.shared_ffn, hidden}));
  SW_RETURN_IF_ERROR(add("mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight", {moe.shared_ffn, hidden}));
  return add("mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight", {hidden, moe.shared_ffn});
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
