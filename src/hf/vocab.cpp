// Tokenizers into GGUF metadata, as llama.cpp's converter writes them (convert_hf_to_gguf.py:
// _set_vocab_sentencepiece, _set_vocab_gpt2 / get_vocab_base; gguf-py SpecialVocab).
#include "hf/vocab.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <span>
#include <unordered_map>

#include "core/status_macros.h"
#include "hf/arch.h"
#include "hf/pretokenizer.h"

namespace safeweights::hf {
namespace {

using KeyValue = MetaEntry;
using Value = MetaValue;
using ValueType = MetaType;

// The special-token kinds llama.cpp's SpecialVocab writes, with their GGUF keys (sic "seperator").
struct SpecialKind {
  std::string_view type;
  std::string_view key;
};
constexpr SpecialKind kSpecialKinds[] = {
    {"bos", "tokenizer.ggml.bos_token_id"},       {"eos", "tokenizer.ggml.eos_token_id"},     {"unk", "tokenizer.ggml.unknown_token_id"},
    {"sep", "tokenizer.ggml.seperator_token_id"}, {"pad", "tokenizer.ggml.padding_token_id"}, {"mask", "tokenizer.ggml.mask_token_id"},
    {"eot", "tokenizer.ggml.eot_token_id"},       {"eom", "tokenizer.ggml.eom_token_id"},
};

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;  // SentencePiece only
  std::vector<std::int32_t> types;
};

// Added tokens that are not marked special but read as control tokens (llama.cpp's
// does_token_look_special).
bool looks_special(std::string_view t) {
  if (t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]") return true;
  if (t.starts_with("<|") && t.ends_with("|>")) return true;
  if (t.starts_with("<\xEF\xBD\x9C") && t.ends_with("\xEF\xBD\x9C>")) return true;  // <｜ ... ｜>
  return t.starts_with("<unused") && t.ends_with(">");
}

// llama.cpp expects user-defined tokens pre-normalized: SentencePiece's U+2581 becomes a space.
std::string user_defined_text(std::string_view t) {
  std::string out;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t.substr(i, 3) == "\xE2\x96\x81") {
      out += ' ';
      i += 2;
    } else {
      out += t[i];
    }
  }
  return out;
}

// An added token's type and text.
void set_added(Vocab& v, const AddedToken& t) {
  if (t.special || looks_special(t.content)) {
    v.types[t.id] = kControl;
    v.tokens[t.id] = t.content;
  } else {
    v.types[t.id] = kUserDefined;
    v.tokens[t.id] = user_defined_text(t.content);
  }
}

Vocab padded(std::uint32_t n, float score) {
  Vocab v;
  v.tokens.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) v.tokens.push_back("[PAD" + std::to_string(i) + "]");
  v.scores.assign(n, score);
  v.types.assign(n, kUnused);
  return v;
}

Error out_of_vocab(const std::string& file, std::string_view what, std::uint64_t id, std::uint32_t n) {
  return Error(ErrorKind::InvalidModelFolder,
               std::string(what) + " " + std::to_string(id) + " is not below config.json's vocab_size " + std::to_string(n))
      .with_file(file);
}

