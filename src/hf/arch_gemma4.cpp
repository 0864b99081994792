// Gemma 4 text models (llama.cpp's "gemma4", convert_hf_to_gguf.py's Gemma4Model): Gemma 3's layer
// with plain RMS norms (scaled by the weight alone), and per layer type its own head size and KV head
// count (full-attention layers: per_layer_config / global_head_dim), "proportional" rope on the full
// layers (a part of each head rotated, the rest left: llama.cpp's rope_freqs of 1 and 1e30), layers at
// the end that reuse an earlier layer's keys and values (num_kv_shared_layers: no k/v of their own),
// keys as values on full layers (attention_k_eq_v: no v_proj), per-layer embeddings (PLE), a per-layer
// output scale, and the double-wide MLP of the shared layers. The tokenizer is tokenizer.json's BPE as
// llama.cpp's "gemma4" tokenizer model (hf/vocab.cpp). Gemma4ForConditionalGeneration's text model is
// converted, its vision and audio towers left out (hf/multimodal.h). The experts (enable_moe_block,
// gemma-4-26B-A4B) sit beside the dense MLP in every layer: a router with its own input scale and a
// per-expert output scale, transformers 5's fused experts kept fused (ffn_gate_up_exps), three norms of
// their own.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "hf/arch.h"
#include "hf/config_rules.h"
#include "hf/generated.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"
#include "hf/moe.h"
#include "hf/multimodal.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 2> kClasses = {"Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"};
constexpr std::array<std::string_view, 1> kMultimodal = {"Gemma4ForConditionalGeneration"};
constexpr std::array<std::string_view, 1> kRopeTypes = {"proportional"};
constexpr std::array<TensorRule, 0> kLayer = {};

// llama.cpp's rope_freqs value for a dimension pair left unrotated: its frequency divided to nothing.
constexpr float kUnrotated = 1e30f;

// The keys check() writes that plan_layer() reads back: what llama.cpp's loader reads them for.
constexpr std::string_view kSwaPattern = "gemma4.attention.sliding_window_pattern";
constexpr std::string_view kKeyLengthSwa = "gemma4.attention.key_length_swa";
constexpr std::string_view kHeadCountKv = "gemma4.attention.head_count_kv";
constexpr std::string_view kSharedKv = "gemma4.attention.shared_kv_layers";
constexpr std::string_view kPerLayerInput = "gemma4.embedding_length_per_layer_input";
constexpr std::string_view kFeedForward = "gemma4.feed_forward_length";
constexpr std::string_view kRotaryFull = "gemma4.rope.dimension_count";

const MetaValue* key_of(const ModelConfig& c, std::string_view key) {
  for (const MetaEntry& e : c.arch_kv) {
    if (e.key == key) return &e.value;
  }
  return nullptr;
}

// A per-layer key's value for layer `n`: the array's item, or the scalar.
std::uint64_t layer_value(const MetaValue& v, std::uint32_t n) { return v.type == MetaType::ARRAY ? v.items.at(n).as_u64() : v.as_u64(); }

// A count that may be 0, or null (read as 0, as transformers reads None there); unset when absent.
Result<std::optional<std::uint32_t>> count_or_zero(const JsonFile& file, std::string_view key) {
  auto e = JsonFile::member(file.root(), key);
  if (!e) return std::optional<std::uint32_t>();
  if (e->type() == json::element_type::NULL_VALUE) return std::optional<std::uint32_t>(0);
  SW_ASSIGN_OR_RETURN(auto v, file.integer(file.root(), key, 0, std::numeric_limits<std::uint32_t>::max()));
  return std::optional<std::uint32_t>(static_cast<std::uint32_t>(*v));
}

// One layer type's attention as transformers builds it: head size and KV heads.
struct Heads {
  std::uint32_t head_dim = 0;
  std::uint32_t kv_heads = 0;
  bool operator==(const Heads&) const = default;
};

