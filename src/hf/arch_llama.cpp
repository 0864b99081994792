// Llama and Mistral (llama.cpp's "llama": convert_hf_to_gguf.py registers MistralForCausalLM on
// LlamaModel). Q and K rows are permuted for llama.cpp's interleaved rope; biases are optional
// (attention_bias, mlp_bias), as llama.cpp's loader has them.
#include <array>

#include "hf/arch.h"
#include "hf/arch_llama.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 2> kClasses = {"LlamaForCausalLM", "MistralForCausalLM"};

constexpr std::array<TensorRule, 7> kLayer = {{
    {"self_attn.q_proj.bias", "attn_q.bias", Dim::QRows, Dim::None, Permute::Heads, false},
    {"self_attn.k_proj.bias", "attn_k.bias", Dim::KvRows, Dim::None, Permute::KvHeads, false},
    {"self_attn.v_proj.bias", "attn_v.bias", Dim::KvRows, Dim::None, Permute::None, false},
    {"self_attn.o_proj.bias", "attn_output.bias", Dim::Hidden, Dim::None, Permute::None, false},
    {"mlp.gate_proj.bias", "ffn_gate.bias", Dim::Inter, Dim::None, Permute::None, false},
    {"mlp.up_proj.bias", "ffn_up.bias", Dim::Inter, Dim::None, Permute::None, false},
    {"mlp.down_proj.bias", "ffn_down.bias", Dim::Hidden, Dim::None, Permute::None, false},
}};

}  // namespace

Status check_llama_sliding_window(const JsonFile& file, ModelConfig& c) {
  SW_ASSIGN_OR_RETURN(auto window, file.count(file.root(), "sliding_window"));
  if (window && c.max_position_embeddings && *window < *c.max_position_embeddings) {
    return Error(ErrorKind::NotSupported, "key `sliding_window` (" + std::to_string(*window) +
                                              ") is below max_position_embeddings: llama.cpp's llama architecture has no sliding-window attention")
        .with_file(file.path());
  }
  return Status::ok();
}

SAFEWEIGHTS_HF_ARCHITECTURE(llama) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "llama",
                                      .base = LayerBase::LlamaPermuted,
                                      .layer = kLayer,
                                      .llama_keys = true,
                                      .llama3_rope = true,
                                      .check = check_llama_sliding_window};
  return kArch;
}

}  // namespace safeweights::hf
