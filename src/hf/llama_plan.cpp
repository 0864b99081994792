// Hugging Face Llama-family folder -> the plan convert() writes a llama.cpp GGUF from
// (include/safeweights/hf_llama.h). The rules are llama.cpp's (convert_hf_to_gguf.py LlamaModel,
// gguf-py constants, the loader in llama-model.cpp / llama-vocab.cpp) as of February 2025.
#include <array>
#include <filesystem>
#include <unordered_set>

#include "core/status_macros.h"
#include "hf/generated.h"
#include "hf/hf_files.h"
#include "hf/vocab.h"
#include "safeweights/convert.h"
#include "safeweights/hf_llama.h"

namespace safeweights::hf {
namespace {

using gguf::KeyValue;
using gguf::Value;

// The per-layer tensors: Hugging Face's name after "model.layers.N.", llama.cpp's after "blk.N.", and
// which head count permutes the rows (q with the query heads, k with the key/value heads).
enum class Permute { None, Heads, KvHeads };
struct LayerTensor {
  std::string_view hf;
  std::string_view gguf;
  Permute permute;
  bool required;  // the weight is; biases never are
};
constexpr std::array<LayerTensor, 9> kLayerTensors = {{
    {"input_layernorm", "attn_norm", Permute::None, true},
    {"self_attn.q_proj", "attn_q", Permute::Heads, true},
    {"self_attn.k_proj", "attn_k", Permute::KvHeads, true},
    {"self_attn.v_proj", "attn_v", Permute::None, true},
    {"self_attn.o_proj", "attn_output", Permute::None, true},
    {"post_attention_layernorm", "ffn_norm", Permute::None, true},
    {"mlp.gate_proj", "ffn_gate", Permute::None, true},
    {"mlp.up_proj", "ffn_up", Permute::None, true},
    {"mlp.down_proj", "ffn_down", Permute::None, true},
}};

// Buffers llama.cpp's converter drops (MODEL_TENSOR_SKIP and its name filters).
bool skipped(std::string_view name) { return name.ends_with(".rotary_emb.inv_freq"); }

Error shape_error(const TensorFile& weights, std::string_view name, std::string_view what) {
  return Error(ErrorKind::InvalidArgument, std::string(what)).with_file(weights.name()).with_tensor(name);
}

// Checks that a 2-D tensor has the shape config.json implies (the permutation depends on it).
Status expect_shape(const TensorFile& weights, const TensorEntry& e, std::uint64_t rows, std::uint64_t cols) {
  if (e.shape.size() == 2 && e.shape[0] == rows && e.shape[1] == cols) return Status::ok();
  std::string got;
  for (auto d : e.shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
  return shape_error(weights, e.name, "shape [" + got + "], config.json implies [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
}

struct Planner {
  const LlamaConfig& c;
  const TensorFile& weights;
  std::vector<ConvertTensor> out;

  std::uint32_t heads() const { return c.num_attention_heads; }
  std::uint32_t kv_heads() const { return c.num_key_value_heads.value_or(c.num_attention_heads); }
  std::uint64_t head_dim() const { return c.head_dim.value_or(c.hidden_size / c.num_attention_heads); }

  Status add(const std::string& hf, std::string gguf, std::uint32_t permute, bool required) {
    const TensorEntry* e = weights.find(hf);
    if (!e) {
      if (!required) return Status::ok();
      return Error(ErrorKind::TensorNotFound, "tensor " + hf + " is missing (llama.cpp needs " + gguf + ")").with_file(weights.name());
    }
    out.push_back({hf, std::move(gguf), permute});
    return Status::ok();
  }

  Status layer(std::uint32_t n) {
    const std::string hf = "model.layers." + std::to_string(n) + ".";
    const std::string gg = "blk." + std::to_string(n) + ".";
    for (const LayerTensor& t : kLayerTensors) {
      const std::uint32_t permute = t.permute == Permute::Heads ? heads() : t.permute == Permute::KvHeads ? kv_heads() : 0;
      SW_RETURN_IF_ERROR(add(hf + std::string(t.hf) + ".weight", gg + std::string(t.gguf) + ".weight", permute, t.required));
      SW_RETURN_IF_ERROR(add(hf + std::string(t.hf) + ".bias", gg + std::string(t.gguf) + ".bias", permute, false));
    }
    SW_RETURN_IF_ERROR(check(hf + "self_attn.q_proj.weight", heads() * head_dim(), c.hidden_size));
    SW_RETURN_IF_ERROR(check(hf + "self_attn.k_proj.weight", kv_heads() * head_dim(), c.hidden_size));
    return check(hf + "self_attn.v_proj.weight", kv_heads() * head_dim(), c.hidden_size);
  }

  Status check(const std::string& name, std::uint64_t rows, std::uint64_t cols) { return expect_shape(weights, *weights.find(name), rows, cols); }

  Status run() {
    SW_RETURN_IF_ERROR(add("model.embed_tokens.weight", "token_embd.weight", 0, true));
    SW_RETURN_IF_ERROR(check("model.embed_tokens.weight", c.vocab_size, c.hidden_size));
    for (std::uint32_t n = 0; n < c.num_hidden_layers; ++n) SW_RETURN_IF_ERROR(layer(n));
    SW_RETURN_IF_ERROR(add("model.norm.weight", "output_norm.weight", 0, true));
    // Tied embeddings: without lm_head llama.cpp's loader uses token_embd for the output. Untied
    // (tie_word_embeddings false) without lm_head, transformers would start from random weights.
    SW_RETURN_IF_ERROR(add("lm_head.weight", "output.weight", 0, c.tie_word_embeddings == false));
    if (weights.find("lm_head.weight")) SW_RETURN_IF_ERROR(check("lm_head.weight", c.vocab_size, c.hidden_size));
    return leftovers();
  }

  // A tensor with no llama.cpp name would make its loader refuse the file ("wrong number of tensors").
  Status leftovers() const {
    std::unordered_set<std::string_view> planned;
    for (const ConvertTensor& t : out) planned.insert(t.source);
    for (const TensorEntry& e : weights.tensors()) {
      if (skipped(e.name) || planned.contains(e.name)) continue;
      return Error(ErrorKind::NotSupported, "tensor has no name in llama.cpp's Llama architecture").with_file(weights.name()).with_tensor(e.name);
    }
    return Status::ok();
  }
};

// Without a target type, the type of the matrices (1-D tensors are F32 in every llama.cpp file type).
TensorType weights_type(const TensorFile& weights) {
  for (const TensorEntry& e : weights.tensors()) {
    if (e.shape.size() >= 2) return e.type;
  }
  return TensorType::F32;
}

// The folder's own name, also for "." or a trailing slash.
std::string folder_name(const std::string& folder) {
  std::error_code ec;
  auto p = std::filesystem::absolute(folder, ec).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

// The hyper-parameters, under llama.cpp's keys with the types gguf-py writes (its loader rejects any
// other type), in the order llama.cpp's converter writes them.
std::vector<KeyValue> hyper_parameters(const LlamaConfig& c, std::uint32_t ftype, const std::string& name) {
  const std::uint32_t head_dim = c.head_dim.value_or(c.hidden_size / c.num_attention_heads);
  std::vector<KeyValue> kv = {
      {"general.architecture", Value::string("llama")},
      {"general.type", Value::string("model")},
      {"general.name", Value::string(name)},
      {"llama.block_count", Value::u32(c.num_hidden_layers)},
      {"llama.context_length", Value::u32(*c.max_position_embeddings)},
      {"llama.embedding_length", Value::u32(c.hidden_size)},
      {"llama.feed_forward_length", Value::u32(c.intermediate_size)},
      {"llama.attention.head_count", Value::u32(c.num_attention_heads)},
  };
  if (c.num_key_value_heads) kv.push_back({"llama.attention.head_count_kv", Value::u32(*c.num_key_value_heads)});
  if (c.rope.theta) kv.push_back({"llama.rope.freq_base", Value::f32(static_cast<float>(*c.rope.theta))});
  // transformers' default when config.json omits it; llama.cpp's loader requires the key.
  kv.push_back({"llama.attention.layer_norm_rms_epsilon", Value::f32(static_cast<float>(c.rms_norm_eps.value_or(1e-6)))});
  if (c.head_dim) {
    kv.push_back({"llama.attention.key_length", Value::u32(*c.head_dim)});
    kv.push_back({"llama.attention.value_length", Value::u32(*c.head_dim)});
  }
  kv.push_back({"general.file_type", Value::u32(ftype)});
  kv.push_back({"llama.vocab_size", Value::u32(c.vocab_size)});
  kv.push_back({"llama.rope.dimension_count", Value::u32(head_dim)});
  // llama3 scaling is the rope_freqs tensor (plan() below), with no scaling key.
  if (c.rope.type == "linear") {
    kv.push_back({"llama.rope.scaling.type", Value::string("linear")});
    kv.push_back({"llama.rope.scaling.factor", Value::f32(static_cast<float>(*c.rope.factor))});
  }
  return kv;
}

}  // namespace

bool is_llama_folder(const std::string& folder) { return names_llama_architecture(folder); }

Result<GgufConversion> plan(const std::string& folder, const TensorFile& weights, std::optional<TensorType> type, const LlamaOptions& options) {
  SW_ASSIGN_OR_RETURN(LlamaConfig config, read_config(folder));
  if (weights.find("rope_freqs.weight")) {
    return Error(ErrorKind::NotSupported, "a tensor named rope_freqs.weight is not a transformers weight")
        .with_file(weights.name())
        .with_tensor("rope_freqs.weight");
  }
  auto tensors = std::make_unique<WithGenerated>(weights);
  Planner planner{config, weights, {}};
  SW_RETURN_IF_ERROR(planner.run());
  if (config.rope.type == "llama3") {
    // llama.cpp divides each rotary pair's frequency by its factor (LlamaModel.generate_extra_tensors).
    const std::uint32_t head_dim = config.head_dim.value_or(config.hidden_size / config.num_attention_heads);
    tensors->add_f32("rope_freqs.weight", {head_dim / 2}, llama3_rope_factors(config.rope, head_dim));
    planner.out.insert(planner.out.begin(), ConvertTensor{"rope_freqs.weight", "rope_freqs.weight", 0});
  }
  const TensorType target = type.value_or(weights_type(weights));
  const auto ftype = llama_file_type(target);
  if (!ftype) {
    return Error(ErrorKind::NotSupported, "llama.cpp has no file type for " + std::string(type_name(target))).with_file(weights.name());
  }
  std::vector<KeyValue> kv = hyper_parameters(config, *ftype, folder_name(folder));
  SW_RETURN_IF_ERROR(add_vocabulary(folder, config, options, kv));
  kv.push_back({"general.quantization_version", Value::u32(2)});
  GgufConversion out;
  out.plan.metadata = Metadata(std::move(kv));
  out.plan.tensors = std::move(planner.out);
  out.tensors = std::move(tensors);
  return out;
}

}  // namespace safeweights::hf
