// gpt-oss (llama.cpp's "gpt-oss", conversion/gpt_oss.py; its loader src/models/openai-moe.cpp): Llama's
// attention with NEOX rope, biases on q, k, v and o and a learned sink logit per head (self_attn.sinks),
// sliding-window layers alternating with full ones (sliding first: llama.cpp's fixed pattern of 2), an
// RMS norm after the attention's residual, and in every layer num_local_experts experts of
// intermediate_size: a router with a bias (kept F32), softmax over the chosen experts' logits, experts
// with biases and gpt-oss's clamped SwiGLU (alpha 1.702, limit 7, fixed in llama.cpp's graph).
//
// transformers holds the experts transposed, gate_up_proj [E, D, 2F] with gate and up interleaved along
// the last dimension (gate [..., ::2], up [..., 1::2]) and down_proj [E, F, D]; llama.cpp wants
// [E, F, D] and [E, D, F]: computed on read (hf/expert_views.h). The Hub's checkpoints hold the experts
// as MXFP4 (quantization_config quant_method "mxfp4": `*_blocks` [E, rows, K, 16], `*_scales`
// [E, rows, K]): repacked into ggml's MXFP4 blocks bit for bit, kept MXFP4 at any --type, and the file
// type MOSTLY_MXFP4_MOE over a float one, as llama.cpp's converter does. The harmony tokenizer is
// o200k's (pre-tokenizer "gpt-4o", hf/pretokenizer.cpp).
#include <array>
#include <cstdint>
#include <tuple>

#include "hf/arch.h"
#include "hf/expert_views.h"
#include "hf/generated.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"
#include "hf/moe.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"GptOssForCausalLM"};

// The attention's tensors; its sinks (one per head), router and experts are plan_layer's.
constexpr std::array<TensorRule, 10> kLayer = {{
    rows::kAttnNorm,
    rows::q(Permute::None),
    rows::k(Permute::None),
    rows::kV,
    rows::kO,
    rows::kQkvBias[0],
    rows::kQkvBias[1],
    rows::kQkvBias[2],
    {"self_attn.o_proj.bias", "attn_output.bias", Dim::Hidden, Dim::None, Permute::None, true},
    rows::kPostAttentionNorm,
}};

// Softmax over the chosen experts' logits is softmax renormalized over them (llama.cpp's
// SOFTMAX_WEIGHT gating); transformers reads no norm_topk_prob, experts are intermediate_size wide.
constexpr MoeTable kExperts{.block = "mlp",
                            .expert = {"gate_proj", "up_proj", "down_proj"},
                            .fused = false,
                            .normalizes = true,
                            .norm_key = false,
                            .expert_ffn_key = false,
                            .sparse_step_keys = false};

// llama.cpp's file type MOSTLY_MXFP4_MOE (llama.h's LLAMA_FTYPE_MOSTLY_MXFP4_MOE).
constexpr std::uint32_t kMostlyMxfp4Moe = 38;
// The constants of llama.cpp's LLM_FFN_SWIGLU_OAI_MOE (llama-graph.cpp), transformers' defaults.
constexpr double kSwigluAlpha = 1.702;
constexpr double kSwigluLimit = 7.0;

Error refused(const JsonFile& file, std::string_view key, const std::string& why) {
  return Error(ErrorKind::NotSupported, "key " + json::quoted(key) + " " + why).with_file(file.path());
}

// layer_types must be llama.cpp's fixed pattern: sliding, full, sliding, ... (its loader's pattern of 2).
Status check_layer_types(const JsonFile& file, const ModelConfig& c) {
  auto types = JsonFile::member(file.root(), "layer_types");
  if (!types) return Status::ok();  // transformers' default is that pattern
  if (types->type() != json::element_type::ARRAY) return file.bad("layer_types", "must be a list of layer types");
  std::uint32_t n = 0;
  for (auto t : json::as_array(*types)) {
    std::string_view s;
    if (t.get_string().get(s) != simdjson::SUCCESS) return file.bad("layer_types", "must hold strings");
    const std::string_view want = n % 2 == 0 ? "sliding_attention" : "full_attention";
    if (s != want) {
      return refused(
          file, "layer_types",
          "gives layer " + std::to_string(n) + " " + json::quoted(s) + ": llama.cpp's gpt-oss alternates sliding and full attention, sliding first");
    }
    ++n;
  }
  if (n != c.num_hidden_layers) return file.bad("layer_types", "does not have num_hidden_layers entries");
  return Status::ok();
}

// The yarn keys llama.cpp's converter copies from the rope object when present (TextModel's
// set_gguf_parameters); their values are checked by config_json.cpp's read_yarn.
Status yarn_keys(const JsonFile& file, ModelConfig& c) {
  if (c.rope.type != "yarn") return Status::ok();
  auto object = JsonFile::member(file.root(), c.rope.source);
  if (!object) return Status::ok();
  const std::string a(c.arch->name);
  for (const auto& [key, gguf] : {std::pair<std::string_view, std::string_view>{"attention_factor", "yarn_attn_factor"},
                                  {"beta_fast", "yarn_beta_fast"},
                                  {"beta_slow", "yarn_beta_slow"}}) {
    SW_ASSIGN_OR_RETURN(auto v, file.positive(*object, key));
    if (!v) continue;
    SW_ASSIGN_OR_RETURN(float f, file.to_float32(c.rope.source + "." + std::string(key), *v));
    c.arch_kv.push_back({a + ".rope.scaling." + std::string(gguf), MetaValue::f32(f)});
  }
  return Status::ok();
}

