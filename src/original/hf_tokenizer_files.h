// The tokenizer files of a transformers folder (tokenizer.json, tokenizer_config.json,
// special_tokens_map.json) made from an original download's tokenizer, and the ids the config files
// need. Internal to src/original: the tiktoken and tekken readers (original/tiktoken.h,
// original/tekken.h) produce it, the original-folder planner writes it.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "original/bpe_ranks.h"
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

// What tokenizer.json holds for a rank vocabulary: the ranks' tokens at ids first_rank_id + rank, the
// special tokens at ids first_special_id + i (also in the model's vocabulary when specials_in_vocab:
// tekken's layout; added tokens only otherwise: Llama 3's), transformers' pre-tokenizer (the split by
// `pattern`, then byte-level) and decoder, and a post-processor that adds `bos` when set.
struct TokenizerJsonSpec {
  std::span<const std::string> tokens;  // bytes by rank
  std::span<const Merge> merges;
  std::uint32_t first_rank_id = 0;
  std::span<const std::string> specials;
  std::uint32_t first_special_id = 0;
  bool specials_in_vocab = false;
  std::string_view pattern;
  std::optional<std::string_view> bos;
};
// tokenizer.json as tokenizers writes it (serde_json's pretty form, two-space indent, no final newline).
std::string tokenizer_json(const TokenizerJsonSpec& spec);

// What tokenizer_config.json and special_tokens_map.json say: the special tokens (as above) and the
// named ones among them.
struct TokenizerConfigSpec {
  std::span<const std::string> specials;
  std::uint32_t first_special_id = 0;
  std::string_view bos, eos;
  std::optional<std::string_view> unk, pad;
  bool clean_up_tokenization_spaces = false;
  bool model_input_names = false;  // ["input_ids", "attention_mask"], as convert_llama_weights_to_hf.py sets
  std::uint64_t model_max_length = 0;
  std::optional<std::string_view> chat_template;
};
// The chat template a caller gave, as the view TokenizerConfigSpec holds.
inline std::optional<std::string_view> as_view(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  return std::string_view(*text);
}
// tokenizer_config.json as transformers 4 wrote it (json.dumps(indent=2, sort_keys=True) and a
// newline; added_tokens_decoder, tokenizer_class PreTrainedTokenizerFast), the form the Hub's Llama 3 and
// Mistral repositories hold and transformers 4 and 5 both load.
std::string tokenizer_config_json(const TokenizerConfigSpec& spec);
// special_tokens_map.json as transformers 4 wrote it: each named token as an object.
std::string special_tokens_map_json(const TokenizerConfigSpec& spec);
// The three files' text; the ids are left to the caller.
HfTokenizerFiles tokenizer_files(const TokenizerJsonSpec& tokenizer, const TokenizerConfigSpec& config);

}  // namespace safeweights::original
