// The writer against the reference's byte-exact vectors (reference §2.5), its ordering and escaping
// rules (§2.1, §2.2), padding (§2.3), and its refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "safeweights/safetensors_writer.h"
#include "safeweights/sharded.h"
#include "test_util.h"

namespace {

using namespace swt;
namespace st = safeweights::safetensors;
using K = safeweights::ErrorKind;
using st::Layout;
using Metadata = std::optional<safeweights::MetadataEntries>;
using st::MetadataEntries;
using st::TensorData;
using st::TensorDecl;

// A tensor and the bytes it points at, kept together so the span stays valid.
struct Owned {
  std::string name;
  TensorType dtype;
  std::vector<std::uint64_t> shape;
  std::vector<std::byte> bytes;
  TensorData view() const { return TensorData{name, dtype, shape, bytes}; }
};
std::vector<TensorData> views(const std::vector<Owned>& v) {
  std::vector<TensorData> out;
  for (const auto& o : v) out.push_back(o.view());
  return out;
}

std::vector<std::byte> zeros(std::size_t n) { return std::vector<std::byte>(n, std::byte{0}); }
std::vector<std::byte> hexbytes(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int b : v) out.push_back(static_cast<std::byte>(b));
  return out;
}
std::vector<std::byte> f32s(std::initializer_list<float> v) {
  std::vector<std::byte> out(v.size() * 4);
  std::size_t i = 0;
  for (float f : v) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    for (int k = 0; k < 4; ++k) out[i++] = static_cast<std::byte>((u >> (8 * k)) & 0xff);
  }
  return out;
}

// 8-byte N, JSON, `pad` spaces, data.
std::string expected_file(std::string_view json, std::size_t pad, const std::vector<std::byte>& data) {
  std::string s = le64(json.size() + pad);
  s.append(json);
  s.append(pad, ' ');
  s.append(to_string(data));
  return s;
}

std::string serialize_str(const std::vector<Owned>& tensors, const Metadata& md = {}) {
  auto tv = views(tensors);
  auto r = st::serialize(tv, md);
  EXPECT_TRUE(IsOk(r));
  if (!r.is_ok()) return {};
  return to_string(*r);
}

// Serializes, compares with `expected` byte for byte, and reads the bytes back.
void check_vector(const std::vector<Owned>& tensors, const Metadata& md, const std::string& expected, std::uint64_t expected_n) {
  ASSERT_EQ(expected.size() >= 8, true);
  const std::string got = serialize_str(tensors, md);
  EXPECT_EQ(hexdump(got, 1000), hexdump(expected, 1000));
  ASSERT_EQ(got, expected);
  auto h = parse(got);
  ASSERT_TRUE(IsOk(h));
  EXPECT_EQ(h->header_size(), expected_n);
  EXPECT_EQ(h->tensors().size(), tensors.size());
  for (const auto& t : tensors) {
    const auto* info = h->find(t.name);
    ASSERT_NE(info, nullptr) << t.name;
    EXPECT_EQ(info->dtype, t.dtype);
    EXPECT_EQ(std::vector<std::uint64_t>(info->shape.begin(), info->shape.end()), t.shape);
    EXPECT_EQ(got.substr(h->data_start() + info->begin, info->nbytes()), to_string(t.bytes)) << t.name;
  }
  EXPECT_EQ(h->has_metadata(), md.has_value());
  if (md) {
    auto sorted = *md;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(h->metadata().entries(), sorted);
  }
}

// ---- §2.5 byte-exact vectors -----------------------------------------------------------------------

TEST(WriterVectors, I32Zeros2x2) {
  const std::string json = R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})";
  ASSERT_EQ(json.size(), 60u);
  const std::string expected = expected_file(json, 4, zeros(16));
  ASSERT_EQ(expected.substr(0, 8), std::string("@\0\0\0\0\0\0\0", 8));
  check_vector({{"test", TensorType::I32, {2, 2}, zeros(16)}}, {}, expected, 64);
}

