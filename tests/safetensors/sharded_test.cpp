// Sharded checkpoints: write_sharded's file names, split and index, the same checkpoint written as a
// format's output (Format::create of safetensors-index), ShardedReader, and the index / shard
// disagreements it must refuse.
#include <gtest/gtest.h>

#include <simdjson.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "safeweights/format.h"
#include "safeweights/metadata.h"
#include "safeweights/safetensors_writer.h"
#include "safeweights/sharded.h"
#include "test_util.h"

namespace {

using namespace swt;
namespace st = safeweights::safetensors;
using K = safeweights::ErrorKind;
using st::MetadataEntries;
using st::ShardedReader;
using st::ShardOptions;
using st::TensorData;

struct Owned {
  std::string name;
  TensorType dtype;
  std::vector<std::uint64_t> shape;
  std::vector<std::byte> bytes;
};
std::vector<TensorData> views(const std::vector<Owned>& v) {
  std::vector<TensorData> out;
  for (const auto& o : v) out.push_back({o.name, o.dtype, o.shape, o.bytes});
  return out;
}
Owned u8(std::string name, std::size_t n, int seed) {
  Owned o{std::move(name), TensorType::U8, {n}, std::vector<std::byte>(n)};
  for (std::size_t i = 0; i < n; ++i) o.bytes[i] = static_cast<std::byte>((seed * 31 + static_cast<int>(i)) & 0xff);
  return o;
}

// Reads the index with an independent JSON parser: total_size and weight_map.
struct Index {
  std::uint64_t total_size = 0;
  std::map<std::string, std::string> weight_map;
};
Index read_index(const std::string& path) {
  Index idx;
  simdjson::dom::parser parser;
  simdjson::padded_string json = simdjson::padded_string(read_file_bytes(path));
  simdjson::dom::element doc;
  EXPECT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << path;
  simdjson::dom::object md;
  EXPECT_EQ(doc["metadata"].get(md), simdjson::SUCCESS);
  std::uint64_t total = 0;
  EXPECT_EQ(md["total_size"].get(total), simdjson::SUCCESS) << "total_size must be a JSON integer";
  idx.total_size = total;
  simdjson::dom::object wm;
  EXPECT_EQ(doc["weight_map"].get(wm), simdjson::SUCCESS);
  for (auto field : wm) {
    std::string_view v;
    EXPECT_EQ(field.value.get(v), simdjson::SUCCESS);
    idx.weight_map[std::string(field.key)] = std::string(v);
  }
  return idx;
}

void check_reads_back(const ShardedReader& r, const std::vector<Owned>& tensors) {
  std::vector<std::string> names;
  for (const auto& t : tensors) names.push_back(t.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(r.names(), names);
  for (const auto& t : tensors) {
    auto loc = r.locate(t.name);
    ASSERT_TRUE(IsOk(loc)) << t.name;
    ASSERT_NE(loc->shard, nullptr);
    ASSERT_NE(loc->info, nullptr);
    EXPECT_EQ(loc->info->name, t.name);
    EXPECT_EQ(loc->info->dtype, t.dtype);
    // The TensorFile's entry is the shard's.
    auto e = r.tensor(t.name);
    ASSERT_TRUE(IsOk(e)) << t.name;
    EXPECT_EQ((*e)->source, &loc->shard->source());
    EXPECT_EQ((*e)->offset, loc->shard->entry(*loc->info).offset);
    std::vector<std::byte> buf((*e)->nbytes);
    ASSERT_TRUE(IsOk((*e)->read(buf)));
    EXPECT_EQ(buf, t.bytes) << t.name;
  }
  EXPECT_EQ(r.tensors().size(), tensors.size());
  auto missing = r.locate("no such tensor");
  ASSERT_TRUE(IsKind(missing, K::TensorNotFound));
  EXPECT_EQ(missing.error().context().file, r.name());  // the index
  EXPECT_TRUE(IsKind(r.tensor("no such tensor"), K::TensorNotFound));
}

TEST(ShardedWrite, GreedySplitIndexAndReadBack) {
  TempDir dir;
  // 24 + 24 = 48 fits a 48-byte limit exactly; the next tensor starts a new shard.
  std::vector<Owned> in = {u8("a", 24, 1), u8("b", 24, 2), u8("c", 24, 3), u8("d", 24, 4), u8("e", 8, 5)};
  auto tv = views(in);
  ShardOptions opt;
  opt.max_shard_bytes = 48;
  auto res = st::write_sharded(dir.path(), tv, opt);
  ASSERT_TRUE(IsOk(res));
  const std::vector<std::string> files = {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"};
  EXPECT_EQ(res->files, files);
  EXPECT_EQ(res->index_file, "model.safetensors.index.json");
  auto listing = files;
  listing.push_back("model.safetensors.index.json");
  std::sort(listing.begin(), listing.end());
  EXPECT_EQ(dir.list(), listing);

  const Index idx = read_index(dir.file("model.safetensors.index.json"));
  EXPECT_EQ(idx.total_size, 104u);
  const std::map<std::string, std::string> expected_map = {{"a", files[0]}, {"b", files[0]}, {"c", files[1]}, {"d", files[1]}, {"e", files[2]}};
  EXPECT_EQ(idx.weight_map, expected_map);

  // Each shard is an ordinary safetensors file with the default shard metadata.
  for (std::size_t i = 0; i < files.size(); ++i) {
    auto r = st::Reader::open(dir.file(files[i]));
    ASSERT_TRUE(IsOk(r)) << files[i];
    EXPECT_EQ(r->header().metadata_value("format"), std::optional<std::string_view>("pt"));
    std::set<std::string> names;
    for (const auto& t : r->header().tensors()) names.insert(std::string(t.name));
    std::set<std::string> expected;
    for (const auto& [t, f] : expected_map)
      if (f == files[i]) expected.insert(t);
    EXPECT_EQ(names, expected) << files[i];
  }

  auto sr = ShardedReader::open(dir.file("model.safetensors.index.json"));
  ASSERT_TRUE(IsOk(sr));
  EXPECT_EQ(sr->shards().size(), 3u);
  EXPECT_EQ(sr->shard_files().size(), 3u);
  EXPECT_EQ(std::set<std::string>(sr->shard_files().begin(), sr->shard_files().end()), std::set<std::string>(files.begin(), files.end()));
  ASSERT_TRUE(sr->index_metadata().count("total_size"));
  EXPECT_EQ(sr->index_metadata().at("total_size"), "104");
  check_reads_back(*sr, in);
  // locate() names the right shard.
  auto loc = sr->locate("c");
  ASSERT_TRUE(IsOk(loc));
  EXPECT_NE(loc->shard->name().find(files[1]), std::string::npos) << loc->shard->name();

  auto pr = ShardedReader::open(dir.file("model.safetensors.index.json"), safeweights::FileBackend::Pread);
  ASSERT_TRUE(IsOk(pr));
  check_reads_back(*pr, in);
}

TEST(ShardedWrite, SingleShardIsPlainFile) {
  TempDir dir;
  std::vector<Owned> in = {u8("a", 10, 1), u8("b", 10, 2)};
  auto tv = views(in);
  auto res = st::write_sharded(dir.path(), tv);
  ASSERT_TRUE(IsOk(res));
  EXPECT_EQ(res->files, std::vector<std::string>{"model.safetensors"});
  EXPECT_TRUE(res->index_file.empty());
  EXPECT_EQ(dir.list(), std::vector<std::string>{"model.safetensors"});
  auto r = st::Reader::open(dir.file("model.safetensors"));
  ASSERT_TRUE(IsOk(r));
  EXPECT_EQ(r->header().tensors().size(), 2u);
}

TEST(ShardedWrite, OversizedTensorGetsItsOwnShard) {
  TempDir dir;
  std::vector<Owned> in = {u8("a", 16, 1), u8("big", 100, 2), u8("c", 16, 3), u8("d", 16, 4), u8("e", 30, 5)};
  auto tv = views(in);
  ShardOptions opt;
  opt.max_shard_bytes = 40;
  opt.prefix = "diffusion_pytorch_model";
  opt.shard_metadata = std::nullopt;
  auto res = st::write_sharded(dir.path(), tv, opt);
  ASSERT_TRUE(IsOk(res));
  ASSERT_GE(res->files.size(), 3u);
  EXPECT_EQ(res->index_file, "diffusion_pytorch_model.safetensors.index.json");
  const std::string n = std::to_string(res->files.size());
  for (std::size_t i = 0; i < res->files.size(); ++i) {
    char expected[96];
    std::snprintf(expected, sizeof expected, "diffusion_pytorch_model-%05zu-of-%05zu.safetensors", i + 1, res->files.size());
    EXPECT_EQ(res->files[i], expected);
    auto r = st::Reader::open(dir.file(res->files[i]));
    ASSERT_TRUE(IsOk(r));
    EXPECT_FALSE(r->header().has_metadata());
    const auto ts = r->header().tensors();
    if (r->header().find("big")) {
      EXPECT_EQ(ts.size(), 1u) << "the oversized tensor shares its shard";
    } else {
      EXPECT_LE(r->header().data_size(), 40u) << res->files[i];
    }
  }
  const Index idx = read_index(dir.file(res->index_file));
  EXPECT_EQ(idx.total_size, 178u);
  EXPECT_EQ(idx.weight_map.size(), 5u);
  auto sr = ShardedReader::open(dir.file(res->index_file));
  ASSERT_TRUE(IsOk(sr));
  check_reads_back(*sr, in);
}

TEST(ShardedWrite, RefusesWhatTheWriterRefuses) {
  TempDir dir;
  std::vector<Owned> in = {u8("a", 4, 1), u8("a", 4, 2)};
  auto tv = views(in);
  ShardOptions opt;
  opt.max_shard_bytes = 4;
  EXPECT_TRUE(IsKind(st::write_sharded(dir.path(), tv, opt), K::DuplicateKey));
  EXPECT_TRUE(dir.list().empty());
}

// ---- hand-made indexes -------------------------------------------------------------------------------

class ShardedRead : public ::testing::Test {
 protected:
  void SetUp() override {
    s1_ = {u8("x", 4, 1), u8("y", 6, 2)};
    s2_ = {u8("z", 8, 3)};
    auto t1 = views(s1_);
    auto t2 = views(s2_);
    ASSERT_TRUE(IsOk(st::write_file(dir_.file(kS1), t1)));
    ASSERT_TRUE(IsOk(st::write_file(dir_.file(kS2), t2)));
  }
  std::string index(const std::string& weight_map_json, const std::string& metadata_json = "{\"total_size\":18}") {
    const std::string path = dir_.file("model.safetensors.index.json");
    write_file_bytes(path, "{\"metadata\":" + metadata_json + ",\"weight_map\":" + weight_map_json + "}");
    return path;
  }
  std::string raw_index(const std::string& text) {
    const std::string path = dir_.file("model.safetensors.index.json");
    write_file_bytes(path, text);
    return path;
  }
  static constexpr const char* kS1 = "model-00001-of-00002.safetensors";
  static constexpr const char* kS2 = "model-00002-of-00002.safetensors";
  const std::string good_map_ = std::string("{\"x\":\"") + kS1 + "\",\"y\":\"" + kS1 + "\",\"z\":\"" + kS2 + "\"}";
  TempDir dir_;
  std::vector<Owned> s1_, s2_;
};

TEST_F(ShardedRead, HandMadeIndexOpens) {
  auto r = ShardedReader::open(index(good_map_, "{\"total_size\":18,\"format\":\"pt\",\"nested\":{\"a\":[1,2]}}"));
  ASSERT_TRUE(IsOk(r));
  auto all = s1_;
  all.insert(all.end(), s2_.begin(), s2_.end());
  check_reads_back(*r, all);
  EXPECT_EQ(r->index_metadata().at("format"), "pt");
  EXPECT_EQ(r->index_metadata().at("total_size"), "18");
  ASSERT_TRUE(r->index_metadata().count("nested"));
  // Non-string values are kept as JSON text; compare without whitespace.
  std::string nested = r->index_metadata().at("nested");
  nested.erase(std::remove_if(nested.begin(), nested.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); }), nested.end());
  EXPECT_EQ(nested, "{\"a\":[1,2]}");
}

TEST_F(ShardedRead, TensorListedButMissingFromShard) {
  const std::string m = std::string("{\"x\":\"") + kS1 + "\",\"y\":\"" + kS1 + "\",\"z\":\"" + kS2 + "\",\"w\":\"" + kS1 + "\"}";
  EXPECT_TRUE(IsKind(ShardedReader::open(index(m)), K::ShardMismatch));
}

TEST_F(ShardedRead, TensorInShardButNotListed) {
  const std::string m = std::string("{\"x\":\"") + kS1 + "\",\"z\":\"" + kS2 + "\"}";
  EXPECT_TRUE(IsKind(ShardedReader::open(index(m)), K::ShardMismatch));
}

TEST_F(ShardedRead, TensorListedForTheWrongShard) {
  const std::string m = std::string("{\"x\":\"") + kS1 + "\",\"y\":\"" + kS2 + "\",\"z\":\"" + kS2 + "\"}";
  EXPECT_TRUE(IsKind(ShardedReader::open(index(m)), K::ShardMismatch));
}

TEST_F(ShardedRead, ShardNameMustBeAPlainFileName) {
  // Put a real copy one level up and in a subfolder so that only the name rule can refuse these.
  fs::create_directory(dir_.file("sub"));
  fs::copy_file(dir_.file(kS2), dir_.file(std::string("sub/") + kS2));
  for (const std::string& bad : {std::string("../") + fs::path(dir_.path()).filename().string() + "/" + kS2, std::string("sub/") + kS2,
                                 dir_.file(kS2), std::string("./") + kS2, std::string(".."), std::string(""), std::string(".")}) {
    const std::string m = std::string("{\"x\":\"") + kS1 + "\",\"y\":\"" + kS1 + "\",\"z\":\"" + bad + "\"}";
    EXPECT_TRUE(IsKind(ShardedReader::open(index(m)), K::InvalidIndex)) << "shard name '" << bad << "'";
  }
}

TEST_F(ShardedRead, MalformedIndex) {
  for (const std::string& text :
       {std::string(""), std::string("{"), std::string("[]"), std::string("null"), std::string("{}"), std::string("{\"metadata\":{}}"),
        std::string("{\"weight_map\":[]}"), std::string("{\"weight_map\":\"x\"}"), std::string("{\"weight_map\":{\"x\":1}}"),
        std::string("{\"weight_map\":{\"x\":null}}"), std::string("{\"weight_map\":{\"x\":\"") + kS1 + "\"},}",
        std::string("{\"weight_map\":{}} trailing"), std::string("\xff\xfe{}")}) {
    EXPECT_TRUE(IsKind(ShardedReader::open(raw_index(text)), K::InvalidIndex)) << "index: " << hexdump(text);
  }
}

TEST_F(ShardedRead, MissingShardFile) {
  const std::string m = std::string("{\"x\":\"") + kS1 + "\",\"y\":\"" + kS1 + "\",\"z\":\"model-00003-of-00002.safetensors\"}";
  auto r = ShardedReader::open(index(m));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().kind(), K::FileNotFound) << describe(r.error());
  EXPECT_NE(r.error().context().file.find("model-00003-of-00002.safetensors"), std::string::npos) << describe(r.error());
}

