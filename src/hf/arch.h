// The architectures the Hugging Face -> GGUF plan knows: each a table in src/hf/arch_<name>.cpp (the
// transformers classes it converts, llama.cpp's architecture name, the per-layer tensors with their
// llama.cpp names, shapes and permutations, and the config keys it understands) over the one plan in
// plan.cpp. Internal to src/hf. The facts are llama.cpp's: convert_hf_to_gguf.py, gguf-py's
// constants.py / tensor_mapping.py (gguf 0.19) and its loader.
//
// Thread safety: constant tables.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "safeweights/error.h"

namespace safeweights::hf {

class JsonFile;
struct ModelConfig;

// Which head count permutes a tensor's rows into llama.cpp's interleaved rotary layout (only for
// architectures whose llama.cpp rope is the "normal" one, as Llama's; NEOX-rope ones keep
// transformers' layout).
enum class Permute { None, Heads, KvHeads };

// A dimension config.json implies: a tensor's shape is checked against it.
enum class Dim { None, Hidden, QRows, KvRows, Inter, HeadDim, QkvRows, Inter2 };  // QkvRows: q, k, v fused; Inter2: gate and up fused

struct TensorRule {
  std::string_view hf;    // after "model.layers.N."
  std::string_view gguf;  // after "blk.N."
  Dim rows;               // shape [rows, cols], or [rows] when cols is None
  Dim cols;
  Permute permute;
  bool required;
};

// The rows the tables share: a layer's norms, projections and MLP, as transformers and llama.cpp name
// them (q and k take the permutation of their architecture's rope).
namespace rows {
constexpr TensorRule kAttnNorm{"input_layernorm.weight", "attn_norm.weight", Dim::Hidden, Dim::None, Permute::None, true};
constexpr TensorRule q(Permute p) { return {"self_attn.q_proj.weight", "attn_q.weight", Dim::QRows, Dim::Hidden, p, true}; }
constexpr TensorRule k(Permute p) { return {"self_attn.k_proj.weight", "attn_k.weight", Dim::KvRows, Dim::Hidden, p, true}; }
constexpr TensorRule kV{"self_attn.v_proj.weight", "attn_v.weight", Dim::KvRows, Dim::Hidden, Permute::None, true};
constexpr TensorRule kO{"self_attn.o_proj.weight", "attn_output.weight", Dim::Hidden, Dim::QRows, Permute::None, true};
constexpr TensorRule kFfnNorm{"post_attention_layernorm.weight", "ffn_norm.weight", Dim::Hidden, Dim::None, Permute::None, true};
constexpr TensorRule kGate{"mlp.gate_proj.weight", "ffn_gate.weight", Dim::Inter, Dim::Hidden, Permute::None, true};
constexpr TensorRule kUp{"mlp.up_proj.weight", "ffn_up.weight", Dim::Inter, Dim::Hidden, Permute::None, true};
constexpr TensorRule kDown{"mlp.down_proj.weight", "ffn_down.weight", Dim::Hidden, Dim::Inter, Permute::None, true};
// Every architecture's layer so far starts with these (q and k permuted as the architecture says).
constexpr std::array<TensorRule, 9> llama_layer(bool permute_qk) {
  return {kAttnNorm, q(permute_qk ? Permute::Heads : Permute::None), k(permute_qk ? Permute::KvHeads : Permute::None), kV, kO, kFfnNorm, kGate, kUp,
          kDown};
}
constexpr TensorRule kPostAttentionNorm{"post_attention_layernorm.weight", "post_attention_norm.weight", Dim::Hidden, Dim::None, Permute::None, true};
constexpr TensorRule kPreFeedforwardNorm{"pre_feedforward_layernorm.weight", "ffn_norm.weight", Dim::Hidden, Dim::None, Permute::None, true};
constexpr TensorRule kPostFeedforwardNorm{"post_feedforward_layernorm.weight", "post_ffw_norm.weight", Dim::Hidden, Dim::None, Permute::None, true};
constexpr std::array<TensorRule, 11> gemma_layer() {
  return {kAttnNorm, q(Permute::None), k(Permute::None), kV, kO, kPostAttentionNorm, kPreFeedforwardNorm, kPostFeedforwardNorm, kGate, kUp, kDown};
}
}  // namespace rows

// How the layer's tensors start: Llama's nine (rows::llama_layer) with q and k permuted for llama.cpp's
// interleaved rope, the same nine unpermuted (NEOX-rope architectures keep transformers' layout), or
// Gemma's eleven (rows::gemma_layer: Llama's with post-attention, pre- and post-MLP norms), or none
// (the table lists every tensor).
enum class LayerBase { LlamaPermuted, Llama, Gemma, None };

struct Architecture {
  std::span<const std::string_view> classes;  // config.json "architectures" entries it converts
  std::string_view name;                      // general.architecture and the prefix of its keys
  LayerBase base;
  std::span<const TensorRule> layer;  // the layer's other tensors; anything not listed is refused
  // The MLP's activation as transformers names it (hidden_act / hidden_activation): any other is refused.
  std::string_view activation = "silu";
  // LlamaModel's extra keys: {arch}.vocab_size and rope.dimension_count (other architectures leave
  // them to the loader's defaults).
  bool llama_keys = false;
  bool llama3_rope = false;  // llama3 rope scaling, as llama.cpp's rope_freqs tensor
  bool longrope = false;     // Phi-3's longrope, as llama.cpp's rope_factors_long / _short tensors
  // Gemma: RMS norms scale by (1 + weight), which llama.cpp's converter writes as weight + 1.
  bool norms_plus_one = false;
  // Gemma: the output is always the embedding; lm_head.weight, when saved, is dropped (as llama.cpp's
  // converter drops it) and tie_word_embeddings false is refused.
  bool tied_output = false;
  // tokenizer.ggml.add_space_prefix for a tokenizer.model, as llama.cpp's converter writes it for the
  // architecture (Gemma: false); unset: tokenizer_config.json's add_prefix_space, when given.
  std::optional<bool> spm_space_prefix = std::nullopt;
  // Gemma 3: transformers 5's rope_parameters per layer type ("full_attention", "sliding_attention").
  bool layer_type_rope = false;
  // Reads and checks the config keys only this architecture has (sliding windows, soft-capping, ...),
  // adding llama.cpp's keys for them to ModelConfig::arch_kv; nullptr: none.
  Status (*check)(const JsonFile& config, ModelConfig& out) = nullptr;
};

// The architecture that converts `hf_class`, or nullptr.
const Architecture* find_architecture(std::string_view hf_class);
// Every class converted, for messages ("LlamaForCausalLM, MistralForCausalLM, ...").
std::string supported_classes();

// The architectures, in the order messages list them: each NAME is a table in src/hf/arch_NAME.cpp,
// defined as `const Architecture& NAME_architecture()`. A new architecture is its file, one entry here
// and its line in CMakeLists.txt; the lookup (arch_registry.cpp) and the declarations below follow.
#define SAFEWEIGHTS_HF_ARCHITECTURES(X) X(llama) X(qwen2) X(qwen3) X(gemma2) X(gemma3) X(phi3)

#define SAFEWEIGHTS_HF_DECLARE(name) const Architecture& name##_architecture();
SAFEWEIGHTS_HF_ARCHITECTURES(SAFEWEIGHTS_HF_DECLARE)
#undef SAFEWEIGHTS_HF_DECLARE

}  // namespace safeweights::hf