TEST(WriterVectors, I32AndF16ForcesAlignmentAndIsOrderIndependent) {
  const std::string json =
      R"({"test1":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]},"test2":{"dtype":"F16","shape":[2,2],"data_offsets":[16,24]}})";
  ASSERT_EQ(json.size(), 122u);
  std::vector<std::byte> data = zeros(24);
  const std::string expected = expected_file(json, 6, data);
  ASSERT_EQ(expected.substr(0, 8), le64(0x80));
  check_vector({{"test1", TensorType::I32, {2, 2}, zeros(16)}, {"test2", TensorType::F16, {2, 2}, zeros(8)}}, {}, expected, 128);
  check_vector({{"test2", TensorType::F16, {2, 2}, zeros(8)}, {"test1", TensorType::I32, {2, 2}, zeros(16)}}, {}, expected, 128);
}

TEST(WriterVectors, MetadataFrameworkPt) {
  const std::string json = R"({"__metadata__":{"framework":"pt"},"test1":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})";
  ASSERT_EQ(json.size(), 95u);
  const std::string expected = expected_file(json, 1, zeros(16));
  ASSERT_EQ(expected[0], '`');
  check_vector({{"test1", TensorType::I32, {2, 2}, zeros(16)}}, MetadataEntries{{"framework", "pt"}}, expected, 96);
}

TEST(WriterVectors, BF16OnesWith225) {
  const std::string json = R"({"test":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}})";
  ASSERT_EQ(json.size(), 60u);
  const auto data = hexbytes({0x10, 0x40, 0x80, 0x3f, 0x80, 0x3f, 0x80, 0x3f});
  check_vector({{"test", TensorType::BF16, {2, 2}, data}}, {}, expected_file(json, 4, data), 64);
}

TEST(WriterVectors, C64WithMinusOnePlusI) {
  const std::string json = R"({"test":{"dtype":"C64","shape":[2,2],"data_offsets":[0,32]}})";
  ASSERT_EQ(json.size(), 60u);
  auto data = zeros(24);
  for (int b : {0x00, 0x00, 0x80, 0xbf, 0x00, 0x00, 0x80, 0x3f}) data.push_back(static_cast<std::byte>(b));
  const std::string expected = expected_file(json, 4, data);
  ASSERT_EQ(hexdump(expected.substr(expected.size() - 8)), hexdump(std::string("\0\0\x80\xbf\0\0\x80\x3f", 8)));
  check_vector({{"test", TensorType::C64, {2, 2}, data}}, {}, expected, 64);
}

TEST(WriterVectors, RustSerializationAttnDot0NoPadding) {
  const std::string json = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(json.size(), 64u);
  const auto data = f32s({0, 1, 2, 3, 4, 5});
  check_vector({{"attn.0", TensorType::F32, {1, 2, 3}, data}}, {}, expected_file(json, 0, data), 64);
}

TEST(WriterVectors, RustSerializationAttn0SevenSpaces) {
  const std::string json = R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(json.size(), 65u);
  const auto data = f32s({0, 1, 2, 3, 4, 5});
  check_vector({{"attn0", TensorType::F32, {1, 1, 2, 3}, data}}, {}, expected_file(json, 7, data), 72);
}

TEST(WriterVectors, RustSerializationFp4) {
  const std::string json = R"({"attn.0":{"dtype":"F4","shape":[1,2],"data_offsets":[0,1]}})";
  ASSERT_EQ(json.size(), 60u);
  const auto data = hexbytes({0x21});
  check_vector({{"attn.0", TensorType::F4, {1, 2}, data}}, {}, expected_file(json, 4, data), 64);
}

TEST(WriterVectors, EmptyFile) {
  const std::string expected = std::string("\x08\0\0\0\0\0\0\0", 8) + "{}      ";
  check_vector({}, {}, expected, 8);
}

TEST(WriterVectors, MetadataOnly) {
  const std::string json = R"({"__metadata__":{"framework":"pt"}})";
  ASSERT_EQ(json.size(), 35u);
  check_vector({}, MetadataEntries{{"framework", "pt"}}, expected_file(json, 5, {}), 40);
}

TEST(WriterVectors, EmptyMetadataNoTensorsIsValidJson) {
  // The reference writes the invalid `{},"__metadata__":{}}` here; we write the intended form.
  const std::string json = R"({"__metadata__":{}})";
  check_vector({}, MetadataEntries{}, expected_file(json, 5, {}), 24);
}

