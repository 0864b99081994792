// Element conversion (safeweights/quantize.h): known answers worked out by hand from the published
// algorithms, checks against an independent implementation where the machine has one (the CPU's F16C
// conversion), round-trip error bounds, and argument errors. The byte-for-byte comparisons with ggml and
// gguf-py are tests/quant/ggml_differential.sh and tests/python/test_quant_interop.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
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
  EXPECT_EQ(half_bits(TensorType::F16, 65504.0f), 0x7bff);                    // largest half
  EXPECT_EQ(half_bits(TensorType::F16, 65519.996f), 0x7bff);                  // just under the tie with infinity
  EXPECT_EQ(half_bits(TensorType::F16, 65520.0f), 0x7c00);                    // the tie rounds to even: infinity
  EXPECT_EQ(half_bits(TensorType::F16, 1.0f + 0x1p-11f), 0x3c00);             // tie, kept part even: down
  EXPECT_EQ(half_bits(TensorType::F16, 1.0f + 3 * 0x1p-11f), 0x3c02);         // tie, kept part odd: up
  EXPECT_EQ(half_bits(TensorType::F16, 1.0f + 0x1p-11f + 0x1p-23f), 0x3c01);  // above the tie: up
  EXPECT_EQ(half_bits(TensorType::F16, 0x1p-24f), 0x0001);                    // least subnormal
  EXPECT_EQ(half_bits(TensorType::F16, 0x1p-25f), 0x0000);                    // half of it: tie to even 0
  EXPECT_EQ(half_bits(TensorType::F16, std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(half_bits(TensorType::F16, 3 * 0x1p-25f), 0x0002);         // 1.5 units: tie to even 2
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

// A thread may run with denormals-are-zero and flush-to-zero set (code built with -ffast-math sets them
// process-wide on load): subnormal halves must still widen and narrow exactly.
TEST(QuantF16, SubnormalsSurviveFlushToZeroModes) {
#if defined(__x86_64__)
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040u);  // DAZ and FTZ
  const float widened = std::bit_cast<float>(widened_bits(TensorType::F16, 0x0001));
  const std::uint16_t narrowed = half_bits(TensorType::F16, 0x1p-24f * 3);
  _mm_setcsr(saved);
  EXPECT_EQ(widened, 0x1p-24f);
  EXPECT_EQ(narrowed, 0x0003);
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

#if defined(__x86_64__) && defined(__GNUC__)
// CPUID leaf 1, ECX bit 29 (clang 14 does not know "f16c" in __builtin_cpu_supports).
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & (1u << 29)) != 0;
}

__attribute__((target("f16c"))) std::uint16_t hardware_half(float value) {
  return static_cast<std::uint16_t>(_cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT));
}
#endif

// The CPU's own conversion (F16C, what ggml uses on such machines) over a sweep of float32 bit patterns.
TEST(QuantF16, MatchesTheCpuConversion) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (!cpu_has_f16c()) GTEST_SKIP() << "no F16C on this CPU";
  std::vector<float> values;
  for (std::uint64_t bits = 0; bits <= 0xffffffffu; bits += 4093) values.push_back(from_bits(static_cast<std::uint32_t>(bits)));
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {  // every half midpoint and its neighbours
    const std::uint32_t mid =
        std::bit_cast<std::uint32_t>(std::bit_cast<float>(widened_bits(TensorType::F16, static_cast<std::uint16_t>(h)))) + 0x1000u;
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
  EXPECT_EQ(half_bits(TensorType::BF16, from_bits(0x3f808000)), 0x3f80);              // tie, even: down
  EXPECT_EQ(half_bits(TensorType::BF16, from_bits(0x3f818000)), 0x3f82);              // tie, odd: up
  EXPECT_EQ(half_bits(TensorType::BF16, from_bits(0x3f808001)), 0x3f81);              // above the tie: up
  EXPECT_EQ(half_bits(TensorType::BF16, from_bits(0x00008000)), 0x0000);              // subnormal tie: down, not flushed
  EXPECT_EQ(half_bits(TensorType::BF16, from_bits(0x00018000)), 0x0002);              // subnormal tie, odd: up
  EXPECT_EQ(half_bits(TensorType::BF16, from_bits(0x00010000)), 0x0001);              // least subnormal kept
  EXPECT_EQ(half_bits(TensorType::BF16, std::numeric_limits<float>::max()), 0x7f80);  // rounds to infinity
  EXPECT_EQ(half_bits(TensorType::BF16, -std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(half_bits(TensorType::BF16, from_bits(0x7f800001)), 0x7fc0);  // signalling NaN made quiet
  EXPECT_EQ(half_bits(TensorType::BF16, from_bits(0xffa10000)), 0xffe1);  // payload's top bits kept
  EXPECT_EQ(half_bits(TensorType::BF16, from_bits(0x7fffffff)), 0x7fff);  // no carry out of a NaN
}

TEST(QuantBF16, WideningIsExactForEveryValue) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) EXPECT_EQ(widened_bits(TensorType::BF16, static_cast<std::uint16_t>(h)), h << 16);
}

// ---- block types: known answers ---------------------------------------------------------------------

// A block of `size` bytes that starts with `head` (zeros after).
std::vector<std::byte> block_of(std::initializer_list<int> head, std::size_t size) {
  std::vector<std::byte> b(size);
  std::size_t i = 0;
  for (int x : head) b[i++] = static_cast<std::byte>(x);
  return b;
}

std::vector<std::uint8_t> u8(const std::vector<std::byte>& bytes) {
  std::vector<std::uint8_t> out;
  for (std::byte b : bytes) out.push_back(std::to_integer<std::uint8_t>(b));
  return out;
}

