// convert() through the library API, for what the CLI does not show: the report's decisions and notes,
// progress calls, renamed tensor lists, carry_metadata, gguf_kv overriding carried pairs, and refusals
// that leave no file. Values are checked by tests/convert/test_convert.py against numpy and gguf-py.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <vector>

#include "../test_util.h"
#include "safeweights/convert.h"
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
  options.tensors = {{"v", "norm.weight", 0}};
  options.gguf_kv = {{"safetensors.format", gguf::Value::string("gguf")}, {"general.architecture", gguf::Value::string("llama")}};
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
  options.gguf_kv.clear();
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
  missing.tensors = {{"nope", "x", 0}};
  auto r = convert(**in, dir.file("m.gguf"), missing);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::TensorNotFound);
  ConvertOptions permute;
  permute.tensors = {{"x", "x", 3}};  // 2 rows cannot hold 3 heads of row pairs
  r = convert(**in, dir.file("p.gguf"), permute);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::InvalidArgument);
  r = convert(**in, dir.file("out.bin"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::InvalidArgument);
  EXPECT_EQ(dir.list(), std::vector<std::string>{"in.safetensors"});
}

TEST(Compare, StatisticsAndNonFinite) {
  TempDir dir;
  const std::vector<float> a = {1, 2, NAN, INFINITY, 0}, b = {1, 4, NAN, -INFINITY, 0};
  ASSERT_TRUE(safetensors::write_file(dir.file("a.safetensors"), std::vector<safetensors::TensorData>{
                                                                      {"t", TensorType::F32, {5}, std::as_bytes(std::span(a))}})
                  .is_ok());
  ASSERT_TRUE(safetensors::write_file(dir.file("b.safetensors"), std::vector<safetensors::TensorData>{
                                                                      {"t", TensorType::F32, {5}, std::as_bytes(std::span(b))}})
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

}  // namespace
}  // namespace safeweights
