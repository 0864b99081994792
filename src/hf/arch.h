// What an architecture the Hugging Face -> GGUF plan knows is: a table (the transformers classes it
// converts, llama.cpp's architecture name, the per-layer tensors with their llama.cpp names, shapes and
// permutations, its mixture of experts, the config keys it understands) over the one plan in plan.cpp,
// plus a small hook where the math needs code. Internal to src/hf. The facts are llama.cpp's:
// convert_hf_to_gguf.py and its conversion/ package, gguf-py's constants.py / tensor_mapping.py, and its
// loader (src/llama-model.cpp, src/models/*.cpp).
//
// Where a new architecture goes: src/hf/arch_<id>.cpp, one file, whose table is registered with
// SAFEWEIGHTS_HF_ARCHITECTURE(<id>) (below). The build finds the file by its name and lists it; nothing
// else is edited. Shared families are tables the others extend: rows:: (Llama's attention and MLP),
// arch_gemma.h (Gemma's norms and rules), hf/moe.h (experts).
//
// Thread safety: constant tables.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/tensor_file.h"

namespace safeweights::hf {

class JsonFile;
class WithGenerated;
struct ModelConfig;
struct MoeTable;
struct LayerExperts;
class WithGenerated;
struct NextnLayout;
struct TextModelNames;

// Which head count permutes a tensor's rows into llama.cpp's interleaved rotary layout (only for
// architectures whose llama.cpp rope is the "normal" one, as Llama's; NEOX-rope ones keep
// transformers' layout).
enum class Permute { None, Heads, KvHeads };

// A dimension config.json implies: a tensor's shape is checked against it. QkvRows: q, k, v fused;
// Inter2: gate and up fused; SharedInter: a shared expert's MLP width; One: 1 (a shared expert's gate).
// (The experts' own shapes are hf/moe.h's.)
enum class Dim { None, Hidden, QRows, KvRows, Inter, HeadDim, QkvRows, Inter2, SharedInter, One };

struct TensorRule {
  std::string_view hf;    // after "model.layers.N."
  std::string_view gguf;  // after "blk.N."
  Dim rows;               // shape [rows, cols], or [rows] when cols is None
  Dim cols;
  Permute permute;
  bool required;
  bool f32 = false;  // kept F32 at any --type, as llama.cpp keeps routers (its converter's list)
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
// Llama's attention half of a layer (q and k permuted as the architecture says) and its dense MLP.
constexpr std::array<TensorRule, 6> llama_attention(bool permute_qk) {
  return {kAttnNorm, q(permute_qk ? Permute::Heads : Permute::None), k(permute_qk ? Permute::KvHeads : Permute::None), kV, kO, kFfnNorm};
}
constexpr std::array<TensorRule, 3> kDenseMlp = {kGate, kUp, kDown};
// Qwen2's biases of q, k and v, which llama.cpp's qwen2 and qwen2moe require.
constexpr std::array<TensorRule, 3> kQkvBias = {{
    {"self_attn.q_proj.bias", "attn_q.bias", Dim::QRows, Dim::None, Permute::None, true},
    {"self_attn.k_proj.bias", "attn_k.bias", Dim::KvRows, Dim::None, Permute::None, true},
    {"self_attn.v_proj.bias", "attn_v.bias", Dim::KvRows, Dim::None, Permute::None, true},
}};
// RMS norms of each query and key head (Qwen3, Gemma 3).
constexpr std::array<TensorRule, 2> kQkNorm = {{
    {"self_attn.q_norm.weight", "attn_q_norm.weight", Dim::HeadDim, Dim::None, Permute::None, true},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", Dim::HeadDim, Dim::None, Permute::None, true},
}};
constexpr TensorRule kPostAttentionNorm{"post_attention_layernorm.weight", "post_attention_norm.weight", Dim::Hidden, Dim::None, Permute::None, true};
constexpr TensorRule kPreFeedforwardNorm{"pre_feedforward_layernorm.weight", "ffn_norm.weight", Dim::Hidden, Dim::None, Permute::None, true};
constexpr TensorRule kPostFeedforwardNorm{"post_feedforward_layernorm.weight", "post_ffw_norm.weight", Dim::Hidden, Dim::None, Permute::None, true};
// Gemma's attention half: Llama's with post-attention, pre- and post-MLP norms.
constexpr std::array<TensorRule, 8> gemma_attention() {
  return {kAttnNorm, q(Permute::None), k(Permute::None), kV, kO, kPostAttentionNorm, kPreFeedforwardNorm, kPostFeedforwardNorm};
}
// LayerNorm's biases beside the norms' weights (StarCoder2, StableLM; Falcon, GPT-2 later).
constexpr TensorRule kAttnNormBias{"input_layernorm.bias", "attn_norm.bias", Dim::Hidden, Dim::None, Permute::None, true};
constexpr TensorRule kFfnNormBias{"post_attention_layernorm.bias", "ffn_norm.bias", Dim::Hidden, Dim::None, Permute::None, true};
constexpr TensorRule kOBias{"self_attn.o_proj.bias", "attn_output.bias", Dim::Hidden, Dim::None, Permute::None, true};
// The plain two-matrix GELU MLP (c_fc up, c_proj down) with its biases, as StarCoder2 names it.
constexpr std::array<TensorRule, 4> kGeluMlp = {{
    {"mlp.c_fc.weight", "ffn_up.weight", Dim::Inter, Dim::Hidden, Permute::None, true},
    {"mlp.c_fc.bias", "ffn_up.bias", Dim::Inter, Dim::None, Permute::None, true},
    {"mlp.c_proj.weight", "ffn_down.weight", Dim::Hidden, Dim::Inter, Permute::None, true},
    {"mlp.c_proj.bias", "ffn_down.bias", Dim::Hidden, Dim::None, Permute::None, true},
}};
}  // namespace rows

// How the layer's tensors start: Llama's attention (rows::llama_attention) with q and k permuted for
// llama.cpp's interleaved rope, the same unpermuted (NEOX-rope architectures keep transformers'
// layout), Gemma's (rows::gemma_attention), or none (the table lists every tensor). Then the MLP: the
// dense one (rows::kDenseMlp) for Llama and Gemma, or the mixture of experts of Architecture::moe.
enum class LayerBase { LlamaPermuted, Llama, Gemma, None };

// The model's norms: RMS (its epsilon {arch}.attention.layer_norm_rms_epsilon), or LayerNorm (its
// epsilon {arch}.attention.layer_norm_epsilon, from layer_norm_eps / layer_norm_epsilon /
// norm_epsilon), with biases (the final norm's is output_norm.bias) or without.
enum class Norm { Rms, LayerNorm, LayerNormNoBias };

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
  // A mixture of experts in place of the dense MLP (hf/moe.h); nullptr: dense.
  const MoeTable* moe = nullptr;
  // Reads and checks the config keys only this architecture has (sliding windows, soft-capping, ...),
  // adding llama.cpp's keys for them to ModelConfig::arch_kv; nullptr: none.
  Status (*check)(const JsonFile& config, ModelConfig& out) = nullptr;
  // Plans a layer's experts in place of hf/moe.h's plan_experts, where their layout needs code (gpt-oss's
  // transposed and MXFP4 experts, computed by hf/expert_views.h), and the layer's tensors the table has no
  // Dim for (gpt-oss's sinks, one per head); nullptr: plan_experts.
  Status (*plan_experts)(LayerExperts& layer) = nullptr;
  // Plans what the table cannot say of layer `n`, after the table's rows (DeepSeek's latent attention,
  // StableLM's per-head norms stacked into one, tensors a config switch requires); tensors computed from
  // the weights go to `generated`; `names` says where the text model's weights are (hf/multimodal.h).
  // nullptr: none.
  Status (*plan_layer)(const ModelConfig& c, const TextModelNames& names, const TensorFile& weights, WithGenerated& generated, std::uint32_t n,
                       std::vector<ConvertTensor>& out) = nullptr;
  // Layers past num_hidden_layers (multi-token prediction) are left out, as llama.cpp's converter drops them.
  bool drops_extra_layers = false;
  Norm norm = Norm::Rms;  // RMS norms or LayerNorm (its epsilon's key, output_norm.bias)
  // Plans layer `n`'s attention half itself (hybrid models: Qwen3.5's linear or gated full attention,
  // as config.json's layer_types says), after the base's rows (`names`: as plan_layer's); nullptr: none.
  Status (*plan_attention)(const ModelConfig& c, const TextModelNames& names, std::uint32_t n, const TensorFile& weights,
                           std::vector<ConvertTensor>& out) = nullptr;
  // Replaces planned tensors by ones computed from the weights (Qwen3.5's -exp(A_log)), after planning.
  Status (*computed)(const ModelConfig& c, const TensorFile& weights, std::vector<ConvertTensor>& plan, WithGenerated& generated) = nullptr;
  // config.json may omit intermediate_size (Qwen3.5-MoE has experts only): no feed_forward_length then.
  bool optional_intermediate = false;
  // partial_rotary_factor below 1 is read (the architecture's check writes rope.dimension_count).
  bool partial_rotary = false;
  // Another activation name transformers computes as `activation` (Gemma 1's legacy "gelu"); empty: none.
  std::string_view activation_alias = {};
  // The eot token id llama.cpp's converter writes whatever the vocabulary (Gemma 1's 107); unset: none.
  std::optional<std::uint32_t> eot_token_id = std::nullopt;
  // Keys of the rope object (rope_parameters / rope_scaling) that `check` reads and maps itself.
  std::span<const std::string_view> rope_keys = {};
  // Classes among `classes` whose folder is multimodal: the text model is converted (hf/multimodal.h).
  std::span<const std::string_view> multimodal = {};
  // Rope types beyond the common ones that `check` maps itself (Gemma 4's "proportional"), without keys of their own.
  std::span<const std::string_view> rope_types = {};
  // tokenizer.json's byte_fallback BPE written as this llama.cpp tokenizer model with its merges (Gemma 4's
  // "gemma4", hf/vocab.cpp); empty: as llama.cpp's SentencePiece tokenizer.
  std::string_view bpe_tokenizer_model = {};
  // config.json's count of next-token-prediction layers kept past num_hidden_layers (hf/nextn.h); empty: none.
  std::string_view nextn_key = {};
  // Next-token layers saved apart from model.layers (Qwen's mtp.*, hf/nextn.h); nullptr: as model.layers.N.
  const NextnLayout* nextn_layout = nullptr;
};