TEST(WriterVectors, EmptyMetadataWithTensor) {
  const std::string json = R"({"__metadata__":{},"t":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})";
  const auto data = hexbytes({1, 2, 3});
  check_vector({{"t", TensorType::U8, {3}, data}}, MetadataEntries{}, expected_file(json, (8 - json.size() % 8) % 8, data),
               json.size() + (8 - json.size() % 8) % 8);
}

TEST(WriterVectors, ScalarAndZeroSized) {
  // Rank 0 is `[]`; zero-sized tensors take no bytes and keep their place in the sort order.
  const std::string json =
      R"({"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]},"e":{"dtype":"F32","shape":[2,0],"data_offsets":[8,8]},"z":{"dtype":"F32","shape":[0],"data_offsets":[8,8]},"b":{"dtype":"U8","shape":[1],"data_offsets":[8,9]}})";
  auto data = hexbytes({1, 2, 3, 4, 5, 6, 7, 8, 9});
  std::vector<Owned> in = {{"z", TensorType::F32, {0}, {}},
                           {"b", TensorType::U8, {1}, hexbytes({9})},
                           {"e", TensorType::F32, {2, 0}, {}},
                           {"s", TensorType::F64, {}, hexbytes({1, 2, 3, 4, 5, 6, 7, 8})}};
  const std::size_t pad = (8 - json.size() % 8) % 8;
  check_vector(in, {}, expected_file(json, pad, data), json.size() + pad);
}

// ---- §2.1 order ------------------------------------------------------------------------------------

TEST(WriterOrder, DtypeDescendingThenName) {
  // Reference §2.1's effective write order, written out independently of the enum.
  const std::vector<std::string> expected = {"U64", "I64", "F64",     "C64",         "F32",         "U32",     "I32",     "BF16",
                                             "F16", "U16", "I16",     "F8_E5M2FNUZ", "F8_E4M3FNUZ", "F8_E8M0", "F8_E4M3", "F8_E5M2",
                                             "I8",  "U8",  "F6_E3M2", "F6_E2M3",     "F4",          "BOOL"};
  std::vector<Owned> in;
  for (TensorType d : all_dtypes()) {
    const auto n = byte_size(d, 8).value();
    in.push_back({"t_" + std::string(safeweights::type_name(d)), d, {8}, zeros(n)});
  }
  std::mt19937 rng(7);
  for (int round = 0; round < 3; ++round) {
    std::shuffle(in.begin(), in.end(), rng);
    const std::string bytes = serialize_str(in);
    auto h = parse(bytes);
    ASSERT_TRUE(IsOk(h));
    ASSERT_EQ(h->tensors().size(), expected.size());
    std::uint64_t off = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const auto& t = h->tensors()[i];
      EXPECT_EQ(t.name, "t_" + expected[i]) << i;
      EXPECT_EQ(safeweights::type_name(t.dtype), expected[i]);
      EXPECT_EQ(t.begin, off);
      off = t.end;
      // The JSON lists them in the same order.
      const auto pos = bytes.find("\"t_" + expected[i] + "\"");
      ASSERT_NE(pos, std::string::npos);
      if (i > 0) {
        EXPECT_LT(bytes.find("\"t_" + expected[i - 1] + "\""), pos);
      }
      // Natural alignment in the file (reference proptest): offsets are multiples of the element size.
      const auto bits = safeweights::type_bits(t.dtype);
      if (bits >= 8) {
        EXPECT_EQ((h->data_start() + t.begin) % (bits / 8), 0u) << expected[i];
      }
    }
  }
}

TEST(WriterOrder, NamesBytewise) {
  // Bytewise UTF-8 order: "" < "B" < "a" < "aa" < "b" < "\x7f" < "é" (0xc3) < "中" (0xe4) < "😀" (0xf0).
  const std::vector<std::string> expected = {"", "B", "a", "aa", "b", "\x7f", "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80"};
  std::vector<Owned> in;
  for (const auto& n : expected) in.push_back({n, TensorType::F32, {1}, zeros(4)});
  std::reverse(in.begin(), in.end());
  std::swap(in[1], in[5]);
  auto h = parse(serialize_str(in));
  ASSERT_TRUE(IsOk(h));
  ASSERT_EQ(h->tensors().size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(h->tensors()[i].name, expected[i]) << i;
    EXPECT_EQ(h->tensors()[i].begin, 4 * i);
  }
}

