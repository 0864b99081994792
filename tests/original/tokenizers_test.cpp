// The tokenizer readers of original downloads: tiktoken rank files (Llama 3) and tekken.json (Mistral)
// to transformers' tokenizer files. Known answers for the pieces (base64, the byte-level spelling, the
// merges), and every refusal's message. Exactness against transformers, tiktoken and tokenizers on a
// trained vocabulary is tests/clients/test_tiktoken_tokenizers.py's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "original/bpe_ranks.h"
#include "original/hf_tokenizer_files.h"
#include "original/tekken.h"
#include "original/tiktoken.h"
#include "test_util.h"

using namespace safeweights;
using namespace safeweights::original;

namespace {

std::string base64(std::string_view bytes) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t group = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) group |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) group |= static_cast<unsigned char>(bytes[i + 2]);
    out.push_back(alphabet[(group >> 18) & 63]);
    out.push_back(alphabet[(group >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? alphabet[(group >> 6) & 63] : '=');
    out.push_back(i + 2 < bytes.size() ? alphabet[group & 63] : '=');
  }
  return out;
}

// The 256 single bytes at ranks 0..255, then `extra` at 256, 257, ...
std::vector<std::string> byte_vocab(const std::vector<std::string>& extra) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  return tokens;
}

std::string rank_file(const std::vector<std::string>& tokens, std::string_view eol = "\n") {
  std::string text;
  for (std::size_t rank = 0; rank < tokens.size(); ++rank) {
    text += base64(tokens[rank]);
    text += ' ';
    text += std::to_string(rank);
    text += eol;
  }
  return text;
}

const TiktokenOptions kLlama3{.version = LlamaTokenizerVersion::Llama3, .instruct = false, .model_max_length = 8192, .chat_template = std::nullopt};

Result<HfTokenizerFiles> from_rank_text(const std::string& text, const TiktokenOptions& options = kLlama3) {
  auto source = swt::mem(text, "tokenizer.model");
  return tokenizer_files_from_tiktoken(*source, "tokenizer.model", options);
}

std::string outcome(const Result<HfTokenizerFiles>& r) { return r ? std::string("OK") : r.error().to_string(); }

// A source that claims more bytes than any rank file holds, and has none.
class HugeSource final : public ByteSource {
 public:
  const std::string& name() const noexcept override { return name_; }
  std::uint64_t size() const noexcept override { return 1ull << 34; }
  Status read_at(std::uint64_t, std::span<std::byte>) const override { return Error(ErrorKind::IoError, "not read"); }

 private:
  std::string name_ = "huge";
};

}  // namespace

TEST(Base64, DecodesStandardPaddedText) {
  EXPECT_EQ(decode_base64(""), "");
  EXPECT_EQ(decode_base64("YQ=="), "a");
  EXPECT_EQ(decode_base64("YWI="), "ab");
  EXPECT_EQ(decode_base64("YWJj"), "abc");
  EXPECT_EQ(decode_base64("+/8="), std::string("\xfb\xff", 2));
  EXPECT_EQ(decode_base64("AA=="), std::string(1, '\0'));
}

TEST(Base64, RefusesEverythingElse) {
  for (std::string_view bad : {"YQ", "YQ=", "Y===", "YR==", "YWJ=", "a!==", "=AAA", "YQ==YQ==", "YW-j", "YW_j", "YW j"}) {
    EXPECT_FALSE(decode_base64(bad).has_value()) << bad;
  }
}

TEST(ByteLevel, SpellsBytesAsGpt2Does) {
  std::string out;
  append_byte_level(out, std::string("a \n\xad\xff\x7f\x00", 7));
  // 'a' itself; space U+0120; LF U+010A; 0xAD U+0143 (the 68th unprintable byte); 0xFF itself; DEL U+0121; NUL U+0100.
  EXPECT_EQ(out, "a\xc4\xa0\xc4\x8a\xc5\x83\xc3\xbf\xc4\xa1\xc4\x80");
}

