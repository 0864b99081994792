// Meta's and Mistral's original layouts (src/original/): params.json's rules, the shard sequence, and a
// Mistral-native folder (consolidated.safetensors of F32 values that say where they came from) written
// as a transformers folder: names, q/k in transformers' rotary order, config.json; and every refusal.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "original/layout.h"
#include "original/model.h"
#include "original/params.h"
#include "safeweights/convert.h"
#include "safeweights/safetensors.h"
#include "protobuf_util.h"
#include "test_util.h"

namespace {

using namespace safeweights;

using swt::TempDir;

// Dimensions of the tiny model: 2 heads of 4, 1 key/value head, MLP 16, 5 tokens.
constexpr std::uint64_t kDim = 8, kHeads = 2, kKvHeads = 1, kHeadDim = 4, kHidden = 16, kVocab = 5;

using swt::ld;
// A piece of ModelProto.pieces (field 1) of `type`.
std::string piece(const std::string& text, int type) { return ld(1, swt::piece(text, 0, type)); }
// A SentencePiece model of kVocab pieces: <unk> <s> </s> a b.
std::string sentencepiece() { return piece("<unk>", 2) + piece("<s>", 3) + piece("</s>", 3) + piece("a", 1) + piece("b", 1); }

struct Tensor {
  std::string name;
  std::vector<std::uint64_t> shape;
};
// Meta's names and shapes for one layer.
std::vector<Tensor> meta_tensors(bool output = true) {
  std::vector<Tensor> t = {{"tok_embeddings.weight", {kVocab, kDim}},
                           {"layers.0.attention.wq.weight", {kHeads * kHeadDim, kDim}},
                           {"layers.0.attention.wk.weight", {kKvHeads * kHeadDim, kDim}},
                           {"layers.0.attention.wv.weight", {kKvHeads * kHeadDim, kDim}},
                           {"layers.0.attention.wo.weight", {kDim, kHeads * kHeadDim}},
                           {"layers.0.feed_forward.w1.weight", {kHidden, kDim}},
                           {"layers.0.feed_forward.w3.weight", {kHidden, kDim}},
                           {"layers.0.feed_forward.w2.weight", {kDim, kHidden}},
                           {"layers.0.attention_norm.weight", {kDim}},
                           {"layers.0.ffn_norm.weight", {kDim}},
                           {"norm.weight", {kDim}}};
  if (output) t.push_back({"output.weight", {kVocab, kDim}});
  return t;
}

// Element i of tensor k holds k * 1000 + i: every value says where it came from.
float value(std::size_t k, std::uint64_t i) { return static_cast<float>(k * 1000 + i); }

std::string safetensors_of(const std::vector<Tensor>& tensors) {
  std::string json = "{", data;
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    std::string shape;
    std::uint64_t n = 1;
    for (auto d : tensors[k].shape) {
      shape += (shape.empty() ? "" : ",") + std::to_string(d);
      n *= d;
    }
    const std::uint64_t begin = data.size();
    for (std::uint64_t i = 0; i < n; ++i) {
      const float v = value(k, i);
      data.append(reinterpret_cast<const char*>(&v), 4);
    }
    json += (k ? "," : "") + std::string("\"") + tensors[k].name + "\":" + swt::entry("F32", shape, begin, data.size());
  }
  json += "}";
  return swt::st_file(json) + data;
}

constexpr std::string_view kMistralParams =
    R"({"dim": 8, "n_layers": 1, "head_dim": 4, "hidden_dim": 16, "n_heads": 2, "n_kv_heads": 1, "norm_eps": 1e-05, "vocab_size": 5, "rope_theta": 1000000.0})";

std::string mistral_folder(const TempDir& dir, std::string_view params = kMistralParams, const std::vector<Tensor>& tensors = meta_tensors()) {
  const std::string folder = dir.file("mistral");
  std::filesystem::create_directories(folder);
  swt::write_file_bytes(folder + "/consolidated.safetensors", safetensors_of(tensors));
  swt::write_file_bytes(folder + "/params.json", params);
  swt::write_file_bytes(folder + "/tokenizer.model.v3", sentencepiece());
  swt::write_file_bytes(folder + "/model.safetensors", "the transformers shards beside: never read");
  return folder;
}

