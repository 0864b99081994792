// GGUF: the malformed-file corpus (one file per reader rule, expected kind in its name), writer round
// trips, the registry's inspect shape, and header-only reads through an unmapped source. Expected
// values are written down here or come from the corpus generator, never from the reader itself.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <simdjson.h>

#include "../test_util.h"
#include "safeweights/format.h"
#include "safeweights/gguf.h"

using namespace safeweights;
using gguf::KeyValue;
using gguf::Value;
using gguf::ValueType;
namespace fs = std::filesystem;

namespace {

std::vector<std::byte> pattern(std::size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 31 + static_cast<std::size_t>(seed)) & 0xFF);
  return v;
}

std::vector<KeyValue> all_value_types() {
  std::vector<Value> tokens;
  for (int i = 0; i < 1000; ++i) tokens.push_back(Value::string("tok" + std::to_string(i)));
  return {
      {"general.architecture", Value::string("llama")},
      {"t.u8", Value::u8(255)},
      {"t.i8", Value::i8(-128)},
      {"t.u16", Value::u16(65535)},
      {"t.i16", Value::i16(-32768)},
      {"t.u32", Value::u32(4294967295u)},
      {"t.i32", Value::i32(INT32_MIN)},
      {"t.f32", Value::f32(0.1f)},
      {"t.bool", Value::boolean(true)},
      {"t.str", Value::string("esc\x1b[31m\n")},
      {"t.u64", Value::u64(UINT64_MAX)},
      {"t.i64", Value::i64(INT64_MIN)},
      {"t.f64", Value::f64(1e-300)},
      {"t.arr_i32", Value::array(ValueType::INT32, {Value::i32(1), Value::i32(-2)})},
      {"tokenizer.ggml.tokens", Value::array(ValueType::STRING, std::move(tokens))},
      {"t.arr_empty", Value::array(ValueType::FLOAT32, {})},
  };
}

std::vector<TensorDecl> some_tensors() {
  return {
      {"token_embd.weight", TensorType::F32, {3, 4}},
      {"norm", TensorType::F16, {5}},
      {"bf", TensorType::BF16, {2, 2}},
      {"q8", TensorType::Q8_0, {2, 64}},
      {"q4k", TensorType::Q4_K, {1, 256}},
      {"i8", TensorType::I8, {7}},
      {"empty", TensorType::F32, {0, 3}},
      {"scalar", TensorType::F32, {}},
  };
}

Status write_file(const std::string& path, std::vector<KeyValue> kv, const std::vector<TensorDecl>& decls,
                  gguf::WriterOptions options = {}) {
  auto w = gguf::Writer::create(path, std::move(kv), decls, options);
  if (!w.is_ok()) return w.status();
  for (std::size_t i = decls.size(); i-- > 0;) {  // any order
    auto n = tensor_nbytes(decls[i].dtype, decls[i].shape);
    if (Status s = (*w)->write(decls[i].name, pattern(static_cast<std::size_t>(*n), static_cast<int>(i))); !s.is_ok()) return s;
  }
  return (*w)->finish();
}

ErrorKind expected_kind(const std::string& file) {
  const std::string kind = file.substr(0, file.find("--"));
  return *error_kind_from_name(kind);
}

}  // namespace

TEST(Corpus, EveryFileGivesTheKindInItsName) {
  int files = 0;
  for (const auto& e : fs::directory_iterator(GGUF_CORPUS_DIR)) {
    const std::string name = e.path().filename().string();
    ++files;
    for (FileBackend backend : {FileBackend::Mmap, FileBackend::Pread}) {
      gguf::OpenOptions options;
      options.backend = backend;
      auto f = gguf::open(e.path().string(), options);
      if (name.rfind("valid--", 0) == 0) {
        EXPECT_TRUE(f.is_ok()) << name << ": " << f.error().to_string();
        continue;
      }
      ASSERT_FALSE(f.is_ok()) << name;
      EXPECT_EQ(f.error().kind(), expected_kind(name)) << name << ": " << f.error().to_string();
      EXPECT_EQ(f.error().context().file, e.path().string()) << name;
      EXPECT_TRUE(f.error().context().offset.has_value()) << name << ": " << f.error().to_string();
    }
  }
  EXPECT_GE(files, 40);
}