// Q8_0: d = absmax / 127 = 1 here, q = roundf(x / d): halves round away from zero (not to even).
TEST(QuantQ8_0, KnownAnswer) {
  std::vector<float> x(32, 0.0f);
  const float head[] = {127, -127, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 3.49f, 126.6f};
  std::copy(std::begin(head), std::end(head), x.begin());
  auto got = u8(quantized(TensorType::Q8_0, x));
  std::vector<std::uint8_t> want(34, 0);
  want[0] = 0x00, want[1] = 0x3c;  // d = 1.0 in float16
  const std::uint8_t q[] = {0x7f, 0x81, 1, 0xff, 2, 3, 0xfd, 3, 127};
  std::copy(std::begin(q), std::end(q), want.begin() + 2);
  EXPECT_EQ(got, want);
}

// Q4_0: d = (the value of largest magnitude, first met) / -8, q = min(15, trunc(x/d + 8.5)).
TEST(QuantQ4_0, KnownAnswer) {
  std::vector<float> x(32, 0.0f);
  x[0] = -8, x[1] = 7, x[2] = 0.5f, x[3] = -0.5f, x[4] = -0.6f, x[5] = 7.6f, x[16] = 3, x[17] = -7.5f;
  auto got = u8(quantized(TensorType::Q4_0, x));
  // d = 1: codes 0, 15, 9, 8, 7, 15 (16 capped), 8..., and the second half's 11, 1 in the high nibbles.
  std::vector<std::uint8_t> want = {0x00, 0x3c};
  for (int j = 0; j < 16; ++j) {
    const int lo[] = {0, 15, 9, 8, 7, 15};
    const int low = j < 6 ? lo[j] : 8;
    const int high = j == 0 ? 11 : (j == 1 ? 1 : 8);
    want.push_back(static_cast<std::uint8_t>(low | (high << 4)));
  }
  EXPECT_EQ(got, want);
  // The first value of largest magnitude sets the sign of d: +8 before -8 gives d = -1.
  std::vector<float> y(32, 0.0f);
  y[0] = 8, y[1] = -8;
  auto flipped = u8(quantized(TensorType::Q4_0, y));
  EXPECT_EQ(flipped[0], 0x00);
  EXPECT_EQ(flipped[1], 0xbc);      // d = -1
  EXPECT_EQ(flipped[2], 0x80);      // x = 8 -> 0, the zero at 16 -> 8
  EXPECT_EQ(flipped[3] & 0xf, 15);  // x = -8 -> trunc(16.5) = 16, capped to 15
}

// Q4_1: d = (max - min) / 15, m = min, q = min(15, trunc((x - min)/d + 0.5)).
TEST(QuantQ4_1, KnownAnswer) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j % 16) - 1.0f;  // -1 .. 14: d = 1, m = -1
  x[5] = 3.5f;                                                            // a tie: rounds up to 5
  auto got = u8(quantized(TensorType::Q4_1, x));
  ASSERT_EQ(got.size(), 20u);
  EXPECT_EQ(got[0], 0x00);
  EXPECT_EQ(got[1], 0x3c);  // d = 1
  EXPECT_EQ(got[2], 0x00);
  EXPECT_EQ(got[3], 0xbc);  // m = -1
  for (int j = 0; j < 16; ++j) EXPECT_EQ(got[4 + j], j | (j << 4)) << j;
}

// Q5_0 and Q5_1: the fifth bits of element j go to bit j of qh.
TEST(QuantQ5, KnownAnswers) {
  std::vector<float> x(32, 0.0f);
  x[0] = -16, x[1] = 15, x[20] = 1;  // Q5_0: d = 1, codes 0, 31, 16 (for 0), 17
  auto q50 = u8(quantized(TensorType::Q5_0, x));
  std::uint32_t qh = q50[2] | (q50[3] << 8) | (q50[4] << 16) | (static_cast<std::uint32_t>(q50[5]) << 24);
  EXPECT_EQ(q50[0], 0x00);
  EXPECT_EQ(q50[1], 0x3c);
  EXPECT_EQ(qh, 0xfffffffeu);   // every code but element 0's (0) is >= 16
  EXPECT_EQ(q50[6 + 0], 0x00);  // codes 0 and 16 (element 16 is 0)
  EXPECT_EQ(q50[6 + 1], 0x0f);  // 31 & 15 and 16 & 15
  EXPECT_EQ(q50[6 + 4], 0x10);  // element 4 (0 -> 16) and element 20 (1 -> 17)
  std::vector<float> y(32);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(j);  // Q5_1: d = 1, m = 0, codes = values
  auto q51 = u8(quantized(TensorType::Q5_1, y));
  qh = q51[4] | (q51[5] << 8) | (q51[6] << 16) | (static_cast<std::uint32_t>(q51[7]) << 24);
  EXPECT_EQ(qh, 0xffff0000u);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q51[8 + j], j | (j << 4)) << j;
}

// Blocks of zeros come out as zero bytes (and d = 0) in every type, and read back as zeros.
// Q1_0: blocks of 128, d = sum |x| / 128, bit j (low bit first) set where x >= 0 (-0.0 included, NaN
// not); dequantized, a set bit is d and a clear one -d.
TEST(QuantQ1_0, KnownAnswers) {
  std::vector<float> x(256, 0.0f);
  for (std::size_t j = 0; j < 128; ++j) x[j] = j % 2 ? -3.0f : 1.0f;
  x[1] = -0.0f;                                          // sum |x| = 64 + 63 x 3 = 253, d = 253 / 128 = 1.9765625 (0x3fe8 in float16)
  x[128 + 9] = std::numeric_limits<float>::quiet_NaN();  // the second block: zeros and one NaN
  auto got = u8(quantized(TensorType::Q1_0, x));
  ASSERT_EQ(got.size(), 36u);
  EXPECT_EQ(got[0], 0xe8);
  EXPECT_EQ(got[1], 0x3f);
  EXPECT_EQ(got[2], 0x57);  // elements 0, 1 (-0.0), 2, 4, 6
  for (std::size_t i = 3; i < 18; ++i) EXPECT_EQ(got[i], 0x55) << i;
  EXPECT_EQ(got[18], 0x00);  // d is NaN: float16 0x7e00
  EXPECT_EQ(got[19], 0x7e);
  EXPECT_EQ(got[20], 0xff);
  EXPECT_EQ(got[21], 0xfd);                                                          // element 9 (NaN) clear
  auto back = dequantized(TensorType::Q1_0, block_of({0x00, 0x40, 0x05}, 18), 128);  // d = 2
  EXPECT_EQ(back[0], 2.0f);
  EXPECT_EQ(back[1], -2.0f);
  EXPECT_EQ(back[2], 2.0f);
  EXPECT_EQ(back[127], -2.0f);
}

