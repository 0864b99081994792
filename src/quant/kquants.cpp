// The K-quants: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (and Q8_K), in super-blocks of 256 elements. The quantizers
// are llama.cpp's, without an importance matrix (ggml's quantize_row_*_K_ref) and with one (its
// quantize_row_*_K_impl, one row at a time): the same searches for sub-block scales (scale_search.h),
// in the same float operations in the same order, the same integer conversions, so that they produce
// its bytes; the dequantizers compute ggml's products in its order.
//
// Each quantizer first fills a local 256-entry array of codes L, then packs it; where a sub-block's
// scale comes out 0 ggml keeps the codes of the scale search, and so do we.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/codecs.h"
#include "quant/scale_search.h"

namespace safeweights::quant {
namespace {

constexpr int kSuper = 256;

inline std::uint8_t* bytes(std::byte* p) noexcept { return reinterpret_cast<std::uint8_t*>(p); }
inline const std::uint8_t* bytes(const std::byte* p) noexcept { return reinterpret_cast<const std::uint8_t*>(p); }

// The weighted paths' weight of one value: its importance times the root of the block's mean square
// (sigma2) plus its own square, as ggml's quantize_row_q*_K_impl compute it.
inline float importance_weight(float importance, float sigma2, float x) noexcept { return importance * std::sqrt(sigma2 + x * x); }

// Sums in order, as ggml's loops add.
inline float sum_of_squares(const float* x, int n) noexcept {
  float sum = 0;
  for (int l = 0; l < n; ++l) sum += x[l] * x[l];
  return sum;
}
inline float sum_of(const float* x, int n) noexcept {
  float sum = 0;
  for (int l = 0; l < n; ++l) sum += x[l];
  return sum;
}
// ggml's MIN(63, code) of a 6-bit scale code.
inline std::uint8_t capped_6bit(std::uint8_t code) noexcept { return code < 63 ? code : 63; }

// ---- packing helpers ---------------------------------------------------------------------------------

// Four 2-bit codes a byte: byte l of each 32-byte group holds elements l, l+32, l+64, l+96 of its 128.
void pack_2bit(const std::uint8_t* L, std::uint8_t* qs) noexcept {
  for (int j = 0; j < kSuper; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

// Q4_K/Q5_K: eight 6-bit scales and eight 6-bit mins in 12 bytes.
void scale_min_k4(int j, const std::uint8_t* q, std::uint8_t& d, std::uint8_t& m) noexcept {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = static_cast<std::uint8_t>((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
    m = static_cast<std::uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q3_K: sixteen 6-bit signed scales (stored +32) in 12 bytes: low nibbles in bytes 0..7, high pairs in 8..11.
int q3_scale(int j, const std::uint8_t* s) noexcept {
  const int low = j < 8 ? (s[j] & 0xf) : (s[j - 8] >> 4);
  return static_cast<std::int8_t>(low | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

// ---- Q2_K: 16 sub-blocks of 16, codes 0..3, 4-bit scales and mins ------------------------------------

// The end of both Q2_K paths, once the scale bytes and d, dmin are stored: each sub-block's values
// requantized with its stored scale and minimum (where the scale is 0 the search's codes stay), packed.
void finish_q2_k(const float* x, std::byte* block, std::uint8_t* L) {
  const std::uint8_t* scales = bytes(block);
  const float dd = load_f16(block + 80), dmin = load_f16(block + 82);
  for (int j = 0; j < 16; ++j) {
    const float d = dd * static_cast<float>(scales[j] & 0xf);
    if (d == 0) continue;
    const float dm = dmin * static_cast<float>(scales[j] >> 4);
    codes_at_scale(16, x + 16 * j, dm, d, true, 0, 3, 0, L + 16 * j);
  }
  pack_2bit(L, bytes(block) + 16);
}

void quantize_q2_k(const float* x, std::byte* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, x += kSuper) {
    std::byte* block = dst + b * 84;
    std::uint8_t* scales_out = bytes(block);
    std::uint8_t L[kSuper];
    float scales[16], mins[16], weights[kSuper];
    for (int l = 0; l < kSuper; ++l) weights[l] = std::fabs(x[l]);
    search_scale_min_groups(16, 16, 3, x, weights, L, scales, mins, -0.5f, 0.1f, 15, true);
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
      const float iscale = 15.f / max_scale;
      for (int j = 0; j < 16; ++j) scales_out[j] = static_cast<std::uint8_t>(nearest_int(iscale * scales[j]));
      store_f16(block + 80, max_scale / 15.f);
    } else {
      for (int j = 0; j < 16; ++j) scales_out[j] = 0;
      store_f16(block + 80, 0.0f);
    }
    if (max_min > 0) {
      const float iscale = 15.f / max_min;
      for (int j = 0; j < 16; ++j) scales_out[j] = static_cast<std::uint8_t>(scales_out[j] | (nearest_int(iscale * mins[j]) << 4));
      store_f16(block + 82, max_min / 15.f);
    } else {
      store_f16(block + 82, 0.0f);
    }
    finish_q2_k(x, block, L);
  }
}

// With importance: weights importance x sqrt(sigma2 + x^2) (sigma2 the super-block's mean square), a
// finer affine search per sub-block, and the 4-bit scales and mins chosen by make_qp_quants' search,
// weighted by each sub-block's total weight (ggml's quantize_row_q2_K_impl).
void quantize_q2_k_weighted(const float* x, std::byte* dst, std::size_t row_length, const float* importance) {
  for (std::size_t b = 0; b < row_length / kSuper; ++b, x += kSuper, importance += kSuper) {
    std::byte* block = dst + b * 84;
    std::uint8_t L[kSuper], Ls[16], Lm[16];
    float scales[16], mins[16], sw[16], weights[kSuper];
    const float sigma2 = sum_of_squares(x, kSuper) / static_cast<float>(kSuper);
    for (int l = 0; l < kSuper; ++l) weights[l] = importance_weight(importance[l], sigma2, x[l]);
    for (int j = 0; j < 16; ++j) sw[j] = sum_of(weights + 16 * j, 16);
    search_scale_min_groups(16, 16, 3, x, weights, L, scales, mins, -0.9f, 0.05f, 36, false);
    store_f16(block + 80, search_scale_positive(16, 15, scales, Ls, sw));
    store_f16(block + 82, search_scale_positive(16, 15, mins, Lm, sw));
    for (int j = 0; j < 16; ++j) bytes(block)[j] = static_cast<std::uint8_t>(Ls[j] | (Lm[j] << 4));
    finish_q2_k(x, block, L);
  }
}

void dequantize_q2_k(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::uint8_t* in = bytes(src + b * 84);
    const float d = load_f16(src + b * 84 + 80), min = load_f16(src + b * 84 + 82);
    const std::uint8_t* q = in + 16;
    int is = 0;
    for (int n = 0; n < kSuper; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const std::uint8_t sc = in[is++];
          const float dl = d * static_cast<float>(sc & 0xf), ml = min * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>((q[l + 16 * half] >> shift) & 3) - ml;
        }
      }
    }
  }
}

// ---- Q3_K: 16 sub-blocks of 16, codes -4..3, 6-bit signed scales -------------------------------------

// Scale j's 6 bits (stored +32) into the 12 scale bytes (which start zeroed): low nibbles in bytes 0..7,
// high pairs in 8..11.
void pack_q3_scale(int j, int l, std::uint8_t* scales_out) noexcept {
  if (j < 8)
    scales_out[j] = static_cast<std::uint8_t>(l & 0xf);
  else
    scales_out[j - 8] = static_cast<std::uint8_t>(scales_out[j - 8] | ((l & 0xf) << 4));
  scales_out[j % 4 + 8] = static_cast<std::uint8_t>(scales_out[j % 4 + 8] | ((l >> 4) << (2 * (j / 4))));
}

// The end of both Q3_K paths, once the scale bytes and d are stored: the values requantized with the
// stored scales (where a scale is 0 the search's codes stay), the high bits to hmask, the rest packed.
void finish_q3_k(const float* x, std::byte* block, std::int8_t* L) {
  std::uint8_t* out = bytes(block);
  std::uint8_t* hmask = out;
  const float dd = load_f16(block + 108);
  for (int j = 0; j < 16; ++j) {
    const float d = dd * static_cast<float>(q3_scale(j, out + 96));
    if (d == 0) continue;
    codes_at_scale(16, x + 16 * j, 0.0f, d, false, -4, 3, 4, reinterpret_cast<std::uint8_t*>(L + 16 * j));
  }
  // Codes are 0..7: the high bit of element j goes to byte j % 32, bit j / 32, the low two bits to qs
  // (ggml subtracts 4 from a code above 3, which leaves the same two bits).
  for (int m = 0; m < 32; ++m) {
    unsigned bits = 0;
    for (int k = 0; k < 8; ++k) bits |= static_cast<unsigned>(L[m + 32 * k] > 3) << k;
    hmask[m] = static_cast<std::uint8_t>(bits);
  }
  std::uint8_t codes[kSuper];
  for (int j = 0; j < kSuper; ++j) codes[j] = static_cast<std::uint8_t>(L[j] & 3);
  pack_2bit(codes, out + 32);
}

// Q3_K without importance: the super-blocks' sub-block searches kQ3Batch super-blocks at a time (the
// descent's lanes refill from the groups that go on: more groups, fuller vectors; 16 is a row of 4,096),
// then each super-block's scales and codes.
constexpr std::size_t kQ3Batch = 16;
void quantize_q3_k(const float* x, std::byte* dst, std::size_t blocks) {
  std::int8_t codes[kQ3Batch * kSuper];
  float sub_scales[kQ3Batch * 16];
  for (std::size_t b = 0; b < blocks; ++b, x += kSuper) {
    if (b % kQ3Batch == 0) search_scale_symmetric_descent_groups(static_cast<int>(16 * std::min(kQ3Batch, blocks - b)), 4, x, codes, sub_scales);
    std::byte* block = dst + b * 110;
    std::uint8_t* scales_out = bytes(block) + 96;
    std::int8_t* L = codes + kSuper * (b % kQ3Batch);
    const float* scales = sub_scales + 16 * (b % kQ3Batch);
    float max_scale, amax;
    signed_max(16, scales, max_scale, amax);
    std::memset(scales_out, 0, 12);
    if (max_scale != 0) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        const auto l8 = static_cast<std::int8_t>(nearest_int(iscale * scales[j]));
        pack_q3_scale(j, clamp(l8, -32, 31) + 32, scales_out);
      }
      store_f16(block + 108, 1 / iscale);
    } else {
      store_f16(block + 108, 0.0f);
    }
    finish_q3_k(x, block, L);
  }
}

// With importance: weights importance x sqrt(sigma2 + x^2) (sigma2 twice the super-block's mean
// square), make_qx_quants' trial search per sub-block, and again over the 16 scales weighted by each
// sub-block's total weight (ggml's quantize_row_q3_K_impl).
void quantize_q3_k_weighted(const float* x, std::byte* dst, std::size_t row_length, const float* importance) {
  for (std::size_t b = 0; b < row_length / kSuper; ++b, x += kSuper, importance += kSuper) {
    std::byte* block = dst + b * 110;
    std::int8_t L[kSuper], Ls[16];
    float scales[16], sw[16], weights[kSuper];
    const float sigma2 = 2 * sum_of_squares(x, kSuper) / static_cast<float>(kSuper);
    for (int l = 0; l < kSuper; ++l) weights[l] = importance_weight(importance[l], sigma2, x[l]);
    for (int j = 0; j < 16; ++j) sw[j] = sum_of(weights + 16 * j, 16);
    search_scale_symmetric_trials_groups(16, 16, 4, x, weights, L, scales);
    const float d_block = search_scale_symmetric_trials(16, 32, scales, sw, Ls);
    std::memset(bytes(block) + 96, 0, 12);
    for (int j = 0; j < 16; ++j) pack_q3_scale(j, Ls[j], bytes(block) + 96);
    store_f16(block + 108, d_block);
    finish_q3_k(x, block, L);
  }
}

void dequantize_q3_k(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::uint8_t* in = bytes(src + b * 110);
    const std::uint8_t* hm = in;
    const std::uint8_t* q = in + 32;
    const float d_all = load_f16(src + b * 110 + 108);
    int is = 0, bit = 0;
    for (int n = 0; n < kSuper; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, ++bit) {
        for (int half = 0; half < 2; ++half) {
          const float dl = d_all * static_cast<float>(q3_scale(is++, in + 96));
          for (int l = 0; l < 16; ++l) {
            const int low = (q[l + 16 * half] >> shift) & 3;
            const int high = (hm[l + 16 * half] >> bit) & 1 ? 0 : 4;
            *y++ = dl * static_cast<float>(low - high);
          }
        }
      }
    }
  }
}