// Which layers slide (layer_types), as llama.cpp's sliding_window_pattern.
Result<std::vector<bool>> sliding_layers(const JsonFile& file, const ModelConfig& c) {
  auto types = JsonFile::member(file.root(), "layer_types");
  if (!types || types->type() != json::element_type::ARRAY || json::as_array(*types).size() != c.num_hidden_layers) {
    return file.bad("layer_types", "must list one type per layer (llama.cpp's converter reads it)");
  }
  std::vector<bool> sliding;
  for (auto t : json::as_array(*types)) {
    const std::string_view s = t.type() == json::element_type::STRING ? json::as_string(t) : std::string_view{};
    if (s != "sliding_attention" && s != "full_attention")
      return file.bad("layer_types", "holds a type other than sliding_attention / full_attention");
    sliding.push_back(s == "sliding_attention");
  }
  // transformers makes the last layer a full-attention one whatever the file says; llama.cpp reads the file.
  if (sliding.back()) return refuse_key(file, "layer_types", "ends with a sliding layer: transformers computes its last layer with full attention");
  return sliding;
}

// The full-attention layers' heads as transformers computes them (per_layer_config, else global_head_dim
// and num_global_key_value_heads), refused where llama.cpp's converter would read others. `kv_key`:
// whether llama.cpp's converter writes head_count_kv per layer.
Result<Heads> full_heads(const JsonFile& file, const ModelConfig& c, const std::vector<bool>& sliding, const Heads& swa, bool& kv_key) {
  SW_ASSIGN_OR_RETURN(auto global_dim, file.count(file.root(), "global_head_dim"));
  SW_ASSIGN_OR_RETURN(auto global_kv, file.count(file.root(), "num_global_key_value_heads"));
  SW_ASSIGN_OR_RETURN(auto k_eq_v, file.boolean(file.root(), "attention_k_eq_v"));
  std::vector<Heads> layers(c.num_hidden_layers, swa);
  std::vector<bool> kv_given(c.num_hidden_layers, false);
  auto per_layer = JsonFile::member(file.root(), "per_layer_config");
  if (per_layer && per_layer->type() == json::element_type::OBJECT) {
    for (auto field : json::as_object(*per_layer)) {
      const std::string where = "per_layer_config." + std::string(field.key);
      std::uint32_t n = 0;
      const auto key = field.key;
      if (key.empty() || key.size() > 6 || !std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) ||
          (n = static_cast<std::uint32_t>(std::stoul(std::string(key)))) >= c.num_hidden_layers) {
        return file.bad(where, "does not name a layer");
      }
      if (field.value.type() != json::element_type::OBJECT) return file.bad(where, "must be an object");
      for (auto entry : json::as_object(field.value)) {
        if (entry.key != "head_dim" && entry.key != "num_key_value_heads")
          return refuse_key(file, where + "." + std::string(entry.key), "is not converted");
      }
      SW_ASSIGN_OR_RETURN(auto dim, file.count(field.value, "head_dim"));
      SW_ASSIGN_OR_RETURN(auto kv, file.count(field.value, "num_key_value_heads"));
      if (dim) layers[n].head_dim = *dim;
      if (kv) layers[n].kv_heads = *kv;
      kv_given[n] = kv.has_value();
    }
  } else if (per_layer && per_layer->type() != json::element_type::NULL_VALUE) {
    return file.bad("per_layer_config", "must be an object");
  } else {
    // transformers 5 turns these into per_layer_config when it reads the file.
    if (!global_dim) return file.bad("global_head_dim", "is missing (llama.cpp's converter reads the full-attention layers' head size there)");
    for (std::uint32_t n = 0; n < c.num_hidden_layers; ++n) {
      if (sliding[n]) continue;
      layers[n].head_dim = *global_dim;
      if (global_kv && k_eq_v.value_or(false)) layers[n].kv_heads = *global_kv;
      kv_given[n] = global_kv && k_eq_v.value_or(false);
    }
    if (global_kv && !k_eq_v.value_or(false)) {
      return refuse_key(file, "num_global_key_value_heads",
                        "is set without attention_k_eq_v: transformers ignores it, llama.cpp's converter writes it");
    }
  }
  std::optional<Heads> full;
  for (std::uint32_t n = 0; n < c.num_hidden_layers; ++n) {
    if (sliding[n]) {
      if (layers[n] != swa)
        return refuse_key(file, "per_layer_config", "changes sliding layer " + std::to_string(n) + ": llama.cpp has one head size per layer type");
      continue;
    }
    if (full && *full != layers[n])
      return refuse_key(file, "per_layer_config", "differs between full-attention layers: llama.cpp has one head size per layer type");
    full = layers[n];
    kv_key = kv_key || kv_given[n];
  }
  if (global_dim && *global_dim != full->head_dim)
    return refuse_key(file, "global_head_dim", "differs from per_layer_config (which transformers reads)");
  if (global_kv && *global_kv != full->kv_heads)
    return refuse_key(file, "num_global_key_value_heads", "differs from per_layer_config (which transformers reads)");
  if (full->head_dim % 2 != 0 || full->kv_heads == 0 || c.num_attention_heads % full->kv_heads != 0) {
    return file.bad("per_layer_config", "gives the full-attention layers an odd head size or a KV head count that does not divide the heads");
  }
  return *full;
}

