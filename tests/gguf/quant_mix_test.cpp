// GGUF's quantization mixes (Format::plan_mix: llama-quantize's file types, knobs and importance
// matrices) through the public API. The expected types are worked out here by hand from llama.cpp's
// rules (src/llama-quant.cpp), never taken from our code; the byte-level judge against llama-quantize
// itself is tests/clients/test_quantize_mixes.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "test_util.h"
#include "safeweights/convert.h"
#include "safeweights/format.h"
#include "safeweights/gguf.h"
#include "safeweights/quantize.h"

using namespace safeweights;
using swt::IsKind;
using swt::IsOk;
using swt::TempDir;
using swt::write_file_bytes;

namespace {

const Format& gguf_format() { return *find_format("gguf"); }

// A dense llama of `layers` layers, 256 columns everywhere (K-quant blocks fit), with or without its
// own output tensor, as the mix sees it.
struct Model {
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> shapes;
  Metadata md;
  std::vector<MixTensor> tensors() const {
    std::vector<MixTensor> out;
    for (const auto& [n, s] : shapes) out.push_back({n, TensorType::F16, s});
    return out;
  }
};

Model llama(int layers, std::uint32_t heads, std::uint32_t kv_heads, bool output = true) {
  Model m;
  m.shapes.push_back({"token_embd.weight", {1000, 256}});
  m.shapes.push_back({"output_norm.weight", {256}});
  if (output) m.shapes.push_back({"output.weight", {1000, 256}});
  for (int i = 0; i < layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
      m.shapes.push_back({b + n + ".weight", {256, 256}});
    m.shapes.push_back({b + "attn_norm.weight", {256}});
  }
  m.md.set({"general.architecture", MetaValue::string("llama")});
  m.md.set({"llama.block_count", MetaValue::u32(static_cast<std::uint32_t>(layers))});
  m.md.set({"llama.attention.head_count", MetaValue::u32(heads)});
  m.md.set({"llama.attention.head_count_kv", MetaValue::u32(kv_heads)});
  return m;
}

std::map<std::string, TensorType> types_of(const Model& m, const QuantizeMix& mix) {
  const auto tensors = m.tensors();
  auto plan = gguf_format().plan_mix(mix, tensors, m.md);
  EXPECT_TRUE(plan.is_ok()) << (plan.is_ok() ? "" : plan.error().to_string());
  std::map<std::string, TensorType> out;
  if (!plan.is_ok()) return out;
  for (std::size_t i = 0; i < tensors.size(); ++i) out[std::string(tensors[i].name)] = plan->tensors[i].type;
  return out;
}

QuantizeMix mix_of(std::string name) {
  QuantizeMix mix;
  mix.file_type = std::move(name);
  return mix;
}

TEST(QuantMix, FileTypesByNameAndNumberInAnyCase) {
  for (const char* name : {"Q4_K_M", "q4_k_m", "15", "Q4_K", "IQ2_XXS", "iq3_m", "MXFP4_MOE", "TQ1_0", "Q2_K_S", "F16", "bf16", "0", "38"})
    EXPECT_TRUE(gguf::is_llama_file_type(name)) << name;
  for (const char* name : {"", "Q4_K_X", "q4_k_m ", "4", "15a", "-15", "COPY", "Q8_K", "1024", "+15"})
    EXPECT_FALSE(gguf::is_llama_file_type(name)) << name;
}

// Q4_K_M on 8 layers: use_more_bits(i, 8) holds for i < 1, i >= 7 and (i - 1) % 3 == 2, so layers 0,
// 3, 6 and 7 get Q6_K for attn_v and ffn_down; the output tensor Q6_K; everything else Q4_K; norms and
// the 1-D tensors keep their type.
TEST(QuantMix, Q4KMRaisesAttnVAndFfnDownInLlamaCppsLayers) {
  const auto types = types_of(llama(8, 4, 4), mix_of("Q4_K_M"));
  EXPECT_EQ(types.at("output.weight"), TensorType::Q6_K);
  EXPECT_EQ(types.at("token_embd.weight"), TensorType::Q4_K);
  EXPECT_EQ(types.at("output_norm.weight"), TensorType::F16);
  for (int i = 0; i < 8; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const TensorType raised = (i == 0 || i == 3 || i == 6 || i == 7) ? TensorType::Q6_K : TensorType::Q4_K;
    EXPECT_EQ(types.at(b + "attn_v.weight"), raised) << i;
    EXPECT_EQ(types.at(b + "ffn_down.weight"), raised) << i;
    for (const char* n : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"})
      EXPECT_EQ(types.at(b + n + ".weight"), TensorType::Q4_K) << b << n;
    EXPECT_EQ(types.at(b + "attn_norm.weight"), TensorType::F16);
  }
}

// Tied embeddings (no output.weight): token_embd is quantized as the output (Q6_K); Q3_K_M's attn_v is
// Q5_K for the first two attn_v tensors met, Q4_K after; its ffn_down Q5_K below n_layer/16, else Q4_K.
TEST(QuantMix, TiedEmbeddingsAndCountedRules) {
  const auto types = types_of(llama(4, 4, 4, /*output=*/false), mix_of("Q3_K_M"));
  EXPECT_EQ(types.at("token_embd.weight"), TensorType::Q6_K);
  EXPECT_EQ(types.at("blk.0.attn_v.weight"), TensorType::Q5_K);
  EXPECT_EQ(types.at("blk.1.attn_v.weight"), TensorType::Q5_K);
  EXPECT_EQ(types.at("blk.2.attn_v.weight"), TensorType::Q4_K);
  EXPECT_EQ(types.at("blk.0.ffn_down.weight"), TensorType::Q4_K);  // 0 < 4/16 is false
  EXPECT_EQ(types.at("blk.0.attn_output.weight"), TensorType::Q4_K);
  EXPECT_EQ(types.at("blk.0.attn_q.weight"), TensorType::Q3_K);
}

// The counters follow llama.cpp's order (by layer, then name), not the order given: blk.10 after blk.9.
TEST(QuantMix, RulesCountInLlamaCppsOrder) {
  Model m = llama(12, 4, 4, false);
  std::reverse(m.shapes.begin(), m.shapes.end());
  const auto types = types_of(m, mix_of("Q3_K_M"));
  EXPECT_EQ(types.at("blk.0.attn_v.weight"), TensorType::Q5_K);
  EXPECT_EQ(types.at("blk.1.attn_v.weight"), TensorType::Q5_K);
  EXPECT_EQ(types.at("blk.10.attn_v.weight"), TensorType::Q4_K);
}

// GQA 4: Q2_K's attn_v becomes Q4_K (Q3_K below 4); its ffn_down Q3_K, attn_output Q3_K.
TEST(QuantMix, GqaFactorFromTheMetadata) {
  EXPECT_EQ(types_of(llama(2, 8, 2), mix_of("Q2_K")).at("blk.1.attn_v.weight"), TensorType::Q4_K);
  const auto types = types_of(llama(2, 8, 4), mix_of("Q2_K"));
  EXPECT_EQ(types.at("blk.1.attn_v.weight"), TensorType::Q3_K);
  EXPECT_EQ(types.at("blk.1.ffn_down.weight"), TensorType::Q3_K);
  EXPECT_EQ(types.at("blk.1.attn_output.weight"), TensorType::Q3_K);
  EXPECT_EQ(types.at("blk.1.attn_q.weight"), TensorType::Q2_K);
}

// --override-kv as llama.cpp's string_parse_kv_override reads it, and as llama-quantize writes it.
TEST(QuantMix, OverrideKvParsesAsLlamaQuantize) {
  EXPECT_EQ(gguf::parse_kv_override("a.b=int:-4096").value(), (MetaEntry{"a.b", MetaValue::u32(4096)}));  // the magnitude, UINT32
  EXPECT_EQ(gguf::parse_kv_override("a=int:12abc").value(), (MetaEntry{"a", MetaValue::u32(12)}));        // atol stops at the letter
  EXPECT_EQ(gguf::parse_kv_override("a=int:4294967297").value(), (MetaEntry{"a", MetaValue::u32(1)}));    // truncated to 32 bits
  EXPECT_EQ(gguf::parse_kv_override("a=float:0.1").value(), (MetaEntry{"a", MetaValue::f32(0.1f)}));
  EXPECT_EQ(gguf::parse_kv_override("a=bool:false").value(), (MetaEntry{"a", MetaValue::boolean(false)}));
  EXPECT_EQ(gguf::parse_kv_override("a=str:x=y:z").value(), (MetaEntry{"a", MetaValue::string("x=y:z")}));
  EXPECT_EQ(gguf::parse_kv_override("a=str:").value(), (MetaEntry{"a", MetaValue::string("")}));
  EXPECT_EQ(gguf::parse_kv_override("a=str:" + std::string(127, 'x')).value().value, MetaValue::string(std::string(127, 'x')));
  const std::vector<std::string> bad_specs = {"no-equals", "a=string:x", "a=bool:1", "a=str:" + std::string(128, 'x'),
                                              std::string(128, 'k') + "=int:1"};
  for (const std::string& bad : bad_specs) EXPECT_TRUE(IsKind(gguf::parse_kv_override(bad), ErrorKind::InvalidArgument)) << bad;
}

// The overrides are written after general.file_type, and the type rules read the model through them:
// head_count_kv 4 of 8 heads makes GQA 2, so Q2_K's attn_v is Q3_K, not Q4_K.
TEST(QuantMix, OverrideKvIsWrittenAndReadByTheRules) {
  const Model m = llama(2, 8, 2);
  QuantizeMix mix = mix_of("Q2_K");
  mix.override_kv = {gguf::parse_kv_override("llama.attention.head_count_kv=int:4").value(),
                     gguf::parse_kv_override("general.file_type=int:7").value()};
  EXPECT_EQ(types_of(m, mix).at("blk.1.attn_v.weight"), TensorType::Q3_K);
  const auto tensors = m.tensors();
  auto plan = gguf_format().plan_mix(mix, tensors, m.md);
  ASSERT_TRUE(IsOk(plan));
  EXPECT_EQ(*plan->metadata.find("general.file_type"), MetaValue::u32(7));
  EXPECT_EQ(*plan->metadata.find("llama.attention.head_count_kv"), MetaValue::u32(4));
}

// Rows that are not whole blocks take llama.cpp's fallbacks: Q4_K -> Q5_0 (rows of 96), and F16 when
// that does not fit either (rows of 100); the output tensor with such rows is Q8_0.
TEST(QuantMix, FallbacksForRowsThatAreNotWholeBlocks) {
  Model m = llama(1, 4, 4);
  m.shapes.push_back({"blk.0.extra_a.weight", {256, 96}});
  m.shapes.push_back({"blk.0.extra_b.weight", {256, 100}});
  for (auto& [n, s] : m.shapes)
    if (n == "output.weight") s = {1000, 96};
  const auto types = types_of(m, mix_of("Q4_K_S"));
  EXPECT_EQ(types.at("blk.0.extra_a.weight"), TensorType::Q5_0);
  EXPECT_EQ(types.at("blk.0.extra_b.weight"), TensorType::F16);
  EXPECT_EQ(types.at("output.weight"), TensorType::Q8_0);
}

TEST(QuantMix, KnobsAsLlamaQuantizeTakesThem) {
  QuantizeMix mix = mix_of("Q4_K_M");
  mix.pure = true;
  auto types = types_of(llama(8, 4, 4), mix);
  EXPECT_EQ(types.at("blk.0.attn_v.weight"), TensorType::Q4_K);
  EXPECT_EQ(types.at("output.weight"), TensorType::Q4_K);
  mix = mix_of("Q4_K_M");
  mix.output_tensor_type = TensorType::Q8_0;
  mix.token_embedding_type = TensorType::Q5_0;
  mix.tensor_types = {{"ATTN_Q", TensorType::Q5_1}, {"blk\\.1\\.", TensorType::Q8_0}, {"attn_q", TensorType::Q6_K}};
  mix.leave_output_tensor = false;
  types = types_of(llama(8, 4, 4), mix);
  EXPECT_EQ(types.at("output.weight"), TensorType::Q8_0);
  EXPECT_EQ(types.at("token_embd.weight"), TensorType::Q5_0);
  EXPECT_EQ(types.at("blk.0.attn_q.weight"), TensorType::Q5_1);  // the first pattern found, lower-cased
  EXPECT_EQ(types.at("blk.1.ffn_up.weight"), TensorType::Q8_0);
  EXPECT_EQ(types.at("blk.0.ffn_down.weight"), TensorType::Q6_K);  // the rules still apply elsewhere
  mix = mix_of("Q4_K_M");
  mix.leave_output_tensor = true;
  EXPECT_EQ(types_of(llama(8, 4, 4), mix).at("output.weight"), TensorType::F16);
}

Status plan_status(const Model& m, const QuantizeMix& mix) { return gguf_format().plan_mix(mix, m.tensors(), m.md).status(); }

TEST(QuantMix, Refusals) {
  EXPECT_TRUE(IsKind(plan_status(llama(1, 4, 4), mix_of("Q4_K_X")), ErrorKind::InvalidArgument));
  QuantizeMix bad_regex = mix_of("Q4_K_M");
  bad_regex.tensor_types = {{"attn_(q", TensorType::Q8_0}};
  EXPECT_TRUE(IsKind(plan_status(llama(1, 4, 4), bad_regex), ErrorKind::InvalidArgument));
  Model no_arch = llama(1, 4, 4);
  no_arch.md.erase("general.architecture");
  EXPECT_TRUE(IsKind(plan_status(no_arch, mix_of("Q4_K_M")), ErrorKind::InvalidArgument));
  Model no_layers = llama(1, 4, 4);
  no_layers.md.erase("llama.block_count");
  EXPECT_TRUE(IsKind(plan_status(no_layers, mix_of("Q4_K_M")), ErrorKind::InvalidArgument));
  // The types that need an importance matrix refuse without one, naming the tensor.
  Status s = plan_status(llama(1, 4, 4), mix_of("IQ2_XXS"));
  ASSERT_TRUE(IsKind(s, ErrorKind::InvalidArgument));
  const Error e = error_of(s);
  EXPECT_NE(e.message().find("importance matrix"), std::string::npos);
  EXPECT_FALSE(e.context().tensor.empty());
  // A quantized input is requantized only when asked.
  Model q8 = llama(1, 4, 4);
  std::vector<MixTensor> tensors = q8.tensors();
  for (MixTensor& t : tensors) t.type = t.shape.size() == 2 ? TensorType::Q8_0 : TensorType::F32;
  EXPECT_TRUE(IsKind(gguf_format().plan_mix(mix_of("Q4_0"), tensors, q8.md).status(), ErrorKind::InvalidArgument));
  QuantizeMix allowed = mix_of("Q4_0");
  allowed.allow_requantize = true;
  EXPECT_TRUE(IsOk(gguf_format().plan_mix(allowed, tensors, q8.md).status()));
  // A format without mixes says so.
  EXPECT_TRUE(IsKind(find_format("safetensors")->plan_mix(mix_of("Q4_K_M"), tensors, q8.md).status(), ErrorKind::NotSupported));
}

TEST(QuantMix, MetadataStatesTheFileType) {
  const Model m = llama(1, 4, 4);
  auto plan = gguf_format().plan_mix(mix_of("q5_k_s"), m.tensors(), m.md);
  ASSERT_TRUE(plan.is_ok());
  ASSERT_NE(plan->metadata.find("general.file_type"), nullptr);
  EXPECT_EQ(plan->metadata.find("general.file_type")->as_u64(), 16u);
  EXPECT_EQ(plan->metadata.find("general.quantization_version")->as_u64(), 2u);
  EXPECT_EQ(plan->metadata.find("quantize.imatrix.file"), nullptr);
}

// ---- importance matrices ----

std::string le32(std::int32_t v) {
  std::string s(4, '\0');
  std::memcpy(s.data(), &v, 4);
  return s;
}
std::string f32s(std::vector<float> v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4); }

// A legacy .dat: entries of (name, ncall, values), then the chunk count and the dataset's name.
std::string legacy(const std::vector<std::tuple<std::string, std::int32_t, std::vector<float>>>& entries, std::int32_t chunks = 3) {
  std::string s = le32(static_cast<std::int32_t>(entries.size()));
  for (const auto& [name, ncall, values] : entries)
    s += le32(static_cast<std::int32_t>(name.size())) + name + le32(ncall) + le32(static_cast<std::int32_t>(values.size())) + f32s(values);
  return s + le32(chunks) + le32(4) + "text";
}

Result<MixPlan> plan_with(const TempDir& dir, const std::string& bytes, QuantizeMix mix, const Model& m) {
  const std::string path = dir.file("imatrix.dat");
  write_file_bytes(path, bytes);
  mix.imatrix = path;
  return gguf_format().plan_mix(mix, m.tensors(), m.md);
}

Model one_layer() {
  Model m = llama(1, 4, 4);
  m.shapes = {
      {"output.weight", {1000, 256}}, {"blk.0.attn_v.weight", {256, 256}}, {"blk.0.ffn_up.weight", {256, 256}}, {"blk.0.attn_norm.weight", {256}}};
  return m;
}

TEST(QuantMixImatrix, LegacyValuesAreDividedByNcall) {
  TempDir dir;
  std::vector<float> sums(256);
  for (int i = 0; i < 256; ++i) sums[static_cast<std::size_t>(i)] = static_cast<float>(i) * 3.0f;
  auto plan = plan_with(dir, legacy({{"blk.0.attn_v.weight", 3, sums}, {"unused.weight", 1, {1.0f}}}), mix_of("Q4_0"), one_layer());
  ASSERT_TRUE(plan.is_ok()) << plan.error().to_string();
  const std::vector<float>& w = plan->tensors[1].importance;
  ASSERT_EQ(w.size(), 256u);
  EXPECT_EQ(w[5], 5.0f);
  EXPECT_TRUE(plan->tensors[2].importance.empty());  // no entry: quantized without weights
  EXPECT_NE(plan->tensors[2].note.find("no importance data"), std::string::npos);
  EXPECT_EQ(plan->metadata.find("quantize.imatrix.entries_count")->as_u64(), 2u);
  EXPECT_EQ(plan->metadata.find("quantize.imatrix.chunks_count")->as_u64(), 3u);
  EXPECT_EQ(plan->metadata.find("quantize.imatrix.dataset")->str, "text");
}

TEST(QuantMixImatrix, HostileLegacyFilesAreRefusedWithThePlace) {
  TempDir dir;
  const Model m = one_layer();
  const std::string good = legacy({{"blk.0.attn_v.weight", 1, std::vector<float>(256, 1.0f)}});
  const std::vector<std::string> bad = {
      "",                                                       // no entry count
      le32(0),                                                  // no entries
      le32(1) + le32(-5),                                       // negative name length
      le32(1) + le32(1 << 30) + "x",                            // name past the end
      le32(1) + le32(1) + "a" + le32(1) + le32(0),              // no values
      le32(1) + le32(1) + "a" + le32(1) + le32(1 << 29) + "x",  // values past the end
      good.substr(0, 40),                                       // truncated inside the values
  };
  for (const std::string& bytes : bad) {
    auto plan = plan_with(dir, bytes, mix_of("Q4_0"), m);
    ASSERT_FALSE(plan.is_ok()) << bytes.size();
    EXPECT_EQ(plan.error().kind(), ErrorKind::InvalidArgument) << plan.error().to_string();
    EXPECT_FALSE(plan.error().context().file.empty());
  }
  // A size that does not fit the tensor is refused, naming it (a token embedding's would be left out).
  auto wrong = plan_with(dir, legacy({{"blk.0.attn_v.weight", 1, std::vector<float>(128, 1.0f)}}), mix_of("Q4_0"), m);
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_EQ(wrong.error().context().tensor, "blk.0.attn_v.weight");
  // Non-finite values are refused, as llama-quantize refuses them.
  auto nan = plan_with(dir, legacy({{"blk.0.attn_v.weight", 1, std::vector<float>(256, std::nanf(""))}}), mix_of("Q4_0"), m);
  EXPECT_FALSE(nan.is_ok());
  // ... unless filtered out first.
  QuantizeMix excluding = mix_of("Q4_0");
  excluding.exclude_weights = {"attn_v"};
  EXPECT_TRUE(plan_with(dir, legacy({{"blk.0.attn_v.weight", 1, std::vector<float>(256, std::nanf(""))}}), excluding, m).is_ok());
  QuantizeMix both = excluding;
  both.include_weights = {"ffn"};
  EXPECT_FALSE(plan_with(dir, good, both, m).is_ok());
}

TEST(QuantMixImatrix, GgufFormPerExpertCounts) {
  TempDir dir;
  const std::string path = dir.file("imatrix.gguf");
  std::vector<float> sums(2 * 256, 6.0f), counts = {3.0f, 0.0f};
  std::vector<gguf::KeyValue> kv = {{"imatrix.datasets", MetaValue::array(MetaType::STRING, {MetaValue::string("wiki")})},
                                    {"imatrix.chunk_count", MetaValue::u32(5)},
                                    {"imatrix.chunk_size", MetaValue::u32(512)}};
  auto sink = gguf::create(
      path, kv, {{"blk.0.ffn_up_exps.weight.in_sum2", TensorType::F32, {2, 256}}, {"blk.0.ffn_up_exps.weight.counts", TensorType::F32, {2, 1}}});
  ASSERT_TRUE(sink.is_ok());
  ASSERT_TRUE(IsOk((*sink)->write("blk.0.ffn_up_exps.weight.in_sum2", std::as_bytes(std::span(sums)))));
  ASSERT_TRUE(IsOk((*sink)->write("blk.0.ffn_up_exps.weight.counts", std::as_bytes(std::span(counts)))));
  ASSERT_TRUE(IsOk((*sink)->finish()));
  Model m = llama(1, 4, 4);
  m.md.set({"llama.expert_count", MetaValue::u32(2)});
  m.shapes = {{"blk.0.ffn_up_exps.weight", {2, 256, 256}}};
  QuantizeMix mix = mix_of("Q4_0");
  mix.imatrix = path;
  auto plan = gguf_format().plan_mix(mix, m.tensors(), m.md);
  ASSERT_TRUE(plan.is_ok()) << plan.error().to_string();
  const std::vector<float>& w = plan->tensors[0].importance;
  ASSERT_EQ(w.size(), 512u);
  EXPECT_EQ(w[0], 2.0f);    // 6 / 3
  EXPECT_EQ(w[256], 1.0f);  // a count of 0 gives 1
  EXPECT_EQ(plan->metadata.find("quantize.imatrix.dataset")->str, "wiki");
  EXPECT_EQ(plan->metadata.find("quantize.imatrix.chunks_count")->as_u64(), 5u);
}

// A mix through convert(): the chosen types are written, general.file_type states the file type, and
// the summary says why.
TEST(QuantMixConvert, WritesTheMixTypesAndFileType) {
  TempDir dir;
  const std::string in = dir.file("in.gguf"), out = dir.file("out.gguf");
  std::vector<gguf::KeyValue> kv = {
      {"general.architecture", MetaValue::string("llama")}, {"llama.block_count", MetaValue::u32(1)}, {"general.file_type", MetaValue::u32(0)}};
  std::vector<float> w(256 * 64, 0.25f), norm(256, 1.0f);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 97) / 7.0f - 5.0f;
  auto sink = gguf::create(in, kv, {{"blk.0.attn_v.weight", TensorType::F32, {64, 256}}, {"blk.0.attn_norm.weight", TensorType::F32, {256}}});
  ASSERT_TRUE(sink.is_ok());
  ASSERT_TRUE(IsOk((*sink)->write("blk.0.attn_v.weight", std::as_bytes(std::span(w)))));
  ASSERT_TRUE(IsOk((*sink)->write("blk.0.attn_norm.weight", std::as_bytes(std::span(norm)))));
  ASSERT_TRUE(IsOk((*sink)->finish()));
  auto file = gguf::open(in);
  ASSERT_TRUE(file.is_ok());
  ConvertOptions options;
  options.mix = mix_of("Q4_K_S");  // attn_v of the first four: Q5_K
  options.threads = 3;
  auto report = convert(**file, out, options);
  ASSERT_TRUE(report.is_ok()) << report.error().to_string();
  EXPECT_EQ(report->tensors[0].to, TensorType::Q5_K);
  EXPECT_NE(report->tensors[0].note.find("Q4_K_S"), std::string::npos);
  EXPECT_EQ(report->tensors[1].to, TensorType::F32);
  auto written = gguf::open(out);
  ASSERT_TRUE(written.is_ok());
  EXPECT_EQ((*written)->find_kv("general.file_type")->as_u64(), 14u);
  EXPECT_EQ((*written)->find_kv("general.quantization_version")->as_u64(), 2u);
  EXPECT_EQ((*written)->tensors()[0].type, TensorType::Q5_K);
  // The bytes are quantize()'s of the same rows, whatever the threads.
  std::vector<std::byte> want(*tensor_nbytes(TensorType::Q5_K, std::vector<std::uint64_t>{64, 256}));
  ASSERT_TRUE(IsOk(quantize(TensorType::Q5_K, w, want)));
  auto got = (*written)->tensors()[0].read_owned();
  ASSERT_TRUE(got.is_ok());
  EXPECT_TRUE(*got == want);
}

