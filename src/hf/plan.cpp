// Hugging Face model folder -> the plan convert() writes a llama.cpp GGUF from
// (include/safeweights/hf_gguf.h), one plan for every architecture of hf/arch.h, whose tables say
// what differs. The rules are llama.cpp's (convert_hf_to_gguf.py, gguf-py constants, the loader in
// llama-model.cpp / llama-vocab.cpp): February 2025's converter, gguf-py 0.19's names.
#include <array>
#include <cstring>
#include <filesystem>
#include <unordered_set>

#include "core/status_macros.h"
#include "gguf/size_label.h"
#include "hf/arch.h"
#include "hf/generated.h"
#include "hf/hf_files.h"
#include "hf/linear_attention.h"
#include "hf/moe.h"
#include "hf/multimodal.h"
#include "hf/nextn.h"
#include "hf/vocab.h"
#include "safeweights/gguf.h"
#include "safeweights/hf_gguf.h"
#include "safeweights/quantize.h"

namespace safeweights::hf {
namespace {

using KeyValue = MetaEntry;
using Value = MetaValue;

// Buffers llama.cpp's converter drops (MODEL_TENSOR_SKIP and its name filters).
bool skipped(std::string_view name) { return name.ends_with(".rotary_emb.inv_freq"); }

// model.layers.N.* with N at or past `layers` (the multi-token-prediction layers DeepSeek appends).
bool past_last_layer(std::string_view name, std::uint32_t layers) {
  constexpr std::string_view kPrefix = "model.layers.";
  if (!name.starts_with(kPrefix)) return false;
  name.remove_prefix(kPrefix.size());
  std::uint64_t n = 0;
  std::size_t digits = 0;
  for (; digits < name.size() && digits < 10 && name[digits] >= '0' && name[digits] <= '9'; ++digits) n = n * 10 + (name[digits] - '0');
  return digits > 0 && digits < name.size() && name[digits] == '.' && n >= layers;
}

std::string shape_text(std::span<const std::uint64_t> shape) {
  std::string out;
  for (auto d : shape) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return "[" + out + "]";
}

}  // namespace

Status expect_tensor(const TensorFile& weights, const std::string& hf, const std::string& gguf, std::span<const std::uint64_t> shape) {
  const TensorEntry* e = weights.find(hf);
  if (!e) {
    return Error(ErrorKind::TensorNotFound, "tensor " + hf + " is missing (llama.cpp needs " + gguf + ")").with_file(weights.name());
  }
  if (!std::equal(e->shape.begin(), e->shape.end(), shape.begin(), shape.end())) {
    return Error(ErrorKind::InvalidModelFolder, "shape " + shape_text(e->shape) + ", config.json implies " + shape_text(shape))
        .with_file(weights.name())
        .with_tensor(hf);
  }
  return Status::ok();
}

namespace {

struct Planner {
  const ModelConfig& c;
  const TensorFile& weights;
  std::vector<ConvertTensor> out;
  WithGenerated* generated = nullptr;   // where plan_experts and plan_layer add tensors computed on read
  std::vector<std::string> consumed{};  // input tensors plan_experts read
  TextModelNames names = {};            // where the text model's weights are (a multimodal folder's: hf/multimodal.h)
  std::uint32_t absent_nextn = 0;       // next-token layers config.json counts and the weights lack (hf/nextn.h)

  std::uint32_t heads() const { return c.num_attention_heads; }
  std::uint32_t kv_heads() const { return c.num_key_value_heads.value_or(c.num_attention_heads); }
  std::uint64_t head_dim() const { return c.head_dim.value_or(c.hidden_size / c.num_attention_heads); }

  std::uint64_t size(Dim d) const {
    switch (d) {
      case Dim::Hidden: return c.hidden_size;
      case Dim::QRows: return heads() * head_dim();
      case Dim::KvRows: return kv_heads() * head_dim();
      case Dim::Inter: return c.intermediate_size;
      case Dim::HeadDim: return head_dim();
      case Dim::QkvRows: return (std::uint64_t{heads()} + 2 * std::uint64_t{kv_heads()}) * head_dim();  // no uint32 wrap
      case Dim::Inter2: return 2 * std::uint64_t{c.intermediate_size};
      case Dim::SharedInter: return c.moe ? c.moe->shared_ffn : 0;
      case Dim::One: return 1;
      case Dim::None: break;
    }
    return 0;
  }

