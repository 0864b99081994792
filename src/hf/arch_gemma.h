// What Gemma 2 and Gemma 3 share (arch_gemma2.cpp, arch_gemma3.cpp): their extra norms and config
// rules. Internal to src/hf.
//
// Thread safety: constant tables and pure functions.
#pragma once

#include "hf/arch.h"

namespace safeweights::hf::gemma {

// The rules both share: query_pre_attn_scalar as llama.cpp scales queries (head_dim; hidden/heads for
// the 27B models it recognises by their layer count), sliding_window as {arch}.attention.sliding_window,
// and layer_types in llama.cpp's fixed pattern (sliding except every `pattern`-th layer).
Status check_common(const JsonFile& file, ModelConfig& c, std::uint32_t pattern);

}  // namespace safeweights::hf::gemma
