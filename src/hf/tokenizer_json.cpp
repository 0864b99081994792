// tokenizer.json (Hugging Face tokenizers) and tokenizer_config.json (transformers) of a Llama-family
// folder: what llama.cpp's converter takes from them.
#include <array>
#include <filesystem>

#include "core/utf8.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"

namespace safeweights::hf {
namespace {

// The special-token kinds llama.cpp's SpecialVocab reads from tokenizer_config.json (cls is read for the
// post-processor's rules, not written: GGUF has no key for it).
constexpr std::array<std::string_view, 7> kSpecialTypes = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};
// chat_template.jinja or chat_template.json: the size of a large tokenizer_config.json's template at most.
constexpr std::uint64_t kMaxChatTemplateBytes = 4u << 20;

bool is_type(json::element e, std::string_view type) {
  auto t = JsonFile::member(e, "type");
  return e.type() == json::element_type::OBJECT && t && t->type() == json::element_type::STRING && json::as_string(*t) == type;
}

bool bool_is(json::element e, std::string_view key, bool want) {
  auto v = JsonFile::member(e, key);
  return v && v->type() == json::element_type::BOOL && v->get_bool().value_unsafe() == want;
}

std::optional<std::string_view> string_member(json::element e, std::string_view key) {
  auto v = JsonFile::member(e, key);
  if (!v || v->type() != json::element_type::STRING) return std::nullopt;
  return json::as_string(*v);
}

// A Split step; a malformed one (no pattern, behavior) is kept as "Split" alone, which matches nothing.
PreTokenizerStep split_of(json::element e) {
  auto pattern = JsonFile::member(e, "pattern");
  auto behavior = string_member(e, "behavior");
  if (!pattern || pattern->type() != json::element_type::OBJECT || !behavior) return other_step("Split");
  const bool invert = bool_is(e, "invert", true);
  if (auto regex = string_member(*pattern, "Regex")) return split_step(*behavior, invert, true, *regex);
  if (auto text = string_member(*pattern, "String")) return split_step(*behavior, invert, false, *text);
  return other_step("Split");
}

// The steps of one pre_tokenizer, a Sequence's flattened, with the tokenizers library's defaults for
// absent settings (ByteLevel use_regex true, Digits individual_digits false, Punctuation Isolated).
// Nesting is bounded by the JSON reader's depth limit.
void add_steps(json::element e, std::vector<PreTokenizerStep>& out) {
  const auto type = e.type() == json::element_type::OBJECT ? string_member(e, "type") : std::nullopt;
  if (!type) {
    out.push_back(other_step("?"));
  } else if (*type == "Sequence") {
    auto list = JsonFile::member(e, "pretokenizers");
    if (!list || list->type() != json::element_type::ARRAY) return out.push_back(other_step("Sequence"));
    for (auto step : json::as_array(*list)) add_steps(step, out);
  } else if (*type == "ByteLevel") {
    out.push_back(byte_level_step(bool_is(e, "add_prefix_space", true), !bool_is(e, "use_regex", false)));
  } else if (*type == "Split") {
    out.push_back(split_of(e));
  } else if (*type == "Digits") {
    out.push_back(digits_step(bool_is(e, "individual_digits", true)));
  } else if (*type == "Punctuation") {
    out.push_back(punctuation_step(string_member(e, "behavior").value_or("Isolated")));
  } else {
    out.push_back(other_step(*type));
  }
}

// What tokenizer.json splits text with before its BPE model runs: its pre_tokenizer, its normalizer,
// and model.ignore_merges (hf/pretokenizer.h names it).
PreTokenizerShape shape_of(json::element root, json::element model) {
  PreTokenizerShape shape;
  if (auto pre = JsonFile::member(root, "pre_tokenizer")) add_steps(*pre, shape.steps);
  if (auto norm = JsonFile::member(root, "normalizer")) {
    const auto type = norm->type() == json::element_type::OBJECT ? string_member(*norm, "type") : std::nullopt;
    const bool nfc = type == "NFC" && json::as_object(*norm).size() == 1;
    shape.normalizer = nfc ? "NFC" : type ? std::string(*type) : "?";
  }
  shape.ignore_merges = bool_is(model, "ignore_merges", true);
  return shape;
}

bool string_is(json::element e, std::string_view key, std::string_view want) {
  auto v = JsonFile::member(e, key);
  return v && v->type() == json::element_type::STRING && json::as_string(*v) == want;
}

// Whether tokenizer.json splits text as llama.cpp's SentencePiece tokenizer does (spaces as U+2581, the
// whole text one word), and whether it adds the leading U+2581 (llama.cpp's add_space_prefix):
// transformers 5's Metaspace pre-tokenizer without splitting, or transformers 4's Prepend + Replace
// normalizer without a pre-tokenizer. Anything else: nullopt.
std::optional<bool> sentencepiece_split(json::element root) {
  constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581
  auto pre = JsonFile::member(root, "pre_tokenizer");
  auto norm = JsonFile::member(root, "normalizer");
  if (pre && !norm) {
    if (!is_type(*pre, "Metaspace") || !string_is(*pre, "replacement", kSpace) || bool_is(*pre, "split", true)) return std::nullopt;
    if (string_is(*pre, "prepend_scheme", "first") || string_is(*pre, "prepend_scheme", "always")) return true;
    if (string_is(*pre, "prepend_scheme", "never")) return false;
    return std::nullopt;
  }
  if (!norm || pre || !is_type(*norm, "Sequence")) return std::nullopt;
  auto list = JsonFile::member(*norm, "normalizers");
  if (!list || list->type() != json::element_type::ARRAY) return std::nullopt;
  bool prepend = false;
  bool replace = false;
  for (auto step : json::as_array(*list)) {
    if (is_type(step, "Prepend") && string_is(step, "prepend", kSpace) && !prepend && !replace) {
      prepend = true;
    } else if (is_type(step, "Replace") && string_is(step, "content", kSpace) && !replace) {
      auto pattern = JsonFile::member(step, "pattern");
      if (!pattern || !string_is(*pattern, "String", " ")) return std::nullopt;
      replace = true;
    } else {
      return std::nullopt;
    }
  }
  if (!replace) return std::nullopt;
  return prepend;
}

std::string describe_pre(json::element root) {
  auto pre = JsonFile::member(root, "pre_tokenizer");
  std::string out = "pre_tokenizer ";
  if (!pre) {
    out += "null";
  } else {
    auto type = JsonFile::member(*pre, "type");
    out += type && type->type() == json::element_type::STRING ? json::quoted(json::as_string(*type)) : std::string("?");
  }
  if (JsonFile::member(root, "normalizer")) out += " with a normalizer";
  return out;
}

// One merge as llama.cpp stores it: a string as it is, an [a, b] pair (transformers >= 4.45) joined
// with a space after writing the spaces inside a part as U+0120, as llama.cpp's converter does.
// Appended to `out` when given; returns its length, or nullopt when `m` is neither form.
std::optional<std::size_t> merge_text(json::element m, std::string* out) {
  if (m.type() == json::element_type::STRING) {
    if (out) out->append(json::as_string(m));
    return json::as_string(m).size();
  }
  if (m.type() != json::element_type::ARRAY || json::as_array(m).size() != 2) return std::nullopt;
  std::size_t n = 0;
  bool first = true;
  for (auto part : json::as_array(m)) {
    if (part.type() != json::element_type::STRING) return std::nullopt;
    if (!first) {
      if (out) *out += ' ';
      ++n;
    }
    first = false;
    for (char ch : json::as_string(part)) {
      if (ch == ' ') {
        if (out) out->append("\xC4\xA0");  // U+0120
        n += 2;
      } else {
        if (out) out->push_back(ch);
        ++n;
      }
    }
  }
  return n;
}

// model.merges, into a list reserved once from their exact length (a pass over the DOM first), so that
// the list never regrows beside the DOM.
Status read_merges(const JsonFile& file, json::element merges, StringList& out) {
  if (merges.type() != json::element_type::ARRAY) return file.bad("model.merges", "must be an array");
  const auto list = json::as_array(merges);
  std::size_t bytes = 0;
  for (auto m : list) {
    auto n = merge_text(m, nullptr);
    if (!n) return file.bad("model.merges", "must hold strings or pairs of strings");
    bytes += *n;
  }
  out.reserve(list.size(), bytes);
  std::string joined;  // reused: no allocation per merge
  for (auto m : list) {
    joined.clear();
    merge_text(m, &joined);
    out.push_back(joined);
  }
  return Status::ok();
}

Result<BpeTokenizer> read_bpe(const JsonFile& file, json::element model) {
  BpeTokenizer bpe;
  bpe.byte_fallback = bool_is(model, "byte_fallback", true);
  if (bpe.byte_fallback) bpe.sentencepiece_space_prefix = sentencepiece_split(file.root());
  SW_ASSIGN_OR_RETURN(auto unk, file.string(model, "unk_token"));
  bpe.unk_token = unk.value_or("");
  auto vocab = JsonFile::member(model, "vocab");
  if (!vocab || vocab->type() != json::element_type::OBJECT) return file.bad("model.vocab", "must be an object");
  const auto entries = json::as_object(*vocab);
  if (entries.size() > kMaxVocab) return file.bad("model.vocab", "holds more than " + std::to_string(kMaxVocab) + " tokens");
  std::size_t vocab_bytes = 0;
  for (auto field : entries) vocab_bytes += field.key.size();
  bpe.vocab.reserve(entries.size(), vocab_bytes);
  bpe.ids.reserve(entries.size());
  for (auto field : entries) {
    std::int64_t id = -1;
    if (field.value.type() == json::element_type::INT64) id = field.value.get_int64().value_unsafe();
    if (id < 0 || id >= kMaxVocab) return file.bad("model.vocab", "gives token " + json::quoted(field.key) + " an id that is not in [0, 2^22)");
    bpe.vocab.push_back(field.key);
    bpe.ids.push_back(static_cast<std::uint32_t>(id));
  }
  auto merges = JsonFile::member(model, "merges");
  if (!merges) return file.bad("model.merges", "is missing");
  SW_RETURN_IF_ERROR(read_merges(file, *merges, bpe.merges));
  bpe.pre_shape = shape_of(file.root(), model);
  bpe.pre_description = describe_pre(file.root());
  return bpe;
}

// The id of a template piece of the given kind ({"SpecialToken": {"id": ...}}, {"Sequence": {"id": ...}}),
// or empty.
std::string piece_id(json::element piece, std::string_view kind) {
  if (piece.type() != json::element_type::OBJECT) return {};
  auto member = JsonFile::member(piece, kind);
  if (!member || member->type() != json::element_type::OBJECT) return {};
  return std::string(string_member(*member, "id").value_or(""));
}

std::string special_piece(json::element piece) { return piece_id(piece, "SpecialToken"); }

std::vector<TemplatePiece> template_pieces(json::element e, std::string_view name) {
  std::vector<TemplatePiece> pieces;
  auto list = JsonFile::member(e, name);
  if (!list || list->type() != json::element_type::ARRAY) return pieces;
  for (auto piece : json::as_array(*list)) pieces.push_back({special_piece(piece), piece_id(piece, "Sequence")});
  return pieces;
}

PostProcessorStep post_processor_step(json::element e) {
  PostProcessorStep step;
  if (e.type() != json::element_type::OBJECT) return step;
  step.type = string_member(e, "type").value_or("");
  if (step.type != "TemplateProcessing") return step;
  step.pair = template_pieces(e, "pair");
  auto single = JsonFile::member(e, "single");
  if (!single || single->type() != json::element_type::ARRAY) return step;
  const auto pieces = json::as_array(*single);
  step.single_size = pieces.size();
  if (step.single_size > 0) {
    step.first_special = special_piece(pieces.at(0).value_unsafe());
    step.last_special = special_piece(pieces.at(step.single_size - 1).value_unsafe());
  }
  return step;
}

// tokenizer.json's post_processor, one step or a Sequence's "processors" (not nested further, as
// SpecialVocab reads it).
std::vector<PostProcessorStep> post_processor_of(json::element root) {
  std::vector<PostProcessorStep> steps;
  auto pp = JsonFile::member(root, "post_processor");
  if (!pp || pp->type() != json::element_type::OBJECT) return steps;
  auto list = JsonFile::member(*pp, "processors");
  if (!list || list->type() != json::element_type::ARRAY) {
    steps.push_back(post_processor_step(*pp));
    return steps;
  }
  for (auto e : json::as_array(*list)) steps.push_back(post_processor_step(e));
  return steps;
}

Error named_templates(std::string file) {
  return Error(ErrorKind::NotSupported, "chat_template that is not one string (named templates) is not converted").with_file(std::move(file));
}

// chat_template.jinja, else chat_template.json's "chat_template" string, beside tokenizer_config.json
// (SpecialVocab reads them when tokenizer_config.json has no chat_template). Named templates (a folder
// additional_chat_templates/ beside the .jinja, or a list) are refused by name, as in tokenizer_config.json.
Result<std::optional<std::string>> chat_template_beside(const Folder& folder) {
  SW_ASSIGN_OR_RETURN(const bool jinja, has_model_file(folder, "chat_template.jinja"));
  if (jinja) {
    for (const FolderEntry& e : folder.entries()) {
      if (e.name == "additional_chat_templates") return named_templates(folder.path_of(e.name));
    }
    SW_ASSIGN_OR_RETURN(std::string text, read_model_file(folder, "chat_template.jinja", kMaxChatTemplateBytes));
    if (!is_valid_utf8(text)) return Error(ErrorKind::InvalidModelFolder, "is not UTF-8 text").with_file(folder.path_of("chat_template.jinja"));
    return std::optional<std::string>(std::move(text));
  }
  SW_ASSIGN_OR_RETURN(const bool json_file, has_model_file(folder, "chat_template.json"));
  if (!json_file) return std::optional<std::string>();
  SW_ASSIGN_OR_RETURN(auto file, JsonFile::read(folder, "chat_template.json", kMaxChatTemplateBytes));
  auto t = JsonFile::member(file->root(), "chat_template");
  if (!t) return std::optional<std::string>();
  if (t->type() != json::element_type::STRING) return named_templates(file->path());
  return std::optional<std::string>(std::string(json::as_string(*t)));
}

Result<AddedToken> read_added(const JsonFile& file, json::element e, std::string_view where, std::optional<std::uint32_t> id) {
  if (e.type() != json::element_type::OBJECT) return file.bad(where, "must hold objects");
  AddedToken t;
  if (id) {
    t.id = *id;
  } else {
    SW_ASSIGN_OR_RETURN(auto v, file.integer(e, "id", 0, kMaxVocab - 1));
    if (!v) return file.bad(where, "has an entry without an id");
    t.id = static_cast<std::uint32_t>(*v);
  }
  SW_ASSIGN_OR_RETURN(auto content, file.string(e, "content"));
  if (!content) return file.bad(where, "has an entry without content");
  t.content = std::move(*content);
  SW_ASSIGN_OR_RETURN(auto special, file.boolean(e, "special"));
  t.special = special.value_or(false);
  return t;
}

}  // namespace

