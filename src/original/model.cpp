// Deciding what an original download is and writing its transformers files (original/model.h).
#include "original/model.h"

#include <array>
#include <cmath>

#include "core/status_macros.h"
#include "hf/hf_files.h"
#include "original/tekken.h"
#include "original/tiktoken.h"
#include "safeweights/text.h"

namespace safeweights::original {
namespace {

// Mistral's SentencePiece files, newest first; each is copied as transformers' tokenizer.model.
constexpr std::array<std::string_view, 4> kMistralSentencePiece = {"tokenizer.model.v7", "tokenizer.model.v3", "tokenizer.model.v1",
                                                                   "tokenizer.model"};
// The context length of each Llama version when nothing says it (transformers' converter's table).
struct VersionFacts {
  std::string_view version;
  std::uint32_t context;
  bool tiktoken;
};
constexpr std::array<VersionFacts, 5> kVersions = {
    {{"1", 2048, false}, {"2", 4096, false}, {"3", 8192, true}, {"3.1", 131072, true}, {"3.2", 131072, true}}};
// Mistral's converter's default when params.json gives no max_seq_len.
constexpr std::uint32_t kMistralContext = 32768;

const VersionFacts* version_facts(std::string_view version) {
  for (const VersionFacts& v : kVersions)
    if (v.version == version) return &v;
  return nullptr;
}

// A SentencePiece model is a protobuf whose first field is a piece (tag 0x0a); a tiktoken rank file is
// text (base64, a space, a rank).
Result<bool> is_sentencepiece(const Folder& folder, const std::string& name) {
  SW_ASSIGN_OR_RETURN(SourcePtr source, folder.open_file(name));
  if (source->size() == 0) return Error(ErrorKind::InvalidModelFolder, "is empty").with_file(folder.path_of(name));
  std::byte first[1];
  SW_RETURN_IF_ERROR(source->read_at(0, first));
  return first[0] == std::byte{0x0a};
}

Status decide_meta_version(const Folder& folder, const Params& p, const OriginalOptions& options, Model& m) {
  if (!folder.has_file("tokenizer.model"))
    return Error(ErrorKind::FileNotFound, "no tokenizer.model beside params.json (Meta's download has one)").with_file(folder.name());
  m.tokenizer_file = "tokenizer.model";
  SW_ASSIGN_OR_RETURN(const bool spm, is_sentencepiece(folder, m.tokenizer_file));
  m.tokenizer = spm ? TokenizerKind::SentencePiece : TokenizerKind::Tiktoken;
  const std::string kind = spm ? "a SentencePiece tokenizer.model (Llama 1 or 2)" : "a tiktoken tokenizer.model (Llama 3)";
  if (!options.llama_version.empty()) {
    const VersionFacts* v = version_facts(options.llama_version);
    if (!v) return Error(ErrorKind::InvalidArgument, "--llama-version " + options.llama_version + " is not one of 1, 2, 3, 3.1, 3.2");
    if (v->tiktoken == spm)
      return Error(ErrorKind::InvalidArgument, "--llama-version " + options.llama_version + " does not fit the folder, which has " + kind)
          .with_file(folder.path_of(m.tokenizer_file));
    m.version = options.llama_version;
  } else if (spm) {
    if (!options.max_position_embeddings)
      return Error(ErrorKind::InvalidArgument,
                   "params.json and " + kind + " fit Llama 1 (context 2048) and Llama 2 (4096) alike: give --llama-version 1 or 2")
          .with_file(folder.name());
    m.version = "2";
  } else if (!p.use_scaled_rope) {
    m.version = "3";
    m.notes.push_back("Llama 3 (a tiktoken tokenizer, no use_scaled_rope in params.json): context 8192; --llama-version says otherwise");
  } else if (p.dim <= 3072) {
    m.version = "3.2";
    m.notes.push_back("Llama 3.2 (use_scaled_rope, dim " + std::to_string(p.dim) +
                      " <= 3072: the 1B/3B models): rope scaling factor 32, context 131072; give --llama-version 3.1 for factor 8");
  } else {
    m.version = "3.1";
    m.notes.push_back("Llama 3.1 (use_scaled_rope in params.json): rope scaling factor 8, context 131072; give --llama-version 3.2 for factor 32");
  }
  const bool scaled_version = m.version == "3.1" || m.version == "3.2";
  if (p.use_scaled_rope != scaled_version)
    return Error(ErrorKind::InvalidArgument, "Llama " + m.version + (scaled_version ? " scales" : " does not scale") +
                                                 " its rotary embedding, but params.json " +
                                                 (p.use_scaled_rope ? "says use_scaled_rope" : "has no use_scaled_rope"))
        .with_file(p.path);
  if (scaled_version) m.llama3_factor = m.version == "3.2" ? 32.0 : 8.0;
  m.context = version_facts(m.version)->context;
  // transformers' converter: Code Llama (Llama 2 weights, rope_theta 1e6) has a context of 16384.
  if (!spm || !p.rope_theta || *p.rope_theta <= 10000) return Status::ok();
  m.context = 16384;
  m.notes.push_back("rope_theta above 10000 with a SentencePiece tokenizer: Code Llama, context 16384");
  return Status::ok();
}

Status decide_mistral_tokenizer(const Folder& folder, Model& m) {
  if (folder.has_file("tekken.json")) {
    m.tokenizer = TokenizerKind::Tekken;
    m.tokenizer_file = "tekken.json";
    return Status::ok();
  }
  for (std::string_view name : kMistralSentencePiece) {
    if (!folder.has_file(name)) continue;
    m.tokenizer_file = std::string(name);
    SW_ASSIGN_OR_RETURN(const bool spm, is_sentencepiece(folder, m.tokenizer_file));
    if (!spm) return Error(ErrorKind::InvalidModelFolder, "is not a SentencePiece model").with_file(folder.path_of(name));
    m.tokenizer = TokenizerKind::SentencePiece;
    return Status::ok();
  }
  return Error(ErrorKind::FileNotFound, "no tekken.json nor tokenizer.model.v3 (or .v7, .v1, tokenizer.model) beside params.json")
      .with_file(folder.name());
}

Status decide_dimensions(const Params& p, Model& m) {
  Dimensions& d = m.dims;
  d.params_path = p.path;
  d.hidden = p.dim;
  d.layers = p.n_layers;
  d.heads = p.n_heads;
  d.kv_heads = p.n_kv_heads.value_or(p.n_heads);
  d.head_dim = p.head_dim.value_or(p.dim / p.n_heads);
  d.vocab = p.vocab_size;
  if (m.mistral) {
    if (!p.hidden_dim) return Error(ErrorKind::InvalidModelFolder, "key `hidden_dim` is missing (Mistral's MLP width)").with_file(p.path);
    d.intermediate = *p.hidden_dim;
    d.tied = p.tied_embeddings.value_or(false);
  } else {
    const std::uint64_t inter = meta_intermediate_size(p);
    if (inter == 0 || inter > 0xffffffffu)
      return Error(ErrorKind::InvalidModelFolder, "the MLP width computed from dim, ffn_dim_multiplier and multiple_of is out of range")
          .with_file(p.path);
    d.intermediate = static_cast<std::uint32_t>(inter);
  }
  d.embeddings_join_dim = m.tokenizer == TokenizerKind::Tiktoken ? 0 : 1;  // VocabParallelEmbedding since Llama 3
  return Status::ok();
}

Result<std::optional<std::string>> chat_template(const Folder& folder) {
  SW_ASSIGN_OR_RETURN(const bool present, hf::has_model_file(folder, "chat_template.jinja"));
  if (!present) return std::optional<std::string>();
  SW_ASSIGN_OR_RETURN(std::string text, hf::read_model_file(folder, "chat_template.jinja", hf::kMaxConfigBytes));
  return std::optional<std::string>(std::move(text));
}

// transformers' LlamaTokenizer files beside a copied SentencePiece model.
Result<TokenizerFiles> sentencepiece_files(const Folder& folder, const Model& m) {
  SW_ASSIGN_OR_RETURN(std::string bytes, hf::read_model_file(folder, m.tokenizer_file, hf::kMaxTokenizerBytes));
  SW_ASSIGN_OR_RETURN(std::vector<hf::Piece> pieces, hf::parse_sentencepiece(bytes, folder.path_of(m.tokenizer_file)));
  if (pieces.size() < 3)
    return Error(ErrorKind::InvalidModelFolder, "holds fewer than 3 pieces (<unk>, <s>, </s>)").with_file(folder.path_of(m.tokenizer_file));
  TokenizerFiles out;
  out.vocab_size = static_cast<std::uint32_t>(pieces.size());
  out.bos = 1;
  out.eos = 2;
  SW_ASSIGN_OR_RETURN(std::optional<std::string> chat, chat_template(folder));
  JsonWriter config;
  config.object().key("add_bos_token").boolean(true).key("add_eos_token").boolean(false);
  config.key("bos_token").string(pieces[1].piece).key("clean_up_tokenization_spaces").boolean(false);
  config.key("eos_token").string(pieces[2].piece).key("legacy").boolean(true);
  config.key("model_max_length").uint(m.context).key("pad_token").null().key("sp_model_kwargs").object().end();
  config.key("tokenizer_class").string("LlamaTokenizer").key("unk_token").string(pieces[0].piece);
  if (chat) config.key("chat_template").string(*chat);
  config.end();
  JsonWriter map;
  map.object().key("bos_token").string(pieces[1].piece).key("eos_token").string(pieces[2].piece).key("unk_token").string(pieces[0].piece).end();
  out.files.emplace_back("tokenizer.model", std::move(bytes));
  out.files.emplace_back("tokenizer_config.json", std::move(config.text()));
  out.files.emplace_back("special_tokens_map.json", std::move(map.text()));
  return out;
}

TokenizerFiles from_hf_files(HfTokenizerFiles&& t) {
  TokenizerFiles out;
  out.files.emplace_back("tokenizer.json", std::move(t.tokenizer_json));
  out.files.emplace_back("tokenizer_config.json", std::move(t.tokenizer_config_json));
  out.files.emplace_back("special_tokens_map.json", std::move(t.special_tokens_map_json));
  out.vocab_size = t.vocab_size;
  out.bos = t.bos_id;
  out.eos = t.eos_id;
  out.pad = t.pad_id;
  out.eos_ids = std::move(t.eos_ids);
  return out;
}

std::string_view torch_dtype(TensorType t) {
  switch (t) {
    case TensorType::BF16: return "bfloat16";
    case TensorType::F16: return "float16";
    default: return "float32";
  }
}

void eos_value(JsonWriter& w, const TokenizerFiles& t) {
  if (t.eos_ids.size() > 1) {
    w.array();
    for (std::uint32_t id : t.eos_ids) w.uint(id);
    w.end();
  } else {
    w.uint(t.eos);
  }
}

}  // namespace

std::uint64_t meta_intermediate_size(const Params& p) {
  const std::uint64_t base = std::uint64_t{8} * p.dim / 3;  // int(8 * dim / 3)
  const auto scaled = static_cast<std::uint64_t>(p.ffn_dim_multiplier.value_or(1.0) * static_cast<double>(base));
  const std::uint64_t m = p.multiple_of.value_or(256);
  return m * ((scaled + m - 1) / m);
}

Result<Model> decide_model(const Folder& folder, const Params& p, const OriginalOptions& options) {
  Model m;
  m.mistral = p.hidden_dim || p.head_dim || p.tied_embeddings || folder.has_file("tekken.json") || folder.has_file("tokenizer.model.v3") ||
              folder.has_file("tokenizer.model.v7") || folder.has_file("consolidated.safetensors");
  m.instruct = options.instruct;
  if (m.mistral) {
    if (!options.llama_version.empty())
      return Error(ErrorKind::InvalidArgument, "--llama-version is for Meta's Llama downloads; this folder is Mistral's").with_file(folder.name());
    if (p.use_scaled_rope) return Error(ErrorKind::NotSupported, "key `use_scaled_rope` in Mistral's layout is not converted").with_file(p.path);
    SW_RETURN_IF_ERROR(decide_mistral_tokenizer(folder, m));
    if (p.max_seq_len) {
      m.context = *p.max_seq_len;
    } else if (!options.max_position_embeddings) {
      m.context = kMistralContext;
      m.notes.push_back(
          "params.json gives no max_seq_len: context 32768 (transformers' converter's default); --max-position-embeddings says otherwise");
    }
    m.sliding_window = p.sliding_window;
  } else {
    if (p.sliding_window) return Error(ErrorKind::NotSupported, "key `sliding_window` in Meta's layout is not converted").with_file(p.path);
    SW_RETURN_IF_ERROR(decide_meta_version(folder, p, options, m));
  }
  if (options.max_position_embeddings) m.context = *options.max_position_embeddings;
  m.norm_eps = p.norm_eps.value_or(1e-5);
  m.rope_theta = p.rope_theta.value_or(10000.0);  // both converters' default
  SW_RETURN_IF_ERROR(decide_dimensions(p, m));
  return m;
}

Result<TokenizerFiles> tokenizer_files(const Folder& folder, const Model& m) {
  if (m.tokenizer == TokenizerKind::SentencePiece) return sentencepiece_files(folder, m);
  SW_ASSIGN_OR_RETURN(std::optional<std::string> chat, chat_template(folder));
  SW_ASSIGN_OR_RETURN(SourcePtr source, folder.open_file(m.tokenizer_file));
  const std::string name = folder.path_of(m.tokenizer_file);
  if (m.tokenizer == TokenizerKind::Tekken) {
    SW_ASSIGN_OR_RETURN(HfTokenizerFiles t, tokenizer_files_from_tekken(*source, name, TekkenOptions{m.context, chat}));
    return from_hf_files(std::move(t));
  }
  TiktokenOptions options;
  options.version = m.version == "3" ? LlamaTokenizerVersion::Llama3 : LlamaTokenizerVersion::Llama3_1;
  options.instruct = m.instruct;
  options.model_max_length = m.context;
  options.chat_template = std::move(chat);
  SW_ASSIGN_OR_RETURN(HfTokenizerFiles t, tokenizer_files_from_tiktoken(*source, name, options));
  return from_hf_files(std::move(t));
}

std::string config_json(const Model& m, const TokenizerFiles& t, TensorType dtype) {
  const Dimensions& d = m.dims;
  JsonWriter w;
  w.object().key("architectures").array().string(m.mistral ? "MistralForCausalLM" : "LlamaForCausalLM").end();
  w.key("attention_bias").boolean(false).key("attention_dropout").number(0.0);
  w.key("bos_token_id").uint(t.bos).key("eos_token_id");
  eos_value(w, t);
  w.key("head_dim").uint(d.head_dim).key("hidden_act").string("silu").key("hidden_size").uint(d.hidden);
  w.key("initializer_range").number(0.02).key("intermediate_size").uint(d.intermediate);
  w.key("max_position_embeddings").uint(m.context);
  if (!m.mistral) w.key("mlp_bias").boolean(false);
  w.key("model_type").string(m.mistral ? "mistral" : "llama");
  w.key("num_attention_heads").uint(d.heads).key("num_hidden_layers").uint(d.layers).key("num_key_value_heads").uint(d.kv_heads);
  if (t.pad) w.key("pad_token_id").uint(*t.pad);
  if (!m.mistral) w.key("pretraining_tp").uint(1);
  w.key("rms_norm_eps").number(m.norm_eps);
  w.key("rope_scaling");
  if (m.llama3_factor) {
    w.object().key("factor").number(*m.llama3_factor).key("high_freq_factor").number(4.0).key("low_freq_factor").number(1.0);
    w.key("original_max_position_embeddings").uint(8192).key("rope_type").string("llama3").end();
  } else {
    w.null();
  }
  w.key("rope_theta").number(m.rope_theta);
  if (m.mistral) {
    w.key("sliding_window");
    if (m.sliding_window) {
      w.uint(*m.sliding_window);
    } else {
      w.null();
    }
  }
  w.key("tie_word_embeddings").boolean(d.tied).key("torch_dtype").string(torch_dtype(dtype));
  w.key("use_cache").boolean(true).key("vocab_size").uint(d.vocab.value_or(t.vocab_size)).end();
  return std::move(w.text());
}

std::string generation_config_json(const Model& m, const TokenizerFiles& t) {
  JsonWriter w;
  w.object().key("bos_token_id").uint(t.bos);
  if (m.instruct) w.key("do_sample").boolean(true);
  w.key("eos_token_id");
  eos_value(w, t);
  if (m.instruct) w.key("temperature").number(0.6).key("top_p").number(0.9);
  w.end();
  return std::move(w.text());
}

}  // namespace safeweights::original