// tokenizer.model: the pieces at their ids, the rest of config.json's vocab_size as "[PADi]" (score
// -10000, unused). Pieces keep their score; their type becomes llama.cpp's (NORMAL, UNKNOWN, CONTROL,
// UNUSED, BYTE; USER_DEFINED pieces are NORMAL, as the converter's SentencePieceProcessor queries
// give). tokenizer_config.json's added_tokens_decoder then overrides its ids (score -1000).
Result<Vocab> sentencepiece_vocab(const Folder& folder, const ModelConfig& c, const TokenizerConfig& tc) {
  const std::string path = folder.path_of("tokenizer.model");
  SW_ASSIGN_OR_RETURN(bool added_tokens, has_model_file(folder, "added_tokens.json"));
  if (added_tokens) {
    return Error(ErrorKind::NotSupported, "added_tokens.json beside tokenizer.model is not converted").with_file(folder.name());
  }
  SW_ASSIGN_OR_RETURN(std::string bytes, read_model_file(folder, "tokenizer.model", kMaxTokenizerBytes));
  SW_ASSIGN_OR_RETURN(std::vector<Piece> pieces, parse_sentencepiece(bytes, path));
  if (pieces.size() > c.vocab_size) return out_of_vocab(path, "piece count", pieces.size(), c.vocab_size);
  Vocab v = padded(c.vocab_size, -10000.0f);
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const std::int32_t t = pieces[i].type;
    v.tokens[i] = std::move(pieces[i].piece);
    v.scores[i] = pieces[i].score;
    v.types[i] = t == kUserDefined ? kNormal : t;
  }
  for (const AddedToken& t : tc.added_tokens_decoder) {
    if (t.id >= c.vocab_size) return out_of_vocab(folder.path_of("tokenizer_config.json"), "added token id", t.id, c.vocab_size);
    set_added(v, t);
    v.scores[t.id] = -1000.0f;
  }
  return v;
}

// tokenizer.json's byte-level BPE: model.vocab and the added tokens at their ids, the rest of
// config.json's vocab_size as "[PADi]" (unused).
Result<Vocab> bpe_vocab(const Folder& folder, const ModelConfig& c, const TokenizerJson& tj) {
  const std::string path = folder.path_of("tokenizer.json");
  Vocab v = padded(c.vocab_size, 0);
  for (std::size_t i = 0; i < tj.bpe->vocab.size(); ++i) {
    const std::uint32_t id = tj.bpe->ids[i];
    if (id >= c.vocab_size) return out_of_vocab(path, "token id", id, c.vocab_size);
    v.tokens[id] = tj.bpe->vocab[i];
    v.types[id] = kNormal;
  }
  for (const AddedToken& t : tj.added) {
    if (t.id >= c.vocab_size) return out_of_vocab(path, "added token id", t.id, c.vocab_size);
    set_added(v, t);
  }
  return v;
}

int hex_digit(char c, bool upper) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= (upper ? 'A' : 'a') && c <= (upper ? 'F' : 'f')) return c - (upper ? 'A' : 'a') + 10;
  return -1;
}