  // The tensor `hf` as `gguf`, checked against the shape config.json implies (the permutation and
  // llama.cpp's loader depend on it); an absent tensor that is not `required` is left out.
  Status add(const std::string& hf, std::string gguf, std::vector<std::uint64_t> shape, std::uint32_t permute, bool required, bool f32 = false) {
    if (!required && !weights.find(hf)) return Status::ok();
    SW_RETURN_IF_ERROR(expect_tensor(weights, hf, gguf, shape));
    out.push_back({.source = hf, .name = std::move(gguf), .permute_heads = permute});
    if (f32) out.back().type = TensorType::F32;
    return Status::ok();
  }

  Status layer(std::uint32_t n) {
    const std::string hf = layer_prefix(c, names, n);
    const std::string gg = "blk." + std::to_string(n) + ".";
    if (c.arch->base == LayerBase::Gemma) {
      for (const TensorRule& t : rows::gemma_attention()) SW_RETURN_IF_ERROR(add_rule(t, hf, gg));
    } else if (c.arch->base != LayerBase::None) {
      for (const TensorRule& t : rows::llama_attention(c.arch->base == LayerBase::LlamaPermuted)) SW_RETURN_IF_ERROR(add_rule(t, hf, gg));
    }
    if (c.arch->moe && c.arch->plan_experts) {
      LayerExperts experts{c, weights, hf, gg, *generated, out, consumed};
      SW_RETURN_IF_ERROR(c.arch->plan_experts(experts));
    } else if (c.arch->moe) {
      SW_RETURN_IF_ERROR(plan_experts(*c.arch->moe, *c.moe, c.hidden_size, hf, gg, weights, out));
      for (const TensorRule& t : c.arch->moe->shared) SW_RETURN_IF_ERROR(add_rule(t, hf, gg));
    } else if (c.arch->base != LayerBase::None) {
      for (const TensorRule& t : rows::kDenseMlp) SW_RETURN_IF_ERROR(add_rule(t, hf, gg));
    }
    for (const TensorRule& t : c.arch->layer) SW_RETURN_IF_ERROR(add_rule(t, hf, gg));
    if (c.arch->plan_layer) SW_RETURN_IF_ERROR(c.arch->plan_layer(c, names, weights, *generated, n, out));
    if (c.arch->plan_attention) SW_RETURN_IF_ERROR(c.arch->plan_attention(c, names, n, weights, out));
    if (n >= c.num_hidden_layers) SW_RETURN_IF_ERROR(plan_nextn_tensors(c, names, weights, n, out));
    return Status::ok();
  }

  // The next-token-prediction layers past num_hidden_layers, where the weights hold them.
  Status nextn_layers() {
    for (std::uint32_t n = c.num_hidden_layers; n < c.num_hidden_layers + c.nextn_layers; ++n) {
      if (nextn_present(c, names, weights, n)) {
        SW_RETURN_IF_ERROR(layer(n));
      } else {
        ++absent_nextn;
      }
    }
    return Status::ok();
  }

  Status add_rule(const TensorRule& t, const std::string& hf, const std::string& gg) {
    const std::uint32_t permute = t.permute == Permute::Heads ? heads() : t.permute == Permute::KvHeads ? kv_heads() : 0;
    std::vector<std::uint64_t> shape = {size(t.rows)};
    if (t.cols != Dim::None) shape.push_back(size(t.cols));
    return add(hf + std::string(t.hf), gg + std::string(t.gguf), std::move(shape), permute, t.required, t.f32);
  }

  Status run() {
    SW_RETURN_IF_ERROR(add(names.prefix + "embed_tokens.weight", "token_embd.weight", {c.vocab_size, c.hidden_size}, 0, true));
    for (std::uint32_t n = 0; n < c.num_hidden_layers; ++n) SW_RETURN_IF_ERROR(layer(n));
    SW_RETURN_IF_ERROR(nextn_layers());
    SW_RETURN_IF_ERROR(add(names.prefix + "norm.weight", "output_norm.weight", {c.hidden_size}, 0, true));
    if (c.arch->norm == Norm::LayerNorm) SW_RETURN_IF_ERROR(add(names.prefix + "norm.bias", "output_norm.bias", {c.hidden_size}, 0, true));
    // Tied embeddings: without lm_head llama.cpp's loader uses token_embd for the output. Untied
    // (tie_word_embeddings false) without lm_head, transformers would start from random weights.
    if (!c.arch->tied_output) {
      SW_RETURN_IF_ERROR(add(names.head, "output.weight", {c.vocab_size, c.hidden_size}, 0, c.tie_word_embeddings == false));
    }
    return leftovers();
  }

