// The IQ, TQ and MXFP4 codecs (safeweights/quantize.h) against answers recorded from ggml itself
// (ggml_quantize_chunk() and the types' to_float at the pinned llama.cpp, tests/quant/ggml_differential.sh's
// build): one deterministic 256-element row (and importance vector, and block of bytes) per type, its
// output's FNV-1a hash. They hold the exactness where the differential does not run; the differential
// (tests/quant/ggml_driver.cpp) compares whole corpora, test_quant_interop.py compares with gguf-py.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "safeweights/quantize.h"

namespace sw = safeweights;
using sw::TensorType;

namespace {

constexpr std::size_t kRow = 256;

// Inputs built from integers only (exact in float32 on any machine): values in [-8, 8) in steps of
// 1/256, weights in 1/16 .. 4, bytes spread over 0..255.
float kat_value(std::uint32_t i) { return static_cast<float>(static_cast<int>((i * 2654435761u) >> 20) - 2048) / 256.0f; }
float kat_weight(std::uint32_t i) { return static_cast<float>(((i * 40503u) >> 7) % 64 + 1) / 16.0f; }
std::uint8_t kat_byte(std::uint32_t i) { return static_cast<std::uint8_t>((i * 2246822519u) >> 24); }

std::uint64_t fnv1a(const void* data, std::size_t n) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

std::vector<float> kat_row() {
  std::vector<float> x(kRow);
  for (std::uint32_t i = 0; i < kRow; ++i) x[i] = kat_value(i);
  return x;
}

std::vector<float> kat_importance() {
  std::vector<float> w(kRow);
  for (std::uint32_t i = 0; i < kRow; ++i) w[i] = kat_weight(i);
  return w;
}

std::vector<std::byte> row_bytes(TensorType type) {
  const std::uint64_t shape[1] = {kRow};
  return std::vector<std::byte>(sw::tensor_nbytes(type, shape).value());
}

struct Answer {
  TensorType type;
  std::uint64_t hash;
};

TEST(IqDequantize, MatchesGgml) {
  const Answer answers[] = {
      {TensorType::IQ2_XXS, 0x14ca08c30aa33ecaull}, {TensorType::IQ2_XS, 0xcaa31f106f3cf442ull}, {TensorType::IQ2_S, 0x9e083fbf91e5a937ull},
      {TensorType::IQ3_XXS, 0x8253deefba74d438ull}, {TensorType::IQ3_S, 0xffa629d52ee015d7ull},  {TensorType::IQ1_S, 0x80e6f2fd1e4c2fe6ull},
      {TensorType::IQ1_M, 0xccb09dbe18c2552cull},
  };
  for (const Answer& a : answers) {
    auto bytes = row_bytes(a.type);
    for (std::uint32_t i = 0; i < bytes.size(); ++i) bytes[i] = std::byte(kat_byte(i));
    std::vector<float> out(kRow);
    ASSERT_TRUE(sw::dequantize(a.type, bytes, out).is_ok()) << sw::type_name(a.type);
    EXPECT_EQ(fnv1a(out.data(), out.size() * sizeof(float)), a.hash) << sw::type_name(a.type);
  }
}

TEST(IqQuantize, MatchesGgmlWithoutImportance) {
  const Answer answers[] = {
      {TensorType::IQ4_NL, 0xd3ad22818add1443ull}, {TensorType::IQ4_XS, 0x1a669d0a5a6660c3ull}, {TensorType::TQ1_0, 0x5ea72424a9e3d9f3ull},
      {TensorType::TQ2_0, 0x77d5685a8950e419ull},  {TensorType::MXFP4, 0x30ec1e5a8c9699bcull},  {TensorType::IQ3_XXS, 0x902f5edf403027c5ull},
      {TensorType::IQ3_S, 0xc0bcee025105ab0aull},  {TensorType::IQ2_S, 0x8028b8e08ede78f9ull},
  };
  const auto x = kat_row();
  for (const Answer& a : answers) {
    auto out = row_bytes(a.type);
    ASSERT_TRUE(sw::quantize(a.type, x, out).is_ok()) << sw::type_name(a.type);
    EXPECT_EQ(fnv1a(out.data(), out.size()), a.hash) << sw::type_name(a.type);
    auto rows = row_bytes(a.type);  // quantize_rows() without importance is quantize()
    ASSERT_TRUE(sw::quantize_rows(a.type, x, rows, kRow, {}).is_ok());
    EXPECT_EQ(rows, out) << sw::type_name(a.type);
  }
}

TEST(IqQuantize, MatchesGgmlWithImportance) {
  const Answer answers[] = {
      {TensorType::IQ4_NL, 0x2bf4cb3d8bbab86full}, {TensorType::IQ4_XS, 0x51f152881c1a544aull}, {TensorType::IQ3_XXS, 0x67d5c88e7d2268ceull},
      {TensorType::IQ3_S, 0xb2762dfe36423b8aull},  {TensorType::IQ2_S, 0x547774021621284cull},  {TensorType::IQ2_XXS, 0xcb5c96e53f67ecc7ull},
      {TensorType::IQ2_XS, 0x4b7468c5dbe9e9faull}, {TensorType::IQ1_S, 0x4daf010123a325aeull},
  };
  const auto x = kat_row();
  const auto w = kat_importance();
  for (const Answer& a : answers) {
    auto out = row_bytes(a.type);
    const auto status = sw::quantize_rows(a.type, x, out, kRow, w);
    ASSERT_TRUE(status.is_ok()) << status.to_string();
    EXPECT_EQ(fnv1a(out.data(), out.size()), a.hash) << sw::type_name(a.type);
  }
}

// Dequantizing what we quantized gives values near the input (a bound loose enough for 2 bits, tight
// enough to catch a shuffled layout).
TEST(IqQuantize, RoundTripsNearTheInput) {
  const auto x = kat_row();
  for (TensorType type : {TensorType::IQ4_NL, TensorType::IQ4_XS, TensorType::MXFP4, TensorType::IQ3_S}) {
    auto bytes = row_bytes(type);
    ASSERT_TRUE(sw::quantize(type, x, bytes).is_ok());
    std::vector<float> y(kRow);
    ASSERT_TRUE(sw::dequantize(type, bytes, y).is_ok());
    double err = 0, norm = 0;
    for (std::size_t i = 0; i < kRow; ++i) {
      err += (x[i] - y[i]) * (x[i] - y[i]);
      norm += x[i] * x[i];
    }
    EXPECT_LT(err, 0.02 * norm) << sw::type_name(type);
  }
}

// The types ggml cannot quantize without an importance matrix: quantize() refuses them by name,
// quantize_rows() with importance quantizes them.
TEST(IqQuantize, TypesThatNeedImportanceRefuseWithout) {
  const auto x = kat_row();
  for (TensorType type : {TensorType::IQ2_XXS, TensorType::IQ2_XS, TensorType::IQ1_S, TensorType::IQ1_M}) {
    EXPECT_TRUE(sw::requires_importance(type));
    EXPECT_FALSE(sw::can_quantize(type));
    auto out = row_bytes(type);
    const auto status = sw::quantize(type, x, out);
    ASSERT_FALSE(status.is_ok());
    EXPECT_EQ(status.error().kind(), sw::ErrorKind::NotSupported);
    EXPECT_NE(status.error().message().find(std::string(sw::type_name(type))), std::string::npos);
    EXPECT_TRUE(sw::quantize_rows(type, x, out, kRow, kat_importance()).is_ok());
  }
}

// The search structures are built once, at first use, whichever thread gets there first: rows quantized
// on many threads at once give the bytes one thread gives.
TEST(IqQuantize, SameBytesFromManyThreads) {
  const auto x = kat_row();
  const auto w = kat_importance();
  for (TensorType type : {TensorType::IQ3_XXS, TensorType::IQ3_S, TensorType::IQ2_S, TensorType::IQ2_XXS, TensorType::IQ2_XS, TensorType::IQ1_S}) {
    std::vector<std::vector<std::byte>> outs(8, row_bytes(type));
    std::vector<std::thread> threads;
    for (auto& out : outs) threads.emplace_back([&] { (void)sw::quantize_rows(type, x, out, kRow, w); });
    for (auto& t : threads) t.join();
    auto one = row_bytes(type);
    ASSERT_TRUE(sw::quantize_rows(type, x, one, kRow, w).is_ok());
    for (const auto& out : outs) EXPECT_EQ(out, one) << sw::type_name(type);
  }
}

TEST(IqQuantize, ImportanceMustCoverTheRow) {
  const auto x = kat_row();
  auto out = row_bytes(TensorType::IQ4_XS);
  const std::vector<float> short_weights(128, 1.0f);
  const auto status = sw::quantize_rows(TensorType::IQ4_XS, x, out, kRow, short_weights);
  ASSERT_FALSE(status.is_ok());
  EXPECT_EQ(status.error().kind(), sw::ErrorKind::InvalidArgument);
}

}  // namespace
