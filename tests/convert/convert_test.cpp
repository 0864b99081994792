// convert() through the library API, for what the CLI does not show: the report's decisions and notes,
// progress calls, renamed tensor lists, carry_metadata, gguf_kv overriding carried pairs, and refusals
// that leave no file; convert_path's routing of a folder of .bin weights and its refusals, and the format
// a name claims. Values are checked by tests/convert/test_convert.py against numpy and gguf-py, and the
// .bin folder conversions by transformers in tests/clients/test_bin_folder_clients.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <tuple>
#include <vector>

#include "test_util.h"
#include "safeweights/convert.h"
#include "safeweights/gguf.h"
#include "safeweights/quantize.h"
#include "safeweights/safetensors_writer.h"

namespace safeweights {
namespace {

using swt::TempDir;

// x: F32 [2, 48] (rows that are not whole 32-blocks), v: F32 [32], i: I32 [2]; metadata {"format": "pt"}.
std::string write_input(const TempDir& dir) {
  static const std::vector<float> x(96, 0.5f), v(32, 1.0f);
  static const std::int32_t i[2] = {1, 2};
  std::vector<safetensors::TensorData> t = {
      {"x", TensorType::F32, {2, 48}, std::as_bytes(std::span(x))},
      {"v", TensorType::F32, {32}, std::as_bytes(std::span(v))},
      {"i", TensorType::I32, {2}, std::as_bytes(std::span(i))},
  };
  const std::string path = dir.file("in.safetensors");
  EXPECT_TRUE(safetensors::write_file(path, t, MetadataEntries{{"format", "pt"}}).is_ok());
  return path;
}

Result<std::unique_ptr<TensorFile>> open_input(const TempDir& dir) { return open_tensors(write_input(dir)); }

TEST(Convert, ReportNamesEveryDecision) {
  TempDir dir;
  auto in = open_input(dir);
  ASSERT_TRUE(in.is_ok());
  ConvertOptions options;
  options.type = TensorType::Q8_0;
  std::vector<std::size_t> calls;
  options.progress = [&](std::size_t tensors, std::uint64_t) { calls.push_back(tensors); };
  auto report = convert(**in, dir.file("out.gguf"), options);
  ASSERT_TRUE(report.is_ok()) << report.error().to_string();
  ASSERT_EQ(report->tensors.size(), 3u);
  // File order of a safetensors file: by dtype, then name (F32 x, v before I32 i).
  std::map<std::string, ConvertedTensor> by_name;
  for (const ConvertedTensor& t : report->tensors) by_name[t.name] = t;
  EXPECT_EQ(by_name["x"].to, TensorType::F16);
  EXPECT_EQ(by_name["x"].note, "rows of 48 are not a multiple of 32");
  EXPECT_EQ(by_name["v"].to, TensorType::F32);
  EXPECT_EQ(by_name["v"].note, "1-D");
  EXPECT_EQ(by_name["i"].to, TensorType::I32);
  EXPECT_EQ(by_name["i"].note, "I32 is kept");
  EXPECT_EQ(calls, (std::vector<std::size_t>{1, 2, 3}));
  EXPECT_EQ(report->bytes_written, 96u * 2 + 32 * 4 + 2 * 4);
}

TEST(Convert, TensorListRenamesAndCarriesMetadataUnlessAsked) {
  TempDir dir;
  auto in = open_input(dir);
  ASSERT_TRUE(in.is_ok());
  ConvertOptions options;
  options.plan.tensors = {{.source = "v", .name = "norm.weight"}};
  options.plan.metadata = Metadata({{"safetensors.format", MetaValue::string("gguf")}, {"general.architecture", MetaValue::string("llama")}});
  ASSERT_TRUE(convert(**in, dir.file("a.gguf"), options).is_ok());
  auto a = gguf::open(dir.file("a.gguf"));
  ASSERT_TRUE(a.is_ok());
  ASSERT_EQ((*a)->tensors().size(), 1u);
  EXPECT_EQ((*a)->tensors()[0].name, "norm.weight");
  ASSERT_EQ((*a)->kv().size(), 2u);  // the carried pair replaced in place, the new one appended
  EXPECT_EQ((*a)->kv()[0].key, "safetensors.format");
  EXPECT_EQ((*a)->kv()[0].value.str, "gguf");
  EXPECT_EQ((*a)->kv()[1].key, "general.architecture");

  options.carry_metadata = false;
  options.plan.metadata = {};
  ASSERT_TRUE(convert(**in, dir.file("b.gguf"), options).is_ok());
  auto b = gguf::open(dir.file("b.gguf"));
  ASSERT_TRUE(b.is_ok());
  EXPECT_TRUE((*b)->kv().empty());
}

TEST(Convert, RefusalsLeaveNoFile) {
  TempDir dir;
  auto in = open_input(dir);
  ASSERT_TRUE(in.is_ok());
  ConvertOptions missing;
  missing.plan.tensors = {{.source = "nope", .name = "x"}};
  auto r = convert(**in, dir.file("m.gguf"), missing);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::TensorNotFound);
  ConvertOptions permute;
  permute.plan.tensors = {{.source = "x", .name = "x", .permute_heads = 3}};  // 2 rows cannot hold 3 heads of row pairs
  r = convert(**in, dir.file("p.gguf"), permute);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::InvalidArgument);
  r = convert(**in, dir.file("out.bin"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::InvalidArgument);
  EXPECT_EQ(dir.list(), std::vector<std::string>{"in.safetensors"});
}

// A mapped input is converted in place (the pieces' values read from the mapping, no copy): a file
// truncated under the conversion is an IoError naming it, not SIGBUS, and leaves no output. The
// progress call after the first tensor cuts the file inside the second one.
TEST(Convert, AnInputTruncatedWhileReadInPlaceIsAnError) {
  TempDir dir;
  static const std::vector<float> a(32 * 32, 0.25f), b(64 * 1024, 0.5f);
  std::vector<safetensors::TensorData> t = {{"a", TensorType::F32, {32, 32}, std::as_bytes(std::span(a))},
                                            {"b", TensorType::F32, {64, 1024}, std::as_bytes(std::span(b))}};
  const std::string path = dir.file("in.safetensors");
  ASSERT_TRUE(safetensors::write_file(path, t).is_ok());
  auto in = open_tensors(path);  // mapped (FormatOptions' default backend)
  ASSERT_TRUE(in.is_ok());
  ASSERT_NE((*in)->tensors()[1].source->mapped(), nullptr);
  ConvertOptions options;
  options.type = TensorType::Q8_0;
  options.progress = [&](std::size_t tensors, std::uint64_t) {
    if (tensors == 1) std::filesystem::resize_file(path, std::filesystem::file_size(path) - 128 * 1024);
  };
  auto r = convert(**in, dir.file("out.gguf"), options);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::IoError);
  EXPECT_NE(r.error().message().find("shrank"), std::string::npos) << r.error().to_string();
  EXPECT_EQ(r.error().context().file, path);
  EXPECT_EQ(dir.list(), std::vector<std::string>{"in.safetensors"});
}