// Switches llama.cpp's gemma4 architecture has no computation for (or that are not converted yet).
Status refuse_switches(const JsonFile& file) {
  SW_RETURN_IF_ERROR(refuse_true(file, "gemma4", {"attention_bias"}));
  // (llama.cpp's converter folds the per-expert scale into NVFP4 experts' scales: only float weights are converted.)
  if (JsonFile::member(file.root(), "quantization_config")) {
    return refuse_key(file, "quantization_config", "is set: quantized checkpoints are not converted; dequantize them first");
  }
  SW_ASSIGN_OR_RETURN(auto bidirectional, file.string(file.root(), "use_bidirectional_attention"));
  if (bidirectional == "all") return refuse_key(file, "use_bidirectional_attention", "is `all`: llama.cpp's gemma4 attends causally to text");
  if (JsonFile::member(file.root(), "attn_logit_softcapping") &&
      JsonFile::member(file.root(), "attn_logit_softcapping")->type() != json::element_type::NULL_VALUE) {
    return refuse_key(file, "attn_logit_softcapping", "is set: llama.cpp's gemma4 architecture does not cap attention logits");
  }
  return Status::ok();
}

// The experts transformers builds with enable_moe_block (num_experts of moe_intermediate_size, top_k_experts
// chosen) as c.moe; llama.cpp's keys for them: expert_count and expert_used_count (the plan writes them)
// and expert_feed_forward_length. The names llama.cpp's converter reads before transformers' ones must
// agree with them, and without enable_moe_block no expert key may be set (transformers builds no experts,
// llama.cpp's converter would still write the keys).
Status read_experts(const JsonFile& file, ModelConfig& c) {
  const auto root = file.root();
  SW_ASSIGN_OR_RETURN(auto enabled, file.boolean(root, "enable_moe_block"));
  if (!enabled.value_or(false)) {
    for (std::string_view key : {"num_experts", "top_k_experts", "moe_intermediate_size", "expert_intermediate_size"}) {
      if (JsonFile::member(root, key)) return refuse_key(file, key, "is set without enable_moe_block: transformers builds no experts");
    }
    return Status::ok();
  }
  MoeConfig moe;
  SW_ASSIGN_OR_RETURN(moe.experts, file.required_count(root, "num_experts", kMaxExperts));
  SW_ASSIGN_OR_RETURN(moe.used, file.required_count(root, "top_k_experts", kMaxExperts));
  if (moe.used > moe.experts) return file.bad("top_k_experts", "is above num_experts");
  SW_ASSIGN_OR_RETURN(moe.ffn, file.required_count(root, "moe_intermediate_size"));
  // (num_local_experts, read before num_experts, is refused for every architecture without a MoeTable.)
  const std::array<std::pair<std::string_view, std::uint32_t>, 3> read_first = {{
      {"num_experts_per_tok", moe.used},
      {"num_experts_per_token", moe.used},
      {"expert_intermediate_size", moe.ffn},
  }};
  for (const auto& [key, value] : read_first) {
    SW_ASSIGN_OR_RETURN(auto other, file.count(root, key));
    if (other && *other != value) return refuse_key(file, key, "differs from transformers' key: llama.cpp's converter reads it first");
  }
  c.moe = moe;
  c.arch_kv.push_back({"gemma4.expert_feed_forward_length", MetaValue::u32(moe.ffn)});
  return Status::ok();
}

