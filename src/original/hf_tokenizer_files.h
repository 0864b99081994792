// The tokenizer files of a transformers folder (tokenizer.json, tokenizer_config.json,
// special_tokens_map.json) made from an original download's tokenizer, and the ids the config files
// need. Internal to src/original: the tiktoken and tekken readers (original/tiktoken.h,
// original/tekken.h) produce it, the original-folder planner writes it.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/error.h"

namespace safeweights::original {

// The three files' text as transformers writes them, and the token ids config.json and
// generation_config.json carry.
struct HfTokenizerFiles {
  std::string tokenizer_json;           // tokenizers' JSON, as transformers' TikTokenConverter builds it
  std::string tokenizer_config_json;    // tokenizer_config.json
  std::string special_tokens_map_json;  // special_tokens_map.json
  std::uint32_t vocab_size = 0;         // tokens including the special ones: checked against the embeddings
  std::uint32_t bos_id = 0, eos_id = 0;
  std::optional<std::uint32_t> pad_id;
  std::vector<std::uint32_t> eos_ids;  // generation_config's eos_token_id list when several (3.1 instruct)
};

}  // namespace safeweights::original