// Per-expert tensors stacked (each 1.5 Mi elements, not adjacent in the file: another expert's tensor
// lies between) are converted in pieces cut at the experts, each read in place from the mapping, and in
// 4 Mi-element pieces gathered across experts when read with pread; a fused slice ([E, 2F, H]'s first
// F rows of each expert) the same way. Both give the bytes of the same values as one plain tensor.
TEST(Convert, PiecesCutAtTheExpertsGiveTheBytesOfOneTensor) {
  TempDir dir;
  constexpr std::uint64_t kExperts = 3, kRows = 768, kCols = 2048, kExpert = kRows * kCols;
  std::vector<std::uint16_t> values(kExperts * kExpert), other(kExpert, 0x3f80);  // BF16
  std::uint32_t state = 7;
  for (auto& v : values) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<std::uint16_t>(0x3c00u + (state >> 23));
  }
  std::vector<std::uint16_t> fused(kExperts * 2 * kExpert, 0xbf80);  // [E, 2F, H]: the gate half is `values`
  for (std::uint64_t e = 0; e < kExperts; ++e) std::memcpy(&fused[e * 2 * kExpert], &values[e * kExpert], kExpert * 2);
  std::vector<safetensors::TensorData> t = {{"all", TensorType::BF16, {kExperts, kRows, kCols}, std::as_bytes(std::span(values))},
                                            {"fused", TensorType::BF16, {kExperts, 2 * kRows, kCols}, std::as_bytes(std::span(fused))}};
  std::vector<std::string> names;
  for (std::uint64_t e = 0; e < kExperts; ++e) {
    names.push_back("e" + std::to_string(e) + ".gate");
    names.push_back("e" + std::to_string(e) + ".up");  // between this expert's gate and the next one's
  }
  for (std::uint64_t e = 0; e < kExperts; ++e) {
    t.push_back({names[2 * e], TensorType::BF16, {kRows, kCols}, std::as_bytes(std::span(values).subspan(e * kExpert, kExpert))});
    t.push_back({names[2 * e + 1], TensorType::BF16, {kRows, kCols}, std::as_bytes(std::span(other))});
  }
  const std::string path = dir.file("experts.safetensors");
  ASSERT_TRUE(safetensors::write_file(path, t).is_ok());
  ConvertOptions plain;
  plain.type = TensorType::Q8_0;
  plain.plan.tensors = {{.source = "all", .name = "exps"}};
  ConvertOptions stacked = plain;
  stacked.plan.tensors = {{.name = "exps", .stack = true}};
  for (std::uint64_t e = 0; e < kExperts; ++e) stacked.plan.tensors[0].pieces.push_back({.source = names[2 * e]});
  ConvertOptions sliced = plain;
  sliced.plan.tensors = {{.name = "exps", .pieces = {{.source = "fused", .dim = 1, .begin = 0, .end = kRows}}}};
  std::map<std::string, std::string> bytes;
  for (FileBackend backend : {FileBackend::Mmap, FileBackend::Pread}) {
    FormatOptions how;
    how.backend = backend;
    auto in = open_tensors(path, {}, how);
    ASSERT_TRUE(in.is_ok());
    for (const auto& [name, options] : {std::pair{"plain", &plain}, {"stacked", &stacked}, {"sliced", &sliced}}) {
      const std::string out = dir.file(std::string(name) + (backend == FileBackend::Mmap ? ".mmap" : ".pread") + ".gguf");
      auto r = convert(**in, out, *options);
      ASSERT_TRUE(r.is_ok()) << name << ": " << r.error().to_string();
      bytes[out] = swt::read_file_bytes(out);
    }
  }
  const std::string& want = bytes[dir.file("plain.mmap.gguf")];
  ASSERT_FALSE(want.empty());
  for (const auto& [out, got] : bytes) EXPECT_TRUE(got == want) << out;
}