// The byte of "<0xAB>" (hex digits in the case asked for), or -1.
int byte_of_piece(std::string_view t, bool upper = true) {
  if (t.size() != 6 || !t.starts_with("<0x") || !t.ends_with(">")) return -1;
  const int hi = hex_digit(t[3], upper);
  const int lo = hex_digit(t[4], upper);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// "<0xAB>": a SentencePiece byte piece, spelled with upper-case digits as sentencepiece, tokenizers'
// byte_fallback and llama.cpp look byte pieces up ("<0xab>" is an ordinary token to all three).
bool is_byte_piece(std::string_view t) { return byte_of_piece(t) >= 0; }

std::string byte_piece(int b) {
  constexpr char kHex[] = "0123456789ABCDEF";
  return std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
}

// llama.cpp's SentencePiece tokenizer (model "llama") writes text its vocabulary does not cover as byte
// pieces: its byte_to_token looks up "<0xAB>", then the byte alone as a token, and aborts
// (std::out_of_range) when neither is there, on the first such character. sentencepiece refuses a
// byte-fallback model without its 256 byte pieces, and a BYTE piece spelled otherwise, as well. So
// every byte must have its piece, and a piece typed BYTE must be spelled <0xXX>; InvalidModelFolder
// naming `file` and the piece otherwise.
Status check_byte_pieces(const Vocab& v, const std::string& file) {
  std::array<bool, 256> have{};
  std::array<bool, 256> lower_case{};
  for (std::size_t id = 0; id < v.tokens.size(); ++id) {
    const std::string& t = v.tokens[id];
    if (const int b = byte_of_piece(t); b >= 0) {
      have[static_cast<std::size_t>(b)] = true;
    } else if (t.size() == 1) {
      have[static_cast<unsigned char>(t[0])] = true;
    } else if (v.types[id] == kByte) {
      return Error(ErrorKind::InvalidModelFolder, "piece " + std::to_string(id) + ", `" + t +
                                                      "`, is a BYTE piece not spelled <0xXX> (two upper-case hex digits), as "
                                                      "sentencepiece and llama.cpp spell them")
          .with_file(file);
    } else if (const int lb = byte_of_piece(t, false); lb >= 0) {
      lower_case[static_cast<std::size_t>(lb)] = true;
    }
  }
  for (int b = 0; b < 256; ++b) {
    if (have[static_cast<std::size_t>(b)]) continue;
    std::string message = "has no byte piece `" + byte_piece(b) + "`";
    if (lower_case[static_cast<std::size_t>(b)]) message += " (its lower-case spelling is not one: byte pieces are looked up as <0xXX>)";
    return Error(ErrorKind::InvalidModelFolder, message +
                                                    ": llama.cpp's SentencePiece tokenizer writes text outside the vocabulary as the "
                                                    "256 byte pieces <0x00>..<0xFF>, and aborts on a missing one")
        .with_file(file);
  }
  return Status::ok();
}

// tokenizer.json's SentencePiece-style BPE (byte_fallback) for llama.cpp's SentencePiece tokenizer
// (model "llama"). llama.cpp's tokenizer merges the adjacent pair whose merged token scores highest;
// the BPE merges the pair that comes first in model.merges. So a token's score is minus the rank of the
// first merge that makes it, and the two agree. (llama.cpp's converter, LlamaHfVocab, writes -1000 for
// every token, with which llama.cpp merges left to right instead.) Byte pieces are BYTE, model.unk_token
// UNKNOWN, added tokens as for byte-level BPE; the rest of config.json's vocab_size "[PADi]" (unused).
Result<Vocab> sentencepiece_bpe_vocab(const Folder& folder, const ModelConfig& c, const TokenizerJson& tj) {
  const std::string path = folder.path_of("tokenizer.json");
  Vocab v = padded(c.vocab_size, -10000.0f);
  std::unordered_map<std::string_view, std::uint32_t> ids;
  for (std::size_t i = 0; i < tj.bpe->vocab.size(); ++i) {
    const std::string_view text = tj.bpe->vocab[i];
    const std::uint32_t id = tj.bpe->ids[i];
    if (id >= c.vocab_size) return out_of_vocab(path, "token id", id, c.vocab_size);
    v.tokens[id] = text;
    v.types[id] = is_byte_piece(text) ? kByte : text == tj.bpe->unk_token ? kUnknown : kNormal;
    v.scores[id] = 0.0f;
    ids.emplace(text, id);
  }
  std::vector<bool> scored(c.vocab_size, false);
  std::string merged;  // reused: no allocation per merge
  for (std::size_t rank = 0; rank < tj.bpe->merges.size(); ++rank) {
    const std::string_view m = tj.bpe->merges[rank];
    const auto space = m.find(' ');
    if (space == std::string_view::npos) continue;
    merged.assign(m.substr(0, space)).append(m.substr(space + 1));
    auto it = ids.find(merged);
    if (it == ids.end() || scored[it->second]) continue;
    scored[it->second] = true;
    v.scores[it->second] = -static_cast<float>(rank + 1);
  }
  for (const AddedToken& t : tj.added) {
    if (t.id >= c.vocab_size) return out_of_vocab(path, "added token id", t.id, c.vocab_size);
    set_added(v, t);
    v.scores[t.id] = 0.0f;
  }
  return v;
}

Value string_array(std::vector<std::string> items) {
  std::vector<Value> values;
  values.reserve(items.size());
  for (std::string& s : items) values.push_back(Value::string(std::move(s)));
  return Value::array(ValueType::STRING, std::move(values));
}

Value string_array(const StringList& items) {
  std::vector<Value> values;
  values.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) values.push_back(Value::string(std::string(items[i])));
  return Value::array(ValueType::STRING, std::move(values));
}

template <typename T, typename Make>
Value scalar_array(ValueType type, const std::vector<T>& items, Make make) {
  std::vector<Value> values;
  values.reserve(items.size());
  for (const T& x : items) values.push_back(make(x));
  return Value::array(type, std::move(values));
}