// Full layers: "proportional" rope over a part of each head; sliding layers: the default rope.
Status check_rope(const JsonFile& file, ModelConfig& c, const Heads& full, const Heads& swa) {
  if (c.rope.type != "proportional") {
    return refuse_key(file, c.rope.source.empty() ? "rope_parameters" : c.rope.source,
                      "is not a `proportional` rope: llama.cpp's converter requires it for the full-attention layers");
  }
  if (!c.rope.partial_rotary_factor) return file.bad(c.rope.source + ".partial_rotary_factor", "is missing (llama.cpp's converter reads it)");
  if (*c.rope.partial_rotary_factor > 1.0) return file.bad(c.rope.source + ".partial_rotary_factor", "is above 1");
  if (c.rope_sliding.source.empty()) return file.bad("rope_parameters.sliding_attention", "is missing (the sliding layers' rope)");
  if (c.rope_sliding.type != "default")
    return refuse_key(file, c.rope_sliding.source, "is not the default rope: llama.cpp scales no sliding-window rope");
  if (c.rope_sliding.partial_rotary_factor.value_or(1.0) != 1.0) {
    return refuse_key(file, c.rope_sliding.source + ".partial_rotary_factor", "is not 1: transformers' default rope rotates whole heads");
  }
  c.arch_kv.push_back({"gemma4.rope.freq_base_swa", MetaValue::f32(static_cast<float>(c.rope_sliding.theta.value_or(10000.0)))});
  // "proportional" rotates all of a full head, with rope_freqs leaving the pairs past the factor's.
  c.arch_kv.push_back({std::string(kRotaryFull), MetaValue::u32(full.head_dim)});
  c.arch_kv.push_back({"gemma4.rope.dimension_count_swa", MetaValue::u32(swa.head_dim)});
  return Status::ok();
}