// A tensor of three pieces (the converter's pieces are 4 Mi elements; the last one is partial) with a
// few non-finite blocks, converted with 1, 2 and 3 threads: the pipeline (piece k converted while k - 1
// is written and k + 1 read) gives the same bytes whatever the threads. The permuted copy that keeps
// its type goes through the same pipeline; its rows are checked against llama.cpp's permute() here.
TEST(Convert, BytesDoNotDependOnThreads) {
  TempDir dir;
  constexpr std::uint64_t kRows = 2312, kCols = 4096, kHeads = 4;
  std::vector<std::uint16_t> w(kRows * kCols);  // BF16
  std::uint32_t state = 1;
  for (auto& v : w) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<std::uint16_t>(0x3c00u + (state >> 23));  // 2^-7 .. 2^2, both signs
  }
  w[5 * kCols + 70] = 0x7fc0;    // NaN
  w[1000 * kCols + 3] = 0xff80;  // -inf
  std::vector<safetensors::TensorData> t = {{"w", TensorType::BF16, {kRows, kCols}, std::as_bytes(std::span(w))}};
  const std::string path = dir.file("big.safetensors");
  ASSERT_TRUE(safetensors::write_file(path, t).is_ok());
  auto in = open_tensors(path);
  ASSERT_TRUE(in.is_ok());

  std::string q8[3], permuted[3];
  for (unsigned threads = 1; threads <= 3; ++threads) {
    ConvertOptions options;
    options.threads = threads;
    options.type = TensorType::Q8_0;
    const std::string a = dir.file("q" + std::to_string(threads) + ".gguf");
    ASSERT_TRUE(convert(**in, a, options).is_ok());
    q8[threads - 1] = swt::read_file_bytes(a);
    ConvertOptions keep;
    keep.threads = threads;
    keep.plan.tensors = {{.source = "w", .name = "w", .permute_heads = kHeads}};
    const std::string b = dir.file("p" + std::to_string(threads) + ".gguf");
    ASSERT_TRUE(convert(**in, b, keep).is_ok());
    permuted[threads - 1] = swt::read_file_bytes(b);
  }
  EXPECT_TRUE(q8[1] == q8[0] && q8[2] == q8[0]);
  // The same bytes read through buffers (pread) as read in place from the mapping.
  FormatOptions pread;
  pread.backend = FileBackend::Pread;
  auto buffered = open_tensors(path, {}, pread);
  ASSERT_TRUE(buffered.is_ok());
  ConvertOptions options;
  options.type = TensorType::Q8_0;
  ASSERT_TRUE(convert(**buffered, dir.file("pread.gguf"), options).is_ok());
  EXPECT_TRUE(swt::read_file_bytes(dir.file("pread.gguf")) == q8[0]);
  EXPECT_TRUE(permuted[1] == permuted[0] && permuted[2] == permuted[0]);

  auto g = gguf::open(dir.file("p1.gguf"));
  ASSERT_TRUE(g.is_ok());
  const TensorEntry& e = (*g)->tensors()[0];
  std::vector<std::byte> got(e.nbytes);
  ASSERT_TRUE(e.source->read_at(e.offset, got).is_ok());
  const std::uint64_t d = kRows / kHeads, row = kCols * 2;
  for (std::uint64_t r = 0; r < kRows; ++r) {
    const std::uint64_t h = r / d, o = r % d, from = h * d + (o % 2) * (d / 2) + o / 2;
    ASSERT_EQ(std::memcmp(got.data() + r * row, reinterpret_cast<const std::byte*>(w.data()) + from * row, row), 0) << r;
  }
}

TEST(Compare, StatisticsAndNonFinite) {
  TempDir dir;
  const std::vector<float> a = {1, 2, NAN, INFINITY, 0}, b = {1, 4, NAN, -INFINITY, 0};
  ASSERT_TRUE(safetensors::write_file(dir.file("a.safetensors"),
                                      std::vector<safetensors::TensorData>{{"t", TensorType::F32, {5}, std::as_bytes(std::span(a))}})
                  .is_ok());
  ASSERT_TRUE(safetensors::write_file(dir.file("b.safetensors"),
                                      std::vector<safetensors::TensorData>{{"t", TensorType::F32, {5}, std::as_bytes(std::span(b))}})
                  .is_ok());
  auto fa = open_tensors(dir.file("a.safetensors"));
  auto fb = open_tensors(dir.file("b.safetensors"));
  ASSERT_TRUE(fa.is_ok() && fb.is_ok());
  auto d = compare_tensors((*fa)->tensors()[0], (*fb)->tensors()[0]);
  ASSERT_TRUE(d.is_ok()) << d.error().to_string();
  EXPECT_EQ(d->elements, 5u);
  EXPECT_EQ(d->max_abs, 2.0);
  EXPECT_DOUBLE_EQ(d->rmse, std::sqrt(4.0 / 3));  // over the three finite positions
  EXPECT_DOUBLE_EQ(d->cosine, 9 / (std::sqrt(5.0) * std::sqrt(17.0)));
  EXPECT_EQ(d->nonfinite_mismatches, 1u);  // NaN vs NaN is equal; +inf vs -inf is not
  EXPECT_FALSE(d->identical());
}

// compare_tensors over two one-tensor safetensors files of the given types and raw values.
template <typename A, typename B>
TensorDiff compare_values(TensorType ta, const std::vector<A>& a, TensorType tb, const std::vector<B>& b) {
  TempDir dir;
  const std::uint64_t na = a.size(), nb = b.size();
  EXPECT_TRUE(
      safetensors::write_file(dir.file("a.safetensors"), std::vector<safetensors::TensorData>{{"t", ta, {na}, std::as_bytes(std::span(a))}}).is_ok());
  EXPECT_TRUE(
      safetensors::write_file(dir.file("b.safetensors"), std::vector<safetensors::TensorData>{{"t", tb, {nb}, std::as_bytes(std::span(b))}}).is_ok());
  auto fa = open_tensors(dir.file("a.safetensors"));
  auto fb = open_tensors(dir.file("b.safetensors"));
  EXPECT_TRUE(fa.is_ok() && fb.is_ok());
  auto d = compare_tensors((*fa)->tensors()[0], (*fb)->tensors()[0]);
  EXPECT_TRUE(d.is_ok()) << d.error().to_string();
  return *d;
}

