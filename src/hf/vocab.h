// The tokenizer of a Llama-family folder as llama.cpp's GGUF metadata (tokenizer.ggml.*). Internal to
// src/hf.
//
// Thread safety: pure function.
#pragma once

#include <string>
#include <vector>

#include "hf/hf_files.h"
#include "safeweights/metadata.h"
#include "safeweights/hf_gguf.h"

namespace safeweights::hf {

// Appends the tokenizer keys: from tokenizer.model (SentencePiece: model "llama") when present, else
// from tokenizer.json (byte-level BPE: model "gpt2"); then the special tokens, add_bos/add_eos and the
// chat template from tokenizer_config.json and config.json. FileNotFound when the folder has neither
// tokenizer.
Status add_vocabulary(const Folder& folder, const ModelConfig& config, const GgufOptions& options, std::vector<MetaEntry>& kv);

}  // namespace safeweights::hf
