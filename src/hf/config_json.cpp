// config.json of a Hugging Face model folder: the hyper-parameters llama.cpp's converter reads, for
// the architectures of hf/arch.h.
#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>

#include "hf/arch.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"
#include "hf/moe.h"
#include "hf/multimodal.h"
#include "hf/nextn.h"

namespace safeweights::hf {
namespace {

// llama.cpp keeps per-layer parameters in arrays of LLAMA_MAX_LAYERS (512): more layers cannot load.
constexpr std::int64_t kMaxLayers = 512;
// The special-token ids llama.cpp's SpecialVocab takes from config.json when tokenizer_config.json
// does not give them.
constexpr std::array<std::string_view, 6> kSpecialTypes = {"bos", "eos", "unk", "sep", "pad", "mask"};

// config.json's one architecture class: llama.cpp's converter converts architectures[0]; more than one
// would be ambiguous.
Result<std::string> model_class(const JsonFile& file) {
  auto arch = JsonFile::member(file.root(), "architectures");
  if (!arch) return file.bad("architectures", "is missing: which model this is cannot be told");
  if (arch->type() != json::element_type::ARRAY || json::as_array(*arch).size() != 1 ||
      json::as_array(*arch).at(0).value_unsafe().type() != json::element_type::STRING) {
    return file.bad("architectures", "must be a list of one class name");
  }
  return std::string(json::as_string(json::as_array(*arch).at(0).value_unsafe()));
}

// The keys each rope type reads besides rope_type / type / rope_theta (transformers'
// modeling_rope_utils). Any other key is refused: it would change the rotary embedding unseen.
struct RopeType {
  std::string_view name;
  std::array<std::string_view, 8> keys;
};
constexpr std::array<RopeType, 5> kRopeTypes = {{
    {"default", {}},
    {"linear", {"factor"}},
    {"llama3", {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}},
    // beta_fast, beta_slow, attention_factor and truncate only with the values llama.cpp computes with.
    // mscale / mscale_all_dim: read, then refused unless the architecture maps them (Architecture::rope_keys).
    {"yarn", {"factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "attention_factor", "truncate", "mscale", "mscale_all_dim"}},
    {"longrope", {"short_factor", "long_factor", "original_max_position_embeddings", "factor", "attention_factor"}},
}};
// Rope types transformers has and llama.cpp's llama architecture does not, with the reason.
struct RefusedRope {
  std::string_view name;
  std::string_view why;
};
constexpr std::array<RefusedRope, 1> kRefusedRopes = {{
    {"dynamic", "dynamic NTK scaling has no llama.cpp equivalent (its rope runs at a fixed scale)"},
}};

Error rope_refused(const JsonFile& file, const std::string& where, std::string_view what) {
  return Error(ErrorKind::NotSupported, json::quoted(where) + " " + std::string(what)).with_file(file.path());
}

// YaRN as llama.cpp computes it: rope.scaling.factor and original_context_length, with its fixed
// beta_fast 32, beta_slow 1, truncated correction range, and attention factor 0.1 ln(factor) + 1
// (transformers' defaults); another beta or attention factor would change the rotary embedding unseen.
// `truncate` false (gpt-oss's own config) is the exception: no GGUF key can say it, llama.cpp's converter
// writes the same file whatever it says, so it converts and the user is told what llama.cpp computes.
Status read_yarn(const JsonFile& file, json::element object, Rope& out) {
  SW_ASSIGN_OR_RETURN(out.original_max_position_embeddings, file.count(object, "original_max_position_embeddings"));
  if (!out.original_max_position_embeddings) {
    return file.bad(out.source + ".original_max_position_embeddings", "is missing (rope type yarn needs it)");
  }
  auto refuse = [&](std::string_view key, std::string_view what) {
    return Error(ErrorKind::NotSupported, json::quoted(out.source) + " key " + json::quoted(key) + " " + std::string(what)).with_file(file.path());
  };
  for (const auto& [key, fixed] : {std::pair<std::string_view, double>{"beta_fast", 32.0}, {"beta_slow", 1.0}}) {
    SW_ASSIGN_OR_RETURN(auto v, file.positive(object, key));
    if (v && *v != fixed) return refuse(key, "is not " + std::to_string(static_cast<int>(fixed)) + ", the value llama.cpp computes YaRN with");
  }
  SW_ASSIGN_OR_RETURN(auto truncate, file.boolean(object, "truncate"));
  out.yarn_untruncated = truncate == false;  // converted as llama.cpp's converter does, with a note (plan.cpp)
  SW_ASSIGN_OR_RETURN(out.mscale, file.positive(object, "mscale"));
  SW_ASSIGN_OR_RETURN(out.mscale_all_dim, file.positive(object, "mscale_all_dim"));
  SW_ASSIGN_OR_RETURN(auto attention, file.positive(object, "attention_factor"));
  const double implied = *out.factor <= 1 ? 1.0 : 0.1 * std::log(*out.factor) + 1.0;
  if (attention && std::abs(*attention - implied) > 1e-6 * implied) {
    return refuse("attention_factor", "is not 0.1 ln(factor) + 1, the value llama.cpp computes YaRN with");
  }
  return Status::ok();
}

// A list of positive finite numbers, as float32 (JsonFile::to_float32).
Status read_factors(const JsonFile& file, json::element object, const std::string& where, std::string_view key, std::vector<float>& out) {
  auto list = JsonFile::member(object, key);
  const std::string name = where + "." + std::string(key);
  if (!list) return file.bad(name, "is missing (rope type longrope needs it)");
  if (list->type() != json::element_type::ARRAY || json::as_array(*list).size() > 65536) return file.bad(name, "must be a list of numbers");
  for (auto v : json::as_array(*list)) {
    double d = 0;
    if (v.get_double().get(d) != simdjson::SUCCESS || !std::isfinite(d) || d <= 0) return file.bad(name, "must hold finite positive numbers");
    SW_ASSIGN_OR_RETURN(float f, file.to_float32(name + "[" + std::to_string(out.size()) + "]", d));
    out.push_back(f);
  }
  return Status::ok();
}

// Phi-3's longrope: short_factor and long_factor (llama.cpp's rope_factors_short / _long tensors), and
// the attention factor transformers scales cos and sin by (llama.cpp's rope.scaling.attn_factor).
// original_max_position_embeddings comes from the rope object or the top level (transformers 4).
Status read_longrope(const JsonFile& file, json::element object, Rope& out) {
  SW_RETURN_IF_ERROR(read_factors(file, object, out.source, "short_factor", out.short_factor));
  SW_RETURN_IF_ERROR(read_factors(file, object, out.source, "long_factor", out.long_factor));
  if (out.short_factor.size() != out.long_factor.size()) return file.bad(out.source, "has short_factor and long_factor of different lengths");
  SW_ASSIGN_OR_RETURN(out.original_max_position_embeddings, file.count(object, "original_max_position_embeddings"));
  SW_ASSIGN_OR_RETURN(auto top, file.count(file.root(), "original_max_position_embeddings"));
  if (out.original_max_position_embeddings && top && *top != *out.original_max_position_embeddings) {
    return file.bad("original_max_position_embeddings", "differs from " + out.source + ".original_max_position_embeddings");
  }
  if (!out.original_max_position_embeddings) out.original_max_position_embeddings = top;
  if (!out.original_max_position_embeddings) return file.bad("original_max_position_embeddings", "is missing (rope type longrope needs it)");
  SW_ASSIGN_OR_RETURN(auto max_positions, file.count(file.root(), "max_position_embeddings"));
  if (!max_positions) return file.bad("max_position_embeddings", "is missing");
  SW_ASSIGN_OR_RETURN(out.factor, file.positive(object, "factor"));
  const double factor = out.factor.value_or(static_cast<double>(*max_positions) / *out.original_max_position_embeddings);
  SW_ASSIGN_OR_RETURN(out.attention_factor, file.positive(object, "attention_factor"));
  if (!out.attention_factor) {
    if (factor > 1.0 && *out.original_max_position_embeddings == 1) {
      return file.bad("original_max_position_embeddings", "is 1: transformers' attention factor sqrt(1 + ln(factor) / ln(1)) is infinite");
    }
    out.attention_factor =
        factor <= 1.0 ? 1.0 : std::sqrt(1 + std::log(factor) / std::log(static_cast<double>(*out.original_max_position_embeddings)));
  }
  return Status::ok();
}

// One rope object (rope_parameters, rope_scaling, or one layer type's entry), named `out.source` in
// messages; `top_theta` is the top-level rope_theta it must agree with.
Status read_rope_object(const JsonFile& file, json::element object, std::optional<double> top_theta, Rope& out) {
  if (object.type() != json::element_type::OBJECT) return file.bad(out.source, "must be an object or null");
  SW_ASSIGN_OR_RETURN(auto type, file.string(object, "type"));
  SW_ASSIGN_OR_RETURN(auto rope_type, file.string(object, "rope_type"));
  if (type && rope_type && *type != *rope_type)
    return file.bad(out.source, "gives two rope types, " + json::quoted(*type) + " and " + json::quoted(*rope_type));
  out.type = rope_type ? *rope_type : type.value_or("default");
  for (const RefusedRope& r : kRefusedRopes) {
    if (out.type == r.name) return rope_refused(file, out.source, "rope type " + json::quoted(out.type) + ": " + std::string(r.why));
  }
  const RopeType* known = nullptr;
  for (const RopeType& t : kRopeTypes) {
    if (t.name == out.type) known = &t;
  }
  constexpr RopeType kOwnType{"", {}};  // an architecture's own type (Architecture::rope_types): no keys beyond partial_rotary_factor
  if (!known && std::find(out.own_types.begin(), out.own_types.end(), out.type) != out.own_types.end()) known = &kOwnType;
  if (!known) return rope_refused(file, out.source, "rope type " + json::quoted(out.type) + " is not one llama.cpp's converter maps");
  for (auto field : json::as_object(object)) {
    if (field.key == "type" || field.key == "rope_type" || field.key == "rope_theta" || field.key == "partial_rotary_factor") continue;
    const bool own = std::find(out.own_keys.begin(), out.own_keys.end(), field.key) != out.own_keys.end();
    if (!own && (std::find(known->keys.begin(), known->keys.end(), field.key) == known->keys.end() || field.key.empty())) {
      return rope_refused(file, out.source,
                          "key " + json::quoted(field.key) + " is not understood for rope type " + json::quoted(out.type) +
                              " (it would change the rotary embedding)");
    }
  }
  // transformers 5 copies partial_rotary_factor into the rope object (Phi-3 writes 1.0 there).
  // (refused unless the architecture rotates part of each head: read_config)
  SW_ASSIGN_OR_RETURN(out.partial_rotary_factor, file.positive(object, "partial_rotary_factor"));
  SW_ASSIGN_OR_RETURN(auto theta, file.positive(object, "rope_theta"));
  if (theta && top_theta && *theta != *top_theta) return file.bad("rope_theta", "differs from " + out.source + ".rope_theta");
  out.theta = theta ? theta : top_theta;
  auto need = [&](std::string_view key) -> Result<double> {
    SW_ASSIGN_OR_RETURN(auto v, file.positive(object, key));
    if (!v) return file.bad(out.source + "." + std::string(key), "is missing (rope type " + out.type + " needs it)");
    return *v;
  };
  if (out.type == "linear" || out.type == "llama3" || out.type == "yarn") {
    SW_ASSIGN_OR_RETURN(out.factor, need("factor"));
  }
  if (out.type == "yarn") SW_RETURN_IF_ERROR(read_yarn(file, object, out));
  if (out.type == "longrope") SW_RETURN_IF_ERROR(read_longrope(file, object, out));
  if (out.type == "llama3") {
    SW_ASSIGN_OR_RETURN(out.low_freq_factor, need("low_freq_factor"));
    SW_ASSIGN_OR_RETURN(out.high_freq_factor, need("high_freq_factor"));
    if (*out.low_freq_factor == *out.high_freq_factor) return file.bad(out.source, "has low_freq_factor equal to high_freq_factor");
    SW_ASSIGN_OR_RETURN(out.original_max_position_embeddings, file.count(object, "original_max_position_embeddings"));
    if (!out.original_max_position_embeddings)
      return file.bad(out.source + ".original_max_position_embeddings", "is missing (rope type llama3 needs it)");
  }
  return Status::ok();
}

// rope_parameters (transformers 5) or rope_scaling (transformers 4), and rope_theta. With
// `layer_types` (Gemma 3), transformers 5 gives one rope object per layer type: full_attention's is
// the model's, sliding_attention's goes to `sliding`.
Status read_rope(const JsonFile& file, bool layer_types, Rope& out, Rope& sliding) {
  const auto root = file.root();
  auto parameters = JsonFile::member(root, "rope_parameters");
  auto scaling = JsonFile::member(root, "rope_scaling");
  SW_ASSIGN_OR_RETURN(auto top_theta, file.positive(root, "rope_theta"));
  out.theta = top_theta;
  if (parameters && scaling) {
    return file.bad("rope_scaling", "is given beside rope_parameters (transformers 4 and 5 layouts at once: which one holds is ambiguous)");
  }
  auto object = parameters ? parameters : scaling;
  if (!object) return Status::ok();
  out.source = parameters ? "rope_parameters" : "rope_scaling";
  auto full = JsonFile::member(*object, "full_attention");
  if (!parameters || !full || !layer_types) return read_rope_object(file, *object, top_theta, out);
  for (auto field : json::as_object(*object)) {
    if (field.key != "full_attention" && field.key != "sliding_attention") {
      return rope_refused(file, out.source, "key " + json::quoted(field.key) + " is not a layer type llama.cpp has");
    }
  }
  out.source = "rope_parameters.full_attention";
  SW_RETURN_IF_ERROR(read_rope_object(file, *full, top_theta, out));
  if (auto swa = JsonFile::member(*object, "sliding_attention")) {
    sliding.source = "rope_parameters.sliding_attention";
    SW_RETURN_IF_ERROR(read_rope_object(file, *swa, std::nullopt, sliding));
  }
  return Status::ok();
}

// Top-level keys that change the computation in ways llama.cpp's llama architecture cannot follow.
Status check_math_keys(const JsonFile& file, const Architecture& arch) {
  const std::string name(arch.name);
  for (std::string_view key : {"hidden_act", "hidden_activation"}) {
    SW_ASSIGN_OR_RETURN(auto act, file.string(file.root(), key));
    if (act && *act != arch.activation && (arch.activation_alias.empty() || *act != arch.activation_alias)) {
      return Error(ErrorKind::NotSupported, "key " + json::quoted(key) + " is " + json::quoted(*act) + "; llama.cpp's " + name +
                                                " architecture computes " + std::string(arch.activation))
          .with_file(file.path());
    }
  }
  SW_ASSIGN_OR_RETURN(auto tied, file.boolean(file.root(), "tie_word_embeddings"));
  if (arch.tied_output && tied == false) {
    return Error(ErrorKind::NotSupported,
                 "key `tie_word_embeddings` is false: llama.cpp's " + name + " architecture computes the output with the embedding")
        .with_file(file.path());
  }
  SW_ASSIGN_OR_RETURN(auto partial, file.positive(file.root(), "partial_rotary_factor"));
  if (partial && *partial != 1.0 && !arch.partial_rotary) {
    return Error(ErrorKind::NotSupported, "key `partial_rotary_factor` is not 1 (llama.cpp's " + name + " architecture rotates whole heads)")
        .with_file(file.path());
  }
  return Status::ok();
}

// A LayerNorm's epsilon under the first of the keys llama.cpp's converter looks for, as
// {arch}.attention.layer_norm_epsilon (its loader requires the key; transformers always saves it).
Status read_layer_norm_eps(const JsonFile& file, ModelConfig& c) {
  for (std::string_view key : {"layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"}) {
    SW_ASSIGN_OR_RETURN(auto eps, file.positive(file.root(), key));
    if (!eps) continue;
    c.arch_kv.push_back({std::string(c.arch->name) + ".attention.layer_norm_epsilon", MetaValue::f32(static_cast<float>(*eps))});
    return Status::ok();
  }
  return file.bad("layer_norm_eps", "is missing (llama.cpp needs " + std::string(c.arch->name) + ".attention.layer_norm_epsilon)");
}

}  // namespace

bool is_model_config(const Folder& folder) {
  auto present = has_model_file(folder, "config.json");
  if (present.is_ok() && !*present) return false;
  if (!present.is_ok()) return true;  // a folder named config.json: plan() refuses it by name
  auto file = JsonFile::read(folder, "config.json", kMaxConfigBytes);
  if (!file.is_ok()) return true;  // broken: plan() says why, naming the file
  return JsonFile::member((*file)->root(), "architectures") || JsonFile::member((*file)->root(), "model_type");
}

namespace {

// num_local_experts, which llama.cpp's converter reads before any other key as {arch}.expert_count, on an
// architecture that reads no such key (hf/moe.h's tables read it): with no experts (the architecture has
// none in llama.cpp), or with experts transformers counts by another key (Gemma 4's num_experts,
// DeepSeek's and GLM's n_routed_experts), where the two tools would count them differently.
Status refuse_local_experts(const JsonFile& file, const ModelConfig& c) {
  if (c.arch->moe || !JsonFile::member(file.root(), "num_local_experts")) return Status::ok();
  const std::string arch(c.arch->name);
  const std::string why =
      c.moe ? c.hf_class + " counts its experts with another key (the one transformers reads); llama.cpp's converter would take this one as " + arch +
                  ".expert_count"
            : c.hf_class + " is converted without experts (llama.cpp's " + arch + " architecture has none)";
  return Error(ErrorKind::NotSupported, "key `num_local_experts`: " + why).with_file(file.path());
}

}  // namespace

Result<ModelConfig> read_config(const Folder& folder) {
  SW_ASSIGN_OR_RETURN(auto file, JsonFile::read(folder, "config.json", kMaxConfigBytes));
  ModelConfig c;
  SW_ASSIGN_OR_RETURN(c.hf_class, model_class(*file));
  c.arch = find_architecture(c.hf_class);
  if (!c.arch) {
    return Error(ErrorKind::NotSupported, "architecture " + json::quoted(c.hf_class) + " is not converted (converted: " + supported_classes() + ")")
        .with_file(file->path());
  }
  c.multimodal = is_multimodal(*c.arch, c.hf_class);
  if (c.multimodal) {
    SW_ASSIGN_OR_RETURN(file, text_model_config(*file));
  }
  const auto root = file->root();
  SW_ASSIGN_OR_RETURN(c.vocab_size, file->required_count(root, "vocab_size", kMaxVocab));
  SW_ASSIGN_OR_RETURN(c.hidden_size, file->required_count(root, "hidden_size"));
  if (c.arch->optional_intermediate) {
    SW_ASSIGN_OR_RETURN(auto inter, file->count(root, "intermediate_size"));
    c.intermediate_size = inter.value_or(0);
  } else {
    SW_ASSIGN_OR_RETURN(c.intermediate_size, file->required_count(root, "intermediate_size"));
  }
  SW_ASSIGN_OR_RETURN(c.num_hidden_layers, file->required_count(root, "num_hidden_layers", kMaxLayers));
  SW_ASSIGN_OR_RETURN(c.num_attention_heads, file->required_count(root, "num_attention_heads"));
  SW_ASSIGN_OR_RETURN(c.num_key_value_heads, file->count(root, "num_key_value_heads"));
  SW_ASSIGN_OR_RETURN(c.max_position_embeddings, file->count(root, "max_position_embeddings"));
  SW_ASSIGN_OR_RETURN(c.head_dim, file->count(root, "head_dim"));
  SW_ASSIGN_OR_RETURN(c.rms_norm_eps, file->positive(root, "rms_norm_eps"));
  c.rope.own_keys = c.arch->rope_keys;
  c.rope.own_types = c.rope_sliding.own_types = c.arch->rope_types;
  SW_RETURN_IF_ERROR(read_rope(*file, c.arch->layer_type_rope, c.rope, c.rope_sliding));
  for (const Rope* r : {&c.rope, &c.rope_sliding}) {
    if (r->partial_rotary_factor.value_or(1.0) != 1.0 && !c.arch->partial_rotary)
      return rope_refused(*file, r->source, "key `partial_rotary_factor` is not 1 (llama.cpp rotates whole heads here)");
  }
  if (c.rope.type == "longrope" && !c.arch->longrope) {
    return Error(ErrorKind::NotSupported, json::quoted(c.rope.source) + " rope type `longrope`: llama.cpp's " + std::string(c.arch->name) +
                                              " architecture has no longrope (Phi-3's has)")
        .with_file(file->path());
  }
  if (c.rope.type == "longrope" && c.rope.short_factor.size() * 2 != c.head_dim.value_or(c.hidden_size / c.num_attention_heads)) {
    return file->bad(c.rope.source + ".short_factor", "must hold one factor per rotary pair (head size / 2)");
  }
  const auto owns = [&](std::string_view key) {
    return std::find(c.arch->rope_keys.begin(), c.arch->rope_keys.end(), key) != c.arch->rope_keys.end();
  };
  if ((c.rope.mscale && !owns("mscale")) || (c.rope.mscale_all_dim && !owns("mscale_all_dim"))) {
    return Error(ErrorKind::NotSupported, json::quoted(c.rope.source) + " key `" + (c.rope.mscale && !owns("mscale") ? "mscale" : "mscale_all_dim") +
                                              "` is not understood for rope type `yarn` by llama.cpp's " + std::string(c.arch->name) +
                                              " architecture")
        .with_file(file->path());
  }
  if (c.rope.type == "llama3" && !c.arch->llama3_rope) {
    return Error(ErrorKind::NotSupported,
                 json::quoted(c.rope.source) + " rope type `llama3` is not one llama.cpp's " + std::string(c.arch->name) + " architecture has")
        .with_file(file->path());
  }
  SW_RETURN_IF_ERROR(check_math_keys(*file, *c.arch));
  SW_ASSIGN_OR_RETURN(c.tie_word_embeddings, file->boolean(root, "tie_word_embeddings"));
  for (auto type : kSpecialTypes) {
    const std::string key = std::string(type) + "_token_id";
    auto e = JsonFile::member(root, key);
    if (!e || e->type() == json::element_type::ARRAY) continue;  // a list of ids: not one token
    SW_ASSIGN_OR_RETURN(auto id, file->integer(root, key, 0, kMaxVocab));
    // A token id indexes the vocabulary and the embedding's rows: one past them names no token
    // (llama.cpp's loader would ignore it and fall back to its default id).
    if (*id >= c.vocab_size) {
      return file->bad(key, "is " + std::to_string(*id) + ", not below vocab_size " + std::to_string(c.vocab_size) + " (no such token)");
    }
    c.special_ids.emplace_back(std::string(type), *id);
  }

  // What the tensor shapes and the permutation rely on.
  const std::uint32_t heads = c.num_attention_heads;
  const std::uint32_t kv_heads = c.num_key_value_heads.value_or(heads);
  if (kv_heads > heads || heads % kv_heads != 0) {
    return file->bad("num_key_value_heads", "must divide num_attention_heads (" + std::to_string(heads) + ")");
  }
  if (!c.head_dim && c.hidden_size % heads != 0) {
    return file->bad("hidden_size", "is not a multiple of num_attention_heads");
  }
  const std::uint32_t head_dim = c.head_dim.value_or(c.hidden_size / heads);
  if (head_dim % 2 != 0) return file->bad(c.head_dim ? "head_dim" : "hidden_size", "gives an odd head size: rotary embeddings need pairs");
  if (!c.max_position_embeddings) {
    return file->bad("max_position_embeddings", "is missing (llama.cpp needs " + std::string(c.arch->name) + ".context_length)");
  }
  if (c.arch->moe) SW_RETURN_IF_ERROR(read_moe(*file, c));
  if (c.arch->norm != Norm::Rms) SW_RETURN_IF_ERROR(read_layer_norm_eps(*file, c));
  if (c.arch->check) SW_RETURN_IF_ERROR(c.arch->check(*file, c));
  SW_RETURN_IF_ERROR(refuse_local_experts(*file, c));
  SW_RETURN_IF_ERROR(read_nextn_layers(*file, c));
  return c;
}

}  // namespace safeweights::hf

namespace safeweights::hf {

std::vector<float> llama3_rope_factors(const Rope& rope, std::uint32_t head_dim) {
  // float32 throughout, as torch computes it: Python numbers meet float32 tensors as float32.
  const float base = static_cast<float>(rope.theta.value_or(10000.0));
  const float factor = static_cast<float>(*rope.factor);
  const float low = static_cast<float>(*rope.low_freq_factor);
  const double old_context = *rope.original_max_position_embeddings;
  const auto low_wavelen = static_cast<float>(old_context / *rope.low_freq_factor);
  const auto high_wavelen = static_cast<float>(old_context / *rope.high_freq_factor);
  const auto span = static_cast<float>(*rope.high_freq_factor - *rope.low_freq_factor);
  const auto two_pi = static_cast<float>(2.0 * 3.14159265358979323846);
  std::vector<float> out;
  for (std::uint32_t i = 0; i < head_dim; i += 2) {
    const float exponent = static_cast<float>(i) / static_cast<float>(head_dim);
    const float freq = 1.0f / std::pow(base, exponent);
    const float wavelen = two_pi / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(factor);
    } else {
      const float smooth = (static_cast<float>(old_context) / wavelen - low) / span;
      out.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return out;
}

namespace {

// A general.sampling.* key and where generation_config.json holds it (gguf-py Metadata.load's order).
struct SamplingKey {
  std::string_view key, from, fallback;
  MetaType type;
};
constexpr std::array kSamplingKeys = {
    SamplingKey{"general.sampling.sequence", "sequence", "", MetaType::STRING},
    SamplingKey{"general.sampling.top_k", "top_k", "", MetaType::INT32},
    SamplingKey{"general.sampling.top_p", "top_p", "", MetaType::FLOAT32},
    SamplingKey{"general.sampling.min_p", "min_p", "", MetaType::FLOAT32},
    SamplingKey{"general.sampling.xtc_probability", "xtc_probability", "", MetaType::FLOAT32},
    SamplingKey{"general.sampling.xtc_threshold", "xtc_threshold", "", MetaType::FLOAT32},
    SamplingKey{"general.sampling.temp", "temperature", "", MetaType::FLOAT32},
    SamplingKey{"general.sampling.penalty_last_n", "penalty_last_n", "", MetaType::INT32},
    SamplingKey{"general.sampling.penalty_repeat", "penalty_repeat", "repetition_penalty", MetaType::FLOAT32},
    SamplingKey{"general.sampling.mirostat", "mirostat", "", MetaType::INT32},
    SamplingKey{"general.sampling.mirostat_tau", "mirostat_tau", "", MetaType::FLOAT32},
    SamplingKey{"general.sampling.mirostat_eta", "mirostat_eta", "", MetaType::FLOAT32},
};

std::optional<MetaValue> sampling_value(json::element e, MetaType type) {
  const auto kind = e.type();
  const bool number = kind == json::element_type::INT64 || kind == json::element_type::UINT64 || kind == json::element_type::DOUBLE;
  if (type == MetaType::STRING && kind == json::element_type::STRING) return MetaValue::string(std::string(json::as_string(e)));
  if (type == MetaType::FLOAT32 && number) {
    const double v = kind == json::element_type::DOUBLE  ? e.get_double().value_unsafe()
                     : kind == json::element_type::INT64 ? static_cast<double>(e.get_int64().value_unsafe())
                                                         : static_cast<double>(e.get_uint64().value_unsafe());
    if (!(std::abs(v) <= static_cast<double>(std::numeric_limits<float>::max()))) return std::nullopt;
    return MetaValue::f32(static_cast<float>(v));
  }
  if (type == MetaType::INT32 && kind == json::element_type::INT64) {
    const std::int64_t v = e.get_int64().value_unsafe();
    if (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max()) return std::nullopt;
    return MetaValue::i32(static_cast<std::int32_t>(v));
  }
  return std::nullopt;
}

}  // namespace

std::vector<MetaEntry> read_sampling(const Folder& folder) {
  std::vector<MetaEntry> out;
  auto present = has_model_file(folder, "generation_config.json");
  if (!present.is_ok() || !*present) return out;
  auto file = JsonFile::read(folder, "generation_config.json", kMaxConfigBytes);
  if (!file.is_ok()) return out;
  const auto root = (*file)->root();
  for (const SamplingKey& k : kSamplingKeys) {
    auto e = JsonFile::member(root, k.from);
    if (!e && !k.fallback.empty()) e = JsonFile::member(root, k.fallback);
    if (!e) continue;
    if (auto v = sampling_value(*e, k.type)) out.push_back({std::string(k.key), std::move(*v)});
  }
  return out;
}

}  // namespace safeweights::hf
