// Hugging Face Llama folders -> llama.cpp plan (include/safeweights/hf_gguf.h): what a valid folder
// plans to, and every hostile-input rule (config.json, tokenizer files, the SentencePiece protobuf
// reader, the tensors) with the error kind and the file or key it names. The end-to-end proof against
// gguf-py and llama.cpp is tests/python/test_hf_llama.py.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "gguf/count_allocations.h"
#include "gguf/size_label.h"
#include "protobuf_util.h"
#include "test_util.h"
#include "hf/arch.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"
#include "hf/planner.h"
#include "hf/pretokenizer.h"
#include "hf/vocab.h"
#include "safeweights/convert.h"
#include "safeweights/hf_gguf.h"
#include "safeweights/text.h"

using namespace safeweights;
using namespace swt;
namespace fs = std::filesystem;

namespace {

// The plan part of hf::plan's answer (the tensors it reads are checked where generated ones matter).
Result<ConvertPlan> plan_of(Result<hf::GgufConversion> r) {
  if (!r.is_ok()) return std::move(r).status();
  return std::move(r->plan);
}

// A tiny valid folder: hidden 8, 2 heads, 1 key/value head (head size 4), 1 layer, vocab 6, tied
// embeddings, a byte-level BPE tokenizer.json; every tensor zeros.
struct Folder {
  TempDir dir;
  std::map<std::string, std::string> config = {
      {"architectures", R"(["LlamaForCausalLM"])"},
      {"vocab_size", "6"},
      {"hidden_size", "8"},
      {"intermediate_size", "8"},
      {"num_hidden_layers", "1"},
      {"num_attention_heads", "2"},
      {"num_key_value_heads", "1"},
      {"max_position_embeddings", "32"},
      {"rms_norm_eps", "1e-5"},
  };
  std::map<std::string, std::vector<std::uint64_t>> tensors = {
      {"model.embed_tokens.weight", {6, 8}},
      {"model.norm.weight", {8}},
      {"model.layers.0.input_layernorm.weight", {8}},
      {"model.layers.0.self_attn.q_proj.weight", {8, 8}},
      {"model.layers.0.self_attn.k_proj.weight", {4, 8}},
      {"model.layers.0.self_attn.v_proj.weight", {4, 8}},
      {"model.layers.0.self_attn.o_proj.weight", {8, 8}},
      {"model.layers.0.post_attention_layernorm.weight", {8}},
      {"model.layers.0.mlp.gate_proj.weight", {8, 8}},
      {"model.layers.0.mlp.up_proj.weight", {8, 8}},
      {"model.layers.0.mlp.down_proj.weight", {8, 8}},
      {"model.layers.0.self_attn.rotary_emb.inv_freq", {2}},
  };
  std::string pre_tokenizer = R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":true})";
  std::string vocab = R"({"a":0,"b":1,"c":2,"ab":3})";
  std::string model_extra;
  std::string normalizer = "null";
  std::string added_tokens = R"([{"id":4,"content":"<|bos|>","special":true}])";
  std::string post_processor = "null";
  std::string tokenizer_config = R"({"bos_token":"<|bos|>","add_bos_token":true})";

  std::string path() const { return dir.path(); }

  // config.json's vocab_size and the embedding's rows (a SentencePiece vocabulary needs 256 byte pieces).
  void set_vocab_size(std::uint64_t n) {
    config["vocab_size"] = std::to_string(n);
    tensors["model.embed_tokens.weight"] = {n, 8};
  }

  void write() {
    std::string cfg = "{";
    for (const auto& [k, v] : config) {
      if (cfg.size() > 1) cfg += ',';
      cfg += "\"" + k + "\":" + v;
    }
    write_file_bytes(dir.file("config.json"), cfg + "}");
    std::string header = "{";
    std::uint64_t offset = 0;
    for (const auto& [name, shape] : tensors) {
      std::uint64_t n = 4;
      std::string dims;
      for (auto d : shape) {
        n *= d;
        if (!dims.empty()) dims += ',';
        dims += std::to_string(d);
      }
      if (header.size() > 1) header += ',';
      header += "\"" + name + "\":" + entry("F32", dims, offset, offset + n);
      offset += n;
    }
    write_file_bytes(dir.file("model.safetensors"), st_file(header + "}", offset));
    write_file_bytes(dir.file("tokenizer.json"), R"({"added_tokens":)" + added_tokens + R"(,"normalizer":)" + normalizer + R"(,"post_processor":)" +
                                                     post_processor + R"(,"pre_tokenizer":)" + pre_tokenizer + R"(,"model":{"type":"BPE","vocab":)" +
                                                     vocab + R"(,"merges":["a b"])" + model_extra + "}}");
    write_file_bytes(dir.file("tokenizer_config.json"), tokenizer_config);
  }

  // The plan of what is on disk now.
  Result<ConvertPlan> plan_written() {
    auto weights = open_tensors(path());
    if (!weights.is_ok()) return std::move(weights).status();
    return plan_of(hf::plan(path(), **weights, TensorType::F32));
  }

  Result<ConvertPlan> plan(const hf::GgufOptions& options = {}) {
    write();
    auto weights = open_tensors(path());
    if (!weights.is_ok()) return std::move(weights).status();
    return plan_of(hf::plan(path(), **weights, TensorType::F32, options));
  }
};

// ---- the SentencePiece protobuf reader ----------------------------------------------------------

using swt::ld;
using swt::piece;
using swt::varint;

// The 256 byte pieces "<0x00>".."<0xFF>" (upper-case digits, or lower-case), as tokenizer.json vocab entries
// from id `first` on: `"<0x00>":first,...`.
std::string byte_vocab(std::uint32_t first, bool lower = false) {
  std::string out;
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof piece, lower ? "<0x%02x>" : "<0x%02X>", b);
    out += ",\"" + std::string(piece) + "\":" + std::to_string(first + static_cast<std::uint32_t>(b));
  }
  return out;
}
// The same as tokenizer.model pieces (type BYTE).
std::string byte_pieces(bool lower = false) {
  std::string out;
  for (int b = 0; b < 256; ++b) {
    char text[8];
    std::snprintf(text, sizeof text, lower ? "<0x%02x>" : "<0x%02X>", b);
    out += ld(1, piece(text, 0, 6));
  }
  return out;
}

const MetaValue* find(const ConvertPlan& p, std::string_view key) { return p.metadata.find(key); }

::testing::AssertionResult FailsNaming(const Result<ConvertPlan>& r, ErrorKind kind, std::string_view file, std::string_view text) {
  if (auto k = IsKind(r, kind); !k) return k;
  const std::string all = r.error().to_string();
  if (!r.error().context().file.ends_with(file)) return ::testing::AssertionFailure() << "file not named: " << all;
  if (all.find(text) == std::string::npos) return ::testing::AssertionFailure() << "`" << text << "` not in: " << all;
  return ::testing::AssertionSuccess();
}

TEST(HfLlama, ValidFolderPlansLlamaCppNamesAndPermutations) {
  Folder f;
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  std::vector<std::string> names;
  for (const auto& t : p->tensors) names.push_back(t.name);
  const std::vector<std::string> want = {"token_embd.weight",   "blk.0.attn_norm.weight",   "blk.0.attn_q.weight",   "blk.0.attn_k.weight",
                                         "blk.0.attn_v.weight", "blk.0.attn_output.weight", "blk.0.ffn_norm.weight", "blk.0.ffn_gate.weight",
                                         "blk.0.ffn_up.weight", "blk.0.ffn_down.weight",    "output_norm.weight"};  // tied: no output.weight
  EXPECT_EQ(names, want);
  EXPECT_EQ(p->tensors[2].permute_heads, 2u);  // q: the query heads
  EXPECT_EQ(p->tensors[3].permute_heads, 1u);  // k: the key/value heads
  EXPECT_EQ(p->tensors[4].permute_heads, 0u);
  ASSERT_NE(find(*p, "llama.attention.head_count_kv"), nullptr);
  EXPECT_EQ(*find(*p, "llama.attention.head_count_kv"), MetaValue::u32(1));
  EXPECT_EQ(*find(*p, "llama.rope.dimension_count"), MetaValue::u32(4));
  EXPECT_EQ(*find(*p, "llama.attention.layer_norm_rms_epsilon"), MetaValue::f32(1e-5f));
  EXPECT_EQ(*find(*p, "general.file_type"), MetaValue::u32(0));
  EXPECT_EQ(*find(*p, "tokenizer.ggml.model"), MetaValue::string("gpt2"));
  EXPECT_EQ(*find(*p, "tokenizer.ggml.pre"), MetaValue::string("gpt-2"));
  EXPECT_EQ(*find(*p, "tokenizer.ggml.bos_token_id"), MetaValue::u32(4));
  EXPECT_EQ(*find(*p, "tokenizer.ggml.add_bos_token"), MetaValue::boolean(true));
  const MetaValue* tokens = find(*p, "tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->items.size(), 6u);
  EXPECT_EQ(tokens->items[5].str, "[PAD5]");
  const MetaValue* types = find(*p, "tokenizer.ggml.token_type");
  EXPECT_EQ(types->items[0], MetaValue::i32(1));
  EXPECT_EQ(types->items[4], MetaValue::i32(3));  // special added token: CONTROL
  EXPECT_EQ(types->items[5], MetaValue::i32(5));  // padding: UNUSED
  EXPECT_TRUE(hf::is_model_folder(f.path()));
}

TEST(HfLlama, ModelFoldersGoToThePlanBrokenOnesToo) {
  Folder f;
  f.config["architectures"] = R"(["GPT2LMHeadModel"])";  // a model, not converted: plan() refuses it by name
  f.write();
  EXPECT_TRUE(hf::is_model_folder(f.path()));
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "config.json",
                          "architecture `GPT2LMHeadModel` is not converted (converted: " + hf::supported_classes() + ")"));
  // supported_classes() lists every architecture file's classes, each found by its name.
  std::vector<std::string> classes;
  const std::string all = hf::supported_classes();
  for (std::string_view rest = all; !rest.empty();) {
    const auto comma = rest.find(", ");
    classes.emplace_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 2);
  }
  EXPECT_GE(classes.size(), 13u);
  for (const auto& c : classes) EXPECT_NE(hf::find_architecture(c), nullptr) << c;
  for (const char* c : {"LlamaForCausalLM", "MistralForCausalLM", "Qwen3MoeForCausalLM", "GptOssForCausalLM", "DeepseekV3ForCausalLM"})
    EXPECT_NE(std::find(classes.begin(), classes.end(), c), classes.end()) << c;
  EXPECT_FALSE(hf::is_model_folder(f.path() + "/nowhere"));
  // A config.json that cannot be read is a model folder: plan() says why instead of a plain dump.
  // Each is the folder's content at fault (InvalidModelFolder, or DuplicateKey for a repeated key: the CLI
  // exits 1), never the caller's argument (InvalidArgument, exit 2).
  const std::vector<std::pair<std::string, ErrorKind>> broken_configs = {
      {"{not json", ErrorKind::InvalidModelFolder},
      {R"({"a":1,"a":2})", ErrorKind::DuplicateKey},
      {"{\"a\":\"\xff\"}", ErrorKind::InvalidModelFolder},
      {R"({"a": Infinity})", ErrorKind::InvalidModelFolder},
      {std::string(300, '[') + std::string(300, ']'), ErrorKind::InvalidModelFolder},
  };
  for (const auto& [broken, kind] : broken_configs) {
    write_file_bytes(f.dir.file("config.json"), broken);
    EXPECT_TRUE(hf::is_model_folder(f.path())) << broken;
    EXPECT_TRUE(IsKind(f.plan_written(), kind)) << broken;
  }
  // A diffusers component's config.json describes no transformers model.
  write_file_bytes(f.dir.file("config.json"), R"({"_class_name":"UNet2DConditionModel"})");
  EXPECT_FALSE(hf::is_model_folder(f.path()));
}

// convert_path() routes a model folder by the plan providers (model/folder_planner.h), not by a format's
// name: hf's writes GGUF, knows the folders is_model_folder() knows, and answers hf::plan's plan.
TEST(HfPlanner, TheGgufPlanProviderIsAskedForModelFoldersWrittenAsGguf) {
  Folder f;
  f.write();
  auto listed = safeweights::Folder::open(f.path(), uncached_resolver());
  ASSERT_TRUE(IsOk(listed));
  const Format* gguf_out = find_format("gguf");
  ASSERT_NE(gguf_out, nullptr);
  EXPECT_EQ(planner_for(*listed, *gguf_out), &hf::gguf_planner());
  EXPECT_EQ(&hf::gguf_planner().output(), gguf_out);
  EXPECT_EQ(planner_for(*listed, *find_format("safetensors")), nullptr);  // written as plain tensors
  auto weights = open_tensors(f.path());
  ASSERT_TRUE(IsOk(weights));
  auto planned = hf::gguf_planner().plan(*listed, **weights, TensorType::Q8_0);
  ASSERT_TRUE(IsOk(planned));
  auto direct = plan_of(hf::plan(*listed, **weights, TensorType::Q8_0));
  ASSERT_TRUE(IsOk(direct));
  EXPECT_EQ(planned->plan.metadata, direct->metadata);
  ASSERT_EQ(planned->plan.tensors.size(), direct->tensors.size());
  fs::remove(f.dir.file("config.json"));
  listed = safeweights::Folder::open(f.path(), uncached_resolver());
  ASSERT_TRUE(IsOk(listed));
  EXPECT_EQ(planner_for(*listed, *gguf_out), nullptr);  // no config.json: a folder of tensors
}

// Mistral's repositories ship config.json with the Hugging Face shards and params.json with the native
// consolidated.safetensors: config.json's route is taken and the native files are never read (here
// they are not even safetensors), for GGUF and for plain tensors alike (issue 34).
TEST(HfPlanner, ConfigJsonWinsOverTheNativeFilesBesideIt) {
  Folder f;
  f.write();
  TempDir out;
  ASSERT_TRUE(IsOk(convert_path(f.path(), out.file("alone.gguf"), {})));
  ASSERT_TRUE(IsOk(convert_path(f.path(), out.file("alone.safetensors"), {})));
  write_file_bytes(f.dir.file("params.json"), R"({"dim":8,"n_layers":1,"n_heads":2})");
  write_file_bytes(f.dir.file("consolidated.safetensors"), "not read");
  ASSERT_TRUE(IsOk(convert_path(f.path(), out.file("beside.gguf"), {})));
  ASSERT_TRUE(IsOk(convert_path(f.path(), out.file("beside.safetensors"), {})));
  EXPECT_EQ(read_file_bytes(out.file("beside.gguf")), read_file_bytes(out.file("alone.gguf")));
  EXPECT_EQ(read_file_bytes(out.file("beside.safetensors")), read_file_bytes(out.file("alone.safetensors")));
}

// A config.json key set to a value (removed when the value is empty), and the refusal plan() must give.
struct ConfigCase {
  std::string key, value;
  ErrorKind kind;
  std::string text;
};

// Each case on a fresh folder that `prepare` makes: plan() fails with its kind, naming config.json and its text.
void expect_config_refusals(const std::vector<ConfigCase>& cases, void (*prepare)(Folder&)) {
  for (const ConfigCase& c : cases) {
    Folder f;
    prepare(f);
    if (c.value.empty()) {
      f.config.erase(c.key);
    } else {
      f.config[c.key] = c.value;
    }
    EXPECT_TRUE(FailsNaming(f.plan(), c.kind, "config.json", c.text)) << c.key << "=" << c.value;
  }
}

TEST(HfLlama, ConfigErrorsNameTheFileAndKey) {
  const std::vector<ConfigCase> cases = {
      {"hidden_size", "", ErrorKind::InvalidModelFolder, "`hidden_size` is missing"},
      {"hidden_size", "\"8\"", ErrorKind::InvalidModelFolder, "`hidden_size` must be an integer"},
      {"hidden_size", "8.5", ErrorKind::InvalidModelFolder, "`hidden_size` must be an integer"},
      {"vocab_size", "1099511627776", ErrorKind::InvalidModelFolder, "`vocab_size` is 1099511627776, outside"},
      {"vocab_size", "18446744073709551615", ErrorKind::InvalidModelFolder, "`vocab_size` is out of range"},
      {"num_hidden_layers", "513", ErrorKind::InvalidModelFolder, "`num_hidden_layers`"},
      {"num_attention_heads", "0", ErrorKind::InvalidModelFolder, "`num_attention_heads` is 0"},
      {"num_key_value_heads", "3", ErrorKind::InvalidModelFolder, "`num_key_value_heads` must divide"},
      {"rms_norm_eps", "-1", ErrorKind::InvalidModelFolder, "`rms_norm_eps` must be a finite positive number"},
      {"max_position_embeddings", "", ErrorKind::InvalidModelFolder, "`max_position_embeddings` is missing"},
      {"architectures", "[\"LlamaModel\"]", ErrorKind::NotSupported, "architecture `LlamaModel` is not converted"},
      {"architectures", "[\"LlamaForCausalLM\", \"MistralForCausalLM\"]", ErrorKind::InvalidModelFolder, "`architectures` must be a list of one"},
      {"architectures", "", ErrorKind::InvalidModelFolder, "`architectures` is missing"},
      {"num_local_experts", "8", ErrorKind::NotSupported, "`num_local_experts`: LlamaForCausalLM is converted without experts"},
      {"rope_scaling", R"({"rope_type":"yarn","factor":4})", ErrorKind::InvalidModelFolder, "`rope_scaling.original_max_position_embeddings`"},
      {"rope_scaling", R"({"type":"linear"})", ErrorKind::InvalidModelFolder, "`rope_scaling.factor` is missing"},
  };
  expect_config_refusals(cases, [](Folder&) {});
}

TEST(HfLlama, LinearRopeScalingIsWritten) {
  Folder f;
  f.config["rope_scaling"] = R"({"type":"linear","factor":2.0})";
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "llama.rope.scaling.type"), MetaValue::string("linear"));
  EXPECT_EQ(*find(*p, "llama.rope.scaling.factor"), MetaValue::f32(2.0f));
}

TEST(HfRope, BothConfigLayoutsGiveTheSameKeys) {
  // transformers 4: rope_theta and rope_scaling at the top; transformers 5: rope_parameters.
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"rope_scaling", R"({"type":"linear","factor":2.0})"},
           {"rope_parameters", R"({"rope_type":"linear","factor":2.0,"rope_theta":500000.0})"},
       }) {
    Folder f;
    f.config[key] = value;
    if (key == "rope_scaling") f.config["rope_theta"] = "500000.0";
    auto p = f.plan();
    ASSERT_TRUE(IsOk(p)) << key;
    EXPECT_EQ(*find(*p, "llama.rope.freq_base"), MetaValue::f32(500000.0f));
    EXPECT_EQ(*find(*p, "llama.rope.scaling.type"), MetaValue::string("linear"));
    EXPECT_EQ(*find(*p, "llama.rope.scaling.factor"), MetaValue::f32(2.0f));
  }
  {
    Folder f;  // YaRN: llama.cpp's keys (its loader reads them for every architecture)
    f.config["rope_parameters"] =
        R"({"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":16,"beta_fast":32,"beta_slow":1,"rope_theta":10000.0})";
    auto p = f.plan();
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(*find(*p, "llama.rope.scaling.type"), MetaValue::string("yarn"));
    EXPECT_EQ(*find(*p, "llama.rope.scaling.factor"), MetaValue::f32(4.0f));
    EXPECT_EQ(*find(*p, "llama.rope.scaling.original_context_length"), MetaValue::u32(16));
  }
  Folder f;
  f.config["rope_parameters"] = R"({"rope_type":"default","rope_theta":1000.0})";
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "llama.rope.freq_base"), MetaValue::f32(1000.0f));
  EXPECT_EQ(find(*p, "llama.rope.scaling.type"), nullptr);
}