// NVFP4: blocks of 64, four UE4M3 scale bytes (one per 16 elements: 4 exponent bits, bias 7, 3 mantissa
// bits) then E2M1 codes, element j and j + 8 of a sub-block sharing a byte (low nibble first). The scale
// is max |x| / 6 (NaN skipped), rounded by the mantissa's next bit alone (half up), saturating at 448;
// a code is the nearest E2M1 value (the first of equals). Dequantized, E2M1 value x scale; byte 0x7f
// (E4M3's NaN) reads as 0, and bit 7 is ignored (0xff reads as 0x7f would if it were not special).
TEST(QuantNvfp4, KnownAnswers) {
  std::vector<float> x(128, 0.0f);
  x[0] = 6.0f, x[8] = -0.5f, x[1] = 0.25f;                        // scale 1 (0x38), d 0.5: codes 7, 9, and 0 (0.25 is as near 0 as 0.5)
  x[16] = 6.375f;                                                 // 1.0625, half a step above 1: rounds up to 1.125 (0x39)
  x[32] = 11.625f;                                                // 1.9375: the mantissa carries into the exponent, 2 (0x40)
  x[48] = 3000.0f;                                                // 500: saturates at 448 (0x7e)
  x[64] = std::numeric_limits<float>::quiet_NaN(), x[65] = 3.0f;  // NaN skipped: 0.5 (0x30); NaN gets code 0
  x[80] = 18.0f / 512.0f;                                         // 3 x 2^-9, below the normal range: 3 (0x03)
  x[96] = -std::numeric_limits<float>::infinity();                // 448; no code is nearer infinity than code 0
  auto got = u8(quantized(TensorType::NVFP4, x));
  ASSERT_EQ(got.size(), 72u);
  const std::vector<unsigned> scales = {got[0], got[1], got[2], got[3], got[36], got[37], got[38], got[39]};
  EXPECT_EQ(scales, (std::vector<unsigned>{0x38, 0x39, 0x40, 0x7e, 0x30, 0x03, 0x7e, 0x00}));
  EXPECT_EQ(got[4], 0x97);   // x[0] (code 7, 6) low, x[8] (code 9, -0.5) high
  EXPECT_EQ(got[5], 0x00);   // x[1] = 0.25 and x[9] = 0
  EXPECT_EQ(got[12], 0x07);  // 6.375 nearest 6 x 1.125
  EXPECT_EQ(got[20], 0x07);  // 11.625 nearest 6 x 2
  EXPECT_EQ(got[28], 0x07);  // 3000 nearest 6 x 448
  EXPECT_EQ(got[40], 0x00);  // NaN
  EXPECT_EQ(got[41], 0x07);  // 3 = 6 x 0.5
  EXPECT_EQ(got[48], 0x07);  // 18 / 512 = 6 x 3 x 2^-9
  EXPECT_EQ(got[56], 0x00);  // -infinity

  // Scales 1 (0x38), 0, 0x7f (0: E4M3's NaN) and 0xff (bit 7 ignored: 1.875 x 2^8 = 480); then 2^-9 (0x01).
  auto block = block_of({0x38, 0x00, 0x7f, 0xff, 0x97}, 72);
  block[12] = block[20] = std::byte{0x77};
  block[28] = std::byte{0x0f};
  block[36] = std::byte{0x01};
  block[40] = std::byte{0x01};
  auto back = dequantized(TensorType::NVFP4, block, 128);
  EXPECT_EQ(back[0], 6.0f);
  EXPECT_EQ(back[8], -0.5f);
  EXPECT_EQ(back[16], 0.0f);
  EXPECT_EQ(back[32], 0.0f);
  EXPECT_EQ(back[48], -6.0f * 480.0f);  // code 15: -6
  EXPECT_EQ(back[56], 0.0f);
  EXPECT_EQ(back[64], 0x1p-10f);  // code 1 (0.5) x 2^-9
}

// Q2_0: blocks of 64, d = max |x| (NaN skipped), code roundf(x / d) + 1 held to 0..3 (halves away from
// zero; NaN and out-of-range through cvttss2si's INT32_MIN: code 0), four codes a byte, low bits first;
// dequantized, (code - 1) x d.
TEST(QuantQ2_0, KnownAnswers) {
  std::vector<float> x(128, 0.0f);
  const float head[] = {4, -4, 2, -2, 1, std::numeric_limits<float>::quiet_NaN(), 3};
  std::copy(std::begin(head), std::end(head), x.begin());
  x[64] = std::numeric_limits<float>::denorm_min();  // the second block: 1 / d is infinite, x / d inf or NaN
  auto got = u8(quantized(TensorType::Q2_0, x));
  ASSERT_EQ(got.size(), 36u);
  EXPECT_EQ(got[0], 0x00);  // d = 4 (0x4400)
  EXPECT_EQ(got[1], 0x44);
  EXPECT_EQ(got[2], 0x22);  // codes 2, 0, 2 (2 / 4 = 0.5 rounds up), 0 (-0.5 rounds down)
  EXPECT_EQ(got[3], 0x61);  // codes 1, 0 (NaN), 2, 1
  for (std::size_t i = 4; i < 18; ++i) EXPECT_EQ(got[i], 0x55) << i;
  for (std::size_t i = 18; i < 36; ++i) EXPECT_EQ(got[i], 0x00) << i;               // d underflows to 0, every code 0
  auto back = dequantized(TensorType::Q2_0, block_of({0x00, 0x44, 0xe4}, 18), 64);  // codes 0, 1, 2, 3
  EXPECT_EQ(back[0], -4.0f);
  EXPECT_EQ(back[1], 0.0f);
  EXPECT_EQ(back[2], 4.0f);
  EXPECT_EQ(back[3], 8.0f);
  EXPECT_EQ(back[4], -4.0f);
}

