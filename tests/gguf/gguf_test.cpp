// GGUF: the malformed-file corpus (one file per reader rule, expected kind in its name), writer round
// trips, the registry's inspect shape, and header-only reads through an unmapped source. Expected
// values are written down here or come from the corpus generator, never from the reader itself.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
#include <filesystem>
#include <simdjson.h>
#include <sys/resource.h>

#include "count_allocations.h"
#include "test_util.h"
#include "safeweights/convert.h"
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

Status write_file(const std::string& path, std::vector<KeyValue> kv, const std::vector<TensorDecl>& decls, WriteOptions options = {}) {
  auto w = gguf::create(path, std::move(kv), decls, options);
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

// The rule (ErrorRule's code) an InvalidGguf corpus file breaks, from its name: the first entry whose
// text the name contains.
std::string expected_rule(const std::string& name) {
  static const std::vector<std::pair<std::string_view, std::string_view>> kByName = {
      // Declared counts checked against the bytes left before anything is read or allocated.
      {"-count-past-end", "gguf.count"},
      {"--array-past-end", "gguf.count"},
      {"--string-array-past-end", "gguf.count"},
      {"--truncated-tensor-info", "gguf.count"},
      // A length beyond ggml's limit is refused before the file's end is looked at.
      {"--key-past-end", "gguf.length"},
      {"-over-", "gguf.length"},
      // Tensor data are checked where ggml puts them: past the end is a misplaced tensor.
      {"--tensor-data-past-end", "gguf.tensor-offset"},
      {"--split-other-file-truncated", "gguf.tensor-offset"},
      {"-truncated", "gguf.truncated"},
      {"-past-end", "gguf.truncated"},
      {"--split-", "gguf.split"},
      {"--alignment-", "gguf.alignment"},
      {"--bad-magic", "gguf.magic"},
      {"--version-", "gguf.version"},
      {"--bool-", "gguf.bool"},
      {"-key", "gguf.key"},
      {"--duplicate-tensor", "gguf.tensor-name"},
      {"--tensor-name-not-utf8", "gguf.tensor-name"},
      {"-dimension", "gguf.dimensions"},
      {"--nested-array", "gguf.value-type"},
      {"-type-id", "gguf.tensor-type"},
      {"--removed-type", "gguf.tensor-type"},
      {"--unknown-", "gguf.value-type"},
      {"--offset", "gguf.tensor-offset"},
  };

  for (const auto& [part, rule] : kByName)
    if (name.find(part) != std::string::npos) return std::string(rule);
  return "?";
}

}  // namespace

