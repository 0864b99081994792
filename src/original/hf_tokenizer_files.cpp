// transformers' tokenizer files for a rank vocabulary (original/hf_tokenizer_files.h).
#include "original/hf_tokenizer_files.h"

#include <algorithm>
#include <string>
#include <vector>

#include "safeweights/text.h"

namespace safeweights::original {

namespace {

// Indented JSON as serde_json's pretty printer and Python's json.dumps(indent=2) both write it: one
// member or element a line, two spaces a level, ": " after a key, "[]" and "{}" when empty. Strings
// are escaped as json_quote() does, which is what both write for valid UTF-8 (non-ASCII kept).
class PrettyJson {
 public:
  PrettyJson& object() { return open('{'); }
  PrettyJson& array() { return open('['); }
  PrettyJson& end() {
    const Level level = open_.back();
    open_.pop_back();
    if (level.count > 0) newline();
    out_.push_back(level.bracket == '{' ? '}' : ']');
    return *this;
  }
  PrettyJson& key(std::string_view name) {
    next_line();
    out_ += json_quote(name);
    out_ += ": ";
    after_key_ = true;
    return *this;
  }
  PrettyJson& string(std::string_view value) { return raw(json_quote(value)); }
  PrettyJson& uint(std::uint64_t value) { return raw(std::to_string(value)); }
  PrettyJson& boolean(bool value) { return raw(value ? "true" : "false"); }
  PrettyJson& null() { return raw("null"); }
  PrettyJson& raw(std::string_view text) {
    before_value();
    out_ += text;
    return *this;
  }
  std::string& text() { return out_; }

 private:
  struct Level {
    char bracket;
    std::size_t count;
  };
  PrettyJson& open(char bracket) {
    before_value();
    out_.push_back(bracket);
    open_.push_back({bracket, 0});
    return *this;
  }
  void before_value() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!open_.empty()) next_line();
  }
  void next_line() {
    if (open_.back().count++ > 0) out_.push_back(',');
    newline();
  }
  void newline() {
    out_.push_back('\n');
    out_.append(open_.size() * 2, ' ');
  }

  std::string out_;
  std::vector<Level> open_;
  bool after_key_ = false;
};

std::string byte_level(std::string_view bytes) {
  std::string out;
  append_byte_level(out, bytes);
  return out;
}

// tokenizers' AddedToken fields, in its order; `with_special` false for special_tokens_map.json,
// whose objects transformers 4 wrote without it. `sorted` gives Python's sort_keys order.
void added_token_fields(PrettyJson& json, std::string_view content, bool with_special, bool sorted) {
  if (sorted) {
    json.key("content").string(content).key("lstrip").boolean(false).key("normalized").boolean(false);
    json.key("rstrip").boolean(false).key("single_word").boolean(false);
    if (with_special) json.key("special").boolean(true);
    return;
  }
  json.key("content").string(content).key("single_word").boolean(false).key("lstrip").boolean(false);
  json.key("rstrip").boolean(false).key("normalized").boolean(false).key("special").boolean(true);
}

void added_tokens(PrettyJson& json, const TokenizerJsonSpec& spec) {
  json.key("added_tokens").array();
  for (std::size_t i = 0; i < spec.specials.size(); ++i) {
    json.object().key("id").uint(spec.first_special_id + i);
    added_token_fields(json, spec.specials[i], true, false);
    json.end();
  }
  json.end();
}

void byte_level_processor(PrettyJson& json, bool add_prefix_space, bool trim_offsets, bool use_regex) {
  json.object().key("type").string("ByteLevel").key("add_prefix_space").boolean(add_prefix_space);
  json.key("trim_offsets").boolean(trim_offsets).key("use_regex").boolean(use_regex).end();
}

void pre_tokenizer(PrettyJson& json, std::string_view pattern) {
  json.key("pre_tokenizer").object().key("type").string("Sequence").key("pretokenizers").array();
  json.object().key("type").string("Split").key("pattern").object().key("Regex").string(pattern).end();
  json.key("behavior").string("Isolated").key("invert").boolean(false).end();
  byte_level_processor(json, false, true, false);
  json.end().end();
}

void template_piece(PrettyJson& json, const char* kind, std::string_view id, unsigned type_id) {
  json.object().key(kind).object().key("id").string(id).key("type_id").uint(type_id).end().end();
}