TEST(QuantBlocks, ZeroBlocksAreZeroBytes) {
  for (TensorType type : {TensorType::Q4_1, TensorType::Q5_1, TensorType::Q8_0, TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K,
                          TensorType::Q5_K, TensorType::Q6_K, TensorType::Q8_K}) {
    std::vector<float> zeros(256, 0.0f);
    auto bytes = quantized(type, zeros);
    for (std::byte b : bytes) ASSERT_EQ(std::to_integer<int>(b), 0) << sw::type_name(type);
    for (float v : dequantized(type, bytes, 256)) ASSERT_EQ(v, 0.0f) << sw::type_name(type);
  }
  // The symmetric 4/5-bit types store zero as the middle code.
  auto q40 = u8(quantized(TensorType::Q4_0, std::vector<float>(32, 0.0f)));
  EXPECT_EQ(q40[2], 0x88);
}

// Non-finite input quantizes as ggml's C does on x86-64: an infinity makes d infinite and 1/d zero; a
// NaN code converts through cvttss2si's INT32_MIN, whose low byte is 0.
TEST(QuantBlocks, NonFiniteInputFollowsGgml) {
  std::vector<float> x(32, 1.0f);
  x[3] = std::numeric_limits<float>::infinity();
  auto q = u8(quantized(TensorType::Q8_0, x));
  EXPECT_EQ(q[0], 0x00);
  EXPECT_EQ(q[1], 0x7c);                                     // d = +inf
  for (int j = 0; j < 32; ++j) EXPECT_EQ(q[2 + j], 0) << j;  // x * (1/inf) = 0, inf * 0 = NaN -> 0
  std::vector<float> y(32, 2.0f);
  y[0] = std::numeric_limits<float>::quiet_NaN();  // ggml's MAX(a, b) takes the NaN, then drops it
  y[31] = 127.0f;
  q = u8(quantized(TensorType::Q8_0, y));
  EXPECT_EQ(q[1], 0x3c);  // d = 127 / 127 = 1
  EXPECT_EQ(q[2], 0);     // the NaN's code
  EXPECT_EQ(q[3], 2);
  // A NaN after the block's largest value makes ggml forget it: d comes from the values after the NaN
  // (the vectorised maximum must fall back to ggml's sequential one).
  // Its code is then out of int8's range, and converts as ggml's C does (low byte of the int32).
  std::vector<float> z(32, 2.0f);
  z[5] = 200.0f;
  z[10] = std::numeric_limits<float>::quiet_NaN();
  z[20] = 127.0f;
  q = u8(quantized(TensorType::Q8_0, z));
  EXPECT_EQ(q[1], 0x3c);     // d = 1, not 200 / 127
  EXPECT_EQ(q[2 + 5], 200);  // 200 / 1, its low byte
  EXPECT_EQ(q[2 + 10], 0);
  EXPECT_EQ(q[2 + 20], 127);
  z[5] = 3e9f;  // beyond int32: cvttss2si's INT32_MIN, low byte 0
  q = u8(quantized(TensorType::Q8_0, z));
  EXPECT_EQ(q[2 + 5], 0);
  // Float32 subnormals: d = 1e-40 / 127 is 0 in float16 and 1/d overflows, every code reads 0.
  q = u8(quantized(TensorType::Q8_0, std::vector<float>(32, 1e-40f)));
  for (std::uint8_t b : q) EXPECT_EQ(b, 0);
  // No type fails on non-finite input.
  std::vector<float> wild(256);
  for (int j = 0; j < 256; ++j)
    wild[j] = j % 3 == 0 ? std::numeric_limits<float>::quiet_NaN() : (j % 3 == 1 ? -std::numeric_limits<float>::infinity() : 1e38f);
  for (TensorType type : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0, TensorType::Q8_1,
                          TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::Q8_K})
    quantized(type, wild);
}