// ---- Q4_K and Q5_K: 8 sub-blocks of 32, 6-bit scales and mins ----------------------------------------

// The end of both paths' scale choice: the eight scales `ls` and mins `lm` packed into the 12 bytes at
// out + 4 (bits above the sixth spill as in ggml), d and dmin stored at out[0..3], and the codes L
// requantized with the stored values (where a scale is 0 the search's codes stay).
template <int Nmax>
void finish_k4_scales(const float* x, const std::uint8_t* ls, const std::uint8_t* lm, float d_block, float m_block, std::byte* block,
                      std::uint8_t* L) {
  std::uint8_t* s = bytes(block) + 4;
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = ls[j];
      s[j + 4] = lm[j];
    } else {
      s[j + 4] = static_cast<std::uint8_t>((ls[j] & 0xf) | ((lm[j] & 0xf) << 4));
      s[j - 4] = static_cast<std::uint8_t>(s[j - 4] | ((ls[j] >> 4) << 6));
      s[j] = static_cast<std::uint8_t>(s[j] | ((lm[j] >> 4) << 6));
    }
  }
  store_f16(block, d_block);
  store_f16(block + 2, m_block);
  const float dd = load_f16(block), dmin = load_f16(block + 2);
  for (int j = 0; j < 8; ++j) {
    std::uint8_t sc, m;
    scale_min_k4(j, s, sc, m);
    const float d = dd * static_cast<float>(sc);
    if (d == 0) continue;
    const float dm = dmin * static_cast<float>(m);
    codes_at_scale(32, x + 32 * j, dm, d, true, 0, Nmax, 0, L + 32 * j);
  }
}