Status check(const JsonFile& file, ModelConfig& c) {
  const auto root = file.root();
  SW_ASSIGN_OR_RETURN(auto bias, file.boolean(root, "attention_bias"));
  if (bias == false) return refused(file, "attention_bias", "is false: llama.cpp's gpt-oss has biases on q, k, v and o");
  if (c.tie_word_embeddings == true) return refused(file, "tie_word_embeddings", "is true: llama.cpp's gpt-oss needs its own output matrix");
  for (const auto& [key, fixed, text] :
       {std::tuple<std::string_view, double, std::string_view>{"swiglu_alpha", kSwigluAlpha, "1.702"}, {"swiglu_limit", kSwigluLimit, "7.0"}}) {
    SW_ASSIGN_OR_RETURN(auto v, file.positive(root, key));
    if (v && *v != fixed) return refused(file, key, "is not " + std::string(text) + ", the value llama.cpp's gpt-oss computes with");
  }
  SW_RETURN_IF_ERROR(check_layer_types(file, c));
  if (auto q = JsonFile::member(root, "quantization_config"); q && q->type() != json::element_type::NULL_VALUE) {
    SW_ASSIGN_OR_RETURN(auto method, file.string(*q, "quant_method"));
    if (method != "mxfp4") {
      return refused(
          file, "quantization_config",
          "has quant_method " + json::quoted(method.value_or("")) + ": only gpt-oss's MXFP4 experts are converted from a quantized checkpoint");
    }
    c.float_file_type = kMostlyMxfp4Moe;
  }
  SW_RETURN_IF_ERROR(yarn_keys(file, c));
  SW_ASSIGN_OR_RETURN(const std::uint32_t window, file.required_count(root, "sliding_window"));
  // After the base keys, as GptOssModel.set_gguf_parameters adds them.
  const std::string a(c.arch->name);
  c.arch_kv.push_back({a + ".attention.sliding_window", MetaValue::u32(window)});
  c.arch_kv.push_back({a + ".expert_feed_forward_length", MetaValue::u32(c.intermediate_size)});
  return Status::ok();
}

// A tensor computed on read, planned under `gguf` (kept as `type` when given).
void add_computed(LayerExperts& l, std::string name, TensorType type, std::vector<std::uint64_t> shape, SourcePtr source, std::string gguf,
                  std::optional<TensorType> keep) {
  l.computed.add_source(name, type, std::move(shape), std::move(source));
  l.out.push_back({.source = std::move(name), .name = std::move(gguf), .type = keep});
}

// The experts as transformers holds them: gate_up_proj [E, D, 2F] and down_proj [E, F, D], transposed.
Status plain_experts(LayerExperts& l, const std::string& ex, std::uint64_t e, std::uint64_t d, std::uint64_t f) {
  const std::string gate_up = ex + "gate_up_proj", down = ex + "down_proj";
  SW_RETURN_IF_ERROR(expect_tensor(l.weights, gate_up, l.gg + "ffn_gate_exps.weight", std::vector<std::uint64_t>{e, d, 2 * f}));
  SW_RETURN_IF_ERROR(expect_tensor(l.weights, down, l.gg + "ffn_down_exps.weight", std::vector<std::uint64_t>{e, f, d}));
  const TensorEntry& gu = *l.weights.find(gate_up);
  const TensorEntry& dn = *l.weights.find(down);
  for (const auto& [which, begin] : {std::pair<std::string_view, std::uint64_t>{"gate", 0}, {"up", 1}}) {
    SW_ASSIGN_OR_RETURN(SourcePtr s, transposed_source(gu, {.begin = begin, .step = 2, .count = f}));
    add_computed(l, gate_up + " (" + std::string(which) + ", transposed)", gu.type, {e, f, d}, std::move(s),
                 l.gg + "ffn_" + std::string(which) + "_exps.weight", std::nullopt);
  }
  SW_ASSIGN_OR_RETURN(SourcePtr s, transposed_source(dn, {.begin = 0, .step = 1, .count = d}));
  add_computed(l, down + " (transposed)", dn.type, {e, d, f}, std::move(s), l.gg + "ffn_down_exps.weight", std::nullopt);
  l.consumed.insert(l.consumed.end(), {gate_up, down});
  return Status::ok();
}