  // A tensor with no llama.cpp name would make its loader refuse the file ("wrong number of tensors").
  Status leftovers() const {
    std::unordered_set<std::string_view> planned;
    for (const ConvertTensor& t : out) {
      planned.insert(t.source);
      for (const TensorPiece& piece : t.pieces) planned.insert(piece.source);
    }
    planned.insert(consumed.begin(), consumed.end());
    for (const TensorEntry& e : weights.tensors()) {
      if (skipped(e.name) || planned.contains(e.name)) continue;
      if (c.arch->tied_output && e.name == names.head) continue;  // the embedding is the output
      if (c.multimodal && is_vision_tensor(e.name)) continue;     // the vision tower: not the text model
      if (c.arch->drops_extra_layers && past_last_layer(e.name, c.num_hidden_layers)) continue;
      return Error(ErrorKind::NotSupported, "tensor has no name in llama.cpp's " + std::string(c.arch->name) + " architecture")
          .with_file(weights.name())
          .with_tensor(e.name);
    }
    return Status::ok();
  }
};

}  // namespace

Status add_rule(const ModelConfig& c, const TensorFile& weights, const TensorRule& rule, const std::string& hf, const std::string& gg,
                std::vector<ConvertTensor>& out) {
  Planner planner{c, weights, {}};
  SW_RETURN_IF_ERROR(planner.add_rule(rule, hf, gg));
  for (ConvertTensor& t : planner.out) out.push_back(std::move(t));
  return Status::ok();
}

namespace {

// Gemma's RMS norms scale by (1 + weight): llama.cpp's converter writes weight + 1 (computed here in
// float32, as transformers computes 1 + weight.float()), as an F32 tensor of its own.
Status add_one_to_norms(const TensorFile& weights, std::vector<ConvertTensor>& plan, WithGenerated& tensors) {
  for (ConvertTensor& t : plan) {
    // Qwen3.5's gated DeltaNet norm (linear_attn.norm) scales by its weight alone. Qwen's MTP norms
    // (mtp.pre_fc_norm_*) by their llama.cpp names, which its converter matches after renaming.
    const bool nextn_norm = t.name.find(".nextn.") != std::string::npos && t.name.ends_with("norm.weight");
    if ((!t.source.ends_with("norm.weight") && !nextn_norm) || t.source.ends_with("linear_attn.norm.weight")) continue;
    const TensorEntry* e = weights.find(t.source);
    SW_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, e->read_owned());
    std::vector<float> values(e->num_elements());
    if (e->type == TensorType::F32) {
      std::memcpy(values.data(), bytes.data(), bytes.size());
    } else {
      SW_RETURN_IF_ERROR(dequantize(e->type, bytes, values));
    }
    for (float& v : values) v += 1.0f;
    std::vector<std::uint64_t> shape(e->shape.begin(), e->shape.end());
    t.source += " + 1";
    tensors.add_f32(t.source, std::move(shape), values);
  }
  return Status::ok();
}

// Without a target type, the type of the matrices (1-D tensors are F32 in every llama.cpp file type).
TensorType weights_type(const TensorFile& weights) {
  for (const TensorEntry& e : weights.tensors()) {
    if (e.shape.size() >= 2 && type_info(e.type).cls == TypeClass::Float) return e.type;  // not MXFP4's U8 blocks
  }
  return TensorType::F32;
}

// The hyper-parameters, under llama.cpp's keys ({arch}.*) with the types gguf-py writes (its loader
// rejects any other type), in the order llama.cpp's converter writes them (Model, then LlamaModel's).
// general.* keys come first: the type, generation_config.json's sampling, the name, the size label.
std::vector<KeyValue> hyper_parameters(const ModelConfig& c, std::uint32_t ftype, const std::string& name, std::vector<KeyValue> sampling,
                                       const std::string& size_label) {
  const std::string a(c.arch->name);
  const std::uint32_t head_dim = c.head_dim.value_or(c.hidden_size / c.num_attention_heads);
  std::vector<KeyValue> kv = {
      {"general.architecture", Value::string(a)},
      {"general.type", Value::string("model")},
  };
  for (KeyValue& k : sampling) kv.push_back(std::move(k));
  kv.push_back({"general.name", Value::string(name)});
  if (!size_label.empty()) kv.push_back({"general.size_label", Value::string(size_label)});
  // block_count counts the next-token layers too (hf/nextn.h), as llama.cpp's converter does.
  const std::vector<KeyValue> model = {
      {a + ".block_count", Value::u32(c.num_hidden_layers + c.nextn_layers)},
      {a + ".context_length", Value::u32(*c.max_position_embeddings)},
      {a + ".embedding_length", Value::u32(c.hidden_size)},
      {a + ".feed_forward_length", Value::u32(c.intermediate_size)},
      {a + ".attention.head_count", Value::u32(c.num_attention_heads)},
  };
  kv.insert(kv.end(), model.begin(), model.end());
  // None in config.json (Architecture::optional_intermediate): llama.cpp's converter writes no key.
  if (c.intermediate_size == 0) std::erase_if(kv, [&](const KeyValue& k) { return k.key == a + ".feed_forward_length"; });
  if (c.num_key_value_heads) kv.push_back({a + ".attention.head_count_kv", Value::u32(*c.num_key_value_heads)});
  if (c.rope.theta) kv.push_back({a + ".rope.freq_base", Value::f32(static_cast<float>(*c.rope.theta))});
  // transformers' default when config.json omits it; llama.cpp's loader requires the key.
  if (c.arch->norm == Norm::Rms) {
    kv.push_back({a + ".attention.layer_norm_rms_epsilon", Value::f32(static_cast<float>(c.rms_norm_eps.value_or(1e-6)))});
  }
  if (c.moe) {
    kv.push_back({a + ".expert_count", Value::u32(c.moe->experts)});
    kv.push_back({a + ".expert_used_count", Value::u32(c.moe->used)});
  }
  if (c.head_dim) {
    kv.push_back({a + ".attention.key_length", Value::u32(*c.head_dim)});
    kv.push_back({a + ".attention.value_length", Value::u32(*c.head_dim)});
  }
  kv.push_back({"general.file_type", Value::u32(ftype)});
  if (c.arch->llama_keys) {
    kv.push_back({a + ".vocab_size", Value::u32(c.vocab_size)});
    kv.push_back({a + ".rope.dimension_count", Value::u32(head_dim)});
  }
  // llama3 scaling is the rope_freqs tensor (plan() below), with no scaling key. llama.cpp's loader
  // reads the linear and yarn keys for every architecture.
  if (c.rope.type == "linear" || c.rope.type == "yarn") {
    kv.push_back({a + ".rope.scaling.type", Value::string(c.rope.type)});
    kv.push_back({a + ".rope.scaling.factor", Value::f32(static_cast<float>(*c.rope.factor))});
  }
  for (const KeyValue& k : c.arch_kv) kv.push_back(k);
  if (c.rope.type == "yarn") kv.push_back({a + ".rope.scaling.original_context_length", Value::u32(*c.rope.original_max_position_embeddings)});
  return kv;
}

// A planned tensor's shape: its input's, or its pieces' (each sliced, then joined or stacked); empty
// when the pieces do not fit together (the conversion then refuses them, naming the piece).
std::vector<std::uint64_t> planned_shape(const ConvertTensor& t, const TensorFile& input) {
  if (t.pieces.empty()) {
    const TensorEntry* e = input.find(t.source);
    return e ? std::vector<std::uint64_t>(e->shape.begin(), e->shape.end()) : std::vector<std::uint64_t>();
  }
  std::vector<std::uint64_t> out;
  bool first = true;
  for (const TensorPiece& p : t.pieces) {
    const TensorEntry* e = input.find(p.source);
    if (!e) return {};
    std::vector<std::uint64_t> shape(e->shape.begin(), e->shape.end());
    const bool whole = p.begin == 0 && p.end == 0 && p.step == 1;
    if (!whole) {
      if (p.dim >= shape.size() || p.step == 0) return {};
      const std::uint64_t end = p.end == 0 ? shape[p.dim] : p.end;
      if (p.begin >= end || end > shape[p.dim]) return {};
      shape[p.dim] = (end - p.begin - 1) / p.step + 1;
    }
    if (first) {
      out = shape;
      if (t.stack) out.insert(out.begin(), 0);
    }
    if (t.stack) {
      ++out[0];
    } else if (!first) {
      if (t.join_dim >= out.size() || shape.size() != out.size()) return {};
      out[t.join_dim] += shape[t.join_dim];  // each term bounded by a validated input tensor
    }
    first = false;
  }
  return out;
}

// llama.cpp's general.size_label, counted over the tensors the plan writes.
std::string size_label_of(const std::vector<ConvertTensor>& planned, const TensorFile& input) {
  gguf::ParameterCount count;
  for (const ConvertTensor& t : planned) count.add(t.name, planned_shape(t, input));
  return gguf::size_label(count);
}

}  // namespace