// Super-blocks that go through one scale search call together: more groups side by side in the lanes
// (32 sub-blocks: two vectors of AVX-512's 16).
constexpr int kK4Batch = 4;

// The scale search of both without importance: the 12 scale bytes, d and dmin, and the codes in L, for
// `count` (at most kK4Batch) super-blocks at x, their blocks kBlock bytes apart and their codes 256
// apart in L.
template <int Nmax, std::size_t kBlock>
void quantize_k4_scales(const float* x, int count, std::byte* block, std::uint8_t* L) {
  constexpr float kRmin = Nmax == 15 ? -1.f : -0.5f;
  constexpr int kSteps = Nmax == 15 ? 20 : 15;
  float scales[8 * kK4Batch], mins[8 * kK4Batch], weights[kK4Batch * kSuper];
  for (int j = 0; j < 8 * count; ++j) {
    const float av_x = std::sqrt(sum_of_squares(x + 32 * j, 32) / 32);
    for (int l = 0; l < 32; ++l) weights[32 * j + l] = av_x + std::fabs(x[32 * j + l]);
  }
  search_scale_min_groups(8 * count, 32, Nmax, x, weights, L, scales, mins, kRmin, 0.1f, kSteps, false);
  for (int b = 0; b < count; ++b) {
    const float* sc = scales + 8 * b;
    const float* mn = mins + 8 * b;
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      if (sc[j] > max_scale) max_scale = sc[j];
      if (mn[j] > max_min) max_min = mn[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    std::uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; ++j) {
      ls[j] = capped_6bit(static_cast<std::uint8_t>(nearest_int(inv_scale * sc[j])));
      lm[j] = capped_6bit(static_cast<std::uint8_t>(nearest_int(inv_min * mn[j])));
    }
    finish_k4_scales<Nmax>(x + b * kSuper, ls, lm, max_scale / 63.f, max_min / 63.f, block + b * kBlock, L + b * kSuper);
  }
}

