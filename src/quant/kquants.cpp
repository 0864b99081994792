// The K-quants: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (and Q8_K), in super-blocks of 256 elements. The quantizers
// are llama.cpp's quantizers without an importance matrix (ggml's quantize_row_*_K_ref): the same
// search for sub-block scales, in the same float operations in the same order, the same integer
// conversions, so that they produce its bytes; the dequantizers compute ggml's products in its order.
//
// Each quantizer first fills a local 256-entry array of codes L, then packs it; where a sub-block's
// scale comes out 0 ggml keeps the codes of the scale search, and so do we.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/codecs.h"

namespace safeweights::quant {
namespace {

constexpr int kSuper = 256;
constexpr float kGroupMaxEps = 1e-15f;  // below this a group counts as all zero

// Round to nearest (ties to even) by adding 1.5 x 2^23 and reading the low mantissa bits, as ggml does.
// Exact for |f| <= 2^22; for larger or non-finite input it gives ggml's value too, since it is the
// same bit manipulation.
inline int nearest_int(float f) noexcept {
  const float shifted = f + 12582912.0f;
  const auto bits = std::bit_cast<std::uint32_t>(shifted);
  return static_cast<int>(bits & 0x7fffffu) - 0x400000;
}
inline int clamp(int v, int lo, int hi) noexcept { return v < lo ? lo : (v > hi ? hi : v); }
inline std::uint8_t* bytes(std::byte* p) noexcept { return reinterpret_cast<std::uint8_t*>(p); }
inline const std::uint8_t* bytes(const std::byte* p) noexcept { return reinterpret_cast<const std::uint8_t*>(p); }

// ---- scale searches ----------------------------------------------------------------------------------

// Scale and minimum for `n` values on codes 0..nmax, minimising the weighted |error| (use_mad) or
// squared error over nstep+1 trial scales; returns the scale, stores -min in *neg_min.
float search_scale_min(int n, int nmax, const float* x, const float* w, std::uint8_t* L, float* neg_min, float rmin, float rdelta, int nstep,
                       bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *neg_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_mad = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<std::uint8_t>(clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_mad += w[i] * diff;
  }
  std::uint8_t trial[32];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      trial[i] = static_cast<std::uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float mad = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(trial[i]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        mad += w[i] * diff;
      }
      if (mad < best_mad) {
        for (int i = 0; i < n; ++i) L[i] = trial[i];
        best_mad = mad;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

// The signed value of largest magnitude (first met; NaN never wins) and that magnitude.
inline void signed_max(int n, const float* x, float& max, float& amax) noexcept {
  max = 0;
  amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
}

// The start of both symmetric searches (16 values): the signed maximum, or true for a group that is
// all zero (|max| below kGroupMaxEps), whose codes are then 0 and scale 0.
bool zero_group(const float* x, std::int8_t* L, float& max) noexcept {
  float amax;
  signed_max(16, x, max, amax);
  if (amax >= kGroupMaxEps) return false;
  for (int i = 0; i < 16; ++i) L[i] = 0;
  return true;
}

// Codes -nmax..nmax-1 of 16 values at 1/scale `iscale` (stored in L unless it is null), and their
// x^2-weighted sums of l x and l^2.
void weighted_codes(int nmax, const float* x, float iscale, std::int8_t* L, float& sumlx, float& suml2) noexcept {
  sumlx = suml2 = 0;
  for (int i = 0; i < 16; ++i) {
    const int l = clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    if (L != nullptr) L[i] = static_cast<std::int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
}

// Symmetric codes for 16 values, refined by coordinate descent on the x^2-weighted error (Q3_K); L
// gets the codes plus nmax.
float search_scale_symmetric_descent(int nmax, const float* x, std::int8_t* L) {
  float max;
  if (zero_group(x, L, max)) return 0.0f;
  float sumlx, suml2;
  weighted_codes(nmax, x, static_cast<float>(-nmax) / max, L, sumlx, suml2);
  for (int itry = 0; itry < 5; ++itry) {
    int changed = 0;
    for (int i = 0; i < 16; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0) {
        float sl2 = suml2 - w * li * li;
        const int new_l = clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          const float fl = static_cast<float>(new_l);
          slx += w * x[i] * fl;
          sl2 += w * fl * fl;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<std::int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < 16; ++i) L[i] = static_cast<std::int8_t>(L[i] + nmax);
  return sumlx / suml2;
}

// Symmetric codes for 16 values, the best of 19 trial scales by x^2-weighted error (Q6_K); L gets the
// codes plus nmax.
float search_scale_symmetric_trials(int nmax, const float* x, std::int8_t* L) {
  float max;
  if (zero_group(x, L, max)) return 0.0f;
  float sumlx, suml2;
  weighted_codes(nmax, x, static_cast<float>(-nmax) / max, L, sumlx, suml2);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    weighted_codes(nmax, x, iscale, nullptr, sumlx, suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      weighted_codes(nmax, x, iscale, L, sumlx, suml2);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  for (int i = 0; i < 16; ++i) L[i] = static_cast<std::int8_t>(L[i] + nmax);
  return scale;
}

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

void quantize_q2_k(const float* x, std::byte* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, x += kSuper) {
    std::uint8_t* out = bytes(dst + b * 84);
    std::uint8_t* scales_out = out;
    std::uint8_t L[kSuper];
    float scales[16], mins[16], weights[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = search_scale_min(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
      const float iscale = 15.f / max_scale;
      for (int j = 0; j < 16; ++j) scales_out[j] = static_cast<std::uint8_t>(nearest_int(iscale * scales[j]));
      store_f16(dst + b * 84 + 80, max_scale / 15.f);
    } else {
      for (int j = 0; j < 16; ++j) scales_out[j] = 0;
      store_f16(dst + b * 84 + 80, 0.0f);
    }
    if (max_min > 0) {
      const float iscale = 15.f / max_min;
      for (int j = 0; j < 16; ++j) scales_out[j] = static_cast<std::uint8_t>(scales_out[j] | (nearest_int(iscale * mins[j]) << 4));
      store_f16(dst + b * 84 + 82, max_min / 15.f);
    } else {
      store_f16(dst + b * 84 + 82, 0.0f);
    }
    const float dd = load_f16(dst + b * 84 + 80), dmin = load_f16(dst + b * 84 + 82);
    for (int j = 0; j < 16; ++j) {
      const float d = dd * static_cast<float>(scales_out[j] & 0xf);
      if (d == 0) continue;
      const float dm = dmin * static_cast<float>(scales_out[j] >> 4);
      for (int i = 0; i < 16; ++i) L[16 * j + i] = static_cast<std::uint8_t>(clamp(nearest_int((x[16 * j + i] + dm) / d), 0, 3));
    }
    pack_2bit(L, out + 16);
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

void quantize_q3_k(const float* x, std::byte* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, x += kSuper) {
    std::uint8_t* out = bytes(dst + b * 110);
    std::uint8_t* hmask = out;
    std::uint8_t* scales_out = out + 96;
    std::int8_t L[kSuper];
    float scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = search_scale_symmetric_descent(4, x + 16 * j, L + 16 * j);
    float max_scale, amax;
    signed_max(16, scales, max_scale, amax);
    std::memset(scales_out, 0, 12);
    if (max_scale != 0) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        const auto l8 = static_cast<std::int8_t>(nearest_int(iscale * scales[j]));
        const int l = clamp(l8, -32, 31) + 32;
        if (j < 8)
          scales_out[j] = static_cast<std::uint8_t>(l & 0xf);
        else
          scales_out[j - 8] = static_cast<std::uint8_t>(scales_out[j - 8] | ((l & 0xf) << 4));
        scales_out[j % 4 + 8] = static_cast<std::uint8_t>(scales_out[j % 4 + 8] | ((l >> 4) << (2 * (j / 4))));
      }
      store_f16(dst + b * 110 + 108, 1 / iscale);
    } else {
      store_f16(dst + b * 110 + 108, 0.0f);
    }
    const float dd = load_f16(dst + b * 110 + 108);
    for (int j = 0; j < 16; ++j) {
      const float d = dd * static_cast<float>(q3_scale(j, scales_out));
      if (d == 0) continue;
      for (int i = 0; i < 16; ++i) L[16 * j + i] = static_cast<std::int8_t>(clamp(nearest_int(x[16 * j + i] / d), -4, 3) + 4);
    }
    std::memset(hmask, 0, 32);
    std::uint8_t codes[kSuper];
    for (int j = 0; j < kSuper; ++j) {  // the high bit of element j goes to byte j % 32, bit j / 32
      int l = L[j];
      if (l > 3) {
        hmask[j % 32] = static_cast<std::uint8_t>(hmask[j % 32] | (1u << (j / 32)));
        l -= 4;
      }
      codes[j] = static_cast<std::uint8_t>(l);
    }
    pack_2bit(codes, out + 32);
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

// The scale search of both, the 12 scale bytes, d and dmin (at out[0..3]), and the codes in L.
template <int Nmax>
void quantize_k4_scales(const float* x, std::uint8_t* out, std::byte* d_out, std::uint8_t* L) {
  constexpr float kRmin = Nmax == 15 ? -1.f : -0.5f;
  constexpr int kSteps = Nmax == 15 ? 20 : 15;
  float scales[8], mins[8], weights[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = search_scale_min(32, Nmax, x + 32 * j, weights, L + 32 * j, &mins[j], kRmin, 0.1f, kSteps, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::uint8_t* s = out + 4;
  for (int j = 0; j < 8; ++j) {
    auto ls = static_cast<std::uint8_t>(nearest_int(inv_scale * scales[j]));
    auto lm = static_cast<std::uint8_t>(nearest_int(inv_min * mins[j]));
    if (ls > 63) ls = 63;
    if (lm > 63) lm = 63;
    if (j < 4) {
      s[j] = ls;
      s[j + 4] = lm;
    } else {
      s[j + 4] = static_cast<std::uint8_t>((ls & 0xf) | ((lm & 0xf) << 4));
      s[j - 4] = static_cast<std::uint8_t>(s[j - 4] | ((ls >> 4) << 6));
      s[j] = static_cast<std::uint8_t>(s[j] | ((lm >> 4) << 6));
    }
  }
  store_f16(d_out, max_scale / 63.f);
  store_f16(d_out + 2, max_min / 63.f);
  const float dd = load_f16(d_out), dmin = load_f16(d_out + 2);
  for (int j = 0; j < 8; ++j) {
    std::uint8_t sc, m;
    scale_min_k4(j, s, sc, m);
    const float d = dd * static_cast<float>(sc);
    if (d == 0) continue;
    const float dm = dmin * static_cast<float>(m);
    for (int i = 0; i < 32; ++i) L[32 * j + i] = static_cast<std::uint8_t>(clamp(nearest_int((x[32 * j + i] + dm) / d), 0, Nmax));
  }
}

void quantize_q4_k(const float* x, std::byte* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, x += kSuper) {
    std::uint8_t* out = bytes(dst + b * 144);
    std::uint8_t L[kSuper];
    quantize_k4_scales<15>(x, out, dst + b * 144, L);
    std::uint8_t* q = out + 16;
    for (int j = 0; j < kSuper; j += 64, q += 32)
      for (int l = 0; l < 32; ++l) q[l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
}

void quantize_q5_k(const float* x, std::byte* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, x += kSuper) {
    std::uint8_t* out = bytes(dst + b * 176);
    std::uint8_t L[kSuper];
    quantize_k4_scales<31>(x, out, dst + b * 176, L);
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

void quantize_q6_k(const float* x, std::byte* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, x += kSuper) {
    std::uint8_t* out = bytes(dst + b * 210);
    std::int8_t L[kSuper];
    float scales[16];
    for (int ib = 0; ib < 16; ++ib) scales[ib] = search_scale_symmetric_trials(32, x + 16 * ib, L + 16 * ib);
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
      for (int i = 0; i < 16; ++i) L[16 * j + i] = static_cast<std::int8_t>(clamp(nearest_int(x[16 * j + i] / d), -32, 31) + 32);
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
    case TensorType::Q2_K: return {quantize_q2_k, dequantize_q2_k};
    case TensorType::Q3_K: return {quantize_q3_k, dequantize_q3_k};
    case TensorType::Q4_K: return {quantize_q4_k, dequantize_k4<4>};
    case TensorType::Q5_K: return {quantize_q5_k, dequantize_k4<5>};
    case TensorType::Q6_K: return {quantize_q6_k, dequantize_q6_k};
    case TensorType::Q8_K: return {quantize_q8_k, dequantize_q8_k};
    default: return {};
  }
}

}  // namespace safeweights::quant