TEST(HfRope, Llama3WritesRopeFreqsFirst) {
  Folder f;
  f.config["rope_parameters"] =
      R"({"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":16,"rope_theta":500000.0})";
  f.write();
  auto weights = open_tensors(f.path());
  ASSERT_TRUE(IsOk(weights));
  auto c = hf::plan(f.path(), **weights, TensorType::F32);
  ASSERT_TRUE(IsOk(c));
  ASSERT_FALSE(c->plan.tensors.empty());
  EXPECT_EQ(c->plan.tensors.front().name, "rope_freqs.weight");
  const TensorEntry* e = c->tensors->find("rope_freqs.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->type, TensorType::F32);
  ASSERT_EQ(e->shape.size(), 1u);
  EXPECT_EQ(e->shape[0], 2u);  // head size 4: two rotary pairs
  EXPECT_EQ(find(c->plan, "llama.rope.scaling.type"), nullptr);
  // The weights themselves are still read through the conversion's tensors.
  EXPECT_NE(c->tensors->find("model.embed_tokens.weight"), nullptr);
  EXPECT_EQ(c->tensors->tensors().size(), (*weights)->tensors().size() + 1);
}

TEST(HfRope, WhatLlamaCppCannotComputeIsRefusedByName) {
  struct Case {
    std::string key, value;
    ErrorKind kind;
    std::string text;
  };
  const std::vector<Case> cases = {
      {"rope_parameters", R"({"rope_type":"dynamic","factor":2.0})", ErrorKind::NotSupported, "rope type `dynamic`: dynamic NTK scaling"},
      {"rope_scaling", R"({"type":"dynamic","factor":2.0})", ErrorKind::NotSupported, "`rope_scaling` rope type `dynamic`"},
      {"rope_parameters", R"({"rope_type":"yarn","factor":2.0})", ErrorKind::InvalidModelFolder,
       "`rope_parameters.original_max_position_embeddings` is missing (rope type yarn needs it)"},
      {"rope_parameters", R"({"rope_type":"yarn","factor":2.0,"original_max_position_embeddings":16,"beta_fast":16})", ErrorKind::NotSupported,
       "key `beta_fast` is not 32"},
      {"rope_parameters", R"({"rope_type":"yarn","factor":2.0,"original_max_position_embeddings":16,"attention_factor":1.5})",
       ErrorKind::NotSupported, "key `attention_factor` is not 0.1 ln(factor) + 1"},
      {"rope_parameters", R"({"rope_type":"yarn","factor":2.0,"original_max_position_embeddings":16,"mscale":1.0})", ErrorKind::NotSupported,
       "key `mscale` is not understood for rope type `yarn`"},
      {"rope_parameters", R"({"rope_type":"longrope","short_factor":[1,1],"long_factor":[2,2],"original_max_position_embeddings":16})",
       ErrorKind::NotSupported, "llama.cpp's llama architecture has no longrope"},
      {"rope_parameters", R"({"rope_type":"spiral"})", ErrorKind::NotSupported, "rope type `spiral` is not one llama.cpp's converter maps"},
      {"rope_parameters", R"({"rope_type":"linear","factor":2.0,"beta_fast":32})", ErrorKind::NotSupported,
       "key `beta_fast` is not understood for rope type `linear`"},
      {"rope_parameters", R"({"rope_type":"default","partial_rotary_factor":0.5})", ErrorKind::NotSupported, "key `partial_rotary_factor` is not 1"},
      {"rope_parameters", R"({"rope_type":"linear"})", ErrorKind::InvalidModelFolder, "`rope_parameters.factor` is missing"},
      {"rope_parameters", R"({"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0})", ErrorKind::InvalidModelFolder,
       "`rope_parameters.original_max_position_embeddings` is missing"},
      {"rope_parameters", R"({"type":"linear","rope_type":"default","factor":2.0})", ErrorKind::InvalidModelFolder, "gives two rope types"},
      {"rope_parameters", R"([1])", ErrorKind::InvalidModelFolder, "`rope_parameters` must be an object"},
      {"hidden_act", R"("gelu")", ErrorKind::NotSupported, "`hidden_act` is `gelu`"},
      {"partial_rotary_factor", "0.5", ErrorKind::NotSupported, "`partial_rotary_factor` is not 1"},
  };
  for (const Case& c : cases) {
    Folder f;
    f.config[c.key] = c.value;
    EXPECT_TRUE(FailsNaming(f.plan(), c.kind, "config.json", c.text)) << c.value;
  }
  {
    Folder f;  // both layouts at once
    f.config["rope_scaling"] = R"({"type":"linear","factor":2.0})";
    f.config["rope_parameters"] = R"({"rope_type":"linear","factor":4.0})";
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "config.json", "`rope_scaling` is given beside rope_parameters"));
  }
  {
    Folder f;
    f.config["rope_theta"] = "10000.0";
    f.config["rope_parameters"] = R"({"rope_type":"default","rope_theta":500000.0})";
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "config.json", "`rope_theta` differs from rope_parameters.rope_theta"));
  }
  {
    Folder f;  // untied without lm_head: transformers would start the head from random weights
    f.config["tie_word_embeddings"] = "false";
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::TensorNotFound, "model.safetensors", "lm_head.weight is missing"));
  }
}

TEST(HfArch, Qwen2AndQwen3UseTheirTables) {
  {
    Folder f;
    f.config["architectures"] = R"(["Qwen2ForCausalLM"])";
    f.config["rope_theta"] = "1000000.0";
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::TensorNotFound, "model.safetensors", "model.layers.0.self_attn.q_proj.bias is missing"));
    f.tensors["model.layers.0.self_attn.q_proj.bias"] = {8};
    f.tensors["model.layers.0.self_attn.k_proj.bias"] = {4};
    f.tensors["model.layers.0.self_attn.v_proj.bias"] = {4};
    auto p = f.plan();
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(*find(*p, "general.architecture"), MetaValue::string("qwen2"));
    EXPECT_EQ(*find(*p, "qwen2.rope.freq_base"), MetaValue::f32(1e6f));
    EXPECT_EQ(find(*p, "qwen2.vocab_size"), nullptr);                                    // LlamaModel's key only
    for (const ConvertTensor& t : p->tensors) EXPECT_EQ(t.permute_heads, 0u) << t.name;  // NEOX rope: no permutation
    f.config["use_sliding_window"] = "true";
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "config.json", "`use_sliding_window` is true"));
  }
  {
    Folder f;
    f.config["architectures"] = R"(["Qwen3ForCausalLM"])";
    f.config["head_dim"] = "4";
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::TensorNotFound, "model.safetensors", "blk.0.attn_q_norm.weight"));
    f.tensors["model.layers.0.self_attn.q_norm.weight"] = {4};
    f.tensors["model.layers.0.self_attn.k_norm.weight"] = {4};
    ASSERT_TRUE(IsOk(f.plan()));
    EXPECT_EQ(*find(*f.plan(), "qwen3.attention.key_length"), MetaValue::u32(4));
    f.config["rope_parameters"] =
        R"({"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":16})";
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "config.json", "rope type `llama3` is not one llama.cpp's qwen3 architecture has"));
    f.config.erase("rope_parameters");
    f.tensors["model.layers.0.self_attn.q_proj.bias"] = {8};  // Qwen3 has no attention biases in llama.cpp
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "model.safetensors", "no name in llama.cpp's qwen3 architecture"));
  }
  {
    Folder f;  // Mistral's sliding window, when it would bind
    f.config["architectures"] = R"(["MistralForCausalLM"])";
    f.config["sliding_window"] = "32";
    EXPECT_TRUE(IsOk(f.plan()));
    f.config["sliding_window"] = "16";
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "config.json", "`sliding_window` (16) is below max_position_embeddings"));
  }
}

// A Qwen3-MoE folder: the fixture's attention with Qwen3's head norms, 4 experts of width 2 (2 used,
// renormalized), one tensor per expert.
void make_qwen3moe(Folder& f) {
  f.config["architectures"] = R"(["Qwen3MoeForCausalLM"])";
  f.config["head_dim"] = "4";
  f.config["num_local_experts"] = "4";
  f.config["num_experts_per_tok"] = "2";
  f.config["moe_intermediate_size"] = "2";
  f.config["norm_topk_prob"] = "true";
  f.config["decoder_sparse_step"] = "1";
  f.config["mlp_only_layers"] = "[]";
  f.tensors["model.layers.0.self_attn.q_norm.weight"] = {4};
  f.tensors["model.layers.0.self_attn.k_norm.weight"] = {4};
  for (const char* dense : {"gate_proj", "up_proj", "down_proj"}) f.tensors.erase(std::string("model.layers.0.mlp.") + dense + ".weight");
  f.tensors["model.layers.0.mlp.gate.weight"] = {4, 8};
  for (int e = 0; e < 4; ++e) {
    const std::string expert = "model.layers.0.mlp.experts." + std::to_string(e) + ".";
    f.tensors[expert + "gate_proj.weight"] = {2, 8};
    f.tensors[expert + "up_proj.weight"] = {2, 8};
    f.tensors[expert + "down_proj.weight"] = {8, 2};
  }
}

const ConvertTensor* planned(const ConvertPlan& p, std::string_view name) {
  for (const ConvertTensor& t : p.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

TEST(HfMoe, Qwen3MoePerExpertTensorsAreStacked) {
  Folder f;
  make_qwen3moe(f);
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "general.architecture"), MetaValue::string("qwen3moe"));
  EXPECT_EQ(*find(*p, "qwen3moe.expert_count"), MetaValue::u32(4));
  EXPECT_EQ(*find(*p, "qwen3moe.expert_used_count"), MetaValue::u32(2));
  EXPECT_EQ(*find(*p, "qwen3moe.expert_feed_forward_length"), MetaValue::u32(2));
  EXPECT_EQ(*find(*p, "qwen3moe.feed_forward_length"), MetaValue::u32(8));
  const ConvertTensor* router = planned(*p, "blk.0.ffn_gate_inp.weight");
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->source, "model.layers.0.mlp.gate.weight");
  EXPECT_EQ(router->type, TensorType::F32);  // at any --type, as llama.cpp keeps routers
  const std::array<std::pair<const char*, const char*>, 3> kinds = {
      {{"blk.0.ffn_gate_exps.weight", "gate_proj"}, {"blk.0.ffn_up_exps.weight", "up_proj"}, {"blk.0.ffn_down_exps.weight", "down_proj"}}};
  for (const auto& [name, hf] : kinds) {
    const ConvertTensor* t = planned(*p, name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_TRUE(t->stack);
    EXPECT_TRUE(t->source.empty());
    EXPECT_FALSE(t->type.has_value());  // the --type asked for
    ASSERT_EQ(t->pieces.size(), 4u);
    for (std::size_t e = 0; e < 4; ++e) {
      EXPECT_EQ(t->pieces[e].source, "model.layers.0.mlp.experts." + std::to_string(e) + "." + hf + ".weight");
      EXPECT_EQ(t->pieces[e].end, 0u);  // the whole tensor
    }
  }
  EXPECT_EQ(planned(*p, "blk.0.ffn_gate.weight"), nullptr);
  for (const ConvertTensor& t : p->tensors) EXPECT_EQ(t.permute_heads, 0u) << t.name;  // NEOX rope
}

TEST(HfMoe, Qwen3MoeFusedExpertsAreSplit) {
  Folder f;
  make_qwen3moe(f);
  for (int e = 0; e < 4; ++e) {
    for (const char* kind : {"gate_proj", "up_proj", "down_proj"})
      f.tensors.erase("model.layers.0.mlp.experts." + std::to_string(e) + "." + kind + ".weight");
  }
  f.tensors["model.layers.0.mlp.experts.gate_up_proj"] = {4, 4, 8};  // [E, 2F, D]
  f.tensors["model.layers.0.mlp.experts.down_proj"] = {4, 8, 2};     // [E, D, F]
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  const ConvertTensor* gate = planned(*p, "blk.0.ffn_gate_exps.weight");
  const ConvertTensor* up = planned(*p, "blk.0.ffn_up_exps.weight");
  const ConvertTensor* down = planned(*p, "blk.0.ffn_down_exps.weight");
  ASSERT_TRUE(gate && up && down);
  ASSERT_EQ(gate->pieces.size(), 1u);
  ASSERT_EQ(up->pieces.size(), 1u);
  EXPECT_FALSE(gate->stack);
  EXPECT_EQ(gate->pieces[0].source, "model.layers.0.mlp.experts.gate_up_proj");
  EXPECT_EQ(gate->pieces[0].dim, 1u);  // each expert's first F rows, then its last F
  EXPECT_EQ(gate->pieces[0].begin, 0u);
  EXPECT_EQ(gate->pieces[0].end, 2u);
  EXPECT_EQ(up->pieces[0].begin, 2u);
  EXPECT_EQ(up->pieces[0].end, 4u);
  EXPECT_EQ(down->source, "model.layers.0.mlp.experts.down_proj");
  EXPECT_TRUE(down->pieces.empty());
  f.tensors["model.layers.0.mlp.experts.gate_up_proj"] = {4, 2, 8};  // not 2F rows
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "model.safetensors", "shape [4, 2, 8], config.json implies [4, 4, 8]"));
}

TEST(HfMoe, ExpertsMustAllBeThereWithTheirShapes) {
  Folder f;
  make_qwen3moe(f);
  f.tensors.erase("model.layers.0.mlp.experts.3.up_proj.weight");
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::TensorNotFound, "model.safetensors",
                          "model.layers.0.mlp.experts.3.up_proj.weight is missing (llama.cpp needs blk.0.ffn_up_exps.weight)"));
  make_qwen3moe(f);
  f.tensors["model.layers.0.mlp.experts.1.down_proj.weight"] = {2, 8};
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "model.safetensors", "shape [2, 8], config.json implies [8, 2]"));
  make_qwen3moe(f);
  f.tensors["model.layers.0.mlp.experts.4.up_proj.weight"] = {2, 8};  // an expert beyond the count
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "model.safetensors", "no name in llama.cpp's qwen3moe architecture"));
  make_qwen3moe(f);
  f.tensors.erase("model.layers.0.mlp.gate.weight");
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::TensorNotFound, "model.safetensors", "blk.0.ffn_gate_inp.weight"));
}

TEST(HfMoe, ConfigKeysThatChangeTheMathAreMappedOrRefused) {
  const std::vector<ConfigCase> cases = {
      {"norm_topk_prob", "false", ErrorKind::NotSupported, "`norm_topk_prob` is false: llama.cpp's qwen3moe architecture renormalizes"},
      {"norm_topk_prob", "", ErrorKind::NotSupported, "`norm_topk_prob` is absent (transformers: false)"},
      {"decoder_sparse_step", "2", ErrorKind::NotSupported, "`decoder_sparse_step` is 2: llama.cpp's qwen3moe architecture makes every layer sparse"},
      {"mlp_only_layers", "[0]", ErrorKind::NotSupported, "`mlp_only_layers` lists dense layers"},
      {"mlp_only_layers", "3", ErrorKind::InvalidModelFolder, "`mlp_only_layers` must be a list"},
      {"use_sliding_window", "true", ErrorKind::NotSupported, "`use_sliding_window` is true"},
      {"num_local_experts", "", ErrorKind::InvalidModelFolder, "`num_local_experts` is missing"},
      {"num_local_experts", "1025", ErrorKind::InvalidModelFolder, "`num_local_experts` is 1025, outside [1, 1024]"},
      {"num_experts", "5", ErrorKind::InvalidModelFolder, "`num_experts` differs from num_local_experts"},
      {"num_experts_per_tok", "5", ErrorKind::InvalidModelFolder, "`num_experts_per_tok` is above the expert count 4"},
      {"num_experts_per_tok", "", ErrorKind::InvalidModelFolder, "`num_experts_per_tok` is missing"},
      {"moe_intermediate_size", "", ErrorKind::InvalidModelFolder, "`moe_intermediate_size` is missing"},
      {"hidden_act", R"("gelu")", ErrorKind::NotSupported, "`hidden_act` is `gelu`"},
  };
  expect_config_refusals(cases, make_qwen3moe);
  Folder f;  // transformers 4's name for the count
  make_qwen3moe(f);
  f.config.erase("num_local_experts");
  f.config["num_experts"] = "4";
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "qwen3moe.expert_count"), MetaValue::u32(4));
}

// The fixture's dense MLP replaced by 4 experts of width `ffn` under `block`, named by `names` (gate,
// up, down), and a router.
void make_experts(Folder& f, const std::string& block, std::array<const char*, 3> names, std::uint64_t ffn) {
  for (const char* dense : {"gate_proj", "up_proj", "down_proj"}) f.tensors.erase(std::string("model.layers.0.mlp.") + dense + ".weight");
  f.tensors["model.layers.0." + block + ".gate.weight"] = {4, 8};
  for (int e = 0; e < 4; ++e) {
    const std::string expert = "model.layers.0." + block + ".experts." + std::to_string(e) + ".";
    f.tensors[expert + names[0] + ".weight"] = {ffn, 8};
    f.tensors[expert + names[1] + ".weight"] = {ffn, 8};
    f.tensors[expert + names[2] + ".weight"] = {8, ffn};
  }
  f.config["num_experts_per_tok"] = "2";
}

TEST(HfMoe, MixtralIsLlamaWithExperts) {
  Folder f;
  f.config["architectures"] = R"(["MixtralForCausalLM"])";
  f.config["num_local_experts"] = "4";
  make_experts(f, "block_sparse_moe", {"w1", "w3", "w2"}, 8);
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "general.architecture"), MetaValue::string("llama"));
  EXPECT_EQ(*find(*p, "llama.expert_count"), MetaValue::u32(4));
  EXPECT_EQ(find(*p, "llama.expert_feed_forward_length"), nullptr);  // the experts are intermediate_size wide
  EXPECT_EQ(planned(*p, "blk.0.attn_q.weight")->permute_heads, 2u);
  EXPECT_EQ(planned(*p, "blk.0.ffn_up_exps.weight")->pieces[1].source, "model.layers.0.block_sparse_moe.experts.1.w3.weight");
  EXPECT_EQ(planned(*p, "blk.0.ffn_down_exps.weight")->pieces[3].source, "model.layers.0.block_sparse_moe.experts.3.w2.weight");
  EXPECT_EQ(planned(*p, "blk.0.ffn_gate_inp.weight")->source, "model.layers.0.block_sparse_moe.gate.weight");
  // transformers 5's fused experts live under mlp, router included.
  for (auto it = f.tensors.begin(); it != f.tensors.end();)
    it = it->first.find("block_sparse_moe") != std::string::npos ? f.tensors.erase(it) : std::next(it);
  f.tensors["model.layers.0.mlp.gate.weight"] = {4, 8};
  f.tensors["model.layers.0.mlp.experts.gate_up_proj"] = {4, 16, 8};
  f.tensors["model.layers.0.mlp.experts.down_proj"] = {4, 8, 8};
  p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(planned(*p, "blk.0.ffn_gate_inp.weight")->source, "model.layers.0.mlp.gate.weight");
  EXPECT_EQ(planned(*p, "blk.0.ffn_up_exps.weight")->pieces[0].begin, 8u);
}

TEST(HfMoe, Qwen2MoeSharedExpertAndItsGate) {
  Folder f;
  f.config["architectures"] = R"(["Qwen2MoeForCausalLM"])";
  f.config["num_experts"] = "4";
  f.config["moe_intermediate_size"] = "2";
  f.config["shared_expert_intermediate_size"] = "6";
  make_experts(f, "mlp", {"gate_proj", "up_proj", "down_proj"}, 2);
  for (auto [bias, n] : {std::pair{"q", 8}, {"k", 4}, {"v", 4}})
    f.tensors[std::string("model.layers.0.self_attn.") + bias + "_proj.bias"] = {std::uint64_t(n)};
  f.tensors["model.layers.0.mlp.shared_expert.gate_proj.weight"] = {6, 8};
  f.tensors["model.layers.0.mlp.shared_expert.up_proj.weight"] = {6, 8};
  f.tensors["model.layers.0.mlp.shared_expert.down_proj.weight"] = {8, 6};
  f.tensors["model.layers.0.mlp.shared_expert_gate.weight"] = {1, 8};
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "qwen2moe.expert_feed_forward_length"), MetaValue::u32(2));
  EXPECT_EQ(*find(*p, "qwen2moe.expert_shared_feed_forward_length"), MetaValue::u32(6));
  EXPECT_EQ(planned(*p, "blk.0.ffn_gate_inp_shexp.weight")->type, TensorType::F32);
  EXPECT_FALSE(planned(*p, "blk.0.ffn_down_shexp.weight")->type.has_value());
  f.config["norm_topk_prob"] = "true";  // llama.cpp's qwen2moe never renormalizes
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "config.json",
                          "`norm_topk_prob` is true: llama.cpp's qwen2moe architecture does not renormalize"));
  f.config.erase("norm_topk_prob");
  f.tensors["model.layers.0.mlp.shared_expert_gate.weight"] = {2, 8};
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "model.safetensors", "shape [2, 8], config.json implies [1, 8]"));
}