// With importance: weights importance x sqrt(sigma2 + x^2) (sigma2 twice the super-block's mean
// square), a finer affine search per sub-block, and the 6-bit scales and mins chosen by make_qp_quants'
// search weighted by each sub-block's total weight (ggml's quantize_row_q4_K_impl / q5_K_impl; only
// Q5_K caps the codes at 63 there). `count` super-blocks as quantize_k4_scales takes them.
template <int Nmax, std::size_t kBlock>
void quantize_k4_scales_weighted(const float* x, int count, const float* importance, std::byte* block, std::uint8_t* L) {
  float scales[8 * kK4Batch], mins[8 * kK4Batch], sw[8 * kK4Batch], weights[kK4Batch * kSuper];
  for (int b = 0; b < count; ++b) {
    const float sigma2 = 2 * sum_of_squares(x + b * kSuper, kSuper) / static_cast<float>(kSuper);
    for (int l = b * kSuper; l < (b + 1) * kSuper; ++l) weights[l] = importance_weight(importance[l], sigma2, x[l]);
  }
  for (int j = 0; j < 8 * count; ++j) sw[j] = sum_of(weights + 32 * j, 32);
  search_scale_min_groups(8 * count, 32, Nmax, x, weights, L, scales, mins, -0.9f, 0.05f, 36, false);
  for (int b = 0; b < count; ++b) {
    std::uint8_t ls[8], lm[8];
    const float d_block = search_scale_positive(8, 63, scales + 8 * b, ls, sw + 8 * b);
    const float m_block = search_scale_positive(8, 63, mins + 8 * b, lm, sw + 8 * b);
    if constexpr (Nmax == 31) {
      for (int j = 0; j < 8; ++j) {
        ls[j] = capped_6bit(ls[j]);
        lm[j] = capped_6bit(lm[j]);
      }
    }
    finish_k4_scales<Nmax>(x + b * kSuper, ls, lm, d_block, m_block, block + b * kBlock, L + b * kSuper);
  }
}

