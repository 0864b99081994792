// OLMo 2 (llama.cpp's "olmo2", convert_hf_to_gguf.py's Olmo2Model): no norm before attention or MLP,
// RMS norms after each (post_attention_layernorm -> post_attention_norm, post_feedforward_layernorm ->
// post_ffw_norm), RMS norms of the whole query and key projections (not of each head: [heads * head]
// and [kv heads * head]), NEOX rope (no permutation), no biases.
#include <array>

#include "hf/arch.h"
#include "hf/config_rules.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"Olmo2ForCausalLM"};

constexpr std::array<TensorRule, 11> kLayer = {{
    rows::q(Permute::None),
    rows::k(Permute::None),
    rows::kV,
    rows::kO,
    {"self_attn.q_norm.weight", "attn_q_norm.weight", Dim::QRows, Dim::None, Permute::None, true},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", Dim::KvRows, Dim::None, Permute::None, true},
    rows::kPostAttentionNorm,
    rows::kGate,
    rows::kUp,
    rows::kDown,
    rows::kPostFeedforwardNorm,
}};
// llama.cpp's olmo2 loader sizes attn_q_norm by the embedding width: a head_dim that makes the query
// projection another width cannot load. A sliding window is OLMo 3's (another class).
Status check(const JsonFile& file, ModelConfig& c) {
  SW_RETURN_IF_ERROR(refuse_true(file, "olmo2", {"attention_bias"}));
  if (c.head_dim && std::uint64_t{*c.head_dim} * c.num_attention_heads != c.hidden_size) {
    return refuse_key(file, "head_dim", "times num_attention_heads is not hidden_size: llama.cpp's olmo2 architecture needs them equal");
  }
  if (JsonFile::member(file.root(), "sliding_window")) {
    return refuse_key(file, "sliding_window", "is set: OLMo 2 has no sliding-window attention (OLMo 3 is another architecture)");
  }
  return Status::ok();
}

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(olmo2) {
  static constexpr Architecture kArch{.classes = kClasses, .name = "olmo2", .base = LayerBase::None, .layer = kLayer, .check = check};
  return kArch;
}

}  // namespace safeweights::hf
