// safeweights sample OUT: a small, deterministic model file for trying the other commands.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "cli_common.h"
#include "commands.h"
#include "safeweights/safetensors_writer.h"

namespace safeweights::cli {
namespace {

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::uint16_t to_bf16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<std::uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}

std::uint16_t to_f16(float f) {  // exact for the small values used here
  if (f == 0.0f) return 0;
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  std::uint32_t sign = (bits >> 16) & 0x8000;
  int exp = static_cast<int>((bits >> 23) & 0xFF) - 127 + 15;
  std::uint32_t mant = (bits >> 13) & 0x3FF;
  return static_cast<std::uint16_t>(sign | (static_cast<std::uint32_t>(exp) << 10) | mant);
}

}  // namespace

int run_sample(const SampleArgs& args) {
  const std::string& out = args.output;
  const std::uint64_t vocab = 16, hidden = 8;
  std::vector<float> embed(vocab * hidden);
  for (std::size_t i = 0; i < embed.size(); ++i) embed[i] = static_cast<float>(i) * 0.5f;
  std::vector<std::uint16_t> q_proj(hidden * hidden);
  for (std::size_t i = 0; i < q_proj.size(); ++i) q_proj[i] = to_bf16(std::sin(static_cast<float>(i)));
  std::vector<std::uint16_t> up_bias(4 * hidden);
  for (std::size_t i = 0; i < up_bias.size(); ++i) up_bias[i] = to_f16(static_cast<float>(i) - 16.0f);
  std::vector<float> norm(hidden, 1.0f);
  std::vector<double> scale{0.125};
  std::vector<std::uint8_t> mask(16);
  for (std::size_t i = 0; i < 16; ++i) mask[i] = (i % 4) <= (i / 4) ? 1 : 0;  // lower-triangular 4x4
  std::vector<std::int64_t> ids{101, 2023, 2003, 1037, 102};

  std::vector<std::vector<std::byte>> keep;
  auto add = [&](std::vector<std::byte> b) -> std::span<const std::byte> {
    keep.push_back(std::move(b));
    return keep.back();
  };
  keep.reserve(8);
  std::vector<safetensors::TensorData> tensors = {
      {"model.embed_tokens.weight", TensorType::F32, {vocab, hidden}, add(bytes_of(embed))},
      {"model.layers.0.self_attn.q_proj.weight", TensorType::BF16, {hidden, hidden}, add(bytes_of(q_proj))},
      {"model.layers.0.mlp.up_proj.bias", TensorType::F16, {4 * hidden}, add(bytes_of(up_bias))},
      {"model.layers.0.input_layernorm.weight", TensorType::F32, {hidden}, add(bytes_of(norm))},
      {"model.logit_scale", TensorType::F64, {}, add(bytes_of(scale))},
      {"model.causal_mask", TensorType::BOOL, {4, 4}, add(bytes_of(mask))},
      {"model.example_ids", TensorType::I64, {5}, add(bytes_of(ids))},
  };
  std::optional<MetadataEntries> metadata = safetensors::MetadataEntries{{"format", "pt"}, {"created_by", "safeweights sample"}};
  Status s = safetensors::write_file(out, tensors, metadata);
  if (!s.is_ok()) return exit_status(s);
  std::printf("wrote %s (%zu tensors)\n", printable(out).c_str(), tensors.size());
  return kExitOk;
}

}  // namespace safeweights::cli