// Integers above 2^53 are one double apart or none: compared as integers, [2^62] and [2^62 + 1] differ by 1.
TEST(Compare, IntegersAreExactAtEveryWidth) {
  const std::vector<std::int64_t> i64a = {std::int64_t{1} << 62, INT64_MIN}, i64b = {(std::int64_t{1} << 62) + 1, INT64_MIN};
  TensorDiff d = compare_values(TensorType::I64, i64a, TensorType::I64, i64b);
  EXPECT_EQ(d.differing, 1u);
  EXPECT_FALSE(d.identical());
  EXPECT_EQ(d.max_abs, 1.0);
  EXPECT_EQ(d.rmse, std::sqrt(0.5));
  const std::vector<std::uint64_t> u64a = {UINT64_MAX}, u64b = {UINT64_MAX - 3};
  d = compare_values(TensorType::U64, u64a, TensorType::U64, u64b);
  EXPECT_EQ(d.differing, 1u);
  EXPECT_EQ(d.max_abs, 3.0);
  // U64 against I64: 2^64 - 1 - (-2^63), as a double (2^64 + 2^63 rounds to itself).
  const std::vector<std::int64_t> low = {INT64_MIN};
  d = compare_values(TensorType::U64, u64a, TensorType::I64, low);
  EXPECT_EQ(d.max_abs, 27670116110564327424.0);
  // An integer against the double it rounds to.
  const std::vector<std::int64_t> odd = {(std::int64_t{1} << 53) + 1};
  const std::vector<double> rounded = {9007199254740992.0};
  d = compare_values(TensorType::I64, odd, TensorType::F64, rounded);
  EXPECT_EQ(d.differing, 1u);
  EXPECT_EQ(d.max_abs, 1.0);
  const std::vector<double> half = {9007199254740992.0 / 4 + 0.5};
  const std::vector<std::int64_t> whole = {(std::int64_t{1} << 51) + 1};
  d = compare_values(TensorType::F64, half, TensorType::I64, whole);
  EXPECT_EQ(d.max_abs, 0.5);
  const std::vector<std::uint8_t> b1 = {1, 0, 1}, b2 = {1, 1, 1};
  d = compare_values(TensorType::BOOL, b1, TensorType::BOOL, b2);
  EXPECT_EQ(d.differing, 1u);
  EXPECT_TRUE(compare_values(TensorType::BOOL, b1, TensorType::BOOL, b1).identical());
  const std::vector<std::int8_t> s8a = {-128, 127}, s8b = {-128, 127};
  EXPECT_TRUE(compare_values(TensorType::I8, s8a, TensorType::I8, s8b).identical());
}

// Values near the largest double: differences, norms and the cosine computed without overflow.
TEST(Compare, F64NearTheLargestDouble) {
  const std::vector<double> a = {1e308, 5}, b = {-1e308, 5};
  TensorDiff d = compare_values(TensorType::F64, a, TensorType::F64, b);
  EXPECT_EQ(d.differing, 1u);
  EXPECT_EQ(d.scale_exp2, 1);  // 2e308 is past the largest double: stated in halves
  EXPECT_EQ(d.max_abs, 1e308);
  EXPECT_DOUBLE_EQ(d.rmse, 1e308 / std::sqrt(2.0));
  EXPECT_EQ(d.cosine, -1.0);
  const std::vector<double> c = {1.5e308, 1e308}, e = {1.5e308, 0.5e308};
  d = compare_values(TensorType::F64, c, TensorType::F64, e);
  EXPECT_EQ(d.scale_exp2, 0);
  EXPECT_EQ(d.max_abs, 0.5e308);
  EXPECT_DOUBLE_EQ(d.rmse, 0.5e308 / std::sqrt(2.0));
  // a.b / (|a| |b|) = (2.25 + 0.5) / sqrt(3.25 * 2.5), in units of 1e616.
  EXPECT_DOUBLE_EQ(d.cosine, 2.75 / std::sqrt(3.25 * 2.5));
  // Parallel vectors: exactly 1 at most, whatever the rounding of the sums.
  const std::vector<double> p = {0.1, 0.7, 1e-3, 3.3}, q = {0.3, 2.1, 3e-3, 9.9};
  d = compare_values(TensorType::F64, p, TensorType::F64, q);
  EXPECT_LE(d.cosine, 1.0);
  EXPECT_NEAR(d.cosine, 1.0, 1e-15);
}

// A GGUF v3 file of F32 tensors of 2 elements and STRING pairs, bytes as given (ggml reads names and
// strings that are not UTF-8).
std::string raw_gguf(const TempDir& dir, const std::vector<std::pair<std::string, std::string>>& kv, const std::vector<std::string>& names) {
  std::string b = "GGUF";
  const auto u32 = [&](std::uint32_t v) { b.append(reinterpret_cast<const char*>(&v), 4); };
  const auto u64 = [&](std::uint64_t v) { b.append(reinterpret_cast<const char*>(&v), 8); };
  const auto str = [&](const std::string& s) { u64(s.size()), b += s; };
  u32(3), u64(names.size()), u64(kv.size());
  for (const auto& [k, v] : kv) str(k), u32(8), str(v);
  for (std::size_t i = 0; i < names.size(); ++i) str(names[i]), u32(1), u64(2), u32(0), u64(32 * i);
  b.resize((b.size() + 31) / 32 * 32, '\0');
  for (std::size_t i = 0; i < names.size(); ++i) b += std::string(32, '\0');
  const std::string path = dir.file("in.gguf");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(b.data(), 1, b.size(), f);
  std::fclose(f);
  return path;
}