::testing::AssertionResult RefusedWith(const Result<ConvertReport>& r, ErrorKind kind, std::string_view text) {
  if (r.is_ok()) return ::testing::AssertionFailure() << "converted";
  if (r.error().kind() != kind || r.error().to_string().find(text) == std::string::npos)
    return ::testing::AssertionFailure() << r.error().to_string();
  return ::testing::AssertionSuccess();
}

TEST(Params, MetaIntermediateSizeAsTransformersComputesIt) {
  auto size = [](std::uint32_t dim, double multiplier, std::uint32_t multiple_of) {
    original::Params p;
    p.dim = dim;
    p.ffn_dim_multiplier = multiplier;
    p.multiple_of = multiple_of;
    return original::meta_intermediate_size(p);
  };
  EXPECT_EQ(size(4096, 1.3, 1024), 14336u);   // Llama 3 8B
  EXPECT_EQ(size(8192, 1.3, 4096), 28672u);   // Llama 2/3 70B
  EXPECT_EQ(size(16384, 1.2, 4096), 53248u);  // Llama 3.1 405B
  EXPECT_EQ(size(2048, 1.5, 256), 8192u);     // Llama 3.2 1B
  original::Params llama2;
  llama2.dim = 4096;
  EXPECT_EQ(original::meta_intermediate_size(llama2), 11008u);  // Llama 2 7B: no multiplier, multiple_of 256
}

TEST(Params, EveryKeyUnderstoodOrRefusedByName) {
  TempDir dir;
  const std::string folder = mistral_folder(dir);
  auto write = [&](std::string_view text) { swt::write_file_bytes(folder + "/params.json", text); };
  auto read = [&]() { return original::read_params(*Folder::open(folder, uncached_resolver())); };
  write(R"({"dim": 8, "n_layers": 1, "n_heads": 2, "vocab_size": -1, "max_batch_size": 32, "sliding_window": "4096"})");
  auto p = read();
  ASSERT_TRUE(p.is_ok()) << p.error().to_string();
  EXPECT_FALSE(p->vocab_size);
  EXPECT_EQ(p->sliding_window, 4096u);
  const std::pair<std::string_view, std::string_view> refused[] = {
      {R"({"dim": 8, "n_layers": 1, "n_heads": 2, "moe": {}})", "NotSupported: key `moe` is not converted yet (it changes the model)"},
      {R"({"dim": 8, "n_layers": 1, "n_heads": 2, "yarn": {}})", "key `yarn` is not converted yet"},
      {R"({"dim": 8, "n_layers": 1, "n_heads": 2, "rope_flavour": 1})",
       "key `rope_flavour` is not understood (it may change the model, so it is not ignored)"},
      {R"({"dim": 8, "n_layers": 1, "n_heads": 2, "activation": "gelu"})", "key `activation` is `gelu`: only silu is converted"},
      {R"({"dim": 8, "n_layers": 1, "n_heads": 2, "sliding_window": [4096, null]})", "key `sliding_window` as a list"},
      {R"({"dim": 8, "n_layers": 1, "n_heads": 3})", "InvalidModelFolder: key `n_heads` must divide `dim`"},
      {R"({"dim": 8, "n_layers": 1, "n_heads": 2, "n_kv_heads": 3})", "key `n_kv_heads` must divide `n_heads`"},
      {R"({"dim": 8, "n_layers": 1})", "key `n_heads` is missing"},
      {R"({"dim": 8, "n_layers": 1, "n_heads": 2, "vocab_size": 0})", "key `vocab_size` must be positive, or -1"},
      {R"({"dim": 8, "dim": 9, "n_layers": 1, "n_heads": 2})", "DuplicateKey"},
  };
  for (const auto& [text, message] : refused) {
    write(text);
    auto r = read();
    ASSERT_FALSE(r.is_ok()) << text;
    EXPECT_NE(r.error().to_string().find(message), std::string::npos) << r.error().to_string();
    EXPECT_NE(r.error().to_string().find("params.json"), std::string::npos) << r.error().to_string();
  }
}