TEST(WriterOrder, LayoutPlacements) {
  std::vector<TensorDecl> decls = {{"b", TensorType::U8, {3}}, {"a", TensorType::F64, {2}}, {"c", TensorType::U8, {0}}, {"a2", TensorType::F64, {1}}};
  auto l = Layout::plan(decls, {});
  ASSERT_TRUE(IsOk(l));
  const auto& p = l->placements();
  ASSERT_EQ(p.size(), 4u);
  // a(F64) a2(F64) b(U8) c(U8)
  EXPECT_EQ(p[0].decl, 1u);
  EXPECT_EQ(p[1].decl, 3u);
  EXPECT_EQ(p[2].decl, 0u);
  EXPECT_EQ(p[3].decl, 2u);
  EXPECT_EQ(p[0].begin, 0u);
  EXPECT_EQ(p[0].end, 16u);
  EXPECT_EQ(p[1].end, 24u);
  EXPECT_EQ(p[2].end, 27u);
  EXPECT_EQ(p[3].begin, 27u);
  EXPECT_EQ(p[3].end, 27u);
  EXPECT_EQ(l->placement_of(0).begin, 24u);
  EXPECT_EQ(l->placement_of(2).begin, 27u);
  EXPECT_EQ(l->data_size(), 27u);
  EXPECT_EQ(l->header_size() % 8, 0u);
  EXPECT_EQ(l->prefix().size(), 8 + l->header_size());
  EXPECT_EQ(l->prefix().substr(0, 8), le64(l->header_size()));
  EXPECT_EQ(l->file_size(), 8 + l->header_size() + 27);
  EXPECT_EQ(l->prefix().back() == ' ' || l->prefix().back() == '}', true);
}

// ---- §2.2 escaping and metadata ---------------------------------------------------------------------

TEST(WriterJson, SerdeEscaping) {
  const std::string name = std::string("q\"b\\s\b\t\n\f\r") + std::string("\x00\x01\x1f\x0b\x1b", 5) + "\x7f/\xc3\xa9\xf0\x9f\x98\x80";
  const std::string escaped = "q\\\"b\\\\s\\b\\t\\n\\f\\r\\u0000\\u0001\\u001f\\u000b\\u001b\x7f/\xc3\xa9\xf0\x9f\x98\x80";
  const std::string json = "{\"" + escaped + "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
  const auto data = hexbytes({42});
  check_vector({{name, TensorType::U8, {1}, data}}, {}, expected_file(json, (8 - json.size() % 8) % 8, data),
               json.size() + (8 - json.size() % 8) % 8);
}

TEST(WriterJson, EveryControlByteEscape) {
  for (int c = 0; c < 0x20; ++c) {
    std::string esc;
    switch (c) {
      case 0x08: esc = "\\b"; break;
      case 0x09: esc = "\\t"; break;
      case 0x0a: esc = "\\n"; break;
      case 0x0c: esc = "\\f"; break;
      case 0x0d: esc = "\\r"; break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        esc = buf;
      }
    }
    const std::string name(1, static_cast<char>(c));
    const std::string bytes = serialize_str({{name, TensorType::U8, {1}, hexbytes({1})}});
    EXPECT_NE(bytes.find("{\"" + esc + "\":"), std::string::npos) << "control byte " << c << ": " << hexdump(bytes);
    auto h = parse(bytes);
    ASSERT_TRUE(IsOk(h));
    EXPECT_NE(h->find(name), nullptr) << c;
  }
}

TEST(WriterJson, MetadataSortedAndEscaped) {
  MetadataEntries md = {{"b", "1"}, {"a", "x\"y\n"}, {"B", "\\"}, {"\xc3\xa9", "\xe4\xb8\xad"}, {"", ""}};
  const std::string json = "{\"__metadata__\":{\"\":\"\",\"B\":\"\\\\\",\"a\":\"x\\\"y\\n\",\"b\":\"1\",\"\xc3\xa9\":\"\xe4\xb8\xad\"}}";
  check_vector({}, md, expected_file(json, (8 - json.size() % 8) % 8, {}), json.size() + (8 - json.size() % 8) % 8);
}