TEST(HfMoe, OlmoeRules) {
  Folder f;
  f.config["architectures"] = R"(["OlmoeForCausalLM"])";
  f.config["num_experts"] = "4";
  f.config["num_key_value_heads"] = "2";
  make_experts(f, "mlp", {"gate_proj", "up_proj", "down_proj"}, 8);
  f.tensors["model.layers.0.self_attn.k_proj.weight"] = {8, 8};
  f.tensors["model.layers.0.self_attn.v_proj.weight"] = {8, 8};
  f.tensors["model.layers.0.self_attn.q_norm.weight"] = {8};  // the whole projection, not one head
  f.tensors["model.layers.0.self_attn.k_norm.weight"] = {8};
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "general.architecture"), MetaValue::string("olmoe"));
  EXPECT_EQ(planned(*p, "blk.0.attn_k_norm.weight")->source, "model.layers.0.self_attn.k_norm.weight");
  const std::vector<std::pair<std::pair<std::string, std::string>, std::string>> refused = {
      {{"rms_norm_eps", "1e-6"}, "`rms_norm_eps` is not 1e-05"},
      {{"num_key_value_heads", "1"}, "`num_key_value_heads` differs from num_attention_heads"},
      {{"clip_qkv", "8.0"}, "`clip_qkv` is set"},
      {{"attention_bias", "true"}, "`attention_bias` is true"},
      {{"norm_topk_prob", "true"}, "`norm_topk_prob` is true"},
  };
  for (const auto& [kv, text] : refused) {
    const auto saved = f.config;
    f.config[kv.first] = kv.second;
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "config.json", text)) << kv.first;
    f.config = saved;
  }
}

// A Gemma 2 folder: the fixture's layer with Gemma's four norms, head size 4, window 16.
void make_gemma(Folder& f, const std::string& cls) {
  f.config["architectures"] = "[\"" + cls + "\"]";
  f.config["head_dim"] = "4";
  f.config["query_pre_attn_scalar"] = "4";
  f.config["sliding_window"] = "16";
  f.config["hidden_activation"] = R"("gelu_pytorch_tanh")";
  if (cls == "Gemma2ForCausalLM") {
    f.config["attn_logit_softcapping"] = "50.0";
    f.config["final_logit_softcapping"] = "30.0";
  } else {
    f.tensors["model.layers.0.self_attn.q_norm.weight"] = {4};
    f.tensors["model.layers.0.self_attn.k_norm.weight"] = {4};
  }
  f.tensors.erase("model.layers.0.self_attn.rotary_emb.inv_freq");
  for (const char* norm : {"pre_feedforward_layernorm", "post_feedforward_layernorm"}) {
    f.tensors[std::string("model.layers.0.") + norm + ".weight"] = {8};
  }
}

TEST(HfArch, GemmaRules) {
  {
    Folder f;
    make_gemma(f, "Gemma2ForCausalLM");
    f.write();
    auto weights = open_tensors(f.path());
    ASSERT_TRUE(IsOk(weights));
    auto c = hf::plan(f.path(), **weights, TensorType::F32);
    ASSERT_TRUE(IsOk(c));
    EXPECT_EQ(*find(c->plan, "gemma2.attn_logit_softcapping"), MetaValue::f32(50.0f));
    EXPECT_EQ(*find(c->plan, "gemma2.final_logit_softcapping"), MetaValue::f32(30.0f));
    EXPECT_EQ(*find(c->plan, "gemma2.attention.sliding_window"), MetaValue::u32(16));
    // Norms are read from computed tensors (weight + 1); the rest from the weights.
    for (const ConvertTensor& t : c->plan.tensors) {
      EXPECT_EQ(t.source.ends_with("norm.weight + 1"), t.name.find("norm") != std::string::npos) << t.source;
      EXPECT_NE(c->tensors->find(t.source), nullptr) << t.source;
    }
    std::vector<float> norm(8);
    ASSERT_TRUE(IsOk(c->tensors->find("model.norm.weight + 1")->read(std::as_writable_bytes(std::span(norm)))));
    EXPECT_EQ(norm[0], 1.0f);  // the fixture's weights are zeros
  }
  struct Case {
    std::string cls, key, value, text;
  };
  const std::vector<Case> cases = {
      {"Gemma2ForCausalLM", "final_logit_softcapping", "null", "`final_logit_softcapping` is missing or null"},
      {"Gemma2ForCausalLM", "query_pre_attn_scalar", "8", "`query_pre_attn_scalar` is not 4"},
      {"Gemma2ForCausalLM", "layer_types", R"(["full_attention"])", "layer 0 must be sliding_attention"},
      {"Gemma2ForCausalLM", "tie_word_embeddings", "false", "`tie_word_embeddings` is false"},
      {"Gemma2ForCausalLM", "hidden_activation", R"("silu")",
       "`hidden_activation` is `silu`; llama.cpp's gemma2 architecture computes gelu_pytorch_tanh"},
      {"Gemma3ForCausalLM", "attn_logit_softcapping", "50.0", "does not cap logits"},
      {"Gemma3ForCausalLM", "use_bidirectional_attention", "true", "`use_bidirectional_attention` is true"},
      {"Gemma3ForCausalLM", "rope_parameters",
       R"({"full_attention":{"rope_type":"default"},"sliding_attention":{"rope_type":"linear","factor":2.0}})",
       "`rope_parameters.sliding_attention` is not default"},
  };
  for (const Case& c : cases) {
    Folder f;
    make_gemma(f, c.cls);
    f.config[c.key] = c.value;
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "config.json", c.text)) << c.key;
  }
}

TEST(HfArch, Phi3FusedTensorsAndLongrope) {
  Folder f;
  f.config["architectures"] = R"(["Phi3ForCausalLM"])";
  f.config["original_max_position_embeddings"] = "16";
  for (const char* t : {"q_proj", "k_proj", "v_proj"}) f.tensors.erase(std::string("model.layers.0.self_attn.") + t + ".weight");
  f.tensors.erase("model.layers.0.mlp.gate_proj.weight");
  f.tensors.erase("model.layers.0.mlp.up_proj.weight");
  f.tensors["model.layers.0.self_attn.qkv_proj.weight"] = {16, 8};  // 2 query heads + 2 x 1 key/value head, head size 4
  f.tensors["model.layers.0.mlp.gate_up_proj.weight"] = {16, 8};
  f.config["rope_parameters"] = R"({"rope_type":"longrope","short_factor":[1.0,2.0],"long_factor":[3.0,4.0],"partial_rotary_factor":1.0})";
  f.write();
  auto weights = open_tensors(f.path());
  ASSERT_TRUE(IsOk(weights));
  auto c = hf::plan(f.path(), **weights, TensorType::F32);
  ASSERT_TRUE(IsOk(c));
  EXPECT_EQ(c->plan.tensors[0].name, "rope_factors_long.weight");
  EXPECT_EQ(c->plan.tensors[1].name, "rope_factors_short.weight");
  std::vector<float> longf(2);
  ASSERT_TRUE(IsOk(c->tensors->find("rope_factors_long.weight")->read(std::as_writable_bytes(std::span(longf)))));
  EXPECT_EQ(longf, (std::vector<float>{3.0f, 4.0f}));
  EXPECT_EQ(*find(c->plan, "phi3.rope.scaling.original_context_length"), MetaValue::u32(16));
  EXPECT_EQ(*find(c->plan, "phi3.attention.sliding_window"), MetaValue::u32(0));
  ASSERT_NE(find(c->plan, "phi3.rope.scaling.attn_factor"), nullptr);  // its value: the client test, against transformers
  bool qkv = false;
  for (const ConvertTensor& t : c->plan.tensors) qkv |= t.name == "blk.0.attn_qkv.weight" && t.permute_heads == 0;
  EXPECT_TRUE(qkv);
  f.config["rope_parameters"] = R"({"rope_type":"longrope","short_factor":[1.0],"long_factor":[3.0]})";
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "config.json", "one factor per rotary pair"));
  f.config.erase("rope_parameters");
  f.tensors["model.layers.0.self_attn.qkv_proj.weight"] = {12, 8};
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "model.safetensors", "shape [12, 8], config.json implies [16, 8]"));
}

TEST(HfLlama, DuplicateAndMalformedJson) {
  Folder f;
  f.write();
  write_file_bytes(f.dir.file("config.json"), R"({"architectures":["LlamaForCausalLM"],"vocab_size":6,"vocab_size":7})");
  auto weights = open_tensors(f.path());
  ASSERT_TRUE(IsOk(weights));
  EXPECT_TRUE(FailsNaming(plan_of(hf::plan(f.path(), **weights, std::nullopt)), ErrorKind::DuplicateKey, "config.json", "`vocab_size`"));
  write_file_bytes(f.dir.file("config.json"), "[1,2]");
  EXPECT_TRUE(FailsNaming(plan_of(hf::plan(f.path(), **weights, std::nullopt)), ErrorKind::InvalidModelFolder, "config.json", "JSON object"));
  write_file_bytes(f.dir.file("config.json"), std::string((4u << 20) + 1, ' '));  // over the 4 MiB cap
  EXPECT_TRUE(IsKind(plan_of(hf::plan(f.path(), **weights, std::nullopt)), ErrorKind::ResourceLimit));
  write_file_bytes(f.dir.file("config.json"), "{\"a\":\"\xff\"}");
  EXPECT_TRUE(FailsNaming(plan_of(hf::plan(f.path(), **weights, std::nullopt)), ErrorKind::InvalidModelFolder, "config.json", "UTF-8"));
}

TEST(HfJson, NumbersOfAnySizeAreRead) {
  // transformers 5's tokenizer_config.json: "model_max_length" is int(1e30), which Python's json reads
  // and simdjson's 64-bit integers do not hold.
  Folder f;
  f.tokenizer_config = R"({
  "add_bos_token": true,
  "backend": "tokenizers",
  "bos_token": "<|bos|>",
  "clean_up_tokenization_spaces": false,
  "model_max_length": 1000000000000000019884624838656,
  "tokenizer_class": "TokenizersBackend"
})";
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "tokenizer.ggml.add_bos_token"), MetaValue::boolean(true));

  struct Case {
    std::string in, out;
  };
  const std::vector<Case> cases = {
      {R"({"a": 1000000000000000019884624838656})", R"({"a": 1000000000000000019884624838656.0})"},
      {R"([18446744073709551615, 18446744073709551616, -9223372036854775808, -9223372036854775809])",
       R"([18446744073709551615, 18446744073709551616.0, -9223372036854775808, -9223372036854775809.0])"},
      {R"([1e400, -1e400, 1e-400, 1.5e3])", R"(["1e400", "-1e400", 1e-400, 1.5e3])"},
      // Inside strings, and tokens that are not JSON numbers, nothing changes.
      {R"({"k\"99999999999999999999": "99999999999999999999", "x": 0099999999999999999999})",
       R"({"k\"99999999999999999999": "99999999999999999999", "x": 0099999999999999999999})"},
  };
  for (const Case& c : cases) {
    std::string text = c.in;
    hf::widen_numbers(text);
    EXPECT_EQ(text, c.out);
  }
  // A number beyond a double's range still reads: as its text, which a numeric key then refuses by name.
  f.config["rope_theta"] = "1e999";
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "config.json", "`rope_theta` must be a number"));
}

TEST(HfLlama, TensorsLlamaCppCannotNameAreRefused) {
  {
    Folder f;
    f.tensors["model.layers.0.mlp.extra.weight"] = {8};
    auto p = f.plan();
    ASSERT_TRUE(IsKind(p, ErrorKind::NotSupported));
    EXPECT_EQ(p.error().context().tensor, "model.layers.0.mlp.extra.weight");
  }
  {
    Folder f;
    f.tensors.erase("model.layers.0.self_attn.k_proj.weight");
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::TensorNotFound, "model.safetensors", "blk.0.attn_k.weight"));
  }
  {
    Folder f;  // q rows must be heads x head size for the permutation
    f.tensors["model.layers.0.self_attn.q_proj.weight"] = {6, 8};
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "model.safetensors", "config.json implies [8, 8]"));
  }
  {
    Folder f;  // every dimension config.json gives must agree with the tensors
    f.config["intermediate_size"] = "16";
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "model.safetensors", "shape [8, 8], config.json implies [16, 8]"));
  }
  {
    Folder f;
    f.tensors["model.norm.weight"] = {7};
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "model.safetensors", "shape [7], config.json implies [8]"));
  }
  {
    Folder f;  // lm_head present: output.weight planned
    f.tensors["lm_head.weight"] = {6, 8};
    auto p = f.plan();
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(p->tensors.back().name, "output.weight");
  }
}

TEST(HfLlama, TokenizerRules) {
  {
    Folder f;  // an unknown pre-tokenizer: refused, unless named
    f.pre_tokenizer = R"({"type":"Metaspace","replacement":"x"})";
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "tokenizer.json", "pre_tokenizer Metaspace() is not one"));
    hf::GgufOptions named;
    named.bpe_pre = "default";
    auto p = f.plan(named);
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(*find(*p, "tokenizer.ggml.pre"), MetaValue::string("default"));
  }
  {
    Folder f;
    f.vocab = R"({"a":0,"b":6})";
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "tokenizer.json", "token id 6 is not below"));
  }
  {
    Folder f;  // a special token id past the vocabulary names no token: refused, not written for the loader to drop
    f.config["bos_token_id"] = "6";
    EXPECT_TRUE(
        FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "config.json", "key `bos_token_id` is 6, not below vocab_size 6 (no such token)"));
    f.config["bos_token_id"] = "5";
    EXPECT_TRUE(IsOk(f.plan()));
  }
  {
    Folder f;
    f.vocab = R"({"a":0,"a":1})";
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::DuplicateKey, "tokenizer.json", "`a`"));
  }
  {
    Folder f;  // byte_fallback with a byte-level pre-tokenizer: neither SentencePiece nor byte-level BPE
    f.model_extra = R"(,"byte_fallback":true)";
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "tokenizer.json", "byte_fallback whose pre_tokenizer `ByteLevel` does not split"));
  }
  {
    Folder f;  // transformers 5's SentencePiece-style tokenizer.json: llama.cpp's SentencePiece vocabulary
    f.model_extra = R"(,"byte_fallback":true,"unk_token":"c")";
    f.pre_tokenizer = R"({"type":"Metaspace","replacement":"\u2581","prepend_scheme":"first","split":false})";
    f.vocab = R"({"a":0,"b":1,"c":2,"ab":3)" + byte_vocab(5) + "}";
    f.set_vocab_size(261);
    auto p = f.plan();
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(*find(*p, "tokenizer.ggml.model"), MetaValue::string("llama"));
    EXPECT_EQ(*find(*p, "tokenizer.ggml.add_space_prefix"), MetaValue::boolean(true));
    const MetaValue* types = find(*p, "tokenizer.ggml.token_type");
    const MetaValue* scores = find(*p, "tokenizer.ggml.scores");
    ASSERT_EQ(types->items.size(), 261u);
    EXPECT_EQ(types->items[2], MetaValue::i32(2));         // unk_token: UNKNOWN
    EXPECT_EQ(types->items[4], MetaValue::i32(3));         // the special added token: CONTROL
    EXPECT_EQ(types->items[5 + 0x41], MetaValue::i32(6));  // <0x41>: BYTE
    EXPECT_EQ(scores->items[3], MetaValue::f32(-1.0f));    // made by merge 0 ("a b")
    EXPECT_EQ(scores->items[0], MetaValue::f32(0.0f));
  }
  {
    Folder f;  // beside tokenizer.model, tokenizer.json's byte_fallback BPE is not what is converted
    f.model_extra = R"(,"byte_fallback":true)";
    f.set_vocab_size(260);
    f.write();
    write_file_bytes(f.dir.file("tokenizer.model"), ld(1, piece("<unk>", 0, 2)) + ld(1, piece("a", -1, 1)) + byte_pieces());
    auto weights = open_tensors(f.path());
    auto p = plan_of(hf::plan(f.path(), **weights, std::nullopt));
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(*find(*p, "tokenizer.ggml.model"), MetaValue::string("llama"));
    EXPECT_EQ(find(*p, "tokenizer.ggml.tokens")->items[1], MetaValue::string("a"));
  }
  {
    Folder f;
    f.write();
    fs::remove(f.dir.file("tokenizer.json"));
    auto weights = open_tensors(f.path());
    EXPECT_TRUE(IsKind(plan_of(hf::plan(f.path(), **weights, std::nullopt)), ErrorKind::FileNotFound));
  }
}

// ---- pre-tokenizers by what they are (hf/pretokenizer.h) -----------------------------------------

// tokenizer.json pre_tokenizer pieces, spelled as the tokenizers library writes them; the patterns are
// an independent copy of those published files' (and of llama-vocab.cpp's quoted originals).
namespace pre {
const std::string kLlama3 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string kQwen2 = R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string kQwen35 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string kO200k =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string kTekken =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// DeepSeek V3's third Split with literal CR and LF, as a JSON "\r\n" escape gives them.
const std::string kDeepseekV3 =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";
const std::string kCjkKana = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+";

const std::string kBloom = " ?[^(\\s|[.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c])]+";

std::string split(const std::string& regex, std::string_view behavior = "Isolated", bool invert = false) {
  return R"({"type":"Split","pattern":{"Regex":)" + json_quote(regex) + R"(},"behavior":")" + std::string(behavior) + R"(","invert":)" +
         (invert ? "true" : "false") + "}";
}
const std::string kBytes = R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false})";
const std::string kGpt2 = R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true})";
const std::string kDigits = R"({"type":"Digits","individual_digits":true})";
std::string sequence(std::initializer_list<std::string> steps) {
  std::string out = R"({"type":"Sequence","pretokenizers":[)";
  for (const std::string& s : steps) out += (out.back() == '[' ? "" : ",") + s;
  return out + "]}";
}
}  // namespace pre

struct PreCase {
  std::string what;
  std::string pre_tokenizer;
  std::string want;
  std::string normalizer = "null";
  bool ignore_merges = false;
  std::string tokenizer_config = R"({"bos_token":"<|bos|>"})";
};