TEST_F(ShardedRead, CorruptShardReportsItsOwnKind) {
  std::string bytes = read_file_bytes(dir_.file(kS2));
  bytes.push_back('\0');
  write_file_bytes(dir_.file(kS2), bytes);
  auto r = ShardedReader::open(index(good_map_));
  ASSERT_TRUE(IsKind(r, K::MetadataIncompleteBuffer));
  EXPECT_NE(r.error().context().file.find(kS2), std::string::npos) << describe(r.error());
}

TEST_F(ShardedRead, MissingIndexFile) { EXPECT_TRUE(IsKind(ShardedReader::open(dir_.file("nope.safetensors.index.json")), K::FileNotFound)); }

// ---- the sharded checkpoint as an output format (Format::create) -----------------------------------

namespace sw = safeweights;

// Every file in the folder, name -> bytes.
std::map<std::string, std::string> contents(const TempDir& dir) {
  std::map<std::string, std::string> out;
  for (const std::string& name : dir.list()) out[name] = read_file_bytes(dir.file(name));
  return out;
}

// Declares `in` to the index format's sink for `path` and writes every tensor; the sink, unfinished.
std::unique_ptr<sw::TensorSink> sharded_sink(const std::string& path, const std::vector<Owned>& in, const sw::Metadata* metadata,
                                             const sw::WriteOptions& options) {
  auto format = sw::output_format(path);
  EXPECT_TRUE(IsOk(format));
  if (!format.is_ok()) return nullptr;
  EXPECT_EQ((*format)->name(), "safetensors-index");
  std::vector<sw::TensorDecl> decls;
  for (const Owned& o : in) decls.push_back({o.name, o.dtype, o.shape});
  auto sink = (*format)->create(path, decls, metadata, options);
  EXPECT_TRUE(IsOk(sink)) << sink.status().error().to_string();
  if (!sink.is_ok()) return nullptr;
  for (const Owned& o : in) EXPECT_TRUE(IsOk((*sink)->write(o.name, o.bytes))) << o.name;
  return std::move(sink).value();
}

