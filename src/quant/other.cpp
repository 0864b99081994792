// The codecs of the ggml types whose decoding needs no large code-book: IQ4_NL and IQ4_XS (a 16-entry
// non-linear table), TQ1_0 and TQ2_0 (ternary), MXFP4. Both directions compute ggml's expressions in its
// order: the quantizers are those ggml_quantize_chunk() runs (IQ4's with and without importance weights;
// TQ and MXFP4 take none). The IQ1/IQ2/IQ3 grid types are iq.cpp's.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/codecs.h"
#include "quant/e2m1.h"
#include "quant/rounding.h"
#include "quant/scale_search.h"

namespace safeweights::quant {
namespace {

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

// ---- IQ4 quantization ------------------------------------------------------------------------------

// Per-element weights of a block: the importance times sqrt(sigma2 + x^2) (sigma2 twice the block's mean
// square), or x^2 without importance.
void iq4_weights(const float* x, int n, const float* importance, float* weight) noexcept {
  if (importance == nullptr) {
    for (int j = 0; j < n; ++j) weight[j] = x[j] * x[j];
    return;
  }
  float sigma2 = 0;
  for (int j = 0; j < n; ++j) sigma2 += x[j] * x[j];
  sigma2 *= 2.f / static_cast<float>(n);
  for (int j = 0; j < n; ++j) weight[j] = importance[j] * std::sqrt(sigma2 + x[j] * x[j]);
}

void iq4_codes(const float* x, int n, float inverse_scale, std::uint8_t* L) noexcept {
  for (int j = 0; j < n; ++j) L[j] = static_cast<std::uint8_t>(nearest_level(16, kIq4Levels, inverse_scale * x[j]));
}

void pack_iq4_codes(const std::uint8_t* L, int n, std::byte* qs) noexcept {
  for (int i = 0; i < n / 32; ++i)
    for (int j = 0; j < 16; ++j) qs[16 * i + j] = std::byte(static_cast<std::uint8_t>(L[32 * i + j] | (L[32 * i + 16 + j] << 4)));
}

// Up to 8 IQ4_NL blocks (32 elements, 18 bytes each), their scales searched side by side.
void quantize_iq4_nl_blocks(const float* x, const float* importance, std::byte* out, int blocks) noexcept {
  float weight[8 * 32] = {}, scales[8] = {};  // zeroed: GCC cannot see that blocks <= 8 fills what is read
  for (int b = 0; b < blocks; ++b) iq4_weights(x + 32 * b, 32, importance != nullptr ? importance + 32 * b : nullptr, weight + 32 * b);
  search_scale_iq4_groups(blocks, x, weight, scales);
  for (int b = 0; b < blocks; ++b) {
    const float d = scales[b];
    store_f16(out + 18 * b, d);
    std::uint8_t L[32];
    iq4_codes(x + 32 * b, 32, d != 0 ? 1 / d : 0, L);
    pack_iq4_codes(L, 32, out + 18 * b + 2);
  }
}

// One IQ4_XS super-block (256 elements, 136 bytes): sub-block scales as 6-bit multiples of
// -max_scale/32, the codes chosen again for the rounded scale.
void quantize_iq4_xs_block(const float* x, const float* importance, std::byte* out) noexcept {
  float weight[256];  // with importance, sigma2 is the super-block's
  iq4_weights(x, 256, importance, weight);
  float scales[8];
  search_scale_iq4_groups(8, x, weight, scales);
  float max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < 8; ++ib) {
    if (std::fabs(scales[ib]) > amax_scale) {
      amax_scale = std::fabs(scales[ib]);
      max_scale = scales[ib];
    }
  }
  const float d = -max_scale / 32;
  store_f16(out, d);
  const float id = d != 0 ? 1 / d : 0.f;
  unsigned scales_h = 0;
  std::uint8_t scales_l[4] = {};
  std::uint8_t L[256];
  for (int ib = 0; ib < 8; ++ib) {
    int l = nearest_int(id * scales[ib]);
    l = l < -32 ? -32 : (l > 31 ? 31 : l);
    const float dl = d * static_cast<float>(l);
    iq4_codes(x + 32 * ib, 32, dl != 0 ? 1 / dl : 0.f, L + 32 * ib);
    l += 32;
    scales_l[ib / 2] = static_cast<std::uint8_t>(scales_l[ib / 2] | ((l & 0xf) << (4 * (ib % 2))));
    scales_h |= static_cast<unsigned>(l >> 4) << (2 * ib);
  }
  store_u16(out + 2, static_cast<std::uint16_t>(scales_h));
  std::memcpy(out + 4, scales_l, 4);
  pack_iq4_codes(L, 256, out + 8);
}

void quantize_iq4_nl(const float* src, std::byte* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; b += 8)
    quantize_iq4_nl_blocks(src + 32 * b, nullptr, dst + 18 * b, static_cast<int>(std::min<std::size_t>(8, blocks - b)));
}
void quantize_iq4_nl_weighted(const float* src, std::byte* dst, std::size_t row_length, const float* importance) {
  const std::size_t blocks = row_length / 32;
  for (std::size_t b = 0; b < blocks; b += 8)
    quantize_iq4_nl_blocks(src + 32 * b, importance + 32 * b, dst + 18 * b, static_cast<int>(std::min<std::size_t>(8, blocks - b)));
}
void quantize_iq4_xs(const float* src, std::byte* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) quantize_iq4_xs_block(src + 256 * b, nullptr, dst + 136 * b);
}
void quantize_iq4_xs_weighted(const float* src, std::byte* dst, std::size_t row_length, const float* importance) {
  for (std::size_t b = 0; b < row_length / 256; ++b) quantize_iq4_xs_block(src + 256 * b, importance + 256 * b, dst + 136 * b);
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

// ---- TQ quantization -------------------------------------------------------------------------------

// The block's scale: its largest |x| as ggml's MAX macro finds it (a NaN is kept until the next value).
float ternary_scale(const float* x) noexcept {
  float amax = 0.0f;
  for (int j = 0; j < 256; ++j) amax = amax > std::fabs(x[j]) ? amax : std::fabs(x[j]);
  return amax;
}

// x / d rounded to -1, 0 or 1, plus 1 (lroundf's result for anything else is kept as ggml keeps it).
inline int trit_of(float x, float id) noexcept { return static_cast<int>(std::lroundf(x * id) + 1); }

// `digits` trits of x[0], x[stride], ... as a base-3 number, most significant first, in 8 bits.
inline std::uint8_t trits(const float* x, std::size_t stride, int digits, float id) noexcept {
  std::uint8_t q = 0;
  for (int n = 0; n < digits; ++n) {
    q = static_cast<std::uint8_t>(q * 3);
    q = static_cast<std::uint8_t>(q + trit_of(x[n * stride], id));
  }
  return q;
}
// A base-3 number of 5 digits as a fraction of 256 (ceiling of q x 256 / 243).
inline std::byte trit_fraction(std::uint8_t q) noexcept { return std::byte(static_cast<std::uint8_t>((q * 256 + 242) / 243)); }

// Stores the block's scale (its largest |x|) at d_out; returns its inverse (0 for a zero block).
float ternary_header(const float* x, std::byte* d_out) noexcept {
  const float d = ternary_scale(x);
  store_f16(d_out, d);
  return d != 0 ? 1.0f / d : 0.0f;
}

void quantize_tq1_0(const float* x, std::byte* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, x += 256) {
    std::byte* out = dst + 54 * b;
    const float id = ternary_header(x, out + 52);
    for (int m = 0; m < 32; ++m) out[m] = trit_fraction(trits(x + m, 32, 5, id));
    for (int m = 0; m < 16; ++m) out[32 + m] = trit_fraction(trits(x + 160 + m, 16, 5, id));
    for (int j = 0; j < 4; ++j) out[48 + j] = trit_fraction(static_cast<std::uint8_t>(trits(x + 240 + j, 4, 4, id) * 3));
  }
}

