// Next-token-prediction layers (hf/nextn.h).
#include "hf/nextn.h"

#include <array>

#include "hf/json_read.h"

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

}  // namespace

Status read_nextn_layers(const JsonFile& file, ModelConfig& c) {
  if (c.arch->nextn_key.empty()) return Status::ok();
  SW_ASSIGN_OR_RETURN(auto count, file.integer(file.root(), c.arch->nextn_key, 0, kMaxBlocks - c.num_hidden_layers));
  if (!count) return Status::ok();
  c.nextn_layers = static_cast<std::uint32_t>(*count);
  c.arch_kv.push_back({std::string(c.arch->name) + ".nextn_predict_layers", MetaValue::u32(c.nextn_layers)});
  return Status::ok();
}

bool has_layer(const TensorFile& weights, const std::string& hf) {
  for (const TensorEntry& e : weights.tensors()) {
    if (e.name.starts_with(hf)) return true;
  }
  return false;
}

Status plan_nextn_tensors(const ModelConfig& c, const TensorFile& weights, const std::string& hf, const std::string& gg,
                          std::vector<ConvertTensor>& out) {
  for (const NextnRule& rule : kNextn) {
    const std::string from = hf + std::string(rule.hf);
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
