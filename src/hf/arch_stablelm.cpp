// StableLM (llama.cpp's "stablelm"): LayerNorm with biases, NEOX rope over the first
// partial_rotary_factor of each head (rope.dimension_count), optional q, k and v biases
// (use_qkv_bias), optional per-head LayerNorms of queries and keys (qk_layernorm: one tensor per head,
// stacked into attn_q_norm / attn_k_norm [heads, head_dim] as llama.cpp's converter stacks them), and
// the parallel residual (use_parallel_residual: no post-attention norm, which is how llama.cpp's graph
// tells it). llama.cpp's loader requires the output projection, so tied embeddings are refused; its
// converter writes no rope scaling, so only the default rope is converted.
#include <algorithm>
#include <array>

#include "hf/arch.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"
#include "hf/multimodal.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"StableLmForCausalLM"};

constexpr std::array<TensorRule, 9> kLayer = {{
    rows::kAttnNorm,
    rows::kAttnNormBias,
    rows::q(Permute::None),
    rows::k(Permute::None),
    rows::kV,
    rows::kO,
    rows::kGate,
    rows::kUp,
    rows::kDown,
}};
constexpr std::array<TensorRule, 2> kFfnNorm = {rows::kFfnNorm, rows::kFfnNormBias};

bool has_flag(const ModelConfig& c, std::string_view flag) { return std::find(c.arch_flags.begin(), c.arch_flags.end(), flag) != c.arch_flags.end(); }

// The per-head LayerNorm weights `which` (q_layernorm, k_layernorm) of `heads` heads, stacked.
Status add_head_norms(const ModelConfig& c, const TensorFile& weights, const std::string& hf, const std::string& gguf, std::string_view which,
                      std::uint32_t heads, std::vector<ConvertTensor>& out) {
  const std::vector<std::uint64_t> shape = {c.hidden_size / c.num_attention_heads};
  ConvertTensor stacked{.source = {}, .name = gguf, .stack = true};
  for (std::uint32_t h = 0; h < heads; ++h) {
    std::string name = hf + "self_attn." + std::string(which) + ".norms." + std::to_string(h) + ".weight";
    SW_RETURN_IF_ERROR(expect_tensor(weights, name, gguf, shape));
    stacked.pieces.push_back({.source = std::move(name)});
  }
  out.push_back(std::move(stacked));
  return Status::ok();
}

Status plan_layer(const ModelConfig& c, const TextModelNames& names, const TensorFile& weights, WithGenerated&, std::uint32_t n,
                  std::vector<ConvertTensor>& out) {
  const std::string hf = names.prefix + "layers." + std::to_string(n) + ".";
  const std::string gg = "blk." + std::to_string(n) + ".";
  if (has_flag(c, "qkv_bias")) {
    for (const TensorRule& t : rows::kQkvBias) SW_RETURN_IF_ERROR(add_rule(c, weights, t, hf, gg, out));
  }
  if (!has_flag(c, "parallel_residual")) {
    for (const TensorRule& t : kFfnNorm) SW_RETURN_IF_ERROR(add_rule(c, weights, t, hf, gg, out));
  }
  if (has_flag(c, "qk_layernorm")) {
    const std::uint32_t kv_heads = c.num_key_value_heads.value_or(c.num_attention_heads);
    SW_RETURN_IF_ERROR(add_head_norms(c, weights, hf, gg + "attn_q_norm.weight", "q_layernorm", c.num_attention_heads, out));
    SW_RETURN_IF_ERROR(add_head_norms(c, weights, hf, gg + "attn_k_norm.weight", "k_layernorm", kv_heads, out));
  }
  return Status::ok();
}

Status check(const JsonFile& file, ModelConfig& c) {
  auto refuse = [&](const std::string& what) { return Error(ErrorKind::NotSupported, what).with_file(file.path()); };
  if (c.head_dim && *c.head_dim != c.hidden_size / c.num_attention_heads) {
    return refuse("key `head_dim` is not hidden_size / num_attention_heads: llama.cpp's stablelm architecture derives it so");
  }
  if (c.tie_word_embeddings.value_or(false)) {  // StableLmConfig's default: untied
    return refuse("key `tie_word_embeddings` is true: llama.cpp's stablelm architecture requires its own output projection");
  }
  c.tie_word_embeddings = false;  // lm_head.weight required
  if (c.rope.type != "default") {
    return refuse("key " + json::quoted(c.rope.source) + " rope type " + json::quoted(c.rope.type) +
                  ": llama.cpp's converter writes no rope scaling for stablelm");
  }
  // transformers 5 keeps the factor in rope_parameters, transformers 4 at the top.
  SW_ASSIGN_OR_RETURN(auto top, file.positive(file.root(), "partial_rotary_factor"));
  if (top && c.rope.partial_rotary_factor && *top != *c.rope.partial_rotary_factor) {
    return file.bad("partial_rotary_factor", "differs from " + c.rope.source + ".partial_rotary_factor");
  }
  const double factor = c.rope.partial_rotary_factor ? *c.rope.partial_rotary_factor : top.value_or(0.25);  // StableLmConfig's default
  if (factor > 1.0) return file.bad("partial_rotary_factor", "is above 1");
  const std::uint32_t head_dim = c.hidden_size / c.num_attention_heads;
  const auto rotary = static_cast<std::uint32_t>(factor * head_dim);  // int() of the product, as both transformers and llama.cpp take it
  if (rotary % 2 != 0) return file.bad("partial_rotary_factor", "rotates an odd number of each head's values: rotary embeddings need pairs");
  c.arch_kv.push_back({"stablelm.rope.dimension_count", MetaValue::u32(rotary)});
  // llama.cpp's converter writes true when the key is absent (transformers' default is false; every
  // config transformers saves has it); its loader reads the layer's tensors, not this key.
  SW_ASSIGN_OR_RETURN(auto parallel, file.boolean(file.root(), "use_parallel_residual"));
  c.arch_kv.push_back({"stablelm.use_parallel_residual", MetaValue::boolean(parallel.value_or(true))});
  if (parallel.value_or(false)) c.arch_flags.emplace_back("parallel_residual");
  SW_ASSIGN_OR_RETURN(auto qkv_bias, file.boolean(file.root(), "use_qkv_bias"));
  if (qkv_bias.value_or(false)) c.arch_flags.emplace_back("qkv_bias");
  SW_ASSIGN_OR_RETURN(auto qk_norm, file.boolean(file.root(), "qk_layernorm"));
  if (qk_norm.value_or(false)) c.arch_flags.emplace_back("qk_layernorm");
  return Status::ok();
}

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(stablelm) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "stablelm",
                                      .base = LayerBase::None,
                                      .layer = kLayer,
                                      .check = check,
                                      .plan_layer = plan_layer,
                                      .norm = Norm::LayerNorm,
                                      .partial_rotary = true};
  return kArch;
}

}  // namespace safeweights::hf
