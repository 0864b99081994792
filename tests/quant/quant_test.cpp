// Element conversion (safeweights/quantize.h): known answers worked out by hand from the published
// algorithms, checks against an independent implementation where the machine has one (the CPU's F16C
// conversion), round-trip error bounds, and argument errors. The byte-for-byte comparisons with ggml and
// gguf-py are tests/quant/ggml_differential.sh and tests/python/test_quant_interop.py.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "safeweights/quantize.h"

namespace sw = safeweights;
using sw::TensorType;

namespace {

std::vector<std::byte> quantized(TensorType type, const std::vector<float>& values) {
  const std::uint64_t shape[1] = {values.size()};
  auto size = sw::tensor_nbytes(type, shape);
  EXPECT_TRUE(size.is_ok());
  std::vector<std::byte> out(size.is_ok() ? size.value() : 0);
  auto status = sw::quantize(type, values, out);
  EXPECT_TRUE(status.is_ok()) << status.to_string();
  return out;
}

std::vector<float> dequantized(TensorType type, const std::vector<std::byte>& bytes, std::size_t elements) {
  std::vector<float> out(elements);
  auto status = sw::dequantize(type, bytes, out);
  EXPECT_TRUE(status.is_ok()) << status.to_string();
  return out;
}

std::uint16_t half_bits(TensorType type, float value) {
  auto bytes = quantized(type, {value});
  return static_cast<std::uint16_t>(std::to_integer<unsigned>(bytes[0]) | (std::to_integer<unsigned>(bytes[1]) << 8));
}

std::uint32_t widened_bits(TensorType type, std::uint16_t half) {
  std::vector<std::byte> bytes = {std::byte(half & 0xff), std::byte(half >> 8)};
  return std::bit_cast<std::uint32_t>(dequantized(type, bytes, 1)[0]);
}

float from_bits(std::uint32_t bits) { return std::bit_cast<float>(bits); }

// ---- F16 ---------------------------------------------------------------------------------------------

TEST(QuantF16, KnownAnswers) {
  EXPECT_EQ(half_bits(TensorType::F16, 1.0f), 0x3c00);
  EXPECT_EQ(half_bits(TensorType::F16, -2.0f), 0xc000);
  EXPECT_EQ(half_bits(TensorType::F16, 0.0f), 0x0000);
  EXPECT_EQ(half_bits(TensorType::F16, -0.0f), 0x8000);
  EXPECT_EQ(half_bits(TensorType::F16, 65504.0f), 0x7bff);       // largest half
  EXPECT_EQ(half_bits(TensorType::F16, 65519.996f), 0x7bff);     // just under the tie with infinity
  EXPECT_EQ(half_bits(TensorType::F16, 65520.0f), 0x7c00);       // the tie rounds to even: infinity
  EXPECT_EQ(half_bits(TensorType::F16, 1.0f + 0x1p-11f), 0x3c00);         // tie, kept part even: down
  EXPECT_EQ(half_bits(TensorType::F16, 1.0f + 3 * 0x1p-11f), 0x3c02);     // tie, kept part odd: up
  EXPECT_EQ(half_bits(TensorType::F16, 1.0f + 0x1p-11f + 0x1p-23f), 0x3c01);  // above the tie: up
  EXPECT_EQ(half_bits(TensorType::F16, 0x1p-24f), 0x0001);       // least subnormal
  EXPECT_EQ(half_bits(TensorType::F16, 0x1p-25f), 0x0000);       // half of it: tie to even 0
  EXPECT_EQ(half_bits(TensorType::F16, std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(half_bits(TensorType::F16, 3 * 0x1p-25f), 0x0002);   // 1.5 units: tie to even 2
  EXPECT_EQ(half_bits(TensorType::F16, 0x1p-14f - 0x1p-25f), 0x0400);  // rounds up into the least normal
  EXPECT_EQ(half_bits(TensorType::F16, 1e-30f), 0x0000);
  EXPECT_EQ(half_bits(TensorType::F16, -1e-30f), 0x8000);
  EXPECT_EQ(half_bits(TensorType::F16, std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(half_bits(TensorType::F16, -std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(half_bits(TensorType::F16, from_bits(0x7fc00000)), 0x7e00);  // NaN: ggml's quiet NaN
  EXPECT_EQ(half_bits(TensorType::F16, from_bits(0xff800001)), 0xfe00);  // signalling, signed
  EXPECT_EQ(half_bits(TensorType::F16, from_bits(0x7fffffff)), 0x7e00);  // payload dropped
}

TEST(QuantF16, WideningIsExactForEveryHalf) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double magnitude = exp == 0 ? std::ldexp(man, -24) : std::ldexp(1024 + man, static_cast<int>(exp) - 25);
    const std::uint32_t got = widened_bits(TensorType::F16, static_cast<std::uint16_t>(h));
    if (exp == 0x1f) {  // Inf and NaN: exponent all ones, mantissa moved up, sign kept, NaN made quiet
      EXPECT_EQ(got, sign | 0x7f800000u | (man << 13) | (man != 0 ? 0x00400000u : 0u)) << h;
      continue;
    }
    EXPECT_EQ(got, sign | std::bit_cast<std::uint32_t>(static_cast<float>(magnitude))) << h;
  }
}

TEST(QuantF16, NarrowingRoundTripsEveryHalf) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) continue;  // NaN payloads are not kept
    const float wide = std::bit_cast<float>(widened_bits(TensorType::F16, static_cast<std::uint16_t>(h)));
    EXPECT_EQ(half_bits(TensorType::F16, wide), h);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("f16c"))) std::uint16_t hardware_half(float value) {
  return static_cast<std::uint16_t>(_cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT));
}
#endif

// The CPU's own conversion (F16C, what ggml uses on such machines) over a sweep of float32 bit patterns.
TEST(QuantF16, MatchesTheCpuConversion) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C on this CPU";
  std::vector<float> values;
  for (std::uint64_t bits = 0; bits <= 0xffffffffu; bits += 4093) values.push_back(from_bits(static_cast<std::uint32_t>(bits)));
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {  // every half midpoint and its neighbours
    const std::uint32_t mid = std::bit_cast<std::uint32_t>(std::bit_cast<float>(widened_bits(TensorType::F16, static_cast<std::uint16_t>(h)))) + 0x1000u;
    for (std::uint32_t d : {mid - 1, mid, mid + 1}) values.push_back(from_bits(d));
  }
  auto bytes = quantized(TensorType::F16, values);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i])) continue;  // F16C keeps NaN payload bits; ggml's portable code does not
    const auto got = static_cast<std::uint16_t>(std::to_integer<unsigned>(bytes[2 * i]) | (std::to_integer<unsigned>(bytes[2 * i + 1]) << 8));
    ASSERT_EQ(got, hardware_half(values[i])) << std::hex << std::bit_cast<std::uint32_t>(values[i]);
  }