// The special tokens' texts and whether encoding adds them, as llama.cpp's SpecialVocab reads them
// (gguf-py vocab.py): tokenizer_config.json's {kind}_token texts (cls standing in for a missing bos, sep
// for a missing eos), then tokenizer.json's post_processor: ByteLevel adds neither bos nor eos unless
// something else says so; RobertaProcessing adds bos, eos and sep; TemplateProcessing's `single`
// template adds bos when it starts with bos's (or cls's) token and eos when it ends with eos's (its `pair`
// template says sep: apply_pair_template). A
// template that starts with another special token makes it bos (and cls) where those are unnamed; one
// that ends with another makes it eos, the old eos becoming eot (or, the second time, eom). Without
// tokenizer_config.json only the add flags are taken (SpecialVocab names no token then). Last,
// tokenizer_config.json's add_{bos,eos,sep}_token where the post_processor said nothing.
struct SpecialTexts {
  std::map<std::string, std::string, std::less<>> text;  // kind -> token text
  std::optional<bool> add_bos, add_eos, add_sep;

  std::string_view of(std::string_view kind) const {
    auto it = text.find(kind);
    return it == text.end() ? std::string_view() : std::string_view(it->second);
  }
};

// Without tokenizer_config.json (names false) SpecialVocab still takes the template's first and last
// special tokens as bos and eos for the checks that follow; those texts are never written then.
void apply_template(const PostProcessorStep& p, bool names, SpecialTexts& s) {
  if (!p.first_special.empty()) {
    const std::string& first = p.first_special;
    if (!names) s.text["bos"] = first;
    if (names && first != s.of("bos") && first != s.of("cls")) {
      if (s.of("bos").empty()) s.text["bos"] = first;
      if (s.of("cls").empty()) s.text["cls"] = first;
    }
    s.add_bos = first == s.of("bos") || first == s.of("cls");
  }
  if (!p.last_special.empty()) {
    const std::string& last = p.last_special;
    if (!names) s.text["eos"] = last;
    if (names && last != s.of("eos")) {
      const std::string old_eos(s.of("eos"));
      if (!s.text.contains("eot")) {
        s.text["eot"] = old_eos;
      } else if (!s.text.contains("eom")) {
        s.text["eom"] = old_eos;
      }
      s.text["eos"] = last;
    }
    s.add_eos = last == s.of("eos");
  }
}

// TemplateProcessing's `pair` template, as SpecialVocab reads it: less the single template's leading and
// trailing special tokens, a template `A x B` or `A x y B` adds sep when x (where the single template has no
// trailing special token) or y is sep's or eos's token; eos's token then names sep when nothing else does.
void apply_pair_template(const PostProcessorStep& p, SpecialTexts& s) {
  std::span<const TemplatePiece> pair(p.pair);
  const bool leading = p.single_size > 1 && !p.first_special.empty();
  const bool trailing = p.single_size > 1 && !p.last_special.empty();
  const bool drop_last = trailing && !pair.empty() && pair.back().special == p.last_special;
  if (leading && !pair.empty() && pair.front().special == p.first_special) pair = pair.subspan(1);
  if (drop_last && !pair.empty()) pair = pair.first(pair.size() - 1);
  if (pair.size() < 3 || pair.front().sequence != "A" || pair.back().sequence != "B") return;
  const auto middle = pair.subspan(1, pair.size() - 2);
  auto separates = [&](const TemplatePiece& t) { return !t.special.empty() && (t.special == s.of("sep") || t.special == s.of("eos")); };
  s.add_sep = (separates(middle[0]) && !trailing) || (middle.size() == 2 && separates(middle[1]));
  if (*s.add_sep && s.of("sep").empty()) s.text["sep"] = std::string(s.of("eos"));
}

