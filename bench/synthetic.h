// synthetic.h — the synthetic checkpoints the benchmarks use (no real weights are needed).
//
// llama_like(): 58 decoder layers of 12 tensors each plus embeddings, final norm, LM head and a rotary
//   table = 700 tensors, 2.12 GB of BF16 weights with F16 norms/biases: the shape of workload (b) in
//   shared/reference/baselines.md.
// moe_like(n): n expert matrices named model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight,
//   BF16 [64, 128] each: about 119 header bytes per tensor, so 20,000 tensors give a ~2.3 MB header
//   (workload (a)).
// header_prefix(): the first 8 + N bytes of such a file, built here by hand (not by the library's
//   writer), tensors in the reference writer's order (dtype descending, then name), data offsets
//   contiguous from 0, JSON compact and space-padded to a multiple of 8.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "safeweights/tensor_type.h"

namespace bench {

struct SynthTensor {
  std::string name;
  safeweights::TensorType dtype;
  std::vector<std::uint64_t> shape;

  std::uint64_t nbytes() const {
    std::uint64_t n = 1;
    for (auto d : shape) n *= d;
    return n * safeweights::type_bits(dtype) / 8;
  }
};

// Sorted the way the reference writer lays tensors out: dtype descending, then name ascending.
inline void sort_file_order(std::vector<SynthTensor>& tensors) {
  std::sort(tensors.begin(), tensors.end(), [](const SynthTensor& a, const SynthTensor& b) {
    if (a.dtype != b.dtype) return a.dtype > b.dtype;
    return a.name < b.name;
  });
}

inline std::vector<SynthTensor> llama_like(int layers = 58) {
  using safeweights::TensorType;
  constexpr std::uint64_t hidden = 1280, inter = 3328, kv = 320, vocab = 32000;
  std::vector<SynthTensor> t;
  t.push_back({"model.embed_tokens.weight", TensorType::BF16, {vocab, hidden}});
  t.push_back({"lm_head.weight", TensorType::BF16, {vocab, hidden}});
  t.push_back({"model.norm.weight", TensorType::F16, {hidden}});
  t.push_back({"model.rotary_emb.inv_freq", TensorType::F32, {64}});
  for (int l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back({p + "self_attn.q_proj.weight", TensorType::BF16, {hidden, hidden}});
    t.push_back({p + "self_attn.k_proj.weight", TensorType::BF16, {kv, hidden}});
    t.push_back({p + "self_attn.v_proj.weight", TensorType::BF16, {kv, hidden}});
    t.push_back({p + "self_attn.o_proj.weight", TensorType::BF16, {hidden, hidden}});
    t.push_back({p + "self_attn.q_proj.bias", TensorType::F16, {hidden}});
    t.push_back({p + "self_attn.k_proj.bias", TensorType::F16, {kv}});
    t.push_back({p + "self_attn.v_proj.bias", TensorType::F16, {kv}});
    t.push_back({p + "mlp.gate_proj.weight", TensorType::BF16, {inter, hidden}});
    t.push_back({p + "mlp.up_proj.weight", TensorType::BF16, {inter, hidden}});
    t.push_back({p + "mlp.down_proj.weight", TensorType::BF16, {hidden, inter}});
    t.push_back({p + "input_layernorm.weight", TensorType::F16, {hidden}});
    t.push_back({p + "post_attention_layernorm.weight", TensorType::F16, {hidden}});
  }
  sort_file_order(t);
  return t;
}

inline std::vector<SynthTensor> moe_like(int count) {
  static const char* const kProj[] = {"gate_proj", "up_proj", "down_proj"};
  std::vector<SynthTensor> t;
  t.reserve(static_cast<std::size_t>(count));
  for (int k = 0; k < count; ++k) {
    const int layer = k / 192, expert = (k % 192) / 3, proj = k % 3;
    t.push_back({"model.layers." + std::to_string(layer) + ".mlp.experts." + std::to_string(expert) + "." + kProj[proj] + ".weight",
                 safeweights::TensorType::BF16,
                 {64, 128}});
  }
  sort_file_order(t);
  return t;
}

inline std::uint64_t data_size(const std::vector<SynthTensor>& tensors) {
  std::uint64_t total = 0;
  for (const auto& t : tensors) total += t.nbytes();
  return total;
}

// Length prefix + JSON header + padding, for tensors already in file order.
inline std::string header_prefix(const std::vector<SynthTensor>& tensors) {
  std::string json = "{\"__metadata__\":{\"format\":\"pt\"}";
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    json += ",\"" + t.name + "\":{\"dtype\":\"" + std::string(safeweights::type_name(t.dtype)) + "\",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
      if (i) json += ',';
      json += std::to_string(t.shape[i]);
    }
    const std::uint64_t end = offset + t.nbytes();
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  json += "}";
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string prefix(8, '\0');
  const std::uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) prefix[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return prefix + json;
}

}  // namespace bench