// Dequantizers on hand-built blocks: the value is the published formula.
TEST(QuantDequantize, KnownAnswers) {
  // Q4_1: d = 0.5, m = -1; element 0 = 3 x 0.5 - 1, element 16 = 12 x 0.5 - 1.
  auto q41 = dequantized(TensorType::Q4_1, block_of({0x00, 0x38, 0x00, 0xbc, 0xc3}, 20), 32);
  EXPECT_EQ(q41[0], 0.5f);
  EXPECT_EQ(q41[16], 5.0f);
  // Q4_K: d = 1, dmin = 0.5; sub-block 0: scale 2, min 3; element 0 code 5: 1 x 2 x 5 - 0.5 x 3.
  auto q4k = block_of({0x00, 0x3c, 0x00, 0x38, 2, 0, 0, 0, 3}, 144);
  q4k[16] = std::byte{0x05};
  EXPECT_EQ(dequantized(TensorType::Q4_K, q4k, 256)[0], 8.5f);
  // Q6_K: d = 0.5 at byte 208, scale[0] = -3 at byte 192; element 0: low 4 bits 0xf, high 2 bits 1
  // -> code 31 - 32 = -1: 0.5 x -3 x -1.
  auto q6k = block_of({0x0f}, 210);
  q6k[128] = std::byte{0x01};
  q6k[192] = std::byte{0xfd};
  q6k[208] = std::byte{0x00}, q6k[209] = std::byte{0x38};
  EXPECT_EQ(dequantized(TensorType::Q6_K, q6k, 256)[0], 1.5f);
  // Q3_K: d = 1 at byte 108; scale 0 = (low nibble 1 | high pair 2 << 4) - 32 = 1; element 0: low bits 3,
  // high-mask bit clear -> 3 - 4 = -1.
  auto q3k = block_of({}, 110);
  q3k[32] = std::byte{0x03};
  q3k[96] = std::byte{0x01};
  q3k[104] = std::byte{0x02};
  q3k[108] = std::byte{0x00}, q3k[109] = std::byte{0x3c};
  EXPECT_EQ(dequantized(TensorType::Q3_K, q3k, 256)[0], -1.0f);
  // IQ4_NL: d = 2, index 0 -> -127, index 15 -> 113.
  auto iq4 = dequantized(TensorType::IQ4_NL, block_of({0x00, 0x40, 0xf0}, 18), 32);
  EXPECT_EQ(iq4[0], -254.0f);
  EXPECT_EQ(iq4[16], 226.0f);
  // TQ2_0: d = 1; byte 0 = codes 2, 0, 1, 2 (two bits each) -> elements 0, 32, 64, 96 = 1, -1, 0, 1.
  auto tq2 = block_of({0x92}, 66);
  tq2[65] = std::byte{0x3c};
  auto t = dequantized(TensorType::TQ2_0, tq2, 256);
  EXPECT_EQ(t[0], 1.0f);
  EXPECT_EQ(t[32], -1.0f);
  EXPECT_EQ(t[64], 0.0f);
  EXPECT_EQ(t[96], 1.0f);
  // TQ1_0: a byte holds 5 base-3 digits as a fraction of 256 (rounded up): 2,1,0,0,0 is
  // ceil((2 x 81 + 1 x 27) x 256 / 243) = 200; d = 1 -> elements 0 and 32 are 1 and 0.
  auto tq1 = block_of({200}, 54);
  tq1[53] = std::byte{0x3c};
  auto t1 = dequantized(TensorType::TQ1_0, tq1, 256);
  EXPECT_EQ(t1[0], 1.0f);
  EXPECT_EQ(t1[32], 0.0f);
  EXPECT_EQ(t1[64], -1.0f);
  // MXFP4: exponent byte e scales by 2^(e-127), halved for the doubled E2M1 values: e = 127 -> 0.5;
  // code 7 (6.0, doubled 12) -> 6, code 9 (-0.5, doubled -1) -> -0.5. e = 0 -> 2^-128 (a subnormal).
  auto mx = dequantized(TensorType::MXFP4, block_of({127, 0x97}, 17), 32);
  EXPECT_EQ(mx[0], 6.0f);
  EXPECT_EQ(mx[16], -0.5f);
  EXPECT_EQ(dequantized(TensorType::MXFP4, block_of({0, 0x01}, 17), 32)[0], 0x1p-128f);
  // Q8_K: float32 d = 0.25, code -4 -> -1.
  auto q8k = block_of({0x00, 0x00, 0x80, 0x3e, 0xfc}, 292);
  EXPECT_EQ(dequantized(TensorType::Q8_K, q8k, 256)[0], -1.0f);
}

// ---- block types: round trips ------------------------------------------------------------------------

// Relative RMS error of quantize + dequantize on normal data: each type's expected accuracy (bounds
// well above what the algorithms reach, far below what a broken code layout gives).
TEST(QuantBlocks, RoundTripErrorIsBounded) {
  const struct {
    TensorType type;
    double bound;
  } cases[] = {{TensorType::F16, 0.001}, {TensorType::BF16, 0.005}, {TensorType::Q8_0, 0.01}, {TensorType::Q8_1, 0.01}, {TensorType::Q8_K, 0.01},
               {TensorType::Q6_K, 0.03}, {TensorType::Q5_0, 0.06},  {TensorType::Q5_1, 0.06}, {TensorType::Q5_K, 0.06}, {TensorType::Q4_0, 0.12},
               {TensorType::Q4_1, 0.12}, {TensorType::Q4_K, 0.12},  {TensorType::Q3_K, 0.25}, {TensorType::Q2_K, 0.45}};
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(256 * 64);
  for (auto& v : x) v = normal(rng);
  for (const auto& c : cases) {
    auto back = dequantized(c.type, quantized(c.type, x), x.size());
    double err = 0, ref = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      err += (back[i] - x[i]) * static_cast<double>(back[i] - x[i]);
      ref += x[i] * static_cast<double>(x[i]);
    }
    EXPECT_LT(std::sqrt(err / ref), c.bound) << sw::type_name(c.type);
  }
}

// Q8_0 keeps every value within half a step (d / 2) plus what storing d in float16 costs.
TEST(QuantQ8_0, EveryValueWithinHalfAStep) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
  std::vector<float> x(32 * 100);
  for (auto& v : x) v = uniform(rng);
  auto back = dequantized(TensorType::Q8_0, quantized(TensorType::Q8_0, x), x.size());
  for (std::size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (std::size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b + j]));
    const float d = amax / 127;
    for (std::size_t j = 0; j < 32; ++j) ASSERT_LE(std::fabs(back[b + j] - x[b + j]), 0.5f * d + 127 * d * 0x1p-11f) << b + j;
  }
}