Status check(const JsonFile& file, ModelConfig& c) {
  SW_RETURN_IF_ERROR(refuse_switches(file));
  SW_RETURN_IF_ERROR(read_experts(file, c));
  SW_ASSIGN_OR_RETURN(auto window, file.count(file.root(), "sliding_window"));
  if (!window) return file.bad("sliding_window", "is missing (llama.cpp needs gemma4.attention.sliding_window)");
  SW_ASSIGN_OR_RETURN(auto cap, file.positive(file.root(), "final_logit_softcapping"));
  SW_ASSIGN_OR_RETURN(std::vector<bool> sliding, sliding_layers(file, c));
  const Heads swa{c.head_dim.value_or(c.hidden_size / c.num_attention_heads), c.num_key_value_heads.value_or(c.num_attention_heads)};
  bool kv_per_layer = false;
  SW_ASSIGN_OR_RETURN(Heads full, full_heads(file, c, sliding, swa, kv_per_layer));
  SW_ASSIGN_OR_RETURN(auto shared, count_or_zero(file, "num_kv_shared_layers"));
  if (!shared) return file.bad("num_kv_shared_layers", "is missing (llama.cpp's converter reads it)");
  if (*shared >= c.num_hidden_layers) return file.bad("num_kv_shared_layers", "leaves no layer computing keys and values");
  if (!JsonFile::member(file.root(), "hidden_size_per_layer_input")) {
    return file.bad("hidden_size_per_layer_input", "is missing (transformers then computes 256 per-layer dimensions, llama.cpp's converter none)");
  }
  SW_ASSIGN_OR_RETURN(auto per_layer, count_or_zero(file, "hidden_size_per_layer_input"));
  if (per_layer.value_or(0) > 0) {
    SW_ASSIGN_OR_RETURN(auto pl_vocab, file.count(file.root(), "vocab_size_per_layer_input"));
    if (pl_vocab.value_or(262144) != c.vocab_size) {
      return refuse_key(file, "vocab_size_per_layer_input", "is not vocab_size: llama.cpp's gemma4 reads one per-layer embedding row per token");
    }
  }
  SW_ASSIGN_OR_RETURN(auto double_wide, file.boolean(file.root(), "use_double_wide_mlp"));
  SW_ASSIGN_OR_RETURN(auto k_eq_v, file.boolean(file.root(), "attention_k_eq_v"));
  if (k_eq_v.value_or(false)) c.arch_flags.emplace_back("k_eq_v");

  const std::string a = "gemma4";
  if (cap) c.arch_kv.push_back({a + ".final_logit_softcapping", MetaValue::f32(static_cast<float>(*cap))});
  c.arch_kv.push_back({a + ".attention.sliding_window", MetaValue::u32(*window)});
  c.arch_kv.push_back({std::string(kSharedKv), MetaValue::u32(*shared)});
  c.arch_kv.push_back({std::string(kPerLayerInput), MetaValue::u32(per_layer.value_or(0))});
  std::vector<MetaValue> pattern;
  for (bool s : sliding) pattern.push_back(MetaValue::boolean(s));
  c.arch_kv.push_back({std::string(kSwaPattern), MetaValue::array(MetaType::BOOL, std::move(pattern))});
  c.head_dim = full.head_dim;  // {arch}.attention.key_length / value_length: the full layers'
  c.arch_kv.push_back({std::string(kKeyLengthSwa), MetaValue::u32(swa.head_dim)});
  c.arch_kv.push_back({a + ".attention.value_length_swa", MetaValue::u32(swa.head_dim)});
  if (kv_per_layer) {
    std::vector<MetaValue> kv;
    for (bool s : sliding) kv.push_back(MetaValue::i32(static_cast<std::int32_t>(s ? swa.kv_heads : full.kv_heads)));
    c.num_key_value_heads.reset();  // the array replaces the scalar
    c.arch_kv.push_back({std::string(kHeadCountKv), MetaValue::array(MetaType::INT32, std::move(kv))});
  }
  if (double_wide.value_or(false)) {
    // transformers doubles the MLP of the layers that reuse keys and values; llama.cpp reads one width per layer.
    // gguf-py writes a list of integers as INT32.
    if (2ull * c.intermediate_size > std::numeric_limits<std::int32_t>::max()) return file.bad("intermediate_size", "is too large to double");
    std::vector<MetaValue> widths;
    const std::uint64_t first_shared = c.num_hidden_layers - *shared;
    for (std::uint32_t n = 0; n < c.num_hidden_layers; ++n) {
      widths.push_back(MetaValue::i32(static_cast<std::int32_t>(n < first_shared ? c.intermediate_size : 2ull * c.intermediate_size)));
    }
    c.intermediate_size = 0;  // the array replaces the scalar
    c.arch_kv.push_back({std::string(kFeedForward), MetaValue::array(MetaType::INT32, std::move(widths))});
  }
  return check_rope(file, c, full, swa);
}

// llama.cpp's rope_freqs for the full layers: 1 for the pairs "proportional" rotates, 1e30 for the rest.
std::vector<float> proportional_factors(const ModelConfig& c) {
  const std::uint32_t head_dim = *c.head_dim;
  const auto rotated = static_cast<std::uint32_t>(head_dim * *c.rope.partial_rotary_factor / 2);  // int(), as llama.cpp's converter
  std::vector<float> factors(head_dim / 2, kUnrotated);
  std::fill_n(factors.begin(), std::min<std::size_t>(rotated, factors.size()), 1.0f);
  return factors;
}

struct LayerPlan {
  const ModelConfig& c;
  const TensorFile& weights;
  std::vector<ConvertTensor>& out;

  Status add(const std::string& hf, const std::string& gguf, std::vector<std::uint64_t> shape, bool required = true) {
    if (!required && !weights.find(hf)) return Status::ok();
    SW_RETURN_IF_ERROR(expect_tensor(weights, hf, gguf, shape));
    out.push_back({.source = hf, .name = gguf});
    return Status::ok();
  }
};

