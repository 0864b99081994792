// Mistral's tekken.json to transformers' tokenizer files (original/tekken.h): the schema reader
// (hence the _json name: it is one of the files that include simdjson through json/dom.h).
#include <algorithm>
#include <string>
#include <vector>

#include "core/status_macros.h"
#include "io/read_util.h"
#include "json/dom.h"
#include "original/bpe_ranks.h"
#include "original/tekken.h"

namespace safeweights::original {

namespace {

// tekken.json is ~15 MB for 131k tokens; its DOM costs a few times that.
constexpr std::uint64_t kMaxTekkenBytes = 64ull << 20;
constexpr std::uint64_t kMaxTekkenTokens = 1u << 20;
// Mistral's files reserve 1,000; each costs an entry in tokenizer.json and in tokenizer_config.json.
constexpr std::uint64_t kMaxSpecialTokens = 1u << 16;
// The names transformers gives the specials (integrations/mistral's _MAP_SPECIALS).
constexpr std::string_view kBos = "<s>", kEos = "</s>", kUnk = "<unk>", kPad = "<pad>";

Error bad(std::string_view name, std::string message) { return Error(ErrorKind::InvalidModelFolder, std::move(message)).with_file(name); }

// The member `key` of object `e`, or nullptr-like absent.
std::optional<json::element> member(json::element e, std::string_view key) {
  json::element v;
  if (json::as_object(e).at_key(key).get(v) != simdjson::SUCCESS) return std::nullopt;
  return v;
}

Result<std::uint64_t> uint_member(json::element e, std::string_view key, std::string_view where, std::string_view name) {
  auto v = member(e, key);
  std::uint64_t value = 0;
  if (!v || v->get_uint64().get(value) != simdjson::SUCCESS)
    return bad(name, std::string(where) + "." + std::string(key) + " is not a non-negative integer");
  return value;
}

Result<std::string_view> string_member(json::element e, std::string_view key, std::string_view where, std::string_view name) {
  auto v = member(e, key);
  if (!v || v->type() != json::element_type::STRING) return bad(name, std::string(where) + "." + std::string(key) + " is not a string");
  return json::as_string(*v);
}

Result<simdjson::dom::array> array_member(json::element e, std::string_view key, std::string_view name) {
  auto v = member(e, key);
  if (!v) {
    if (key == "special_tokens") {
      return Error(ErrorKind::NotSupported, "has no special_tokens: the old tekken layout (mistral-common's built-in list) is not read")
          .with_file(name);
    }
    return bad(name, std::string(key) + " is missing");
  }
  if (v->type() != json::element_type::ARRAY) return bad(name, std::string(key) + " is not an array");
  return json::as_array(*v);
}

struct Tekken {
  std::string pattern;
  std::vector<std::string> tokens;    // bytes by rank, cut to default_vocab_size
  std::vector<std::string> specials;  // by id: the file's, then <SPECIAL_i> fillers
};

// special_tokens[]: {rank, token_str}, ranks 0..k-1 in any order, then fillers up to
// default_num_special_tokens (transformers' _derive_tekken_specials).
Status read_specials(json::element root, json::element config, std::string_view name, Tekken& out) {
  SW_ASSIGN_OR_RETURN(auto list, array_member(root, "special_tokens", name));
  const std::size_t count = list.size();
  if (count == 0 || count > kMaxSpecialTokens) {
    return bad(name, "special_tokens holds " + std::to_string(count) + " entries: 1 to " + std::to_string(kMaxSpecialTokens) + " are read");
  }
  std::vector<std::optional<std::string>> by_rank(count);
  std::size_t i = 0;
  for (json::element entry : list) {
    const std::string where = "special_tokens[" + std::to_string(i++) + "]";
    if (entry.type() != json::element_type::OBJECT) return bad(name, where + " is not an object");
    SW_ASSIGN_OR_RETURN(std::uint64_t rank, uint_member(entry, "rank", where, name));
    SW_ASSIGN_OR_RETURN(std::string_view text, string_member(entry, "token_str", where, name));
    if (rank >= count) return bad(name, where + " has rank " + std::to_string(rank) + ": special ranks run 0.." + std::to_string(count - 1));
    if (by_rank[rank]) return bad(name, where + " repeats special rank " + std::to_string(rank));
    if (text.empty()) return bad(name, where + " has an empty token_str");
    by_rank[rank] = std::string(text);
  }
  std::uint64_t total = count;
  if (member(config, "default_num_special_tokens")) {
    SW_ASSIGN_OR_RETURN(total, uint_member(config, "default_num_special_tokens", "config", name));
  }
  if (total < count || total > kMaxSpecialTokens) {
    return bad(name, "config.default_num_special_tokens is " + std::to_string(total) + ", but special_tokens holds " + std::to_string(count));
  }
  for (auto& text : by_rank) out.specials.push_back(std::move(*text));
  for (std::uint64_t id = count; id < total; ++id) out.specials.push_back("<SPECIAL_" + std::to_string(id) + ">");
  std::vector<std::string_view> sorted(out.specials.begin(), out.specials.end());
  std::sort(sorted.begin(), sorted.end());
  if (auto twin = std::adjacent_find(sorted.begin(), sorted.end()); twin != sorted.end()) {
    return bad(name, "the special token " + json::quoted(*twin) + " appears twice");
  }
  return Status::ok();
}

// vocab[]: {rank, token_bytes}, rank i at index i, cut to default_vocab_size - the specials.
Status read_vocab(json::element root, json::element config, std::string_view name, Tekken& out) {
  SW_ASSIGN_OR_RETURN(auto list, array_member(root, "vocab", name));
  std::uint64_t keep = list.size();
  if (member(config, "default_vocab_size")) {
    SW_ASSIGN_OR_RETURN(std::uint64_t vocab_size, uint_member(config, "default_vocab_size", "config", name));
    if (vocab_size < out.specials.size() || vocab_size - out.specials.size() > list.size()) {
      return bad(name, "config.default_vocab_size is " + std::to_string(vocab_size) + ", but the file holds " + std::to_string(out.specials.size()) +
                           " special tokens and " + std::to_string(list.size()) + " others");
    }
    keep = vocab_size - out.specials.size();
  }
  if (keep == 0 || keep > kMaxTekkenTokens) return bad(name, "vocab holds " + std::to_string(keep) + " tokens in use");
  out.tokens.reserve(keep);
  for (json::element entry : list) {
    if (out.tokens.size() == keep) break;
    const std::string where = "vocab[" + std::to_string(out.tokens.size()) + "]";
    if (entry.type() != json::element_type::OBJECT) return bad(name, where + " is not an object");
    SW_ASSIGN_OR_RETURN(std::uint64_t rank, uint_member(entry, "rank", where, name));
    if (rank != out.tokens.size()) return bad(name, where + " has rank " + std::to_string(rank) + ": the ranks run 0, 1, ... in order");
    SW_ASSIGN_OR_RETURN(std::string_view encoded, string_member(entry, "token_bytes", where, name));
    auto bytes = decode_base64(encoded);
    if (!bytes) return bad(name, where + ".token_bytes is not valid base64");
    out.tokens.push_back(std::move(*bytes));
  }
  return Status::ok();
}

Result<Tekken> read_tekken(const ByteSource& source, std::string_view name) {
  // read_small refuses a larger file before reading a byte of it (ResourceLimit).
  auto text = read_small(source, kMaxTekkenBytes);
  if (!text) return std::move(text.error()).with_file(name);
  std::unique_ptr<simdjson::dom::parser> own;
  json::element root;
  if (auto err = json::parse_document(*text, 64, own, root); err) return bad(name, std::string("is not valid JSON: ") + simdjson::error_message(err));
  if (root.type() != json::element_type::OBJECT) return bad(name, "is not a JSON object");
  if (auto repeated = json::find_repeated_key(root)) {
    return Error(ErrorKind::DuplicateKey,
                 "repeats the key " + json::quoted(repeated->key) + (repeated->where.empty() ? "" : " in " + repeated->where))
        .with_file(name);
  }
  auto config = member(root, "config");
  if (!config || config->type() != json::element_type::OBJECT) return bad(name, "config is missing or not an object");
  Tekken out;
  SW_ASSIGN_OR_RETURN(std::string_view pattern, string_member(*config, "pattern", "config", name));
  out.pattern = std::string(pattern);
  SW_RETURN_IF_ERROR(read_specials(root, *config, name, out));
  SW_RETURN_IF_ERROR(read_vocab(root, *config, name, out));
  return out;
}

// A token whose byte-level spelling is a special token's would share its vocabulary entry.
Status check_specials_apart(const Tekken& tekken, std::string_view name) {
  std::vector<std::string_view> sorted(tekken.specials.begin(), tekken.specials.end());
  std::sort(sorted.begin(), sorted.end());
  std::string spelled;
  for (std::size_t rank = 0; rank < tekken.tokens.size(); ++rank) {
    spelled.clear();
    append_byte_level(spelled, tekken.tokens[rank]);
    if (std::binary_search(sorted.begin(), sorted.end(), std::string_view(spelled))) {
      return bad(name, "vocab[" + std::to_string(rank) + "] spells the special token " + json::quoted(spelled));
    }
  }
  return Status::ok();
}

std::optional<std::uint32_t> id_of(const std::vector<std::string>& specials, std::string_view token) {
  auto it = std::find(specials.begin(), specials.end(), token);
  if (it == specials.end()) return std::nullopt;
  return static_cast<std::uint32_t>(it - specials.begin());
}

}  // namespace

Result<HfTokenizerFiles> tokenizer_files_from_tekken(const ByteSource& tekken_json, std::string_view name, const TekkenOptions& options) {
  SW_ASSIGN_OR_RETURN(Tekken tekken, read_tekken(tekken_json, name));
  SW_RETURN_IF_ERROR(check_specials_apart(tekken, name));
  const auto bos = id_of(tekken.specials, kBos), eos = id_of(tekken.specials, kEos), unk = id_of(tekken.specials, kUnk);
  if (!bos || !eos || !unk) return bad(name, "special_tokens lacks one of <s>, </s> and <unk>, which transformers names bos, eos and unk");
  const auto pad = id_of(tekken.specials, kPad);
  SW_ASSIGN_OR_RETURN(std::vector<Merge> merges, derive_merges(tekken.tokens, name));
  const auto n_special = static_cast<std::uint32_t>(tekken.specials.size());

  const TokenizerJsonSpec tokenizer{.tokens = tekken.tokens,
                                    .merges = merges,
                                    .first_rank_id = n_special,
                                    .specials = tekken.specials,
                                    .first_special_id = 0,
                                    .specials_in_vocab = true,
                                    .pattern = tekken.pattern,
                                    .bos = std::nullopt};
  const TokenizerConfigSpec config{.specials = tekken.specials,
                                   .first_special_id = 0,
                                   .bos = kBos,
                                   .eos = kEos,
                                   .unk = kUnk,
                                   .pad = pad ? std::optional<std::string_view>(kPad) : std::nullopt,
                                   .clean_up_tokenization_spaces = false,
                                   .model_input_names = false,
                                   .model_max_length = options.model_max_length,
                                   .chat_template = as_view(options.chat_template)};
  HfTokenizerFiles files = tokenizer_files(tokenizer, config);
  files.vocab_size = n_special + static_cast<std::uint32_t>(tekken.tokens.size());
  files.bos_id = *bos;
  files.eos_id = *eos;
  files.pad_id = pad;
  return files;
}

}  // namespace safeweights::original
