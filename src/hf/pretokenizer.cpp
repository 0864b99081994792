// The table of llama.cpp's pre-tokenizers by structure, and the matcher (hf/pretokenizer.h).
#include "hf/pretokenizer.h"

#include <algorithm>

#include "safeweights/text.h"

namespace safeweights::hf {
namespace {

// Split patterns as tokenizer.json files spell them. Where llama.cpp's loader (llama-vocab.cpp) runs an
// adapted form ((?i:...) written out case by case, for its regex engine), its comment quotes the
// tokenizer.json original, which is what is listed here.
constexpr std::string_view kLlama3 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen2 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen35 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kJais2 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})re";
constexpr std::string_view kTekken =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// OpenAI's o200k (gpt-4o, gpt-oss).
constexpr std::string_view kO200k =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kTinyAyaDigits = R"re(\d{1,3}(?=(?:\d{3})*\b))re";
constexpr std::string_view kSeedCoder =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kExaoneMoe =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)re";
constexpr std::string_view kMiniCpm5 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kUfakzeka = R"re([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kDigits3 = R"re(\p{N}{1,3})re";
constexpr std::string_view kCjkKana = "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+";  // [一-龥぀-ゟ゠-ヿ]+
constexpr std::string_view kDeepseekV3 =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kFalconDigits = "[0-9][0-9][0-9]";
// Spark X2.5: DeepSeek V3's third Split with newlines one by one and punctuation without a line end.
constexpr std::string_view kSpark =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)re";
// DeepSeek Coder (1): line ends, letters, punctuation, CJK and Hangul, then digits one by one.
constexpr std::string_view kCjkHangul = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+";  // [一-龥ࠀ-一가-퟿]+
// BLOOM: anything but spaces and sentence punctuation, with one leading space.
constexpr std::string_view kBloom = " ?[^(\\s|[.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c])]+";
// LLaDA, Ling (bailingmoe): possessive quantifiers.
constexpr std::string_view kBailing =
    R"re('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re";
// Laguna: runs of line ends joined to what follows, then Qwen2's regex.
constexpr std::string_view kLagunaLines = R"re((?:\r?\n)+(?!\r?\n))re";
// Kimi K2 and later (tokenizer.json form): Han runs apart, o200k's letters without Han.
constexpr std::string_view kKimi =
    R"re([\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

PreTokenizerStep split(std::string_view regex) { return split_step("Isolated", false, true, regex); }
PreTokenizerStep byte_level_alone() { return byte_level_step(false, false); }  // after Splits: bytes only
PreTokenizerStep byte_level_gpt2() { return byte_level_step(false, true); }    // with GPT-2's own regex
PreTokenizerStep each_digit() { return digits_step(true); }
// A Split that keeps what its pattern matches and drops the rest: the same pieces as an Isolated one
// when the pattern matches every character, as these patterns' final \s+ and [^\s\p{L}\p{N}]+ make
// sure (MiniMax M2's and Granite 4.1's files spell o200k and Llama 3 so).
PreTokenizerStep split_kept(std::string_view regex) { return split_step("Removed", true, true, regex); }

// One tokenizer.json structure llama.cpp splits as a name of its loader does, with the loader's settings
// for that name that matter when choosing among names that split alike (llama-vocab.cpp: ignore_merges,
// clean_spaces).
struct Row {
  std::string_view name;
  std::vector<PreTokenizerStep> steps;
  bool nfc = false;                             // the family's files carry an NFC normalizer (llama.cpp does not normalize;
                                                // text already in NFC, the usual case, splits the same)
  bool ignore_merges = false;                   // llama.cpp looks a whole word up before merging
  bool clean_spaces = true;                     // llama.cpp's detokenizer cleans spaces
  std::vector<std::string_view> families = {};  // config.json classes (prefixes) this name is for
};