TEST(HfPreTokenizer, EachKnownStructureIsNamedAsLlamaCppNamesIt) {
  using namespace pre;
  const std::vector<PreCase> cases = {
      {"GPT-2", kGpt2, "gpt-2"},
      {"GPT-2, use_regex absent (true by default)", R"({"type":"ByteLevel","add_prefix_space":false})", "gpt-2"},
      {"Llama 3", sequence({split(kLlama3), kBytes}), "llama-bpe", "null", true},
      {"Llama 3's regex without ignore_merges", sequence({split(kLlama3), kBytes}), "dbrx"},
      {"Qwen2 with its NFC", sequence({split(kQwen2), kBytes}), "qwen2", R"({"type":"NFC"})"},
      {"Qwen2 without", sequence({split(kQwen2), kBytes}), "qwen2"},
      {"Qwen3.5", sequence({split(kQwen35), kBytes}), "qwen35", R"({"type":"NFC"})"},
      {"o200k (gpt-4o, gpt-oss)", sequence({split(kO200k), kBytes}), "gpt-4o"},
      {"tekken", sequence({split(kTekken), kBytes}), "tekken", "null", true},
      {"DeepSeek V3", sequence({split(R"(\p{N}{1,3})"), split(kCjkKana), split(kDeepseekV3), kBytes}), "deepseek-v3"},
      {"MiniCPM5",
       sequence({split(R"(\p{N}{1,3})"),
                 split(R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"),
                 kBytes}),
       "minicpm5", "null", true},
      {"Digits then GPT-2 (SmolLM, StarCoder 2)", sequence({kDigits, kGpt2}), "smollm"},
      {"the same, cleaning spaces", sequence({kDigits, kGpt2}), "starcoder", "null", false,
       R"({"bos_token":"<|bos|>","clean_up_tokenization_spaces":true})"},
      {"the same, not cleaning spaces", sequence({kDigits, kGpt2}), "smollm", "null", false,
       R"({"bos_token":"<|bos|>","clean_up_tokenization_spaces":false})"},
      {"Falcon",
       sequence(
           {R"({"type":"Punctuation","behavior":"Contiguous"})", kGpt2, R"({"type":"Digits","individual_digits":false})", split("[0-9][0-9][0-9]")}),
       "falcon"},
      {"Granite 4.1's Llama 3 Split, keeping the matches", sequence({split(kLlama3, "Removed", true), kBytes}), "dbrx"},
      {"MiniMax M2's o200k Split, keeping the matches", sequence({split(kO200k, "Removed", true), kBytes}), "minimax-m2"},
      {"DeepSeek Coder",
       sequence(
           {split("[\r\n]"), split(R"(\s?\p{L}+)"), split(R"(\s?\p{P}+)"), split("[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"), kDigits, kBytes}),
       "deepseek-coder"},
      {"BLOOM", sequence({split(kBloom), kBytes}), "bloom"},
      {"BLOOM's regex, not cleaning spaces (Poro)", sequence({split(kBloom), kBytes}), "poro-chat", "null", false,
       R"({"bos_token":"<|bos|>","clean_up_tokenization_spaces":false})"},
      {"a nested Sequence is its steps", sequence({sequence({split(kLlama3)}), kBytes}), "llama-bpe", "null", true},
  };
  for (const PreCase& c : cases) {
    SCOPED_TRACE(c.what);
    Folder f;
    f.pre_tokenizer = c.pre_tokenizer;
    f.normalizer = c.normalizer;
    f.tokenizer_config = c.tokenizer_config;
    if (c.ignore_merges) f.model_extra = R"(,"ignore_merges":true)";
    auto p = f.plan();
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(*find(*p, "tokenizer.ggml.pre"), MetaValue::string(c.want));
  }
}

TEST(HfPreTokenizer, NearMissesAreRefusedNamingWhatTheyAre) {
  using namespace pre;
  std::string llama3_off_by_one = kLlama3;
  llama3_off_by_one.replace(llama3_off_by_one.find("{1,3}"), 5, "{1,4}");
  const std::string tail =
      " is not one llama.cpp splits text as (docs/GGUF.md lists those it does); name llama.cpp's pre-tokenizer to use it anyway (bpe_pre)";
  const std::vector<PreCase> cases = {
      {"one character of Llama 3's regex", sequence({split(llama3_off_by_one), kBytes}),
       R"(Sequence[Split(Isolated, Regex "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{..."), ByteLevel(use_regex=false)])"},
      {"a prefix space", R"({"type":"ByteLevel","add_prefix_space":true,"use_regex":true})", "ByteLevel(add_prefix_space, use_regex=true)"},
      {"Llama 3's Split inverted", sequence({split(kLlama3, "Isolated", true), kBytes}),
       R"(Sequence[Split(Isolated, invert, Regex "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{..."), ByteLevel(use_regex=false)])"},
      {"Llama 3's Split removing", sequence({split(kLlama3, "Removed"), kBytes}),
       R"(Sequence[Split(Removed, Regex "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{..."), ByteLevel(use_regex=false)])"},
      {"the Split's ByteLevel with its own regex too", sequence({split(kQwen2), kGpt2}),
       R"(Sequence[Split(Isolated, Regex "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|..."), ByteLevel(use_regex=true)])"},
      {"GPT-2 after NFC (only Qwen's files carry it)", kGpt2, R"(ByteLevel(use_regex=true) after the normalizer NFC)", R"({"type":"NFC"})"},
      {"Qwen2 lower-casing", sequence({split(kQwen2), kBytes}),
       R"(Sequence[Split(Isolated, Regex "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|..."), ByteLevel(use_regex=false)] after the normalizer Lowercase)",
       R"({"type":"Lowercase"})"},
      {"digits not one by one", sequence({R"({"type":"Digits","individual_digits":false})", kGpt2}),
       "Sequence[Digits(individual_digits=false), ByteLevel(use_regex=true)]"},
      {"a Whitespace pre-tokenizer", R"({"type":"Whitespace"})", "Whitespace()"},
      {"no pre-tokenizer", "null", "null"},
      {"a pattern cut at a character boundary", sequence({split(std::string(59, 'a') + "\xC3\xA9\xC3\xA9"), kBytes}),
       "Sequence[Split(Isolated, Regex \"" + std::string(59, 'a') + "...\"), ByteLevel(use_regex=false)]"},
  };
  for (const PreCase& c : cases) {
    SCOPED_TRACE(c.what);
    Folder f;
    f.pre_tokenizer = c.pre_tokenizer;
    f.normalizer = c.normalizer;
    auto p = f.plan();
    EXPECT_TRUE(FailsNaming(p, ErrorKind::NotSupported, "tokenizer.json", "tokenizer.json's pre_tokenizer " + c.want + tail));
    hf::GgufOptions named;  // the caller's name still wins
    named.bpe_pre = "llama-bpe";
    auto q = f.plan(named);
    ASSERT_TRUE(IsOk(q));
    EXPECT_EQ(*find(*q, "tokenizer.ggml.pre"), MetaValue::string("llama-bpe"));
  }
}

TEST(HfPreTokenizer, NamesThatSplitAlikeGoByTheModelFamily) {
  hf::PreTokenizerShape llama3;
  llama3.steps = {hf::split_step("Isolated", false, true, pre::kLlama3), hf::byte_level_step(false, false)};
  llama3.ignore_merges = true;
  EXPECT_EQ(hf::identify_pre_tokenizer(llama3, {"LlamaForCausalLM", std::nullopt}), "llama-bpe");
  EXPECT_EQ(hf::identify_pre_tokenizer(llama3, {"Glm4MoeForCausalLM", std::nullopt}), "glm4");
  hf::PreTokenizerShape digits;
  digits.steps = {hf::digits_step(true), hf::byte_level_step(false, true)};
  EXPECT_EQ(hf::identify_pre_tokenizer(digits, {"CohereForCausalLM", true}), "command-r");
  EXPECT_EQ(hf::identify_pre_tokenizer(digits, {"Starcoder2ForCausalLM", false}), "starcoder");
  EXPECT_EQ(hf::identify_pre_tokenizer(digits, {"LlamaForCausalLM", std::nullopt}), "smollm");
  // Every name is one llama.cpp's loader knows (llama-vocab.cpp at the pinned commit), each once.
  auto names = hf::known_pre_tokenizers();
  std::sort(names.begin(), names.end());
  const std::vector<std::string_view> want = {
      "bailingmoe", "bloom",  "chatglm-bpe", "command-r", "dbrx",     "deepseek-coder", "deepseek-v3", "exaone",   "exaone-moe", "falcon",
      "glm4",       "gpt-2",  "gpt-4o",      "jais-2",    "kimi-k2",  "laguna",         "llama-bpe",   "minicpm5", "minimax-m2", "poro-chat",
      "qwen2",      "qwen35", "seed-coder",  "smollm",    "spark2_5", "stablelm2",      "starcoder",   "tekken",   "tiny_aya",   "ufakzeka"};
  EXPECT_EQ(names, want);
}

// ---- special tokens as llama.cpp's SpecialVocab reads them ------------------------------------------

TEST(HfTokenizer, ThePostProcessorSaysWhichSpecialTokensEncodingAdds) {
  {
    Folder f;  // a template that starts with bos's token: bos added, over tokenizer_config.json's "no"
    f.post_processor =
        R"({"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<|bos|>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}]})";
    f.tokenizer_config = R"({"bos_token":"<|bos|>","add_bos_token":false})";
    auto p = f.plan();
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(*find(*p, "tokenizer.ggml.add_bos_token"), MetaValue::boolean(true));
    EXPECT_EQ(find(*p, "tokenizer.ggml.add_eos_token"), nullptr);
  }
  {
    Folder f;  // ByteLevel (Qwen's): neither added, where nothing else says so
    f.post_processor = R"({"type":"Sequence","processors":[{"type":"ByteLevel","trim_offsets":false}]})";
    f.tokenizer_config = R"({"bos_token":"<|bos|>","add_eos_token":true})";
    auto p = f.plan();
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(*find(*p, "tokenizer.ggml.add_bos_token"), MetaValue::boolean(false));
    EXPECT_EQ(*find(*p, "tokenizer.ggml.add_eos_token"), MetaValue::boolean(false));
  }
  {
    Folder f;  // a template that ends with another token than eos: it becomes eos, the old eos eot
    f.added_tokens = R"([{"id":4,"content":"<|bos|>","special":true},{"id":5,"content":"<|end|>","special":true}])";
    f.post_processor =
        R"({"type":"TemplateProcessing","single":[{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"<|end|>","type_id":0}}]})";
    f.tokenizer_config = R"({"bos_token":"<|bos|>","eos_token":"<|bos|>"})";
    auto p = f.plan();
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(*find(*p, "tokenizer.ggml.eos_token_id"), MetaValue::u32(5));
    EXPECT_EQ(*find(*p, "tokenizer.ggml.eot_token_id"), MetaValue::u32(4));
    EXPECT_EQ(*find(*p, "tokenizer.ggml.add_eos_token"), MetaValue::boolean(true));
  }
  {
    Folder f;  // cls stands in for a missing bos
    f.tokenizer_config = R"({"cls_token":"<|bos|>"})";
    auto p = f.plan();
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(*find(*p, "tokenizer.ggml.bos_token_id"), MetaValue::u32(4));
  }
}

// The pair template says whether a separator is added: each case's answer is gguf-py 0.19's SpecialVocab's
// on the same tokenizer.json and tokenizer_config.json (tokens <|bos|> 4, <|eos|> 5, <|sep|> 6).
TEST(HfTokenizer, ThePairTemplateSaysWhetherASeparatorIsAdded) {
  struct Case {
    std::string name, single, pair, tokenizer_config;
    std::optional<bool> add_bos, add_eos, add_sep;
    std::optional<std::uint32_t> eos, sep;
  };
  const auto s = [](std::string_view t) { return R"({"SpecialToken":{"id":")" + std::string(t) + R"(","type_id":0}})"; };
  const std::string a = R"({"Sequence":{"id":"A","type_id":0}})", b = R"({"Sequence":{"id":"B","type_id":0}})";
  const std::string bos = s("<|bos|>"), eos = s("<|eos|>"), sep = s("<|sep|>");
  const std::vector<Case> cases = {
      // BERT's: the separator is the single template's trailing token, so no separator of its own.
      {"bert", bos + "," + a + "," + sep, bos + "," + a + "," + sep + "," + b + "," + sep, R"({"cls_token":"<|bos|>","sep_token":"<|sep|>"})", true,
       true, false, 6, 6},
      {"llama3", bos + "," + a, bos + "," + a + "," + bos + "," + b, R"({"bos_token":"<|bos|>","eos_token":"<|eos|>"})", true, std::nullopt, false, 5,
       std::nullopt},
      {"bare", a, a + "," + sep + "," + b, R"({"bos_token":"<|bos|>","sep_token":"<|sep|>"})", std::nullopt, std::nullopt, true, 6, 6},
      {"roberta", bos + "," + a + "," + eos, bos + "," + a + "," + eos + "," + eos + "," + b + "," + eos,
       R"({"bos_token":"<|bos|>","eos_token":"<|eos|>","sep_token":"<|eos|>"})", true, true, true, 5, 5},
      // No sep token named: eos's, which the template puts between, becomes it.
      {"eos names sep", bos + "," + a, bos + "," + a + "," + eos + "," + b, R"({"bos_token":"<|bos|>","eos_token":"<|eos|>"})", true, std::nullopt,
       true, 5, 5},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Folder f;
    f.added_tokens = R"([{"id":4,"content":"<|bos|>","special":true},{"id":5,"content":"<|eos|>","special":true},)"
                     R"({"id":6,"content":"<|sep|>","special":true}])";
    f.set_vocab_size(7);
    f.post_processor = R"({"type":"TemplateProcessing","single":[)" + c.single + R"(],"pair":[)" + c.pair + "]}";
    f.tokenizer_config = c.tokenizer_config;
    auto p = f.plan();
    ASSERT_TRUE(IsOk(p));
    const auto flag = [&](std::string_view key) -> std::optional<bool> {
      const MetaValue* v = find(*p, key);
      return v ? std::optional<bool>(*v == MetaValue::boolean(true)) : std::nullopt;
    };
    const auto id = [&](std::string_view key) -> std::optional<std::uint32_t> {
      const MetaValue* v = find(*p, key);
      return v ? std::optional<std::uint32_t>(static_cast<std::uint32_t>(v->as_u64())) : std::nullopt;
    };
    EXPECT_EQ(flag("tokenizer.ggml.add_bos_token"), c.add_bos);
    EXPECT_EQ(flag("tokenizer.ggml.add_eos_token"), c.add_eos);
    EXPECT_EQ(flag("tokenizer.ggml.add_sep_token"), c.add_sep);
    EXPECT_EQ(id("tokenizer.ggml.eos_token_id"), c.eos);
    EXPECT_EQ(id("tokenizer.ggml.seperator_token_id"), c.sep);
  }
}

TEST(HfTokenizer, FamiliesNameTheSpecialTokensLlamaCppsConverterNamesByHand) {
  Folder f;  // GLM-4.5's: bos [gMASK], eot <|user|>, unk <|endoftext|>, eom <|observation|>; eos from tokenizer_config.json
  f.vocab = R"({"a":0,"b":1})";
  f.added_tokens = R"([{"id":2,"content":"[gMASK]","special":true},{"id":3,"content":"<|user|>","special":true},)"
                   R"({"id":4,"content":"<|endoftext|>","special":true},{"id":5,"content":"<|observation|>","special":true}])";
  f.tokenizer_config = R"({"eos_token":"<|endoftext|>","unk_token":"<|user|>"})";
  f.write();
  auto folder = safeweights::Folder::open(f.path(), uncached_resolver());
  ASSERT_TRUE(IsOk(folder));
  auto config = hf::read_config(*folder);
  ASSERT_TRUE(IsOk(config));
  auto vocabulary = [&](std::string_view hf_class) -> Result<std::map<std::string, MetaValue>> {
    config->hf_class = hf_class;
    std::vector<MetaEntry> kv;
    SW_RETURN_IF_ERROR(hf::add_vocabulary(*folder, *config, {}, kv));
    std::map<std::string, MetaValue> out;
    for (auto& e : kv) out.emplace(e.key, e.value);
    return out;
  };
  auto glm = vocabulary("Glm4MoeForCausalLM");
  ASSERT_TRUE(IsOk(glm));
  EXPECT_EQ(glm->at("tokenizer.ggml.bos_token_id"), MetaValue::u32(2));
  EXPECT_EQ(glm->at("tokenizer.ggml.eot_token_id"), MetaValue::u32(3));
  EXPECT_EQ(glm->at("tokenizer.ggml.unknown_token_id"), MetaValue::u32(3));  // the file's own name stays
  EXPECT_EQ(glm->at("tokenizer.ggml.eom_token_id"), MetaValue::u32(5));
  EXPECT_EQ(glm->at("tokenizer.ggml.eos_token_id"), MetaValue::u32(4));
  auto llama = vocabulary("LlamaForCausalLM");
  ASSERT_TRUE(IsOk(llama));
  EXPECT_FALSE(llama->contains("tokenizer.ggml.eot_token_id"));
  auto solar = vocabulary("SolarOpenForCausalLM");  // needs <unk> and <|startoftext|>, which this tokenizer lacks
  ASSERT_FALSE(solar.is_ok());
  EXPECT_EQ(solar.error().kind(), ErrorKind::InvalidModelFolder);
  EXPECT_NE(solar.error().to_string().find("has no added token `<unk>`, which llama.cpp's converter makes the unk token of SolarOpenForCausalLM"),
            std::string::npos)
      << solar.error().to_string();
}

TEST(HfTokenizer, ChatTemplateBesideTokenizerConfig) {
  {
    Folder f;  // transformers 5 writes chat_template.jinja
    write_file_bytes(f.dir.file("chat_template.jinja"), "{{ messages }}");
    auto p = f.plan();
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(*find(*p, "tokenizer.chat_template"), MetaValue::string("{{ messages }}"));
    f.tokenizer_config = R"({"bos_token":"<|bos|>","chat_template":"{{ x }}"})";  // tokenizer_config.json's wins
    p = f.plan();
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(*find(*p, "tokenizer.chat_template"), MetaValue::string("{{ x }}"));
  }
  {
    Folder f;
    write_file_bytes(f.dir.file("chat_template.json"), R"({"chat_template":"{{ y }}"})");
    auto p = f.plan();
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(*find(*p, "tokenizer.chat_template"), MetaValue::string("{{ y }}"));
    write_file_bytes(f.dir.file("chat_template.json"), R"({"chat_template":[{"name":"default","template":"x"}]})");
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "chat_template.json", "chat_template that is not one string (named templates)"));
  }
  {
    Folder f;
    write_file_bytes(f.dir.file("chat_template.jinja"), std::string("{{ \xff }}"));
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "chat_template.jinja", "is not UTF-8 text"));
    write_file_bytes(f.dir.file("chat_template.jinja"), "{{ messages }}");
    fs::create_directory(f.dir.file("additional_chat_templates"));
    write_file_bytes(f.dir.file("additional_chat_templates") + "/tool_use.jinja", "{{ tools }}");
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "additional_chat_templates", "named templates"));
  }
}

TEST(HfSentencePiece, ReadsPiecesAndSkipsOtherFields) {
  const std::string model = ld(1, piece("<unk>", 0, 2)) + ld(1, piece("\xE2\x96\x81the", -1.5f, 1)) + ld(2, varint(3 << 3) + varint(2)) +
                            varint(7 << 3) + varint(300) + ld(1, ld(1, "x"));  // type and score default: NORMAL, 0
  auto p = hf::parse_sentencepiece(model, "tokenizer.model");
  ASSERT_TRUE(IsOk(p));
  ASSERT_EQ(p->size(), 3u);
  EXPECT_EQ((*p)[0].type, 2);
  EXPECT_EQ((*p)[1].piece, "\xE2\x96\x81the");
  EXPECT_EQ((*p)[1].score, -1.5f);
  EXPECT_EQ((*p)[2].type, 1);
  EXPECT_EQ((*p)[2].score, 0.0f);
}

TEST(HfSentencePiece, MalformedMessagesAreRefusedWithTheirOffset) {
  const std::string ok = ld(1, piece("a", 0, 1));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "no pieces"},
      {ok.substr(0, ok.size() - 1), "runs past the end"},
      {ok + "\x0a\xff", "truncated varint"},
      {ok + "\x0a" + std::string(10, '\xff') + "\x01", "varint"},
      {ok + "\x0b", "wire type 3"},
      {ok + "\x02", "field number 0"},
      {ld(1, piece("a", 0, 7)), "piece type 7"},
      {ld(1, varint(2 << 3 | 5) + std::string(4, '\0')), "without its text"},
      {ld(1, varint(1 << 3)), "piece field 1 has wire type 0"},
      {varint(1 << 3) + varint(5), "must be messages"},
      {ld(1, ld(1, "a") + "\x22\x80\x80\x80\x80\x10"), "runs past the end"},
  };
  for (const auto& [bytes, text] : cases) {
    auto p = hf::parse_sentencepiece(bytes, "tokenizer.model");
    ASSERT_TRUE(IsKind(p, ErrorKind::InvalidModelFolder)) << text;
    EXPECT_NE(p.error().to_string().find(text), std::string::npos) << p.error().to_string();
    EXPECT_EQ(p.error().context().file, "tokenizer.model");
    EXPECT_TRUE(p.error().context().offset.has_value());
  }
}

TEST(HfSentencePiece, SentencePieceFolderPadsToVocabSize) {
  Folder f;
  f.set_vocab_size(262);
  f.write();
  fs::remove(f.dir.file("tokenizer.json"));
  write_file_bytes(f.dir.file("tokenizer.model"),
                   ld(1, piece("<unk>", 0, 2)) + ld(1, piece("<s>", 0, 3)) + ld(1, piece("</s>", 0, 3)) + ld(1, piece("u", -2, 4)) + byte_pieces());
  auto weights = open_tensors(f.path());
  auto p = plan_of(hf::plan(f.path(), **weights, TensorType::F16));
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "tokenizer.ggml.model"), MetaValue::string("llama"));
  EXPECT_EQ(*find(*p, "tokenizer.ggml.pre"), MetaValue::string("default"));
  EXPECT_EQ(*find(*p, "general.file_type"), MetaValue::u32(1));
  const MetaValue* types = find(*p, "tokenizer.ggml.token_type");
  const MetaValue* scores = find(*p, "tokenizer.ggml.scores");
  ASSERT_EQ(types->items.size(), 262u);
  EXPECT_EQ(types->items[3], MetaValue::i32(1));  // USER_DEFINED piece: NORMAL, as llama.cpp's converter
  EXPECT_EQ(types->items[4 + 0xAB], MetaValue::i32(6));
  EXPECT_EQ(types->items[261], MetaValue::i32(5));
  EXPECT_EQ(scores->items[261], MetaValue::f32(-10000.0f));
  // The special-token text is not looked up without tokenizer.json: no bos id from tokenizer_config.
  EXPECT_EQ(find(*p, "tokenizer.ggml.bos_token_id"), nullptr);
}