TEST(WriterJson, MetadataFirstEvenWithTensorsSortingBeforeIt) {
  // "A" < "__metadata__" bytewise, but metadata is always written first.
  const std::string bytes = serialize_str({{"A", TensorType::U8, {1}, hexbytes({1})}}, MetadataEntries{{"k", "v"}});
  const std::string head = "{\"__metadata__\":{\"k\":\"v\"},\"A\":";
  EXPECT_EQ(bytes.substr(8, head.size()), head);
}

TEST(WriterJson, PaddingIsSpacesToMultipleOf8) {
  for (std::size_t len = 0; len < 20; ++len) {
    const std::string name(len, 'x');
    const std::string bytes = serialize_str({{name, TensorType::U8, {1}, hexbytes({7})}});
    auto h = parse(bytes);
    ASSERT_TRUE(IsOk(h));
    EXPECT_EQ(h->header_size() % 8, 0u);
    const std::string header = bytes.substr(8, h->header_size());
    const auto close = header.rfind('}');
    ASSERT_NE(close, std::string::npos);
    EXPECT_LT(header.size() - close - 1, 8u);
    EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos) << hexdump(header);
    EXPECT_EQ(bytes.back(), '\x07');
  }
}

TEST(WriterJson, Deterministic) {
  std::vector<Owned> in = {{"w", TensorType::F32, {2}, zeros(8)}, {"b", TensorType::F16, {1}, zeros(2)}};
  MetadataEntries md1 = {{"z", "1"}, {"a", "2"}, {"m", "3"}};
  MetadataEntries md2 = {{"m", "3"}, {"z", "1"}, {"a", "2"}};
  const std::string a = serialize_str(in, md1);
  std::reverse(in.begin(), in.end());
  EXPECT_EQ(serialize_str(in, md2), a);
}

// ---- refusals --------------------------------------------------------------------------------------

TEST(WriterRefuses, ReservedTensorName) {
  std::vector<Owned> in = {{"__metadata__", TensorType::F32, {1}, zeros(4)}};
  auto tv = views(in);
  EXPECT_TRUE(IsKind(st::serialize(tv, {}), K::ReservedTensorName));
  EXPECT_TRUE(IsKind(st::serialize(tv, MetadataEntries{{"a", "b"}}), K::ReservedTensorName));
  std::vector<TensorDecl> decls = {{"__metadata__", TensorType::F32, {1}}};
  EXPECT_TRUE(IsKind(Layout::plan(decls, {}), K::ReservedTensorName));
  TempDir dir;
  EXPECT_TRUE(IsKind(st::write_file(dir.file("x.safetensors"), tv), K::ReservedTensorName));
  EXPECT_TRUE(dir.list().empty());
  // Near misses are ordinary names.
  std::vector<Owned> ok = {{"__metadata", TensorType::F32, {1}, zeros(4)}, {"__metadata__ ", TensorType::F32, {1}, zeros(4)}};
  auto okv = views(ok);
  EXPECT_TRUE(IsOk(st::serialize(okv, {})));
}

TEST(WriterRefuses, DuplicateTensorNames) {
  std::vector<Owned> in = {{"a", TensorType::F32, {1}, zeros(4)}, {"b", TensorType::F32, {1}, zeros(4)}, {"a", TensorType::I8, {2}, zeros(2)}};
  auto tv = views(in);
  EXPECT_TRUE(IsKind(st::serialize(tv, {}), K::DuplicateKey));
  std::vector<TensorDecl> decls = {{"x", TensorType::F32, {1}}, {"x", TensorType::F32, {1}}};
  EXPECT_TRUE(IsKind(Layout::plan(decls, {}), K::DuplicateKey));
}

TEST(WriterRefuses, DuplicateMetadataKeys) {
  std::vector<TensorDecl> decls = {{"x", TensorType::F32, {1}}};
  EXPECT_TRUE(IsKind(Layout::plan(decls, MetadataEntries{{"k", "1"}, {"j", "0"}, {"k", "1"}}), K::DuplicateKey));
  EXPECT_TRUE(IsKind(st::serialize({}, MetadataEntries{{"k", "1"}, {"k", "2"}}), K::DuplicateKey));
}

