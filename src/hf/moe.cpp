// The mixture-of-experts family (hf/moe.h): config keys and the plan of a layer's experts.
#include "hf/moe.h"

#include <limits>

#include "hf/hf_files.h"
#include "hf/json_read.h"

namespace safeweights::hf {
namespace {

Error refused(const JsonFile& file, std::string_view key, const std::string& why) {
  return Error(ErrorKind::NotSupported, "key " + json::quoted(key) + " " + why).with_file(file.path());
}

// The expert count: num_local_experts, or num_experts (llama.cpp's converter reads them in that order;
// transformers 5 writes the first for Qwen3-MoE and Mixtral, the second for Qwen2-MoE and OLMoE).
Result<std::uint32_t> expert_count(const JsonFile& file) {
  SW_ASSIGN_OR_RETURN(auto local, file.count(file.root(), "num_local_experts", kMaxExperts));
  SW_ASSIGN_OR_RETURN(auto named, file.count(file.root(), "num_experts", kMaxExperts));
  if (local && named && *local != *named) return file.bad("num_experts", "differs from num_local_experts");
  if (!local && !named) return file.bad("num_local_experts", "is missing (a mixture of experts needs its expert count)");
  return local ? *local : *named;
}

// Qwen's decoder_sparse_step and mlp_only_layers put dense MLPs between sparse layers: llama.cpp's
// qwen2moe and qwen3moe make every layer sparse.
Status check_every_layer_sparse(const JsonFile& file, const std::string& arch) {
  SW_ASSIGN_OR_RETURN(auto step, file.count(file.root(), "decoder_sparse_step"));
  if (step && *step != 1) {
    return refused(file, "decoder_sparse_step", "is " + std::to_string(*step) + ": llama.cpp's " + arch + " architecture makes every layer sparse");
  }
  if (auto dense = JsonFile::member(file.root(), "mlp_only_layers")) {
    if (dense->type() != json::element_type::ARRAY) return file.bad("mlp_only_layers", "must be a list of layer indices");
    if (json::as_array(*dense).size() != 0) {
      return refused(file, "mlp_only_layers", "lists dense layers: llama.cpp's " + arch + " architecture makes every layer sparse");
    }
  }
  return Status::ok();
}

// gguf-py's ExpertGatingFuncType.SIGMOID.
constexpr std::uint32_t kSigmoidGating = 2;

// DeepSeek's and GLM's experts, their names in a layer.
constexpr MoeTable kSigmoidExperts{.block = "mlp", .expert = {"gate_proj", "up_proj", "down_proj"}};

// n_group and topk_group, written as llama.cpp's converter writes them for every architecture; where its
// graph does not group, accepted only when every group takes part.
Status read_groups(const JsonFile& file, ModelConfig& c, const MoeConfig& moe, const SigmoidRouting& how) {
  const auto root = file.root();
  SW_ASSIGN_OR_RETURN(auto groups, file.count(root, "n_group", kMaxExperts));
  SW_ASSIGN_OR_RETURN(auto groups_used, file.count(root, "topk_group", kMaxExperts));
  if (groups && moe.experts % *groups != 0) return file.bad("n_group", "does not divide n_routed_experts");
  if (groups_used && *groups_used > groups.value_or(1)) return file.bad("topk_group", "is above n_group");
  const std::string a(c.arch->name);
  if (!how.grouped && groups_used.value_or(1) < groups.value_or(1)) {
    return refused(file, "topk_group", "is below n_group: llama.cpp's " + a + " architecture chooses experts among all groups");
  }
  if (groups) c.arch_kv.push_back({a + ".expert_group_count", MetaValue::u32(*groups)});
  if (groups_used) c.arch_kv.push_back({a + ".expert_group_used_count", MetaValue::u32(*groups_used)});
  return Status::ok();
}

}  // namespace

Status read_sigmoid_experts(const JsonFile& file, ModelConfig& c, const SigmoidRouting& how) {
  const auto root = file.root();
  const std::string a(c.arch->name);
  MoeConfig moe;
  SW_ASSIGN_OR_RETURN(moe.experts, file.required_count(root, "n_routed_experts", kMaxExperts));
  SW_ASSIGN_OR_RETURN(moe.used, file.required_count(root, "num_experts_per_tok", kMaxExperts));
  if (moe.used > moe.experts) return file.bad("num_experts_per_tok", "is above n_routed_experts");
  SW_ASSIGN_OR_RETURN(moe.ffn, file.required_count(root, "moe_intermediate_size"));
  SW_ASSIGN_OR_RETURN(auto shared, file.count(root, "n_shared_experts", kMaxExperts));
  if (!shared) return refused(file, "n_shared_experts", "is absent or 0: llama.cpp's " + a + " needs shared experts");
  const std::uint64_t shared_ffn = std::uint64_t{moe.ffn} * *shared;  // llama.cpp's shared experts are one MLP this wide
  if (shared_ffn > std::numeric_limits<std::uint32_t>::max()) return file.bad("n_shared_experts", "times moe_intermediate_size overflows");
  moe.shared_ffn = static_cast<std::uint32_t>(shared_ffn);
  SW_ASSIGN_OR_RETURN(auto dense, file.integer(root, "first_k_dense_replace", 0, c.num_hidden_layers));
  moe.leading_dense = static_cast<std::uint32_t>(dense.value_or(0));
  SW_ASSIGN_OR_RETURN(auto scale, file.positive(root, "routed_scaling_factor"));
  SW_ASSIGN_OR_RETURN(auto normalize, file.boolean(root, "norm_topk_prob"));
  SW_RETURN_IF_ERROR(read_groups(file, c, moe, how));
  auto u32 = [&](std::string key, std::uint32_t v) { c.arch_kv.push_back({a + "." + key, MetaValue::u32(v)}); };
  u32("expert_gating_func", kSigmoidGating);
  u32("leading_dense_block_count", moe.leading_dense);
  if (how.vocab_key) u32("vocab_size", c.vocab_size);
  u32("expert_feed_forward_length", moe.ffn);
  u32("expert_shared_count", *shared);
  if (scale) c.arch_kv.push_back({a + ".expert_weights_scale", MetaValue::f32(static_cast<float>(*scale))});
  if (how.norm_always || normalize.value_or(false)) {
    c.arch_kv.push_back({a + ".expert_weights_norm", MetaValue::boolean(normalize.value_or(true))});
  }
  c.moe = moe;
  return Status::ok();
}

Status plan_sigmoid_mlp(const ModelConfig& c, const TensorFile& weights, const std::string& hf, const std::string& gg, std::uint32_t n,
                        std::vector<ConvertTensor>& out) {
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
  SW_RETURN_IF_ERROR(plan_experts(kSigmoidExperts, moe, hidden, hf, gg, weights, out));
  SW_RETURN_IF_ERROR(add("mlp.gate.e_score_correction_bias", "exp_probs_b.bias", {moe.experts}));
  SW_RETURN_IF_ERROR(add("mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight", {moe.shared_ffn, hidden}));
  SW_RETURN_IF_ERROR(add("mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight", {moe.shared_ffn, hidden}));
  return add("mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight", {hidden, moe.shared_ffn});
}

Status read_moe(const JsonFile& file, ModelConfig& c) {
  const MoeTable& table = *c.arch->moe;
  const std::string a(c.arch->name);
  MoeConfig moe;
  SW_ASSIGN_OR_RETURN(moe.experts, expert_count(file));
  SW_ASSIGN_OR_RETURN(moe.used, file.required_count(file.root(), "num_experts_per_tok", kMaxExperts));
  if (moe.used > moe.experts) return file.bad("num_experts_per_tok", "is above the expert count " + std::to_string(moe.experts));
  if (table.expert_ffn_key) {
    SW_ASSIGN_OR_RETURN(moe.ffn, file.required_count(file.root(), "moe_intermediate_size"));
  } else {
    moe.ffn = c.intermediate_size;
  }
  if (table.shared_ffn_key) {
    SW_ASSIGN_OR_RETURN(moe.shared_ffn, file.required_count(file.root(), "shared_expert_intermediate_size"));
  }
  if (table.norm_key) {
    // transformers' default is false: an absent key does not renormalize.
    SW_ASSIGN_OR_RETURN(auto norm, file.boolean(file.root(), "norm_topk_prob"));
    if (norm.value_or(false) != table.normalizes) {
      return refused(file, "norm_topk_prob",
                     std::string(norm ? (*norm ? "is true" : "is false") : "is absent (transformers: false)") + ": llama.cpp's " + a +
                         " architecture " + (table.normalizes ? "renormalizes" : "does not renormalize") + " the chosen experts' weights");
    }
  }
  if (table.sparse_step_keys) SW_RETURN_IF_ERROR(check_every_layer_sparse(file, a));
  // After general.file_type, as the converter's MoE classes add them (Qwen2MoeModel.set_gguf_parameters).
  if (table.expert_ffn_key) c.arch_kv.push_back({a + ".expert_feed_forward_length", MetaValue::u32(moe.ffn)});
  if (table.shared_ffn_key) c.arch_kv.push_back({a + ".expert_shared_feed_forward_length", MetaValue::u32(moe.shared_ffn)});
  c.moe = moe;
  return Status::ok();
}

Status plan_experts(const MoeTable& table, const MoeConfig& moe, std::uint64_t hidden, const std::string& hf, const std::string& gg,
                    const TensorFile& weights, std::vector<ConvertTensor>& out) {
  const std::string fused_block = hf + std::string(table.fused_block.empty() ? table.block : table.fused_block) + ".";
  const std::string fused = fused_block + "experts.gate_up_proj";
  const bool is_fused = table.fused && weights.find(fused);
  const std::string block = is_fused ? fused_block : hf + std::string(table.block) + ".";
  const std::uint64_t experts = moe.experts;
  const std::uint64_t ffn = moe.ffn;
  // The router, F32 at any --type (llama.cpp's converter keeps FFN_GATE_INP so).
  const std::string router = block + "gate.weight";
  const std::vector<std::uint64_t> router_shape = {experts, hidden};
  SW_RETURN_IF_ERROR(expect_tensor(weights, router, gg + "ffn_gate_inp.weight", router_shape));
  out.push_back({.source = router, .name = gg + "ffn_gate_inp.weight", .type = TensorType::F32});
  const std::string gate = gg + "ffn_gate_exps.weight";
  const std::string up = gg + "ffn_up_exps.weight";
  const std::string down = gg + "ffn_down_exps.weight";
  if (is_fused) {
    // transformers 5: gate_up_proj [E, 2F, D], gate the first F rows of each expert, up the rest
    // (conversion/qwen.py splits dimension -2 so); down_proj [E, D, F] as it is.
    const std::vector<std::uint64_t> fused_shape = {experts, 2 * ffn, hidden};
    SW_RETURN_IF_ERROR(expect_tensor(weights, fused, gate, fused_shape));
    out.push_back({.source = {}, .name = gate, .pieces = {{.source = fused, .dim = 1, .begin = 0, .end = ffn}}});
    out.push_back({.source = {}, .name = up, .pieces = {{.source = fused, .dim = 1, .begin = ffn, .end = 2 * ffn}}});
    const std::string fused_down = block + "experts.down_proj";
    const std::vector<std::uint64_t> down_shape = {experts, hidden, ffn};
    SW_RETURN_IF_ERROR(expect_tensor(weights, fused_down, down, down_shape));
    out.push_back({.source = fused_down, .name = down});
    return Status::ok();
  }
  // One tensor per expert, stacked in expert order into [E, ...].
  const std::array<std::pair<const std::string*, std::vector<std::uint64_t>>, 3> kinds = {
      {{&gate, {ffn, hidden}}, {&up, {ffn, hidden}}, {&down, {hidden, ffn}}}};
  for (std::size_t k = 0; k < kinds.size(); ++k) {
    ConvertTensor stacked{.source = {}, .name = *kinds[k].first, .stack = true};
    stacked.pieces.reserve(experts);
    for (std::uint64_t e = 0; e < experts; ++e) {
      std::string name = block + "experts." + std::to_string(e) + "." + std::string(table.expert[k]) + ".weight";
      SW_RETURN_IF_ERROR(expect_tensor(weights, name, *kinds[k].first, kinds[k].second));
      stacked.pieces.push_back({.source = std::move(name)});
    }
    out.push_back(std::move(stacked));
  }
  return Status::ok();
}

}  // namespace safeweights::hf
