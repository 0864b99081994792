// Multi-head latent attention (DeepSeek's MLA) as llama.cpp's deepseek2 architecture stores it: the
// config keys that shape it (read_mla) and the plan of one layer's attention (plan_mla_attention),
// with kv_b_proj split into attn_k_b (each head's key part transposed) and attn_v_b (each head's value
// part), as llama.cpp's converter splits it for its absorbed-attention graph. Internal to src/hf; the
// facts are llama.cpp's (conversion/deepseek.py, DeepseekV2Model; src/models/deepseek2.cpp).
//
// Thread safety: pure functions; the computed tensors' sources are immutable.
#pragma once

#include <string>
#include <vector>

#include "hf/arch.h"
#include "hf/generated.h"
#include "hf/hf_files.h"
#include "safeweights/error.h"
#include "safeweights/tensor_file.h"

namespace safeweights::hf {

// Reads q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim into `c.mla`, with
// llama.cpp's keys for them in `c.arch_kv` (MLA is stored as one key/value head of kv_lora_rank +
// qk_rope_head_dim: head_count_kv 1). NotSupported naming the key for what llama.cpp computes otherwise
// (rope_interleave false, num_key_value_heads other than num_attention_heads); InvalidModelFolder for
// missing or inconsistent sizes.
Status read_mla(const JsonFile& file, ModelConfig& c);

// The attention tensors of one layer (`hf` "model.layers.N.", `gg` "blk.N."), appended to `out`; the
// transposed key parts of kv_b_proj are computed as they are read (added to `generated`, nothing held).
// TensorNotFound / InvalidModelFolder (expect_tensor) for a missing or misshapen tensor, NotSupported for
// a kv_b_proj of a block type.
Status plan_mla_attention(const ModelConfig& c, const TensorFile& weights, WithGenerated& generated, const std::string& hf, const std::string& gg,
                          std::vector<ConvertTensor>& out);

}  // namespace safeweights::hf
