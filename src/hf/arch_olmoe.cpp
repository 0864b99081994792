// OLMoE (llama.cpp's "olmoe", OlmoeModel): Llama's attention with NEOX rope and RMS norms over the whole
// query and key projections (q_norm [heads x head size], k_norm [kv heads x head size]: llama.cpp's
// loader sizes both by the embedding, so every head has its own key and value: no GQA), and in every
// layer num_experts experts of intermediate_size whose top num_experts_per_tok weights are not
// renormalized (llama.cpp's olmoe never does: norm_topk_prob must be false). llama.cpp's converter
// writes an RMS epsilon of 1e-5 whatever config.json says, so another one is refused. Both expert
// layouts: one tensor per expert, and transformers 5's fused experts.
#include <array>

#include "hf/arch.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"
#include "hf/moe.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"OlmoeForCausalLM"};

constexpr std::array<TensorRule, 2> kLayer = {{
    {"self_attn.q_norm.weight", "attn_q_norm.weight", Dim::QRows, Dim::None, Permute::None, true},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", Dim::KvRows, Dim::None, Permute::None, true},
}};

constexpr MoeTable kExperts{
    .block = "mlp", .expert = {"gate_proj", "up_proj", "down_proj"}, .normalizes = false, .expert_ffn_key = false, .sparse_step_keys = false};

// The epsilon llama.cpp's OlmoeModel.set_gguf_parameters writes over config.json's.
constexpr double kLlamaCppEpsilon = 1e-5;

Status check(const JsonFile& file, ModelConfig& c) {
  auto refuse = [&](std::string_view key, const std::string& why) {
    return Error(ErrorKind::NotSupported, "key " + json::quoted(key) + " " + why).with_file(file.path());
  };
  // transformers' OlmoeConfig default, when config.json leaves it out.
  if (c.rms_norm_eps.value_or(kLlamaCppEpsilon) != kLlamaCppEpsilon) {
    return refuse("rms_norm_eps", "is not 1e-05: llama.cpp's converter writes 1e-05 for olmoe whatever config.json says");
  }
  c.rms_norm_eps = kLlamaCppEpsilon;
  if (c.num_key_value_heads.value_or(c.num_attention_heads) != c.num_attention_heads) {
    return refuse("num_key_value_heads", "differs from num_attention_heads: llama.cpp's olmoe sizes k_norm by the embedding (no GQA)");
  }
  if (c.head_dim && *c.head_dim * c.num_attention_heads != c.hidden_size) {
    return refuse("head_dim", "times num_attention_heads is not hidden_size: llama.cpp's olmoe sizes q by the embedding");
  }
  if (JsonFile::member(file.root(), "clip_qkv")) return refuse("clip_qkv", "is set: llama.cpp's olmoe does not clip q, k and v");
  SW_ASSIGN_OR_RETURN(auto bias, file.boolean(file.root(), "attention_bias"));
  if (bias.value_or(false)) return refuse("attention_bias", "is true: llama.cpp's olmoe has no attention biases");
  return Status::ok();
}

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(olmoe) {
  static constexpr Architecture kArch{
      .classes = kClasses, .name = "olmoe", .base = LayerBase::Llama, .layer = kLayer, .moe = &kExperts, .check = check};
  return kArch;
}

}  // namespace safeweights::hf