// Q4_K's codes: two nibbles a byte, elements l and l+32 of each 64.
void pack_q4_k_codes(const std::uint8_t* L, std::uint8_t* q) noexcept {
  for (int j = 0; j < kSuper; j += 64, q += 32)
    for (int l = 0; l < 32; ++l) q[l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 4));
}

// Q5_K's codes: low nibbles as Q4_K's at out + 48, fifth bits in the 32 bytes at out + 16.
void pack_q5_k_codes(const std::uint8_t* L, std::uint8_t* out) noexcept {
  std::uint8_t* qh = out + 16;
  std::uint8_t* ql = out + 48;
  std::memset(qh, 0, 32);
  int bit = 0;
  for (int n = 0; n < kSuper; n += 64, ql += 32, bit += 2) {
    for (int j = 0; j < 32; ++j) {
      int l1 = L[n + j], l2 = L[n + j + 32];
      if (l1 > 15) {
        l1 -= 16;
        qh[j] = static_cast<std::uint8_t>(qh[j] | (1u << bit));
      }
      if (l2 > 15) {
        l2 -= 16;
        qh[j] = static_cast<std::uint8_t>(qh[j] | (2u << bit));
      }
      ql[j] = static_cast<std::uint8_t>(l1 | (l2 << 4));
    }
  }
}

// kK4Batch super-blocks at a time (fewer at the end), then their codes packed.
void quantize_q4_k(const float* x, std::byte* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; b += kK4Batch) {
    const int count = static_cast<int>(std::min<std::size_t>(kK4Batch, blocks - b));
    std::uint8_t L[kK4Batch * kSuper];
    quantize_k4_scales<15, 144>(x + b * kSuper, count, dst + b * 144, L);
    for (int k = 0; k < count; ++k) pack_q4_k_codes(L + k * kSuper, bytes(dst + (b + k) * 144) + 16);
  }
}

void quantize_q5_k(const float* x, std::byte* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; b += kK4Batch) {
    const int count = static_cast<int>(std::min<std::size_t>(kK4Batch, blocks - b));
    std::uint8_t L[kK4Batch * kSuper];
    quantize_k4_scales<31, 176>(x + b * kSuper, count, dst + b * 176, L);
    for (int k = 0; k < count; ++k) pack_q5_k_codes(L + k * kSuper, bytes(dst + (b + k) * 176));
  }
}