SpecialTexts special_texts(const TokenizerJson& tj, const TokenizerConfig& tc) {
  SpecialTexts s;
  for (const auto& [kind, text] : tc.special_tokens) s.text.emplace(kind, text);
  if (tj.present) {
    if (tc.present && s.of("bos").empty() && !s.of("cls").empty()) s.text["bos"] = std::string(s.of("cls"));
    if (tc.present && s.of("eos").empty() && !s.of("sep").empty()) s.text["eos"] = std::string(s.of("sep"));
    for (const PostProcessorStep& p : tj.post_processor) {
      if (p.type == "ByteLevel") {
        if (!s.add_bos) s.add_bos = false;
        if (!s.add_eos) s.add_eos = false;
      } else if (p.type == "RobertaProcessing") {
        s.add_bos = s.add_eos = s.add_sep = true;
      } else if (p.type == "TemplateProcessing") {
        if (p.single_size > 1) apply_template(p, tc.present, s);
        apply_pair_template(p, s);
      }
    }
  }
  if (!s.add_bos) s.add_bos = tc.add_bos_token;
  if (!s.add_eos) s.add_eos = tc.add_eos_token;
  if (!s.add_sep) s.add_sep = tc.add_sep_token;
  return s;
}

// Special tokens llama.cpp's converter names by hand for a family (its set_vocab in conversion/glm.py,
// chatglm.py, dots3.py), each taken only where the files named none of that kind, and refused when the
// tokenizer has no such added token (llama.cpp's converter stops there too).
struct FamilyToken {
  std::string_view kind;
  std::string_view text;
};
struct FamilyTokens {
  std::vector<std::string_view> classes;  // config.json's architectures[0]
  std::vector<FamilyToken> tokens;        // in the order the converter sets them
};
const std::vector<FamilyTokens>& family_tokens() {
  static const std::vector<FamilyTokens> table = {
      {{"Glm4MoeForCausalLM", "Glm4vMoeForConditionalGeneration", "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM",
        "Glm5NextForConditionalGeneration"},
       {{"bos", "[gMASK]"}, {"eot", "<|user|>"}, {"unk", "<|endoftext|>"}, {"eom", "<|observation|>"}}},
      {{"Glm4ForCausalLM", "Glm4vForConditionalGeneration"},
       {{"eos", "<|endoftext|>"}, {"eot", "<|user|>"}, {"unk", "<|endoftext|>"}, {"bos", "<|endoftext|>"}}},
      {{"GlmForCausalLM", "ChatGLMModel", "ChatGLMForConditionalGeneration"},
       {{"eos", "<|endoftext|>"}, {"eot", "<|user|>"}, {"unk", "<|endoftext|>"}}},
      {{"SolarOpenForCausalLM"}, {{"eos", "<|endoftext|>"}, {"eot", "<|endoftext|>"}, {"unk", "<unk>"}, {"bos", "<|startoftext|>"}}},
      {{"Dots3NoteForCausalLM", "Dots3NoteForConditionalGeneration", "Dots3NoteTextForCausalLM"}, {{"eot", "<|endofassistant|>"}}},
  };
  return table;
}

const std::vector<FamilyToken>* family_tokens_of(std::string_view hf_class) {
  for (const FamilyTokens& f : family_tokens()) {
    if (std::find(f.classes.begin(), f.classes.end(), hf_class) != f.classes.end()) return &f.tokens;
  }
  return nullptr;
}