// ByteLevel(trim_offsets=False), then, with a BOS, TemplateProcessing(single="BOS $A",
// pair="BOS:0 $A:0 BOS:1 $B:1") as convert_llama_weights_to_hf.py's update_post_processor sets it.
void post_processor(PrettyJson& json, std::optional<std::string_view> bos, std::uint32_t bos_id) {
  json.key("post_processor");
  if (!bos) {
    byte_level_processor(json, true, false, true);
    return;
  }
  json.object().key("type").string("Sequence").key("processors").array();
  byte_level_processor(json, true, false, true);
  json.object().key("type").string("TemplateProcessing").key("single").array();
  template_piece(json, "SpecialToken", *bos, 0);
  template_piece(json, "Sequence", "A", 0);
  json.end().key("pair").array();
  template_piece(json, "SpecialToken", *bos, 0);
  template_piece(json, "Sequence", "A", 0);
  template_piece(json, "SpecialToken", *bos, 1);
  template_piece(json, "Sequence", "B", 1);
  json.end().key("special_tokens").object().key(*bos).object().key("id").string(*bos);
  json.key("ids").array().uint(bos_id).end().key("tokens").array().string(*bos).end();
  json.end().end().end();
  json.end().end();
}

void bpe_model(PrettyJson& json, const TokenizerJsonSpec& spec) {
  json.key("model").object().key("type").string("BPE").key("dropout").null().key("unk_token").null();
  json.key("continuing_subword_prefix").null().key("end_of_word_suffix").null().key("fuse_unk").boolean(false);
  json.key("byte_fallback").boolean(false).key("ignore_merges").boolean(true);
  json.key("vocab").object();
  if (spec.specials_in_vocab) {
    for (std::size_t i = 0; i < spec.specials.size(); ++i) json.key(spec.specials[i]).uint(spec.first_special_id + i);
  }
  std::vector<std::string> spelled(spec.tokens.size());
  for (std::size_t rank = 0; rank < spec.tokens.size(); ++rank) {
    spelled[rank] = byte_level(spec.tokens[rank]);
    json.key(spelled[rank]).uint(spec.first_rank_id + rank);
  }
  json.end().key("merges").array();
  for (const Merge& merge : spec.merges) json.array().string(spelled[merge.left]).string(spelled[merge.right]).end();
  json.end().end();
}

}  // namespace

std::string tokenizer_json(const TokenizerJsonSpec& spec) {
  PrettyJson json;
  json.object().key("version").string("1.0").key("truncation").null().key("padding").null();
  added_tokens(json, spec);
  json.key("normalizer").null();
  pre_tokenizer(json, spec.pattern);
  std::uint32_t bos_id = 0;
  if (spec.bos) {
    auto it = std::find(spec.specials.begin(), spec.specials.end(), *spec.bos);
    bos_id = spec.first_special_id + static_cast<std::uint32_t>(it - spec.specials.begin());
  }
  post_processor(json, spec.bos, bos_id);
  json.key("decoder");
  byte_level_processor(json, true, true, true);
  bpe_model(json, spec);
  json.end();
  return std::move(json.text());
}

std::string tokenizer_config_json(const TokenizerConfigSpec& spec) {
  // added_tokens_decoder's keys are the ids as strings, which sort_keys orders as text ("10" < "9").
  std::vector<std::pair<std::string, std::size_t>> ids;
  ids.reserve(spec.specials.size());
  for (std::size_t i = 0; i < spec.specials.size(); ++i) ids.emplace_back(std::to_string(spec.first_special_id + i), i);
  std::sort(ids.begin(), ids.end());
  PrettyJson json;
  json.object().key("added_tokens_decoder").object();
  for (const auto& [id, index] : ids) {
    json.key(id).object();
    added_token_fields(json, spec.specials[index], true, true);
    json.end();
  }
  json.end().key("bos_token").string(spec.bos);
  if (spec.chat_template) json.key("chat_template").string(*spec.chat_template);
  json.key("clean_up_tokenization_spaces").boolean(spec.clean_up_tokenization_spaces).key("eos_token").string(spec.eos);
  if (spec.model_input_names) json.key("model_input_names").array().string("input_ids").string("attention_mask").end();
  json.key("model_max_length").uint(spec.model_max_length);
  if (spec.pad) json.key("pad_token").string(*spec.pad);
  json.key("tokenizer_class").string("PreTrainedTokenizerFast");
  if (spec.unk) json.key("unk_token").string(*spec.unk);
  json.end();
  json.text().push_back('\n');
  return std::move(json.text());
}

std::string special_tokens_map_json(const TokenizerConfigSpec& spec) {
  PrettyJson json;
  json.object();
  auto named = [&](const char* key, std::optional<std::string_view> token) {
    if (!token) return;
    json.key(key).object();
    added_token_fields(json, *token, false, true);
    json.end();
  };
  named("bos_token", spec.bos);
  named("eos_token", spec.eos);
  named("pad_token", spec.pad);
  named("unk_token", spec.unk);
  json.end();
  json.text().push_back('\n');
  return std::move(json.text());
}

HfTokenizerFiles tokenizer_files(const TokenizerJsonSpec& tokenizer, const TokenizerConfigSpec& config) {
  HfTokenizerFiles files;
  files.tokenizer_json = tokenizer_json(tokenizer);
  files.tokenizer_config_json = tokenizer_config_json(config);
  files.special_tokens_map_json = special_tokens_map_json(config);
  return files;
}

}  // namespace safeweights::original