void quantize_q4_k_weighted(const float* x, std::byte* dst, std::size_t row_length, const float* importance) {
  const std::size_t blocks = row_length / kSuper;
  for (std::size_t b = 0; b < blocks; b += kK4Batch) {
    const int count = static_cast<int>(std::min<std::size_t>(kK4Batch, blocks - b));
    std::uint8_t L[kK4Batch * kSuper];
    quantize_k4_scales_weighted<15, 144>(x + b * kSuper, count, importance + b * kSuper, dst + b * 144, L);
    for (int k = 0; k < count; ++k) pack_q4_k_codes(L + k * kSuper, bytes(dst + (b + k) * 144) + 16);
  }
}

void quantize_q5_k_weighted(const float* x, std::byte* dst, std::size_t row_length, const float* importance) {
  const std::size_t blocks = row_length / kSuper;
  for (std::size_t b = 0; b < blocks; b += kK4Batch) {
    const int count = static_cast<int>(std::min<std::size_t>(kK4Batch, blocks - b));
    std::uint8_t L[kK4Batch * kSuper];
    quantize_k4_scales_weighted<31, 176>(x + b * kSuper, count, importance + b * kSuper, dst + b * 176, L);
    for (int k = 0; k < count; ++k) pack_q5_k_codes(L + k * kSuper, bytes(dst + (b + k) * 176));
  }
}

template <int Bits>
void dequantize_k4(const std::byte* src, float* y, std::size_t blocks) {
  constexpr std::size_t kSize = Bits == 4 ? 144 : 176;
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::uint8_t* in = bytes(src + b * kSize);
    const float d = load_f16(src + b * kSize), min = load_f16(src + b * kSize + 2);
    const std::uint8_t* qh = in + 16;
    const std::uint8_t* ql = in + (Bits == 4 ? 16 : 48);
    for (int is = 0; is < 8; is += 2, ql += 32) {
      for (int half = 0; half < 2; ++half) {
        std::uint8_t sc, m;
        scale_min_k4(is + half, in + 4, sc, m);
        const float dl = d * static_cast<float>(sc), ml = min * static_cast<float>(m);
        for (int l = 0; l < 32; ++l) {
          int q = half == 0 ? (ql[l] & 0xf) : (ql[l] >> 4);
          if constexpr (Bits == 5) q += (qh[l] >> (is + half)) & 1 ? 16 : 0;
          *y++ = dl * static_cast<float>(q) - ml;
        }
      }
    }
  }
}

// ---- Q6_K: 16 sub-blocks of 16, codes -32..31, 8-bit signed scales -----------------------------------