TEST(WriterRefuses, InvalidUtf8NamesAndMetadata) {
  // The reader would reject such a file with InvalidHeader, so the writer must not write it.
  for (const std::string& bad :
       {std::string("\xff"), std::string("a\xc0\xaf"), std::string("\xed\xa0\x80"), std::string("\xf4\x90\x80\x80"), std::string("x\xe2\x82")}) {
    std::vector<Owned> in = {{bad, TensorType::U8, {1}, zeros(1)}};
    auto tv = views(in);
    auto r = st::serialize(tv, {});
    EXPECT_FALSE(r.is_ok()) << "tensor name " << hexdump(bad);
    auto k = st::serialize({}, MetadataEntries{{bad, "v"}});
    EXPECT_FALSE(k.is_ok()) << "metadata key " << hexdump(bad);
    auto v = st::serialize({}, MetadataEntries{{"k", bad}});
    EXPECT_FALSE(v.is_ok()) << "metadata value " << hexdump(bad);
  }
}

TEST(WriterRefuses, DataSizeMismatch) {
  // The reference writer's kind (TensorView::new), the same from every writer of TensorData: in memory,
  // to a file, and sharded.
  TempDir dir;
  for (std::size_t n : {0u, 15u, 17u, 32u}) {
    std::vector<Owned> in = {{"t", TensorType::I32, {2, 2}, zeros(n)}};
    auto tv = views(in);
    auto r = st::serialize(tv, {});
    ASSERT_FALSE(r.is_ok()) << n;
    EXPECT_EQ(r.error().kind(), K::InvalidTensorView) << describe(r.error());
    safeweights::Status f = st::write_file(dir.file("t.safetensors"), tv);
    ASSERT_FALSE(f.is_ok());
    EXPECT_EQ(f.error().kind(), K::InvalidTensorView) << describe(f.error());
    auto sh = st::write_sharded(dir.path(), tv);
    ASSERT_FALSE(sh.is_ok());
    EXPECT_EQ(sh.error().kind(), K::InvalidTensorView) << describe(sh.error());
  }
  std::vector<Owned> zero = {{"t", TensorType::F32, {0, 3}, zeros(4)}};
  auto zv = views(zero);
  EXPECT_FALSE(st::serialize(zv, {}).is_ok());
}

TEST(WriterRefuses, SubByteMisaligned) {
  const std::vector<std::pair<TensorType, int>> bad = {{TensorType::F4, 3}, {TensorType::F4, 1}, {TensorType::F6_E2M3, 2}, {TensorType::F6_E3M2, 6}};
  for (auto [dt, n] : bad) {
    std::vector<TensorDecl> decls = {{"t", dt, {static_cast<std::uint64_t>(n)}}};
    EXPECT_TRUE(IsKind(Layout::plan(decls, {}), K::MisalignedSlice)) << safeweights::type_name(dt) << " " << n;
  }
  std::vector<TensorDecl> scalar = {{"t", TensorType::F4, {}}};
  EXPECT_TRUE(IsKind(Layout::plan(scalar, {}), K::MisalignedSlice));
  std::vector<TensorDecl> ok = {{"a", TensorType::F4, {3, 2}}, {"b", TensorType::F6_E2M3, {4}}, {"c", TensorType::F6_E3M2, {2, 4}}};
  auto l = Layout::plan(ok, {});
  ASSERT_TRUE(IsOk(l));
  EXPECT_EQ(l->data_size(), 3u + 3u + 6u);
}

TEST(WriterRefuses, ValidationOverflow) {
  const std::uint64_t big = std::uint64_t{1} << 62;
  for (auto shape : {std::vector<std::uint64_t>{2, 18446744073709551614ull}, std::vector<std::uint64_t>{2, 9223372036854775807ull},
                     std::vector<std::uint64_t>{big, 8}}) {
    std::vector<TensorDecl> decls = {{"t", TensorType::F32, shape}};
    EXPECT_TRUE(IsKind(Layout::plan(decls, {}), K::ValidationOverflow));
  }
  // Tensors whose sizes fit separately (2^61-1 bytes each) but whose offsets do not: 9 of them pass
  // 2^64 bytes of data; 8 of them fit in the data section but not in a file with its header.
  const std::uint64_t each = (std::uint64_t{1} << 61) - 1;
  std::vector<TensorDecl> many;
  for (int i = 0; i < 9; ++i) many.push_back({"t" + std::to_string(i), TensorType::U8, {each}});
  auto r = Layout::plan(many, {});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().kind(), K::ValidationOverflow) << describe(r.error());
  many.pop_back();
  auto r8 = Layout::plan(many, {});
  EXPECT_FALSE(r8.is_ok()) << "data_size " << (r8.is_ok() ? r8->data_size() : 0) << " + prefix overflows file_size";
}

