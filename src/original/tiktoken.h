// Llama 3's tokenizer.model (a tiktoken rank file: lines `base64(token bytes) SP rank`) read as hostile
// input and turned into transformers' tokenizer files, as transformers' TikTokenConverter and
// convert_llama_weights_to_hf.py build them. Internal to src/original.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "original/hf_tokenizer_files.h"
#include "safeweights/error.h"
#include "safeweights/source.h"

namespace safeweights::original {

// Which 256 special tokens follow the ranks (transformers' lists for Llama 3, and for 3.1 / 3.2 / Guard-3).
enum class LlamaTokenizerVersion { Llama3, Llama3_1 };

struct TiktokenOptions {
  LlamaTokenizerVersion version = LlamaTokenizerVersion::Llama3;
  bool instruct = false;                     // eos <|eot_id|> (and, for 3.1, the eos list) instead of <|end_of_text|>
  std::uint64_t model_max_length = 0;        // the context length
  std::optional<std::string> chat_template;  // the folder's template, if it has one; none is invented
};

// The tokenizer files for the rank file `rank_file` (`name` names it in messages). Lines end in LF,
// CRLF or CR, empty ones are skipped and fields split at runs of blanks, as tiktoken reads them.
// InvalidModelFolder naming the file, the line and the rule for a line that is not base64 and a
// decimal rank, a rank repeated or missing (ranks run 0..n-1, in any order), two ranks of the same
// bytes, an empty or oversized token, a rank that spells a special token; ResourceLimit for a file
// above 64 MiB or 1M tokens, or merges past bpe_ranks.h's caps.
Result<HfTokenizerFiles> tokenizer_files_from_tiktoken(const ByteSource& rank_file, std::string_view name, const TiktokenOptions& options);

}  // namespace safeweights::original