// What the output format cannot hold is the input's content: Unrepresentable (not InvalidArgument, a
// usage error), naming the input file and the tensor or key.
TEST(Convert, WhatTheOutputCannotHoldBlamesTheInput) {
  TempDir dir;
  const std::vector<float> two(2, 0.f), one(1, 0.f);
  const std::string long_name(64, 'n');
  const std::string in = dir.file("in.safetensors");
  ASSERT_TRUE(
      safetensors::write_file(in, std::vector<safetensors::TensorData>{{long_name, TensorType::F32, {2}, std::as_bytes(std::span(two))},
                                                                       {"r", TensorType::F32, {1, 1, 1, 1, 1}, std::as_bytes(std::span(one))}})
          .is_ok());
  auto file = open_tensors(in);
  ASSERT_TRUE(file.is_ok());
  auto r = convert(**file, dir.file("out.gguf"), {});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().to_string(), in + ": Unrepresentable: a GGUF tensor name has at most 63 bytes (tensor `" + long_name + "`)");
  ConvertOptions only_r;
  only_r.plan.tensors = {{.source = "r", .name = "r"}};
  r = convert(**file, dir.file("out.gguf"), only_r);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().to_string(), in + ": Unrepresentable: a GGUF tensor has at most 4 dimensions (tensor `r`)");
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.gguf")));

  // A GGUF name or key that is not UTF-8 is refused by the reader already (the input is invalid GGUF);
  // a string value is not checked there, and the safetensors writer, whose header is JSON, refuses it.
  const std::string g = raw_gguf(dir, {}, {"w\xff"});
  auto gf = open_tensors(g);
  ASSERT_FALSE(gf.is_ok());
  EXPECT_EQ(gf.error().kind(), ErrorKind::InvalidGguf);
  EXPECT_EQ(gf.error().context().file, g);
  for (const auto& [kv, message] : std::vector<std::pair<std::pair<std::string, std::string>, std::string>>{
           {{"safetensors.note", "v\xfe"}, "the value of metadata key `note` is not valid UTF-8: a safetensors header is JSON text"}}) {
    TempDir d2;
    gf = open_tensors(raw_gguf(d2, {kv}, {"w"}));
    ASSERT_TRUE(gf.is_ok()) << gf.error().to_string();
    r = convert(**gf, d2.file("out.safetensors"), {});
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.error().kind(), ErrorKind::Unrepresentable);
    EXPECT_EQ(r.error().context().file, d2.file("in.gguf"));
    EXPECT_EQ(r.error().message(), message);
  }
}

// llama.cpp's fallbacks are GGUF's (Format::stored_type): a safetensors output asked for a block type
// refuses it for every tensor that would take it, rows that are not whole blocks included, where it
// used to write such a tensor as llama.cpp's F16 fallback (and a file of only such tensors, whole).
TEST(Convert, ASafetensorsOutputTakesNoLlamaCppFallback) {
  TempDir dir;
  auto in = open_input(dir);  // x: F32 [2, 48], v: 1-D, i: I32
  ASSERT_TRUE(in.is_ok());
  ConvertOptions options;
  options.type = TensorType::Q4_0;
  auto r = convert(**in, dir.file("out.safetensors"), options);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().to_string(),
            dir.file("in.safetensors") + ": InvalidArgument: safetensors cannot hold Q4_0 (write a .gguf, or --type f32, f16 or bf16) (tensor `x`)");
  EXPECT_EQ(dir.list(), std::vector<std::string>{"in.safetensors"});
  // The policy every output shares stays: 1-D tensors F32, integers kept.
  ConvertOptions plain;
  plain.type = TensorType::Q4_0;
  plain.plan.tensors = {{.source = "v", .name = "v"}, {.source = "i", .name = "i"}};
  auto kept = convert(**in, dir.file("kept.safetensors"), plain);
  ASSERT_TRUE(kept.is_ok()) << kept.error().to_string();
  EXPECT_EQ(kept->tensors[0].to, TensorType::F32);
  EXPECT_EQ(kept->tensors[0].note, "1-D");
  EXPECT_EQ(kept->tensors[1].to, TensorType::I32);
}

// The conversion hooks of the formats written: GGUF's are llama.cpp's, the others' the neutral defaults.
TEST(FormatHooks, StoredTypeIsTheOutputFormats) {
  const Format* gguf_out = find_format("gguf");
  const Format* st_out = find_format("safetensors");
  ASSERT_NE(gguf_out, nullptr);
  ASSERT_NE(st_out, nullptr);
  const std::vector<std::uint64_t> rows_288 = {4, 288}, rows_40 = {4, 40}, rows_256 = {4, 256};
  const std::tuple<TensorType, std::vector<std::uint64_t>, TensorType, std::string> gguf_cases[] = {
      {TensorType::Q4_K, rows_256, TensorType::Q4_K, ""},
      {TensorType::Q4_K, rows_288, TensorType::Q5_0, "rows of 288 are not a multiple of 256"},
      {TensorType::Q5_K, rows_288, TensorType::Q5_1, "rows of 288 are not a multiple of 256"},
      {TensorType::Q6_K, rows_288, TensorType::Q8_0, "rows of 288 are not a multiple of 256"},
      {TensorType::Q6_K, rows_40, TensorType::F16, "rows of 40 are not a multiple of 256"},
      {TensorType::Q4_0, rows_40, TensorType::F16, "rows of 40 are not a multiple of 32"},
      {TensorType::F16, rows_40, TensorType::F16, ""},
  };
  for (const auto& [want, shape, stored, note] : gguf_cases) {
    const StoredType got = gguf_out->stored_type(want, shape);
    EXPECT_EQ(got.type, stored) << type_name(want) << " " << shape[1];
    EXPECT_EQ(got.note, note) << type_name(want) << " " << shape[1];
  }
  // Q2_K's fallback is Q4_0 at the pinned llama.cpp (llama-quant.cpp), IQ4_NL quantizer or not.
  EXPECT_EQ(gguf_out->stored_type(TensorType::Q2_K, rows_288).type, TensorType::Q4_0);
  const StoredType st = st_out->stored_type(TensorType::Q4_0, rows_40);
  EXPECT_EQ(st.type, TensorType::Q4_0);
  EXPECT_EQ(st.note, "");
}