TEST(Merges, EverySplitIntoTwoTokensOrderedByTheLeftRank) {
  const std::vector<std::string> tokens = {"a", "b", "c", "ab", "bc", "abc", "ca"};
  auto merges = derive_merges(tokens, "t");
  ASSERT_TRUE(merges) << merges.error().to_string();
  std::vector<std::pair<std::uint32_t, std::uint32_t>> got;
  for (const Merge& m : *merges) got.emplace_back(m.left, m.right);
  const std::vector<std::pair<std::uint32_t, std::uint32_t>> want = {{0, 1}, {1, 2}, {0, 4}, {3, 2}, {2, 0}};
  EXPECT_EQ(got, want);
}

TEST(Merges, RefuseRepeatedEmptyAndOversizedTokens) {
  EXPECT_EQ(derive_merges(std::vector<std::string>{"a", "b", "a"}, "t").error().to_string(),
            "t: InvalidModelFolder: ranks 0 and 2 hold the same bytes: each token has one rank");
  EXPECT_EQ(derive_merges(std::vector<std::string>{"a", ""}, "t").error().to_string(),
            "t: InvalidModelFolder: rank 1 holds 0 bytes: a token holds 1 to 4096");
  EXPECT_EQ(derive_merges(std::vector<std::string>{std::string(4097, 'a')}, "t").error().to_string(),
            "t: InvalidModelFolder: rank 0 holds 4097 bytes: a token holds 1 to 4096");
}

TEST(Merges, AVocabularyOfRunsStopsAtTheCapInsteadOfGrowingQuadratically) {
  // "a", "aa", ..., a run of 4096: every split of every run is a merge (8.4 M merges spelling 23 GB).
  std::vector<std::string> tokens;
  for (std::size_t n = 1; n <= kMaxTokenBytes; ++n) tokens.emplace_back(n, 'a');
  auto merges = derive_merges(tokens, "t");
  ASSERT_FALSE(merges);
  EXPECT_EQ(merges.error().kind(), ErrorKind::ResourceLimit);
  EXPECT_NE(merges.error().message().find("the merges this vocabulary implies are more than 4194304 or spell more than 64 MiB"), std::string::npos)
      << merges.error().to_string();
}

TEST(Merges, AChainOfPrefixesGivesOneMergeEach) {
  // "x", "xa", "xaa", ...: every prefix of a token is a token but only one suffix ("a"), so each token
  // has one merge; finding them costs the chain's bytes, not its length cubed.
  std::vector<std::string> tokens = {"a", "x"};
  constexpr std::size_t kLongest = 2048;
  for (std::size_t n = 1; n < kLongest; ++n) tokens.push_back("x" + std::string(n, 'a'));
  auto merges = derive_merges(tokens, "t");
  ASSERT_TRUE(merges) << merges.error().to_string();
  ASSERT_EQ(merges->size(), kLongest - 1);
  for (std::size_t i = 0; i < merges->size(); ++i) {
    EXPECT_EQ((*merges)[i].left, i + 1);  // "x" + "a" * i
    EXPECT_EQ((*merges)[i].right, 0u);    // "a"
  }
}

TEST(Tiktoken, AcceptsTheLineEndingsAndSpacingTiktokenAccepts) {
  const auto tokens = byte_vocab({"ab"});
  const auto lf = from_rank_text(rank_file(tokens));
  ASSERT_TRUE(lf) << outcome(lf);
  for (std::string_view eol : {"\r\n", "\r", "\n\n"}) {
    auto other = from_rank_text(rank_file(tokens, eol));
    ASSERT_TRUE(other) << outcome(other);
    EXPECT_EQ(other->tokenizer_json, lf->tokenizer_json);
  }
  auto spaced = rank_file(tokens);  // fields split at runs of blanks, as bytes.split() splits them
  spaced.replace(spaced.find("YQ== 97\n"), 7, "\tYQ==  \t 97");
  auto blanks = from_rank_text(spaced);
  ASSERT_TRUE(blanks) << outcome(blanks);
  EXPECT_EQ(blanks->tokenizer_json, lf->tokenizer_json);
  auto no_final_newline = rank_file(tokens);
  no_final_newline.pop_back();
  auto last = from_rank_text(no_final_newline);
  ASSERT_TRUE(last) << outcome(last);
  EXPECT_EQ(last->tokenizer_json, lf->tokenizer_json);
}