// Layer `hf`'s experts beside its dense MLP, as llama.cpp's converter names them: the router (kept F32, as
// llama.cpp keeps routers), its input scale and the per-expert scale of the experts' output (a tensor of
// its own: llama.cpp's graph scales each expert's down projection by it), the fused experts as they are
// (ffn_gate_up_exps [E, 2F, D]: llama.cpp's gemma4 takes them fused), and the MoE half's norms.
Status plan_experts_of(const MoeConfig& moe, std::uint64_t hidden, const std::string& hf, const std::string& gg, LayerPlan& p) {
  const std::uint64_t experts = moe.experts;
  const std::uint64_t ffn = moe.ffn;
  SW_RETURN_IF_ERROR(p.add(hf + "router.proj.weight", gg + "ffn_gate_inp.weight", {experts, hidden}));
  p.out.back().type = TensorType::F32;
  SW_RETURN_IF_ERROR(p.add(hf + "router.scale", gg + "ffn_gate_inp.scale", {hidden}));
  SW_RETURN_IF_ERROR(p.add(hf + "router.per_expert_scale", gg + "ffn_down_exps.scale", {experts}));
  SW_RETURN_IF_ERROR(p.add(hf + "experts.gate_up_proj", gg + "ffn_gate_up_exps.weight", {experts, 2 * ffn, hidden}));
  SW_RETURN_IF_ERROR(p.add(hf + "experts.down_proj", gg + "ffn_down_exps.weight", {experts, hidden, ffn}));
  SW_RETURN_IF_ERROR(p.add(hf + "pre_feedforward_layernorm_2.weight", gg + "pre_ffw_norm_2.weight", {hidden}));
  SW_RETURN_IF_ERROR(p.add(hf + "post_feedforward_layernorm_1.weight", gg + "post_ffw_norm_1.weight", {hidden}));
  return p.add(hf + "post_feedforward_layernorm_2.weight", gg + "post_ffw_norm_2.weight", {hidden});
}

// The model's per-layer-embedding tensors (planned with layer 0: the plan has no hook of its own for
// tensors outside the layers) and the full layers' rope_freqs.
Status plan_model_tensors(const ModelConfig& c, WithGenerated& generated, const std::string& prefix, LayerPlan& p) {
  const std::uint64_t per_layer = key_of(c, kPerLayerInput)->as_u64();
  if (per_layer > 0) {
    const std::uint64_t packed = per_layer * c.num_hidden_layers;
    SW_RETURN_IF_ERROR(p.add(prefix + "embed_tokens_per_layer.weight", "per_layer_token_embd.weight", {c.vocab_size, packed}));
    SW_RETURN_IF_ERROR(p.add(prefix + "per_layer_model_projection.weight", "per_layer_model_proj.weight", {packed, c.hidden_size}));
    SW_RETURN_IF_ERROR(p.add(prefix + "per_layer_projection_norm.weight", "per_layer_proj_norm.weight", {per_layer}));
  }
  std::vector<float> factors = proportional_factors(c);
  const std::uint64_t pairs = factors.size();
  generated.add_f32("rope_freqs.weight", {pairs}, factors);
  p.out.push_back(ConvertTensor{.source = "rope_freqs.weight", .name = "rope_freqs.weight"});
  return Status::ok();
}

