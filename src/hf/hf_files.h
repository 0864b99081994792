// The files of a Hugging Face Llama-family folder, read into plain structs. Internal to src/hf.
//
// config_json.cpp and tokenizer_json.cpp read the JSON files (the only files here that see simdjson),
// sentencepiece.cpp reads tokenizer.model; llama.cpp (this folder's) turns them into GGUF metadata.
// Every reader caps the file's size before reading it, range-checks every number, and names the file
// and the key in its errors.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hf/pretokenizer.h"
#include "safeweights/error.h"
#include "safeweights/folder.h"
#include "safeweights/metadata.h"

namespace safeweights::hf {

// Size caps: far above real files (a 256k-token tokenizer.json is ~35 MB), far below what would hurt
// (the parsed tokenizer.json takes a few times its size).
inline constexpr std::uint64_t kMaxConfigBytes = 4u << 20;
inline constexpr std::uint64_t kMaxTokenizerBytes = 128u << 20;
// At most this many tokens in a vocabulary (the largest real ones hold ~260k).
inline constexpr std::uint32_t kMaxVocab = 1u << 22;

// Whether the folder holds the model-folder file `name` (config.json, a tokenizer file): false when
// nothing is listed by that name; InvalidModelFolder when a folder is (a file was meant). Anything
// else listed by the name (a FIFO, a device, a dangling link: Resolver::list lists them) counts as
// there, so that reading it is refused by name, never taken for an absent file.
Result<bool> has_model_file(const Folder& folder, std::string_view name);
// Every byte of the model-folder file `name`, at most `cap` (ResourceLimit beyond); FileNotFound when
// absent; open_file()'s refusal of what is not a regular file (checked before it is opened, so a FIFO
// never blocks). Errors name the file.
Result<std::string> read_model_file(const Folder& folder, std::string_view name, std::uint64_t cap);

// llama.cpp's token types (gguf-py TokenType; SentencePiece's piece types use the same numbers).
enum TokenType : std::int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// Rotary position embeddings: transformers 4's rope_theta / rope_scaling or transformers 5's
// rope_parameters, one meaning. Only what the rope type uses is set.
struct Rope {
  std::string type = "default";  // default, linear, llama3, yarn, longrope (others are refused when read)
  std::string source;            // the key it came from, for messages: "rope_parameters", "rope_scaling" or ""
  std::optional<double> theta;   // rope_theta
  std::optional<double> factor;
  std::optional<double> low_freq_factor;                          // llama3
  std::optional<double> high_freq_factor;                         // llama3
  std::optional<std::uint32_t> original_max_position_embeddings;  // llama3, yarn, longrope
  std::vector<float> short_factor;                                // longrope, one per rotary pair
  std::vector<float> long_factor;                                 // longrope
  std::optional<double> attention_factor;                         // longrope, as transformers computes it
  std::optional<double> mscale;                                   // yarn: DeepSeek's (an architecture's Architecture::rope_keys)
  bool yarn_untruncated = false;                                  // yarn: `truncate` false (gpt-oss's), which llama.cpp cannot say
  std::optional<double> mscale_all_dim;                           // yarn: DeepSeek's
  std::optional<double> partial_rotary_factor;                    // the rope object's (refused unless the architecture rotates part)
  std::span<const std::string_view> own_keys;                     // keys the architecture's check reads itself (Architecture::rope_keys)
  std::span<const std::string_view> own_types;                    // types the architecture's check maps itself (Architecture::rope_types)
};

// llama.cpp's rope_freqs for llama3 scaling: one factor per rotary pair of a head of `head_dim`, as
// convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors computes them in float32.
std::vector<float> llama3_rope_factors(const Rope& rope, std::uint32_t head_dim);

struct Architecture;

// config.json's mixture of experts (hf/moe.h reads it), as the plan needs it.
struct MoeConfig {
  std::uint32_t experts = 0;        // num_local_experts / num_experts
  std::uint32_t used = 0;           // num_experts_per_tok
  std::uint32_t ffn = 0;            // one expert's width
  std::uint32_t shared_ffn = 0;     // the shared expert's width (0: none)
  std::uint32_t leading_dense = 0;  // first_k_dense_replace: the first layers keep the dense MLP
};

// config.json's multi-head latent attention (DeepSeek's MLA; hf/mla.h reads it), as the plan needs it.
struct MlaConfig {
  std::uint32_t q_lora_rank = 0;  // 0: q_proj, no low-rank query
  std::uint32_t kv_lora_rank = 0;
  std::uint32_t qk_nope_head_dim = 0;
  std::uint32_t qk_rope_head_dim = 0;
  std::uint32_t v_head_dim = 0;
};

// config.json's Gated DeltaNet linear attention (hybrid models: hf/linear_attention.h reads it).
struct LinearAttentionConfig {
  std::uint32_t key_heads = 0;       // linear_num_key_heads
  std::uint32_t value_heads = 0;     // linear_num_value_heads, a multiple of key_heads
  std::uint32_t key_head_dim = 0;    // linear_key_head_dim
  std::uint32_t value_head_dim = 0;  // linear_value_head_dim
  std::uint32_t conv_kernel = 0;     // linear_conv_kernel_dim
  std::vector<bool> recurrent;       // per layer (layer_types): linear attention, else full attention
  bool tiled_values = false;         // Qwen3.5: value heads reordered for llama.cpp (hf/linear_attention.h)
  std::uint32_t rope_dims = 0;       // rotary dimensions of the full-attention heads (rope.dimension_count)
};

// config.json, the fields llama.cpp's converter reads for the architectures of hf/arch.h.
struct ModelConfig {
  std::string hf_class;                // architectures[0]
  const Architecture* arch = nullptr;  // what converts it
  std::uint32_t vocab_size = 0;
  std::uint32_t hidden_size = 0;
  std::uint32_t intermediate_size = 0;
  std::uint32_t num_hidden_layers = 0;
  std::uint32_t num_attention_heads = 0;
  std::optional<std::uint32_t> num_key_value_heads;
  std::optional<std::uint32_t> max_position_embeddings;
  std::optional<std::uint32_t> head_dim;
  std::optional<double> rms_norm_eps;
  Rope rope;
  Rope rope_sliding;  // Gemma 3's sliding-window layers (rope_parameters.sliding_attention), when given
  // {bos,eos,unk,sep,pad,mask}_token_id when an integer (a list, as some configs give eos, is ignored,
  // as llama.cpp's converter ignores it).
  std::vector<std::pair<std::string, std::int64_t>> special_ids;
  std::optional<bool> tie_word_embeddings;  // false: lm_head.weight must be there
  std::vector<MetaEntry> arch_kv;           // the architecture's own keys (Architecture::check)
  std::optional<MoeConfig> moe;             // set for an architecture with experts
  // general.file_type over a float type (F32, F16, BF16), as llama.cpp's converter writes it for weights
  // kept quantized (gpt-oss's MXFP4 experts: MOSTLY_MXFP4_MOE).
  std::optional<std::uint32_t> float_file_type;
  std::optional<MlaConfig> mla;  // set for an architecture with latent attention
  // The architecture's own switches its check() read for its plan_layer() (e.g. "qk_layernorm").
  std::vector<std::string> arch_flags;
  std::optional<LinearAttentionConfig> linear;  // set for a hybrid architecture (Qwen3.5)
  bool multimodal = false;                      // the text model of a ...ForConditionalGeneration (hf/multimodal.h)
  std::vector<std::string> notes;               // what the architecture's check tells the user (GgufConversion::notes)
  std::uint32_t nextn_layers = 0;               // next-token-prediction layers past num_hidden_layers (hf/nextn.h)
  std::string nextn_prefix;                     // where a NextnLayout's block is ("mtp."; hf/nextn.h); empty: none
};
// FileNotFound without config.json; InvalidModelFolder for a malformed one; NotSupported for a model
// llama.cpp cannot compute as transformers does (another architecture, experts, a rope type or key it
// has no equivalent for), naming the key.
Result<ModelConfig> read_config(const Folder& folder);

// generation_config.json's sampling settings as llama.cpp's converter writes them (gguf-py
// Metadata.load: general.sampling.*, top_k and the like INT32, temperature and the like FLOAT32), in its
// order. Like gguf-py it takes nothing from a file that is absent or not JSON, and skips a value of
// another type than the key's (gguf-py would stop there).
std::vector<MetaEntry> read_sampling(const Folder& folder);
// The folder has a config.json that describes a model ("architectures" or "model_type"), or one that
// cannot be read at all (so that plan() refuses it by name rather than the folder being converted as
// plain tensors).
bool is_model_config(const Folder& folder);

// Strings read from a file, kept in one buffer: each costs its bytes and a 4-byte end offset, where a
// std::string each cost 32 bytes more (and a heap block of its own beyond 15 bytes). The readers keep
// their lists below 4 GiB: every file is capped far below it (kMaxTokenizerBytes), and a string read
// grows at most twice (a merge pair's spaces as U+0120).
class StringList {
 public:
  // Room for `count` strings of `bytes` in all, so that the list never regrows.
  void reserve(std::size_t count, std::size_t bytes) {
    ends_.reserve(count);
    text_.reserve(bytes);
  }
  void push_back(std::string_view s) {
    text_.append(s);
    ends_.push_back(static_cast<std::uint32_t>(text_.size()));
  }
  std::size_t size() const noexcept { return ends_.size(); }
  std::string_view operator[](std::size_t i) const noexcept {
    const std::uint32_t begin = i == 0 ? 0 : ends_[i - 1];
    return std::string_view(text_).substr(begin, ends_[i] - begin);
  }

