// Phi-3 (llama.cpp's "phi3", Phi3MiniModel): q, k and v in one matrix (qkv_proj -> attn_qkv), gate and
// up in one (gate_up_proj -> ffn_up, which llama.cpp splits itself), NEOX rope, no sliding window
// (attention.sliding_window 0), and longrope as llama.cpp's rope_factors_long / rope_factors_short
// tensors with rope.scaling.attn_factor. llama.cpp picks the long factors when the context it runs
// with exceeds original_max_position_embeddings; transformers when the sequence does.
#include <array>

#include "hf/arch.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"Phi3ForCausalLM"};

constexpr std::array<TensorRule, 6> kLayer = {{
    rows::kAttnNorm,
    {"self_attn.qkv_proj.weight", "attn_qkv.weight", Dim::QkvRows, Dim::Hidden, Permute::None, true},
    rows::kO,
    rows::kFfnNorm,
    {"mlp.gate_up_proj.weight", "ffn_up.weight", Dim::Inter2, Dim::Hidden, Permute::None, true},
    rows::kDown,
}};

Status check(const JsonFile& file, ModelConfig& c) {
  const std::uint32_t head_dim = c.head_dim.value_or(c.hidden_size / c.num_attention_heads);
  SW_ASSIGN_OR_RETURN(auto original, file.count(file.root(), "original_max_position_embeddings"));
  if (c.rope.type == "longrope") original = c.rope.original_max_position_embeddings;
  if (original) c.arch_kv.push_back({"phi3.rope.scaling.original_context_length", MetaValue::u32(*original)});
  c.arch_kv.push_back({"phi3.rope.dimension_count", MetaValue::u32(head_dim)});
  // A sliding window that binds: llama.cpp's phi3 gives other logits than transformers' (the client
  // test measured 0.6 of the largest logit with a window of 4), so only 0 (none) is written.
  SW_ASSIGN_OR_RETURN(auto window, file.count(file.root(), "sliding_window"));
  if (window && c.max_position_embeddings && *window < *c.max_position_embeddings) {
    return Error(ErrorKind::NotSupported, "key `sliding_window` (" + std::to_string(*window) +
                                              ") is below max_position_embeddings: llama.cpp's phi3 does not slide as transformers does")
        .with_file(file.path());
  }
  c.arch_kv.push_back({"phi3.attention.sliding_window", MetaValue::u32(0)});
  if (c.rope.type == "longrope") {
    c.arch_kv.push_back({"phi3.rope.scaling.attn_factor", MetaValue::f32(static_cast<float>(*c.rope.attention_factor))});
  }
  return Status::ok();
}

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(phi3) {
  static constexpr Architecture kArch{
      .classes = kClasses, .name = "phi3", .base = LayerBase::None, .layer = kLayer, .longrope = true, .check = check};
  return kArch;
}

}  // namespace safeweights::hf