// Every structure established, each under the names llama.cpp's loader gives the same regexes. In a
// group, the first row is the name of its most common models. Rows are facts from llama-vocab.cpp and
// published tokenizer.json files; tests/clients/test_pretokenizers.py checks, for each, that llama.cpp
// with the name tokenizes as the tokenizers library does with the structure.
const std::vector<Row>& rows() {
  static const std::vector<Row> table = {
      // GPT-2's ByteLevel with its own regex: gpt-2 (also mpt, olmo, jais, phi-2, trillion, exaone4...).
      {"gpt-2", {byte_level_gpt2()}},
      // Digits, then GPT-2's ByteLevel: StarCoder 2, SmolLM, Refact, Command-R, CodeShell, EXAONE 3,
      // Minerva, Mellum 2 (one regex list in llama.cpp; clean_spaces differs).
      {"smollm", {each_digit(), byte_level_gpt2()}, false, false, false},
      {"starcoder", {each_digit(), byte_level_gpt2()}, false, false, true, {"Starcoder2", "GPTBigCode"}},
      {"command-r", {each_digit(), byte_level_gpt2()}, false, false, false, {"Cohere"}},
      {"exaone", {each_digit(), byte_level_gpt2()}, false, false, true, {"Exaone"}},
      // Falcon: Punctuation, GPT-2's ByteLevel, Digits, three-digit groups.
      {"falcon", {punctuation_step("Contiguous"), byte_level_gpt2(), digits_step(false), split(kFalconDigits)}, false, false, true},
      // Llama 3 (ignore_merges); DBRX and Smaug without it; GLM-4 (ignore_merges, no BOS).
      {"llama-bpe", {split(kLlama3), byte_level_alone()}, false, true, true},
      {"glm4", {split(kLlama3), byte_level_alone()}, false, true, true, {"Glm", "GLM"}},
      {"dbrx", {split(kLlama3), byte_level_alone()}, false, false, true},
      {"llama-bpe", {split_kept(kLlama3), byte_level_alone()}, false, true, true},
      {"dbrx", {split_kept(kLlama3), byte_level_alone()}, false, false, true},  // Granite 4.1, OLMo 3, Phi-4
      {"chatglm-bpe", {split(kLlama3), byte_level_alone()}, false, false, true, {"ChatGLM", "Glm", "GLM"}},
      {"jais-2", {split(kJais2), byte_level_alone()}},
      // Qwen 1.5 to 3 (NFC); StableLM 2, Hunyuan, Solar Open, Grok 2 use the same regex.
      {"qwen2", {split(kQwen2), byte_level_alone()}, true, false, false},
      {"stablelm2", {split(kQwen2), byte_level_alone()}, false, false, true, {"StableLm"}},
      {"qwen35", {split(kQwen35), byte_level_alone()}, true, false, false},
      {"tekken", {split(kTekken), byte_level_alone()}, false, true, false},
      // o200k: gpt-4o, gpt-oss, Llama 4, MiniMax M2.
      {"gpt-4o", {split(kO200k), byte_level_alone()}, false, false, false},
      {"minimax-m2", {split_kept(kO200k), byte_level_alone()}, false, false, false, {"MiniMax"}},
      {"tiny_aya", {split(kTinyAyaDigits), split(kO200k), byte_level_alone()}, false, false, false},
      {"seed-coder", {split(kSeedCoder), byte_level_alone()}, false, false, false},
      {"exaone-moe", {split(kExaoneMoe), byte_level_alone()}, false, false, true},
      {"minicpm5", {split(kDigits3), split(kMiniCpm5), byte_level_alone()}, false, true, true},
      {"ufakzeka", {split(kUfakzeka), byte_level_alone()}, false, false, false},
      // DeepSeek V3 / R1 (also Hunyuan dense, JoyAI, Hy v4).
      {"deepseek-v3", {split(kDigits3), split(kCjkKana), split(kDeepseekV3), byte_level_alone()}, false, false, false},
      {"spark2_5", {split(kDigits3), split(kCjkKana), split(kSpark), each_digit(), byte_level_alone()}, false, false, false},
      {"deepseek-coder",
       {split(R"re([\r\n])re"), split(R"re(\s?\p{L}+)re"), split(R"re(\s?\p{P}+)re"), split(kCjkHangul), each_digit(), byte_level_alone()},
       false,
       false,
       false},
      // BLOOM; Poro and GPT-3 Finnish share llama.cpp's regex without cleaning spaces.
      {"bloom", {split(kBloom), byte_level_alone()}, false, false, true},
      {"poro-chat", {split(kBloom), byte_level_alone()}, false, false, false},
      {"bailingmoe", {split(kBailing), byte_level_alone()}, false, false, false},
      {"laguna", {split_step("MergedWithNext", false, true, kLagunaLines), split(kQwen2), byte_level_alone()}, false, false, false},
      {"kimi-k2", {split(kKimi), byte_level_alone()}, false, false, false},
  };
  return table;
}

