// Llama 3's tiktoken rank file to transformers' tokenizer files (original/tiktoken.h).
#include "original/tiktoken.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "core/status_macros.h"
#include "io/read_util.h"
#include "original/bpe_ranks.h"

namespace safeweights::original {

namespace {

// A rank file larger than this is refused before it is read (Llama 3's is 2.2 MB; o200k's 3.6 MB).
constexpr std::uint64_t kMaxRankFileBytes = 64ull << 20;
constexpr std::size_t kMaxRankLines = 1u << 20;
// Meta's pat_str (llama-models models/llama3/tokenizer.py), TikTokenConverter's default pattern.
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::uint32_t kSpecialCount = 256;

Error malformed(std::string_view name, std::size_t line, std::string message) {
  return Error(ErrorKind::InvalidModelFolder, "line " + std::to_string(line) + ": " + std::move(message)).with_file(name);
}

// The 256 special tokens convert_llama_weights_to_hf.py adds after the ranks (DEFAULT_LLAMA_SPECIAL_TOKENS).
std::vector<std::string> llama_specials(LlamaTokenizerVersion version) {
  std::vector<std::string> named;
  std::uint32_t first_reserved = 0;
  if (version == LlamaTokenizerVersion::Llama3) {
    named = {"<|begin_of_text|>",
             "<|end_of_text|>",
             "<|reserved_special_token_0|>",
             "<|reserved_special_token_1|>",
             "<|reserved_special_token_2|>",
             "<|reserved_special_token_3|>",
             "<|start_header_id|>",
             "<|end_header_id|>",
             "<|reserved_special_token_4|>",
             "<|eot_id|>"};
    first_reserved = 5;
  } else {
    named = {"<|begin_of_text|>",
             "<|end_of_text|>",
             "<|reserved_special_token_0|>",
             "<|reserved_special_token_1|>",
             "<|finetune_right_pad_id|>",
             "<|reserved_special_token_2|>",
             "<|start_header_id|>",
             "<|end_header_id|>",
             "<|eom_id|>",
             "<|eot_id|>",
             "<|python_tag|>"};
    first_reserved = 3;
  }
  for (std::uint32_t i = first_reserved; named.size() < kSpecialCount; ++i) named.push_back("<|reserved_special_token_" + std::to_string(i) + "|>");
  return named;
}

// Splits `line` into fields at runs of spaces and tabs, as Python's bytes.split() does for a line.
std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\v' || line[i] == '\f')) ++i;
    const std::size_t start = i;
    while (i < line.size() && !(line[i] == ' ' || line[i] == '\t' || line[i] == '\v' || line[i] == '\f')) ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

std::optional<std::uint32_t> parse_rank(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;  // ranks stay below 1e9 (and the line cap)
  std::uint32_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint32_t>(c - '0');
  }
  return value;
}

// The tokens of the rank file, by rank. Lines end in LF, CRLF or CR and empty ones are skipped, as
// tiktoken's load_tiktoken_bpe (bytes.splitlines) reads them; each holds base64 and a rank.
Result<std::vector<std::string>> read_ranks(std::string_view text, std::string_view name) {
  struct Entry {
    std::string bytes;
    std::size_t line;
  };
  std::vector<std::string> tokens;
  std::size_t line_number = 0;
  std::size_t token_lines = 0;
  std::size_t pos = 0;
  std::vector<std::optional<Entry>> entries;
  while (pos < text.size()) {
    std::size_t end = text.find_first_of("\r\n", pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + (end < text.size() && text[end] == '\r' && end + 1 < text.size() && text[end + 1] == '\n' ? 2 : 1);
    ++line_number;
    if (line.empty()) continue;
    if (++token_lines > kMaxRankLines) {
      return Error(ErrorKind::ResourceLimit, "more than " + std::to_string(kMaxRankLines) + " tokens: a rank file holds at most that many")
          .with_file(name);
    }
    const auto fields = fields_of(line);
    if (fields.size() != 2) return malformed(name, line_number, "a line holds the token's base64 and its rank, separated by a space");
    auto rank = parse_rank(fields[1]);
    if (!rank) return malformed(name, line_number, "the rank is not a decimal number below 10^9");
    auto bytes = decode_base64(fields[0]);
    if (!bytes) return malformed(name, line_number, "the token is not valid base64");
    if (*rank >= kMaxRankLines) return malformed(name, line_number, "rank " + std::to_string(*rank) + " is above the most tokens a rank file holds");
    if (entries.size() <= *rank) entries.resize(*rank + 1);
    if (entries[*rank]) {
      return malformed(name, line_number, "rank " + std::to_string(*rank) + " again (first on line " + std::to_string(entries[*rank]->line) + ")");
    }
    entries[*rank] = Entry{std::move(*bytes), line_number};
  }
  if (entries.empty()) return Error(ErrorKind::InvalidModelFolder, "holds no tokens").with_file(name);
  tokens.reserve(entries.size());
  for (std::size_t rank = 0; rank < entries.size(); ++rank) {
    if (!entries[rank]) {
      return Error(ErrorKind::InvalidModelFolder,
                   "rank " + std::to_string(rank) + " is missing: ranks run 0.." + std::to_string(entries.size() - 1) + " without a gap")
          .with_file(name);
    }
    tokens.push_back(std::move(entries[rank]->bytes));
  }
  return tokens;
}

Status check_specials_apart(const std::vector<std::string>& tokens, const std::vector<std::string>& specials, std::string_view name) {
  // A rank spelling a special token would make tokenizers give the special token that rank's id
  // (add_special_tokens reuses a vocabulary entry), not the id after the ranks.
  std::string spelled;
  for (std::size_t rank = 0; rank < tokens.size(); ++rank) {
    if (tokens[rank].size() < 5 || tokens[rank].front() != '<') continue;
    spelled.clear();
    append_byte_level(spelled, tokens[rank]);
    if (std::find(specials.begin(), specials.end(), spelled) != specials.end()) {
      return Error(ErrorKind::InvalidModelFolder,
                   "rank " + std::to_string(rank) + " spells the special token " + spelled + ": special tokens follow the ranks")
          .with_file(name);
    }
  }
  return Status::ok();
}

std::uint32_t id_of(const std::vector<std::string>& specials, std::uint32_t first, std::string_view token) {
  return first + static_cast<std::uint32_t>(std::find(specials.begin(), specials.end(), token) - specials.begin());
}

}  // namespace

Result<HfTokenizerFiles> tokenizer_files_from_tiktoken(const ByteSource& rank_file, std::string_view name, const TiktokenOptions& options) {
  // read_small refuses a larger file before reading a byte of it (ResourceLimit).
  auto text = read_small(rank_file, kMaxRankFileBytes);
  if (!text) return std::move(text.error()).with_file(name);
  SW_ASSIGN_OR_RETURN(std::vector<std::string> tokens, read_ranks(*text, name));
  SW_ASSIGN_OR_RETURN(std::vector<Merge> merges, derive_merges(tokens, name));
  const std::vector<std::string> specials = llama_specials(options.version);
  SW_RETURN_IF_ERROR(check_specials_apart(tokens, specials, name));
  const auto first_special = static_cast<std::uint32_t>(tokens.size());
  const std::string_view bos = "<|begin_of_text|>";
  const std::string_view eos = options.instruct ? "<|eot_id|>" : "<|end_of_text|>";

  const TokenizerJsonSpec tokenizer{.tokens = tokens,
                                    .merges = merges,
                                    .first_rank_id = 0,
                                    .specials = specials,
                                    .first_special_id = first_special,
                                    .specials_in_vocab = false,
                                    .pattern = kLlama3Pattern,
                                    .bos = bos};
  const TokenizerConfigSpec config{.specials = specials,
                                   .first_special_id = first_special,
                                   .bos = bos,
                                   .eos = eos,
                                   .unk = std::nullopt,
                                   .pad = std::nullopt,
                                   .clean_up_tokenization_spaces = true,
                                   .model_input_names = true,
                                   .model_max_length = options.model_max_length,
                                   .chat_template = as_view(options.chat_template)};
  HfTokenizerFiles files = tokenizer_files(tokenizer, config);
  files.vocab_size = first_special + kSpecialCount;
  files.bos_id = id_of(specials, first_special, bos);
  files.eos_id = id_of(specials, first_special, eos);
  // convert_llama_weights_to_hf.py: an instruct model stops at <|end_of_text|>, <|eom_id|>'s id and
  // <|eot_id|> (the same three ids for 3 as for 3.1, where 128008 is a reserved token).
  if (options.instruct) files.eos_ids = {first_special + 1, first_special + 8, first_special + 9};
  return files;
}

}  // namespace safeweights::original