// Both paths: make_qx_quants' trial search per sub-block, weighted by x^2 or, with importance, by the
// importance itself (ggml's quantize_row_q6_K_ref and quantize_row_q6_K_impl); `importance` is null or
// holds a weight per value.
// Two super-blocks' sub-blocks a search call (two AVX-512 vectors side by side).
constexpr std::size_t kQ6Batch = 2;
void quantize_q6_k_blocks(const float* x, std::byte* dst, std::size_t blocks, const float* importance) {
  std::int8_t codes[kQ6Batch * kSuper];
  float sub_scales[kQ6Batch * 16];
  for (std::size_t b = 0; b < blocks; ++b, x += kSuper) {
    if (b % kQ6Batch == 0)
      search_scale_symmetric_trials_groups(static_cast<int>(16 * std::min(kQ6Batch, blocks - b)), 16, 32, x,
                                           importance != nullptr ? importance + b * kSuper : nullptr, codes, sub_scales);
    std::uint8_t* out = bytes(dst + b * 210);
    std::int8_t* L = codes + kSuper * (b % kQ6Batch);
    const float* scales = sub_scales + 16 * (b % kQ6Batch);
    float max_scale, max_abs_scale;
    signed_max(16, scales, max_scale, max_abs_scale);
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(out, 0, 210);
      continue;
    }
    const float iscale = -128.f / max_scale;
    store_f16(dst + b * 210 + 208, 1 / iscale);
    auto* sc_out = reinterpret_cast<std::int8_t*>(out + 192);
    for (int ib = 0; ib < 16; ++ib) {
      const int v = nearest_int(iscale * scales[ib]);
      sc_out[ib] = static_cast<std::int8_t>(v < 127 ? v : 127);
    }
    const float dd = load_f16(dst + b * 210 + 208);
    for (int j = 0; j < 16; ++j) {
      const float d = dd * static_cast<float>(sc_out[j]);
      if (d == 0) continue;
      codes_at_scale(16, x + 16 * j, 0.0f, d, false, -32, 31, 32, reinterpret_cast<std::uint8_t*>(L + 16 * j));
    }
    std::uint8_t* ql = out;
    std::uint8_t* qh = out + 128;
    for (int j = 0; j < kSuper; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const auto c = [&](int k) { return static_cast<unsigned>(static_cast<std::uint8_t>(L[j + l + 32 * k])); };
        ql[l] = static_cast<std::uint8_t>((c(0) & 0xf) | ((c(2) & 0xf) << 4));
        ql[l + 32] = static_cast<std::uint8_t>((c(1) & 0xf) | ((c(3) & 0xf) << 4));
        qh[l] = static_cast<std::uint8_t>((c(0) >> 4) | ((c(1) >> 4) << 2) | ((c(2) >> 4) << 4) | ((c(3) >> 4) << 6));
      }
    }
  }
}

void quantize_q6_k(const float* x, std::byte* dst, std::size_t blocks) { quantize_q6_k_blocks(x, dst, blocks, nullptr); }

void quantize_q6_k_weighted(const float* x, std::byte* dst, std::size_t row_length, const float* importance) {
  quantize_q6_k_blocks(x, dst, row_length / kSuper, importance);
}

void dequantize_q6_k(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::uint8_t* ql = bytes(src + b * 210);
    const std::uint8_t* qh = ql + 128;
    const auto* sc = reinterpret_cast<const std::int8_t*>(ql + 192);
    const float d = load_f16(src + b * 210 + 208);
    for (int n = 0; n < kSuper; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

// ---- Q8_K: 256 int8 codes, a float32 scale and sums of 16 (an intermediate type of ggml's) ----------

void quantize_q8_k(const float* x, std::byte* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, x += kSuper) {
    std::byte* out = dst + b * 292;
    auto* qs = reinterpret_cast<std::int8_t*>(out + 4);
    float max, amax;
    signed_max(kSuper, x, max, amax);
    if (amax == 0) {  // ggml leaves the sums untouched here; ours are 0, the sums of these codes
      std::memset(out, 0, 292);
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kSuper; ++j) {
      const int v = nearest_int(iscale * x[j]);
      qs[j] = static_cast<std::int8_t>(v < 127 ? v : 127);
    }
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += qs[16 * j + i];
      store_u16(out + 260 + 2 * j, static_cast<std::uint16_t>(sum));
    }
    store_f32(out, 1 / iscale);
  }
}

void dequantize_q8_k(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * 292;
    const float d = load_f32(in);
    for (int j = 0; j < kSuper; ++j) *y++ = d * static_cast<float>(load_i8(in + 4 + j));
  }
}

}  // namespace

Codec k_codec(TensorType type) noexcept {
  switch (type) {
    case TensorType::Q2_K: return {quantize_q2_k, dequantize_q2_k, quantize_q2_k_weighted};
    case TensorType::Q3_K: return {quantize_q3_k, dequantize_q3_k, quantize_q3_k_weighted};
    case TensorType::Q4_K: return {quantize_q4_k, dequantize_k4<4>, quantize_q4_k_weighted};
    case TensorType::Q5_K: return {quantize_q5_k, dequantize_k4<5>, quantize_q5_k_weighted};
    case TensorType::Q6_K: return {quantize_q6_k, dequantize_q6_k, quantize_q6_k_weighted};
    case TensorType::Q8_K: return {quantize_q8_k, dequantize_q8_k};
    default: return {};
  }
}

}  // namespace safeweights::quant