// SpecialVocab: each kind's token text (special_texts) looked up among tokenizer.json's added tokens (the
// first with that content); else config.json's {kind}_token_id; then the family's (family_tokens). Ids at
// or beyond `n_vocab` (when known) are left out, as llama.cpp's converter leaves them out.
Status add_special(const Folder& folder, const ModelConfig& c, const TokenizerJson& tj, const TokenizerConfig& tc,
                   std::optional<std::uint32_t> n_vocab, std::vector<KeyValue>& kv) {
  const SpecialTexts texts = special_texts(tj, tc);
  std::unordered_map<std::string_view, std::uint64_t> ids;
  std::vector<std::string_view> order;
  auto set = [&](std::string_view type, std::uint64_t id) {
    if ((n_vocab && id >= *n_vocab) || ids.contains(type)) return;
    ids.emplace(type, id);
    order.push_back(type);
  };
  for (const SpecialKind& k : kSpecialKinds) {
    const std::string_view content = texts.of(k.type);
    if (content.empty() || !tc.present) continue;
    for (const AddedToken& t : tj.added) {
      if (t.content == content) {
        set(k.type, t.id);
        break;
      }
    }
  }
  for (const auto& [type, id] : c.special_ids) set(type, static_cast<std::uint64_t>(id));
  if (const auto* family = family_tokens_of(c.hf_class)) {
    for (const FamilyToken& f : *family) {
      auto t = std::find_if(tj.added.begin(), tj.added.end(), [&](const AddedToken& a) { return a.content == f.text; });
      if (t == tj.added.end()) {
        return Error(ErrorKind::InvalidModelFolder, "has no added token `" + std::string(f.text) + "`, which llama.cpp's converter makes the " +
                                                        std::string(f.kind) + " token of " + c.hf_class)
            .with_file(folder.path_of("tokenizer.json"));
      }
      set(f.kind, t->id);
    }
  }
  if (c.arch->eot_token_id && !ids.contains("eot")) {  // set whatever the vocabulary's size (n_vocab unknown there)
    ids.emplace("eot", *c.arch->eot_token_id);
    order.push_back("eot");
  }
  for (std::string_view type : order) {
    for (const SpecialKind& k : kSpecialKinds) {
      if (k.type == type) kv.push_back({std::string(k.key), Value::u32(static_cast<std::uint32_t>(ids[type]))});
    }
  }
  if (texts.add_bos) kv.push_back({"tokenizer.ggml.add_bos_token", Value::boolean(*texts.add_bos)});
  if (texts.add_eos) kv.push_back({"tokenizer.ggml.add_eos_token", Value::boolean(*texts.add_eos)});
  if (texts.add_sep) kv.push_back({"tokenizer.ggml.add_sep_token", Value::boolean(*texts.add_sep)});
  if (tc.chat_template) kv.push_back({"tokenizer.chat_template", Value::string(*tc.chat_template)});
  return Status::ok();
}

// A vocabulary for llama.cpp's SentencePiece tokenizer (model "llama"), with scores.
void add_llama_vocab(Vocab v, std::vector<KeyValue>& kv) {
  kv.push_back({"tokenizer.ggml.model", Value::string("llama")});
  kv.push_back({"tokenizer.ggml.pre", Value::string("default")});
  kv.push_back({"tokenizer.ggml.tokens", string_array(std::move(v.tokens))});
  kv.push_back({"tokenizer.ggml.scores", scalar_array(ValueType::FLOAT32, v.scores, Value::f32)});
  kv.push_back({"tokenizer.ggml.token_type", scalar_array(ValueType::INT32, v.types, Value::i32)});
}

// The chat-format tokens llama.cpp's converter types USER_DEFINED for Gemma 4, so that llama.cpp renders
// them and its chat parser reads them (Gemma4Model.set_vocab).
constexpr std::array<std::string_view, 7> kGemma4Visible = {"<|channel>",       "<channel|>",       "<|tool_call>", "<tool_call|>",
                                                            "<|tool_response>", "<tool_response|>", "<|\"|>"};