TEST(ShardedSink, WritesTheBytesWriteShardedWrites) {
  TempDir a, b;
  std::vector<Owned> in = {u8("a", 24, 1), u8("b", 24, 2), u8("c", 24, 3), u8("d", 24, 4), u8("e", 8, 5)};
  // The index's own sizes are computed anew; the other strings go to every shard beside "format".
  const sw::Metadata md = sw::Metadata::from_string_map({{"k", "v"}, {"total_size", "1"}});
  sw::WriteOptions options;
  options.split.max_bytes = 48;
  auto sink = sharded_sink(a.file("model.safetensors.index.json"), in, &md, options);
  ASSERT_NE(sink, nullptr);
  ASSERT_TRUE(IsOk(sink->finish()));
  const std::vector<std::string> files = {a.file("model-00001-of-00003.safetensors"), a.file("model-00002-of-00003.safetensors"),
                                          a.file("model-00003-of-00003.safetensors"), a.file("model.safetensors.index.json")};
  EXPECT_EQ(std::vector<std::string>(sink->files().begin(), sink->files().end()), files);

  ShardOptions opt;
  opt.max_shard_bytes = 48;
  opt.shard_metadata = MetadataEntries{{"format", "pt"}, {"k", "v"}};
  ASSERT_TRUE(IsOk(st::write_sharded(b.path(), views(in), opt)));
  EXPECT_EQ(contents(a), contents(b));
  EXPECT_EQ(read_index(files.back()).total_size, 104u);
}