Result<TokenizerJson> read_tokenizer_json(const Folder& folder) {
  TokenizerJson out;
  SW_ASSIGN_OR_RETURN(const bool present, has_model_file(folder, "tokenizer.json"));
  if (!present) return out;
  out.present = true;
  SW_ASSIGN_OR_RETURN(auto file, JsonFile::read(folder, "tokenizer.json", kMaxTokenizerBytes));
  if (auto added = JsonFile::member(file->root(), "added_tokens")) {
    if (added->type() != json::element_type::ARRAY) return file->bad("added_tokens", "must be an array");
    const auto list = json::as_array(*added);
    if (list.size() > kMaxVocab) return file->bad("added_tokens", "is too long");
    for (auto e : list) {
      SW_ASSIGN_OR_RETURN(auto t, read_added(*file, e, "added_tokens", std::nullopt));
      out.added.push_back(std::move(t));
    }
  }
  out.post_processor = post_processor_of(file->root());
  auto model = JsonFile::member(file->root(), "model");
  if (model && model->type() == json::element_type::OBJECT && is_type(*model, "BPE")) {
    SW_ASSIGN_OR_RETURN(out.bpe, read_bpe(*file, *model));
  }
  return out;
}

namespace {

// transformers' extra special tokens (each a string, or an object with content): a list, or an object of
// names -> tokens (transformers 5), under extra_special_tokens or additional_special_tokens (transformers 4).
Status read_extra_special_tokens(const JsonFile& file, std::vector<std::string>& out) {
  for (std::string_view key : {"extra_special_tokens", "additional_special_tokens"}) {
    auto list = JsonFile::member(file.root(), key);
    if (!list || list->type() == json::element_type::NULL_VALUE) continue;
    auto add = [&](json::element e) -> Status {
      if (e.type() == json::element_type::STRING) {
        out.emplace_back(json::as_string(e));
        return Status::ok();
      }
      if (e.type() != json::element_type::OBJECT) return file.bad(key, "holds a token that is neither a string nor an object with content");
      SW_ASSIGN_OR_RETURN(auto content, file.string(e, "content"));
      if (content) out.push_back(std::move(*content));
      return Status::ok();
    };
    if (list->type() == json::element_type::ARRAY) {
      for (auto e : json::as_array(*list)) SW_RETURN_IF_ERROR(add(e));
    } else if (list->type() == json::element_type::OBJECT) {
      for (auto field : json::as_object(*list)) SW_RETURN_IF_ERROR(add(field.value));
    } else {
      return file.bad(key, "must be a list or an object");
    }
  }
  return Status::ok();
}

}  // namespace