TEST(Tiktoken, ShuffledLinesGiveTheSameFiles) {
  const auto tokens = byte_vocab({"ab", "abc", "bc"});
  std::string reversed;
  for (std::size_t rank = tokens.size(); rank-- > 0;) reversed += base64(tokens[rank]) + " " + std::to_string(rank) + "\n";
  auto a = from_rank_text(rank_file(tokens)), b = from_rank_text(reversed);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->tokenizer_json, b->tokenizer_json);
}

TEST(Tiktoken, RefusesMalformedFilesNamingTheLineAndTheRule) {
  const auto good = rank_file(byte_vocab({"ab"}));
  auto with_line = [&](std::string_view line) { return std::string(line) + "\n" + good; };
  EXPECT_EQ(outcome(from_rank_text(with_line("YQ"))),
            "tokenizer.model: InvalidModelFolder: line 1: a line holds the token's base64 and its rank, separated by a space");
  EXPECT_EQ(outcome(from_rank_text(with_line("Y!== 300"))), "tokenizer.model: InvalidModelFolder: line 1: the token is not valid base64");
  EXPECT_EQ(outcome(from_rank_text(with_line("YWJj -3"))),
            "tokenizer.model: InvalidModelFolder: line 1: the rank is not a decimal number below 10^9");
  EXPECT_EQ(outcome(from_rank_text(with_line("YWJj 1e3"))),
            "tokenizer.model: InvalidModelFolder: line 1: the rank is not a decimal number below 10^9");
  EXPECT_EQ(outcome(from_rank_text(with_line("YWJj 5 x"))),
            "tokenizer.model: InvalidModelFolder: line 1: a line holds the token's base64 and its rank, separated by a space");
  EXPECT_EQ(outcome(from_rank_text(good + "YWJj 7\n")), "tokenizer.model: InvalidModelFolder: line 258: rank 7 again (first on line 8)");
  EXPECT_EQ(outcome(from_rank_text(good + "YWJj 300\n")), "tokenizer.model: InvalidModelFolder: rank 257 is missing: ranks run 0..300 without a gap");
  EXPECT_EQ(outcome(from_rank_text(good + "YWJj 2000000\n")),
            "tokenizer.model: InvalidModelFolder: line 258: rank 2000000 is above the most tokens a rank file holds");
  EXPECT_EQ(outcome(from_rank_text(good + "YQ== 257\n")),
            "tokenizer.model: InvalidModelFolder: ranks 97 and 257 hold the same bytes: each token has one rank");
  EXPECT_EQ(outcome(from_rank_text("\n\r\n")), "tokenizer.model: InvalidModelFolder: holds no tokens");
  EXPECT_EQ(outcome(from_rank_text(rank_file(byte_vocab({"<|eot_id|>"})))),
            "tokenizer.model: InvalidModelFolder: rank 256 spells the special token <|eot_id|>: special tokens follow the ranks");
}

TEST(Readers, RefuseAFileOfGigabytesBeforeReadingIt) {
  HugeSource huge;
  auto r = tokenizer_files_from_tiktoken(huge, "tokenizer.model", kLlama3);
  EXPECT_EQ(outcome(r), "tokenizer.model: ResourceLimit: larger than 64 MiB (17179869184 bytes): refusing to read it into memory");
  auto tekken = tokenizer_files_from_tekken(huge, "tekken.json", TekkenOptions{.model_max_length = 1, .chat_template = std::nullopt});
  EXPECT_EQ(outcome(tekken), "tekken.json: ResourceLimit: larger than 64 MiB (17179869184 bytes): refusing to read it into memory");
}

TEST(Tiktoken, RefusesMoreLinesThanTheCap) {
  std::string text;
  text.reserve(16u << 20);
  for (std::size_t i = 0; i <= (1u << 20); ++i) text += "YQ== " + std::to_string(i) + "\n";
  EXPECT_EQ(outcome(from_rank_text(text)), "tokenizer.model: ResourceLimit: more than 1048576 tokens: a rank file holds at most that many");
}