TEST(Layout, RecognisedByContentAndShardsNumberedWithoutAGap) {
  TempDir dir;
  const std::string meta = dir.file("meta");
  std::filesystem::create_directories(meta);
  swt::write_file_bytes(meta + "/params.json", "{}");
  swt::write_file_bytes(meta + "/consolidated.00.pth", "");
  swt::write_file_bytes(meta + "/consolidated.01.pth", "");
  swt::write_file_bytes(meta + "/consolidated.03.pth", "");
  auto folder = Folder::open(meta, uncached_resolver());
  EXPECT_TRUE(original::is_original_layout(*folder));
  auto shards = original::native_weights(*folder);
  ASSERT_FALSE(shards.is_ok());
  EXPECT_EQ(
      shards.error().to_string(),
      meta +
          "/consolidated.02.pth: InvalidModelFolder: model-parallel shard consolidated.02.pth is missing (3 shards, numbered from 00 without a gap)");
  swt::write_file_bytes(meta + "/consolidated.02.pth", "");
  shards = original::native_weights(*Folder::open(meta, uncached_resolver()));
  ASSERT_TRUE(shards.is_ok());
  EXPECT_EQ(shards->files, (std::vector<std::string>{"consolidated.00.pth", "consolidated.01.pth", "consolidated.02.pth", "consolidated.03.pth"}));
  // A config.json makes it a transformers folder, whose reader ignores the native files.
  swt::write_file_bytes(meta + "/config.json", "{}");
  EXPECT_FALSE(original::is_original_layout(*Folder::open(meta, uncached_resolver())));
}

// transformers' row of Meta's row r of a q/k weight of `heads` heads of kHeadDim: within a head, pair i's
// element s goes to s * D/2 + i.
std::uint64_t hf_row(std::uint64_t r) {
  const std::uint64_t head = r / kHeadDim, within = r % kHeadDim;
  return head * kHeadDim + (within % 2) * (kHeadDim / 2) + within / 2;
}

TEST(MistralNative, ToATransformersFolder) {
  TempDir dir;
  const std::string folder = mistral_folder(dir);
  const std::string out = dir.file("hf");
  auto r = convert_path(folder, out + "/", {});
  ASSERT_TRUE(r.is_ok()) << r.error().to_string();
  EXPECT_EQ(r->notes,
            (std::vector<std::string>{
                "params.json gives no max_seq_len: context 32768 (transformers' converter's default); --max-position-embeddings says otherwise"}));
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(out)) names.push_back(e.path().filename().string());
  std::ranges::sort(names);
  EXPECT_EQ(names, (std::vector<std::string>{"config.json", "generation_config.json", "model.safetensors", "special_tokens_map.json",
                                             "tokenizer.model", "tokenizer_config.json"}));
  EXPECT_EQ(swt::read_file_bytes(out + "/tokenizer.model"), sentencepiece());
  const std::string config = swt::read_file_bytes(out + "/config.json");
  for (std::string_view key : {R"("architectures":["MistralForCausalLM"])", R"("head_dim":4)", R"("intermediate_size":16)",
                               R"("max_position_embeddings":32768)", R"("num_key_value_heads":1)", R"("rope_theta":1e+06)",
                               R"("sliding_window":null)", R"("tie_word_embeddings":false)", R"("torch_dtype":"float32")", R"("vocab_size":5)"})
    EXPECT_NE(config.find(key), std::string::npos) << key << " in " << config;
  auto weights = safetensors::Reader::open(out + "/model.safetensors");
  ASSERT_TRUE(weights.is_ok()) << weights.error().to_string();
  const std::vector<Tensor> meta = meta_tensors();
  std::map<std::string, std::string> hf = {{"tok_embeddings.weight", "model.embed_tokens.weight"},
                                           {"layers.0.attention.wq.weight", "model.layers.0.self_attn.q_proj.weight"},
                                           {"layers.0.attention.wk.weight", "model.layers.0.self_attn.k_proj.weight"},
                                           {"layers.0.attention.wv.weight", "model.layers.0.self_attn.v_proj.weight"},
                                           {"layers.0.attention.wo.weight", "model.layers.0.self_attn.o_proj.weight"},
                                           {"layers.0.feed_forward.w1.weight", "model.layers.0.mlp.gate_proj.weight"},
                                           {"layers.0.feed_forward.w3.weight", "model.layers.0.mlp.up_proj.weight"},
                                           {"layers.0.feed_forward.w2.weight", "model.layers.0.mlp.down_proj.weight"},
                                           {"layers.0.attention_norm.weight", "model.layers.0.input_layernorm.weight"},
                                           {"layers.0.ffn_norm.weight", "model.layers.0.post_attention_layernorm.weight"},
                                           {"norm.weight", "model.norm.weight"},
                                           {"output.weight", "lm_head.weight"}};
  ASSERT_EQ(weights->tensors().size(), meta.size());
  for (std::size_t k = 0; k < meta.size(); ++k) {
    auto t = weights->tensor(hf[meta[k].name]);
    ASSERT_TRUE(t.is_ok()) << meta[k].name;
    ASSERT_TRUE(std::ranges::equal((*t)->shape, meta[k].shape)) << meta[k].name;
    auto bytes = (*t)->read_owned();
    ASSERT_TRUE(bytes.is_ok());
    const bool rotary = meta[k].name.ends_with("wq.weight") || meta[k].name.ends_with("wk.weight");
    const std::uint64_t cols = meta[k].shape.size() > 1 ? meta[k].shape[1] : 1;
    for (std::uint64_t i = 0; i < (*t)->num_elements(); ++i) {
      const std::uint64_t row = i / cols, col = i % cols;
      const std::uint64_t out_row = rotary ? hf_row(row) : row;
      float got = 0;
      std::memcpy(&got, bytes->data() + (out_row * cols + col) * 4, 4);
      ASSERT_EQ(got, value(k, i)) << meta[k].name << " element " << i;
    }
  }
}