void quantize_tq2_0(const float* x, std::byte* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, x += 256) {
    std::byte* out = dst + 66 * b;
    const float id = ternary_header(x, out + 64);
    for (int j = 0; j < 64; j += 32)
      for (int m = 0; m < 32; ++m) {
        std::uint8_t q = 0;
        for (int n = 0; n < 4; ++n) q = static_cast<std::uint8_t>(q + ((trit_of(x[4 * j + m + 32 * n], id) & 3) << (2 * n)));
        out[j + m] = std::byte(q);
      }
  }
}

// MXFP4 (OCP microscaling): blocks of 32, one E8M0 exponent byte and 16 bytes of E2M1 codes (17 bytes).
// ggml keeps the E2M1 values doubled (integers, quant/e2m1.h) and halves the scale instead: 2^(e-128), built from its
// bits (e < 2 lands in float32's subnormals). Every product is exact, so any order gives ggml's value.
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

// The shared exponent puts the largest |x| at 4..8 x 2^(e-127) (E2M1's top binade); ggml converts the
// float expression to uint8_t directly, which x86-64 does through a 32-bit truncation.
void quantize_mxfp4(const float* x, std::byte* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, x += 32) {
    std::byte* out = dst + 17 * b;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j)
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
    const auto e = static_cast<std::uint8_t>(amax > 0.0f ? truncate_like_x86(std::floor(std::log2(amax)) - 2 + 127) : 0);
    const float d = e8m0_half(e);
    out[0] = std::byte(e);
    for (int j = 0; j < 16; ++j) out[1 + j] = std::byte(static_cast<std::uint8_t>(nearest_e2m1(x[j], d) | (nearest_e2m1(x[16 + j], d) << 4)));
  }
}

}  // namespace

Codec other_codec(TensorType type) noexcept {
  switch (type) {
    case TensorType::IQ4_NL: return {quantize_iq4_nl, dequantize_iq4_nl, quantize_iq4_nl_weighted};
    case TensorType::IQ4_XS: return {quantize_iq4_xs, dequantize_iq4_xs, quantize_iq4_xs_weighted};
    case TensorType::TQ1_0: return {quantize_tq1_0, dequantize_tq1_0};
    case TensorType::TQ2_0: return {quantize_tq2_0, dequantize_tq2_0};
    case TensorType::MXFP4: return {quantize_mxfp4, dequantize_mxfp4};
    case TensorType::NVFP4: return nvfp4_codec();
    default: return iq_grid_codec(type);
  }
}

}  // namespace safeweights::quant