TEST(Tiktoken, SpecialTokensIdsAndConfigPerVersion) {
  const auto tokens = byte_vocab({"ab", "abc"});
  auto base = from_rank_text(rank_file(tokens));
  ASSERT_TRUE(base) << outcome(base);
  EXPECT_EQ(base->vocab_size, 258u + 256u);
  EXPECT_EQ(base->bos_id, 258u);
  EXPECT_EQ(base->eos_id, 259u);
  EXPECT_FALSE(base->pad_id);
  EXPECT_TRUE(base->eos_ids.empty());
  EXPECT_NE(base->tokenizer_json.find("\"id\": 266,\n      \"content\": \"<|reserved_special_token_4|>\""), std::string::npos);
  EXPECT_NE(base->tokenizer_json.find("\"content\": \"<|reserved_special_token_250|>\""), std::string::npos);
  EXPECT_NE(base->tokenizer_config_json.find("\"eos_token\": \"<|end_of_text|>\""), std::string::npos);
  EXPECT_EQ(base->tokenizer_config_json.find("chat_template"), std::string::npos);
  EXPECT_EQ(base->special_tokens_map_json,
            "{\n  \"bos_token\": {\n    \"content\": \"<|begin_of_text|>\",\n    \"lstrip\": false,\n    \"normalized\": false,\n"
            "    \"rstrip\": false,\n    \"single_word\": false\n  },\n  \"eos_token\": {\n    \"content\": \"<|end_of_text|>\",\n"
            "    \"lstrip\": false,\n    \"normalized\": false,\n    \"rstrip\": false,\n    \"single_word\": false\n  }\n}\n");

  TiktokenOptions v31 = kLlama3;
  v31.version = LlamaTokenizerVersion::Llama3_1;
  v31.instruct = true;
  v31.model_max_length = 131072;
  v31.chat_template = "{{ bos_token }}\"x\"\n";
  auto instruct = from_rank_text(rank_file(tokens), v31);
  ASSERT_TRUE(instruct) << outcome(instruct);
  EXPECT_EQ(instruct->eos_id, 258u + 9u);
  EXPECT_EQ(instruct->eos_ids, (std::vector<std::uint32_t>{259, 266, 267}));
  EXPECT_NE(instruct->tokenizer_json.find("\"id\": 262,\n      \"content\": \"<|finetune_right_pad_id|>\""), std::string::npos);
  EXPECT_NE(instruct->tokenizer_json.find("\"content\": \"<|reserved_special_token_247|>\""), std::string::npos);
  EXPECT_NE(instruct->tokenizer_config_json.find("\"chat_template\": \"{{ bos_token }}\\\"x\\\"\\n\",\n"), std::string::npos);
  EXPECT_NE(instruct->tokenizer_config_json.find("\"eos_token\": \"<|eot_id|>\""), std::string::npos);
  EXPECT_NE(instruct->tokenizer_config_json.find("\"model_max_length\": 131072,"), std::string::npos);
}

TEST(TokenizerJson, MergesAndVocabularyInTokenizersForm) {
  auto files = from_rank_text(rank_file(byte_vocab({" a", "bc", " abc"})));
  ASSERT_TRUE(files) << outcome(files);
  const std::string& json = files->tokenizer_json;
  EXPECT_NE(json.find("\"\xc4\xa0\x61\": 256,\n      \"bc\": 257,\n      \"\xc4\xa0\x61\x62\x63\": 258\n    },"), std::string::npos);
  EXPECT_NE(json.find("\"merges\": [\n      [\n        \"\xc4\xa0\",\n        \"a\"\n      ],\n      [\n        \"b\",\n        \"c\"\n      ],\n"
                      "      [\n        \"\xc4\xa0\x61\",\n        \"bc\"\n      ]\n    ]\n  }\n}"),
            std::string::npos);
  EXPECT_EQ(json.back(), '}');  // tokenizers writes no final newline
}

