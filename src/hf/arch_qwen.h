// What the Qwen architectures share (arch_qwen2.cpp, arch_qwen3.cpp, arch_qwen3moe.cpp): their config
// rules. Internal to src/hf.
//
// Thread safety: pure functions.
#pragma once

#include "hf/arch.h"

namespace safeweights::hf {

// Qwen's sliding window (use_sliding_window true) is refused: llama.cpp's qwen architectures attend to
// the whole context.
Status check_qwen_sliding_window(const JsonFile& file, ModelConfig& c);

}  // namespace safeweights::hf
