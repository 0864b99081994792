// Next-token-prediction layers (hf/nextn.h).
#include "hf/nextn.h"

#include <algorithm>
#include <array>
#include <optional>

#include "hf/json_read.h"
#include "hf/multimodal.h"

namespace safeweights::hf {
namespace {

// llama.cpp's loader holds at most LLAMA_MAX_LAYERS (llama-hparams.h) blocks, next-token ones included.
constexpr std::int64_t kMaxBlocks = 512;

enum class Width { None, Hidden, TwoHidden, Vocab };

struct NextnRule {
  std::string_view hf;    // after "model.layers.N."
  std::string_view gguf;  // after "blk.N."
  Width rows;
  Width cols;  // None: a vector
  bool required;
};

// gguf-py's NEXTN_* names (constants.py, tensor_mapping.py); what src/models/glm4-moe.cpp requires.
constexpr std::array<NextnRule, 6> kNextn = {{
    {"eh_proj.weight", "nextn.eh_proj.weight", Width::Hidden, Width::TwoHidden, true},
    {"enorm.weight", "nextn.enorm.weight", Width::Hidden, Width::None, true},
    {"hnorm.weight", "nextn.hnorm.weight", Width::Hidden, Width::None, true},
    {"embed_tokens.weight", "nextn.embed_tokens.weight", Width::Vocab, Width::Hidden, false},
    {"shared_head.head.weight", "nextn.shared_head_head.weight", Width::Vocab, Width::Hidden, false},
    {"shared_head.norm.weight", "nextn.shared_head_norm.weight", Width::Hidden, Width::None, false},
}};

std::uint64_t size(const ModelConfig& c, Width w) {
  switch (w) {
    case Width::Hidden: return c.hidden_size;
    case Width::TwoHidden: return 2 * std::uint64_t{c.hidden_size};
    case Width::Vocab: return c.vocab_size;
    case Width::None: break;
  }
  return 0;
}

bool has_layer(const TensorFile& weights, const std::string& hf) {
  for (const TensorEntry& e : weights.tensors()) {
    if (e.name.starts_with(hf)) return true;
  }
  return false;
}

// The layer index of `name` when it is `<prefix>layers.<i>.<rest>` (at most 9 digits, so that it fits
// 32 bits whatever the name says).
std::optional<std::uint32_t> layer_index(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix) || !name.substr(prefix.size()).starts_with("layers.")) return std::nullopt;
  name.remove_prefix(prefix.size() + std::string_view("layers.").size());
  std::uint32_t n = 0;
  std::size_t digits = 0;
  for (; digits < name.size() && digits < 9 && name[digits] >= '0' && name[digits] <= '9'; ++digits) {
    n = n * 10 + static_cast<std::uint32_t>(name[digits] - '0');
  }
  if (digits == 0 || digits >= name.size() || name[digits] != '.') return std::nullopt;
  return n;
}

// The source of next-token tensor `rule` of layer `n`: under its layer's prefix, or the layout's own name.
std::optional<std::string> nextn_source(const ModelConfig& c, const TextModelNames& names, std::uint32_t n, const NextnRule& rule) {
  if (!c.arch->nextn_layout) return layer_prefix(c, names, n) + std::string(rule.hf);
  if (n != c.num_hidden_layers) return std::nullopt;  // llama.cpp's converter renames the first layer's only
  for (const NextnRename& own : c.arch->nextn_layout->own) {
    if (own.rule == rule.hf) return c.nextn_prefix + std::string(own.name);
  }
  return std::nullopt;
}

std::string layout_refusal(const ModelConfig& c) {
  const std::uint32_t max = c.arch->nextn_layout->max_layers;
  return "llama.cpp's " + std::string(c.arch->name) + " runs " + std::to_string(max) + " multi-token-prediction layer" + (max == 1 ? "" : "s") +
         " (its converter gives the layers past the first no nextn tensors of their own)";
}

}  // namespace