// tekken.json, written here: `specials` at ranks 0.., the 256 bytes and `extra` as the vocabulary.
std::string tekken_text(const std::vector<std::string>& specials, const std::vector<std::string>& extra, std::string_view config_extra = "") {
  std::string text = R"({"config": {"pattern": "\\p{N}| ?\\p{L}+|\\s+", "num_vocab_tokens": 0)";
  text += config_extra;
  text += R"(}, "vocab": [)";
  const auto tokens = byte_vocab(extra);
  for (std::size_t rank = 0; rank < tokens.size(); ++rank) {
    if (rank) text += ", ";
    text += R"({"rank": )" + std::to_string(rank) + R"(, "token_bytes": ")" + base64(tokens[rank]) + R"(", "token_str": null})";
  }
  text += R"(], "special_tokens": [)";
  for (std::size_t rank = 0; rank < specials.size(); ++rank) {
    if (rank) text += ", ";
    text += R"({"rank": )" + std::to_string(rank) + R"(, "token_str": ")" + specials[rank] + R"(", "is_control": true})";
  }
  return text + "]}";
}

const std::vector<std::string> kSpecials = {"<unk>", "<s>", "</s>", "[INST]", "[/INST]", "<pad>"};

Result<HfTokenizerFiles> from_tekken_text(const std::string& text) {
  auto source = swt::mem(text, "tekken.json");
  return tokenizer_files_from_tekken(*source, "tekken.json", TekkenOptions{.model_max_length = 1024, .chat_template = std::nullopt});
}

TEST(Tekken, SpecialsFirstThenTheVocabularyCutAndOffset) {
  auto files = from_tekken_text(tekken_text(kSpecials, {"ab", "abc", "cd"}, R"(, "default_vocab_size": 270, "default_num_special_tokens": 12)"));
  ASSERT_TRUE(files) << outcome(files);
  EXPECT_EQ(files->vocab_size, 270u);  // 12 specials and 258 of the 259 tokens: "cd" cut
  EXPECT_EQ(files->bos_id, 1u);
  EXPECT_EQ(files->eos_id, 2u);
  EXPECT_EQ(files->pad_id, 5u);
  const std::string& json = files->tokenizer_json;
  EXPECT_NE(json.find("\"vocab\": {\n      \"<unk>\": 0,\n      \"<s>\": 1,"), std::string::npos);
  EXPECT_NE(json.find("\"<SPECIAL_11>\": 11,\n      \"\xc4\x80\": 12,"), std::string::npos);
  EXPECT_NE(json.find("\"abc\": 269\n    },"), std::string::npos);
  EXPECT_EQ(json.find("\"cd\""), std::string::npos);
  EXPECT_NE(json.find("\"id\": 11,\n      \"content\": \"<SPECIAL_11>\""), std::string::npos);
  EXPECT_NE(json.find("\"Regex\": \"\\\\p{N}| ?\\\\p{L}+|\\\\s+\""), std::string::npos);
  EXPECT_NE(json.find("\"post_processor\": {\n    \"type\": \"ByteLevel\","), std::string::npos);
  // added_tokens_decoder sorts its keys as text, as json.dumps(sort_keys=True) does.
  const std::string& config = files->tokenizer_config_json;
  ASSERT_NE(config.find("\"11\": {"), std::string::npos);
  EXPECT_LT(config.find("\"11\": {"), config.find("\"2\": {"));
  EXPECT_NE(config.find("\"pad_token\": \"<pad>\""), std::string::npos);
  EXPECT_NE(config.find("\"unk_token\": \"<unk>\""), std::string::npos);
}

