// Hybrid attention: Gated DeltaNet linear-attention layers beside gated full-attention layers (Qwen3.5,
// Qwen3.5-MoE and Qwen3-Next, llama.cpp's qwen35 / qwen35moe / qwen3next): their config.json keys, each layer's attention half, and
// the tensors llama.cpp's converter computes from the weights. The facts are llama.cpp's conversion/qwen.py
// (Qwen3NextModel, _LinearAttentionVReorderBase, _Qwen35MRopeMixin) and its loader (src/models/qwen35*.cpp).
//
// Value heads (Qwen3.5 only: llama.cpp's qwen3next keeps transformers' order): transformers groups them by key head (key head g's r value heads together); llama.cpp's
// graph broadcasts key heads tiled, so its converter reorders every value-head axis to the tiled order
// (value head j of every key head, then j + 1): rows of in_proj_qkv's V part, in_proj_z, in_proj_a,
// in_proj_b, dt_bias, A_log and conv1d's V channels, and out_proj's columns. The big matrices are
// reordered as plan pieces (streamed); A_log (-exp) and conv1d (squeezed, kept F32) are computed.
//
// Internal to src/hf. Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "hf/arch.h"
#include "hf/hf_files.h"

namespace safeweights::hf {

// Architecture::check (Qwen3-Next): reads the linear-attention keys (linear_*, layer_types,
// full_attention_interval, the rotary fraction) into c.linear and llama.cpp's keys for them into
// c.arch_kv; NotSupported naming a key llama.cpp would compute otherwise (attention_bias, value heads
// narrower or wider than key heads), InvalidModelFolder for a malformed one.
Status read_linear_attention(const JsonFile& file, ModelConfig& c);
// The same for Qwen3.5: value heads reordered, and llama.cpp's rope.dimension_sections written.
Status read_qwen35_linear_attention(const JsonFile& file, ModelConfig& c);

// After the next-token layers are counted (hf/nextn.h): c.linear->recurrent and {arch}.attention.recurrent_layers
// padded with false (full attention) for them, as llama.cpp's converter pads the list.
void pad_recurrent_layers(ModelConfig& c);

// Architecture::plan_attention: layer n's linear attention (linear_attn.*: Qwen3.5's in_proj_qkv, _z, _b,
// _a, or Qwen3-Next's fused in_proj_qkvz and in_proj_ba) or gated full attention (self_attn.*, q_proj
// holding each head's query and gate), as layer_types says; a next-token layer is full attention.
Status plan_hybrid_attention(const ModelConfig& c, const TextModelNames& names, std::uint32_t n, const TensorFile& weights,
                             std::vector<ConvertTensor>& out);

// Architecture::computed: ssm_a as -exp(A_log) and ssm_conv1d as conv1d.weight [C, 1, K] squeezed to
// [C, K], both with their value heads reordered, computed in float32 as transformers computes them.
Status compute_linear_attention(const ModelConfig& c, const TensorFile& weights, std::vector<ConvertTensor>& plan, WithGenerated& generated);

}  // namespace safeweights::hf
