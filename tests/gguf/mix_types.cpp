// mix_types ARCH FILE_TYPE N_LAYER N_EMBD N_FF N_VOCAB N_HEAD N_HEAD_KV: the type llama-quantize's
// rules (src/gguf/quant_mix.h, which Format::plan_mix applies) give each 2-D tensor of a dense
// llama-style model of those sizes (F32 tensors, heads of 128, no importance matrix), one "name TYPE"
// line each, without plan_mix's refusal of the types that need a matrix (llama.cpp's snapshots list
// them). Test-only: tests/clients/test_quantize_mixes.py compares it with those snapshots.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gguf/quant_mix.h"
#include "safeweights/format.h"

using namespace safeweights;

int main(int argc, char** argv) {
  if (argc != 9) {
    std::fprintf(stderr, "usage: mix_types ARCH FILE_TYPE N_LAYER N_EMBD N_FF N_VOCAB N_HEAD N_HEAD_KV\n");
    return 2;
  }
  const std::string arch = argv[1];
  const auto n = [&](int i) { return std::strtoull(argv[i], nullptr, 10); };
  const std::uint64_t layers = n(3), embd = n(4), ff = n(5), vocab = n(6), heads = n(7), kv = n(8), head_dim = 128;
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> shapes = {
      {"token_embd.weight", {vocab, embd}}, {"output_norm.weight", {embd}}, {"output.weight", {vocab, embd}}};
  for (std::uint64_t i = 0; i < layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    shapes.push_back({b + "attn_norm.weight", {embd}});
    shapes.push_back({b + "attn_q.weight", {heads * head_dim, embd}});
    shapes.push_back({b + "attn_k.weight", {kv * head_dim, embd}});
    shapes.push_back({b + "attn_v.weight", {kv * head_dim, embd}});
    shapes.push_back({b + "attn_output.weight", {embd, heads * head_dim}});
    shapes.push_back({b + "ffn_norm.weight", {embd}});
    shapes.push_back({b + "ffn_gate.weight", {ff, embd}});
    shapes.push_back({b + "ffn_up.weight", {ff, embd}});
    shapes.push_back({b + "ffn_down.weight", {embd, ff}});
  }
  std::vector<MixTensor> tensors;
  for (const auto& [name, shape] : shapes) tensors.push_back({name, TensorType::F32, shape});
  Metadata md;
  md.set({"general.architecture", MetaValue::string(arch)});
  md.set({arch + ".block_count", MetaValue::u32(static_cast<std::uint32_t>(layers))});
  md.set({arch + ".attention.head_count", MetaValue::u32(static_cast<std::uint32_t>(heads))});
  md.set({arch + ".attention.head_count_kv", MetaValue::u32(static_cast<std::uint32_t>(kv))});
  const gguf::FileType* ft = gguf::find_file_type(argv[2]);
  auto model = gguf::model_facts(md);
  if (!ft || !model.is_ok()) {
    std::fprintf(stderr, "unknown file type %s, or bad sizes\n", argv[2]);
    return 1;
  }
  const QuantizeMix knobs;
  auto types = gguf::choose_types(*ft, knobs, *model, tensors, false);
  if (!types.is_ok()) {
    std::fprintf(stderr, "%s\n", types.error().to_string().c_str());
    return 1;
  }
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (shapes[i].second.size() == 2) std::printf("%s %s\n", shapes[i].first.c_str(), std::string(type_name((*types)[i].type)).c_str());
  return 0;
}