TEST(Tekken, RefusesMalformedFilesNamingTheRule) {
  auto error = [](const std::string& text) { return outcome(from_tekken_text(text)); };
  EXPECT_EQ(error("{"),
            "tekken.json: InvalidModelFolder: is not valid JSON: The JSON document has an improper structure: missing or superfluous commas, braces, "
            "missing keys, etc.");
  EXPECT_EQ(error(R"({"config": {"pattern": "x"}, "vocab": []})"),
            "tekken.json: NotSupported: has no special_tokens: the old tekken layout (mistral-common's built-in list) is not read");
  EXPECT_EQ(error(R"({"config": {}, "vocab": [], "special_tokens": []})"), "tekken.json: InvalidModelFolder: config.pattern is not a string");
  EXPECT_EQ(error(R"({"config": {"pattern": "x", "pattern": "y"}})"), "tekken.json: DuplicateKey: repeats the key `pattern` in config");
  EXPECT_EQ(error(tekken_text({"<unk>", "<s>"}, {})),
            "tekken.json: InvalidModelFolder: special_tokens lacks one of <s>, </s> and <unk>, which transformers names bos, eos and unk");
  EXPECT_EQ(error(tekken_text({"<unk>", "<s>", "</s>", "<s>"}, {})), "tekken.json: InvalidModelFolder: the special token `<s>` appears twice");
  EXPECT_EQ(error(tekken_text(kSpecials, {}, R"(, "default_vocab_size": 300)")),
            "tekken.json: InvalidModelFolder: config.default_vocab_size is 300, but the file holds 6 special tokens and 256 others");
  EXPECT_EQ(error(tekken_text(kSpecials, {}, R"(, "default_num_special_tokens": 3)")),
            "tekken.json: InvalidModelFolder: config.default_num_special_tokens is 3, but special_tokens holds 6");
  EXPECT_EQ(error(tekken_text(kSpecials, {"[INST]"})), "tekken.json: InvalidModelFolder: vocab[256] spells the special token `[INST]`");
  auto shuffled = tekken_text(kSpecials, {"ab"});
  shuffled.replace(shuffled.find(R"("rank": 256)"), 11, R"("rank": 999)");
  EXPECT_EQ(error(shuffled), "tekken.json: InvalidModelFolder: vocab[256] has rank 999: the ranks run 0, 1, ... in order");
  auto bad_bytes = tekken_text(kSpecials, {"ab"});
  bad_bytes.replace(bad_bytes.find(base64("ab")), 4, "Y!I=");
  EXPECT_EQ(error(bad_bytes), "tekken.json: InvalidModelFolder: vocab[256].token_bytes is not valid base64");
  auto bad_rank = tekken_text(kSpecials, {});
  bad_rank.replace(bad_rank.find(R"("rank": 3, "token_str")"), 9, R"("rank": 7)");
  EXPECT_EQ(error(bad_rank), "tekken.json: InvalidModelFolder: special_tokens[3] has rank 7: special ranks run 0..5");
}

TEST(Tekken, WithoutTheConfigSizesEveryTokenIsKeptAndThePadIsOptional) {
  auto files = from_tekken_text(tekken_text({"<unk>", "<s>", "</s>"}, {"ab"}));
  ASSERT_TRUE(files) << outcome(files);
  EXPECT_EQ(files->vocab_size, 3u + 257u);
  EXPECT_FALSE(files->pad_id);
  EXPECT_EQ(files->tokenizer_config_json.find("pad_token"), std::string::npos);
  EXPECT_EQ(files->special_tokens_map_json.find("pad_token"), std::string::npos);
  EXPECT_NE(files->tokenizer_json.find("\"ab\": 259\n"), std::string::npos);
}

TEST(Tekken, RefusesEntriesOfTheWrongType) {
  auto error = [](const std::string& text) { return outcome(from_tekken_text(text)); };
  EXPECT_EQ(error(R"({"config": {"pattern": "x"}, "vocab": {}, "special_tokens": [{"rank": 0, "token_str": "<s>"}]})"),
            "tekken.json: InvalidModelFolder: vocab is not an array");
  EXPECT_EQ(error(R"({"config": {"pattern": "x"}, "vocab": [], "special_tokens": [7]})"),
            "tekken.json: InvalidModelFolder: special_tokens[0] is not an object");
  EXPECT_EQ(error(R"({"config": {"pattern": "x"}, "vocab": [], "special_tokens": [{"rank": -1, "token_str": "<s>"}]})"),
            "tekken.json: InvalidModelFolder: special_tokens[0].rank is not a non-negative integer");
  EXPECT_EQ(error(R"({"config": {"pattern": "x"}, "vocab": [], "special_tokens": []})"),
            "tekken.json: InvalidModelFolder: special_tokens holds 0 entries: 1 to 65536 are read");
  EXPECT_EQ(error(R"([])"), "tekken.json: InvalidModelFolder: is not a JSON object");
}