TEST(Corpus, ErrorsNameTheRuleAndPlace) {
  const std::string dir = GGUF_CORPUS_DIR;
  auto dup = gguf::open(dir + "/InvalidGguf--duplicate-tensor-name.gguf");
  EXPECT_EQ(dup.error().context().tensor, "w");
  EXPECT_NE(dup.error().message().find("duplicate tensor name"), std::string::npos);
  auto key = gguf::open(dir + "/InvalidGguf--duplicate-key.gguf");
  EXPECT_NE(key.error().message().find("duplicate key `general.name`"), std::string::npos);
  auto removed = gguf::open(dir + "/InvalidGguf--removed-type-q4_2.gguf");
  EXPECT_NE(removed.error().message().find("Q4_2"), std::string::npos) << removed.error().to_string();
  auto be = gguf::open(dir + "/NotSupported--big-endian-version.gguf");
  EXPECT_NE(be.error().message().find("big-endian"), std::string::npos);
  auto gap = gguf::open(dir + "/InvalidGguf--offset-gap.gguf");
  EXPECT_NE(gap.error().message().find("expected 64"), std::string::npos) << gap.error().to_string();
}

TEST(Corpus, ValidFilesReadAsGenerated) {
  auto f = gguf::open(std::string(GGUF_CORPUS_DIR) + "/valid--v2.gguf");
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ((*f)->version(), 2u);
  ASSERT_EQ((*f)->tensors().size(), 2u);
  const TensorEntry& q = (*f)->tensors()[1];
  EXPECT_EQ(q.name, "blk.0.attn_q.weight");
  EXPECT_EQ(q.type, TensorType::Q8_0);
  EXPECT_EQ(std::vector<std::uint64_t>(q.shape.begin(), q.shape.end()), (std::vector<std::uint64_t>{2, 32}));
  EXPECT_EQ(q.nbytes, 68u);
  EXPECT_EQ((*f)->infos()[1].offset, 64u);  // 48 bytes of F32, padded to 64
  auto a = gguf::open(std::string(GGUF_CORPUS_DIR) + "/valid--alignment-64.gguf");
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ((*a)->alignment(), 64u);
  EXPECT_EQ((*a)->data_offset() % 64, 0u);
}

TEST(Writer, RoundTripsEveryValueTypeAndTensorType) {
  swt::TempDir dir;
  const auto decls = some_tensors();
  ASSERT_TRUE(write_file(dir.file("m.gguf"), all_value_types(), decls).is_ok());
  auto f = gguf::open(dir.file("m.gguf"));
  ASSERT_TRUE(f.is_ok()) << f.error().to_string();
  EXPECT_EQ((*f)->version(), 3u);
  const auto kv = all_value_types();
  ASSERT_EQ((*f)->kv().size(), kv.size());
  for (std::size_t i = 0; i < kv.size(); ++i) EXPECT_EQ((*f)->kv()[i], kv[i]) << kv[i].key;
  ASSERT_EQ((*f)->tensors().size(), decls.size());
  std::uint64_t expected_offset = 0;
  for (std::size_t i = 0; i < decls.size(); ++i) {
    const TensorEntry& t = (*f)->tensors()[i];
    EXPECT_EQ(t.name, decls[i].name);
    EXPECT_EQ(t.type, decls[i].dtype);
    EXPECT_EQ(std::vector<std::uint64_t>(t.shape.begin(), t.shape.end()), decls[i].shape);
    EXPECT_EQ((*f)->infos()[i].offset, expected_offset);
    const auto want = pattern(static_cast<std::size_t>(t.nbytes), static_cast<int>(i));
    auto view = TensorFile::view(t);
    ASSERT_EQ(view.size(), want.size());
    EXPECT_TRUE(want.empty() || std::memcmp(view.data(), want.data(), want.size()) == 0) << t.name;
    expected_offset += (t.nbytes + 31) / 32 * 32;
  }
  EXPECT_EQ(fs::file_size(dir.file("m.gguf")), (*f)->data_offset() + expected_offset);  // the last tensor padded too
}

