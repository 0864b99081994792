// What the architectures on llama.cpp's "llama" share (arch_llama.cpp, arch_mixtral.cpp): their config
// rules. Internal to src/hf.
//
// Thread safety: pure functions.
#pragma once

#include "hf/arch.h"

namespace safeweights::hf {

// Mistral's and Mixtral's sliding window is refused when it binds (below max_position_embeddings):
// llama.cpp's llama architecture attends to the whole context.
Status check_llama_sliding_window(const JsonFile& file, ModelConfig& c);

}  // namespace safeweights::hf
