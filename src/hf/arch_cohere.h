// What Cohere and Cohere2 share (arch_cohere.cpp, arch_cohere2.cpp): their config rules. Internal to
// src/hf.
//
// Thread safety: pure functions.
#pragma once

#include <array>

#include "hf/arch.h"

namespace safeweights::hf::cohere {

// The layer: one LayerNorm before attention and MLP (the parallel block), Llama's projections unpermuted
// (transformers' interleaved rope is llama.cpp's normal one).
inline constexpr std::array<TensorRule, 8> kLayer = {{
    rows::kAttnNorm,
    rows::q(Permute::None),
    rows::k(Permute::None),
    rows::kV,
    rows::kO,
    rows::kGate,
    rows::kUp,
    rows::kDown,
}};

// The rules both share: attention_bias true refused (llama.cpp's command-r and cohere2 have no
// attention biases) unless `zero_biases_left_out` (Cohere2: its converter leaves out biases that are all
// zero, refusing others), only the default rope (their converters write rope.scaling.type "none"), and
// logit_scale required, written as {arch}.logit_scale with rope.scaling.type.
Status check_common(const JsonFile& file, ModelConfig& c, bool zero_biases_left_out = false);

}  // namespace safeweights::hf::cohere