TEST(Writer, BytesAreDeterministicAndAlignmentIsWrittenFirst) {
  swt::TempDir dir;
  gguf::WriterOptions options;
  options.alignment = 64;
  ASSERT_TRUE(write_file(dir.file("a.gguf"), all_value_types(), some_tensors(), options).is_ok());
  ASSERT_TRUE(write_file(dir.file("b.gguf"), all_value_types(), some_tensors(), options).is_ok());
  EXPECT_EQ(swt::read_file_bytes(dir.file("a.gguf")), swt::read_file_bytes(dir.file("b.gguf")));
  auto f = gguf::open(dir.file("a.gguf"));
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ((*f)->kv()[0].key, "general.alignment");
  EXPECT_EQ((*f)->kv()[0].value, Value::u32(64));
}

TEST(Writer, RefusesWhatGgufCannotHoldAndLeavesNothing) {
  swt::TempDir dir;
  const std::string out = dir.file("x.gguf");
  const auto refused = [&](std::vector<KeyValue> kv, std::vector<TensorDecl> decls, gguf::WriterOptions o = {}) {
    return gguf::Writer::create(out, std::move(kv), std::move(decls), o).status();
  };
  EXPECT_TRUE(swt::IsKind(refused({}, {{"u", TensorType::U32, {2}}}), ErrorKind::InvalidArgument));
  EXPECT_TRUE(swt::IsKind(refused({}, {{"w", TensorType::F32, {2}}, {"w", TensorType::F32, {2}}}), ErrorKind::InvalidArgument));
  EXPECT_TRUE(swt::IsKind(refused({}, {{std::string(64, 'n'), TensorType::F32, {2}}}), ErrorKind::InvalidArgument));
  EXPECT_TRUE(swt::IsKind(refused({}, {{"w", TensorType::F32, {1, 1, 1, 1, 1}}}), ErrorKind::InvalidArgument));
  EXPECT_TRUE(swt::IsKind(refused({}, {{"w", TensorType::Q8_0, {2, 16}}}), ErrorKind::InvalidBlockShape));
  EXPECT_TRUE(swt::IsKind(refused({{"a", Value::u8(1)}, {"a", Value::u8(2)}}, {}), ErrorKind::InvalidArgument));
  EXPECT_TRUE(swt::IsKind(refused({{"a", Value::array(ValueType::UINT8, {Value::u16(1)})}}, {}), ErrorKind::InvalidArgument));
  EXPECT_TRUE(swt::IsKind(refused({{"a", Value::array(ValueType::ARRAY, {})}}, {}), ErrorKind::InvalidArgument));
  EXPECT_TRUE(swt::IsKind(refused({{"general.alignment", Value::u32(64)}}, {}), ErrorKind::InvalidArgument));
  gguf::WriterOptions odd;
  odd.alignment = 48;
  EXPECT_TRUE(swt::IsKind(refused({}, {}, odd), ErrorKind::InvalidArgument));
  {
    auto w = gguf::Writer::create(out, {}, {{"w", TensorType::F32, {4}}});
    ASSERT_TRUE(w.is_ok());
    EXPECT_TRUE(swt::IsKind((*w)->write("w", pattern(15, 0)), ErrorKind::InvalidArgument));
    EXPECT_TRUE(swt::IsKind((*w)->write("nope", pattern(16, 0)), ErrorKind::InvalidArgument));
    ASSERT_TRUE((*w)->write_chunk("w", pattern(8, 0)).is_ok());
    EXPECT_TRUE(swt::IsKind((*w)->write_chunk("w", pattern(9, 0)), ErrorKind::InvalidArgument));
    EXPECT_TRUE(swt::IsKind((*w)->finish(), ErrorKind::InvalidArgument));  // 8 of 16 bytes
  }
  EXPECT_TRUE(dir.list().empty());
}