// Literal CR, LF and tab in a pattern mean what \r, \n and \t mean: one spelling for comparing.
std::string canonical_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size());
  for (char c : p) {
    if (c == '\r') {
      out += "\\r";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out;
}

bool is_family(const Row& r, std::string_view hf_class) {
  for (std::string_view f : r.families) {
    if (hf_class.starts_with(f)) return true;
  }
  return false;
}

// How well a row's llama.cpp settings agree with the file, for choosing among rows that split alike.
int agreement(const Row& r, const PreTokenizerShape& shape, const PreTokenizerHints& hints) {
  int score = 0;
  if (is_family(r, hints.hf_class)) score += 4;
  if (r.ignore_merges == shape.ignore_merges) score += 2;
  if (hints.clean_up_tokenization_spaces && r.clean_spaces == *hints.clean_up_tokenization_spaces) score += 1;
  return score;
}

// At most `limit` bytes of `s`, cut at a UTF-8 character boundary, with "..." when cut.
std::string shortened(std::string_view s, std::size_t limit) {
  if (s.size() <= limit) return std::string(s);
  std::size_t end = limit;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return std::string(s.substr(0, end)) + "...";
}

std::string describe_step(const PreTokenizerStep& s) {
  std::string out = s.type + "(" + s.args;
  if (!s.pattern.empty()) out += " \"" + shortened(s.pattern, 60) + "\"";
  return out + ")";
}

}  // namespace

PreTokenizerStep split_step(std::string_view behavior, bool invert, bool is_regex, std::string_view pattern) {
  std::string args(behavior);
  if (invert) args += ", invert";
  args += is_regex ? ", Regex" : ", String";
  return {"Split", std::move(args), canonical_pattern(pattern)};
}

PreTokenizerStep byte_level_step(bool add_prefix_space, bool use_regex) {
  std::string args = add_prefix_space ? "add_prefix_space, " : "";
  args += use_regex ? "use_regex=true" : "use_regex=false";
  return {"ByteLevel", std::move(args), {}};
}

PreTokenizerStep digits_step(bool individual_digits) {
  return {"Digits", individual_digits ? "individual_digits=true" : "individual_digits=false", {}};
}

PreTokenizerStep punctuation_step(std::string_view behavior) { return {"Punctuation", std::string(behavior), {}}; }

PreTokenizerStep other_step(std::string_view type) { return {std::string(type), {}, {}}; }

std::string_view identify_pre_tokenizer(const PreTokenizerShape& shape, const PreTokenizerHints& hints) {
  const Row* best = nullptr;
  int best_score = -1;
  for (const Row& r : rows()) {
    if (!shape.normalizer.empty() && !(shape.normalizer == "NFC" && r.nfc)) continue;
    if (shape.steps != r.steps) continue;
    const int score = agreement(r, shape, hints);
    if (score > best_score) {
      best = &r;
      best_score = score;
    }
  }
  return best ? best->name : std::string_view();
}

std::string describe_pre_tokenizer(const PreTokenizerShape& shape) {
  std::string out;
  if (shape.steps.empty()) {
    out = "null";
  } else if (shape.steps.size() == 1) {
    out = describe_step(shape.steps[0]);
  } else {
    out = "Sequence[";
    for (std::size_t i = 0; i < shape.steps.size(); ++i) out += (i ? ", " : "") + describe_step(shape.steps[i]);
    out += "]";
  }
  if (!shape.normalizer.empty()) out += " after the normalizer " + shape.normalizer;
  return printable(out);
}

std::vector<std::string_view> known_pre_tokenizers() {
  std::vector<std::string_view> names;
  for (const Row& r : rows()) {
    if (std::find(names.begin(), names.end(), r.name) == names.end()) names.push_back(r.name);
  }
  return names;
}

}  // namespace safeweights::hf