// Blocks that corner the eight-blocks-at-a-time paths (q8_lanes.cpp): every BF16 value (infinities,
// NaNs and subnormals among them, so that some groups of eight fall back), tiny and huge scales (a
// range past FLT_MAX), blocks whose codes land on halves (d = 1 for Q8_0, Q4_1, Q5_1), x and -x tying
// for the signed maximum, zeros of either sign as a block's minimum or maximum, all-zero blocks.
std::vector<float> corner_blocks() {
  std::mt19937 rng(5);
  std::vector<std::uint32_t> every(1u << 16);
  for (std::uint32_t i = 0; i < every.size(); ++i) every[i] = i;
  std::vector<float> x;
  for (int r = 0; r < 2; ++r) {
    std::shuffle(every.begin(), every.end(), rng);
    for (std::uint32_t v : every) x.push_back(from_bits(v << 16));
  }
  std::vector<std::uint32_t> finite;
  for (std::uint32_t v : every)
    if (((v >> 7) & 0xffu) != 0xffu) finite.push_back(v);
  for (std::uint32_t v : finite) x.push_back(from_bits(v << 16));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float scale : {1e-40f, 1e-30f, 0.02f, 3e38f})
    for (int i = 0; i < 32 * 64; ++i) x.push_back(normal(rng) * scale);
  for (int b = 0; b < 64; ++b) {  // Q8_0's d = 1: every other code lands on a half
    x.push_back(127.0f);
    for (int j = 1; j < 32; ++j) x.push_back(static_cast<float>(static_cast<int>(rng() % 254) - 127) + (rng() % 2 ? 0.5f : -0.5f));
  }
  for (int top : {15, 31})
    for (int b = 0; b < 32; ++b) {  // Q4_1's and Q5_1's d = 1: codes on halves
      x.push_back(0.0f);
      x.push_back(static_cast<float>(top));
      for (int j = 2; j < 32; ++j) x.push_back(static_cast<float>(rng() % static_cast<unsigned>(2 * top + 1)) * 0.5f);
    }
  for (int b = 0; b < 64; ++b) {  // x and -x both the largest magnitude, in either order
    std::vector<float> block(32);
    for (auto& v : block) v = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
    const float a = static_cast<float>(2 + rng() % 6);
    const std::size_t first = rng() % 16;
    block[first] = rng() % 2 ? a : -a;
    block[16 + rng() % 16] = -block[first];
    x.insert(x.end(), block.begin(), block.end());
  }
  for (int b = 0; b < 64; ++b)  // zeros of both signs: alone, as the minimum, as the maximum
    for (int j = 0; j < 32; ++j) {
      const float zero = rng() % 2 ? 0.0f : -0.0f, v = static_cast<float>(rng() % 4) * 0.25f;
      x.push_back(b % 3 == 0 ? zero : rng() % 3 == 0 ? zero : b % 3 == 1 ? v : -v);
    }
  x.insert(x.end(), 32 * 9, 0.0f);
  x.insert(x.end(), 32 * 9, -0.0f);
  x.resize(x.size() / 32 * 32);
  return x;
}

// Rows of many blocks take the eight-blocks-at-a-time path where the CPU has AVX2, a block alone the
// one-block path: both give the same bytes on corner_blocks, at every alignment of the groups and
// with rows whose block count is no multiple of eight (their last blocks one at a time).
void expect_groups_equal_each_block(TensorType type) {
  const std::vector<float> x = corner_blocks();
  const std::uint64_t block_shape[1] = {32};
  const std::size_t bytes = sw::tensor_nbytes(type, block_shape).value();
  const std::vector<std::byte> all = quantized(type, x);
  const std::size_t blocks = x.size() / 32;
  for (std::size_t start : {0, 1, 3, 7}) {
    for (std::size_t count : {blocks - start, std::size_t{8 * 5 + 3}}) {
      const auto first = x.begin() + static_cast<std::ptrdiff_t>(start * 32);
      const std::vector<std::byte> part = quantized(type, std::vector<float>(first, first + static_cast<std::ptrdiff_t>(count * 32)));
      ASSERT_TRUE(std::equal(part.begin(), part.end(), all.begin() + static_cast<std::ptrdiff_t>(start * bytes))) << start << " " << count;
    }
  }
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::vector<std::byte> one =
        quantized(type, std::vector<float>(x.begin() + static_cast<std::ptrdiff_t>(b * 32), x.begin() + static_cast<std::ptrdiff_t>(b * 32 + 32)));
    ASSERT_TRUE(std::equal(one.begin(), one.end(), all.begin() + static_cast<std::ptrdiff_t>(b * bytes))) << "block " << b;
  }
}

TEST(QuantQ8_0, GroupsOfBlocksEqualEachBlockAlone) { expect_groups_equal_each_block(TensorType::Q8_0); }
TEST(QuantQ4_0, GroupsOfBlocksEqualEachBlockAlone) { expect_groups_equal_each_block(TensorType::Q4_0); }
TEST(QuantQ4_1, GroupsOfBlocksEqualEachBlockAlone) { expect_groups_equal_each_block(TensorType::Q4_1); }
TEST(QuantQ5_0, GroupsOfBlocksEqualEachBlockAlone) { expect_groups_equal_each_block(TensorType::Q5_0); }
TEST(QuantQ5_1, GroupsOfBlocksEqualEachBlockAlone) { expect_groups_equal_each_block(TensorType::Q5_1); }

// Quantizing what a block dequantizes to gives the block back when its scale is reached exactly.
TEST(QuantQ8_0, RequantizingIsStable) {
  std::mt19937 rng(3);
  std::vector<float> x(32 * 50);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : x) v = normal(rng);
  auto once = quantized(TensorType::Q8_0, x);
  auto twice = quantized(TensorType::Q8_0, dequantized(TensorType::Q8_0, once, x.size()));
  EXPECT_EQ(once, twice);
}

TEST(QuantBlocks, SupportedTypesAreListed) {
  for (TensorType type :
       {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0,
        TensorType::Q8_1, TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::Q8_K}) {
    EXPECT_TRUE(sw::can_quantize(type)) << sw::type_name(type);
    EXPECT_TRUE(sw::can_dequantize(type)) << sw::type_name(type);
  }
  for (TensorType type : {TensorType::IQ4_NL, TensorType::IQ4_XS, TensorType::TQ1_0, TensorType::TQ2_0, TensorType::MXFP4, TensorType::NVFP4,
                          TensorType::Q1_0, TensorType::Q2_0}) {
    EXPECT_TRUE(sw::can_quantize(type)) << sw::type_name(type);
    EXPECT_TRUE(sw::can_dequantize(type)) << sw::type_name(type);
  }
  for (TensorType type :
       {TensorType::IQ2_XXS, TensorType::IQ2_XS, TensorType::IQ3_XXS, TensorType::IQ1_S, TensorType::IQ3_S, TensorType::IQ2_S, TensorType::IQ1_M}) {
    EXPECT_TRUE(sw::can_dequantize(type)) << sw::type_name(type);
    // quantize() without importance: ggml's IQ3 and IQ2_S quantizers allow it; the others need weights.
    EXPECT_EQ(sw::can_quantize(type), !sw::requires_importance(type) && type != TensorType::IQ1_S && type != TensorType::IQ1_M)
        << sw::type_name(type);
  }
}