// llama.cpp's SentencePiece tokenizer writes text outside the vocabulary as byte pieces and aborts
// (std::out_of_range in byte_to_token) when one is missing: such a tokenizer is refused by name.
TEST(HfTokenizer, ByteFallbackNeedsEveryBytePiece) {
  auto spm_json = [](const std::string& bytes) {
    Folder f;
    f.model_extra = R"(,"byte_fallback":true,"unk_token":"c")";
    f.pre_tokenizer = R"({"type":"Metaspace","replacement":"\u2581","prepend_scheme":"first","split":false})";
    f.vocab = R"({"a":0,"b":1,"c":2,"ab":3)" + bytes + "}";
    f.set_vocab_size(261);
    return f.plan();
  };
  EXPECT_TRUE(IsOk(spm_json(byte_vocab(5))));
  EXPECT_TRUE(FailsNaming(spm_json(""), ErrorKind::InvalidModelFolder, "tokenizer.json",
                          "has no byte piece `<0x00>`: llama.cpp's SentencePiece tokenizer writes text outside the vocabulary as the 256 "
                          "byte pieces <0x00>..<0xFF>, and aborts on a missing one"));
  EXPECT_TRUE(FailsNaming(spm_json(byte_vocab(5, true)), ErrorKind::InvalidModelFolder, "tokenizer.json",
                          "has no byte piece `<0x0A>` (its lower-case spelling is not one: byte pieces are looked up as <0xXX>)"));

  auto spm_model = [](const std::string& pieces) {
    Folder f;
    f.set_vocab_size(260);
    f.write();
    fs::remove(f.dir.file("tokenizer.json"));
    write_file_bytes(f.dir.file("tokenizer.model"), ld(1, piece("<unk>", 0, 2)) + ld(1, piece("a", -1, 1)) + pieces);
    auto weights = open_tensors(f.path());
    return plan_of(hf::plan(f.path(), **weights, std::nullopt));
  };
  EXPECT_TRUE(IsOk(spm_model(byte_pieces())));
  EXPECT_TRUE(FailsNaming(spm_model(""), ErrorKind::InvalidModelFolder, "tokenizer.model", "has no byte piece `<0x00>`"));
  EXPECT_TRUE(FailsNaming(spm_model(byte_pieces(true)), ErrorKind::InvalidModelFolder, "tokenizer.model",
                          "piece 12, `<0x0a>`, is a BYTE piece not spelled <0xXX> (two upper-case hex digits)"));
}

// Python's json (transformers) keeps the last of repeated keys, simdjson's lookups the first: a repeat
// at any depth of any model-folder JSON file is refused, naming the key and where it is.
TEST(HfJson, RepeatedKeysAreRefusedAtEveryDepth) {
  {
    Folder f;  // the bos token's text: transformers takes "b"
    f.tokenizer_config = R"({"bos_token":{"content":"<|bos|>","content":"b"},"add_bos_token":true})";
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::DuplicateKey, "tokenizer_config.json", "key `content` repeated in bos_token"));
  }
  {
    Folder f;
    f.tokenizer_config = R"({"added_tokens_decoder":{"4":{"content":"<|bos|>","special":true,"special":false}}})";
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::DuplicateKey, "tokenizer_config.json", "key `special` repeated in added_tokens_decoder.4"));
  }
  {
    Folder f;  // a key nobody reads is ambiguous all the same
    f.pre_tokenizer = R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":true,"x":{"y":[{"z":1,"z":2}]}})";
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::DuplicateKey, "tokenizer.json", "key `z` repeated in pre_tokenizer.x.y[0]"));
  }
  {
    Folder f;
    f.config["rope_scaling"] = R"({"rope_type":"linear","factor":2,"factor":4})";
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::DuplicateKey, "config.json", "key `factor` repeated in rope_scaling"));
  }
}

// A config value float32 cannot hold would be written as infinity or 0.
TEST(HfLlama, FloatKeysMustFitFloat32) {
  struct Case {
    std::string key, value, text;
  };
  const std::vector<Case> cases = {
      {"rope_theta", "1e39", "key `rope_theta` is 1e+39, which a 32-bit float cannot hold (llama.cpp keeps it as one: it would be infinity)"},
      {"rms_norm_eps", "1e39", "key `rms_norm_eps` is 1e+39, which a 32-bit float cannot hold"},
      {"rms_norm_eps", "1e-50", "key `rms_norm_eps` is 1e-50, which a 32-bit float cannot hold (llama.cpp keeps it as one: it would be 0)"},
      {"rope_scaling", R"({"rope_type":"linear","factor":1e-50})", "key `factor` is 1e-50"},
  };
  for (const Case& c : cases) {
    Folder f;
    f.config[c.key] = c.value;
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "config.json", c.text)) << c.key << "=" << c.value;
  }
  Folder f;  // the extremes float32 holds are written
  f.config["rope_theta"] = "3.4e38";
  f.config["rms_norm_eps"] = "1e-45";
  ASSERT_TRUE(IsOk(f.plan()));
}

// A model-folder file that is not a regular file (a FIFO, a dangling link, a folder, a link to a
// device) is refused by name, never taken for an absent file (a config.json so taken made the folder a
// plain tensor dump); a FIFO is never opened, so nothing blocks.
TEST(HfLlama, FilesThatAreNotRegularFilesAreRefusedByName) {
  struct Case {
    std::string file;
    std::string kind_of_entry;
    ErrorKind kind;
    std::string text;
  };
  const std::vector<Case> cases = {
      {"config.json", "fifo", ErrorKind::IoError, "is a FIFO, not a regular file"},
      {"config.json", "dangling", ErrorKind::FileNotFound, "is a dangling symbolic link"},
      {"config.json", "folder", ErrorKind::InvalidModelFolder, "is a folder, not a file"},
      {"config.json", "device", ErrorKind::IoError, "is a character device, not a regular file"},
      {"tokenizer.json", "fifo", ErrorKind::IoError, "is a FIFO, not a regular file"},
      {"tokenizer_config.json", "dangling", ErrorKind::FileNotFound, "is a dangling symbolic link"},
      {"tokenizer.model", "folder", ErrorKind::InvalidModelFolder, "is a folder, not a file"},
      {"tokenizer.model", "fifo", ErrorKind::IoError, "is a FIFO, not a regular file"},
  };
  for (const Case& c : cases) {
    Folder f;
    f.write();
    const std::string path = f.dir.file(c.file);
    fs::remove(path);
    if (c.kind_of_entry == "fifo") {
      ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
    }
    if (c.kind_of_entry == "dangling") fs::create_symlink(f.dir.file("nowhere"), path);
    if (c.kind_of_entry == "folder") fs::create_directory(path);
    if (c.kind_of_entry == "device") fs::create_symlink("/dev/null", path);
    EXPECT_TRUE(hf::is_model_folder(f.path())) << c.file << " " << c.kind_of_entry;
    EXPECT_TRUE(FailsNaming(f.plan_written(), c.kind, c.file, c.text)) << c.file << " " << c.kind_of_entry;
  }
}

// What planning from a tokenizer.json costs at its peak is a bounded multiple of its bytes (docs/GGUF.md,
// "Memory"): 15 times (the parser's DOM, about 13.7, and the merges kept once) for the smallest merges
// ("a b", six bytes of JSON each), which cost 27 times with a std::string each, a padded copy of the
// text and the DOM kept alive beside the metadata.
// A tokenizer.json of about 4 MiB made of the smallest merges ("a b"): the costliest bytes per merge.
std::string merges_tokenizer(std::string& merges) {
  for (int i = 0; merges.size() < (4u << 20); ++i) {
    merges += merges.empty() ? "\"" : ",\"";
    merges += static_cast<char>('a' + i % 26);
    merges += ' ';
    merges += static_cast<char>('a' + i / 26 % 26);
    merges += '"';
  }
  return R"({"added_tokens":[],"normalizer":null,"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},)"
         R"("model":{"type":"BPE","vocab":{"a":0,"b":1,"c":2,"ab":3},"merges":[)" +
         merges + "]}}";
}

TEST(HfTokenizer, MemoryIsABoundedMultipleOfTheFile) {
  Folder f;
  f.write();
  std::string merges;
  const std::string text = merges_tokenizer(merges);
  write_file_bytes(f.dir.file("tokenizer.json"), text);
  auto weights = open_tensors(f.path());
  ASSERT_TRUE(IsOk(weights));
  swt::start_measuring_peak();
  auto p = plan_of(hf::plan(f.path(), **weights, TensorType::F32));
  const std::size_t peak = swt::stop_measuring_peak();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(find(*p, "tokenizer.ggml.merges")->items.size(), (merges.size() + 1) / 6);
  EXPECT_LE(peak, 15 * text.size() + (1u << 20)) << static_cast<double>(peak) / static_cast<double>(text.size()) << " times the file";
}

// The whole conversion (plan, then the GGUF written) holds the tokenizer's metadata once: the plan's is
// written as it is, not copied into the output's metadata and again into the writer's key list.
TEST(HfTokenizer, ConversionHoldsTheMetadataOnce) {
  Folder f;
  f.write();
  std::string merges;
  const std::string text = merges_tokenizer(merges);
  write_file_bytes(f.dir.file("tokenizer.json"), text);
  swt::start_measuring_peak();
  ConvertOptions options;
  options.type = TensorType::F32;
  auto report = convert_path(f.path(), f.dir.file("out.gguf"), options);
  const std::size_t peak = swt::stop_measuring_peak();
  ASSERT_TRUE(IsOk(report.status()));
  EXPECT_LE(peak, 15 * text.size() + (1u << 20)) << static_cast<double>(peak) / static_cast<double>(text.size()) << " times the file";
}

// ---- gpt-oss (src/hf/arch_gptoss.cpp): transformers' transposed experts, computed on read -----------

void make_gptoss(Folder& f) {
  f.config["architectures"] = R"(["GptOssForCausalLM"])";
  f.config["head_dim"] = "4";
  f.config["num_local_experts"] = "2";
  f.config["num_experts_per_tok"] = "1";
  f.config["sliding_window"] = "4";
  f.config["tie_word_embeddings"] = "false";
  f.tensors["lm_head.weight"] = {6, 8};
  const std::string l = "model.layers.0.";
  for (const char* dense : {"gate_proj", "up_proj", "down_proj"}) f.tensors.erase(l + "mlp." + dense + ".weight");
  for (const char* b : {"q_proj", "k_proj", "v_proj", "o_proj"})
    f.tensors[l + "self_attn." + b + ".bias"] = {std::string(b) == "q_proj" || std::string(b) == "o_proj" ? 8u : 4u};
  f.tensors[l + "self_attn.sinks"] = {2};
  f.tensors[l + "mlp.router.weight"] = {2, 8};
  f.tensors[l + "mlp.router.bias"] = {2};
  f.tensors[l + "mlp.experts.gate_up_proj"] = {2, 8, 16};  // [E, D, 2F], gate and up interleaved
  f.tensors[l + "mlp.experts.gate_up_proj_bias"] = {2, 16};
  f.tensors[l + "mlp.experts.down_proj"] = {2, 8, 8};  // [E, F, D]
  f.tensors[l + "mlp.experts.down_proj_bias"] = {2, 8};
}

TEST(HfGptOss, ExpertsAreComputedAndBiasesSliced) {
  Folder f;
  make_gptoss(f);
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "gpt-oss.attention.sliding_window"), MetaValue::u32(4));
  EXPECT_EQ(*find(*p, "gpt-oss.expert_feed_forward_length"), MetaValue::u32(8));
  EXPECT_EQ(*find(*p, "gpt-oss.expert_count"), MetaValue::u32(2));
  const std::string x = "model.layers.0.mlp.experts.";
  for (const auto& [name, source] : {std::pair<const char*, std::string>{"blk.0.ffn_gate_exps.weight", x + "gate_up_proj (gate, transposed)"},
                                     {"blk.0.ffn_up_exps.weight", x + "gate_up_proj (up, transposed)"},
                                     {"blk.0.ffn_down_exps.weight", x + "down_proj (transposed)"}}) {
    const ConvertTensor* t = planned(*p, name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->source, source);
    EXPECT_FALSE(t->type.has_value());  // the --type asked for
  }
  const ConvertTensor* up_bias = planned(*p, "blk.0.ffn_up_exps.bias");
  ASSERT_NE(up_bias, nullptr);
  ASSERT_EQ(up_bias->pieces.size(), 1u);
  EXPECT_EQ(up_bias->pieces[0].begin, 1u);
  EXPECT_EQ(up_bias->pieces[0].step, 2u);
  EXPECT_EQ(up_bias->type, TensorType::F32);  // not named .weight: F32 at any --type, as llama.cpp
  EXPECT_EQ(planned(*p, "blk.0.ffn_gate_inp.weight")->type, TensorType::F32);
  EXPECT_EQ(planned(*p, "blk.0.attn_sinks.weight")->source, "model.layers.0.self_attn.sinks");
  for (const ConvertTensor& t : p->tensors) EXPECT_EQ(t.permute_heads, 0u) << t.name;  // NEOX rope
}

TEST(HfGptOss, MisshapenExpertsAndKeysAreRefusedByName) {
  Folder f;
  make_gptoss(f);
  f.tensors["model.layers.0.mlp.experts.gate_up_proj"] = {2, 16, 8};  // transformers 5's [E, 2F, D] of other MoEs: not gpt-oss's
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "model.safetensors", "config.json implies [2, 8, 16]"));
  make_gptoss(f);
  f.config["swiglu_limit"] = "8.0";
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "config.json", "key `swiglu_limit` is not 7.0"));
}

// StableLM (src/hf/arch_stablelm.cpp): LayerNorm keys and biases, the rotated part of each head, and the
// per-head q/k LayerNorms stacked, with the parallel residual's missing post-attention norm.
TEST(HfDense2, StableLmPlanStacksHeadNormsAndWritesLayerNormKeys) {
  Folder f;
  f.config["architectures"] = R"(["StableLmForCausalLM"])";
  f.config.erase("rms_norm_eps");
  f.config["layer_norm_eps"] = "1e-5";
  f.config["use_parallel_residual"] = "true";
  f.config["qk_layernorm"] = "true";
  f.config["tie_word_embeddings"] = "false";
  f.config["hidden_act"] = R"("silu")";
  f.config["rope_parameters"] = R"({"rope_type":"default","rope_theta":10000.0,"partial_rotary_factor":0.5})";
  f.tensors.erase("model.layers.0.post_attention_layernorm.weight");
  f.tensors["lm_head.weight"] = {6, 8};
  f.tensors["model.norm.bias"] = {8};
  f.tensors["model.layers.0.input_layernorm.bias"] = {8};
  for (int h = 0; h < 2; ++h) f.tensors["model.layers.0.self_attn.q_layernorm.norms." + std::to_string(h) + ".weight"] = {4};
  f.tensors["model.layers.0.self_attn.k_layernorm.norms.0.weight"] = {4};
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "stablelm.attention.layer_norm_epsilon"), MetaValue::f32(1e-5f));
  EXPECT_EQ(find(*p, "stablelm.attention.layer_norm_rms_epsilon"), nullptr);
  EXPECT_EQ(*find(*p, "stablelm.rope.dimension_count"), MetaValue::u32(2));  // half of a head of 4
  EXPECT_EQ(*find(*p, "stablelm.use_parallel_residual"), MetaValue::boolean(true));
  const ConvertTensor* q_norm = planned(*p, "blk.0.attn_q_norm.weight");
  ASSERT_NE(q_norm, nullptr);
  EXPECT_TRUE(q_norm->stack);
  ASSERT_EQ(q_norm->pieces.size(), 2u);
  EXPECT_EQ(q_norm->pieces[1].source, "model.layers.0.self_attn.q_layernorm.norms.1.weight");
  ASSERT_NE(planned(*p, "blk.0.attn_k_norm.weight"), nullptr);
  EXPECT_EQ(planned(*p, "blk.0.attn_k_norm.weight")->pieces.size(), 1u);  // one key/value head
  EXPECT_NE(planned(*p, "output_norm.bias"), nullptr);
  EXPECT_EQ(planned(*p, "blk.0.ffn_norm.weight"), nullptr);
  // A head norm missing is named; partial rotary stays refused where the architecture has none.
  f.tensors.erase("model.layers.0.self_attn.k_layernorm.norms.0.weight");
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::TensorNotFound, "model.safetensors",
                          "tensor model.layers.0.self_attn.k_layernorm.norms.0.weight is missing (llama.cpp needs blk.0.attn_k_norm.weight)"));
  Folder llama;
  llama.config["rope_parameters"] = R"({"rope_type":"default","partial_rotary_factor":0.5})";
  EXPECT_TRUE(FailsNaming(llama.plan(), ErrorKind::NotSupported, "config.json", "key `partial_rotary_factor` is not 1"));
}

// ---- hybrid attention (Qwen3.5, Qwen3-Next) ------------------------------------------------------------

// A Qwen3.5 folder: layer 0 linear attention (2 key heads, 4 value heads, each 2 wide; conv kernel 4),
// layer 1 gated full attention (q_proj twice as wide), head_dim 8 (2 rotary dimensions at the default 0.25).
void make_qwen35(Folder& f) {
  f.config["architectures"] = R"(["Qwen3_5ForCausalLM"])";
  f.config["num_hidden_layers"] = "2";
  f.config["head_dim"] = "8";
  f.config["layer_types"] = R"(["linear_attention","full_attention"])";
  for (auto [key, value] : {std::pair{"linear_num_key_heads", "2"},
                            {"linear_num_value_heads", "4"},
                            {"linear_key_head_dim", "2"},
                            {"linear_value_head_dim", "2"},
                            {"linear_conv_kernel_dim", "4"}})
    f.config[key] = value;
  std::erase_if(f.tensors, [](const auto& t) { return t.first.starts_with("model.layers.0.self_attn."); });
  const std::string la = "model.layers.0.linear_attn.";
  f.tensors[la + "in_proj_qkv.weight"] = {16, 8};
  f.tensors[la + "in_proj_z.weight"] = {8, 8};
  f.tensors[la + "in_proj_b.weight"] = {4, 8};
  f.tensors[la + "in_proj_a.weight"] = {4, 8};
  f.tensors[la + "A_log"] = {4};
  f.tensors[la + "dt_bias"] = {4};
  f.tensors[la + "conv1d.weight"] = {16, 1, 4};
  f.tensors[la + "norm.weight"] = {2};
  f.tensors[la + "out_proj.weight"] = {8, 8};
  const std::string l1 = "model.layers.1.";
  for (const char* norm : {"input_layernorm.weight", "post_attention_layernorm.weight"}) f.tensors[l1 + norm] = {8};
  for (const char* mlp : {"gate_proj", "up_proj", "down_proj"}) f.tensors[l1 + "mlp." + mlp + ".weight"] = {8, 8};
  f.tensors[l1 + "self_attn.q_proj.weight"] = {32, 8};
  f.tensors[l1 + "self_attn.k_proj.weight"] = {8, 8};
  f.tensors[l1 + "self_attn.v_proj.weight"] = {8, 8};
  f.tensors[l1 + "self_attn.o_proj.weight"] = {8, 16};
  f.tensors[l1 + "self_attn.q_norm.weight"] = {8};
  f.tensors[l1 + "self_attn.k_norm.weight"] = {8};
}

// [begin, end) of each piece of `t` along its dimension.
std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges(const ConvertTensor& t) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  for (const TensorPiece& p : t.pieces) out.emplace_back(p.begin, p.end);
  return out;
}

TEST(HfHybrid, Qwen35ValueHeadsAreReorderedAsLlamaCppExpects) {
  Folder f;
  make_qwen35(f);
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "general.architecture"), MetaValue::string("qwen35"));
  EXPECT_EQ(*find(*p, "qwen35.ssm.inner_size"), MetaValue::u32(8));
  EXPECT_EQ(*find(*p, "qwen35.ssm.time_step_rank"), MetaValue::u32(4));
  EXPECT_EQ(*find(*p, "qwen35.rope.dimension_count"), MetaValue::u32(2));
  EXPECT_EQ(*find(*p, "qwen35.full_attention_interval"), MetaValue::u32(4));
  EXPECT_EQ(*find(*p, "qwen35.attention.recurrent_layers"), MetaValue::array(MetaType::BOOL, {MetaValue::boolean(true), MetaValue::boolean(false)}));
  // Value heads grouped by key head (0 1 | 2 3) go tiled: 0 2 1 3.
  using R = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  EXPECT_EQ(ranges(*planned(*p, "blk.0.attn_qkv.weight")), (R{{0, 8}, {8, 10}, {12, 14}, {10, 12}, {14, 16}}));
  EXPECT_EQ(ranges(*planned(*p, "blk.0.attn_gate.weight")), (R{{0, 2}, {4, 6}, {2, 4}, {6, 8}}));
  EXPECT_EQ(ranges(*planned(*p, "blk.0.ssm_beta.weight")), (R{{0, 1}, {2, 3}, {1, 2}, {3, 4}}));
  EXPECT_EQ(ranges(*planned(*p, "blk.0.ssm_dt.bias")), (R{{0, 1}, {2, 3}, {1, 2}, {3, 4}}));
  const ConvertTensor* out = planned(*p, "blk.0.ssm_out.weight");
  EXPECT_EQ(out->join_dim, 1u);  // columns
  EXPECT_EQ(ranges(*out), (R{{0, 2}, {4, 6}, {2, 4}, {6, 8}}));
  // Computed: -exp(A_log), conv1d squeezed (F32 at any type); the gated norm is not shifted by 1, the others are.
  EXPECT_EQ(planned(*p, "blk.0.ssm_a")->source, "model.layers.0.linear_attn.A_log as -exp");
  EXPECT_EQ(planned(*p, "blk.0.ssm_conv1d.weight")->type, TensorType::F32);
  EXPECT_EQ(planned(*p, "blk.0.ssm_norm.weight")->source, "model.layers.0.linear_attn.norm.weight");
  EXPECT_EQ(planned(*p, "blk.1.attn_q_norm.weight")->source, "model.layers.1.self_attn.q_norm.weight + 1");
  EXPECT_EQ(planned(*p, "blk.1.attn_q.weight")->source, "model.layers.1.self_attn.q_proj.weight");
}