TEST(ShardedSink, OneShardKeepsItsIndexAndTensorCountsCutToo) {
  TempDir dir;
  std::vector<Owned> in = {u8("a", 4, 1), u8("b", 4, 2), u8("c", 4, 3)};
  auto one = sharded_sink(dir.file("m.safetensors.index.json"), in, nullptr, {});  // no limit: transformers' 5 GB
  ASSERT_NE(one, nullptr);
  ASSERT_TRUE(IsOk(one->finish()));
  EXPECT_EQ(dir.list(), (std::vector<std::string>{"m-00001-of-00001.safetensors", "m.safetensors.index.json"}));
  auto r = ShardedReader::open(dir.file("m.safetensors.index.json"));
  ASSERT_TRUE(IsOk(r));
  check_reads_back(*r, in);
  EXPECT_EQ(r->shards()[0].header().metadata_value("format"), std::optional<std::string_view>("pt"));

  TempDir cut;
  sw::WriteOptions options;
  options.split.max_tensors = 2;
  auto two = sharded_sink(cut.file("m.safetensors.index.json"), in, nullptr, options);
  ASSERT_NE(two, nullptr);
  ASSERT_TRUE(IsOk(two->finish()));
  const Index idx = read_index(cut.file("m.safetensors.index.json"));
  EXPECT_EQ(idx.weight_map,
            (std::map<std::string, std::string>{
                {"a", "m-00001-of-00002.safetensors"}, {"b", "m-00001-of-00002.safetensors"}, {"c", "m-00002-of-00002.safetensors"}}));
}