TEST(QuantBlocks, PartialBlocksAreInvalidArgument) {
  std::vector<float> values(33);
  std::vector<std::byte> bytes(36);
  auto status = sw::quantize(TensorType::Q8_0, values, bytes);
  ASSERT_FALSE(status.is_ok());
  EXPECT_EQ(status.error().kind(), sw::ErrorKind::InvalidArgument);
  EXPECT_NE(status.error().message().find("Q8_0"), std::string::npos);
  std::vector<float> out(256);
  std::vector<std::byte> short_block(143);
  status = sw::dequantize(TensorType::Q4_K, short_block, out);
  ASSERT_FALSE(status.is_ok());
  EXPECT_EQ(status.error().kind(), sw::ErrorKind::InvalidArgument);
}

// ---- importance-weighted quantizing (quantize_rows) -------------------------------------------------

// Two rows of 512 exact values (multiples of 1/16 at three magnitudes) and 512 exact weights.
constexpr std::size_t kWeightedRow = 512;
std::vector<float> weighted_input() {
  std::vector<float> x(2 * kWeightedRow);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(static_cast<int>((i * 37 + 11) % 101) - 50) / 16.0f * static_cast<float>(1 + (i / 64) % 3);
  return x;
}
std::vector<float> weighted_importance() {
  std::vector<float> w(kWeightedRow);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * static_cast<float>(1 + (i * 13) % 17);
  return w;
}

std::vector<std::byte> quantized_rows(TensorType type, const std::vector<float>& values, std::size_t row_length,
                                      const std::vector<float>& importance) {
  const std::uint64_t shape[1] = {values.size()};
  std::vector<std::byte> out(sw::tensor_nbytes(type, shape).value());
  auto status = sw::quantize_rows(type, values, out, row_length, importance);
  EXPECT_TRUE(status.is_ok()) << status.to_string();
  return out;
}

// Nine super-blocks of the inputs that take the searches' corners: normal values at several
// magnitudes, NaN, infinities and subnormals sprinkled in, an all-zero block, constant sub-blocks, and
// sub-blocks whose range is subnormal (1 / range overflows).
std::vector<float> k_quant_corner_blocks() {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x;
  for (float scale : {1.0f, 1e-3f, 3e3f, 1e-39f})
    for (int i = 0; i < 256; ++i) x.push_back(normal(rng) * scale);
  for (int i = 0; i < 256; ++i) x.push_back(i % 29 == 3 ? std::numeric_limits<float>::quiet_NaN() : normal(rng));
  for (int i = 0; i < 256; ++i)
    x.push_back(i == 77 ? std::numeric_limits<float>::infinity() : i == 200 ? -std::numeric_limits<float>::infinity() : normal(rng));
  x.insert(x.end(), 256, 0.0f);
  for (int i = 0; i < 256; ++i) x.push_back(i < 128 ? 0.5f : 1.0f);
  for (int i = 0; i < 256; ++i) x.push_back(from_bits(static_cast<std::uint32_t>(rng() % 8)) - (i % 2 ? 0.0f : 1e-45f));
  return x;
}

// The K-quants search the sub-blocks of several super-blocks a call (kquants.cpp: four for Q4_K and
// Q5_K, sixteen for Q3_K's descent) in vectors of 16, 8 or 4 lanes; a super-block alone goes through a
// narrower path. Every way gives each super-block the same bytes, weighted or not: so the judge's rows
// of four super-blocks (ggml's bytes) vouch for the other counts too.
TEST(QuantKQuants, GroupsOfSuperBlocksEqualEachAlone) {
  const std::vector<float> x = k_quant_corner_blocks();
  const std::size_t blocks = x.size() / 256;
  std::vector<float> importance(x.size());
  for (std::size_t i = 0; i < importance.size(); ++i) importance[i] = 0.25f * static_cast<float>(1 + (i * 13) % 17);
  for (TensorType type : {TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {
    const std::uint64_t one_shape[1] = {256};
    const std::size_t block_bytes = sw::tensor_nbytes(type, one_shape).value();
    const std::vector<std::byte> all = quantized(type, x);
    const std::vector<std::byte> all_weighted = quantized_rows(type, x, x.size(), importance);
    for (std::size_t count = 1; count < blocks; ++count) {
      const std::vector<float> head(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(256 * count));
      const std::vector<std::byte> part = quantized(type, head);
      ASSERT_TRUE(std::equal(part.begin(), part.end(), all.begin())) << sw::type_name(type) << ", the first " << count << " super-blocks";
    }
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::vector<float> one(x.begin() + static_cast<std::ptrdiff_t>(256 * b), x.begin() + static_cast<std::ptrdiff_t>(256 * b + 256));
      const std::vector<float> one_importance(importance.begin() + static_cast<std::ptrdiff_t>(256 * b),
                                              importance.begin() + static_cast<std::ptrdiff_t>(256 * b + 256));
      const std::vector<std::byte> alone = quantized(type, one);
      const std::vector<std::byte> alone_weighted = quantized_rows(type, one, 256, one_importance);
      const auto at = static_cast<std::ptrdiff_t>(b * block_bytes);
      ASSERT_TRUE(std::equal(alone.begin(), alone.end(), all.begin() + at)) << sw::type_name(type) << ", super-block " << b;
      ASSERT_TRUE(std::equal(alone_weighted.begin(), alone_weighted.end(), all_weighted.begin() + at))
          << sw::type_name(type) << " weighted, super-block " << b;
    }
  }
}

std::uint64_t fnv1a(const std::vector<std::byte>& bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::byte b : bytes) {
    h ^= std::to_integer<std::uint64_t>(b);
    h *= 0x100000001b3ull;
  }
  return h;
}