TEST(HfHybrid, Qwen35RefusalsNameTheKeyOrTensor) {
  Folder f;
  make_qwen35(f);
  f.config["linear_value_head_dim"] = "4";
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "config.json", "`linear_value_head_dim` differs from linear_key_head_dim"));
  f.config["linear_value_head_dim"] = "2";
  f.config["linear_num_value_heads"] = "2000000";  // bounded, so that the sizes derived from it stay inside 64 bits
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "config.json", "`linear_num_value_heads` is 2000000, outside [1, 1048576]"));
  f.config["linear_num_value_heads"] = "4";
  f.config["layer_types"] = R"(["linear_attention"])";
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "config.json", "`layer_types` must be a list of num_hidden_layers (2)"));
  f.config["layer_types"] = R"(["linear_attention","full_attention"])";
  f.config["attention_bias"] = "true";
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "config.json", "`attention_bias` is true"));
  f.config.erase("attention_bias");
  f.tensors["mtp.fc.weight"] = {8, 16};  // multi-token prediction: not converted
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "model.safetensors", "no name in llama.cpp's qwen35 architecture"));
  f.tensors.erase("mtp.fc.weight");
  f.tensors["model.layers.0.linear_attn.conv1d.weight"] = {16, 4};
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "model.safetensors", "shape [16, 4], config.json implies [16, 1, 4]"));
}

TEST(HfHybrid, Qwen3NextFusedProjectionsAreRegrouped) {
  Folder f;
  make_qwen35(f);
  f.config["architectures"] = R"(["Qwen3NextForCausalLM"])";
  f.config["num_experts"] = "4";
  f.config["num_experts_per_tok"] = "2";
  f.config["moe_intermediate_size"] = "2";
  f.config["shared_expert_intermediate_size"] = "6";
  f.config["norm_topk_prob"] = "true";
  const std::string la = "model.layers.0.linear_attn.";
  for (const char* split : {"in_proj_qkv.weight", "in_proj_z.weight", "in_proj_b.weight", "in_proj_a.weight"}) f.tensors.erase(la + split);
  f.tensors[la + "in_proj_qkvz.weight"] = {24, 8};  // per key head: q 2, k 2, v 4, z 4
  f.tensors[la + "in_proj_ba.weight"] = {8, 8};
  for (int layer : {0, 1}) {
    const std::string l = "model.layers." + std::to_string(layer) + ".mlp.";
    for (const char* mlp : {"gate_proj", "up_proj", "down_proj"}) f.tensors.erase(l + mlp + ".weight");
    f.tensors[l + "gate.weight"] = {4, 8};
    f.tensors[l + "experts.gate_up_proj"] = {4, 4, 8};
    f.tensors[l + "experts.down_proj"] = {4, 8, 2};
    f.tensors[l + "shared_expert.gate_proj.weight"] = {6, 8};
    f.tensors[l + "shared_expert.up_proj.weight"] = {6, 8};
    f.tensors[l + "shared_expert.down_proj.weight"] = {8, 6};
    f.tensors[l + "shared_expert_gate.weight"] = {1, 8};
  }
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "general.architecture"), MetaValue::string("qwen3next"));
  EXPECT_EQ(find(*p, "qwen3next.rope.dimension_sections"), nullptr);  // Qwen3.5's only
  using R = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  EXPECT_EQ(ranges(*planned(*p, "blk.0.attn_qkv.weight")), (R{{0, 2}, {12, 14}, {2, 4}, {14, 16}, {4, 8}, {16, 20}}));
  EXPECT_EQ(ranges(*planned(*p, "blk.0.attn_gate.weight")), (R{{8, 12}, {20, 24}}));
  EXPECT_EQ(planned(*p, "blk.0.ssm_ba.weight")->source, "model.layers.0.linear_attn.in_proj_ba.weight");
  EXPECT_EQ(planned(*p, "blk.0.ssm_dt.bias")->source, "model.layers.0.linear_attn.dt_bias");  // transformers' order
  f.config["norm_topk_prob"] = "false";
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "config.json", "`norm_topk_prob` is false: llama.cpp's qwen3next"));
}

// ---- plan tests of glm4moe (NextN layers), deepseek2 (MLA) and gemma4 --------------------------------

// Layer 0's attention half (norms, q, k, v, o) copied to layer `n`.
void copy_attention(Folder& f, std::uint32_t n) {
  const std::string to = "model.layers." + std::to_string(n) + ".";
  for (const char* t : {"input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                        "self_attn.v_proj.weight", "self_attn.o_proj.weight"}) {
    f.tensors[to + t] = f.tensors.at(std::string("model.layers.0.") + t);
  }
}

// What hf::plan answers for the folder `f` writes, its computed tensors and notes too (plan() keeps only
// the ConvertPlan); `weights` holds the tensors the answer refers to.
Result<hf::GgufConversion> converted(Folder& f, std::unique_ptr<TensorFile>& weights) {
  f.write();
  auto opened = open_tensors(f.path());
  if (!opened.is_ok()) return std::move(opened).status();
  weights = std::move(*opened);
  return hf::plan(f.path(), *weights, TensorType::F32);
}

// DeepSeek's and GLM's experts in layer `n` (hf/moe.h's read_sigmoid_experts): 4 experts of width 2 per
// expert, their router and correction bias, one shared expert.
void add_sigmoid_experts(Folder& f, std::uint32_t n) {
  const std::string mlp = "model.layers." + std::to_string(n) + ".mlp.";
  f.tensors[mlp + "gate.weight"] = {4, 8};
  f.tensors[mlp + "gate.e_score_correction_bias"] = {4};
  for (int e = 0; e < 4; ++e) {
    const std::string expert = mlp + "experts." + std::to_string(e) + ".";
    f.tensors[expert + "gate_proj.weight"] = {2, 8};
    f.tensors[expert + "up_proj.weight"] = {2, 8};
    f.tensors[expert + "down_proj.weight"] = {8, 2};
  }
  f.tensors[mlp + "shared_experts.gate_proj.weight"] = {2, 8};
  f.tensors[mlp + "shared_experts.up_proj.weight"] = {2, 8};
  f.tensors[mlp + "shared_experts.down_proj.weight"] = {8, 2};
}

// The config keys of 4 sigmoid-routed experts (2 used) of width 2, one shared, layer 0 dense.
void sigmoid_expert_keys(Folder& f) {
  for (auto [key, value] : {std::pair{"n_routed_experts", "4"},
                            {"num_experts_per_tok", "2"},
                            {"moe_intermediate_size", "2"},
                            {"n_shared_experts", "1"},
                            {"first_k_dense_replace", "1"},
                            {"routed_scaling_factor", "2.5"},
                            {"norm_topk_prob", "true"}})
    f.config[key] = value;
}

// A GLM-4.5-MoE folder: layer 0 dense, layer 1 experts, q/k/v biases (attention_bias), NEOX rope over
// half of each head of 4, and one next-token layer (2) with its NextN tensors.
void make_glm4moe(Folder& f) {
  f.config["architectures"] = R"(["Glm4MoeForCausalLM"])";
  f.config["num_hidden_layers"] = "2";
  f.config["head_dim"] = "4";
  f.config["attention_bias"] = "true";
  f.config["num_nextn_predict_layers"] = "1";
  // The special tokens llama.cpp's converter makes GLM's bos, eot, unk and eom.
  f.added_tokens = R"([{"id":4,"content":"[gMASK]","special":true},{"id":5,"content":"<|user|>","special":true},)"
                   R"({"id":6,"content":"<|endoftext|>","special":true},{"id":7,"content":"<|observation|>","special":true}])";
  f.tokenizer_config = "{}";
  f.set_vocab_size(8);
  sigmoid_expert_keys(f);
  for (std::uint32_t n : {1u, 2u}) {
    copy_attention(f, n);
    add_sigmoid_experts(f, n);
  }
  for (std::uint32_t n : {0u, 1u, 2u}) {
    const std::string attn = "model.layers." + std::to_string(n) + ".self_attn.";
    f.tensors[attn + "q_proj.bias"] = {8};
    f.tensors[attn + "k_proj.bias"] = {4};
    f.tensors[attn + "v_proj.bias"] = {4};
  }
  f.tensors["model.layers.2.eh_proj.weight"] = {8, 16};
  f.tensors["model.layers.2.enorm.weight"] = {8};
  f.tensors["model.layers.2.hnorm.weight"] = {8};
  f.tensors["model.layers.2.shared_head.norm.weight"] = {8};
}

TEST(HfGlm4Moe, NextnLayersAreKeptWithTheirOwnTensors) {
  Folder f;
  make_glm4moe(f);
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "general.architecture"), MetaValue::string("glm4moe"));
  EXPECT_EQ(*find(*p, "glm4moe.block_count"), MetaValue::u32(3));  // the next-token layer counts
  EXPECT_EQ(*find(*p, "glm4moe.nextn_predict_layers"), MetaValue::u32(1));
  EXPECT_EQ(*find(*p, "glm4moe.rope.dimension_count"), MetaValue::u32(2));  // partial_rotary_factor's default 0.5
  EXPECT_EQ(*find(*p, "glm4moe.leading_dense_block_count"), MetaValue::u32(1));
  EXPECT_EQ(*find(*p, "glm4moe.expert_gating_func"), MetaValue::u32(2));  // sigmoid
  EXPECT_EQ(*find(*p, "glm4moe.expert_shared_count"), MetaValue::u32(1));
  EXPECT_EQ(*find(*p, "glm4moe.expert_weights_scale"), MetaValue::f32(2.5f));
  EXPECT_EQ(*find(*p, "glm4moe.expert_weights_norm"), MetaValue::boolean(true));
  EXPECT_EQ(find(*p, "glm4moe.vocab_size"), nullptr);
  // Layer 0 dense, layers 1 and 2 experts; biases and NEOX rope (no permutation) everywhere.
  EXPECT_EQ(planned(*p, "blk.0.ffn_gate.weight")->source, "model.layers.0.mlp.gate_proj.weight");
  EXPECT_EQ(planned(*p, "blk.0.ffn_gate_exps.weight"), nullptr);
  for (const char* n : {"1", "2"}) {
    const std::string b = std::string("blk.") + n + ".";
    ASSERT_NE(planned(*p, b + "ffn_up_exps.weight"), nullptr) << b;
    EXPECT_EQ(planned(*p, b + "ffn_up_exps.weight")->pieces.size(), 4u);
    EXPECT_EQ(planned(*p, b + "ffn_gate_inp.weight")->type, TensorType::F32);
    ASSERT_NE(planned(*p, b + "exp_probs_b.bias"), nullptr) << b;
    ASSERT_NE(planned(*p, b + "ffn_down_shexp.weight"), nullptr) << b;
    EXPECT_EQ(planned(*p, b + "post_attention_norm.weight")->source, std::string("model.layers.") + n + ".post_attention_layernorm.weight");
  }
  EXPECT_EQ(planned(*p, "blk.2.attn_k.bias")->source, "model.layers.2.self_attn.k_proj.bias");
  for (const ConvertTensor& t : p->tensors) EXPECT_EQ(t.permute_heads, 0u) << t.name;
  // The next-token layer's own tensors; the optional ones only when saved.
  EXPECT_EQ(planned(*p, "blk.2.nextn.eh_proj.weight")->source, "model.layers.2.eh_proj.weight");
  EXPECT_EQ(planned(*p, "blk.2.nextn.hnorm.weight")->source, "model.layers.2.hnorm.weight");
  EXPECT_EQ(planned(*p, "blk.2.nextn.shared_head_norm.weight")->source, "model.layers.2.shared_head.norm.weight");
  EXPECT_EQ(planned(*p, "blk.2.nextn.embed_tokens.weight"), nullptr);
  EXPECT_EQ(planned(*p, "blk.1.nextn.eh_proj.weight"), nullptr);
  // A next-token layer missing a required tensor is named.
  f.tensors.erase("model.layers.2.enorm.weight");
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::TensorNotFound, "model.safetensors",
                          "tensor model.layers.2.enorm.weight is missing (llama.cpp needs blk.2.nextn.enorm.weight)"));
}

TEST(HfGlm4Moe, AbsentNextnLayerIsCountedWithANote) {
  Folder f;
  make_glm4moe(f);
  std::erase_if(f.tensors, [](const auto& t) { return t.first.starts_with("model.layers.2."); });
  std::unique_ptr<TensorFile> weights;
  auto c = converted(f, weights);
  ASSERT_TRUE(IsOk(c));
  EXPECT_EQ(*find(c->plan, "glm4moe.block_count"), MetaValue::u32(3));
  EXPECT_EQ(planned(c->plan, "blk.2.attn_q.weight"), nullptr);
  ASSERT_EQ(c->notes.size(), 1u);
  EXPECT_NE(c->notes[0].find("num_nextn_predict_layers counts 1 next-token-prediction layer(s) the weights do not hold"), std::string::npos)
      << c->notes[0];
}

TEST(HfGlm4Moe, KeysItCannotConvertAreRefusedByName) {
  const std::vector<ConfigCase> cases = {
      {"n_group", "2", ErrorKind::NotSupported, "`topk_group` is below n_group: llama.cpp's glm4moe architecture chooses experts among all groups"},
      {"quantization_config", "{}", ErrorKind::NotSupported, "`quantization_config` is set: quantized (FP8) checkpoints are not converted"},
      {"rope_parameters", R"({"rope_type":"linear","factor":2.0})", ErrorKind::NotSupported,
       "rope type `linear`: llama.cpp's converter writes no rope scaling for glm4moe"},
      {"n_shared_experts", "", ErrorKind::NotSupported, "`n_shared_experts` is absent or 0: llama.cpp's glm4moe needs shared experts"},
      {"partial_rotary_factor", "0.75", ErrorKind::InvalidModelFolder, "`partial_rotary_factor` rotates an odd number"},
      {"num_nextn_predict_layers", "600", ErrorKind::InvalidModelFolder, "`num_nextn_predict_layers` is 600, outside [0, 510]"},
  };
  expect_config_refusals(cases, make_glm4moe);
}

// GLM-4.5V (Glm4vMoeForConditionalGeneration) as transformers 5 saves it: GLM-4.5-MoE's text model in
// text_config with a sectioned multimodal rope, its weights under model.language_model., beside a vision
// tower (model.visual.*). Converted as llama.cpp's converter converts it: the text model as glm4moe,
// mrope_section as rope.dimension_sections (padded to four), the vision tower left out with a note.
TEST(HfGlm4Moe, Glm4vMoeConvertsItsTextModelWithItsRopeSections) {
  Folder f;
  make_glm4moe(f);
  std::string text = "{";
  for (const auto& [k, v] : f.config) {
    if (k != "architectures") text += "\"" + k + "\":" + v + ",";
  }
  // Heads of 4, half rotated: one rotary pair, in the first (time) section.
  text += R"("model_type":"glm4v_moe_text","rope_parameters":{"rope_type":"default","rope_theta":10000.0,"mrope_section":[1,0,0]}})";
  f.config = {{"architectures", R"(["Glm4vMoeForConditionalGeneration"])"}, {"model_type", R"("glm4v_moe")"}, {"text_config", text}};
  std::map<std::string, std::vector<std::uint64_t>> renamed;
  for (const auto& [name, shape] : f.tensors) renamed["model.language_model." + name.substr(std::string_view("model.").size())] = shape;
  renamed["model.visual.patch_embed.proj.weight"] = {8, 4};
  renamed["model.visual.blocks.0.attn.qkv.weight"] = {24, 8};
  renamed["model.visual.merger.proj.weight"] = {8, 8};
  f.tensors = std::move(renamed);
  std::unique_ptr<TensorFile> weights;
  auto c = converted(f, weights);
  ASSERT_TRUE(IsOk(c));
  const ConvertPlan& p = c->plan;
  EXPECT_EQ(*find(p, "general.architecture"), MetaValue::string("glm4moe"));
  EXPECT_EQ(*find(p, "glm4moe.block_count"), MetaValue::u32(3));  // text_config's 2 and its next-token layer
  EXPECT_EQ(*find(p, "glm4moe.rope.dimension_count"), MetaValue::u32(2));
  EXPECT_EQ(*find(p, "glm4moe.rope.dimension_sections"),
            MetaValue::array(MetaType::INT32, {MetaValue::i32(1), MetaValue::i32(0), MetaValue::i32(0), MetaValue::i32(0)}));
  EXPECT_EQ(*find(p, "glm4moe.expert_gating_func"), MetaValue::u32(2));
  // The text model's tensors under their llama.cpp names, from model.language_model.*; nothing of the tower.
  EXPECT_EQ(planned(p, "token_embd.weight")->source, "model.language_model.embed_tokens.weight");
  EXPECT_EQ(planned(p, "blk.0.ffn_gate.weight")->source, "model.language_model.layers.0.mlp.gate_proj.weight");
  EXPECT_EQ(planned(p, "blk.0.attn_q.bias")->source, "model.language_model.layers.0.self_attn.q_proj.bias");
  const ConvertTensor* up = planned(p, "blk.1.ffn_up_exps.weight");
  ASSERT_NE(up, nullptr);
  ASSERT_EQ(up->pieces.size(), 4u);
  EXPECT_EQ(up->pieces[3].source, "model.language_model.layers.1.mlp.experts.3.up_proj.weight");
  EXPECT_EQ(planned(p, "blk.2.nextn.eh_proj.weight")->source, "model.language_model.layers.2.eh_proj.weight");
  for (const ConvertTensor& t : p.tensors) {
    EXPECT_FALSE(t.source.starts_with("model.visual.")) << t.name;
    EXPECT_FALSE(t.name.starts_with("v.")) << t.name;
  }
  EXPECT_TRUE(std::ranges::any_of(c->notes, [](const std::string& n) {
    return n.find("Glm4vMoeForConditionalGeneration: the text model was converted; the vision tower was left out") != std::string::npos;
  })) << (c->notes.empty() ? "no notes" : c->notes[0]);
  // Sections that do not add up to the head's rotary pairs are refused by name.
  std::string& edited = f.config["text_config"];
  edited.replace(edited.find("[1,0,0]"), 7, "[1,1,0]");
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "config.json",
                          "`rope_parameters.mrope_section` must sum to the rotary pairs of a head (1)"));
}

// A DeepSeek-V3 folder: 2 heads of latent attention (query rank 4, key/value rank 4, nope 2, rope 2,
// values 2), layer 0 dense, layer 1 experts in 2 groups (1 used), and a multi-token-prediction layer 2
// that llama.cpp's converter leaves out.
void make_deepseek3(Folder& f) {
  f.config["architectures"] = R"(["DeepseekV3ForCausalLM"])";
  f.config["num_hidden_layers"] = "2";
  f.config["num_key_value_heads"] = "2";
  f.config["head_dim"] = "2";  // transformers 5 saves qk_rope_head_dim there
  for (auto [key, value] : {std::pair{"q_lora_rank", "4"},
                            {"kv_lora_rank", "4"},
                            {"qk_nope_head_dim", "2"},
                            {"qk_rope_head_dim", "2"},
                            {"v_head_dim", "2"},
                            {"rope_interleave", "true"},
                            {"n_group", "2"},
                            {"topk_group", "1"}})
    f.config[key] = value;
  sigmoid_expert_keys(f);
  for (std::uint32_t n : {0u, 1u, 2u}) {
    const std::string l = "model.layers." + std::to_string(n) + ".";
    std::erase_if(f.tensors, [&](const auto& t) { return t.first.starts_with(l + "self_attn."); });
    f.tensors[l + "input_layernorm.weight"] = {8};
    f.tensors[l + "post_attention_layernorm.weight"] = {8};
    f.tensors[l + "self_attn.q_a_proj.weight"] = {4, 8};
    f.tensors[l + "self_attn.q_a_layernorm.weight"] = {4};
    f.tensors[l + "self_attn.q_b_proj.weight"] = {8, 4};            // 2 heads x (nope 2 + rope 2)
    f.tensors[l + "self_attn.kv_a_proj_with_mqa.weight"] = {6, 8};  // rank 4 + rope 2
    f.tensors[l + "self_attn.kv_a_layernorm.weight"] = {4};
    f.tensors[l + "self_attn.kv_b_proj.weight"] = {8, 4};  // 2 heads x (nope 2 + v 2), rank 4
    f.tensors[l + "self_attn.o_proj.weight"] = {8, 4};     // 2 heads x v 2
  }
  add_sigmoid_experts(f, 1);
  add_sigmoid_experts(f, 2);
  f.tensors["model.layers.2.eh_proj.weight"] = {8, 16};
}