Result<TokenizerConfig> read_tokenizer_config(const Folder& folder) {
  TokenizerConfig out;
  SW_ASSIGN_OR_RETURN(const bool present, has_model_file(folder, "tokenizer_config.json"));
  if (!present) return out;
  out.present = true;
  SW_ASSIGN_OR_RETURN(auto file, JsonFile::read(folder, "tokenizer_config.json", kMaxTokenizerBytes));
  const auto root = file->root();
  for (auto type : kSpecialTypes) {
    const std::string key = std::string(type) + "_token";
    auto e = JsonFile::member(root, key);
    if (!e) continue;
    if (e->type() == json::element_type::STRING) {
      out.special_tokens.emplace_back(std::string(type), std::string(json::as_string(*e)));
    } else if (e->type() == json::element_type::OBJECT) {
      SW_ASSIGN_OR_RETURN(auto content, file->string(*e, "content"));
      if (content) out.special_tokens.emplace_back(std::string(type), std::move(*content));
    } else {
      return file->bad(key, "must be a string or an object with content");
    }
  }
  SW_ASSIGN_OR_RETURN(out.add_bos_token, file->boolean(root, "add_bos_token"));
  SW_ASSIGN_OR_RETURN(out.add_eos_token, file->boolean(root, "add_eos_token"));
  SW_ASSIGN_OR_RETURN(out.add_sep_token, file->boolean(root, "add_sep_token"));
  SW_ASSIGN_OR_RETURN(out.add_prefix_space, file->boolean(root, "add_prefix_space"));
  SW_ASSIGN_OR_RETURN(out.clean_up_tokenization_spaces, file->boolean(root, "clean_up_tokenization_spaces"));
  if (auto t = JsonFile::member(root, "chat_template")) {
    if (t->type() != json::element_type::STRING) return named_templates(file->path());
    out.chat_template = std::string(json::as_string(*t));
  } else {
    SW_ASSIGN_OR_RETURN(out.chat_template, chat_template_beside(folder));
  }
  SW_RETURN_IF_ERROR(read_extra_special_tokens(*file, out.extra_special_tokens));
  if (auto decoder = JsonFile::member(root, "added_tokens_decoder")) {
    if (decoder->type() != json::element_type::OBJECT) return file->bad("added_tokens_decoder", "must be an object");
    for (auto field : json::as_object(*decoder)) {
      std::uint32_t id = 0;
      const bool digits = !field.key.empty() && field.key.size() <= 7 && field.key.find_first_not_of("0123456789") == std::string_view::npos;
      if (digits) id = static_cast<std::uint32_t>(std::stoul(std::string(field.key)));
      if (!digits || id >= kMaxVocab) return file->bad("added_tokens_decoder", "has key " + json::quoted(field.key) + ", not a token id");
      SW_ASSIGN_OR_RETURN(auto t, read_added(*file, field.value, "added_tokens_decoder", id));
      out.added_tokens_decoder.push_back(std::move(t));
    }
  }
  return out;
}

}  // namespace safeweights::hf