TEST(ShardedSink, NothingIsLeftUnlessEveryFileIsCommitted) {
  std::vector<Owned> in = {u8("a", 24, 1), u8("b", 24, 2), u8("c", 24, 3)};
  sw::WriteOptions options;
  options.split.max_bytes = 24;
  {  // abandoned
    TempDir dir;
    ASSERT_NE(sharded_sink(dir.file("model.safetensors.index.json"), in, nullptr, options), nullptr);
    EXPECT_TRUE(dir.list().empty());
  }
  {  // a tensor missing at finish
    TempDir dir;
    std::vector<sw::TensorDecl> decls;
    for (const Owned& o : in) decls.push_back({o.name, o.dtype, o.shape});
    auto sink = sw::find_format("safetensors-index")->create(dir.file("model.safetensors.index.json"), decls, nullptr, options);
    ASSERT_TRUE(IsOk(sink));
    ASSERT_TRUE(IsOk((*sink)->write("a", in[0].bytes)));
    ASSERT_TRUE(IsOk((*sink)->write("c", in[2].bytes)));
    const sw::Status s = (*sink)->finish();
    ASSERT_TRUE(IsKind(s, K::InvalidArgument));
    EXPECT_EQ(s.error().context().tensor, "b");
    EXPECT_TRUE(dir.list().empty());
  }
  {  // the index cannot take its name (a folder holds it): the shards committed before it are removed again
    TempDir dir;
    ASSERT_EQ(::mkdir(dir.file("model.safetensors.index.json").c_str(), 0755), 0);
    auto sink = sharded_sink(dir.file("model.safetensors.index.json"), in, nullptr, options);
    ASSERT_NE(sink, nullptr);
    EXPECT_FALSE(sink->finish().is_ok());
    EXPECT_EQ(dir.list(), std::vector<std::string>{"model.safetensors.index.json"});
  }
}

TEST(ShardedSink, RefusesNamesItCannotPlace) {
  TempDir dir;
  const sw::Format& index = *sw::find_format("safetensors-index");
  const std::vector<sw::TensorDecl> decls = {{"a", TensorType::U8, {1}}, {"a", TensorType::U8, {1}}};
  EXPECT_TRUE(IsKind(index.create(dir.file("model.safetensors.index.json"), decls, nullptr, {}).status(), K::DuplicateKey));
  EXPECT_TRUE(IsKind(index.create(dir.file(".safetensors.index.json"), {}, nullptr, {}).status(), K::InvalidArgument));
  EXPECT_TRUE(IsKind(index.create(dir.file("model.json"), {}, nullptr, {}).status(), K::InvalidArgument));
  EXPECT_TRUE(dir.list().empty());
}

}  // namespace