TEST(Writer, ChunksAndCopyTensorsReproduceAFile) {
  swt::TempDir dir;
  ASSERT_TRUE(write_file(dir.file("a.gguf"), all_value_types(), some_tensors()).is_ok());
  auto in = gguf::open(dir.file("a.gguf"));
  ASSERT_TRUE(in.is_ok());
  std::vector<TensorDecl> decls;
  for (const TensorEntry& t : (*in)->tensors()) decls.push_back({std::string(t.name), t.type, {t.shape.begin(), t.shape.end()}});
  auto w = gguf::Writer::create(dir.file("b.gguf"), {(*in)->kv().begin(), (*in)->kv().end()}, decls);
  ASSERT_TRUE(w.is_ok());
  ASSERT_TRUE(copy_tensors(**in, **w).is_ok());  // finishes the sink
  EXPECT_EQ(swt::read_file_bytes(dir.file("a.gguf")), swt::read_file_bytes(dir.file("b.gguf")));
}

// A source that is never mapped and remembers the furthest byte read.
class CountingSource final : public ByteSource {
 public:
  explicit CountingSource(SourcePtr inner) : inner_(std::move(inner)) {}
  const std::string& name() const noexcept override { return inner_->name(); }
  std::uint64_t size() const noexcept override { return inner_->size(); }
  Status read_at(std::uint64_t offset, std::span<std::byte> dst) const override {
    std::uint64_t end = offset + dst.size(), seen = furthest.load();
    while (end > seen && !furthest.compare_exchange_weak(seen, end)) {
    }
    return inner_->read_at(offset, dst);
  }
  mutable std::atomic<std::uint64_t> furthest{0};

 private:
  SourcePtr inner_;
};

TEST(Reader, ReadsOnlyTheHeaderFromAnUnmappedSource) {
  swt::TempDir dir;
  ASSERT_TRUE(write_file(dir.file("big.gguf"), {{"a", Value::u8(1)}}, {{"w", TensorType::F32, {1024, 1024}}}).is_ok());
  auto file = open_file(dir.file("big.gguf"), FileBackend::Pread);
  ASSERT_TRUE(file.is_ok());
  auto counting = std::make_shared<CountingSource>(*file);
  auto f = gguf::open(counting);
  ASSERT_TRUE(f.is_ok()) << f.error().to_string();
  EXPECT_LE(counting->furthest.load(), 64u * 1024);
  EXPECT_EQ((*f)->tensors()[0].nbytes, 4u << 20);
  EXPECT_EQ(TensorFile::view((*f)->tensors()[0]).data(), nullptr);  // not mapped: read() copies instead
  std::vector<std::byte> got(4u << 20);
  ASSERT_TRUE(TensorFile::read((*f)->tensors()[0], got).is_ok());
  EXPECT_EQ(got, pattern(got.size(), 0));
}

TEST(Reader, TwentyThousandTensorsWithADuplicateAtTheEnd) {
  swt::TempDir dir;
  std::vector<TensorDecl> decls;
  for (int i = 0; i < 20000; ++i) decls.push_back({"blk." + std::to_string(i) + ".w", TensorType::F32, {2}});
  ASSERT_TRUE(write_file(dir.file("ok.gguf"), {}, decls).is_ok());
  auto ok = gguf::open(dir.file("ok.gguf"));
  ASSERT_TRUE(ok.is_ok());
  EXPECT_NE((*ok)->find("blk.19999.w"), nullptr);
  EXPECT_EQ((*ok)->find("blk.20000.w"), nullptr);
  // Rename the last tensor in place (a name of the same length) to the name of tensor 10000.
  std::string dup = swt::read_file_bytes(dir.file("ok.gguf"));
  const std::size_t at = dup.rfind("blk.19999.w");
  ASSERT_NE(at, std::string::npos);
  dup.replace(at, 11, "blk.10000.w");
  swt::write_file_bytes(dir.file("dup.gguf"), dup);
  auto f = gguf::open(dir.file("dup.gguf"));
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.error().kind(), ErrorKind::InvalidGguf);
  EXPECT_EQ(f.error().context().tensor, "blk.10000.w");
}