Status plan_layer(const ModelConfig& c, const TextModelNames& names, const TensorFile& weights, WithGenerated& generated, std::uint32_t n,
                  std::vector<ConvertTensor>& out) {
  const std::string& prefix = names.prefix;
  LayerPlan p{c, weights, out};
  if (n == 0) SW_RETURN_IF_ERROR(plan_model_tensors(c, generated, prefix, p));
  const std::string hf = prefix + "layers." + std::to_string(n) + ".";
  const std::string gg = "blk." + std::to_string(n) + ".";
  const bool sliding = key_of(c, kSwaPattern)->items.at(n).as_u64() != 0;
  const std::uint64_t head_dim = sliding ? key_of(c, kKeyLengthSwa)->as_u64() : *c.head_dim;
  const MetaValue* kv_array = key_of(c, kHeadCountKv);
  const std::uint64_t kv_heads = kv_array ? layer_value(*kv_array, n) : c.num_key_value_heads.value_or(c.num_attention_heads);
  const bool shares_kv = n >= c.num_hidden_layers - key_of(c, kSharedKv)->as_u64();
  const std::uint64_t hidden = c.hidden_size;
  const std::uint64_t q_rows = std::uint64_t{c.num_attention_heads} * head_dim;
  const MetaValue* widths = key_of(c, kFeedForward);
  const std::uint64_t inter = widths ? layer_value(*widths, n) : c.intermediate_size;

  SW_RETURN_IF_ERROR(p.add(hf + "input_layernorm.weight", gg + "attn_norm.weight", {hidden}));
  SW_RETURN_IF_ERROR(p.add(hf + "self_attn.q_proj.weight", gg + "attn_q.weight", {q_rows, hidden}));
  SW_RETURN_IF_ERROR(p.add(hf + "self_attn.q_norm.weight", gg + "attn_q_norm.weight", {head_dim}));
  if (!shares_kv) {  // a layer that reuses an earlier layer's keys and values has no projections for them
    SW_RETURN_IF_ERROR(p.add(hf + "self_attn.k_proj.weight", gg + "attn_k.weight", {kv_heads * head_dim, hidden}));
    SW_RETURN_IF_ERROR(p.add(hf + "self_attn.k_norm.weight", gg + "attn_k_norm.weight", {head_dim}));
    // attention_k_eq_v: full layers take their values from the keys (no v_proj).
    const bool k_eq_v = !sliding && std::find(c.arch_flags.begin(), c.arch_flags.end(), "k_eq_v") != c.arch_flags.end();
    if (!k_eq_v) SW_RETURN_IF_ERROR(p.add(hf + "self_attn.v_proj.weight", gg + "attn_v.weight", {kv_heads * head_dim, hidden}));
  }
  SW_RETURN_IF_ERROR(p.add(hf + "self_attn.o_proj.weight", gg + "attn_output.weight", {hidden, q_rows}));
  SW_RETURN_IF_ERROR(p.add(hf + "post_attention_layernorm.weight", gg + "post_attention_norm.weight", {hidden}));
  SW_RETURN_IF_ERROR(p.add(hf + "pre_feedforward_layernorm.weight", gg + "ffn_norm.weight", {hidden}));
  SW_RETURN_IF_ERROR(p.add(hf + "mlp.gate_proj.weight", gg + "ffn_gate.weight", {inter, hidden}));
  SW_RETURN_IF_ERROR(p.add(hf + "mlp.up_proj.weight", gg + "ffn_up.weight", {inter, hidden}));
  SW_RETURN_IF_ERROR(p.add(hf + "mlp.down_proj.weight", gg + "ffn_down.weight", {hidden, inter}));
  SW_RETURN_IF_ERROR(p.add(hf + "post_feedforward_layernorm.weight", gg + "post_ffw_norm.weight", {hidden}));
  if (c.moe) SW_RETURN_IF_ERROR(plan_experts_of(*c.moe, hidden, hf, gg, p));
  SW_RETURN_IF_ERROR(p.add(hf + "layer_scalar", gg + "layer_output_scale.weight", {1}, false));
  if (const std::uint64_t per_layer = key_of(c, kPerLayerInput)->as_u64(); per_layer > 0) {
    SW_RETURN_IF_ERROR(p.add(hf + "per_layer_input_gate.weight", gg + "inp_gate.weight", {per_layer, hidden}));
    SW_RETURN_IF_ERROR(p.add(hf + "per_layer_projection.weight", gg + "proj.weight", {hidden, per_layer}));
    SW_RETURN_IF_ERROR(p.add(hf + "post_per_layer_input_norm.weight", gg + "post_norm.weight", {hidden}));
  }
  return Status::ok();
}

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(gemma4) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "gemma4",
                                      .base = LayerBase::None,
                                      .layer = kLayer,
                                      .activation = "gelu_pytorch_tanh",
                                      .tied_output = true,
                                      .spm_space_prefix = false,
                                      .layer_type_rope = true,
                                      .check = check,
                                      .plan_layer = plan_layer,
                                      .partial_rotary = true,
                                      .multimodal = kMultimodal,
                                      .rope_types = kRopeTypes,
                                      .bpe_tokenizer_model = "gemma4"};
  return kArch;
}

}  // namespace safeweights::hf
