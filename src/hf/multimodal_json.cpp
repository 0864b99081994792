// The text model of a multimodal folder (hf/multimodal.h).
#include <algorithm>
#include <array>
#include <cstdio>

#include "hf/json_read.h"
#include "hf/multimodal.h"

namespace safeweights::hf {
namespace {

// `s` as a JSON string literal.
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", u);
      out += escaped;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

constexpr std::array<std::string_view, 2> kTextPrefixes = {"model.language_model.", "language_model.model."};
// The towers and projectors left out: Mistral 3's vision tower and projector; Qwen3.5's vision tower
// with its merger (model.visual.*); Gemma 4's embedders of vision and audio, and its audio tower.
constexpr std::array<std::string_view, 9> kVisionPrefixes = {
    "model.vision_tower.", "model.multi_modal_projector.", "vision_tower.",     "multi_modal_projector.", "model.visual.", "visual.",
    "model.embed_vision.", "model.audio_tower.",           "model.embed_audio."};

}  // namespace

bool is_multimodal(const Architecture& arch, std::string_view hf_class) {
  return std::find(arch.multimodal.begin(), arch.multimodal.end(), hf_class) != arch.multimodal.end();
}

Result<std::unique_ptr<JsonFile>> text_model_config(const JsonFile& config) {
  auto text = JsonFile::member(config.root(), "text_config");
  if (!text || text->type() != json::element_type::OBJECT) {
    return config.bad("text_config", "is missing or not an object (the text model of a multimodal folder is described there)");
  }
  std::string merged = "{";
  auto add = [&](std::string_view key, json::element value) {
    if (merged.size() > 1) merged += ',';
    merged += json_string(key) + ":" + simdjson::to_string(value);
  };
  for (auto field : json::as_object(config.root())) {
    if (field.key != "text_config" && !JsonFile::member(*text, field.key)) add(field.key, field.value);
  }
  for (auto field : json::as_object(*text)) add(field.key, field.value);
  return JsonFile::parse(config.path(), merged + "}");
}

Result<TextModelNames> text_model_names(const TensorFile& weights) {
  for (std::string_view prefix : kTextPrefixes) {
    if (weights.find(std::string(prefix) + "embed_tokens.weight")) {
      TextModelNames names{.prefix = std::string(prefix)};
      if (prefix.starts_with("language_model.")) names.head = "language_model.lm_head.weight";
      return names;
    }
  }
  return Error(ErrorKind::TensorNotFound,
               "neither model.language_model.embed_tokens.weight nor language_model.model.embed_tokens.weight "
               "is there (the text model of a multimodal folder)")
      .with_file(weights.name());
}

bool is_vision_tensor(std::string_view name) {
  return std::any_of(kVisionPrefixes.begin(), kVisionPrefixes.end(), [&](std::string_view p) { return name.starts_with(p); });
}

}  // namespace safeweights::hf
