// DeepSeek's latent attention (src/hf/mla.h): kv_b_proj split into llama.cpp's attn_k_b (each head's key
// rows transposed, computed as read) and attn_v_b (each head's value rows, stacked), checked byte for
// byte on 2-byte elements, with reads that start and end inside elements and cross heads.
#include <gtest/gtest.h>

#include <cstring>

#include "hf/generated.h"
#include "hf/hf_files.h"
#include "core/status_macros.h"
#include "hf/mla.h"
#include "safeweights/format.h"
#include "test_util.h"

using namespace safeweights;
using namespace swt;

namespace {

constexpr std::uint64_t kHeads = 2, kNope = 3, kV = 2, kRope = 2, kRank = 4, kHidden = 4;

// A folder's weights: the layer's attention in F16, kv_b_proj holding its element index (so a byte's
// place tells where it came from), every other tensor zeros.
std::string attention_file() {
  const std::vector<std::pair<std::string, std::vector<std::uint64_t>>> tensors = {
      {"model.layers.0.self_attn.q_proj.weight", {kHeads * (kNope + kRope), kHidden}},
      {"model.layers.0.self_attn.kv_a_proj_with_mqa.weight", {kRank + kRope, kHidden}},
      {"model.layers.0.self_attn.kv_a_layernorm.weight", {kRank}},
      {"model.layers.0.self_attn.o_proj.weight", {kHidden, kHeads * kV}},
      {"model.layers.0.self_attn.kv_b_proj.weight", {kHeads * (kNope + kV), kRank}},
  };
  std::string header = "{", data;
  for (const auto& [name, shape] : tensors) {
    std::uint64_t n = 1;
    for (auto d : shape) n *= d;
    const std::string dims = shape.size() == 1 ? std::to_string(shape[0]) : std::to_string(shape[0]) + "," + std::to_string(shape[1]);
    if (header.size() > 1) header += ',';
    header += "\"" + name + "\":" + entry("F16", dims, data.size(), data.size() + 2 * n);
    for (std::uint64_t i = 0; i < n; ++i) {
      const bool kv_b = name.ends_with("kv_b_proj.weight");
      data.push_back(static_cast<char>(kv_b ? i & 0xff : 0));
      data.push_back(static_cast<char>(kv_b ? 0x40 + (i >> 8) : 0));
    }
  }
  return st_file(header + "}") + data;
}

hf::ModelConfig mla_config() {
  hf::ModelConfig c;
  c.hidden_size = kHidden;
  c.num_attention_heads = kHeads;
  c.mla = hf::MlaConfig{.q_lora_rank = 0, .kv_lora_rank = kRank, .qk_nope_head_dim = kNope, .qk_rope_head_dim = kRope, .v_head_dim = kV};
  return c;
}

const ConvertTensor* named(const std::vector<ConvertTensor>& out, std::string_view name) {
  for (const ConvertTensor& t : out) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// The attention file on disk, opened, and what plan_mla_attention makes of it.
struct Planned {
  TempDir dir;
  std::unique_ptr<TensorFile> weights;
  std::unique_ptr<hf::WithGenerated> generated;
  std::vector<ConvertTensor> out;

  Status plan(const hf::ModelConfig& c) {
    write_file_bytes(dir.file("model.safetensors"), attention_file());
    SW_ASSIGN_OR_RETURN(weights, open_tensors(dir.file("model.safetensors")));
    generated = std::make_unique<hf::WithGenerated>(*weights);
    return hf::plan_mla_attention(c, *weights, *generated, "model.layers.0.", "blk.0.", out);
  }
};

TEST(HfMla, KvBIsSplitIntoTransposedKeyHeadsAndStackedValueHeads) {
  Planned p;
  ASSERT_TRUE(IsOk(p.plan(mla_config())));
  const auto& out = p.out;
  const hf::WithGenerated& generated = *p.generated;
  EXPECT_NE(named(out, "blk.0.attn_q.weight"), nullptr);  // q_lora_rank 0: one q_proj
  EXPECT_EQ(named(out, "blk.0.attn_q_a.weight"), nullptr);

  const ConvertTensor* k_b = named(out, "blk.0.attn_k_b.weight");
  ASSERT_NE(k_b, nullptr);
  const TensorEntry* e = generated.find(k_b->source);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->type, TensorType::F16);
  EXPECT_EQ(std::vector<std::uint64_t>(e->shape.begin(), e->shape.end()), (std::vector<std::uint64_t>{kHeads, kRank, kNope}));
  std::vector<std::byte> all(e->nbytes);
  ASSERT_TRUE(IsOk(e->read(all)));
  // k_b[h, r, j] = kv_b[h * (nope + v) + j, r]: kv_b's element index, low byte first.
  for (std::uint64_t h = 0; h < kHeads; ++h) {
    for (std::uint64_t r = 0; r < kRank; ++r) {
      for (std::uint64_t j = 0; j < kNope; ++j) {
        const std::uint64_t at = ((h * kRank + r) * kNope + j) * 2;
        const std::uint64_t source = (h * (kNope + kV) + j) * kRank + r;
        EXPECT_EQ(static_cast<unsigned>(all[at]), source & 0xff) << h << "," << r << "," << j;
        EXPECT_EQ(static_cast<unsigned>(all[at + 1]), 0x40 + (source >> 8));
      }
    }
  }
  // A read that starts and ends inside elements and crosses from head 0 to head 1.
  std::vector<std::byte> part(21);
  ASSERT_TRUE(IsOk(e->source->read_at(11, part)));
  EXPECT_EQ(std::memcmp(part.data(), all.data() + 11, part.size()), 0);
  std::vector<std::byte> past(2);
  EXPECT_TRUE(IsKind(e->source->read_at(e->nbytes - 1, past), ErrorKind::OutOfRange));

  const ConvertTensor* v_b = named(out, "blk.0.attn_v_b.weight");
  ASSERT_NE(v_b, nullptr);
  EXPECT_TRUE(v_b->stack);
  ASSERT_EQ(v_b->pieces.size(), kHeads);
  for (std::uint64_t h = 0; h < kHeads; ++h) {  // each head's value rows, after its key rows
    EXPECT_EQ(v_b->pieces[h].source, "model.layers.0.self_attn.kv_b_proj.weight");
    EXPECT_EQ(v_b->pieces[h].dim, 0u);
    EXPECT_EQ(v_b->pieces[h].begin, h * (kNope + kV) + kNope);
    EXPECT_EQ(v_b->pieces[h].end, (h + 1) * (kNope + kV));
  }
}

TEST(HfMla, AMisshapenKvBIsRefusedNamingIt) {
  Planned p;
  hf::ModelConfig c = mla_config();
  c.mla->v_head_dim = 3;  // o_proj then mismatches first: what config.json implies, named
  Status s = p.plan(c);
  ASSERT_TRUE(IsKind(s, ErrorKind::InvalidModelFolder));
  EXPECT_NE(s.to_string().find("o_proj"), std::string::npos) << s.to_string();
}

}  // namespace