// NVFP4 is a tensor type, not one of llama-quantize's file types: a pattern gives it; its rows must be
// whole 64-blocks (llama.cpp has no fallback for it: NotSupported naming the type), and --type nvfp4's
// general.file_type is llama.h's MOSTLY_NVFP4 (39).
TEST(QuantMix, Nvfp4ThroughAPatternWithoutAFallback) {
  EXPECT_FALSE(gguf::is_llama_file_type("NVFP4"));
  EXPECT_EQ(gguf::llama_file_type(TensorType::NVFP4), 39u);
  QuantizeMix mix = mix_of("Q8_0");
  mix.tensor_types.emplace_back("ffn_up", TensorType::NVFP4);
  const auto types = types_of(llama(1, 4, 4), mix);
  EXPECT_EQ(types.at("blk.0.ffn_up.weight"), TensorType::NVFP4);
  EXPECT_EQ(types.at("blk.0.ffn_gate.weight"), TensorType::Q8_0);
  Model m = llama(1, 4, 4);
  m.shapes.push_back({"blk.0.ffn_up_b.weight", {256, 96}});  // 96 columns: not whole 64-blocks
  const auto tensors = m.tensors();
  auto plan = gguf_format().plan_mix(mix, tensors, m.md);
  ASSERT_TRUE(IsKind(plan, ErrorKind::NotSupported));
  EXPECT_NE(plan.error().message().find("no fallback type for NVFP4"), std::string::npos) << plan.error().to_string();
  // --type nvfp4 alone (no mix): such rows are written F16, as for the 32-element types.
  const std::uint64_t shape[] = {256, 96};
  const StoredType stored = gguf_format().stored_type(TensorType::NVFP4, shape);
  EXPECT_EQ(stored.type, TensorType::F16);
  EXPECT_EQ(stored.note, "rows of 96 are not a multiple of 64");
  const std::uint64_t whole[] = {256, 128};
  EXPECT_EQ(gguf_format().stored_type(TensorType::NVFP4, whole).type, TensorType::NVFP4);
}