bool is_model_folder(const Folder& folder) { return is_model_config(folder); }

bool is_model_folder(const std::string& folder) {
  auto opened = Folder::open(folder, uncached_resolver());
  return opened.is_ok() && is_model_config(*opened);
}

Result<GgufConversion> plan(const std::string& folder, const TensorFile& weights, std::optional<TensorType> type, const GgufOptions& options) {
  SW_ASSIGN_OR_RETURN(Folder opened, Folder::open(folder, uncached_resolver()));
  return plan(opened, weights, type, options);
}

Result<GgufConversion> plan(const Folder& folder, const TensorFile& weights, std::optional<TensorType> type, const GgufOptions& options) {
  SW_ASSIGN_OR_RETURN(ModelConfig config, read_config(folder));
  for (std::string_view computed : {"rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight"}) {
    if (weights.find(computed)) {
      return Error(ErrorKind::NotSupported, "a tensor named " + std::string(computed) + " is not a transformers weight")
          .with_file(weights.name())
          .with_tensor(computed);
    }
  }
  auto tensors = std::make_unique<WithGenerated>(weights);
  Planner planner{config, weights, {}, tensors.get()};
  if (config.multimodal) {
    SW_ASSIGN_OR_RETURN(planner.names, text_model_names(weights));
  }
  SW_RETURN_IF_ERROR(read_nextn_weights(weights, config));  // Qwen's mtp.* (hf/nextn.h)
  if (config.linear) pad_recurrent_layers(config);          // the next-token layers are full attention
  SW_RETURN_IF_ERROR(planner.run());
  if (config.arch->norms_plus_one) SW_RETURN_IF_ERROR(add_one_to_norms(weights, planner.out, *tensors));
  if (config.arch->computed) SW_RETURN_IF_ERROR(config.arch->computed(config, weights, planner.out, *tensors));
  if (config.rope.type == "llama3") {
    // llama.cpp divides each rotary pair's frequency by its factor (LlamaModel.generate_extra_tensors).
    const std::uint32_t head_dim = config.head_dim.value_or(config.hidden_size / config.num_attention_heads);
    tensors->add_f32("rope_freqs.weight", {head_dim / 2}, llama3_rope_factors(config.rope, head_dim));
    planner.out.insert(planner.out.begin(), ConvertTensor{.source = "rope_freqs.weight", .name = "rope_freqs.weight"});
  }
  if (config.rope.type == "longrope") {
    // llama.cpp's converter yields them first, long then short (Phi3MiniModel.generate_extra_tensors).
    const std::uint64_t pairs = config.rope.short_factor.size();
    tensors->add_f32("rope_factors_long.weight", {pairs}, config.rope.long_factor);
    tensors->add_f32("rope_factors_short.weight", {pairs}, config.rope.short_factor);
    planner.out.insert(planner.out.begin(), {ConvertTensor{.source = "rope_factors_long.weight", .name = "rope_factors_long.weight"},
                                             ConvertTensor{.source = "rope_factors_short.weight", .name = "rope_factors_short.weight"}});
  }
  const TensorType target = type.value_or(weights_type(weights));
  auto ftype = gguf::llama_file_type(target);
  if (config.float_file_type && (target == TensorType::F32 || target == TensorType::F16 || target == TensorType::BF16))
    ftype = config.float_file_type;
  if (!ftype) {
    return Error(ErrorKind::NotSupported, "llama.cpp has no file type for " + std::string(type_name(target))).with_file(weights.name());
  }
  std::vector<KeyValue> kv = hyper_parameters(config, *ftype, folder.base_name(), read_sampling(folder), size_label_of(planner.out, *tensors));
  SW_RETURN_IF_ERROR(add_vocabulary(folder, config, options, kv));
  kv.push_back({"general.quantization_version", Value::u32(2)});
  GgufConversion out;
  out.plan.metadata = Metadata(std::move(kv));
  out.plan.tensors = std::move(planner.out);
  if (config.rope.yarn_untruncated) {
    out.notes.push_back(config.rope.source +
                        ".truncate is false, which no GGUF key says: llama.cpp truncates YaRN's correction range "
                        "(as for every file of this model its converter writes), so some rotary frequencies differ from transformers'");
  }
  out.notes.insert(out.notes.end(), config.notes.begin(), config.notes.end());
  if (planner.absent_nextn > 0) {
    out.notes.push_back(std::string(config.arch->nextn_key) + " counts " + std::to_string(planner.absent_nextn) +
                        " next-token-prediction layer(s) the weights do not hold: block_count counts them and no tensors are written for "
                        "them, as llama.cpp's converter writes such a folder (its loader then runs without them)");
  }
  if (config.multimodal) {
    out.notes.push_back(config.hf_class + ": the text model was converted; the vision tower was left out (as llama.cpp's converter leaves it)");
  }
  out.tensors = std::move(tensors);
  return out;
}

}  // namespace safeweights::hf
