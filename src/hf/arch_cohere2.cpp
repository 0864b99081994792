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
#include "hf/multimodal.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"Cohere2ForCausalLM"};

// Sliding on layers 0, 1, 2, full on 3, and so on (llama.cpp's load_swa_pattern(ml, 4) default).
constexpr std::uint32_t kSlidingPattern = 4;

// arch_flags' entry for attention_bias true.
constexpr std::string_view kBiasFlag = "attention_bias";
constexpr std::array<std::string_view, 4> kBiases = {"q_proj.bias", "k_proj.bias", "v_proj.bias", "o_proj.bias"};

bool has_biases(const ModelConfig& c) { return std::find(c.arch_flags.begin(), c.arch_flags.end(), kBiasFlag) != c.arch_flags.end(); }

// attention_bias true: layer n's attention biases that are there, planned (so that they count as taken)
// until compute_left_out leaves them out. Absent ones are what transformers starts at zero.
Status plan_biases(const ModelConfig& c, const TextModelNames& names, const TensorFile& weights, WithGenerated&, std::uint32_t n,
                   std::vector<ConvertTensor>& out) {
  if (!has_biases(c)) return Status::ok();
  const std::string hf = names.prefix + "layers." + std::to_string(n) + ".self_attn.";
  const std::uint64_t head_dim = c.hidden_size / c.num_attention_heads;
  const std::uint64_t kv_rows = c.num_key_value_heads.value_or(c.num_attention_heads) * head_dim;
  const std::array<std::uint64_t, 4> rows = {c.hidden_size, kv_rows, kv_rows, c.hidden_size};
  for (std::size_t i = 0; i < kBiases.size(); ++i) {
    const std::string name = hf + std::string(kBiases[i]);
    if (!weights.find(name)) continue;
    const std::vector<std::uint64_t> shape = {rows[i]};
    SW_RETURN_IF_ERROR(expect_tensor(weights, name, name, shape));
    out.push_back({.source = name, .name = name});
  }
  return Status::ok();
}

// Architecture::computed: the planned attention biases left out when every value is zero (they compute
// nothing), any other value refused naming the tensor, as llama.cpp's converter refuses it.
Status compute_left_out(const ModelConfig& c, const TensorFile& weights, std::vector<ConvertTensor>& plan, WithGenerated&) {
  if (!has_biases(c)) return Status::ok();
  for (const ConvertTensor& t : plan) {
    if (t.name != t.source) continue;  // a bias plan_biases took, under its own name (no GGUF name is a transformers name)
    SW_ASSIGN_OR_RETURN(std::vector<float> values, read_floats(*weights.find(t.source)));
    if (std::any_of(values.begin(), values.end(), [](float v) { return v != 0.0f; })) {
      return Error(ErrorKind::NotSupported,
                   "attention bias is not zero: llama.cpp's cohere2 architecture has no attention biases (its converter leaves out only "
                   "zero ones)")
          .with_file(weights.name())
          .with_tensor(t.source);
    }
  }
  std::erase_if(plan, [](const ConvertTensor& t) { return t.name == t.source; });
  return Status::ok();
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
                                      .plan_layer = plan_biases,
                                      .norm = Norm::LayerNormNoBias,
                                      .computed = compute_left_out};
  return kArch;
}

}  // namespace safeweights::hf