// tokenizer.json's byte_fallback BPE as llama.cpp's converter writes it for Gemma 4 (gguf-py's
// LlamaHfVocab): every token by id, score -1000; pieces spelled <0xXX> (either case) BYTE; the tokens
// tokenizer_config.json names special (bos ... mask, extra_special_tokens) CONTROL; other added tokens past
// the model's vocabulary USER_DEFINED, with their text as it is; the rest NORMAL; kGemma4Visible
// USER_DEFINED. Its tokens are as many as the embedding's rows (config.json's vocab_size): llama.cpp's
// loader requires it.
Result<Vocab> gemma4_vocab(const Folder& folder, const ModelConfig& c, const TokenizerJson& tj, const TokenizerConfig& tc) {
  const std::string path = folder.path_of("tokenizer.json");
  Vocab v = padded(c.vocab_size, -1000.0f);
  std::vector<bool> have(c.vocab_size, false);
  std::unordered_map<std::string_view, std::uint32_t> ids;
  auto set = [&](std::string_view text, std::uint32_t id, std::int32_t type) -> Status {
    if (id >= c.vocab_size) return out_of_vocab(path, "token id", id, c.vocab_size);
    v.tokens[id] = text;
    v.types[id] = type;
    have[id] = true;
    ids[text] = id;
    return Status::ok();
  };
  const auto base = tj.bpe->vocab.size();
  for (std::size_t i = 0; i < base; ++i) {
    const std::string_view text = tj.bpe->vocab[i];
    SW_RETURN_IF_ERROR(set(text, tj.bpe->ids[i], byte_of_piece(text) >= 0 || byte_of_piece(text, false) >= 0 ? kByte : kNormal));
  }
  for (const AddedToken& t : tj.added) SW_RETURN_IF_ERROR(set(t.content, t.id, t.id < base ? kNormal : kUserDefined));
  std::vector<std::string_view> specials;
  for (const auto& [kind, text] : tc.special_tokens) specials.push_back(text);
  for (const std::string& text : tc.extra_special_tokens) specials.push_back(text);
  for (std::string_view text : specials) {
    if (auto it = ids.find(text); it != ids.end() && v.types[it->second] != kByte) v.types[it->second] = kControl;
  }
  for (std::string_view text : kGemma4Visible) {
    if (auto it = ids.find(text); it != ids.end()) v.types[it->second] = kUserDefined;
  }
  if (auto gap = std::find(have.begin(), have.end(), false); gap != have.end()) {
    return Error(ErrorKind::InvalidModelFolder,
                 "has no token " + std::to_string(gap - have.begin()) + ": llama.cpp's converter writes the tokenizer's tokens, " +
                     "and its loader requires one per row of the embedding (config.json's vocab_size, " + std::to_string(c.vocab_size) + ")")
        .with_file(path);
  }
  return v;
}

// tokenizer.json's byte_fallback BPE as the llama.cpp tokenizer model `model` (Architecture::bpe_tokenizer_model):
// tokens, scores, types and merges, the special tokens, bos added and no space prefix, as llama.cpp's converter
// writes them for Gemma 4.
Status add_bpe_sentencepiece_vocab(const Folder& folder, const ModelConfig& c, const TokenizerJson& tj, const TokenizerConfig& tc,
                                   std::vector<KeyValue>& kv) {
  if (!tj.bpe || !tj.bpe->byte_fallback) {
    return Error(ErrorKind::NotSupported, "is not a BPE model with byte_fallback, which llama.cpp's converter reads for " + c.hf_class)
        .with_file(folder.path_of("tokenizer.json"));
  }
  SW_ASSIGN_OR_RETURN(Vocab v, gemma4_vocab(folder, c, tj, tc));
  const auto n_vocab = static_cast<std::uint32_t>(v.tokens.size());
  kv.push_back({"tokenizer.ggml.model", Value::string(std::string(c.arch->bpe_tokenizer_model))});
  kv.push_back({"tokenizer.ggml.tokens", string_array(std::move(v.tokens))});
  kv.push_back({"tokenizer.ggml.scores", scalar_array(ValueType::FLOAT32, v.scores, Value::f32)});
  kv.push_back({"tokenizer.ggml.token_type", scalar_array(ValueType::INT32, v.types, Value::i32)});
  kv.push_back({"tokenizer.ggml.merges", string_array(tj.bpe->merges)});
  SW_RETURN_IF_ERROR(add_special(folder, c, tj, tc, n_vocab, kv));
  std::erase_if(kv, [](const KeyValue& k) { return k.key == "tokenizer.ggml.add_bos_token"; });
  kv.push_back({"tokenizer.ggml.add_space_prefix", Value::boolean(false)});
  kv.push_back({"tokenizer.ggml.add_bos_token", Value::boolean(true)});
  return Status::ok();
}

}  // namespace

