// Ministral 3 (llama.cpp's "mistral3", convert_hf_to_gguf.py's Mistral3Model.Ministral3Model, a
// LlamaModel): Llama's layer with q and k permuted, YaRN rope, and Llama 4's attention temperature: the
// queries are scaled by 1 + beta ln(1 + floor(position / original context)). llama.cpp's keys:
// rope.scaling.yarn_log_multiplier (the rope object's mscale_all_dim; llama.cpp takes mscale as 1) and
// attention.temperature_scale (its llama_4_scaling_beta), beside the generic YaRN keys. Released as
// Mistral3ForConditionalGeneration: its text model is converted (hf/multimodal.h), the vision tower left
// out. Mistral Small 3.1's text model (model_type "mistral", the same class) is Llama's computation:
// converted as llama.cpp's converter converts it, without Ministral 3's keys.
#include <array>

#include "hf/arch.h"
#include "hf/arch_llama.h"
#include "hf/config_rules.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 2> kClasses = {"Ministral3ForCausalLM", "Mistral3ForConditionalGeneration"};
// Ministral 3 as released: its text model inside a vision checkpoint (text_config's model_type ministral3).
constexpr std::array<std::string_view, 1> kMultimodal = {"Mistral3ForConditionalGeneration"};

constexpr std::array<TensorRule, 0> kLayer = {};

// The rope object's keys read here (transformers 5 copies max_position_embeddings into it: unused
// with a factor given).
constexpr std::array<std::string_view, 4> kRopeKeys = {"mscale", "mscale_all_dim", "llama_4_scaling_beta", "max_position_embeddings"};

Status check_yarn(const JsonFile& file, json::element rope, ModelConfig& c) {
  const std::string& where = c.rope.source;
  auto missing = [&](std::string_view key) { return file.bad(where + "." + std::string(key), "is missing (llama.cpp's mistral3 needs it)"); };
  SW_ASSIGN_OR_RETURN(auto log_mul, file.positive(rope, "mscale_all_dim"));
  if (!log_mul) return missing("mscale_all_dim");
  // transformers divides get_mscale(factor, mscale) by get_mscale(factor, mscale_all_dim); llama.cpp's
  // yarn_log_multiplier is the divisor's, its numerator's mscale always 1.
  SW_ASSIGN_OR_RETURN(auto mscale, file.positive(rope, "mscale"));
  if (mscale.value_or(0.0) != 1.0) {
    return refuse_key(file, where + ".mscale", "is not 1: llama.cpp's mistral3 computes YaRN's attention factor with mscale 1");
  }
  if (JsonFile::member(rope, "attention_factor")) {
    return refuse_key(file, where + ".attention_factor", "is set: llama.cpp's mistral3 computes YaRN's attention factor from mscale_all_dim");
  }
  SW_ASSIGN_OR_RETURN(auto beta, file.positive(rope, "llama_4_scaling_beta"));
  if (!beta) return missing("llama_4_scaling_beta");
  const std::string a = "mistral3";
  SW_ASSIGN_OR_RETURN(float log_mul32, file.to_float32("mscale_all_dim", *log_mul));
  SW_ASSIGN_OR_RETURN(float beta32, file.to_float32("llama_4_scaling_beta", *beta));
  // llama.cpp's converter writes beta_fast and beta_slow when given (config_json.cpp allows only
  // transformers' and llama.cpp's defaults, 32 and 1).
  for (const auto& [key, gguf] : {std::pair<std::string_view, std::string_view>{"beta_fast", "yarn_beta_fast"}, {"beta_slow", "yarn_beta_slow"}}) {
    SW_ASSIGN_OR_RETURN(auto v, file.positive(rope, key));
    if (v) c.arch_kv.push_back({a + ".rope.scaling." + std::string(gguf), MetaValue::f32(static_cast<float>(*v))});
  }
  c.arch_kv.push_back({a + ".rope.scaling.yarn_log_multiplier", MetaValue::f32(log_mul32)});
  c.arch_kv.push_back({a + ".attention.temperature_scale", MetaValue::f32(beta32)});
  return Status::ok();
}

// Mistral's rope objects have none of Ministral 3's keys: each is refused (llama.cpp would ignore it).
Status check_without_temperature(const JsonFile& file, const ModelConfig& c) {
  auto rope = c.rope.source.empty() ? std::nullopt : JsonFile::member(file.root(), c.rope.source);
  for (std::string_view key : {"mscale", "mscale_all_dim", "llama_4_scaling_beta"}) {
    if (rope && JsonFile::member(*rope, key)) {
      return refuse_key(file, c.rope.source + "." + std::string(key), "is set for model_type mistral: llama.cpp's converter ignores it");
    }
  }
  return Status::ok();
}

Status check(const JsonFile& file, ModelConfig& c) {
  SW_RETURN_IF_ERROR(check_llama_sliding_window(file, c));
  // llama.cpp's converter writes Ministral 3's keys for model_type ministral3 only: Mistral Small 3.1's
  // text model ("mistral") is Llama's computation, which llama.cpp's mistral3 computes without them.
  SW_ASSIGN_OR_RETURN(auto model_type, file.string(file.root(), "model_type"));
  if (model_type == "mistral") return check_without_temperature(file, c);
  if (model_type && *model_type != "ministral3") {
    return refuse_key(file, "model_type", "is " + json::quoted(*model_type) + ": the text models converted are ministral3 and mistral");
  }
  auto rope = c.rope.source.empty() ? std::nullopt : JsonFile::member(file.root(), c.rope.source);
  if (!rope || c.rope.type != "yarn") {
    return Error(ErrorKind::NotSupported, "rope type " + json::quoted(c.rope.type) + ": llama.cpp's converter converts Ministral 3 with YaRN only")
        .with_file(file.path());
  }
  return check_yarn(file, *rope, c);
}

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(ministral3) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "mistral3",
                                      .base = LayerBase::LlamaPermuted,
                                      .layer = kLayer,
                                      .llama_keys = true,
                                      .check = check,
                                      .rope_keys = kRopeKeys,
                                      .multimodal = kMultimodal};
  return kArch;
}

}  // namespace safeweights::hf