TEST(FormatHooks, OnlyDdufHasMembers) {
  for (const Format* f : formats()) EXPECT_EQ(f->has_members(), f->name() == "dduf") << f->name();
}

TEST(FormatHooks, RetypeMetadataIsGgufsFileType) {
  const Metadata given({{"general.architecture", MetaValue::string("llama")}, {"general.file_type", MetaValue::u32(1)}});
  Metadata md = given;
  find_format("gguf")->retype_metadata(md, TensorType::Q8_0);
  ASSERT_EQ(md.size(), 2u);
  EXPECT_EQ(md.entries()[1].key, "general.file_type");  // in place
  EXPECT_EQ(md.entries()[1].value, MetaValue::u32(7));
  find_format("gguf")->retype_metadata(md, TensorType::BF16);
  EXPECT_EQ(*md.find("general.file_type"), MetaValue::u32(32));
  Metadata none({{"general.architecture", MetaValue::string("llama")}});
  find_format("gguf")->retype_metadata(none, TensorType::Q8_0);
  EXPECT_EQ(none.find("general.file_type"), nullptr);  // only an existing file type follows
  md = given;
  find_format("safetensors")->retype_metadata(md, TensorType::F16);
  EXPECT_EQ(md, given);
}

// A folder with a pytorch_model.bin that is not a checkpoint: routing is decided before it is read.
std::string fake_bin_folder(const TempDir& dir) {
  const std::string folder = dir.file("bin");
  std::filesystem::create_directory(folder);
  for (const char* name : {"pytorch_model.bin", "config.json"}) {
    std::FILE* f = std::fopen((folder + "/" + name).c_str(), "wb");
    std::fputs("{}", f);
    std::fclose(f);
  }
  return folder;
}

TEST(ConvertPath, BinFolderRefusesNamesThatAreNeitherFileNorFolder) {
  TempDir dir;
  const std::string in = fake_bin_folder(dir);
  for (const char* name : {"out.bin", "model-v1.5", "out.json"}) {
    auto r = convert_path(in, dir.file(name), {});
    ASSERT_FALSE(r.is_ok()) << name;
    EXPECT_EQ(r.error().kind(), ErrorKind::InvalidArgument) << name;
    EXPECT_NE(r.error().message().find("name a new folder without a `.`"), std::string::npos) << r.error().message();
  }
  // An existing folder named like a file is not written into, whatever it holds.
  std::filesystem::create_directory(dir.file("old.gguf"));
  auto r = convert_path(in, dir.file("old.gguf"), {});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::InvalidArgument);
  EXPECT_NE(r.error().message().find("named like a gguf file"), std::string::npos) << r.error().message();
  // Nor is a new one named like a file because the name ends in `/`.
  auto slash = convert_path(in, dir.file("new.safetensors/"), {});
  ASSERT_FALSE(slash.is_ok());
  EXPECT_NE(slash.error().message().find("named like a safetensors file"), std::string::npos) << slash.error().message();
  EXPECT_EQ(dir.list(), (std::vector<std::string>{"bin", "old.gguf"}));
}

TEST(ConvertPath, BinFolderToFolderIsWholeOrAbsent) {
  TempDir dir;
  const std::string in = fake_bin_folder(dir);
  // A non-empty output folder is refused before anything is read.
  std::filesystem::create_directory(dir.file("full"));
  std::fclose(std::fopen(dir.file("full/keep").c_str(), "wb"));
  auto r = convert_path(in, dir.file("full"), {});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::InvalidArgument);
  EXPECT_NE(r.error().message().find("not empty"), std::string::npos);
  // A folder name (no `.`, a trailing `/`, an existing empty folder) is a folder conversion: the bad
  // checkpoint fails it, and neither the output, its new parents nor the staging folder remain.
  std::filesystem::create_directory(dir.file("empty.d"));
  for (const std::string& out : {dir.file("new"), dir.file("parent/x.y") + "/", dir.file("empty.d")}) {
    auto failed = convert_path(in, out, {});
    ASSERT_FALSE(failed.is_ok()) << out;
    EXPECT_NE(failed.error().kind(), ErrorKind::InvalidArgument) << failed.error().to_string();
    EXPECT_EQ(dir.list(), (std::vector<std::string>{"bin", "empty.d", "full"})) << out;
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.file("empty.d")));
  // A staging folder left by a killed conversion (a process that is gone: pid 2^22 + 1 is above Linux's
  // pid_max) is removed by the next conversion into the same output; another output's is not touched.
  for (const char* stale : {".new.sw-convert-4194305-0badf00d", ".other.sw-convert-4194305-0badf00d"}) {
    std::filesystem::create_directory(dir.file(stale));
    std::fclose(std::fopen(dir.file(std::string(stale) + "/model.safetensors").c_str(), "wb"));
  }
  EXPECT_FALSE(convert_path(in, dir.file("new"), {}).is_ok());
  EXPECT_EQ(dir.list(), (std::vector<std::string>{".other.sw-convert-4194305-0badf00d", "bin", "empty.d", "full"}));
  std::filesystem::remove_all(dir.file(".other.sw-convert-4194305-0badf00d"));
  // A symbolic link beside the weights is refused by name before anything is written.
  std::filesystem::create_symlink(in + "/config.json", in + "/linked.json");
  auto linked = convert_path(in, dir.file("out"), {});
  ASSERT_FALSE(linked.is_ok());
  EXPECT_EQ(linked.error().kind(), ErrorKind::UnsafePath);
  EXPECT_NE(linked.error().context().file.find("linked.json"), std::string::npos);
  EXPECT_EQ(dir.list(), (std::vector<std::string>{"bin", "empty.d", "full"}));
}