TEST(HfDeepseek2, LatentAttentionSplitsKvBAndTheExtraLayerIsLeftOut) {
  Folder f;
  make_deepseek3(f);
  std::unique_ptr<TensorFile> weights;
  auto c = converted(f, weights);
  ASSERT_TRUE(IsOk(c));
  const ConvertPlan& p = c->plan;
  EXPECT_EQ(*find(p, "general.architecture"), MetaValue::string("deepseek2"));
  EXPECT_EQ(*find(p, "deepseek2.block_count"), MetaValue::u32(2));  // the multi-token-prediction layer left out
  EXPECT_EQ(*find(p, "deepseek2.attention.head_count_kv"), MetaValue::u32(1));
  EXPECT_EQ(*find(p, "deepseek2.attention.q_lora_rank"), MetaValue::u32(4));
  EXPECT_EQ(*find(p, "deepseek2.attention.kv_lora_rank"), MetaValue::u32(4));
  EXPECT_EQ(*find(p, "deepseek2.attention.key_length"), MetaValue::u32(6));  // rank + rope
  EXPECT_EQ(*find(p, "deepseek2.attention.value_length"), MetaValue::u32(4));
  EXPECT_EQ(*find(p, "deepseek2.attention.key_length_mla"), MetaValue::u32(4));
  EXPECT_EQ(*find(p, "deepseek2.attention.value_length_mla"), MetaValue::u32(2));
  EXPECT_EQ(*find(p, "deepseek2.rope.dimension_count"), MetaValue::u32(2));
  EXPECT_EQ(*find(p, "deepseek2.expert_group_count"), MetaValue::u32(2));
  EXPECT_EQ(*find(p, "deepseek2.expert_group_used_count"), MetaValue::u32(1));
  EXPECT_EQ(*find(p, "deepseek2.vocab_size"), MetaValue::u32(6));
  EXPECT_EQ(find(p, "deepseek2.nextn_predict_layers"), nullptr);
  for (const ConvertTensor& t : p.tensors) EXPECT_FALSE(t.name.starts_with("blk.2.")) << t.name;
  EXPECT_EQ(planned(p, "blk.0.attn_q_a.weight")->source, "model.layers.0.self_attn.q_a_proj.weight");
  EXPECT_EQ(planned(p, "blk.0.attn_kv_a_mqa.weight")->source, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight");
  EXPECT_EQ(planned(p, "blk.0.ffn_down.weight")->source, "model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(planned(p, "blk.1.exp_probs_b.bias")->source, "model.layers.1.mlp.gate.e_score_correction_bias");
  EXPECT_EQ(planned(p, "blk.0.attn_kv_b.weight"), nullptr);  // split, not kept
  // attn_v_b: each head's value rows (2..4 and 6..8 of kv_b_proj), stacked.
  const ConvertTensor* v_b = planned(p, "blk.0.attn_v_b.weight");
  ASSERT_NE(v_b, nullptr);
  EXPECT_TRUE(v_b->stack);
  using R = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  EXPECT_EQ(ranges(*v_b), (R{{2, 4}, {6, 8}}));
  // attn_k_b: [heads, rank, nope], each head's key rows transposed as read (their bytes: hf_mla_test.cpp).
  const ConvertTensor* k_b = planned(p, "blk.0.attn_k_b.weight");
  ASSERT_NE(k_b, nullptr);
  const TensorEntry* e = c->tensors->find(k_b->source);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(std::vector<std::uint64_t>(e->shape.begin(), e->shape.end()), (std::vector<std::uint64_t>{2, 4, 2}));
}

TEST(HfDeepseek2, KeysItCannotConvertAreRefusedByName) {
  const std::vector<ConfigCase> cases = {
      {"rope_interleave", "false", ErrorKind::NotSupported, "`rope_interleave` is false: llama.cpp's deepseek2 rotates interleaved pairs"},
      {"num_key_value_heads", "1", ErrorKind::NotSupported, "`num_key_value_heads` differs from num_attention_heads"},
      {"quantization_config", "{}", ErrorKind::NotSupported, "`quantization_config` is set: quantized (FP8 block-scaled"},
      {"scoring_func", R"("softmax")", ErrorKind::NotSupported, "`scoring_func` is `softmax`: DeepseekV3ForCausalLM scores experts by sigmoid"},
      {"attention_bias", "true", ErrorKind::NotSupported, "`attention_bias` is true: llama.cpp's deepseek2 has no attention biases"},
      {"rope_parameters", R"({"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":16,"mscale":1.0})", ErrorKind::NotSupported,
       "key `mscale` must be given and equal mscale_all_dim"},
      {"qk_rope_head_dim", "3", ErrorKind::InvalidModelFolder, "`qk_rope_head_dim` is odd"},
      {"kv_lora_rank", "", ErrorKind::InvalidModelFolder, "`kv_lora_rank` is missing"},
  };
  expect_config_refusals(cases, make_deepseek3);
  Folder f;  // YaRN with mscale equal to mscale_all_dim: llama.cpp's log multiplier
  make_deepseek3(f);
  f.config["rope_parameters"] = R"({"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":16,"mscale":1.0,"mscale_all_dim":1.0})";
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "deepseek2.rope.scaling.yarn_log_multiplier"), MetaValue::f32(0.1f));
}

// A Gemma 4 folder: layer 0 sliding (heads of 4), layer 1 full attention (heads of 8, "proportional"
// rope over a quarter of each), per-layer embeddings of 2, a byte_fallback BPE of 5 tokens.
void make_gemma4(Folder& f) {
  f.config["architectures"] = R"(["Gemma4ForCausalLM"])";
  f.config["num_hidden_layers"] = "2";
  f.config["layer_types"] = R"(["sliding_attention","full_attention"])";
  f.config["head_dim"] = "4";
  f.config["global_head_dim"] = "8";
  f.config["sliding_window"] = "16";
  f.config["num_kv_shared_layers"] = "0";
  f.config["hidden_size_per_layer_input"] = "2";
  f.config["vocab_size_per_layer_input"] = "5";
  f.config["final_logit_softcapping"] = "30.0";
  f.config["hidden_activation"] = R"("gelu_pytorch_tanh")";
  f.config["rope_parameters"] = R"({"full_attention":{"rope_type":"proportional","rope_theta":1000000.0,"partial_rotary_factor":0.25},)"
                                R"("sliding_attention":{"rope_type":"default","rope_theta":10000.0}})";
  f.model_extra = R"(,"byte_fallback":true)";
  f.set_vocab_size(5);
  f.tensors.erase("model.layers.0.self_attn.rotary_emb.inv_freq");
  f.tensors["model.embed_tokens_per_layer.weight"] = {5, 4};  // 2 layers x 2
  f.tensors["model.per_layer_model_projection.weight"] = {4, 8};
  f.tensors["model.per_layer_projection_norm.weight"] = {2};
  copy_attention(f, 1);
  for (std::uint32_t n : {0u, 1u}) {
    const std::string l = "model.layers." + std::to_string(n) + ".";
    const std::uint64_t head = n == 0 ? 4 : 8;
    f.tensors[l + "self_attn.q_proj.weight"] = {2 * head, 8};
    f.tensors[l + "self_attn.k_proj.weight"] = {head, 8};
    f.tensors[l + "self_attn.v_proj.weight"] = {head, 8};
    f.tensors[l + "self_attn.o_proj.weight"] = {8, 2 * head};
    f.tensors[l + "self_attn.q_norm.weight"] = {head};
    f.tensors[l + "self_attn.k_norm.weight"] = {head};
    for (const char* mlp : {"gate_proj", "up_proj", "down_proj"}) f.tensors[l + "mlp." + mlp + ".weight"] = {8, 8};
    for (const char* norm : {"pre_feedforward_layernorm", "post_feedforward_layernorm", "post_per_layer_input_norm"})
      f.tensors[l + norm + ".weight"] = {8};
    f.tensors[l + "layer_scalar"] = {1};
    f.tensors[l + "per_layer_input_gate.weight"] = {2, 8};
    f.tensors[l + "per_layer_projection.weight"] = {8, 2};
  }
}

TEST(HfGemma4, LayerTypesHaveTheirOwnHeadsAndPerLayerEmbeddings) {
  Folder f;
  make_gemma4(f);
  std::unique_ptr<TensorFile> weights;
  auto c = converted(f, weights);
  ASSERT_TRUE(IsOk(c));
  const ConvertPlan& p = c->plan;
  EXPECT_EQ(*find(p, "general.architecture"), MetaValue::string("gemma4"));
  EXPECT_EQ(*find(p, "gemma4.attention.sliding_window"), MetaValue::u32(16));
  EXPECT_EQ(*find(p, "gemma4.attention.sliding_window_pattern"),
            MetaValue::array(MetaType::BOOL, {MetaValue::boolean(true), MetaValue::boolean(false)}));
  EXPECT_EQ(*find(p, "gemma4.attention.key_length"), MetaValue::u32(8));  // the full layers'
  EXPECT_EQ(*find(p, "gemma4.attention.key_length_swa"), MetaValue::u32(4));
  EXPECT_EQ(*find(p, "gemma4.rope.dimension_count"), MetaValue::u32(8));
  EXPECT_EQ(*find(p, "gemma4.rope.dimension_count_swa"), MetaValue::u32(4));
  EXPECT_EQ(*find(p, "gemma4.rope.freq_base_swa"), MetaValue::f32(10000.0f));
  EXPECT_EQ(*find(p, "gemma4.embedding_length_per_layer_input"), MetaValue::u32(2));
  EXPECT_EQ(*find(p, "gemma4.attention.shared_kv_layers"), MetaValue::u32(0));
  EXPECT_EQ(*find(p, "gemma4.final_logit_softcapping"), MetaValue::f32(30.0f));
  EXPECT_EQ(*find(p, "tokenizer.ggml.model"), MetaValue::string("gemma4"));
  // The model's per-layer tensors, the full layers' rope_freqs (1 for the one rotated pair, 1e30 for the rest).
  EXPECT_EQ(planned(p, "per_layer_token_embd.weight")->source, "model.embed_tokens_per_layer.weight");
  EXPECT_EQ(planned(p, "per_layer_model_proj.weight")->source, "model.per_layer_model_projection.weight");
  EXPECT_EQ(planned(p, "per_layer_proj_norm.weight")->source, "model.per_layer_projection_norm.weight");
  std::vector<float> freqs(4);
  ASSERT_TRUE(IsOk(c->tensors->find(planned(p, "rope_freqs.weight")->source)->read(std::as_writable_bytes(std::span(freqs)))));
  EXPECT_EQ(freqs, (std::vector<float>{1.0f, 1e30f, 1e30f, 1e30f}));
  // Per layer: Gemma's norms as they are (not + 1), the per-layer input tensors, the output scale.
  EXPECT_EQ(planned(p, "blk.1.attn_q_norm.weight")->source, "model.layers.1.self_attn.q_norm.weight");
  EXPECT_EQ(planned(p, "blk.0.post_ffw_norm.weight")->source, "model.layers.0.post_feedforward_layernorm.weight");
  EXPECT_EQ(planned(p, "blk.1.inp_gate.weight")->source, "model.layers.1.per_layer_input_gate.weight");
  EXPECT_EQ(planned(p, "blk.1.proj.weight")->source, "model.layers.1.per_layer_projection.weight");
  EXPECT_EQ(planned(p, "blk.0.post_norm.weight")->source, "model.layers.0.post_per_layer_input_norm.weight");
  EXPECT_EQ(planned(p, "blk.0.layer_output_scale.weight")->source, "model.layers.0.layer_scalar");
  EXPECT_EQ(planned(p, "output.weight"), nullptr);  // tied
  // A full layer with a sliding layer's head size is refused with the shape config.json implies.
  f.tensors["model.layers.1.self_attn.k_proj.weight"] = {4, 8};
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "model.safetensors", "shape [4, 8], config.json implies [8, 8]"));
}

TEST(HfGemma4, KeysAsValuesAndRefusals) {
  Folder f;  // attention_k_eq_v: the full layers take their values from the keys (no v_proj)
  make_gemma4(f);
  f.config["attention_k_eq_v"] = "true";
  f.tensors.erase("model.layers.1.self_attn.v_proj.weight");
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(planned(*p, "blk.1.attn_v.weight"), nullptr);
  EXPECT_NE(planned(*p, "blk.0.attn_v.weight"), nullptr);
  const std::vector<ConfigCase> cases = {
      {"enable_moe_block", "true", ErrorKind::InvalidModelFolder, "key `num_experts` is missing"},  // experts without their count
      {"attn_logit_softcapping", "50.0", ErrorKind::NotSupported, "`attn_logit_softcapping` is set"},
      {"layer_types", R"(["full_attention","sliding_attention"])", ErrorKind::NotSupported, "`layer_types` ends with a sliding layer"},
      {"use_bidirectional_attention", R"("all")", ErrorKind::NotSupported, "`use_bidirectional_attention` is `all`"},
      {"vocab_size_per_layer_input", "6", ErrorKind::NotSupported, "`vocab_size_per_layer_input` is not vocab_size"},
      {"global_head_dim", "", ErrorKind::InvalidModelFolder, "`global_head_dim` is missing"},
      {"num_kv_shared_layers", "2", ErrorKind::InvalidModelFolder, "`num_kv_shared_layers` leaves no layer computing keys and values"},
  };
  expect_config_refusals(cases, make_gemma4);
}

// ---- the dense architectures of issue 35 (SmolLM3, OLMo 2, Granite, Gemma 1, Ministral 3) ----------

struct DenseCase {
  std::string key, value, text;
};

// Each `cases` entry set on `make`'s folder is refused naming config.json and the key.
template <typename Make>
void expect_refused(Make make, const std::vector<DenseCase>& cases) {
  for (const DenseCase& c : cases) {
    Folder f;
    make(f);
    f.config[c.key] = c.value;
    EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "config.json", c.text)) << c.key;
  }
}

void make_smollm3(Folder& f) {
  f.config["architectures"] = R"(["SmolLM3ForCausalLM"])";
  f.config["no_rope_layers"] = "[1]";
}

TEST(HfDense, SmolLM3NoRopeLayersMustBeLlamaCppsPattern) {
  Folder f;
  make_smollm3(f);
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "general.architecture"), MetaValue::string("smollm3"));
  EXPECT_EQ(*find(*p, "smollm3.vocab_size"), MetaValue::u32(6));
  EXPECT_EQ(planned(*p, "blk.0.attn_q.weight")->permute_heads, 2u);
  expect_refused(make_smollm3, {
                                   {"no_rope_layers", "[0]", "layer 0 must use rope"},
                                   {"use_sliding_window", "true", "`use_sliding_window` is true"},
                                   {"mlp_bias", "true", "`mlp_bias` is true"},
                               });
  Folder g;
  make_smollm3(g);
  g.config.erase("no_rope_layers");
  g.config["no_rope_layer_interval"] = "3";
  EXPECT_TRUE(FailsNaming(g.plan(), ErrorKind::NotSupported, "config.json", "`no_rope_layer_interval` is not 4"));
  g.config["no_rope_layers"] = "[1, 1]";
  EXPECT_TRUE(FailsNaming(g.plan(), ErrorKind::InvalidModelFolder, "config.json", "`no_rope_layers` must list one 0 or 1 per layer"));
}

void make_olmo2(Folder& f) {
  f.config["architectures"] = R"(["Olmo2ForCausalLM"])";
  f.tensors.erase("model.layers.0.input_layernorm.weight");
  f.tensors["model.layers.0.post_feedforward_layernorm.weight"] = {8};
  f.tensors["model.layers.0.self_attn.q_norm.weight"] = {8};  // the whole projections
  f.tensors["model.layers.0.self_attn.k_norm.weight"] = {4};
}

TEST(HfDense, Olmo2PostNormsAndWholeProjectionNorms) {
  Folder f;
  make_olmo2(f);
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(planned(*p, "blk.0.post_attention_norm.weight")->source, "model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(planned(*p, "blk.0.post_ffw_norm.weight")->source, "model.layers.0.post_feedforward_layernorm.weight");
  EXPECT_EQ(planned(*p, "blk.0.attn_k_norm.weight")->source, "model.layers.0.self_attn.k_norm.weight");
  EXPECT_EQ(planned(*p, "blk.0.attn_q.weight")->permute_heads, 0u);  // NEOX rope
  EXPECT_EQ(planned(*p, "blk.0.attn_norm.weight"), nullptr);
  expect_refused(make_olmo2, {
                                 {"sliding_window", "4", "`sliding_window` is set"},
                                 {"attention_bias", "true", "`attention_bias` is true"},
                             });
}

TEST(HfDense, GraniteMultipliersAreLlamaCppsScales) {
  auto make = [](Folder& f) { f.config["architectures"] = R"(["GraniteForCausalLM"])"; };
  Folder f;
  make(f);
  f.config["attention_multiplier"] = "0.25";
  f.config["logits_scaling"] = "8";
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "granite.attention.scale"), MetaValue::f32(0.25f));
  EXPECT_EQ(*find(*p, "granite.logit_scale"), MetaValue::f32(8.0f));
  EXPECT_EQ(*find(*p, "granite.embedding_scale"), MetaValue::f32(1.0f));  // transformers' default
  EXPECT_EQ(*find(*p, "granite.residual_scale"), MetaValue::f32(1.0f));
  expect_refused(make, {
                           {"head_dim", "8", "`head_dim` is not hidden_size / num_attention_heads"},
                           {"attention_bias", "true", "`attention_bias` is true"},
                       });
}

void make_gemma1(Folder& f) {
  f.config["architectures"] = R"(["GemmaForCausalLM"])";
  f.config["hidden_act"] = R"("gelu")";  // the first releases' name for the tanh GELU
  f.config["rope_theta"] = "10000";
  f.tensors.erase("model.layers.0.self_attn.rotary_emb.inv_freq");
}

TEST(HfDense, GemmaWritesNoRopeKeysAndEot107) {
  Folder f;
  make_gemma1(f);
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(find(*p, "gemma.rope.freq_base"), nullptr);  // llama.cpp's loader computes with 10000
  EXPECT_EQ(*find(*p, "tokenizer.ggml.eot_token_id"), MetaValue::u32(107));
  EXPECT_EQ(planned(*p, "blk.0.attn_norm.weight")->source, "model.layers.0.input_layernorm.weight + 1");
  f.config["rope_theta"] = "500";
  p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "gemma.rope.freq_base"), MetaValue::f32(500.0f));
  expect_refused(make_gemma1, {
                                  {"hidden_act", R"("gelu_new")", "`hidden_act` is `gelu_new`"},
                                  {"rope_scaling", R"({"rope_type":"linear","factor":2.0})", "has rope type `linear`"},
                                  {"use_bidirectional_attention", "true", "`use_bidirectional_attention` is true"},
                              });
}

constexpr std::string_view kMinistral3Rope =
    R"({"rope_type":"yarn","rope_theta":1000000.0,"factor":16.0,"original_max_position_embeddings":4,"beta_fast":32.0,"beta_slow":1.0,)"
    R"("mscale":1.0,"mscale_all_dim":1.0,"llama_4_scaling_beta":0.1,"max_position_embeddings":32})";