TEST(Registry, InspectJsonHasTheDocumentedShape) {
  swt::TempDir dir;
  ASSERT_TRUE(write_file(dir.file("m.gguf"), all_value_types(), some_tensors()).is_ok());
  auto format = detect_format(dir.file("m.gguf"));
  ASSERT_TRUE(format.is_ok());
  EXPECT_EQ((*format)->name(), "gguf");
  auto text = (*format)->inspect(dir.file("m.gguf"), {}, {}, true);
  ASSERT_TRUE(text.is_ok());
  // Exact integers at the extremes and the shortest float forms, as text.
  for (const char* part : {"\"key\":\"t.u64\",\"type\":\"UINT64\",\"value\":18446744073709551615",
                           "\"key\":\"t.i64\",\"type\":\"INT64\",\"value\":-9223372036854775808",
                           "\"key\":\"t.f32\",\"type\":\"FLOAT32\",\"value\":0.1", "\"value\":1e-300",
                           "{\"key\":\"t.arr_i32\",\"type\":\"ARRAY\",\"elem_type\":\"INT32\",\"value\":[1,-2]}",
                           "{\"name\":\"q8\",\"type\":\"Q8_0\",\"ne\":[64,2],\"shape\":[2,64],\"offset\":128,\"nbytes\":136}"})
    EXPECT_NE(text->find(part), std::string::npos) << part;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(*text).get(doc), simdjson::SUCCESS);
  EXPECT_EQ(std::string_view(doc["format"]), "gguf");
  EXPECT_EQ(std::uint64_t(doc["version"]), 3u);
  EXPECT_EQ(std::uint64_t(doc["alignment"]), 32u);
  EXPECT_EQ(simdjson::dom::array(doc["kv"]).size(), all_value_types().size());
  EXPECT_EQ(std::string_view(doc["kv"].at(0)["key"]), "general.architecture");
  EXPECT_EQ(simdjson::dom::array(doc["tensors"]).size(), some_tensors().size());
  auto summary = (*format)->validate(dir.file("m.gguf"), {});
  ASSERT_TRUE(summary.is_ok());
  EXPECT_EQ(summary->substr(0, 10), "8 tensors,");
}

TEST(Registry, HumanInspectAbbreviatesArraysAndEscapesControls) {
  swt::TempDir dir;
  ASSERT_TRUE(write_file(dir.file("m.gguf"), all_value_types(), some_tensors()).is_ok());
  auto text = find_format("gguf")->inspect(dir.file("m.gguf"), {}, {}, false);
  ASSERT_TRUE(text.is_ok());
  EXPECT_NE(text->find("STRING[1000] [\"tok0\", \"tok1\""), std::string::npos) << *text;
  EXPECT_NE(text->find("... 992 more]"), std::string::npos);
  EXPECT_EQ(text->find('\x1b'), std::string::npos);
  EXPECT_NE(text->find("esc\\x1b[31m\\x0a"), std::string::npos) << *text;
}

TEST(Registry, CatGivesTheStoredBytes) {
  swt::TempDir dir;
  ASSERT_TRUE(write_file(dir.file("m.gguf"), {}, some_tensors()).is_ok());
  auto target = find_format("gguf")->locate(dir.file("m.gguf"), std::vector<std::string>{"q8"}, {});
  ASSERT_TRUE(target.is_ok()) << target.error().to_string();
  EXPECT_EQ(target->length, 136u);
  std::vector<std::byte> got(136);
  ASSERT_TRUE(target->source->read_at(target->offset, got).is_ok());
  EXPECT_EQ(got, pattern(136, 3));
}
