// Mistral's tekken.json (a tiktoken vocabulary with its special tokens, in JSON) read as hostile input
// and turned into transformers' tokenizer files: special tokens first (ids 0..n_special-1), then the
// vocabulary cut to default_vocab_size with ids offset by n_special, the regex from the file.
// Internal to src/original.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "original/hf_tokenizer_files.h"
#include "safeweights/error.h"
#include "safeweights/source.h"

namespace safeweights::original {

struct TekkenOptions {
  std::uint64_t model_max_length = 0;        // the context length
  std::optional<std::string> chat_template;  // the folder's template, if it has one; none is invented
};

// The tokenizer files for `tekken_json` (`name` names it in messages). InvalidModelFolder naming the
// file, the entry and the rule for a document outside the schema, bad base64, ranks not dense or out
// of order, a vocabulary shorter than its config says, specials repeated or lacking <s>, </s> and
// <unk>; DuplicateKey for a repeated key; NotSupported for the old layout without special_tokens;
// ResourceLimit for a file above 64 MiB or merges past bpe_ranks.h's caps.
Result<HfTokenizerFiles> tokenizer_files_from_tekken(const ByteSource& tekken_json, std::string_view name, const TekkenOptions& options);

}  // namespace safeweights::original