TEST(HfDense, Ministral3YarnAndAttentionTemperature) {
  auto make = [](Folder& f) {
    f.config["architectures"] = R"(["Ministral3ForCausalLM"])";
    f.config["rope_parameters"] = std::string(kMinistral3Rope);
  };
  Folder f;
  make(f);
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "general.architecture"), MetaValue::string("mistral3"));
  EXPECT_EQ(*find(*p, "mistral3.rope.scaling.yarn_log_multiplier"), MetaValue::f32(1.0f));
  EXPECT_EQ(*find(*p, "mistral3.attention.temperature_scale"), MetaValue::f32(0.1f));
  EXPECT_EQ(*find(*p, "mistral3.rope.scaling.yarn_beta_fast"), MetaValue::f32(32.0f));
  EXPECT_EQ(*find(*p, "mistral3.rope.scaling.original_context_length"), MetaValue::u32(4));
  auto with = [](std::string_view from, std::string_view to) {
    std::string rope(kMinistral3Rope);
    rope.replace(rope.find(from), from.size(), to);
    return rope;
  };
  expect_refused(make, {
                           {"rope_parameters", with(R"("mscale":1.0)", R"("mscale":2.0)"), "`rope_parameters.mscale` is not 1"},
                           {"rope_parameters", R"({"rope_type":"default","rope_theta":10000.0})", "converts Ministral 3 with YaRN only"},
                       });
  f.config["rope_parameters"] = with(R"("llama_4_scaling_beta":0.1,)", "");
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "config.json", "`rope_parameters.llama_4_scaling_beta` is missing"));
}

// Ministral 3 as released: its text model (text_config, language_model.*) beside a vision tower.
TEST(HfDense, Mistral3ForConditionalGenerationConvertsItsTextModel) {
  auto make = [](Folder& f, std::string_view model_type) {
    std::string text = "{";
    for (const auto& [k, v] : f.config) {
      if (k != "architectures") text += "\"" + k + "\":" + v + ",";
    }
    text += R"("model_type":")" + std::string(model_type) + R"(","rope_parameters":)" + std::string(kMinistral3Rope) + "}";
    f.config = {{"architectures", R"(["Mistral3ForConditionalGeneration"])"}, {"model_type", R"("mistral3")"}, {"text_config", text}};
    std::map<std::string, std::vector<std::uint64_t>> renamed;
    for (const auto& [name, shape] : f.tensors) renamed["language_model." + name] = shape;
    renamed["vision_tower.patch_conv.weight"] = {4, 4};
    f.tensors = std::move(renamed);
  };
  Folder f;
  make(f, "ministral3");
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "general.architecture"), MetaValue::string("mistral3"));
  EXPECT_EQ(*find(*p, "mistral3.block_count"), MetaValue::u32(1));  // text_config's
  EXPECT_EQ(planned(*p, "token_embd.weight")->source, "language_model.model.embed_tokens.weight");
  for (const ConvertTensor& t : p->tensors) EXPECT_FALSE(t.source.starts_with("vision_tower.")) << t.source;
  Folder other;
  make(other, "llama");
  EXPECT_TRUE(FailsNaming(other.plan(), ErrorKind::NotSupported, "config.json", "`model_type` is `llama`"));
  Folder small;  // Mistral Small 3.1's text model: Ministral 3's rope keys would be ignored by llama.cpp
  make(small, "mistral");
  EXPECT_TRUE(FailsNaming(small.plan(), ErrorKind::NotSupported, "config.json", "`rope_parameters.mscale` is set for model_type mistral"));
  other.config.erase("text_config");
  EXPECT_TRUE(FailsNaming(other.plan(), ErrorKind::InvalidModelFolder, "config.json", "`text_config` is missing or not an object"));
}

// general.size_label: known answers from gguf-py's utility.size_label (0.19, the pinned llama.cpp's),
// rounding halves to even as Python does (9500 -> round(9.5) = 10 -> "10K").
TEST(SizeLabel, RoundedNotationAsGgufPyWritesIt) {
  const std::vector<std::pair<std::uint64_t, std::string>> known = {
      {1, "0.00K"},         {999, "1.0K"},        {9499, "9.5K"},          {9500, "10K"},           {99949, "100K"},
      {400000, "400K"},     {1000000, "1000K"},   {1000001, "1.0M"},       {1234567, "1.2M"},       {9950000, "10M"},
      {8030261248, "8.0B"}, {70553706496, "71B"}, {999999999999, "1000B"}, {1000000000001, "1.0T"}, {123456789012345, "123T"},
  };
  for (const auto& [count, label] : known) EXPECT_EQ(gguf::rounded_count(count), label) << count;
}

// gguf-py's GGUFWriter.get_total_parameter_count over the same shapes: (33920, 25728, 2048, 4), "4x28K". A
// 2-D tensor of experts (a bias [E, n]) counts as shared there.
TEST(SizeLabel, ExpertsCountOnceEachAndNameTheirNumber) {
  gguf::ParameterCount count;
  const std::vector<std::uint64_t> embd = {400, 64}, experts = {4, 32, 64}, bias = {4, 32};
  count.add("token_embd.weight", embd);
  count.add("blk.0.ffn_up_exps.weight", experts);
  count.add("blk.0.ffn_up_exps.bias", bias);
  EXPECT_EQ(count.total, 33920u);
  EXPECT_EQ(count.shared, 25728u);
  EXPECT_EQ(count.expert, 2048u);
  EXPECT_EQ(count.experts(), 4u);
  EXPECT_EQ(gguf::size_label(count), "4x28K");
  EXPECT_EQ(gguf::size_label(gguf::ParameterCount{}), "");
}

// generation_config.json's sampling keys: gguf-py 0.19's Metadata.load + set_gguf_meta_model on the same
// file write exactly these, in this order, with these types (do_sample and the token ids are not sampling).
TEST(HfSampling, GenerationConfigGivesTheKeysGgufPyWrites) {
  Folder f;
  f.write();
  write_file_bytes(f.dir.file("generation_config.json"), R"({"temperature": 0.6, "top_p": 0.9, "top_k": 50, "repetition_penalty": 1.1,)"
                                                         R"( "mirostat": 2, "min_p": 0, "do_sample": true, "eos_token_id": [1, 2]})");
  auto folder = safeweights::Folder::open(f.path(), uncached_resolver());
  ASSERT_TRUE(IsOk(folder));
  const std::vector<MetaEntry> want = {
      {"general.sampling.top_k", MetaValue::i32(50)},
      {"general.sampling.top_p", MetaValue::f32(0.9f)},
      {"general.sampling.min_p", MetaValue::f32(0.0f)},
      {"general.sampling.temp", MetaValue::f32(0.6f)},
      {"general.sampling.penalty_repeat", MetaValue::f32(1.1f)},
      {"general.sampling.mirostat", MetaValue::i32(2)},
  };
  const std::vector<MetaEntry> got = hf::read_sampling(*folder);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].key, want[i].key);
    EXPECT_EQ(got[i].value, want[i].value) << want[i].key;
  }
  // Like gguf-py, nothing from a file that is not JSON, and a value of another type is skipped.
  write_file_bytes(f.dir.file("generation_config.json"), "{not json");
  EXPECT_TRUE(hf::read_sampling(*folder).empty());
  write_file_bytes(f.dir.file("generation_config.json"), R"({"top_k": 0.5, "temperature": "hot"})");
  EXPECT_TRUE(hf::read_sampling(*folder).empty());
}

// Gemma 4's experts (gemma-4-26B-A4B): a one-layer Gemma4ForCausalLM whose 4 experts of width 2 (2 used)
// sit beside its dense MLP, fused as transformers 5 saves them; a byte_fallback BPE (the gemma4 tokenizer).
void make_gemma4_moe(Folder& f) {
  f.config["architectures"] = R"(["Gemma4ForCausalLM"])";
  f.config["head_dim"] = "4";
  f.config["global_head_dim"] = "4";
  f.config["hidden_activation"] = R"("gelu_pytorch_tanh")";
  f.config["layer_types"] = R"(["full_attention"])";
  f.config["sliding_window"] = "4";
  f.config["num_kv_shared_layers"] = "0";
  f.config["hidden_size_per_layer_input"] = "0";
  f.config["rope_parameters"] = R"({"full_attention":{"rope_type":"proportional","partial_rotary_factor":0.5,"rope_theta":1000000.0},)"
                                R"("sliding_attention":{"rope_type":"default","rope_theta":10000.0}})";
  f.config["enable_moe_block"] = "true";
  f.config["num_experts"] = "4";
  f.config["top_k_experts"] = "2";
  f.config["moe_intermediate_size"] = "2";
  f.model_extra = R"(,"byte_fallback":true)";
  f.set_vocab_size(5);
  const std::string l = "model.layers.0.";
  for (const char* t : {"self_attn.q_norm.weight", "self_attn.k_norm.weight"}) f.tensors[l + t] = {4};
  for (const char* t : {"pre_feedforward_layernorm.weight", "post_feedforward_layernorm.weight", "pre_feedforward_layernorm_2.weight",
                        "post_feedforward_layernorm_1.weight", "post_feedforward_layernorm_2.weight", "router.scale"}) {
    f.tensors[l + t] = {8};
  }
  f.tensors[l + "router.proj.weight"] = {4, 8};
  f.tensors[l + "router.per_expert_scale"] = {4};
  f.tensors[l + "experts.gate_up_proj"] = {4, 4, 8};  // [E, 2F, D]
  f.tensors[l + "experts.down_proj"] = {4, 8, 2};     // [E, D, F]
}

TEST(HfGemma4, ExpertsBesideTheDenseMlpTakeLlamaCppsNames) {
  Folder f;
  make_gemma4_moe(f);
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "gemma4.expert_count"), MetaValue::u32(4));
  EXPECT_EQ(*find(*p, "gemma4.expert_used_count"), MetaValue::u32(2));
  EXPECT_EQ(*find(*p, "gemma4.expert_feed_forward_length"), MetaValue::u32(2));
  EXPECT_EQ(*find(*p, "gemma4.feed_forward_length"), MetaValue::u32(8));  // the dense MLP's
  const std::vector<std::pair<std::string, std::string>> names = {
      {"ffn_gate_inp.weight", "router.proj.weight"},
      {"ffn_gate_inp.scale", "router.scale"},
      {"ffn_down_exps.scale", "router.per_expert_scale"},   // a tensor of its own: llama.cpp scales each expert's output by it
      {"ffn_gate_up_exps.weight", "experts.gate_up_proj"},  // kept fused: llama.cpp's gemma4 reads it so
      {"ffn_down_exps.weight", "experts.down_proj"},
      {"pre_ffw_norm_2.weight", "pre_feedforward_layernorm_2.weight"},
      {"post_ffw_norm_1.weight", "post_feedforward_layernorm_1.weight"},
      {"post_ffw_norm_2.weight", "post_feedforward_layernorm_2.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},  // the dense MLP stays
  };
  for (const auto& [gguf_name, hf_name] : names) {
    const ConvertTensor* t = planned(*p, "blk.0." + gguf_name);
    ASSERT_NE(t, nullptr) << gguf_name;
    EXPECT_EQ(t->source, "model.layers.0." + hf_name);
    EXPECT_TRUE(t->pieces.empty()) << gguf_name;
  }
  EXPECT_EQ(planned(*p, "blk.0.ffn_gate_inp.weight")->type, TensorType::F32);  // routers F32 at any --type
  EXPECT_FALSE(planned(*p, "blk.0.ffn_gate_up_exps.weight")->type.has_value());
  EXPECT_EQ(planned(*p, "blk.0.ffn_gate_exps.weight"), nullptr);

  make_gemma4_moe(f);
  f.tensors["model.layers.0.experts.gate_up_proj"] = {4, 2, 8};
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "model.safetensors", "shape [4, 2, 8], config.json implies [4, 4, 8]"));
  make_gemma4_moe(f);
  f.tensors.erase("model.layers.0.router.per_expert_scale");
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::TensorNotFound, "model.safetensors",
                          "model.layers.0.router.per_expert_scale is missing (llama.cpp needs blk.0.ffn_down_exps.scale)"));
}

TEST(HfGemma4, ExpertKeysAreMappedOrRefusedByName) {
  const std::string first = "differs from transformers' key: llama.cpp's converter reads it first";
  const std::vector<ConfigCase> cases = {
      {"enable_moe_block", "false", ErrorKind::NotSupported, "`num_experts` is set without enable_moe_block: transformers builds no experts"},
      {"num_experts", "", ErrorKind::InvalidModelFolder, "`num_experts` is missing"},
      {"num_experts", "1025", ErrorKind::InvalidModelFolder, "`num_experts` is 1025, outside [1, 1024]"},
      {"top_k_experts", "", ErrorKind::InvalidModelFolder, "`top_k_experts` is missing"},
      {"top_k_experts", "5", ErrorKind::InvalidModelFolder, "`top_k_experts` is above num_experts"},
      {"moe_intermediate_size", "", ErrorKind::InvalidModelFolder, "`moe_intermediate_size` is missing"},
      {"expert_intermediate_size", "3", ErrorKind::NotSupported, "`expert_intermediate_size` " + first},
      {"num_experts_per_tok", "3", ErrorKind::NotSupported, "`num_experts_per_tok` " + first},
      {"num_experts_per_token", "1", ErrorKind::NotSupported, "`num_experts_per_token` " + first},
      {"num_local_experts", "4", ErrorKind::NotSupported,
       "key `num_local_experts`: Gemma4ForCausalLM counts its experts with another key (the one transformers reads); llama.cpp's converter would "
       "take this one as gemma4.expert_count"},
  };
  expect_config_refusals(cases, make_gemma4_moe);
  Folder f;  // the same value under llama.cpp's name changes nothing
  make_gemma4_moe(f);
  f.config["expert_intermediate_size"] = "2";
  EXPECT_TRUE(IsOk(f.plan()));
}

// ---- Qwen's multi-token-prediction layers (mtp.*) ----------------------------------------------------

// make_qwen35's folder with the MTP block the Hub's Qwen3.5 checkpoints hold, under `prefix`: one
// full-attention layer (as layer 1) and its own fc [hidden, 2 hidden] and three norms.
void add_qwen_mtp(Folder& f, const std::string& prefix = "mtp.") {
  f.tensors[prefix + "fc.weight"] = {8, 16};
  for (const char* norm : {"pre_fc_norm_embedding.weight", "pre_fc_norm_hidden.weight", "norm.weight"}) f.tensors[prefix + norm] = {8};
  for (const auto& [name, shape] : std::map<std::string, std::vector<std::uint64_t>>(f.tensors)) {
    if (name.starts_with("model.layers.1.")) f.tensors[prefix + "layers.0." + name.substr(15)] = shape;
  }
}

TEST(HfNextn, QwenMtpBlockIsRenamedToTheLayerPastTheLast) {
  for (const std::string prefix : {"mtp.", "model.mtp."}) {
    Folder f;
    make_qwen35(f);
    add_qwen_mtp(f, prefix);
    auto p = f.plan();  // no mtp_num_hidden_layers: counted from the weights, as llama.cpp's converter counts
    ASSERT_TRUE(IsOk(p)) << prefix;
    EXPECT_EQ(*find(*p, "qwen35.block_count"), MetaValue::u32(3));
    EXPECT_EQ(*find(*p, "qwen35.nextn_predict_layers"), MetaValue::u32(1));
    const auto no = MetaValue::boolean(false);
    EXPECT_EQ(*find(*p, "qwen35.attention.recurrent_layers"), MetaValue::array(MetaType::BOOL, {MetaValue::boolean(true), no, no}));
    EXPECT_EQ(planned(*p, "blk.2.nextn.eh_proj.weight")->source, prefix + "fc.weight");
    // Every norm + 1, the renamed ones too (llama.cpp's converter adds it after renaming them *norm.weight).
    EXPECT_EQ(planned(*p, "blk.2.nextn.enorm.weight")->source, prefix + "pre_fc_norm_embedding.weight + 1");
    EXPECT_EQ(planned(*p, "blk.2.nextn.hnorm.weight")->source, prefix + "pre_fc_norm_hidden.weight + 1");
    EXPECT_EQ(planned(*p, "blk.2.nextn.shared_head_norm.weight")->source, prefix + "norm.weight + 1");
    EXPECT_EQ(planned(*p, "blk.2.attn_norm.weight")->source, prefix + "layers.0.input_layernorm.weight + 1");
    // A full-attention layer: the gated query, no linear attention.
    EXPECT_EQ(planned(*p, "blk.2.attn_q.weight")->source, prefix + "layers.0.self_attn.q_proj.weight");
    EXPECT_EQ(planned(*p, "blk.2.attn_k_norm.weight")->source, prefix + "layers.0.self_attn.k_norm.weight + 1");
    EXPECT_EQ(planned(*p, "blk.2.ffn_down.weight")->source, prefix + "layers.0.mlp.down_proj.weight");
    EXPECT_EQ(planned(*p, "blk.2.ssm_out.weight"), nullptr);
    EXPECT_EQ(planned(*p, "blk.2.nextn.embed_tokens.weight"), nullptr);
    EXPECT_EQ(p->tensors.size(), 42u);  // 27 without: 11 of the layer, 4 of its own
  }
}

TEST(HfNextn, QwenMtpCountFromConfigAndItsRefusals) {
  Folder f;
  make_qwen35(f);
  f.config["mtp_num_hidden_layers"] = "1";
  {
    // Counted but not held (transformers saves no mtp.*): written without it, with a note (llama.cpp does
    // not load the count without the layer's tensors, which its converter writes by default).
    f.write();
    auto weights = open_tensors(f.path());
    ASSERT_TRUE(IsOk(weights));
    auto conversion = hf::plan(f.path(), **weights, TensorType::F32);
    ASSERT_TRUE(IsOk(conversion));
    EXPECT_EQ(*find(conversion->plan, "qwen35.block_count"), MetaValue::u32(2));
    EXPECT_EQ(find(conversion->plan, "qwen35.nextn_predict_layers"), nullptr);
    EXPECT_EQ(*find(conversion->plan, "qwen35.attention.recurrent_layers"),
              MetaValue::array(MetaType::BOOL, {MetaValue::boolean(true), MetaValue::boolean(false)}));
    ASSERT_EQ(conversion->notes.size(), 1u);
    EXPECT_NE(conversion->notes[0].find("mtp_num_hidden_layers counts 1 multi-token-prediction layer(s) the weights do not hold: written without"),
              std::string::npos);
  }
  add_qwen_mtp(f);
  ASSERT_TRUE(IsOk(f.plan()));
  f.config["mtp_num_hidden_layers"] = "0";  // llama.cpp's converter then counts the weights' layers
  auto p = f.plan();
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(*find(*p, "qwen35.nextn_predict_layers"), MetaValue::u32(1));
  // llama.cpp's graph runs one MTP layer, and its converter gives a second none of its own tensors.
  f.config["mtp_num_hidden_layers"] = "2";
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "config.json",
                          "key `mtp_num_hidden_layers` is 2: llama.cpp's qwen35 runs 1 multi-token-prediction layer"));
  f.config["mtp_num_hidden_layers"] = "600";
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "config.json", "`mtp_num_hidden_layers` is 600, outside [0, 510]"));
  f.config.erase("mtp_num_hidden_layers");
  f.tensors["mtp.layers.1.input_layernorm.weight"] = {8};
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "model.safetensors", "multi-token-prediction layer 1: llama.cpp's qwen35 runs 1"));
  f.tensors.erase("mtp.layers.1.input_layernorm.weight");
  f.tensors["mtp.layers.99999999999.input_layernorm.weight"] = {8};  // no index past 9 digits is read: no name
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "model.safetensors", "no name in llama.cpp's qwen35 architecture"));
  f.tensors.erase("mtp.layers.99999999999.input_layernorm.weight");
  // A layer missing a tensor llama.cpp's loader requires, or with one it has no name for.
  f.tensors.erase("mtp.pre_fc_norm_hidden.weight");
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::TensorNotFound, "model.safetensors",
                          "tensor mtp.pre_fc_norm_hidden.weight is missing (llama.cpp needs blk.2.nextn.hnorm.weight)"));
  f.tensors["mtp.pre_fc_norm_hidden.weight"] = {8};
  f.tensors.erase("mtp.layers.0.self_attn.q_norm.weight");
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::TensorNotFound, "model.safetensors", "tensor mtp.layers.0.self_attn.q_norm.weight is missing"));
  f.tensors["mtp.layers.0.self_attn.q_norm.weight"] = {8};
  f.tensors["mtp.embed_tokens.weight"] = {6, 8};
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::NotSupported, "model.safetensors", "no name in llama.cpp's qwen35 architecture"));
  f.tensors.erase("mtp.embed_tokens.weight");
  f.tensors["mtp.fc.weight"] = {8, 8};
  EXPECT_TRUE(FailsNaming(f.plan(), ErrorKind::InvalidModelFolder, "model.safetensors", "shape [8, 8], config.json implies [8, 16]"));
}

}  // namespace