 private:
  std::string text_;
  std::vector<std::uint32_t> ends_;
};

// A token added on top of the model's vocabulary (tokenizer.json "added_tokens").
struct AddedToken {
  std::uint32_t id = 0;
  std::string content;
  bool special = false;
};

// tokenizer.json: a byte-level BPE model.
struct BpeTokenizer {
  StringList vocab;                // model.vocab's tokens, in the file's order
  std::vector<std::uint32_t> ids;  // their ids
  StringList merges;               // "a b", as llama.cpp stores them
  PreTokenizerShape pre_shape;     // what splits text before the model runs (hf/pretokenizer.h names it)
  std::string pre_description;     // what the pre-tokenizer is, for an error
  bool byte_fallback = false;      // SentencePiece-style BPE, not byte-level
  // With byte_fallback: whether tokenizer.json splits text as llama.cpp's SentencePiece tokenizer does,
  // and then whether it adds a leading U+2581 (see tokenizer_json.cpp).
  std::optional<bool> sentencepiece_space_prefix;
  std::string unk_token;  // model.unk_token
};

// One step of tokenizer.json's post_processor (each of a Sequence's): what llama.cpp's SpecialVocab reads
// of it to know which special tokens encoding adds.
struct TemplatePiece {
  std::string special;   // the SpecialToken id, when the piece is one
  std::string sequence;  // the Sequence id ("A", "B"), when the piece is one
};
struct PostProcessorStep {
  std::string type;                 // "ByteLevel", "TemplateProcessing", "RobertaProcessing", ...
  std::size_t single_size = 0;      // TemplateProcessing: the pieces of its `single` template
  std::string first_special;        // the SpecialToken id of its first piece, when that piece is one
  std::string last_special;         // ... of its last piece
  std::vector<TemplatePiece> pair;  // TemplateProcessing: its `pair` template
};

// tokenizer.json's added tokens (empty when there is no tokenizer.json), its post_processor, and its BPE
// model when it has one.
struct TokenizerJson {
  bool present = false;
  std::vector<AddedToken> added;
  std::vector<PostProcessorStep> post_processor;
  std::optional<BpeTokenizer> bpe;  // set when model.type is "BPE"
};
Result<TokenizerJson> read_tokenizer_json(const Folder& folder);

// tokenizer_config.json: what llama.cpp's SpecialVocab and LlamaModel.set_vocab read.
struct TokenizerConfig {
  bool present = false;
  std::vector<std::pair<std::string, std::string>> special_tokens;  // {bos,eos,unk,sep,pad,cls,mask}_token -> its text
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  std::optional<bool> add_sep_token;
  std::optional<bool> add_prefix_space;
  std::optional<bool> clean_up_tokenization_spaces;
  std::optional<std::string> chat_template;      // or chat_template.jinja's, or chat_template.json's, beside
  std::vector<AddedToken> added_tokens_decoder;  // by id, as the file lists them
  // extra_special_tokens (transformers 5; a list, or names -> tokens) or additional_special_tokens: texts.
  std::vector<std::string> extra_special_tokens;
};
// An absent file gives an empty config.
Result<TokenizerConfig> read_tokenizer_config(const Folder& folder);

// One SentencePiece piece (ModelProto.pieces).
struct Piece {
  std::string piece;
  float score = 0;
  std::int32_t type = kNormal;  // SentencePiece's Type enum: NORMAL 1 ... BYTE 6
};
// Parses a serialized SentencePiece ModelProto's pieces (field 1: piece 1, score 2, type 3); every other
// field is skipped by its wire type. InvalidModelFolder (naming `what` and the byte offset) for a
// malformed message.
Result<std::vector<Piece>> parse_sentencepiece(std::string_view bytes, const std::string& what);

}  // namespace safeweights::hf