// A folder of `files` (name -> bytes) in `dir`.
std::string folder_of(const TempDir& dir, const std::string& name, const std::map<std::string, std::string>& files) {
  const std::string folder = dir.file(name);
  std::filesystem::create_directory(folder);
  for (const auto& [file, bytes] : files) swt::write_file_bytes(folder + "/" + file, bytes);
  return folder;
}

// Refused with `kind` and exactly `message`, naming the folder, for every output a folder converts to
// (GGUF, safetensors, an index, a folder), and nothing written beside the folders already in `dir`.
void expect_folder_refused(const TempDir& dir, const std::string& folder, ErrorKind kind, const std::string& message) {
  const std::vector<std::string> before = dir.list();
  for (const char* out : {"out.gguf", "out.safetensors", "out.safetensors.index.json", "out/"}) {
    auto r = convert_path(folder, dir.file(out), {});
    ASSERT_FALSE(r.is_ok()) << out;
    EXPECT_EQ(r.error().kind(), kind) << out << ": " << r.error().to_string();
    EXPECT_EQ(r.error().message(), message) << out;
    EXPECT_EQ(r.error().context().file, folder) << out;
    EXPECT_EQ(dir.list(), before) << out;
  }
}

// A folder that is no model is never written as a plain dump no loader takes for one (issue 34): the
// refusal names the file that converts as plain tensors, and that file still does.
TEST(ConvertPath, AFolderWithoutConfigJsonIsRefusedNamingTheFileToGive) {
  TempDir dir;
  const std::string weights = swt::read_file_bytes(write_input(dir));
  const std::string bare = folder_of(dir, "bare", {{"model.safetensors", weights}});
  expect_folder_refused(
      dir, bare, ErrorKind::InvalidModelFolder,
      "has weights but no config.json: give the weights file itself (" + bare + "/model.safetensors) to convert its tensors as plain tensors");
  const std::string index = R"({"metadata":{},"weight_map":{"x":"model-00001-of-00001.safetensors","v":"model-00001-of-00001.safetensors",)"
                            R"("i":"model-00001-of-00001.safetensors"}})";
  const std::string shards = folder_of(dir, "shards", {{"model-00001-of-00001.safetensors", weights}, {"model.safetensors.index.json", index}});
  expect_folder_refused(dir, shards, ErrorKind::InvalidModelFolder,
                        "has weights but no config.json: give the index file itself (" + shards +
                            "/model.safetensors.index.json) to convert its tensors as plain tensors");
  // A folder of .bin weights goes to a transformers folder only with the config.json it copies.
  const std::string bin = folder_of(dir, "bin", {{"pytorch_model.bin", "{}"}});
  expect_folder_refused(
      dir, bin, ErrorKind::InvalidModelFolder,
      "has weights but no config.json: give the weights file itself (" + bin + "/pytorch_model.bin) to convert its tensors as plain tensors");
  // A params.json beside weights that are not an original layout's is no config either.
  const std::string params = folder_of(dir, "params", {{"model.safetensors", weights}, {"params.json", "{}"}});
  expect_folder_refused(
      dir, params, ErrorKind::InvalidModelFolder,
      "has weights but no config.json: give the weights file itself (" + params + "/model.safetensors) to convert its tensors as plain tensors");
  auto plain = convert_path(bare + "/model.safetensors", dir.file("plain.gguf"), {});
  ASSERT_TRUE(plain.is_ok()) << plain.error().to_string();
  EXPECT_EQ(plain->tensors.size(), 3u);
  auto indexed = convert_path(shards + "/model.safetensors.index.json", dir.file("indexed.safetensors"), {});
  ASSERT_TRUE(indexed.is_ok()) << indexed.error().to_string();
}

// Meta's original download and Mistral's native layout go to their planner (src/original/, whose tests
// are tests/original/), also with the Hugging Face shards a Mistral repository ships beside the native
// file: a params.json it cannot read is refused naming it, an output format it has no plan for by name,
// and nothing is written.
TEST(ConvertPath, OriginalLayoutsGoToTheirPlanner) {
  TempDir dir;
  const std::string weights = swt::read_file_bytes(write_input(dir));
  const std::string meta = folder_of(
      dir, "meta", {{"consolidated.00.pth", "not read"}, {"consolidated.01.pth", "not read"}, {"params.json", "{}"}, {"tokenizer.model", ""}});
  const std::string mistral =
      folder_of(dir, "mistral", {{"consolidated.safetensors", weights}, {"model.safetensors", weights}, {"params.json", "{}"}});
  const std::vector<std::string> before = dir.list();
  for (const std::string& folder : {meta, mistral}) {
    for (const char* out : {"out/", "out.gguf"}) {
      auto r = convert_path(folder, dir.file(out), {});
      ASSERT_FALSE(r.is_ok()) << out;
      EXPECT_EQ(r.error().kind(), ErrorKind::InvalidModelFolder) << r.error().to_string();
      EXPECT_EQ(r.error().message(), "key `dim` is missing") << out;
      EXPECT_EQ(r.error().context().file, folder + "/params.json") << out;
    }
    auto r = convert_path(folder, dir.file("out.safetensors"), {});
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.error().kind(), ErrorKind::NotSupported) << r.error().to_string();
    EXPECT_EQ(r.error().message(), "an original download converts to a transformers folder (OUT/) or to GGUF (OUT.gguf), not to safetensors");
    EXPECT_EQ(dir.list(), before);
  }
}