// The Hub's MXFP4 experts: gate_up_proj_blocks [E, 2F, D/32, 16] (gate the even rows, up the odd ones)
// and down_proj_blocks [E, D, F/32, 16], each with its scales, repacked and kept MXFP4.
Status mxfp4_experts(LayerExperts& l, const std::string& ex, std::uint64_t e, std::uint64_t d, std::uint64_t f) {
  if (d % 32 != 0 || f % 32 != 0) {
    return Error(ErrorKind::InvalidModelFolder, "MXFP4 experts need hidden_size and intermediate_size multiples of 32").with_file(l.weights.name());
  }
  struct Kind {
    std::string name;
    std::uint64_t rows, cols;
    bool fused;  // gate_up: gate the even rows, up the odd ones
  };
  for (const Kind& k : {Kind{ex + "gate_up_proj", 2 * f, d, true}, Kind{ex + "down_proj", d, f, false}}) {
    const std::string blocks = k.name + "_blocks", scales = k.name + "_scales";
    const std::string target = l.gg + (k.fused ? "ffn_gate_exps.weight" : "ffn_down_exps.weight");
    SW_RETURN_IF_ERROR(expect_tensor(l.weights, blocks, target, std::vector<std::uint64_t>{e, k.rows, k.cols / 32, 16}));
    SW_RETURN_IF_ERROR(expect_tensor(l.weights, scales, target, std::vector<std::uint64_t>{e, k.rows, k.cols / 32}));
    const TensorEntry& b = *l.weights.find(blocks);
    const TensorEntry& s = *l.weights.find(scales);
    for (std::uint64_t half = 0; half < (k.fused ? 2 : 1); ++half) {
      const Strided rows = k.fused ? Strided{.begin = half, .step = 2, .count = f} : Strided{.begin = 0, .step = 1, .count = d};
      SW_ASSIGN_OR_RETURN(SourcePtr source, mxfp4_repacked_source(b, s, rows));
      const std::string which = k.fused ? (half == 0 ? "gate" : "up") : "down";
      add_computed(l, k.name + " (" + which + ", MXFP4 repacked)", TensorType::MXFP4, {e, rows.count, k.cols}, std::move(source),
                   l.gg + "ffn_" + which + "_exps.weight", TensorType::MXFP4);
    }
    l.consumed.insert(l.consumed.end(), {blocks, scales});
  }
  return Status::ok();
}

// A layer's router, experts and their biases, and the attention's sinks.
Status plan_layer(LayerExperts& l) {
  const ModelConfig& c = l.config;
  const std::uint64_t e = c.moe->experts, d = c.hidden_size, f = c.moe->ffn;
  const std::string sinks = l.hf + "self_attn.sinks";
  SW_RETURN_IF_ERROR(expect_tensor(l.weights, sinks, l.gg + "attn_sinks.weight", std::vector<std::uint64_t>{c.num_attention_heads}));
  l.out.push_back({.source = sinks, .name = l.gg + "attn_sinks.weight"});
  const std::string mlp = l.hf + "mlp.";
  SW_RETURN_IF_ERROR(expect_tensor(l.weights, mlp + "router.weight", l.gg + "ffn_gate_inp.weight", std::vector<std::uint64_t>{e, d}));
  l.out.push_back({.source = mlp + "router.weight", .name = l.gg + "ffn_gate_inp.weight", .type = TensorType::F32});
  SW_RETURN_IF_ERROR(expect_tensor(l.weights, mlp + "router.bias", l.gg + "ffn_gate_inp.bias", std::vector<std::uint64_t>{e}));
  l.out.push_back({.source = mlp + "router.bias", .name = l.gg + "ffn_gate_inp.bias"});
  // The experts' biases are 2-D, F32 at any --type all the same: llama.cpp's converter keeps every tensor
  // not named .weight F32.
  const std::string ex = mlp + "experts.";
  const std::string gate_up_bias = ex + "gate_up_proj_bias", down_bias = ex + "down_proj_bias";
  SW_RETURN_IF_ERROR(expect_tensor(l.weights, gate_up_bias, l.gg + "ffn_gate_exps.bias", std::vector<std::uint64_t>{e, 2 * f}));
  l.out.push_back({.source = {},
                   .name = l.gg + "ffn_gate_exps.bias",
                   .pieces = {{.source = gate_up_bias, .dim = 1, .begin = 0, .step = 2}},
                   .type = TensorType::F32});
  l.out.push_back({.source = {},
                   .name = l.gg + "ffn_up_exps.bias",
                   .pieces = {{.source = gate_up_bias, .dim = 1, .begin = 1, .step = 2}},
                   .type = TensorType::F32});
  SW_RETURN_IF_ERROR(expect_tensor(l.weights, down_bias, l.gg + "ffn_down_exps.bias", std::vector<std::uint64_t>{e, d}));
  l.out.push_back({.source = down_bias, .name = l.gg + "ffn_down_exps.bias", .type = TensorType::F32});
  if (l.weights.find(ex + "gate_up_proj_blocks")) return mxfp4_experts(l, ex, e, d, f);
  return plain_experts(l, ex, e, d, f);
}

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(gptoss) {
  static constexpr Architecture kArch{
      .classes = kClasses, .name = "gpt-oss", .base = LayerBase::None, .layer = kLayer, .moe = &kExperts, .check = check, .plan_experts = plan_layer};
  return kArch;
}

}  // namespace safeweights::hf
