// Gemma 3 text models (llama.cpp's "gemma3"): Gemma 2's layer with RMS norms of each query and key
// head, no logit soft-capping, sliding-window attention on five layers of six, whose rope has its own
// base (rope.freq_base_swa) and no scaling; linear scaling applies to the full-attention layers.
#include <array>

#include "hf/arch.h"
#include "hf/arch_gemma.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"Gemma3ForCausalLM"};

Status check(const JsonFile& file, ModelConfig& c) {
  SW_RETURN_IF_ERROR(gemma::check_common(file, c, 6));
  auto refuse = [&](std::string_view key, std::string_view why) {
    return Error(ErrorKind::NotSupported, "key " + json::quoted(key) + " " + std::string(why)).with_file(file.path());
  };
  for (std::string_view key : {"attn_logit_softcapping", "final_logit_softcapping"}) {
    if (JsonFile::member(file.root(), key)) return refuse(key, "is set: llama.cpp's gemma3 architecture does not cap logits");
  }
  SW_ASSIGN_OR_RETURN(auto bidirectional, file.boolean(file.root(), "use_bidirectional_attention"));
  if (bidirectional.value_or(false)) return refuse("use_bidirectional_attention", "is true: llama.cpp's gemma3 attends causally");
  if (c.rope.type != "default" && c.rope.type != "linear") {
    return refuse(c.rope.source, "rope type " + json::quoted(c.rope.type) + " is not one llama.cpp's gemma3 architecture has");
  }
  // The sliding layers' base: transformers 5's rope_parameters.sliding_attention, or transformers 4's
  // rope_local_base_freq; llama.cpp's own default is 10000, as transformers'.
  SW_ASSIGN_OR_RETURN(auto local_base, file.positive(file.root(), "rope_local_base_freq"));
  if (!c.rope_sliding.source.empty()) {
    if (c.rope_sliding.type != "default") return refuse(c.rope_sliding.source, "is not default: llama.cpp scales no sliding-window rope");
    if (local_base && c.rope_sliding.theta && *local_base != *c.rope_sliding.theta) {
      return file.bad("rope_local_base_freq", "differs from rope_parameters.sliding_attention.rope_theta");
    }
    if (c.rope_sliding.theta) local_base = c.rope_sliding.theta;
  }
  c.arch_kv.push_back({"gemma3.rope.freq_base_swa", MetaValue::f32(static_cast<float>(local_base.value_or(10000.0)))});
  return Status::ok();
}

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(gemma3) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "gemma3",
                                      .base = LayerBase::Gemma,
                                      .layer = rows::kQkNorm,
                                      .activation = "gelu_pytorch_tanh",
                                      .norms_plus_one = true,
                                      .tied_output = true,
                                      .spm_space_prefix = false,
                                      .layer_type_rope = true,
                                      .check = check};
  return kArch;
}

namespace gemma {

Status check_common(const JsonFile& file, ModelConfig& c, std::uint32_t pattern) {
  const std::string a(c.arch->name);
  auto refuse = [&](std::string_view key, const std::string& why) {
    return Error(ErrorKind::NotSupported, "key " + json::quoted(key) + " " + why).with_file(file.path());
  };
  const std::uint32_t head_dim = c.head_dim.value_or(c.hidden_size / c.num_attention_heads);
  SW_ASSIGN_OR_RETURN(auto scalar, file.positive(file.root(), "query_pre_attn_scalar"));
  // llama.cpp's 27B models: 46 layers (Gemma 2), 62 (Gemma 3).
  const bool is_27b = c.num_hidden_layers == (pattern == 2 ? 46u : 62u);
  const double llama_cpp_scalar = is_27b ? static_cast<double>(c.hidden_size / c.num_attention_heads) : head_dim;
  if (scalar && *scalar != llama_cpp_scalar) {
    return refuse("query_pre_attn_scalar", "is not " + std::to_string(static_cast<std::uint64_t>(llama_cpp_scalar)) +
                                               ", the query scale llama.cpp's " + a + " architecture uses for this model");
  }
  SW_ASSIGN_OR_RETURN(auto window, file.count(file.root(), "sliding_window"));
  if (!window) return file.bad("sliding_window", "is missing (llama.cpp needs " + a + ".attention.sliding_window)");
  c.arch_kv.push_back({a + ".attention.sliding_window", MetaValue::u32(*window)});
  if (auto types = JsonFile::member(file.root(), "layer_types")) {
    if (types->type() != json::element_type::ARRAY || json::as_array(*types).size() != c.num_hidden_layers) {
      return file.bad("layer_types", "must list one type per layer");
    }
    std::uint32_t i = 0;
    for (auto t : json::as_array(*types)) {
      const std::string_view want = (i % pattern) < pattern - 1 ? "sliding_attention" : "full_attention";
      if (t.type() != json::element_type::STRING || json::as_string(t) != want) {
        return refuse("layer_types",
                      "does not follow llama.cpp's " + a + " pattern (layer " + std::to_string(i) + " must be " + std::string(want) + ")");
      }
      ++i;
    }
  }
  return Status::ok();
}

}  // namespace gemma

}  // namespace safeweights::hf