TEST(MistralNative, RefusedNamingTheFileAndTheRule) {
  {
    TempDir dir;
    auto tensors = meta_tensors();
    tensors.erase(tensors.begin() + 5);  // w1
    const std::string folder = mistral_folder(dir, kMistralParams, tensors);
    EXPECT_TRUE(RefusedWith(convert_path(folder, dir.file("out/"), {}), ErrorKind::TensorNotFound,
                            "tensor layers.0.feed_forward.w1.weight is missing (transformers needs model.layers.0.mlp.gate_proj.weight)"));
    EXPECT_FALSE(std::filesystem::exists(dir.file("out")));
  }
  {
    TempDir dir;
    std::string params(kMistralParams);
    params.replace(params.find("\"hidden_dim\": 16"), 16, "\"hidden_dim\": 32");
    const std::string folder = mistral_folder(dir, params);
    EXPECT_TRUE(RefusedWith(convert_path(folder, dir.file("out.gguf"), {}), ErrorKind::InvalidModelFolder,
                            "params.json: InvalidModelFolder: assembled from 1 shard(s) it is [16, 8]; params.json implies [32, 8] (tensor "
                            "`layers.0.feed_forward.w1.weight`)"));
    EXPECT_FALSE(std::filesystem::exists(dir.file("out.gguf")));
  }
  {
    TempDir dir;
    auto tensors = meta_tensors();
    tensors.push_back({"layers.0.attention.wq.bias", {8}});
    const std::string folder = mistral_folder(dir, kMistralParams, tensors);
    EXPECT_TRUE(RefusedWith(convert_path(folder, dir.file("out/"), {}), ErrorKind::NotSupported,
                            "NotSupported: tensor has no transformers name in Llama's layout (tensor `layers.0.attention.wq.bias`)"));
  }
  {
    // hf::plan's refusal of a file of the transformers view says which of the folder's files it is made from.
    TempDir dir;
    const std::string folder = mistral_folder(dir);
    auto r = convert_path(folder, dir.file("out.gguf"), {});
    EXPECT_TRUE(RefusedWith(r, ErrorKind::InvalidModelFolder, "has no byte piece `<0x00>`"));
    EXPECT_TRUE(RefusedWith(r, ErrorKind::InvalidModelFolder, "(in the transformers files made from tokenizer.model.v3)"));
    EXPECT_FALSE(std::filesystem::exists(dir.file("out.gguf")));
  }
  {
    TempDir dir;
    const std::string folder = mistral_folder(dir);
    std::filesystem::remove(folder + "/tokenizer.model.v3");
    EXPECT_TRUE(RefusedWith(convert_path(folder, dir.file("out/"), {}), ErrorKind::FileNotFound, "no tekken.json nor tokenizer.model.v3"));
  }
  {
    TempDir dir;
    const std::string folder =
        mistral_folder(dir, R"({"dim": 8, "n_layers": 1, "head_dim": 4, "hidden_dim": 16, "n_heads": 2, "n_kv_heads": 1, "vocab_size": 4})");
    EXPECT_TRUE(RefusedWith(convert_path(folder, dir.file("out/"), {}), ErrorKind::InvalidModelFolder, "params.json implies [4, 8]"));
  }
}

}  // namespace