// `hf` must be among `weights` with `shape` (what config.json implies): TensorNotFound naming it (and
// `gguf`, what llama.cpp needs it for) when absent, InvalidModelFolder when its shape differs.
Status expect_tensor(const TensorFile& weights, const std::string& hf, const std::string& gguf, std::span<const std::uint64_t> shape);

// The tensor `rule` of a layer (`hf`: "model.layers.N.", `gg`: "blk.N.") appended to `out` as the plan
// adds the table's rows: its shape from config.json, checked (expect_tensor); absent and not required,
// left out. For Architecture::more_tensors.
Status add_rule(const ModelConfig& c, const TensorFile& weights, const TensorRule& rule, const std::string& hf, const std::string& gg,
                std::vector<ConvertTensor>& out);

// The architecture that converts `hf_class`, or nullptr.
const Architecture* find_architecture(std::string_view hf_class);
// Every class converted, for messages ("LlamaForCausalLM, MistralForCausalLM, ...").
std::string supported_classes();

// Registers an architecture: `SAFEWEIGHTS_HF_ARCHITECTURE(qwen3moe) { static constexpr Architecture
// k{...}; return k; }` in src/hf/arch_qwen3moe.cpp. The build lists every src/hf/arch_<id>.cpp
// (CMakeLists.txt's glob, into hf/architectures.inc) and the lookup (architectures.cpp) calls each
// function by name: a static registrar object would be dropped from the static library, whose linker
// keeps only the object files something refers to.
#define SAFEWEIGHTS_HF_ARCHITECTURE(id) const ::safeweights::hf::Architecture& safeweights_hf_architecture_##id()

}  // namespace safeweights::hf
