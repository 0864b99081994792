// params.json (original/params.h), read with src/hf's hostile-JSON reader.
#include <array>
#include <charconv>
#include <string_view>

#include "core/status_macros.h"
#include "hf/json_read.h"
#include "original/params.h"

namespace safeweights::original {
namespace {

using hf::JsonFile;

// Keys of a Meta or Mistral params.json that change nothing in the weights' math.
constexpr std::array<std::string_view, 2> kInert = {"max_batch_size", "model_parallel_size"};
// Keys that change the model and are not converted yet: refused by name rather than ignored.
constexpr std::array<std::string_view, 9> kRefused = {"moe",          "vision_encoder", "multimodal", "quantization", "yarn", "llama_4_scaling",
                                                      "rope_scaling", "lora",           "qk_norm"};
constexpr std::array<std::string_view, 17> kRead = {
    "dim",       "n_layers",   "n_heads",    "n_kv_heads",      "head_dim",        "hidden_dim",     "ffn_dim_multiplier", "multiple_of",
    "norm_eps",  "rope_theta", "vocab_size", "use_scaled_rope", "tied_embeddings", "sliding_window", "max_seq_len",        "max_position_embeddings",
    "activation"};

bool listed(std::string_view key, std::span<const std::string_view> keys) {
  for (std::string_view k : keys)
    if (k == key) return true;
  return false;
}

Status check_keys(const JsonFile& file) {
  for (auto field : json::as_object(file.root())) {
    const std::string_view key = field.key;
    if (listed(key, kRead) || listed(key, kInert)) continue;
    if (listed(key, kRefused))
      return Error(ErrorKind::NotSupported, "key " + json::quoted(key) + " is not converted yet (it changes the model)").with_file(file.path());
    return Error(ErrorKind::NotSupported, "key " + json::quoted(key) + " is not understood (it may change the model, so it is not ignored)")
        .with_file(file.path());
  }
  return Status::ok();
}

// Llama 2 writes -1 ("take the tokenizer's"); anything else must be a count.
Result<std::optional<std::uint32_t>> vocab_size(const JsonFile& file) {
  SW_ASSIGN_OR_RETURN(auto v, file.integer(file.root(), "vocab_size", -1, hf::kMaxVocab));
  if (!v || *v == -1) return std::optional<std::uint32_t>();
  if (*v == 0) return file.bad("vocab_size", "must be positive, or -1");
  return std::optional<std::uint32_t>(static_cast<std::uint32_t>(*v));
}

// An integer, a string holding one (transformers casts it with int()), or null; a list (one window per
// layer) is refused.
Result<std::optional<std::uint32_t>> sliding_window(const JsonFile& file) {
  auto e = JsonFile::member(file.root(), "sliding_window");
  if (!e) return std::optional<std::uint32_t>();
  if (e->type() == json::element_type::ARRAY)
    return Error(ErrorKind::NotSupported, "key `sliding_window` as a list (a window per layer) is not converted yet").with_file(file.path());
  if (e->type() == json::element_type::STRING) {
    const std::string_view text = json::as_string(*e);
    std::uint32_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v == 0) return file.bad("sliding_window", "must be a positive integer");
    return std::optional<std::uint32_t>(v);
  }
  return file.count(file.root(), "sliding_window");
}

Status check_activation(const JsonFile& file) {
  SW_ASSIGN_OR_RETURN(auto activation, file.string(file.root(), "activation"));
  if (activation && *activation != "silu")
    return Error(ErrorKind::NotSupported, "key `activation` is " + json::quoted(*activation) + ": only silu is converted").with_file(file.path());
  return Status::ok();
}

}  // namespace

Result<Params> read_params(const Folder& folder) {
  SW_ASSIGN_OR_RETURN(auto file, JsonFile::read(folder, "params.json", hf::kMaxConfigBytes));
  SW_RETURN_IF_ERROR(check_keys(*file));
  SW_RETURN_IF_ERROR(check_activation(*file));
  const auto root = file->root();
  Params p;
  p.path = file->path();
  SW_ASSIGN_OR_RETURN(p.dim, file->required_count(root, "dim"));
  SW_ASSIGN_OR_RETURN(p.n_layers, file->required_count(root, "n_layers", 1 << 16));
  SW_ASSIGN_OR_RETURN(p.n_heads, file->required_count(root, "n_heads"));
  SW_ASSIGN_OR_RETURN(p.n_kv_heads, file->count(root, "n_kv_heads"));
  SW_ASSIGN_OR_RETURN(p.head_dim, file->count(root, "head_dim"));
  SW_ASSIGN_OR_RETURN(p.hidden_dim, file->count(root, "hidden_dim"));
  SW_ASSIGN_OR_RETURN(p.ffn_dim_multiplier, file->positive(root, "ffn_dim_multiplier"));
  SW_ASSIGN_OR_RETURN(p.multiple_of, file->count(root, "multiple_of"));
  SW_ASSIGN_OR_RETURN(p.norm_eps, file->positive(root, "norm_eps"));
  SW_ASSIGN_OR_RETURN(p.rope_theta, file->positive(root, "rope_theta"));
  SW_ASSIGN_OR_RETURN(p.vocab_size, vocab_size(*file));
  SW_ASSIGN_OR_RETURN(auto scaled, file->boolean(root, "use_scaled_rope"));
  p.use_scaled_rope = scaled.value_or(false);
  SW_ASSIGN_OR_RETURN(p.tied_embeddings, file->boolean(root, "tied_embeddings"));
  SW_ASSIGN_OR_RETURN(p.sliding_window, sliding_window(*file));
  SW_ASSIGN_OR_RETURN(auto seq, file->count(root, "max_seq_len"));
  SW_ASSIGN_OR_RETURN(auto positions, file->count(root, "max_position_embeddings"));
  if (seq && positions && *seq != *positions) return file->bad("max_seq_len", "differs from `max_position_embeddings`");
  p.max_seq_len = seq ? seq : positions;
  if (p.n_kv_heads && p.n_heads % *p.n_kv_heads != 0) return file->bad("n_kv_heads", "must divide `n_heads`");
  if (!p.head_dim && p.dim % p.n_heads != 0) return file->bad("n_heads", "must divide `dim` (there is no `head_dim`)");
  if (p.head_dim && *p.head_dim % 2 != 0) return file->bad("head_dim", "must be even (rotary pairs)");
  return p;
}

}  // namespace safeweights::original
