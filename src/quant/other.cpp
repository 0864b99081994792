// Dequantizers for the other ggml types a downloaded GGUF may hold and whose decoding needs no large
// code-book: IQ4_NL and IQ4_XS (a 16-entry non-linear table), TQ1_0 and TQ2_0 (ternary), MXFP4. They compute
// ggml's products in its order. Quantizing to these types is not supported (their quantizers search
// with an importance matrix); neither are the IQ1/IQ2/IQ3 types, whose code-books are not carried here.
#include <bit>
#include <cstdint>

#include "quant/codecs.h"

namespace safeweights::quant {
namespace {

// IQ4's sixteen levels, from ggml's published table.
constexpr std::int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// 32 elements from 16 bytes of 4-bit level indices: low nibbles first, then high nibbles.
inline void iq4_levels(const std::byte* qs, float d, float* y) noexcept {
  for (int j = 0; j < 16; ++j) {
    const unsigned byte = load_u8(qs + j);
    y[j] = d * static_cast<float>(kIq4Levels[byte & 0xfu]);
    y[j + 16] = d * static_cast<float>(kIq4Levels[byte >> 4]);
  }
}

// IQ4_NL: blocks of 32, a float16 scale and 16 bytes of indices (18 bytes).
void dequantize_iq4_nl(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, y += 32) iq4_levels(src + b * 18 + 2, load_f16(src + b * 18), y);
}

// IQ4_XS: super-blocks of 256: float16 d, 16 bits of scale high pairs, 4 bytes of scale low nibbles, 128
// bytes of indices (136 bytes); sub-block ib has the 6-bit scale ls, used as d x (ls - 32).
void dequantize_iq4_xs(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * 136;
    const float d = load_f16(in);
    const unsigned scales_h = load_u16(in + 2);
    for (int ib = 0; ib < 8; ++ib, y += 32) {
      const unsigned low = (load_u8(in + 4 + ib / 2) >> (4 * (ib % 2))) & 0xfu;
      const int ls = static_cast<int>(low | (((scales_h >> (2 * ib)) & 3u) << 4));
      iq4_levels(in + 8 + 16 * ib, d * static_cast<float>(ls - 32), y);
    }
  }
}

// One ternary digit out of a base-3 byte: the byte holds the digits as a fraction of 256 (rounded up),
// so multiplying by 3^n (mod 256) brings digit n to the top, and (q x 3) >> 8 reads it.
inline float trit(std::uint8_t packed, unsigned pow3, float d) noexcept {
  const auto q = static_cast<std::uint8_t>(packed * pow3);
  const int digit = (q * 3) >> 8;
  return static_cast<float>(digit - 1) * d;
}

// TQ1_0: 256 elements in 48 bytes of 5 digits, 4 bytes of 4 digits, and a float16 scale (54 bytes).
// Elements run: digit n of bytes 0..31 for n = 0..4, then of bytes 32..47, then digit n of the 4 bytes.
void dequantize_tq1_0(const std::byte* src, float* y, std::size_t blocks) {
  constexpr unsigned kPow3[5] = {1, 3, 9, 27, 81};
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * 54;
    const float d = load_f16(in + 52);
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 32; ++m) *y++ = trit(load_u8(in + m), kPow3[n], d);
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 16; ++m) *y++ = trit(load_u8(in + 32 + m), kPow3[n], d);
    for (int n = 0; n < 4; ++n)
      for (int m = 0; m < 4; ++m) *y++ = trit(load_u8(in + 48 + m), kPow3[n], d);
  }
}

// TQ2_0: 256 elements of 2 bits (code - 1) x d; byte m of each 32 holds elements m, m+32, m+64, m+96.
void dequantize_tq2_0(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * 66;
    const float d = load_f16(in + 64);
    for (int j = 0; j < 64; j += 32)
      for (int shift = 0; shift < 8; shift += 2)
        for (int m = 0; m < 32; ++m) *y++ = static_cast<float>(((load_u8(in + j + m) >> shift) & 3) - 1) * d;
  }
}

// MXFP4 (OCP microscaling): blocks of 32, one E8M0 exponent byte and 16 bytes of E2M1 codes (17 bytes).
// ggml keeps the E2M1 values doubled (integers) and halves the scale instead: 2^(e-128), built from its
// bits (e < 2 lands in float32's subnormals). Every product is exact, so any order gives ggml's value.
constexpr std::int8_t kE2m1Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

inline float e8m0_half(unsigned e) noexcept { return std::bit_cast<float>(e < 2 ? (0x00200000u << e) : ((e - 1u) << 23)); }

void dequantize_mxfp4(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, y += 32) {
    const std::byte* in = src + b * 17;
    const float d = e8m0_half(load_u8(in));
    for (int j = 0; j < 16; ++j) {
      const unsigned byte = load_u8(in + 1 + j);
      y[j] = static_cast<float>(kE2m1Doubled[byte & 0xfu]) * d;
      y[j + 16] = static_cast<float>(kE2m1Doubled[byte >> 4]) * d;
    }
  }
}

}  // namespace

Codec other_codec(TensorType type) noexcept {
  switch (type) {
    case TensorType::IQ4_NL: return {nullptr, dequantize_iq4_nl};
    case TensorType::IQ4_XS: return {nullptr, dequantize_iq4_xs};
    case TensorType::TQ1_0: return {nullptr, dequantize_tq1_0};
    case TensorType::TQ2_0: return {nullptr, dequantize_tq2_0};
    case TensorType::MXFP4: return {nullptr, dequantize_mxfp4};
    default: return {};
  }
}

}  // namespace safeweights::quant