// The FNV-1a hashes of ggml's bytes for weighted_input() and weighted_importance(): ggml_quantize_chunk(
// type, x, dst, 0, 2, 512, importance) of the pinned llama.cpp (0.3.36's vendored tree). Every row of
// ggml's weighted quantizers is compared on a wide corpus by tests/quant/ggml_differential.sh.
TEST(QuantWeighted, KnownAnswersFromGgml) {
  const struct {
    TensorType type;
    std::uint64_t hash;
  } cases[] = {
      {TensorType::Q4_0, 0x61629557563109a1ull}, {TensorType::Q4_1, 0xf1bbaed9235d34d2ull}, {TensorType::Q5_0, 0x65b2ef79ef39a593ull},
      {TensorType::Q5_1, 0x34dcede5d9524effull}, {TensorType::Q2_K, 0x148cb05670bf7656ull}, {TensorType::Q3_K, 0xfb750d8d3eaac9dfull},
      {TensorType::Q4_K, 0x358d48cad307d76cull}, {TensorType::Q5_K, 0x904ef8fc5fb7cc77ull}, {TensorType::Q6_K, 0x6be5646d462bb8b9ull},
  };
  const auto x = weighted_input();
  const auto w = weighted_importance();
  for (const auto& c : cases) {
    EXPECT_TRUE(sw::takes_importance(c.type)) << sw::type_name(c.type);
    const auto bytes = quantized_rows(c.type, x, kWeightedRow, w);
    EXPECT_EQ(fnv1a(bytes), c.hash) << sw::type_name(c.type);
    EXPECT_NE(bytes, quantized(c.type, x)) << sw::type_name(c.type) << ": the weighted path is other code than the reference one";
  }
}

TEST(QuantWeighted, NoImportanceIsQuantize) {
  const auto x = weighted_input();
  for (TensorType type : {TensorType::Q4_0, TensorType::Q5_1, TensorType::Q2_K, TensorType::Q4_K, TensorType::Q6_K})
    EXPECT_EQ(quantized_rows(type, x, kWeightedRow, {}), quantized(type, x)) << sw::type_name(type);
}

TEST(QuantWeighted, TypesWhoseGgmlQuantizerTakesNoWeightsIgnoreThem) {
  const auto x = weighted_input();
  const auto w = weighted_importance();
  for (TensorType type : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0}) {
    EXPECT_FALSE(sw::takes_importance(type)) << sw::type_name(type);
    EXPECT_EQ(quantized_rows(type, x, kWeightedRow, w), quantized(type, x)) << sw::type_name(type);
  }
}

// Where the importance is large the weighted paths spend their precision: the importance-weighted
// squared error of the round trip is smaller than with the same weights' reference path. (A property of
// ggml's algorithms on this data, not a bound: exactness is the differential test's.)
TEST(QuantWeighted, ImportanceLowersTheWeightedError) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(16 * kWeightedRow);
  for (auto& v : x) v = normal(rng);
  std::vector<float> w(kWeightedRow);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = i % 8 == 0 ? 100.0f : 0.01f;
  auto weighted_error = [&](const std::vector<float>& y) {
    double e = 0;
    for (std::size_t i = 0; i < x.size(); ++i) e += w[i % kWeightedRow] * (x[i] - y[i]) * (x[i] - y[i]);
    return e;
  };
  for (TensorType type : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q2_K, TensorType::Q3_K,
                          TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {
    const double with = weighted_error(dequantized(type, quantized_rows(type, x, kWeightedRow, w), x.size()));
    const double without = weighted_error(dequantized(type, quantized(type, x), x.size()));
    EXPECT_LT(with, without) << sw::type_name(type);
  }
}

TEST(QuantWeighted, ArgumentErrorsAreInvalidArgument) {
  std::vector<float> x(512, 1.0f), w(256, 1.0f);
  std::vector<std::byte> out(2 * 144);
  auto expect_invalid = [](const sw::Status& status, const char* what) {
    ASSERT_FALSE(status.is_ok()) << what;
    EXPECT_EQ(status.error().kind(), sw::ErrorKind::InvalidArgument) << what;
    EXPECT_NE(status.error().message().find("Q4_K"), std::string::npos) << status.error().message();
  };
  expect_invalid(sw::quantize_rows(TensorType::Q4_K, x, out, 512, w), "256 weights for rows of 512");
  expect_invalid(sw::quantize_rows(TensorType::Q4_K, x, out, 0, w), "rows of 0");
  std::vector<float> x3(768, 1.0f);
  expect_invalid(sw::quantize_rows(TensorType::Q4_K, x3, out, 256, w), "bytes for 2 rows, not 3");
  std::vector<float> w128(128, 1.0f);
  expect_invalid(sw::quantize_rows(TensorType::Q4_K, x, out, 128, w128), "rows of half a super-block");
  // Rows of three 32-element blocks are fine for Q4_0.
  std::vector<float> w96(96, 1.0f), x96(192, 1.0f);
  std::vector<std::byte> out96(2 * 3 * 18);
  EXPECT_TRUE(sw::quantize_rows(TensorType::Q4_0, x96, out96, 96, w96).is_ok());
}

TEST(QuantWeighted, NoRowsAreFine) {
  std::vector<float> none, w(256, 1.0f);
  std::vector<std::byte> no_bytes;
  EXPECT_TRUE(sw::quantize_rows(TensorType::Q4_K, none, no_bytes, 256, w).is_ok());
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