Status read_nextn_layers(const JsonFile& file, ModelConfig& c) {
  if (c.arch->nextn_key.empty()) return Status::ok();
  SW_ASSIGN_OR_RETURN(auto count, file.integer(file.root(), c.arch->nextn_key, 0, kMaxBlocks - c.num_hidden_layers));
  if (!count) return Status::ok();
  c.nextn_layers = static_cast<std::uint32_t>(*count);
  if (c.arch->nextn_layout) {
    if (c.nextn_layers > c.arch->nextn_layout->max_layers) {
      return Error(ErrorKind::NotSupported,
                   "key `" + std::string(c.arch->nextn_key) + "` is " + std::to_string(c.nextn_layers) + ": " + layout_refusal(c))
          .with_file(file.path());
    }
    return Status::ok();  // read_nextn_weights writes the key (none for 0: the count is then the weights')
  }
  c.arch_kv.push_back({std::string(c.arch->name) + ".nextn_predict_layers", MetaValue::u32(c.nextn_layers)});
  return Status::ok();
}

Status read_nextn_weights(const TensorFile& weights, ModelConfig& c) {
  const NextnLayout* layout = c.arch->nextn_layout;
  if (!layout) return Status::ok();
  c.nextn_prefix = std::string(layout->prefixes.front());
  bool used_prefix = false;
  for (std::string_view prefix : layout->prefixes) {
    used_prefix = std::any_of(weights.tensors().begin(), weights.tensors().end(), [&](const TensorEntry& e) { return e.name.starts_with(prefix); });
    if (used_prefix) {
      c.nextn_prefix = std::string(prefix);
      break;
    }
  }
  std::uint32_t held = 0;
  for (const TensorEntry& e : weights.tensors()) {
    const auto n = layer_index(e.name, c.nextn_prefix);
    if (!n) continue;
    if (*n >= layout->max_layers) {
      return Error(ErrorKind::NotSupported, "multi-token-prediction layer " + std::to_string(*n) + ": " + layout_refusal(c))
          .with_file(weights.name())
          .with_tensor(e.name);
    }
    held = std::max(held, *n + 1);
  }
  if (c.nextn_layers == 0) c.nextn_layers = held;
  if (c.nextn_layers > 0 && !used_prefix) {
    // Counted by config.json, held by no weight (transformers saves no mtp.*): llama.cpp's converter then
    // writes the count without the layer's tensors, which its loader refuses; written as with --no-mtp.
    c.notes.push_back(std::string(c.arch->nextn_key) + " counts " + std::to_string(c.nextn_layers) +
                      " multi-token-prediction layer(s) the weights do not hold: written without them, as llama.cpp's converter writes "
                      "with --no-mtp (its default file, the count without the layers' tensors, llama.cpp does not load)");
    c.nextn_layers = 0;
  }
  // llama.cpp's converter writes the key only for a count above 0 here.
  if (c.nextn_layers > 0) c.arch_kv.push_back({std::string(c.arch->name) + ".nextn_predict_layers", MetaValue::u32(c.nextn_layers)});
  return Status::ok();
}

std::string layer_prefix(const ModelConfig& c, const TextModelNames& names, std::uint32_t n) {
  if (c.arch->nextn_layout && n >= c.num_hidden_layers) return c.nextn_prefix + "layers." + std::to_string(n - c.num_hidden_layers) + ".";
  return names.prefix + "layers." + std::to_string(n) + ".";
}

bool nextn_present(const ModelConfig& c, const TextModelNames& names, const TensorFile& weights, std::uint32_t n) {
  if (has_layer(weights, layer_prefix(c, names, n))) return true;
  for (const NextnRule& rule : kNextn) {
    const auto source = nextn_source(c, names, n, rule);
    if (source && weights.find(*source)) return true;
  }
  return false;
}

Status plan_nextn_tensors(const ModelConfig& c, const TextModelNames& names, const TensorFile& weights, std::uint32_t n,
                          std::vector<ConvertTensor>& out) {
  const std::string gg = "blk." + std::to_string(n) + ".";
  for (const NextnRule& rule : kNextn) {
    const auto source = nextn_source(c, names, n, rule);
    if (!source) continue;
    const std::string& from = *source;
    if (!rule.required && !weights.find(from)) continue;
    std::vector<std::uint64_t> shape = {size(c, rule.rows)};
    if (rule.cols != Width::None) shape.push_back(size(c, rule.cols));
    std::string to = gg + std::string(rule.gguf);
    SW_RETURN_IF_ERROR(expect_tensor(weights, from, to, shape));
    out.push_back({.source = from, .name = std::move(to)});
  }
  return Status::ok();
}

}  // namespace safeweights::hf
