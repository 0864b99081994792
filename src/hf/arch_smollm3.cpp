// SmolLM3 (llama.cpp's "smollm3", convert_hf_to_gguf.py's SmolLM3Model, a LlamaModel): Llama's layer
// with q and k permuted for llama.cpp's interleaved rope, whose every fourth layer has no rotary
// embedding at all (NoPE). llama.cpp fixes that pattern in its loader (n_no_rope_layer_step 4) and
// writes no key for it: transformers' no_rope_layers must be that pattern, or it is refused.
#include <array>

#include "hf/arch.h"
#include "hf/config_rules.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"SmolLM3ForCausalLM"};
// llama.cpp's llama_model_smollm3: layer il rotates unless (il + 1) % 4 == 0.
constexpr std::uint32_t kNoRopeStep = 4;

constexpr std::array<TensorRule, 0> kLayer = {};

bool llama_cpp_rotates(std::uint32_t layer) { return (layer + 1) % kNoRopeStep != 0; }

// no_rope_layers (1: the layer rotates), or, without it, transformers' pattern from
// no_rope_layer_interval: either must be llama.cpp's.
Status check_no_rope(const JsonFile& file, const ModelConfig& c) {
  auto layers = JsonFile::member(file.root(), "no_rope_layers");
  if (!layers) {
    SW_ASSIGN_OR_RETURN(auto interval, file.count(file.root(), "no_rope_layer_interval"));
    if (interval.value_or(kNoRopeStep) != kNoRopeStep) {
      return refuse_key(file, "no_rope_layer_interval", "is not 4, the NoPE layer step llama.cpp's smollm3 architecture fixes");
    }
    return Status::ok();
  }
  if (layers->type() != json::element_type::ARRAY || json::as_array(*layers).size() != c.num_hidden_layers) {
    return file.bad("no_rope_layers", "must list one 0 or 1 per layer");
  }
  std::uint32_t i = 0;
  for (auto v : json::as_array(*layers)) {
    std::int64_t rotates = -1;
    if (v.get_int64().get(rotates) != simdjson::SUCCESS || (rotates != 0 && rotates != 1)) {
      return file.bad("no_rope_layers", "must list one 0 or 1 per layer");
    }
    if ((rotates == 1) != llama_cpp_rotates(i)) {
      return refuse_key(file, "no_rope_layers",
                        "does not follow llama.cpp's smollm3 pattern (layer " + std::to_string(i) + (llama_cpp_rotates(i) ? " must" : " must not") +
                            " use rope: every fourth layer has none)");
    }
    ++i;
  }
  return Status::ok();
}

Status check(const JsonFile& file, ModelConfig& c) {
  SW_RETURN_IF_ERROR(refuse_true(file, "smollm3", {"use_sliding_window", "attention_bias", "mlp_bias"}));
  return check_no_rope(file, c);
}

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(smollm3) {
  static constexpr Architecture kArch{
      .classes = kClasses, .name = "smollm3", .base = LayerBase::LlamaPermuted, .layer = kLayer, .llama_keys = true, .check = check};
  return kArch;
}

}  // namespace safeweights::hf
