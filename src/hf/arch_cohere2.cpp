// Cohere2 / Command R7B (llama.cpp's "cohere2"): Cohere's parallel block and bias-free LayerNorm, with
// sliding-window attention on three layers of four (layer_types must follow llama.cpp's fixed pattern)
// and rope on the sliding layers only (the full-attention layers have none, in transformers as in
// llama.cpp's graph). Its converter writes rope.dimension_count from rotary_pct, which transformers 5
// does not read: any value but 1 is refused. attention_bias true: llama.cpp's cohere2 has no attention
// biases, and its converter leaves them out when every value is zero (as in the released checkpoints,
// where they compute nothing), refusing any other; so do we.
#include <algorithm>
#include <array>

#include "hf/arch.h"
#include "hf/arch_cohere.h"
#include "hf/arch_gemma.h"
#include "hf/generated.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"
#include "safeweights/quantize.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"Cohere2ForCausalLM"};

// Sliding on layers 0, 1, 2, full on 3, and so on (llama.cpp's load_swa_pattern(ml, 4) default).
constexpr std::uint32_t kSlidingPattern = 4;

// arch_flags' entry for attention_bias true.
constexpr std::string_view kBiasFlag = "attention_bias";
constexpr std::array<std::string_view, 4> kBiases = {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias",
                                                     "self_attn.o_proj.bias"};

// `name` is {prefix}layers.N.self_attn.{q,k,v,o}_proj.bias.
bool is_attention_bias(const ModelConfig& c, std::string_view name) {
  const std::string layers = c.weights_prefix + "layers.";
  if (!name.starts_with(layers)) return false;
  name.remove_prefix(layers.size());
  const std::size_t digits = name.find_first_not_of("0123456789");
  if (digits == 0 || digits == std::string_view::npos || name[digits] != '.') return false;
  name.remove_prefix(digits + 1);
  return std::find(kBiases.begin(), kBiases.end(), name) != kBiases.end();
}

// Architecture::left_out: an attention bias (attention_bias true) whose every value is zero; any other
// value is refused naming the tensor, as llama.cpp's converter refuses it.
Result<bool> left_out(const ModelConfig& c, const TensorFile& weights, const TensorEntry& e) {
  if (std::find(c.arch_flags.begin(), c.arch_flags.end(), kBiasFlag) == c.arch_flags.end() || !is_attention_bias(c, e.name)) return false;
  if (e.shape.size() != 1 || type_info(e.type).cls != TypeClass::Float) {
    return Error(ErrorKind::NotSupported, "an attention bias must be a vector of floats (llama.cpp's cohere2 leaves out zero ones)")
        .with_file(weights.name())
        .with_tensor(e.name);
  }
  SW_ASSIGN_OR_RETURN(std::vector<float> values, read_floats(e));
  if (std::any_of(values.begin(), values.end(), [](float v) { return v != 0.0f; })) {
    return Error(ErrorKind::NotSupported,
                 "attention bias is not zero: llama.cpp's cohere2 architecture has no attention biases (its converter leaves out only zero ones)")
        .with_file(weights.name())
        .with_tensor(e.name);
  }
  return true;
}

Status check(const JsonFile& file, ModelConfig& c) {
  auto refuse = [&](const std::string& what) { return Error(ErrorKind::NotSupported, what).with_file(file.path()); };
  const std::uint32_t head_dim = c.hidden_size / c.num_attention_heads;
  if (c.head_dim && *c.head_dim != head_dim) {
    return refuse("key `head_dim` is not hidden_size / num_attention_heads: llama.cpp's cohere2 architecture sizes heads so");
  }
  SW_ASSIGN_OR_RETURN(auto rotary_pct, file.positive(file.root(), "rotary_pct"));
  if (rotary_pct && *rotary_pct != 1.0) return refuse("key `rotary_pct` is not 1: transformers' Cohere2 rotates whole heads");
  SW_RETURN_IF_ERROR(gemma::check_common(file, c, kSlidingPattern));
  SW_ASSIGN_OR_RETURN(auto bias, file.boolean(file.root(), "attention_bias"));
  if (bias.value_or(false)) c.arch_flags.emplace_back(std::string(kBiasFlag));
  SW_RETURN_IF_ERROR(cohere::check_common(file, c, /*zero_biases_left_out=*/true));
  c.arch_kv.push_back({"cohere2.vocab_size", MetaValue::u32(c.vocab_size)});
  c.arch_kv.push_back({"cohere2.rope.dimension_count", MetaValue::u32(head_dim)});
  return Status::ok();
}

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(cohere2) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "cohere2",
                                      .base = LayerBase::None,
                                      .layer = cohere::kLayer,
                                      .tied_output = true,
                                      .check = check,
                                      .norm = Norm::LayerNormNoBias,
                                      .left_out = left_out};
  return kArch;
}

}  // namespace safeweights::hf
