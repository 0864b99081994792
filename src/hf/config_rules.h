// Config rules several architecture tables share (arch_smollm3.cpp, arch_olmo2.cpp, arch_granite.cpp,
// arch_gemma.cpp, arch_ministral3.cpp): refusing by name a config key whose value llama.cpp's
// architecture cannot compute. Internal to src/hf.
//
// Thread safety: pure functions.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "hf/arch.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"

namespace safeweights::hf {

// NotSupported naming `key` in config.json: "key `K` WHY".
inline Error refuse_key(const JsonFile& file, std::string_view key, std::string_view why) {
  return Error(ErrorKind::NotSupported, "key " + json::quoted(key) + " " + std::string(why)).with_file(file.path());
}

// Each of `keys` that is true is refused: llama.cpp's `arch` has no such tensors or attention (biases,
// sliding windows) — the switches transformers reads that would change the computation.
inline Status refuse_true(const JsonFile& file, std::string_view arch, std::initializer_list<std::string_view> keys) {
  for (std::string_view key : keys) {
    SW_ASSIGN_OR_RETURN(auto on, file.boolean(file.root(), key));
    if (on.value_or(false)) return refuse_key(file, key, "is true: llama.cpp's " + std::string(arch) + " architecture has no such computation");
  }
  return Status::ok();
}

}  // namespace safeweights::hf
