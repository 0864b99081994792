// The mixture-of-experts family (hf/moe.h): config keys and the plan of a layer's experts.
#include "hf/moe.h"

#include "hf/hf_files.h"
#include "hf/json_read.h"

namespace safeweights::hf {
namespace {

// llama.cpp's loader holds at most LLAMA_MAX_EXPERTS (llama-hparams.h) experts per layer.
constexpr std::int64_t kMaxExperts = 1024;

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

}  // namespace

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