// Every file under `root`, with its bytes: what a refused conversion must leave exactly as it was.
std::map<std::string, std::string> snapshot(const std::string& root) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    files[e.path().string()] = e.is_symlink()        ? "-> " + std::filesystem::read_symlink(e.path()).string()
                               : e.is_regular_file() ? swt::read_file_bytes(e.path().string())
                                                     : "";
  }
  return files;
}

// convert_path(in, out) is refused (InvalidArgument, naming the output and the input it is) and writes
// nothing: every file under `root` as it was, no temporary left.
void expect_refused_as_input(const std::string& root, const std::string& in, const std::string& out, const std::string& input_named,
                             const ConvertOptions& options = {}) {
  const auto before = snapshot(root);
  auto r = convert_path(in, out, options);
  ASSERT_FALSE(r.is_ok()) << out;
  EXPECT_EQ(r.error().kind(), ErrorKind::InvalidArgument) << r.error().to_string();
  EXPECT_EQ(r.error().message(), "the output is the input " + input_named + " (the same file): writing it would replace what is being read");
  EXPECT_EQ(snapshot(root), before) << out;
}

TEST(ConvertPath, AnOutputThatIsTheInputUnderAnyNameIsRefused) {
  TempDir dir;
  const std::string in = write_input(dir);
  std::filesystem::create_directory(dir.file("sub"));
  std::filesystem::create_symlink(in, dir.file("link.safetensors"));
  std::filesystem::create_hard_link(in, dir.file("hard.safetensors"));
  for (const std::string& out :
       {in, dir.file("./in.safetensors"), dir.file("sub/../in.safetensors"), dir.file("link.safetensors"), dir.file("hard.safetensors")}) {
    expect_refused_as_input(dir.path(), in, out, in);
  }
  // Into another format too: the output's format does not matter, its identity does.
  ConvertOptions to_gguf;
  to_gguf.to = "gguf";
  expect_refused_as_input(dir.path(), in, dir.file("link.safetensors"), in, to_gguf);
}

TEST(ConvertPath, AnOutputThatIsAShardOfTheIndexIsRefused) {
  TempDir dir;
  static const std::vector<float> a(4, 1.0f), b(4, 2.0f);
  const std::vector<safetensors::TensorData> first = {{"a", TensorType::F32, {4}, std::as_bytes(std::span(a))}};
  const std::vector<safetensors::TensorData> second = {{"b", TensorType::F32, {4}, std::as_bytes(std::span(b))}};
  ASSERT_TRUE(safetensors::write_file(dir.file("model-00001-of-00002.safetensors"), first).is_ok());
  ASSERT_TRUE(safetensors::write_file(dir.file("model-00002-of-00002.safetensors"), second).is_ok());
  swt::write_file_bytes(dir.file("model.safetensors.index.json"),
                        R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})");
  const std::string index = dir.file("model.safetensors.index.json");
  expect_refused_as_input(dir.path(), index, dir.file("model-00002-of-00002.safetensors"), dir.file("model-00002-of-00002.safetensors"));
  // A folder's file: the folder (a model folder: it has a config.json) is read through its index, and so
  // are the shards.
  swt::write_file_bytes(dir.file("config.json"), "{}");
  expect_refused_as_input(dir.path(), dir.path(), dir.file("model-00001-of-00002.safetensors"), dir.file("model-00001-of-00002.safetensors"));
}

TEST(ConvertPath, APartOfASplitOutputThatIsTheInputIsRefused) {
  TempDir dir;
  auto source = open_input(dir);
  ASSERT_TRUE(source.is_ok());
  // A GGUF input named like the second of three split files the conversion would write.
  const std::string in = dir.file("part-00002-of-00003.gguf");
  ASSERT_TRUE(convert(**source, in).is_ok());
  ConvertOptions split;
  split.write.split.max_tensors = 1;
  expect_refused_as_input(dir.path(), in, dir.file("part.gguf"), in, split);
}

TEST(ConvertPath, AnOutputThatIsAPartOfTheSplitInputIsRefused) {
  TempDir dir;
  auto source = open_input(dir);
  ASSERT_TRUE(source.is_ok());
  ConvertOptions split;
  split.write.split.max_tensors = 2;
  ASSERT_TRUE(convert(**source, dir.file("split.gguf"), split).is_ok());
  // The first part names the model; the second is read through it.
  const std::string second = dir.file("split-00002-of-00002.gguf");
  expect_refused_as_input(dir.path(), dir.file("split-00001-of-00002.gguf"), second, second);
}

TEST(FormatClaimedByName, ExtensionsThatNameAFormat) {
  const std::pair<const char*, const char*> cases[] = {
      {"a.safetensors", "safetensors"},
      {"d/model.safetensors.index.json", "safetensors-index"},
      {"x.gguf", "gguf"},
      {"x.dduf", "dduf"},
      {"x.pt", "pytorch"},
      {"x.pth", "pytorch"},
      {"x.ckpt", "pytorch"},
      {"https://h/x.dduf?download=1", "dduf"},
  };
  for (const auto& [path, name] : cases) {
    const Format* f = format_claimed_by_name(path);
    ASSERT_NE(f, nullptr) << path;
    EXPECT_EQ(f->name(), name) << path;
  }
  for (const char* path : {"pytorch_model.bin", "x.json", "pytorch_model.bin.index.json", "model", "x.safetensors.tmp", "x.GGUF"})
    EXPECT_EQ(format_claimed_by_name(path), nullptr) << path;
}

}  // namespace
}  // namespace safeweights
