// What the Qwen architectures share (arch_qwen2.cpp, arch_qwen3.cpp, arch_qwen3moe.cpp, arch_qwen2moe.cpp,
// arch_qwen35moe.cpp): their config rules and the shared expert. Internal to src/hf.
//
// Thread safety: pure functions.
#pragma once

#include <array>

#include "hf/arch.h"

namespace safeweights::hf {

// Qwen's shared expert (Qwen2-MoE, Qwen3.5-MoE): an MLP of shared_expert_intermediate_size scaled by
// the sigmoid of its own gate (shared_expert_gate, kept F32 as llama.cpp keeps FFN_GATE_INP_SHEXP).
inline constexpr std::array<TensorRule, 4> kQwenSharedExpert = {{
    {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight", Dim::SharedInter, Dim::Hidden, Permute::None, true},
    {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight", Dim::SharedInter, Dim::Hidden, Permute::None, true},
    {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight", Dim::Hidden, Dim::SharedInter, Permute::None, true},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", Dim::One, Dim::Hidden, Permute::None, true, true},
}};

// Qwen's sliding window (use_sliding_window true) is refused: llama.cpp's qwen architectures attend to
// the whole context.
Status check_qwen_sliding_window(const JsonFile& file, ModelConfig& c);

}  // namespace safeweights::hf