// --tensor-type entries and --tensor-type-file as llama-quantize reads them: a ggml type name in any
// case, PATTERN=TYPE, entries separated by any white space; each refusal names the option (and file).
TEST(QuantMix, TensorTypeEntriesAndFiles) {
  EXPECT_EQ(gguf::parse_ggml_type("--output-tensor-type", "NvFp4").value(), TensorType::NVFP4);
  auto unknown = gguf::parse_ggml_type("--output-tensor-type", "q9_9");
  ASSERT_TRUE(IsKind(unknown, ErrorKind::InvalidArgument));
  EXPECT_EQ(unknown.error().message().rfind("--output-tensor-type q9_9: not a ggml type name", 0), 0u) << unknown.error().message();
  EXPECT_EQ(gguf::parse_tensor_type("--tensor-type", "ffn_(up|gate)=Q5_1").value(),
            (std::pair<std::string, TensorType>{"ffn_(up|gate)", TensorType::Q5_1}));
  for (const char* bad : {"attn_q", "=q8_0", "attn_q="}) {
    auto r = gguf::parse_tensor_type("--tensor-type", bad);
    ASSERT_TRUE(IsKind(r, ErrorKind::InvalidArgument)) << bad;
    EXPECT_EQ(r.error().message(), "--tensor-type " + std::string(bad) + ": expected PATTERN=TYPE");
  }
  TempDir dir;
  const std::string listing = dir.file("types.txt");
  write_file_bytes(listing, "attn_q=q8_0\n\n  FFN_UP=nvfp4\tblk\\.1\\.attn_v=Q6_K\r\n\v\f");
  auto entries = gguf::read_tensor_type_file(listing);
  ASSERT_TRUE(IsOk(entries));
  const std::vector<std::pair<std::string, TensorType>> want = {
      {"attn_q", TensorType::Q8_0}, {"FFN_UP", TensorType::NVFP4}, {"blk\\.1\\.attn_v", TensorType::Q6_K}};
  EXPECT_EQ(*entries, want);
  write_file_bytes(listing, "attn_q=q8_0 attn_k\n");
  auto malformed = gguf::read_tensor_type_file(listing);
  ASSERT_TRUE(IsKind(malformed, ErrorKind::InvalidArgument));
  EXPECT_EQ(malformed.error().message(), "--tensor-type-file " + listing + ": attn_k: expected PATTERN=TYPE");
  write_file_bytes(listing, std::string((1 << 20) + 1, ' '));
  auto big = gguf::read_tensor_type_file(listing);
  ASSERT_TRUE(IsKind(big, ErrorKind::ResourceLimit));
  EXPECT_NE(big.error().to_string().find(listing), std::string::npos) << big.error().to_string();
  EXPECT_TRUE(IsKind(gguf::read_tensor_type_file(dir.file("missing.txt")), ErrorKind::FileNotFound));
}