TEST(Corpus, EveryFileGivesTheKindInItsName) {
  int files = 0;
  for (const auto& e : fs::directory_iterator(GGUF_CORPUS_DIR)) {
    const std::string name = e.path().filename().string();
    if (name.find("--split-") != std::string::npos) continue;  // sets of files: Corpus.EverySplitSetGivesTheKindInItsName
    ++files;
    for (FileBackend backend : {FileBackend::Mmap, FileBackend::Pread}) {
      FormatOptions options;
      options.backend = backend;
      auto f = gguf::open(e.path().string(), options);
      if (name.rfind("valid--", 0) == 0) {
        EXPECT_TRUE(f.is_ok()) << name << ": " << f.error().to_string();
        continue;
      }
      ASSERT_FALSE(f.is_ok()) << name;
      EXPECT_EQ(f.error().kind(), expected_kind(name)) << name << ": " << f.error().to_string();
      if (f.error().kind() == ErrorKind::InvalidGguf) {  // every InvalidGguf error says which rule it broke
        EXPECT_EQ(error_rule_code(f.error().rule()), expected_rule(name)) << name << ": " << f.error().to_string();
      }
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

// ggml's element count (ne multiplied from ne[0]), its names (a tensor name or a key ends at its first
// NUL) and gguf-py's UTF-8: each refusal word for word, as docs/GGUF.md quotes them.
TEST(Corpus, GgmlCountAndNameRulesGiveTheseMessages) {
  struct Case {
    const char* file;
    const char* message;
    const char* tensor;
  };
  const Case cases[] = {
      {"ValidationOverflow--empty-tensor-huge-dims-before-the-zero",
       "the element count of ne = [4611686018427387904, 4611686018427387904, 0] passes 2^63 - 1 at ne[1] (ggml multiplies ne[0], ne[1], ... "
       "in turn and refuses it there, even when a later dimension is 0)",
       "w"},
      {"ValidationOverflow--empty-tensor-overflow-at-ne2",
       "the element count of ne = [2097152, 2097152, 2097152, 0] passes 2^63 - 1 at ne[2] (ggml multiplies ne[0], ne[1], ... in turn and "
       "refuses it there, even when a later dimension is 0)",
       "w"},
      {"ValidationOverflow--count-just-above-int64-max",
       "the element count of ne = [2, 4611686018427387904, 0] passes 2^63 - 1 at ne[1] (ggml multiplies ne[0], ne[1], ... in turn and "
       "refuses it there, even when a later dimension is 0)",
       "w"},
      {"InvalidBlockShape--empty-q8_0-innermost-not-multiple-of-32", "Q8_0 stores blocks of 32 elements along the innermost dimension, which is 16",
       "w"},
      {"InvalidGguf--duplicate-tensor-name-after-nul", "duplicate tensor name (`w\\x00b` is `w` to ggml, which ends a name at its first NUL)", "w"},
      {"InvalidGguf--duplicate-tensor-name-nul-and-plain", "duplicate tensor name (`w\\x00b` is `w` to ggml, which ends a name at its first NUL)",
       "w"},
      {"InvalidGguf--duplicate-key-after-nul", "duplicate key `a.k` (`a.k\\x00y` is `a.k` to ggml, which ends a key at its first NUL)", ""},
      {"InvalidGguf--empty-key-after-nul", "key `\\x00a.k` is empty to ggml, which ends a key at its first NUL", ""},
      {"InvalidGguf--alignment-key-with-nul-not-power-of-two", "general.alignment is 48, not a power of two", ""},
      {"InvalidGguf--tensor-name-not-utf8", "tensor 1: the name `blk.0.attn_q.weight\\xff` is not valid UTF-8 (GGUF strings are UTF-8)", ""},
      {"InvalidGguf--tensor-name-not-utf8-after-nul", "tensor 0: the name `w\\x00\\xc3` is not valid UTF-8 (GGUF strings are UTF-8)", ""},
      {"InvalidGguf--key-not-utf8", "key 3 `a.\\xed\\xa0\\x80` is not valid UTF-8 (GGUF strings are UTF-8)", ""},
  };
  for (const Case& c : cases) {
    const std::string path = std::string(GGUF_CORPUS_DIR) + "/" + c.file + ".gguf";
    auto f = gguf::open(path);
    ASSERT_FALSE(f.is_ok()) << c.file;
    EXPECT_EQ(f.error().message(), c.message) << c.file;
    EXPECT_EQ(f.error().context().tensor, c.tensor) << c.file;
    EXPECT_EQ(f.error().context().file, path) << c.file;
  }
}

// What ggml reads from the files it accepts and we read too: names up to the first NUL, the alignment
// from a key that is general.alignment up to its NUL, empty tensors of huge dimensions.
TEST(Corpus, GgmlNamesAndEmptyTensorsReadAsGgmlReadsThem) {
  const std::string dir = GGUF_CORPUS_DIR;
  auto nul = gguf::open(dir + "/valid--tensor-name-with-nul.gguf");
  ASSERT_TRUE(nul.is_ok()) << nul.error().to_string();
  EXPECT_EQ((*nul)->tensors()[0].name, "token_embd.weight");
  ASSERT_NE((*nul)->find("token_embd.weight"), nullptr);
  EXPECT_EQ((*nul)->find("token_embd.weight")->nbytes, 48u);
  auto aligned = gguf::open(dir + "/valid--alignment-key-with-nul.gguf");
  ASSERT_TRUE(aligned.is_ok()) << aligned.error().to_string();
  EXPECT_EQ((*aligned)->alignment(), 64u);
  EXPECT_EQ((*aligned)->kv()[0].key, "general.alignment");
  EXPECT_EQ((*aligned)->infos()[1].offset, 64u);
  auto empty = gguf::open(dir + "/valid--empty-tensor-zero-then-huge-dims.gguf");
  ASSERT_TRUE(empty.is_ok()) << empty.error().to_string();
  const std::uint64_t big = std::uint64_t{1} << 62;
  EXPECT_EQ(std::vector<std::uint64_t>((*empty)->tensors()[0].shape.begin(), (*empty)->tensors()[0].shape.end()),
            (std::vector<std::uint64_t>{big, big, 0}));
  EXPECT_EQ((*empty)->tensors()[0].nbytes, 0u);
  EXPECT_EQ((*empty)->tensors()[1].nbytes, 8u);
  EXPECT_EQ((*empty)->infos()[1].offset, 0u);
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
    auto view = t.view();
    ASSERT_EQ(view.size(), want.size());
    EXPECT_TRUE(want.empty() || std::memcmp(view.data(), want.data(), want.size()) == 0) << t.name;
    expected_offset += (t.nbytes + 31) / 32 * 32;
  }
  EXPECT_EQ(fs::file_size(dir.file("m.gguf")), (*f)->data_offset() + expected_offset);  // the last tensor padded too
}

// The metadata's value types are the library's (safeweights/metadata.h), not GGUF's ids: the writer
// maps them through GGUF's table. Each is written with the id of GGUF's spec (gguf_type), an array's
// element type too, and read back as the same type.
TEST(Writer, ValueTypesAreWrittenWithGgufsIds) {
  swt::TempDir dir;
  const std::pair<Value, std::uint32_t> cases[] = {
      {Value::u8(1), 0},     {Value::i8(-1), 1},        {Value::u16(1), 2},      {Value::i16(-1), 3}, {Value::u32(1), 4},   {Value::i32(-1), 5},
      {Value::f32(1.5f), 6}, {Value::boolean(true), 7}, {Value::string("s"), 8}, {Value::u64(1), 10}, {Value::i64(-1), 11}, {Value::f64(1.5), 12},
  };
  // magic, version, tensor count, key/value count, the key's length and its one byte: then the type.
  constexpr std::size_t kTypeAt = 4 + 4 + 8 + 8 + 8 + 1;
  const auto u32_at = [](const std::string& b, std::size_t at) {
    std::uint32_t v = 0;
    std::memcpy(&v, b.data() + at, 4);
    return v;
  };
  for (const auto& [value, id] : cases) {
    for (const bool array : {false, true}) {
      const Value v = array ? Value::array(value.type, {value}) : value;
      const std::string path = dir.file(std::to_string(id) + (array ? "a" : "") + ".gguf");
      ASSERT_TRUE(write_file(path, {{"k", v}}, {}).is_ok()) << id;
      const auto bytes = swt::read_file_bytes(path);
      EXPECT_EQ(u32_at(bytes, kTypeAt), array ? 9u : id) << id;
      if (array) {
        EXPECT_EQ(u32_at(bytes, kTypeAt + 4), id);
      }
      auto f = gguf::open(path);
      ASSERT_TRUE(f.is_ok()) << f.error().to_string();
      EXPECT_EQ((*f)->kv()[0].value, v) << id;
    }
  }
}

TEST(Writer, BytesAreDeterministicAndAlignmentIsWrittenFirst) {
  swt::TempDir dir;
  WriteOptions options;
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
  const auto refused = [&](std::vector<KeyValue> kv, std::vector<TensorDecl> decls, WriteOptions o = {}) {
    return gguf::create(out, std::move(kv), std::move(decls), o).status();
  };
  EXPECT_TRUE(swt::IsKind(refused({}, {{"u", TensorType::U32, {2}}}), ErrorKind::InvalidArgument));
  EXPECT_TRUE(swt::IsKind(refused({}, {{"w", TensorType::F32, {2}}, {"w", TensorType::F32, {2}}}), ErrorKind::InvalidArgument));
  EXPECT_TRUE(swt::IsKind(refused({}, {{std::string(64, 'n'), TensorType::F32, {2}}}), ErrorKind::Unrepresentable));
  EXPECT_TRUE(swt::IsKind(refused({}, {{"w", TensorType::F32, {1, 1, 1, 1, 1}}}), ErrorKind::Unrepresentable));
  EXPECT_TRUE(swt::IsKind(refused({}, {{"w", TensorType::Q8_0, {2, 16}}}), ErrorKind::InvalidBlockShape));
  // ggml ends a name or a key at its first NUL: never written
  Status nul = refused({}, {{std::string("a\0b", 3), TensorType::F32, {2}}});
  EXPECT_TRUE(swt::IsKind(nul, ErrorKind::Unrepresentable));
  EXPECT_EQ(nul.error().message(), "a GGUF tensor name cannot hold a NUL byte: ggml ends the name there") << nul.to_string();
  Status nul_key = refused({{std::string("a\0b", 3), Value::u8(1)}}, {});
  EXPECT_TRUE(swt::IsKind(nul_key, ErrorKind::Unrepresentable));
  EXPECT_EQ(nul_key.error().message(), "key `a\\x00b` holds a NUL byte, where ggml would end it") << nul_key.to_string();
  // ggml's element count, from ne[0] (the last of the shape): ne = [2^62, 2^62, 0] is refused
  const std::uint64_t big = std::uint64_t{1} << 62;
  Status count = refused({}, {{"w", TensorType::F32, {0, big, big}}});
  EXPECT_TRUE(swt::IsKind(count, ErrorKind::ValidationOverflow));
  EXPECT_NE(count.error().message().find("ne = [4611686018427387904, 4611686018427387904, 0] passes 2^63 - 1 at ne[1]"), std::string::npos)
      << count.to_string();
  EXPECT_TRUE(swt::IsKind(refused({{"a", Value::u8(1)}, {"a", Value::u8(2)}}, {}), ErrorKind::InvalidArgument));
  EXPECT_TRUE(swt::IsKind(refused({{"a", Value::array(ValueType::UINT8, {Value::u16(1)})}}, {}), ErrorKind::InvalidArgument));
  EXPECT_TRUE(swt::IsKind(refused({{"a", Value::array(ValueType::ARRAY, {})}}, {}), ErrorKind::InvalidArgument));
  WriteOptions thirty_two;
  thirty_two.alignment = 32;
  EXPECT_TRUE(swt::IsKind(refused({{"general.alignment", Value::u32(64)}}, {}, thirty_two), ErrorKind::InvalidArgument));
  WriteOptions odd;
  odd.alignment = 48;
  EXPECT_TRUE(swt::IsKind(refused({}, {}, odd), ErrorKind::InvalidArgument));
  {
    auto w = gguf::create(out, {}, {{"w", TensorType::F32, {4}}});
    ASSERT_TRUE(w.is_ok());
    EXPECT_TRUE(swt::IsKind((*w)->write("w", pattern(15, 0)), ErrorKind::InvalidArgument));
    EXPECT_TRUE(swt::IsKind((*w)->write("nope", pattern(16, 0)), ErrorKind::InvalidArgument));
    ASSERT_TRUE((*w)->write_chunk("w", pattern(8, 0)).is_ok());
    EXPECT_TRUE(swt::IsKind((*w)->write_chunk("w", pattern(9, 0)), ErrorKind::InvalidArgument));
    EXPECT_TRUE(swt::IsKind((*w)->finish(), ErrorKind::InvalidArgument));  // 8 of 16 bytes
  }
  EXPECT_TRUE(dir.list().empty());
}

// A reader takes any power-of-two alignment (the padding is in the file), a writer at most 1 MiB: a
// 57-byte file with no tensors and general.alignment = 2^31 made a 2 GiB output (and 2 GiB of memory).
TEST(Writer, AlignmentIsCappedAtOneMebibyte) {
  swt::TempDir dir;
  WriteOptions o;
  o.alignment = std::uint32_t{1} << 20;
  auto ok = gguf::create(dir.file("ok.gguf"), {}, {{"w", TensorType::F32, {2}}}, o);
  ASSERT_TRUE(ok.is_ok()) << ok.error().to_string();
  o.alignment = std::uint32_t{1} << 21;
  Status big = gguf::create(dir.file("big.gguf"), {}, {{"w", TensorType::F32, {2}}}, o).status();
  EXPECT_TRUE(swt::IsKind(big, ErrorKind::ResourceLimit)) << big.to_string();
  EXPECT_EQ(big.error().message(), "alignment 2097152 is over the writer's cap of 1048576 bytes (1 MiB): the output would be mostly padding");
  o.split.max_tensors = 1;
  EXPECT_TRUE(swt::IsKind(gguf::create(dir.file("split.gguf"), {}, {{"w", TensorType::F32, {2}}}, o).status(), ErrorKind::ResourceLimit));

  const auto u32 = [](std::uint32_t v) { return swt::le64(v).substr(0, 4); };
  // version 3, no tensors, one key: general.alignment, UINT32 (4), 2^31
  const std::string hostile = "GGUF" + u32(3) + swt::le64(0) + swt::le64(1) + swt::le64(17) + "general.alignment" + u32(4) + u32(1u << 31);
  swt::write_file_bytes(dir.file("in.gguf"), hostile);
  auto in = gguf::open(dir.file("in.gguf"));
  ASSERT_TRUE(in.is_ok()) << in.error().to_string();
  EXPECT_EQ((*in)->alignment(), std::uint32_t{1} << 31);
  auto report = convert(**in, dir.file("out.gguf"));
  ASSERT_FALSE(report.is_ok());
  EXPECT_TRUE(swt::IsKind(report.status(), ErrorKind::ResourceLimit)) << report.error().to_string();
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.gguf")));
}

// ne = [0, 2^62, 2^62] (the shape [2^62, 2^62, 0]) is an empty tensor to ggml: written, and read back.
TEST(Writer, WritesAnEmptyTensorGgmlAcceptsWhateverItsOtherDimensions) {
  swt::TempDir dir;
  const std::uint64_t big = std::uint64_t{1} << 62;
  auto w = gguf::create(dir.file("e.gguf"), {}, {{"e", TensorType::Q8_0, {big, big, 0}}, {"w", TensorType::F32, {2}}});
  ASSERT_TRUE(w.is_ok()) << w.error().to_string();
  ASSERT_TRUE((*w)->write("e", {}).is_ok());
  ASSERT_TRUE((*w)->write("w", pattern(8, 1)).is_ok());
  ASSERT_TRUE((*w)->finish().is_ok());
  auto f = gguf::open(dir.file("e.gguf"));
  ASSERT_TRUE(f.is_ok()) << f.error().to_string();
  EXPECT_EQ((*f)->tensors()[0].nbytes, 0u);
  EXPECT_EQ(std::vector<std::uint64_t>((*f)->infos()[0].ne.begin(), (*f)->infos()[0].ne.end()), (std::vector<std::uint64_t>{0, big, big}));
  EXPECT_EQ((*f)->infos()[1].offset, 0u);
}

// convert() carries such an empty tensor from GGUF to GGUF: the same file, byte for byte.
TEST(Writer, ConvertCarriesAnEmptyTensorOfHugeDimensions) {
  swt::TempDir dir;
  const std::string in = std::string(GGUF_CORPUS_DIR) + "/valid--empty-tensor-zero-then-huge-dims.gguf";
  auto f = gguf::open(in);
  ASSERT_TRUE(f.is_ok()) << f.error().to_string();
  auto report = convert(**f, dir.file("out.gguf"));
  ASSERT_TRUE(report.is_ok()) << report.error().to_string();
  EXPECT_EQ(report->bytes_written, 8u);
  EXPECT_EQ(swt::read_file_bytes(in), swt::read_file_bytes(dir.file("out.gguf")));
}

TEST(Writer, ChunksAndCopyTensorsReproduceAFile) {
  swt::TempDir dir;
  ASSERT_TRUE(write_file(dir.file("a.gguf"), all_value_types(), some_tensors()).is_ok());
  auto in = gguf::open(dir.file("a.gguf"));
  ASSERT_TRUE(in.is_ok());
  std::vector<TensorDecl> decls;
  for (const TensorEntry& t : (*in)->tensors()) decls.push_back({std::string(t.name), t.type, {t.shape.begin(), t.shape.end()}});
  auto w = gguf::create(dir.file("b.gguf"), {(*in)->kv().begin(), (*in)->kv().end()}, decls);
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
    while (end > seen && !furthest.compare_exchange_weak(seen, end)) {}
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
  EXPECT_EQ((*f)->tensors()[0].view().data(), nullptr);  // not mapped: read() copies instead
  std::vector<std::byte> got(4u << 20);
  ASSERT_TRUE((*f)->tensors()[0].read(got).is_ok());
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

// Allocation discipline on the open path (issue 16): the reader sizes its arrays once from the
// counts; no allocation per tensor (the name index is one array), none per short string or scalar;
// the header copy grows by doubling (a few allocations for a file ten times larger).
TEST(Reader, AllocationsDoNotGrowWithTheTensorCount) {
  swt::TempDir dir;
  std::vector<std::size_t> counts;
  for (int tensors : {2000, 20000}) {
    std::vector<TensorDecl> decls;
    for (int i = 0; i < tensors; ++i) decls.push_back({"blk." + std::to_string(i) + ".w", TensorType::F32, {2}});
    const std::string path = dir.file(std::to_string(tensors) + ".gguf");
    ASSERT_TRUE(write_file(path, all_value_types(), decls).is_ok());
    auto source = open_file(path);
    ASSERT_TRUE(source.is_ok());
    swt::start_counting_allocations();
    auto f = gguf::open(*source);
    const std::size_t allocations = swt::stop_counting_allocations();
    ASSERT_TRUE(f.is_ok());
    ASSERT_EQ((*f)->tensors().size(), static_cast<std::size_t>(tensors));
    counts.push_back(allocations);
  }
  std::printf("allocations to open: %zu (2,000 tensors), %zu (20,000 tensors)\n", counts[0], counts[1]);
  EXPECT_LE(counts[1], counts[0] + 4) << counts[0];  // 10x the tensors: only the header copy doubles a few more times
  EXPECT_LT(counts[1], 64u) << "allocations to open a file of 20,000 tensors";
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
  for (const char* part :
       {"\"key\":\"t.u64\",\"type\":\"UINT64\",\"value\":18446744073709551615", "\"key\":\"t.i64\",\"type\":\"INT64\",\"value\":-9223372036854775808",
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

// ---- split models -------------------------------------------------------------------------------

TEST(Corpus, EverySplitSetGivesTheKindInItsName) {
  int files = 0, rules = 0;
  for (const auto& e : fs::directory_iterator(GGUF_CORPUS_DIR)) {
    const std::string name = e.path().filename().string();
    if (name.find("--split-") == std::string::npos) continue;
    ++files;
    const auto split = gguf::parse_split_file_name(e.path().string());
    const std::string set = split ? split->prefix : e.path().string();
    if (!split || split->number == 1) ++rules;
    for (FileBackend backend : {FileBackend::Mmap, FileBackend::Pread}) {
      FormatOptions options;
      options.backend = backend;
      auto f = gguf::open(e.path().string(), options);  // any file of a set opens (or refuses) the whole set
      if (name.rfind("valid--", 0) == 0) {
        ASSERT_TRUE(f.is_ok()) << name << ": " << f.error().to_string();
        if (split) {
          EXPECT_EQ((*f)->split_count(), split->count) << name;
        }
        continue;
      }
      ASSERT_FALSE(f.is_ok()) << name;
      EXPECT_EQ(f.error().kind(), expected_kind(name)) << name << ": " << f.error().to_string();
      EXPECT_EQ(f.error().context().file.rfind(set, 0), 0u) << name << ": " << f.error().to_string();  // a file of the set
      if (f.error().kind() == ErrorKind::InvalidGguf) {
        EXPECT_EQ(error_rule_code(f.error().rule()), expected_rule(name)) << name << ": " << f.error().to_string();
      }
      if (f.error().kind() == ErrorKind::InvalidGguf && name.find("truncated") == std::string::npos) {
        EXPECT_NE(f.error().message().find("split"), std::string::npos) << f.error().to_string();
      }
    }
  }
  EXPECT_GE(files, 30);
  EXPECT_GE(rules, 17);
}

TEST(Corpus, SplitErrorsNameTheFileAndTheRule) {
  const std::string dir = std::string(GGUF_CORPUS_DIR) + "/";
  auto missing = gguf::open(dir + "FileNotFound--split-file-missing-00002-of-00003.gguf");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.error().context().file, dir + "FileNotFound--split-file-missing-00003-of-00003.gguf");
  EXPECT_NE(missing.error().message().find("file 3 of the split model"), std::string::npos) << missing.error().to_string();
  auto dup = gguf::open(dir + "InvalidGguf--split-duplicate-tensor-across-files-00001-of-00002.gguf");
  EXPECT_EQ(dup.error().context().tensor, "token_embd.weight");
  EXPECT_EQ(dup.error().context().file, dir + "InvalidGguf--split-duplicate-tensor-across-files-00002-of-00002.gguf");
  auto type = gguf::open(dir + "InvalidGguf--split-count-not-uint16-00002-of-00002.gguf");
  EXPECT_NE(type.error().message().find("split.count must be UINT16"), std::string::npos) << type.error().to_string();
  auto sum = gguf::open(dir + "InvalidGguf--split-tensors-count-not-the-sum-00002-of-00002.gguf");
  EXPECT_NE(sum.error().message().find("hold 2 tensors but split.tensors.count is 3"), std::string::npos) << sum.error().to_string();
  auto other = gguf::open(dir + "InvalidGguf--split-metadata-in-other-file-00001-of-00002.gguf");
  EXPECT_NE(other.error().message().find("key `general.name`"), std::string::npos) << other.error().to_string();
  auto truncated = gguf::open(dir + "InvalidGguf--split-other-file-truncated-00001-of-00002.gguf");
  EXPECT_EQ(truncated.error().context().file, dir + "InvalidGguf--split-other-file-truncated-00002-of-00002.gguf");
}

namespace {

std::vector<TensorDecl> split_tensors() {
  return {{"a", TensorType::F32, {10}},      // 40 bytes, 64 padded
          {"b", TensorType::F32, {16}},      // 64
          {"c", TensorType::Q8_0, {2, 32}},  // 68, 96 padded
          {"d", TensorType::F16, {3}},       // 6, 32 padded
          {"e", TensorType::F32, {100}}};    // 400, 416 padded
}

WriteOptions split_into(SplitLimits split) {
  WriteOptions options;
  options.split = split;
  return options;
}

Result<std::vector<std::string>> write_split(const std::string& prefix, std::vector<KeyValue> kv, const std::vector<TensorDecl>& decls,
                                             SplitLimits split, bool finish = true) {
  auto w = gguf::create(prefix + ".gguf", std::move(kv), decls, split_into(split));
  if (!w.is_ok()) return w.error();
  for (std::size_t i = 0; i < decls.size(); ++i) {
    auto n = tensor_nbytes(decls[i].dtype, decls[i].shape);
    if (Status s = (*w)->write(decls[i].name, pattern(static_cast<std::size_t>(*n), static_cast<int>(i))); !s.is_ok()) return s.error();
  }
  if (finish)
    if (Status s = (*w)->finish(); !s.is_ok()) return s.error();
  return std::vector<std::string>((*w)->files().begin(), (*w)->files().end());
}

}  // namespace

TEST(SplitWriter, CutsBySizeAsGgufSplitAndWritesItsKeys) {
  swt::TempDir dir;
  const std::vector<KeyValue> kv = {{"general.architecture", Value::string("llama")}, {"x", Value::u8(1)}};
  SplitLimits split;
  split.max_bytes = 128;  // padded sizes 64, 64 | 96, 32 | 416 (bigger than the limit: a file of its own)
  auto paths = write_split(dir.file("m"), kv, split_tensors(), split);
  ASSERT_TRUE(paths.is_ok()) << paths.error().to_string();
  ASSERT_EQ(*paths,
            (std::vector<std::string>{dir.file("m-00001-of-00003.gguf"), dir.file("m-00002-of-00003.gguf"), dir.file("m-00003-of-00003.gguf")}));
  const std::vector<std::vector<std::string>> expected_names = {{"a", "b"}, {"c", "d"}, {"e"}};
  for (std::size_t k = 0; k < 3; ++k) {
    // Each file on its own: the keys exactly as llama.cpp's gguf-split writes them.
    std::vector<KeyValue> want = k == 0 ? kv : std::vector<KeyValue>{};
    want.push_back({"split.no", Value::u16(static_cast<std::uint16_t>(k))});
    want.push_back({"split.tensors.count", Value::i32(5)});
    want.push_back({"split.count", Value::u16(3)});
    auto whole = gguf::open((*paths)[k]);
    ASSERT_TRUE(whole.is_ok()) << whole.error().to_string();
    const gguf::GgufFile& part = (*whole)->split(k);
    EXPECT_EQ(std::vector<KeyValue>(part.kv().begin(), part.kv().end()), want) << k;
    std::vector<std::string> names;
    for (const TensorEntry& t : part.tensors()) names.emplace_back(t.name);
    EXPECT_EQ(names, expected_names[k]);
  }
  // By count: 2, 2, 1.
  SplitLimits by_count;
  by_count.max_tensors = 2;
  auto counted = write_split(dir.file("n"), {}, split_tensors(), by_count);
  ASSERT_TRUE(counted.is_ok());
  EXPECT_EQ(counted->size(), 3u);
  EXPECT_EQ(counted->back(), dir.file("n-00003-of-00003.gguf"));
}

TEST(SplitWriter, BytesAreDeterministicAndTheModelReadsBackFromAnyFile) {
  swt::TempDir dir;
  SplitLimits split;
  split.max_tensors = 2;
  ASSERT_TRUE(write_split(dir.file("a"), all_value_types(), some_tensors(), split).is_ok());
  ASSERT_TRUE(write_split(dir.file("b"), all_value_types(), some_tensors(), split).is_ok());
  for (int k = 1; k <= 4; ++k)
    EXPECT_EQ(swt::read_file_bytes(gguf::split_file_name(dir.file("a"), k, 4)), swt::read_file_bytes(gguf::split_file_name(dir.file("b"), k, 4)));
  for (int k = 1; k <= 4; ++k) {
    auto f = gguf::open(gguf::split_file_name(dir.file("a"), k, 4), {});
    ASSERT_TRUE(f.is_ok()) << f.error().to_string();
    EXPECT_EQ((*f)->split_count(), 4u);
    EXPECT_EQ((*f)->name(), dir.file("a-00001-of-00004.gguf"));  // the model is named by its first file
    ASSERT_EQ((*f)->tensors().size(), some_tensors().size());
    EXPECT_EQ((*f)->kv().size(), all_value_types().size() + 3);
    EXPECT_EQ((*f)->find_kv("general.architecture")->str, "llama");
    for (std::size_t i = 0; i < some_tensors().size(); ++i) {
      const TensorEntry& t = (*f)->tensors()[i];
      EXPECT_EQ(t.name, some_tensors()[i].name);
      EXPECT_EQ((*f)->split_of(i), i / 2);
      EXPECT_EQ((*f)->find(t.name), &t);
      std::vector<std::byte> got(static_cast<std::size_t>(t.nbytes));
      ASSERT_TRUE(t.read(got).is_ok());
      EXPECT_EQ(got, pattern(got.size(), static_cast<int>(i))) << t.name;
    }
  }
}

TEST(SplitWriter, LeavesNoFileUnlessEveryFileIsComplete) {
  swt::TempDir dir;
  SplitLimits split;
  split.max_tensors = 1;
  {
    auto w = gguf::create(dir.file("m") + ".gguf", {}, split_tensors(), split_into(split));
    ASSERT_TRUE(w.is_ok());
    for (const TensorDecl& d : split_tensors())
      if (d.name != "c") {
        ASSERT_TRUE((*w)->write(d.name, pattern(*tensor_nbytes(d.dtype, d.shape), 0)).is_ok());
      }
    const Status s = (*w)->finish();  // "c", in file 3, is missing
    EXPECT_EQ(s.error().context().tensor, "c");
    EXPECT_EQ(s.error().message(), "tensor incomplete: 0 of 68 bytes written") << s.error().to_string();
    // Discarded at once, as a single sink is, and done: writing "c" now cannot revive the set.
    EXPECT_TRUE(fs::is_empty(dir.path()));
    const Status late = (*w)->write("c", pattern(8, 0));
    ASSERT_TRUE(swt::IsKind(late, ErrorKind::InvalidArgument));
    EXPECT_EQ(late.error().message(), "writer already finished");
    EXPECT_EQ((*w)->finish().error().message(), "writer already finished");
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));
  // Not finished: nothing either.
  ASSERT_TRUE(write_split(dir.file("m"), {}, split_tensors(), split, false).is_ok());
  EXPECT_TRUE(fs::is_empty(dir.path()));
  // A rename that fails part way (file 3's name is taken by a folder) takes the renamed files away again.
  fs::create_directories(dir.file("m-00003-of-00005.gguf/x"));
  auto failed = write_split(dir.file("m"), {}, split_tensors(), split);
  ASSERT_FALSE(failed.is_ok());
  EXPECT_FALSE(fs::exists(dir.file("m-00001-of-00005.gguf")));
  EXPECT_FALSE(fs::exists(dir.file("m-00002-of-00005.gguf")));
  EXPECT_FALSE(fs::exists(dir.file("m-00004-of-00005.gguf")));
  EXPECT_TRUE(fs::exists(dir.file("m-00003-of-00005.gguf/x")));
}

// Each file of a split stays open until finish(): past the descriptor limit the writer fails, naming
// the file it could not create, and leaves nothing (gguf.h, SplitWriter).
TEST(SplitWriter, NeedsADescriptorPerFileAndNamesTheFilePastTheLimit) {
  swt::TempDir dir;
  std::size_t open_now = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/fd")) ++open_now;
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = open_now + 10;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<TensorDecl> many;
  for (int i = 0; i < 40; ++i) many.push_back({std::string("t").append(std::to_string(i)), TensorType::F32, {1}});
  SplitLimits split;
  split.max_tensors = 1;
  auto w = gguf::create(dir.file("m") + ".gguf", {}, many, split_into(split));
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);
  ASSERT_FALSE(w.is_ok());
  EXPECT_EQ(w.error().kind(), ErrorKind::IoError) << w.error().to_string();
  EXPECT_TRUE(w.error().context().file.starts_with(dir.file("m-000"))) << w.error().to_string();
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(SplitWriter, RefusesSplitKeysAndTooManyFiles) {
  swt::TempDir dir;
  SplitLimits split;
  split.max_tensors = 1;
  auto keys = gguf::create(dir.file("m") + ".gguf", {{"split.count", Value::u16(2)}}, split_tensors(), split_into(split));
  EXPECT_EQ(keys.error().kind(), ErrorKind::InvalidArgument);
  std::vector<TensorDecl> many;
  for (int i = 0; i < 65536; ++i) many.push_back({std::string("t").append(std::to_string(i)), TensorType::F32, {1}});
  auto too_many = gguf::create(dir.file("m") + ".gguf", {}, many, split_into(split));
  EXPECT_EQ(too_many.error().kind(), ErrorKind::InvalidArgument);
  EXPECT_NE(too_many.error().message().find("65535"), std::string::npos);
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(SplitNames, AsLlamaCppSpellsThem) {
  EXPECT_EQ(gguf::split_file_name("out/m", 2, 5), "out/m-00002-of-00005.gguf");
  auto n = gguf::parse_split_file_name("https://h/x/m-00002-of-00005.gguf");
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->prefix, "https://h/x/m");
  EXPECT_EQ(n->number, 2u);
  EXPECT_EQ(n->count, 5u);
  for (const char* bad : {"m-00006-of-00005.gguf", "m-00000-of-00005.gguf", "m-0002-of-00005.gguf", "m-00002-of-00005.bin", "-00001-of-00001.gguf",
                          "m-00002_of-00005.gguf"})
    EXPECT_FALSE(gguf::parse_split_file_name(bad).has_value()) << bad;
  EXPECT_EQ(*gguf::parse_split_size("2G"), 2000000000u);
  EXPECT_EQ(*gguf::parse_split_size("500M"), 500000000u);
  EXPECT_EQ(*gguf::parse_split_size("3K"), 3000u);
  EXPECT_EQ(*gguf::parse_split_size("4096"), 4096u);
  for (const char* bad : {"", "0", "0M", "2T", "1.5G", "-1G", "G", "99999999999999999999G"})
    EXPECT_EQ(gguf::parse_split_size(bad).error().kind(), ErrorKind::InvalidArgument) << bad;
}

TEST(Split, RegistryAndConvertSeeOneModel) {
  swt::TempDir dir;
  ASSERT_TRUE(write_file(dir.file("m.gguf"), all_value_types(), some_tensors()).is_ok());
  auto single = gguf::open(dir.file("m.gguf"));
  ASSERT_TRUE(single.is_ok());
  // convert --split-max-tensors 3, then convert the split model back into one file: the same bytes.
  ConvertOptions to_split;
  to_split.write.split.max_tensors = 3;
  auto report = convert(**single, dir.file("s.gguf"), to_split);
  ASSERT_TRUE(report.is_ok()) << report.error().to_string();
  EXPECT_EQ(report->files,
            (std::vector<std::string>{dir.file("s-00001-of-00003.gguf"), dir.file("s-00002-of-00003.gguf"), dir.file("s-00003-of-00003.gguf")}));
  EXPECT_FALSE(fs::exists(dir.file("s.gguf")));
  const std::string second = dir.file("s-00002-of-00003.gguf");
  auto model = open_tensors(second, "", {});
  ASSERT_TRUE(model.is_ok()) << model.error().to_string();
  ASSERT_TRUE(convert(**model, dir.file("merged.gguf")).is_ok());
  EXPECT_EQ(swt::read_file_bytes(dir.file("merged.gguf")), swt::read_file_bytes(dir.file("m.gguf")));
  // validate, inspect --json and cat through the registry, from file 2.
  const Format* format = find_format("gguf");
  auto summary = format->validate(second, {});
  ASSERT_TRUE(summary.is_ok());
  EXPECT_NE(summary->find("8 tensors,"), std::string::npos) << *summary;
  EXPECT_NE(summary->find("3 split files"), std::string::npos) << *summary;
  auto json = format->inspect(second, {}, {}, true);
  ASSERT_TRUE(json.is_ok());
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(*json).get(doc), simdjson::SUCCESS);
  EXPECT_EQ(simdjson::dom::array(doc["splits"]).size(), 3u);
  EXPECT_EQ(std::string_view(doc["splits"].at(1)["file"]), second);
  EXPECT_EQ(simdjson::dom::array(doc["tensors"]).size(), 8u);
  EXPECT_EQ(std::uint64_t(doc["tensors"].at(3)["split"]), 1u);
  EXPECT_EQ(std::uint64_t(doc["tensors"].at(3)["offset"]), 0u);  // q8, first in file 2
  auto target = format->locate(dir.file("s-00001-of-00003.gguf"), std::vector<std::string>{"q8"}, {});
  ASSERT_TRUE(target.is_ok()) << target.error().to_string();
  std::vector<std::byte> got(136);
  ASSERT_TRUE(target->source->read_at(target->offset, got).is_ok());
  EXPECT_EQ(got, pattern(136, 3));
  // Into .safetensors a split output is refused, before anything is written.
  auto refused = convert(**single, dir.file("x.safetensors"), to_split);
  EXPECT_EQ(refused.error().kind(), ErrorKind::InvalidArgument);
  EXPECT_FALSE(fs::exists(dir.file("x.safetensors")));
}