TEST(WriterRefuses, HeaderTooLarge) {
  // Reference #669: a padded header above 100,000,000 bytes is refused on write.
  MetadataEntries md = {{"k", std::string(st::kMaxHeaderSize, 'a')}};
  EXPECT_TRUE(IsKind(Layout::plan({}, md), K::HeaderTooLarge));
}

// ---- serialize / write_file agree with the reader ----------------------------------------------------

TEST(WriterFile, WriteFileEqualsSerialize) {
  std::vector<Owned> in = {{"w", TensorType::F32, {2, 3}, f32s({1, 2, 3, 4, 5, 6})}, {"b", TensorType::BF16, {3}, hexbytes({1, 2, 3, 4, 5, 6})}};
  auto tv = views(in);
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  ASSERT_TRUE(IsOk(st::write_file(path, tv, MetadataEntries{{"format", "pt"}})));
  EXPECT_EQ(read_file_bytes(path), serialize_str(in, MetadataEntries{{"format", "pt"}}));
  auto r = st::Reader::open(path);
  ASSERT_TRUE(IsOk(r));
  EXPECT_EQ(r->header().metadata_value("format"), std::optional<std::string_view>("pt"));
  auto w = r->tensor("w").value()->read_owned();
  ASSERT_TRUE(IsOk(w));
  EXPECT_EQ(to_string(*w), to_string(in[0].bytes));
  EXPECT_EQ(dir.list(), std::vector<std::string>{"m.safetensors"});
}

TEST(WriterFile, SinkWritesInTheReferencesOrderWhateverTheDeclaredOrder) {
  // Declared U8 then F32, "a" before "b": the file holds F32 first (dtype descending), then by name.
  std::vector<Owned> in = {
      {"u", TensorType::U8, {3}, hexbytes({7, 8, 9})}, {"b", TensorType::F32, {1}, f32s({2})}, {"a", TensorType::F32, {1}, f32s({1})}};
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  std::vector<TensorDecl> decls;
  for (const auto& o : in) decls.push_back({o.name, o.dtype, o.shape});
  auto sink = st::create(path, decls);
  ASSERT_TRUE(IsOk(sink));
  for (const auto& o : in) ASSERT_TRUE(IsOk((*sink)->write(o.name, o.bytes)));
  ASSERT_TRUE(IsOk((*sink)->finish()));
  const std::string bytes = read_file_bytes(path);
  EXPECT_EQ(bytes, serialize_str(in));
  auto h = parse(bytes);
  ASSERT_TRUE(IsOk(h));
  std::vector<std::string> order;
  for (const auto& t : h->tensors()) order.emplace_back(t.name);
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "u"}));
}

TEST(WriterFile, LayoutPrefixMatchesSerialize) {
  std::vector<Owned> in = {{"x", TensorType::I64, {2}, zeros(16)}, {"y", TensorType::U8, {5}, zeros(5)}};
  std::vector<TensorDecl> decls;
  for (const auto& o : in) decls.push_back({o.name, o.dtype, o.shape});
  auto l = Layout::plan(decls, MetadataEntries{{"a", "b"}});
  ASSERT_TRUE(IsOk(l));
  const std::string bytes = serialize_str(in, MetadataEntries{{"a", "b"}});
  EXPECT_EQ(bytes.substr(0, l->prefix().size()), l->prefix());
  EXPECT_EQ(bytes.size(), l->file_size());
}

TEST(WriterFile, WriteIntoMissingFolderFails) {
  std::vector<Owned> in = {{"w", TensorType::U8, {1}, zeros(1)}};
  auto tv = views(in);
  TempDir dir;
  auto s = st::write_file(dir.file("no/such/folder/m.safetensors"), tv);
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(s.error().kind() == K::IoError || s.error().kind() == K::FileNotFound) << describe(s.error());
}

}  // namespace