// --prune-layers as llama-quantize reads and applies it: ids as std::stoi reads them, sorted, once; the
// blocks below the first pruned one keep their numbers, the later ones close up, block_count is the
// count kept, and the rules still count 8 layers (Q4_K_M's use_more_bits(i, 8) for ffn_down).
TEST(QuantMix, PruneLayersRenumbersAsLlamaQuantize) {
  EXPECT_EQ(gguf::parse_prune_layers("5, 1,3abc,+1").value(), (std::vector<int>{1, 3, 5}));
  for (const char* bad : {"", "1,", "x", "-1", "1,,2", "99999999999"}) {
    auto r = gguf::parse_prune_layers(bad);
    ASSERT_TRUE(IsKind(r, ErrorKind::InvalidArgument)) << bad;
    EXPECT_NE(r.error().message().find("invalid layer id"), std::string::npos) << r.error().message();
  }
  const Model m = llama(8, 4, 4);
  QuantizeMix mix = mix_of("Q4_K_M");
  mix.prune_layers = {1, 3, 5};
  const auto tensors = m.tensors();
  auto plan = gguf_format().plan_mix(mix, tensors, m.md);
  ASSERT_TRUE(IsOk(plan));
  std::map<std::string, MixChoice> by_input;
  for (std::size_t i = 0; i < tensors.size(); ++i) by_input[std::string(tensors[i].name)] = plan->tensors[i];
  EXPECT_FALSE(by_input.at("token_embd.weight").pruned);
  EXPECT_EQ(by_input.at("token_embd.weight").rename, "");
  EXPECT_EQ(by_input.at("blk.0.attn_q.weight").rename, "");
  for (int pruned : {1, 3, 5}) EXPECT_TRUE(by_input.at("blk." + std::to_string(pruned) + ".ffn_down.weight").pruned) << pruned;
  EXPECT_EQ(by_input.at("blk.2.ffn_down.weight").rename, "blk.1.ffn_down.weight");
  EXPECT_EQ(by_input.at("blk.4.attn_norm.weight").rename, "blk.2.attn_norm.weight");
  EXPECT_EQ(by_input.at("blk.7.ffn_down.weight").rename, "blk.4.ffn_down.weight");
  // ffn_down counted over the blocks kept (0, 2, 4, 6, 7 as the 0th to 4th) against 8 layers: 0 and 3
  // (input block 6) use more bits, the 2nd (input block 4) does not.
  EXPECT_EQ(by_input.at("blk.0.ffn_down.weight").type, TensorType::Q6_K);
  EXPECT_EQ(by_input.at("blk.4.ffn_down.weight").type, TensorType::Q4_K);
  EXPECT_EQ(by_input.at("blk.6.ffn_down.weight").type, TensorType::Q6_K);
  const MetaValue* count = plan->metadata.find("llama.block_count");
  ASSERT_NE(count, nullptr);
  EXPECT_EQ(count->as_u64(), 5u);
}

}  // namespace