#else
  GTEST_SKIP() << "no F16C reference on this architecture";
#endif
}

// ---- BF16 --------------------------------------------------------------------------------------------

TEST(QuantBF16, KnownAnswers) {
  EXPECT_EQ(half_bits(TensorType::BF16, 1.0f), 0x3f80);
  EXPECT_EQ(half_bits(TensorType::BF16, from_bits(0x3f808000)), 0x3f80);  // tie, even: down
  EXPECT_EQ(half_bits(TensorType::BF16, from_bits(0x3f818000)), 0x3f82);  // tie, odd: up
  EXPECT_EQ(half_bits(TensorType::BF16, from_bits(0x3f808001)), 0x3f81);  // above the tie: up
  EXPECT_EQ(half_bits(TensorType::BF16, from_bits(0x00008000)), 0x0000);  // subnormal tie: down, not flushed
  EXPECT_EQ(half_bits(TensorType::BF16, from_bits(0x00018000)), 0x0002);  // subnormal tie, odd: up
  EXPECT_EQ(half_bits(TensorType::BF16, from_bits(0x00010000)), 0x0001);  // least subnormal kept
  EXPECT_EQ(half_bits(TensorType::BF16, std::numeric_limits<float>::max()), 0x7f80);  // rounds to infinity
  EXPECT_EQ(half_bits(TensorType::BF16, -std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(half_bits(TensorType::BF16, from_bits(0x7f800001)), 0x7fc0);  // signalling NaN made quiet
  EXPECT_EQ(half_bits(TensorType::BF16, from_bits(0xffa10000)), 0xffe1);  // payload's top bits kept
  EXPECT_EQ(half_bits(TensorType::BF16, from_bits(0x7fffffff)), 0x7fff);  // no carry out of a NaN
}

TEST(QuantBF16, WideningIsExactForEveryValue) {
  for (std::uint32_t h = 0; h < 0x10000; ++h)
    EXPECT_EQ(widened_bits(TensorType::BF16, static_cast<std::uint16_t>(h)), h << 16);
}

// ---- arguments ---------------------------------------------------------------------------------------

TEST(QuantArguments, WrongSizesAreInvalidArgument) {
  std::vector<float> values(4, 1.0f);
  std::vector<std::byte> bytes(7);
  auto status = sw::quantize(TensorType::F16, values, bytes);
  ASSERT_FALSE(status.is_ok());
  EXPECT_EQ(status.error().kind(), sw::ErrorKind::InvalidArgument);
  EXPECT_NE(status.error().message().find("F16"), std::string::npos) << status.error().message();
  std::vector<float> out(3);
  status = sw::dequantize(TensorType::BF16, bytes, out);
  ASSERT_FALSE(status.is_ok());
  EXPECT_EQ(status.error().kind(), sw::ErrorKind::InvalidArgument);
}

TEST(QuantArguments, EmptyRowsAreFine) {
  std::vector<float> none;
  std::vector<std::byte> no_bytes;
  for (TensorType type : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
    EXPECT_TRUE(sw::quantize(type, none, no_bytes).is_ok());
    EXPECT_TRUE(sw::dequantize(type, no_bytes, none).is_ok());
  }
}

TEST(QuantArguments, UnsupportedTypesAreRefusedByName) {
  std::vector<float> values(32);
  std::vector<std::byte> bytes(64);
  for (TensorType type : {TensorType::I32, TensorType::F8_E4M3}) {
    EXPECT_FALSE(sw::can_quantize(type));
    EXPECT_FALSE(sw::can_dequantize(type));
    auto status = sw::quantize(type, values, bytes);
    ASSERT_FALSE(status.is_ok());
    EXPECT_EQ(status.error().kind(), sw::ErrorKind::NotSupported);
    EXPECT_NE(status.error().message().find(std::string(sw::type_name(type))), std::string::npos);
    status = sw::dequantize(type, bytes, values);
    ASSERT_FALSE(status.is_ok());
    EXPECT_EQ(status.error().kind(), sw::ErrorKind::NotSupported);
  }
}

}  // namespace