Status add_vocabulary(const Folder& folder, const ModelConfig& config, const GgufOptions& options, std::vector<KeyValue>& kv) {
  SW_ASSIGN_OR_RETURN(TokenizerJson tj, read_tokenizer_json(folder));
  SW_ASSIGN_OR_RETURN(TokenizerConfig tc, read_tokenizer_config(folder));
  if (!config.arch->bpe_tokenizer_model.empty()) return add_bpe_sentencepiece_vocab(folder, config, tj, tc, kv);
  SW_ASSIGN_OR_RETURN(const bool sentencepiece, has_model_file(folder, "tokenizer.model"));
  if (sentencepiece) {
    SW_ASSIGN_OR_RETURN(Vocab v, sentencepiece_vocab(folder, config, tc));
    SW_RETURN_IF_ERROR(check_byte_pieces(v, folder.path_of("tokenizer.model")));
    const auto n_vocab = static_cast<std::uint32_t>(v.tokens.size());
    add_llama_vocab(std::move(v), kv);
    SW_RETURN_IF_ERROR(add_special(folder, config, tj, tc, n_vocab, kv));
  } else if (tj.bpe && tj.bpe->byte_fallback) {
    if (!tj.bpe->sentencepiece_space_prefix) {
      return Error(ErrorKind::NotSupported, "a BPE model with byte_fallback whose " + tj.bpe->pre_description +
                                                " does not split text as SentencePiece does (known: Metaspace without splitting; "
                                                "Prepend and Replace normalizers)")
          .with_file(folder.path_of("tokenizer.json"));
    }
    SW_ASSIGN_OR_RETURN(Vocab v, sentencepiece_bpe_vocab(folder, config, tj));
    SW_RETURN_IF_ERROR(check_byte_pieces(v, folder.path_of("tokenizer.json")));
    const auto n_vocab = static_cast<std::uint32_t>(v.tokens.size());
    add_llama_vocab(std::move(v), kv);
    SW_RETURN_IF_ERROR(add_special(folder, config, tj, tc, n_vocab, kv));
    kv.push_back({"tokenizer.ggml.add_space_prefix", Value::boolean(*tj.bpe->sentencepiece_space_prefix)});
    return Status::ok();
  } else if (tj.bpe) {
    std::string pre = options.bpe_pre;
    if (pre.empty()) {
      const PreTokenizerHints hints{config.hf_class, tc.clean_up_tokenization_spaces};
      pre = identify_pre_tokenizer(tj.bpe->pre_shape, hints);
    }
    if (pre.empty()) {
      return Error(ErrorKind::NotSupported, "tokenizer.json's pre_tokenizer " + describe_pre_tokenizer(tj.bpe->pre_shape) +
                                                " is not one llama.cpp splits text as (docs/GGUF.md lists those it does); name "
                                                "llama.cpp's pre-tokenizer to use it anyway (bpe_pre)")
          .with_file(folder.path_of("tokenizer.json"));
    }
    SW_ASSIGN_OR_RETURN(Vocab v, bpe_vocab(folder, config, tj));
    kv.push_back({"tokenizer.ggml.model", Value::string("gpt2")});
    kv.push_back({"tokenizer.ggml.pre", Value::string(std::move(pre))});
    kv.push_back({"tokenizer.ggml.tokens", string_array(std::move(v.tokens))});
    kv.push_back({"tokenizer.ggml.token_type", scalar_array(ValueType::INT32, v.types, Value::i32)});
    kv.push_back({"tokenizer.ggml.merges", string_array(tj.bpe->merges)});
    SW_RETURN_IF_ERROR(add_special(folder, config, tj, tc, std::nullopt, kv));
  } else {
    return Error(ErrorKind::FileNotFound, tj.present ? "tokenizer.json holds no BPE model and there is no tokenizer.model"
                                                     : "no tokenizer.model (SentencePiece) or tokenizer.json (byte-level BPE)")
        .with_file(folder.name());
  }
  if (config.arch->spm_space_prefix && sentencepiece) {
    // Gemma's SentencePiece model adds no dummy prefix: llama.cpp's converter says so for it.
    kv.push_back({"tokenizer.ggml.add_space_prefix", Value::boolean(*config.arch->spm_space_prefix)});
  } else if (tc.add_prefix_space) {
    kv.push_back({"tokenizer.ggml.add_space_prefix", Value::boolean(*tc.add_prefix_space)});
  }
  return Status::ok();
}

}  // namespace safeweights::hf
