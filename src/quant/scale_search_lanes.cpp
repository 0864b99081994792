// The scale searches of scale_search.h for many groups at once: one group a lane of a vector. Each lane
// goes through the plain search's operations in its order (no sum runs across lanes, no contraction), so
// every result equals the plain search's, which the judge (tests/quant/ggml_differential.sh) checks
// for each way this file is built. Several groups a vector only keep more of the processor busy than
// one group's chain of dependent additions can.
//
// The lanes are the machine's registers: 4 (SSE2, every x86-64, and other 128-bit SIMD), 8 with AVX2,
// or 16 with AVX-512 (the K-quants' affine, symmetric and descent searches and codes_at_scale, written
// with intrinsics), chosen at run time. Built with SAFEWEIGHTS_QUANT_SCALAR=1 it runs the plain searches
// one group after the other; SAFEWEIGHTS_QUANT_AVX2=0 never takes AVX2's lanes (nor AVX-512's),
// SAFEWEIGHTS_QUANT_AVX512=0 never AVX-512's.
#include <cstdint>
#include <cstring>

#include "quant/lanes.h"
#if SAFEWEIGHTS_QUANT_AVX512 && !SAFEWEIGHTS_QUANT_SCALAR
#include <immintrin.h>
#endif
#include "quant/scale_search.h"

namespace safeweights::quant {
namespace {

using lanes::absolute;
using lanes::nearest_clamped;
using lanes::nearest_clamped_nonnegative;
using lanes::select;
using lanes::select_int;
using lanes::to_float;
using lanes::transpose_in;
using lanes::Vec;
#if SAFEWEIGHTS_QUANT_AVX2 && !SAFEWEIGHTS_QUANT_SCALAR
using lanes::has_avx2;
#endif
#if SAFEWEIGHTS_QUANT_AVX512 && !SAFEWEIGHTS_QUANT_SCALAR
using lanes::has_avx512;
#endif

// ---- search_scale_min -------------------------------------------------------------------------------

struct AffineSearch {
  int n, nmax;
  const float *x, *w;
  std::uint8_t* L;
  float *scales, *neg_mins;
  float rmin, rdelta;
  int nstep;
  bool use_mad;
};

// P vectors of Lanes groups side by side (their chains of additions overlap): P x Lanes groups from
// `first`. The codes are kept as floats (exact small integers) between the trials and the errors; the
// best ones are not kept but the iscale and min they came from, and computed again at the end (the same
// operations on the same floats): one select a trial instead of one a value.
template <int Lanes, int P>
[[gnu::always_inline]] inline void affine_lanes(const AffineSearch& a, int first) {
  using F = typename Vec<Lanes>::F;
  using I = typename Vec<Lanes>::I;
  const int n = a.n, nmax = a.nmax;
  const F zero = F{} + 0.0f;
  F xt[P][32] = {}, wt[P][32] = {};
  F min[P], max[P], sum_w[P], sum_x[P], scale[P], best_mad[P], code_iscale[P], code_min[P];
  I flat[P];  // these lanes' search ends at once: codes 0, scale 0
  F trial[P][32];
  auto error_term = [&](F diff) { return a.use_mad ? absolute<F, I>(diff) : diff * diff; };
  for (int p = 0; p < P; ++p) {
    transpose_in(Lanes, n, a.x + (first + p * Lanes) * n, xt[p]);
    transpose_in(Lanes, n, a.w + (first + p * Lanes) * n, wt[p]);
    min[p] = max[p] = xt[p][0];
    sum_w[p] = wt[p][0];
    sum_x[p] = sum_w[p] * xt[p][0];
    for (int i = 1; i < n; ++i) {
      min[p] = select(xt[p][i] < min[p], xt[p][i], min[p]);
      max[p] = select(xt[p][i] > max[p], xt[p][i], max[p]);
      sum_w[p] += wt[p][i];
      sum_x[p] += wt[p][i] * xt[p][i];
    }
    min[p] = select(min[p] > 0, zero, min[p]);
    flat[p] = max[p] == min[p];
    const F iscale = static_cast<float>(nmax) / (max[p] - min[p]);
    scale[p] = 1 / iscale;
    best_mad[p] = zero;
    code_iscale[p] = iscale;
    code_min[p] = min[p];
    for (int i = 0; i < n; ++i) {
      const F fl = to_float<F>(nearest_clamped_nonnegative<F, I>(iscale * (xt[p][i] - min[p]), nmax));
      best_mad[p] += wt[p][i] * error_term(scale[p] * fl + min[p] - xt[p][i]);
    }
  }
  for (int is = 0; is <= a.nstep; ++is) {
    const float numerator = a.rmin + a.rdelta * static_cast<float>(is) + static_cast<float>(nmax);
    F iscale[P], sum_l[P], sum_l2[P], sum_xl[P];
    for (int p = 0; p < P; ++p) {
      iscale[p] = numerator / (max[p] - min[p]);
      sum_l[p] = sum_l2[p] = sum_xl[p] = zero;
    }
    for (int i = 0; i < n; ++i) {
      for (int p = 0; p < P; ++p) {
        // x - min >= 0 and iscale (max - min) <= nmax + 2, so the product is below 2^22, +inf or NaN
        // (as at the start, where iscale (max - min) is nmax).
        const F fl = to_float<F>(nearest_clamped_nonnegative<F, I>(iscale[p] * (xt[p][i] - min[p]), nmax));
        trial[p][i] = fl;
        sum_l[p] += wt[p][i] * fl;
        sum_l2[p] += wt[p][i] * fl * fl;
        sum_xl[p] += wt[p][i] * fl * xt[p][i];
      }
    }
    F this_scale[P], this_min[P], mad[P];
    I fit[P];
    for (int p = 0; p < P; ++p) {
      const F D = sum_w[p] * sum_l2[p] - sum_l[p] * sum_l[p];
      fit[p] = D > 0;
      this_scale[p] = (sum_w[p] * sum_xl[p] - sum_x[p] * sum_l[p]) / D;
      this_min[p] = (sum_l2[p] * sum_x[p] - sum_l[p] * sum_xl[p]) / D;
      const I positive_min = this_min[p] > 0;
      this_min[p] = select(positive_min, zero, this_min[p]);
      this_scale[p] = select(positive_min, sum_xl[p] / sum_l2[p], this_scale[p]);
      mad[p] = zero;
    }
    for (int i = 0; i < n; ++i)
      for (int p = 0; p < P; ++p) mad[p] += wt[p][i] * error_term(this_scale[p] * trial[p][i] + this_min[p] - xt[p][i]);
    for (int p = 0; p < P; ++p) {
      const I better = fit[p] & (mad[p] < best_mad[p]) & ~flat[p];
      code_iscale[p] = select(better, iscale[p], code_iscale[p]);
      code_min[p] = select(better, min[p], code_min[p]);
      best_mad[p] = select(better, mad[p], best_mad[p]);
      scale[p] = select(better, this_scale[p], scale[p]);
      min[p] = select(better, this_min[p], min[p]);
    }
  }
  for (int p = 0; p < P; ++p) {
    scale[p] = select(flat[p], zero, scale[p]);
    I best[32];
    for (int i = 0; i < n; ++i) best[i] = nearest_clamped_nonnegative<F, I>(code_iscale[p] * (xt[p][i] - code_min[p]), nmax);
    for (int k = 0; k < Lanes; ++k) {
      const int g = first + p * Lanes + k;
      a.scales[g] = scale[p][k];
      a.neg_mins[g] = -min[p][k];
      for (int i = 0; i < n; ++i) a.L[g * n + i] = flat[p][k] ? 0 : static_cast<std::uint8_t>(best[i][k]);
    }
  }
}

#if SAFEWEIGHTS_QUANT_AVX512 && !SAFEWEIGHTS_QUANT_SCALAR
// affine_lanes for 16 groups a vector with AVX-512's intrinsics: the same operations in the same order
// (no FMA: each product rounds before its sum, as -ffp-contract=off keeps the rest), the comparisons'
// lanes in mask registers. min_ps(v, m) is v < m ? v : m and max_ps(v, m) is v > m ? v : m, NaN lanes
// keeping m: the selects of affine_lanes.
#define SAFEWEIGHTS_AVX512 gnu::target("avx512f,avx512bw,avx512dq,avx512vl")

[[SAFEWEIGHTS_AVX512, gnu::always_inline]] inline __m512 error_term_16(__m512 diff, bool use_mad) noexcept {
  return use_mad ? _mm512_abs_ps(diff) : _mm512_mul_ps(diff, diff);
}

// GCC 12's header fills the unmasked forms of these with an "undefined" vector that -Wmaybe-uninitialized
// reports; the all-lanes masked forms (with a passthrough never used) compile to the same instructions.
constexpr __mmask16 kAll16 = 0xffff;
[[SAFEWEIGHTS_AVX512, gnu::always_inline]] inline __m512 min_16(__m512 a, __m512 b) noexcept { return _mm512_mask_min_ps(b, kAll16, a, b); }
[[SAFEWEIGHTS_AVX512, gnu::always_inline]] inline __m512 max_16(__m512 a, __m512 b) noexcept { return _mm512_mask_max_ps(b, kAll16, a, b); }

// nearest_clamped_nonnegative for 16 lanes: the conversion in the rounding mode, then clamp(l, 0, hi).
[[SAFEWEIGHTS_AVX512, gnu::always_inline]] inline __m512 nonnegative_code_16(__m512 t, __m512i hi) noexcept {
  const __m512i zero = _mm512_setzero_si512();
  __m512i l = _mm512_mask_cvtps_epi32(zero, kAll16, t);
  l = _mm512_mask_min_epi32(zero, kAll16, _mm512_mask_max_epi32(zero, kAll16, l, zero), hi);
  return _mm512_mask_cvtepi32_ps(_mm512_setzero_ps(), kAll16, l);
}

// P vectors of 16 groups from `first` side by side, as affine_lanes runs them.
template <int P>
[[SAFEWEIGHTS_AVX512, gnu::always_inline]] inline void affine_16_lanes(const AffineSearch& a, int first) {
  const int n = a.n, nmax = a.nmax;
  const __m512 zero = _mm512_setzero_ps();
  const __m512i hi = _mm512_set1_epi32(nmax);
  // The best codes are not kept but their iscale and min, from which the end computes them again (the
  // same operations on the same floats): one blend a trial instead of one a value.
  __m512 xt[P][32] = {}, wt[P][32] = {}, trial[P][32];
  __m512 min[P], max[P], sum_w[P], sum_x[P], scale[P], best_mad[P], code_iscale[P], code_min[P];
  __mmask16 flat[P];
  for (int p = 0; p < P; ++p) {
    alignas(64) float xs[32][16], ws[32][16];
    for (int k = 0; k < 16; ++k)
      for (int i = 0; i < n; ++i) {
        xs[i][k] = a.x[(first + 16 * p + k) * n + i];
        ws[i][k] = a.w[(first + 16 * p + k) * n + i];
      }
    for (int i = 0; i < n; ++i) {
      xt[p][i] = _mm512_load_ps(xs[i]);
      wt[p][i] = _mm512_load_ps(ws[i]);
    }
    min[p] = max[p] = xt[p][0];
    sum_w[p] = wt[p][0];
    sum_x[p] = _mm512_mul_ps(sum_w[p], xt[p][0]);
    for (int i = 1; i < n; ++i) {
      min[p] = min_16(xt[p][i], min[p]);
      max[p] = max_16(xt[p][i], max[p]);
      sum_w[p] = _mm512_add_ps(sum_w[p], wt[p][i]);
      sum_x[p] = _mm512_add_ps(sum_x[p], _mm512_mul_ps(wt[p][i], xt[p][i]));
    }
    min[p] = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(min[p], zero, _CMP_GT_OQ), min[p], zero);
    flat[p] = _mm512_cmp_ps_mask(max[p], min[p], _CMP_EQ_OQ);
    const __m512 iscale = _mm512_div_ps(_mm512_set1_ps(static_cast<float>(nmax)), _mm512_sub_ps(max[p], min[p]));
    scale[p] = _mm512_div_ps(_mm512_set1_ps(1.0f), iscale);
    best_mad[p] = zero;
    code_iscale[p] = iscale;
    code_min[p] = min[p];
    for (int i = 0; i < n; ++i) {
      const __m512 fl = nonnegative_code_16(_mm512_mul_ps(iscale, _mm512_sub_ps(xt[p][i], min[p])), hi);
      const __m512 diff = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(scale[p], fl), min[p]), xt[p][i]);
      best_mad[p] = _mm512_add_ps(best_mad[p], _mm512_mul_ps(wt[p][i], error_term_16(diff, a.use_mad)));
    }
  }
  for (int is = 0; is <= a.nstep; ++is) {
    const float numerator = a.rmin + a.rdelta * static_cast<float>(is) + static_cast<float>(nmax);
    __m512 iscale[P], sum_l[P], sum_l2[P], sum_xl[P];
    for (int p = 0; p < P; ++p) {
      iscale[p] = _mm512_div_ps(_mm512_set1_ps(numerator), _mm512_sub_ps(max[p], min[p]));
      sum_l[p] = sum_l2[p] = sum_xl[p] = zero;
    }
    for (int i = 0; i < n; ++i)
      for (int p = 0; p < P; ++p) {
        const __m512 fl = nonnegative_code_16(_mm512_mul_ps(iscale[p], _mm512_sub_ps(xt[p][i], min[p])), hi);
        trial[p][i] = fl;
        const __m512 wl = _mm512_mul_ps(wt[p][i], fl);
        sum_l[p] = _mm512_add_ps(sum_l[p], wl);
        sum_l2[p] = _mm512_add_ps(sum_l2[p], _mm512_mul_ps(wl, fl));
        sum_xl[p] = _mm512_add_ps(sum_xl[p], _mm512_mul_ps(wl, xt[p][i]));
      }
    __m512 this_scale[P], this_min[P], mad[P];
    __mmask16 fit[P];
    for (int p = 0; p < P; ++p) {
      const __m512 D = _mm512_sub_ps(_mm512_mul_ps(sum_w[p], sum_l2[p]), _mm512_mul_ps(sum_l[p], sum_l[p]));
      fit[p] = _mm512_cmp_ps_mask(D, zero, _CMP_GT_OQ);
      this_scale[p] = _mm512_div_ps(_mm512_sub_ps(_mm512_mul_ps(sum_w[p], sum_xl[p]), _mm512_mul_ps(sum_x[p], sum_l[p])), D);
      this_min[p] = _mm512_div_ps(_mm512_sub_ps(_mm512_mul_ps(sum_l2[p], sum_x[p]), _mm512_mul_ps(sum_l[p], sum_xl[p])), D);
      const __mmask16 positive_min = _mm512_cmp_ps_mask(this_min[p], zero, _CMP_GT_OQ);
      this_min[p] = _mm512_mask_blend_ps(positive_min, this_min[p], zero);
      this_scale[p] = _mm512_mask_blend_ps(positive_min, this_scale[p], _mm512_div_ps(sum_xl[p], sum_l2[p]));
      mad[p] = zero;
    }
    for (int i = 0; i < n; ++i)
      for (int p = 0; p < P; ++p) {
        const __m512 diff = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(this_scale[p], trial[p][i]), this_min[p]), xt[p][i]);
        mad[p] = _mm512_add_ps(mad[p], _mm512_mul_ps(wt[p][i], error_term_16(diff, a.use_mad)));
      }
    for (int p = 0; p < P; ++p) {
      const __mmask16 better = static_cast<__mmask16>(fit[p] & _mm512_cmp_ps_mask(mad[p], best_mad[p], _CMP_LT_OQ) & ~flat[p]);
      code_iscale[p] = _mm512_mask_blend_ps(better, code_iscale[p], iscale[p]);
      code_min[p] = _mm512_mask_blend_ps(better, code_min[p], min[p]);
      best_mad[p] = _mm512_mask_blend_ps(better, best_mad[p], mad[p]);
      scale[p] = _mm512_mask_blend_ps(better, scale[p], this_scale[p]);
      min[p] = _mm512_mask_blend_ps(better, min[p], this_min[p]);
    }
  }
  for (int p = 0; p < P; ++p) {
    alignas(64) float out_scale[16], out_min[16];
    _mm512_store_ps(out_scale, _mm512_mask_blend_ps(flat[p], scale[p], zero));
    _mm512_store_ps(out_min, min[p]);
    alignas(16) std::uint8_t codes[32][16];
    const __mmask16 kept = static_cast<__mmask16>(~flat[p]);
    for (int i = 0; i < n; ++i) {
      const __m512 best = nonnegative_code_16(_mm512_mul_ps(code_iscale[p], _mm512_sub_ps(xt[p][i], code_min[p])), hi);
      _mm_store_si128(reinterpret_cast<__m128i*>(codes[i]),
                      _mm512_maskz_cvtepi32_epi8(kept, _mm512_mask_cvttps_epi32(_mm512_setzero_si512(), kAll16, best)));
    }
    for (int k = 0; k < 16; ++k) {
      const int g = first + 16 * p + k;
      a.scales[g] = out_scale[k];
      a.neg_mins[g] = -out_min[k];
      for (int i = 0; i < n; ++i) a.L[g * n + i] = codes[i][k];
    }
  }
}

// Groups in vectors of 16, two side by side while they last; returns how many it ran (a multiple of 16).
[[SAFEWEIGHTS_AVX512]] int affine_16(const AffineSearch& a, int groups) {
  int k = 0;
  for (; k + 32 <= groups; k += 32) affine_16_lanes<2>(a, k);
  for (; k + 16 <= groups; k += 16) affine_16_lanes<1>(a, k);
  return k;
}
#endif

// ---- search_scale_symmetric_trials ------------------------------------------------------------------

struct SymmetricSearch {
  int n, nmax;
  const float *x, *w;  // w null: x^2
  std::int8_t* L;
  float* scales;
};

// The start of both symmetric searches: each lane's signed maximum, and the lanes that are all zero
// (codes 0, scale 0 for them).
template <typename F, typename I>
[[gnu::always_inline]] inline I signed_max_lanes(int n, const F* xt, F& max) noexcept {
  F amax = F{} + 0.0f;
  max = amax;
  for (int i = 0; i < n; ++i) {
    const F ax = absolute<F, I>(xt[i]);
    const I larger = ax > amax;
    amax = select(larger, ax, amax);
    max = select(larger, xt[i], max);
  }
  return ~(amax >= kGroupMaxEps);
}

// Codes -nmax..nmax-1 at 1/scale `iscale`, and their weighted sums of l x and l^2.
template <typename F, typename I>
[[gnu::always_inline]] inline void symmetric_codes_lanes(int n, int nmax, const F* xt, const F* wt, F iscale, I* l, F& sumlx, F& suml2) noexcept {
  sumlx = suml2 = F{} + 0.0f;
  for (int i = 0; i < n; ++i) {
    l[i] = nearest_clamped<F, I>(iscale * xt[i], -nmax, nmax - 1);
    const F fl = to_float<F>(l[i]);
    sumlx += wt[i] * xt[i] * fl;
    suml2 += wt[i] * fl * fl;
  }
}

// P vectors of Lanes groups side by side (their chains of additions overlap): P x Lanes groups.
template <int Lanes, int P>
[[gnu::always_inline]] inline void symmetric_lanes(const SymmetricSearch& a, int first) {
  using F = typename Vec<Lanes>::F;
  using I = typename Vec<Lanes>::I;
  const int n = a.n, nmax = a.nmax;
  const F zero = F{} + 0.0f;
  F xt[P][32] = {}, wt[P][32] = {}, wx[P][32] = {}, max[P], scale[P], best[P];
  I zero_group[P], L[P][32], trial[P][32];
  for (int p = 0; p < P; ++p) {
    transpose_in(Lanes, n, a.x + (first + p * Lanes) * n, xt[p]);
    if (a.w != nullptr)
      transpose_in(Lanes, n, a.w + (first + p * Lanes) * n, wt[p]);
    else
      for (int i = 0; i < n; ++i) wt[p][i] = xt[p][i] * xt[p][i];
    for (int i = 0; i < n; ++i) wx[p][i] = wt[p][i] * xt[p][i];  // the trials' w x, the plain code's first product
    zero_group[p] = signed_max_lanes<F, I>(n, xt[p], max[p]);
    F sumlx, suml2;
    symmetric_codes_lanes<F, I>(n, nmax, xt[p], wt[p], static_cast<float>(-nmax) / max[p], L[p], sumlx, suml2);
    scale[p] = select(suml2 != 0, sumlx / suml2, zero);
    best[p] = scale[p] * sumlx;
  }
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float numerator = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is));
    F sumlx[P], suml2[P], iscale[P];
    for (int p = 0; p < P; ++p) {
      sumlx[p] = suml2[p] = zero;
      iscale[p] = numerator / max[p];
    }
    for (int i = 0; i < n; ++i) {
      for (int p = 0; p < P; ++p) {
        trial[p][i] = nearest_clamped<F, I>(iscale[p] * xt[p][i], -nmax, nmax - 1);
        const F fl = to_float<F>(trial[p][i]);
        sumlx[p] += wx[p][i] * fl;
        suml2[p] += wt[p][i] * fl * fl;
      }
    }
    for (int p = 0; p < P; ++p) {
      const I better = (suml2[p] > 0) & (sumlx[p] * sumlx[p] > best[p] * suml2[p]) & ~zero_group[p];
      for (int i = 0; i < n; ++i) L[p][i] = select_int(better, trial[p][i], L[p][i]);
      const F new_scale = sumlx[p] / suml2[p];
      scale[p] = select(better, new_scale, scale[p]);
      best[p] = select(better, new_scale * sumlx[p], best[p]);
    }
  }
  for (int p = 0; p < P; ++p) {
    for (int k = 0; k < Lanes; ++k) {
      const int g = first + p * Lanes + k;
      a.scales[g] = zero_group[p][k] ? 0.0f : scale[p][k];
      for (int i = 0; i < n; ++i) a.L[g * n + i] = zero_group[p][k] ? 0 : static_cast<std::int8_t>(L[p][i][k] + nmax);
    }
  }
}

#if SAFEWEIGHTS_QUANT_AVX512 && !SAFEWEIGHTS_QUANT_SCALAR
// nearest_clamped for 16 lanes: nearest_int()'s bits (any input: NaN and infinities included), clamped.
[[SAFEWEIGHTS_AVX512, gnu::always_inline]] inline __m512i nearest_clamped_16(__m512 t, __m512i lo, __m512i hi) noexcept {
  const __m512i bits = _mm512_castps_si512(_mm512_add_ps(t, _mm512_set1_ps(12582912.0f)));
  const __m512i l = _mm512_sub_epi32(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffff)), _mm512_set1_epi32(0x400000));
  const __m512i zero = _mm512_setzero_si512();
  return _mm512_mask_min_epi32(zero, kAll16, _mm512_mask_max_epi32(zero, kAll16, l, lo), hi);
}
[[SAFEWEIGHTS_AVX512, gnu::always_inline]] inline __m512 nearest_code_16(__m512 t, __m512i lo, __m512i hi) noexcept {
  return _mm512_mask_cvtepi32_ps(_mm512_setzero_ps(), kAll16, nearest_clamped_16(t, lo, hi));
}

// codes_at_scale_lanes for 16 values a vector (n a multiple of 16).
[[SAFEWEIGHTS_AVX512]] void codes_at_scale_16(int n, const float* x, float dm, float d, bool with_min, int lo, int hi, int offset,
                                              std::uint8_t* L) noexcept {
  const __m512i vlo = _mm512_set1_epi32(lo), vhi = _mm512_set1_epi32(hi), voffset = _mm512_set1_epi32(offset);
  const __m512 vdm = _mm512_set1_ps(dm), vd = _mm512_set1_ps(d);
  for (int i = 0; i < n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    if (with_min) v = _mm512_add_ps(v, vdm);
    const __m512i l = _mm512_add_epi32(nearest_clamped_16(_mm512_div_ps(v, vd), vlo, vhi), voffset);
    _mm512_mask_cvtepi32_storeu_epi8(L + i, kAll16, l);
  }
}

// A trial's code for symmetric_16_lanes: the processor's conversion (in the rounding mode, as
// nearest_int()'s addition rounds), clamped. It equals nearest_clamped_16 wherever |t| < 2^22, which
// holds for every finite x of a group that is not all zero (|iscale x| <= (nmax + 1) |x| / |max|).
// Elsewhere t is NaN (x NaN or infinite, or iscale 0 times an infinite x) and the codes differ, but then
// no trial is taken: that x makes the start's sum of w x l NaN (w x is NaN or infinite and the start's
// nearest_clamped_16 code of a NaN t is 0), so best is NaN and every comparison with it is false. So a
// taken trial's codes are also nearest_clamped_16's at its iscale.
[[SAFEWEIGHTS_AVX512, gnu::always_inline]] inline __m512 trial_code_16(__m512 t, __m512i lo, __m512i hi) noexcept {
  const __m512i zero = _mm512_setzero_si512();
  __m512i l = _mm512_mask_cvtps_epi32(zero, kAll16, t);
  l = _mm512_mask_min_epi32(zero, kAll16, _mm512_mask_max_epi32(zero, kAll16, l, lo), hi);
  return _mm512_mask_cvtepi32_ps(_mm512_setzero_ps(), kAll16, l);
}

// symmetric_lanes for P vectors of 16 groups, as affine_16_lanes is affine_lanes; the codes kept as floats.
template <int P>
[[SAFEWEIGHTS_AVX512, gnu::always_inline]] inline void symmetric_16_lanes(const SymmetricSearch& a, int first) {
  const int n = a.n, nmax = a.nmax;
  const __m512 zero = _mm512_setzero_ps();
  const __m512i lo = _mm512_set1_epi32(-nmax), hi = _mm512_set1_epi32(nmax - 1);
  __m512 xt[P][32] = {}, wt[P][32] = {}, wx[P][32] = {};
  __m512 max[P], scale[P], best[P], code_iscale[P];
  __mmask16 zero_group[P];
  for (int p = 0; p < P; ++p) {
    alignas(64) float xs[32][16], ws[32][16];
    for (int k = 0; k < 16; ++k)
      for (int i = 0; i < n; ++i) {
        xs[i][k] = a.x[(first + 16 * p + k) * n + i];
        if (a.w != nullptr) ws[i][k] = a.w[(first + 16 * p + k) * n + i];
      }
    __m512 amax = zero;
    max[p] = zero;
    for (int i = 0; i < n; ++i) {
      xt[p][i] = _mm512_load_ps(xs[i]);
      wt[p][i] = a.w != nullptr ? _mm512_load_ps(ws[i]) : _mm512_mul_ps(xt[p][i], xt[p][i]);
      wx[p][i] = _mm512_mul_ps(wt[p][i], xt[p][i]);
      const __m512 ax = _mm512_abs_ps(xt[p][i]);
      const __mmask16 larger = _mm512_cmp_ps_mask(ax, amax, _CMP_GT_OQ);
      amax = _mm512_mask_blend_ps(larger, amax, ax);
      max[p] = _mm512_mask_blend_ps(larger, max[p], xt[p][i]);
    }
    zero_group[p] = static_cast<__mmask16>(~_mm512_cmp_ps_mask(amax, _mm512_set1_ps(kGroupMaxEps), _CMP_GE_OQ));
    // The best codes are not kept but their iscale, from which the end computes them again with
    // nearest_code_16 (equal to a taken trial's trial_code_16: see there): one blend a trial, not 16.
    code_iscale[p] = _mm512_div_ps(_mm512_set1_ps(static_cast<float>(-nmax)), max[p]);
    __m512 sumlx = zero, suml2 = zero;
    for (int i = 0; i < n; ++i) {
      const __m512 fl = nearest_code_16(_mm512_mul_ps(code_iscale[p], xt[p][i]), lo, hi);
      sumlx = _mm512_add_ps(sumlx, _mm512_mul_ps(wx[p][i], fl));
      suml2 = _mm512_add_ps(suml2, _mm512_mul_ps(_mm512_mul_ps(wt[p][i], fl), fl));
    }
    scale[p] = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(suml2, zero, _CMP_NEQ_UQ), zero, _mm512_div_ps(sumlx, suml2));
    best[p] = _mm512_mul_ps(scale[p], sumlx);
  }
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float numerator = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is));
    __m512 iscale[P], sumlx[P], suml2[P];
    for (int p = 0; p < P; ++p) {
      iscale[p] = _mm512_div_ps(_mm512_set1_ps(numerator), max[p]);
      sumlx[p] = suml2[p] = zero;
    }
    for (int i = 0; i < n; ++i)
      for (int p = 0; p < P; ++p) {
        const __m512 fl = trial_code_16(_mm512_mul_ps(iscale[p], xt[p][i]), lo, hi);
        sumlx[p] = _mm512_add_ps(sumlx[p], _mm512_mul_ps(wx[p][i], fl));
        suml2[p] = _mm512_add_ps(suml2[p], _mm512_mul_ps(_mm512_mul_ps(wt[p][i], fl), fl));
      }
    for (int p = 0; p < P; ++p) {
      const __mmask16 better = static_cast<__mmask16>(
          _mm512_cmp_ps_mask(suml2[p], zero, _CMP_GT_OQ) &
          _mm512_cmp_ps_mask(_mm512_mul_ps(sumlx[p], sumlx[p]), _mm512_mul_ps(best[p], suml2[p]), _CMP_GT_OQ) & ~zero_group[p]);
      code_iscale[p] = _mm512_mask_blend_ps(better, code_iscale[p], iscale[p]);
      const __m512 new_scale = _mm512_div_ps(sumlx[p], suml2[p]);
      scale[p] = _mm512_mask_blend_ps(better, scale[p], new_scale);
      best[p] = _mm512_mask_blend_ps(better, best[p], _mm512_mul_ps(new_scale, sumlx[p]));
    }
  }
  const __m512i offset = _mm512_set1_epi32(nmax);
  for (int p = 0; p < P; ++p) {
    alignas(64) float out_scale[16];
    _mm512_store_ps(out_scale, _mm512_mask_blend_ps(zero_group[p], scale[p], zero));
    alignas(16) std::int8_t codes[32][16];
    const __mmask16 kept = static_cast<__mmask16>(~zero_group[p]);
    for (int i = 0; i < n; ++i) {
      const __m512i l = _mm512_add_epi32(nearest_clamped_16(_mm512_mul_ps(code_iscale[p], xt[p][i]), lo, hi), offset);
      _mm_store_si128(reinterpret_cast<__m128i*>(codes[i]), _mm512_maskz_cvtepi32_epi8(kept, l));
    }
    for (int k = 0; k < 16; ++k) {
      const int g = first + 16 * p + k;
      a.scales[g] = out_scale[k];
      for (int i = 0; i < n; ++i) a.L[g * n + i] = codes[i][k];
    }
  }
}

// Groups in vectors of 16, two side by side while they last; returns how many it ran (a multiple of 16).
[[SAFEWEIGHTS_AVX512]] int symmetric_16(const SymmetricSearch& a, int groups) {
  int k = 0;
  for (; k + 32 <= groups; k += 32) symmetric_16_lanes<2>(a, k);
  for (; k + 16 <= groups; k += 16) symmetric_16_lanes<1>(a, k);
  return k;
}
#endif

// ---- search_scale_symmetric_descent -----------------------------------------------------------------

// The plain search stops a group after the first pass that changes none of its codes (at most 5
// passes): most groups stop after one, a few go on to five. So the groups go through the passes as
// lists: every group takes the first pass, then only those its last pass changed take the next, in
// vectors refilled from the list, their state (codes, sums) kept per group between passes. No lane
// runs on for its slowest neighbour.
struct DescentState {
  std::int8_t* L;  // codes -nmax..nmax-1, 16 a group
  float *sumlx, *suml2;
  bool *zero, *go_on;  // all-zero groups; groups whose last pass changed a code
};

// One pass for `count` groups (at most P x Lanes) of the list; the first pass starts them from the
// codes at -nmax / max. Each element's step waits on the one before it (a division among them), so P
// vectors go through the elements side by side: their chains overlap. Lanes past the count repeat the
// list's last group and write nothing back.
template <int Lanes, int P>
[[gnu::always_inline]] inline void descent_pass(const SymmetricSearch& a, const int* list, int count, bool first, const DescentState& st) {
  using F = typename Vec<Lanes>::F;
  using I = typename Vec<Lanes>::I;
  constexpr int n = 16;
  const int nmax = a.nmax;
  F xt[P][n], wt[P][n], sumlx[P], suml2[P];
  I L[P][n], active[P];
  for (int p = 0; p < P; ++p) {
    for (int k = 0; k < Lanes; ++k) {
      const int g = list[p * Lanes + k < count ? p * Lanes + k : count - 1];
      for (int i = 0; i < n; ++i) xt[p][i][k] = a.x[g * n + i];
      if (first) continue;
      for (int i = 0; i < n; ++i) L[p][i][k] = st.L[g * n + i];
      sumlx[p][k] = st.sumlx[g];
      suml2[p][k] = st.suml2[g];
    }
    for (int i = 0; i < n; ++i) wt[p][i] = xt[p][i] * xt[p][i];
    if (first) {
      F max;
      const I zero_group = signed_max_lanes<F, I>(n, xt[p], max);
      symmetric_codes_lanes<F, I>(n, nmax, xt[p], wt[p], static_cast<float>(-nmax) / max, L[p], sumlx[p], suml2[p]);
      active[p] = ~zero_group;
    } else {
      active[p] = I{} - 1;
    }
  }
  I changed[P] = {};
  for (int i = 0; i < n; ++i) {
    for (int p = 0; p < P; ++p) {
      const F x = xt[p][i], w = wt[p][i];
      const F li = to_float<F>(L[p][i]);
      F slx = sumlx[p] - w * x * li;
      F sl2 = suml2[p] - w * li * li;
      const I positive = slx > 0;
      const I new_l = nearest_clamped<F, I>(x * sl2 / slx, -nmax, nmax - 1);
      const F fl = to_float<F>(new_l);
      slx += w * x * fl;
      sl2 += w * fl * fl;
      const I take = active[p] & positive & (new_l != L[p][i]) & (sl2 > 0) & (slx * slx * suml2[p] > sumlx[p] * sumlx[p] * sl2);
      L[p][i] = select_int(take, new_l, L[p][i]);
      sumlx[p] = select(take, slx, sumlx[p]);
      suml2[p] = select(take, sl2, suml2[p]);
      changed[p] |= take;
    }
  }
  for (int p = 0; p < P; ++p)
    for (int k = 0; k < Lanes && p * Lanes + k < count; ++k) {
      const int g = list[p * Lanes + k];
      for (int i = 0; i < n; ++i) st.L[g * n + i] = static_cast<std::int8_t>(L[p][i][k]);
      st.sumlx[g] = sumlx[p][k];
      st.suml2[g] = suml2[p][k];
      if (first) st.zero[g] = active[p][k] == 0;
      st.go_on[g] = (active[p][k] & changed[p][k]) != 0;
    }
}

#if SAFEWEIGHTS_QUANT_AVX512 && !SAFEWEIGHTS_QUANT_SCALAR
// descent_pass for vectors of 16 groups with AVX-512's intrinsics, the same operations in the same
// order; the codes kept as floats (exact small integers). Not inlined: its callers are compiled for
// any x86-64 (descent_lanes, whose list scheduling every width shares).
template <int P>
[[SAFEWEIGHTS_AVX512]] void descent_pass_16(const SymmetricSearch& a, const int* list, int count, bool first, const DescentState& st) {
  constexpr int n = 16;
  const int nmax = a.nmax;
  const __m512 zero = _mm512_setzero_ps();
  const __m512i lo = _mm512_set1_epi32(-nmax), hi = _mm512_set1_epi32(nmax - 1);
  __m512 xt[P][n], wt[P][n], wx[P][n], L[P][n], sumlx[P], suml2[P];
  __mmask16 active[P], changed[P];
  for (int p = 0; p < P; ++p) {
    alignas(64) float xs[n][16], ls[n][16], slx[16], sl2[16];
    for (int k = 0; k < 16; ++k) {
      const int g = list[p * 16 + k < count ? p * 16 + k : count - 1];
      for (int i = 0; i < n; ++i) xs[i][k] = a.x[g * n + i];
      if (first) continue;
      for (int i = 0; i < n; ++i) ls[i][k] = st.L[g * n + i];
      slx[k] = st.sumlx[g];
      sl2[k] = st.suml2[g];
    }
    for (int i = 0; i < n; ++i) {
      xt[p][i] = _mm512_load_ps(xs[i]);
      wt[p][i] = _mm512_mul_ps(xt[p][i], xt[p][i]);
      wx[p][i] = _mm512_mul_ps(wt[p][i], xt[p][i]);
    }
    changed[p] = 0;
    if (first) {
      __m512 amax = zero, max = zero;
      for (int i = 0; i < n; ++i) {
        const __m512 ax = _mm512_abs_ps(xt[p][i]);
        const __mmask16 larger = _mm512_cmp_ps_mask(ax, amax, _CMP_GT_OQ);
        amax = _mm512_mask_blend_ps(larger, amax, ax);
        max = _mm512_mask_blend_ps(larger, max, xt[p][i]);
      }
      active[p] = _mm512_cmp_ps_mask(amax, _mm512_set1_ps(kGroupMaxEps), _CMP_GE_OQ);
      const __m512 iscale = _mm512_div_ps(_mm512_set1_ps(static_cast<float>(-nmax)), max);
      sumlx[p] = suml2[p] = zero;
      for (int i = 0; i < n; ++i) {
        L[p][i] = nearest_code_16(_mm512_mul_ps(iscale, xt[p][i]), lo, hi);
        sumlx[p] = _mm512_add_ps(sumlx[p], _mm512_mul_ps(wx[p][i], L[p][i]));
        suml2[p] = _mm512_add_ps(suml2[p], _mm512_mul_ps(_mm512_mul_ps(wt[p][i], L[p][i]), L[p][i]));
      }
    } else {
      for (int i = 0; i < n; ++i) L[p][i] = _mm512_load_ps(ls[i]);
      sumlx[p] = _mm512_load_ps(slx);
      suml2[p] = _mm512_load_ps(sl2);
      active[p] = kAll16;
    }
  }
  for (int i = 0; i < n; ++i) {
    for (int p = 0; p < P; ++p) {
      const __m512 x = xt[p][i], w = wt[p][i], li = L[p][i];
      __m512 slx = _mm512_sub_ps(sumlx[p], _mm512_mul_ps(wx[p][i], li));
      __m512 sl2 = _mm512_sub_ps(suml2[p], _mm512_mul_ps(_mm512_mul_ps(w, li), li));
      const __mmask16 positive = _mm512_cmp_ps_mask(slx, zero, _CMP_GT_OQ);
      const __m512 fl = nearest_code_16(_mm512_div_ps(_mm512_mul_ps(x, sl2), slx), lo, hi);
      slx = _mm512_add_ps(slx, _mm512_mul_ps(wx[p][i], fl));
      sl2 = _mm512_add_ps(sl2, _mm512_mul_ps(_mm512_mul_ps(w, fl), fl));
      const __m512 left = _mm512_mul_ps(_mm512_mul_ps(slx, slx), suml2[p]);
      const __m512 right = _mm512_mul_ps(_mm512_mul_ps(sumlx[p], sumlx[p]), sl2);
      const __mmask16 take = static_cast<__mmask16>(active[p] & positive & _mm512_cmp_ps_mask(fl, li, _CMP_NEQ_OQ) &
                                                    _mm512_cmp_ps_mask(sl2, zero, _CMP_GT_OQ) & _mm512_cmp_ps_mask(left, right, _CMP_GT_OQ));
      L[p][i] = _mm512_mask_blend_ps(take, li, fl);
      sumlx[p] = _mm512_mask_blend_ps(take, sumlx[p], slx);
      suml2[p] = _mm512_mask_blend_ps(take, suml2[p], sl2);
      changed[p] = static_cast<__mmask16>(changed[p] | take);
    }
  }
  for (int p = 0; p < P; ++p) {
    alignas(64) float slx[16], sl2[16];
    alignas(16) std::int8_t codes[n][16];
    _mm512_store_ps(slx, sumlx[p]);
    _mm512_store_ps(sl2, suml2[p]);
    for (int i = 0; i < n; ++i) _mm512_mask_cvtepi32_storeu_epi8(codes[i], kAll16, _mm512_mask_cvttps_epi32(_mm512_setzero_si512(), kAll16, L[p][i]));
    for (int k = 0; k < 16 && p * 16 + k < count; ++k) {
      const int g = list[p * 16 + k];
      for (int i = 0; i < n; ++i) st.L[g * n + i] = codes[i][k];
      st.sumlx[g] = slx[k];
      st.suml2[g] = sl2[k];
      if (first) st.zero[g] = ((active[p] >> k) & 1) == 0;
      st.go_on[g] = ((active[p] & changed[p]) >> k & 1) != 0;
    }
  }
}
#endif

// descent_pass with Lanes 16 taken by descent_pass_16.
template <int Lanes, int P>
[[gnu::always_inline]] inline void run_descent_pass(const SymmetricSearch& a, const int* list, int count, bool first, const DescentState& st) {
#if SAFEWEIGHTS_QUANT_AVX512 && !SAFEWEIGHTS_QUANT_SCALAR
  if constexpr (Lanes == 16)
    descent_pass_16<P>(a, list, count, first, st);
  else
#endif
    descent_pass<Lanes, P>(a, list, count, first, st);
}

// At most kDescentGroups groups: up to 5 passes over the shrinking list, then each group's scale and
// codes (plus nmax; all 0 for an all-zero group, whose scale is 0).
constexpr int kDescentGroups = 256;
template <int Lanes>
[[gnu::always_inline]] inline void descent_lanes(const SymmetricSearch& a, int first_group, int groups) {
  std::int8_t L[kDescentGroups * 16];
  float sumlx[kDescentGroups], suml2[kDescentGroups];
  bool zero[kDescentGroups], go_on[kDescentGroups];
  const DescentState st{L, sumlx, suml2, zero, go_on};
  int list[kDescentGroups];
  int count = groups;
  for (int g = 0; g < groups; ++g) list[g] = g;
  const SymmetricSearch at{a.n, a.nmax, a.x + 16 * first_group, nullptr, a.L + 16 * first_group, a.scales + first_group};
  for (int pass = 0; pass < 5 && count > 0; ++pass) {
    for (int start = 0; start < count;) {
      const int left = count - start;
      if (left > 2 * Lanes) {
        run_descent_pass<Lanes, 4>(at, list + start, left < 4 * Lanes ? left : 4 * Lanes, pass == 0, st);
        start += 4 * Lanes;
      } else if (left > Lanes) {
        run_descent_pass<Lanes, 2>(at, list + start, left, pass == 0, st);
        start += 2 * Lanes;
      } else {
        run_descent_pass<Lanes, 1>(at, list + start, left, pass == 0, st);
        start += Lanes;
      }
    }
    int next = 0;
    for (int j = 0; j < count; ++j)
      if (go_on[list[j]]) list[next++] = list[j];
    count = next;
  }
  for (int g = 0; g < groups; ++g) {
    at.scales[g] = zero[g] ? 0.0f : suml2[g] > 0 ? sumlx[g] / suml2[g] : 0.0f;
    for (int i = 0; i < 16; ++i) at.L[g * 16 + i] = zero[g] ? 0 : static_cast<std::int8_t>(L[g * 16 + i] + a.nmax);
  }
}

// ---- search_scale_iq4 -------------------------------------------------------------------------------

// The IQ4 level nearest to t, lane by lane, as nearest_level()'s bisection picks it: the levels below
// and above t by comparisons (a NaN lane ends between the last two, as the bisection does), the lower
// one when strictly nearer.
template <typename F, typename I>
[[gnu::always_inline]] inline F nearest_iq4_level(F t) noexcept {
  F below = F{} + static_cast<float>(kIq4Levels[0]), above = F{} + static_cast<float>(kIq4Levels[15]);
  for (int m = 1; m < 15; ++m) {
    const float level = kIq4Levels[m];
    below = select(t < level, below, F{} + level);
    above = select(t < kIq4Levels[15 - m], F{} + static_cast<float>(kIq4Levels[15 - m]), above);
  }
  F q = select(t - below < above - t, below, above);
  q = select(t <= static_cast<float>(kIq4Levels[0]), F{} + static_cast<float>(kIq4Levels[0]), q);
  return select(t >= static_cast<float>(kIq4Levels[15]), F{} + static_cast<float>(kIq4Levels[15]), q);
}

template <typename F>
[[gnu::always_inline]] inline void iq4_sums_lanes(const F* xt, const F* wt, F id, F& sumqx, F& sumq2) noexcept {
  sumqx = sumq2 = F{} + 0.0f;
  for (int j = 0; j < 32; ++j) {
    const F q = nearest_iq4_level<F, decltype(xt[j] < xt[j])>(id * xt[j]);
    sumqx += wt[j] * q * xt[j];
    sumq2 += wt[j] * q * q;
  }
}

template <int Lanes>
[[gnu::always_inline]] inline void iq4_lanes(const float* x, const float* w, float* scales) {
  using F = typename Vec<Lanes>::F;
  using I = typename Vec<Lanes>::I;
  F xt[32], wt[32], max;
  transpose_in(Lanes, 32, x, xt);
  transpose_in(Lanes, 32, w, wt);
  const I zero_group = signed_max_lanes<F, I>(32, xt, max);
  const F zero = F{} + 0.0f;
  F sumqx, sumq2;
  iq4_sums_lanes(xt, wt, 1 / (-max / static_cast<float>(kIq4Levels[0])), sumqx, sumq2);
  F d = select(sumq2 > 0, sumqx / sumq2, zero);
  F best = d * sumqx;
  for (int itry = -kIq4Trials; itry <= kIq4Trials; ++itry) {
    iq4_sums_lanes(xt, wt, static_cast<float>(itry + kIq4Levels[0]) / max, sumqx, sumq2);
    const I better = (sumq2 > 0) & (sumqx * sumqx > best * sumq2);
    const F new_d = sumqx / sumq2;
    d = select(better, new_d, d);
    best = select(better, new_d * sumqx, best);
  }
  d = select(zero_group, zero, d);
  for (int k = 0; k < Lanes; ++k) scales[k] = d[k];
}

// codes_at_scale, Lanes values a vector (element-wise: any grouping gives the same codes).
template <int Lanes>
[[gnu::always_inline]] inline void codes_at_scale_lanes(int n, const float* x, float dm, float d, bool with_min, int lo, int hi, int offset,
                                                        std::uint8_t* L) noexcept {
  using F = typename Vec<Lanes>::F;
  using I = typename Vec<Lanes>::I;
  for (int i = 0; i < n; i += Lanes) {
    F v;
    std::memcpy(&v, x + i, sizeof v);
    if (with_min) v = v + dm;
    const I l = nearest_clamped<F, I>(v / d, lo, hi) + offset;
    for (int k = 0; k < Lanes; ++k) L[i + k] = static_cast<std::uint8_t>(l[k]);
  }
}
#if !SAFEWEIGHTS_QUANT_SCALAR && SAFEWEIGHTS_QUANT_AVX2
[[gnu::target("avx2")]] void codes_at_scale_8(int n, const float* x, float dm, float d, bool with_min, int lo, int hi, int offset,
                                              std::uint8_t* L) noexcept {
  codes_at_scale_lanes<8>(n, x, dm, d, with_min, lo, hi, offset, L);
}
#endif

// ---- running the lanes ------------------------------------------------------------------------------

#if !SAFEWEIGHTS_QUANT_SCALAR
void affine_4(const AffineSearch& a, int groups) {
  int k = 0;
  for (; k + 8 <= groups; k += 8) affine_lanes<4, 2>(a, k);
  for (; k < groups; k += 4) affine_lanes<4, 1>(a, k);
}
void symmetric_4(const SymmetricSearch& a, int groups) {
  for (int k = 0; k < groups; k += 8) symmetric_lanes<4, 2>(a, k);
}
void descent_4(const SymmetricSearch& a, int groups) {
  int k = 0;
  for (; k < groups; k += kDescentGroups) descent_lanes<4>(a, k, groups - k < kDescentGroups ? groups - k : kDescentGroups);
}
int iq4_4(int groups, const float* x, const float* w, float* scales) {
  int k = 0;
  for (; k + 4 <= groups; k += 4) iq4_lanes<4>(x + 32 * k, w + 32 * k, scales + k);
  return k;
}
#if SAFEWEIGHTS_QUANT_AVX2
// AVX2 without FMA: contraction would change the bytes.
[[gnu::target("avx2")]] void affine_8(const AffineSearch& a, int groups) {
  int k = 0;
  for (; k + 16 <= groups; k += 16) affine_lanes<8, 2>(a, k);
  for (; k < groups; k += 8) affine_lanes<8, 1>(a, k);
}
[[gnu::target("avx2")]] void symmetric_8(const SymmetricSearch& a, int groups) {
  int k = 0;
  for (; k + 16 <= groups; k += 16) symmetric_lanes<8, 2>(a, k);
  for (; k < groups; k += 8) symmetric_lanes<8, 1>(a, k);
}
#if SAFEWEIGHTS_QUANT_AVX512
[[SAFEWEIGHTS_AVX512]] void descent_16(const SymmetricSearch& a, int groups) {
  int k = 0;
  for (; k < groups; k += kDescentGroups) descent_lanes<16>(a, k, groups - k < kDescentGroups ? groups - k : kDescentGroups);
}
#endif
[[gnu::target("avx2")]] void descent_8(const SymmetricSearch& a, int groups) {
  int k = 0;
  for (; k < groups; k += kDescentGroups) descent_lanes<8>(a, k, groups - k < kDescentGroups ? groups - k : kDescentGroups);
}
[[gnu::target("avx2")]] int iq4_8(int groups, const float* x, const float* w, float* scales) {
  int k = 0;
  for (; k + 8 <= groups; k += 8) iq4_lanes<8>(x + 32 * k, w + 32 * k, scales + k);
  return k;
}
#endif
#endif

}  // namespace

void search_scale_min_groups(int groups, int n, int nmax, const float* x, const float* w, std::uint8_t* L, float* scales, float* neg_mins, float rmin,
                             float rdelta, int nstep, bool use_mad) {
#if SAFEWEIGHTS_QUANT_SCALAR
  for (int k = 0; k < groups; ++k) scales[k] = search_scale_min(n, nmax, x + k * n, w + k * n, L + k * n, &neg_mins[k], rmin, rdelta, nstep, use_mad);
#else
  const AffineSearch a{n, nmax, x, w, L, scales, neg_mins, rmin, rdelta, nstep, use_mad};
#if SAFEWEIGHTS_QUANT_AVX512
  if (has_avx512()) {
    const int k = affine_16(a, groups);
    if (k == groups) return;
    return affine_8({n, nmax, x + k * n, w + k * n, L + k * n, scales + k, neg_mins + k, rmin, rdelta, nstep, use_mad}, groups - k);
  }
#endif
#if SAFEWEIGHTS_QUANT_AVX2
  if (has_avx2()) return affine_8(a, groups);
#endif
  affine_4(a, groups);
#endif
}

void search_scale_symmetric_trials_groups(int groups, int n, int nmax, const float* x, const float* w, std::int8_t* L, float* scales) {
#if SAFEWEIGHTS_QUANT_SCALAR
  for (int k = 0; k < groups; ++k) scales[k] = search_scale_symmetric_trials(n, nmax, x + k * n, w != nullptr ? w + k * n : nullptr, L + k * n);
#else
  const SymmetricSearch a{n, nmax, x, w, L, scales};
#if SAFEWEIGHTS_QUANT_AVX512
  if (has_avx512()) {
    const int k = symmetric_16(a, groups);
    if (k == groups) return;
    return symmetric_8({n, nmax, x + k * n, w != nullptr ? w + k * n : nullptr, L + k * n, scales + k}, groups - k);
  }
#endif
#if SAFEWEIGHTS_QUANT_AVX2
  if (has_avx2()) return symmetric_8(a, groups);
#endif
  symmetric_4(a, groups);
#endif
}

void search_scale_symmetric_descent_groups(int groups, int nmax, const float* x, std::int8_t* L, float* scales) {
#if SAFEWEIGHTS_QUANT_SCALAR
  for (int k = 0; k < groups; ++k) scales[k] = search_scale_symmetric_descent(nmax, x + 16 * k, L + 16 * k);
#else
  const SymmetricSearch a{16, nmax, x, nullptr, L, scales};
#if SAFEWEIGHTS_QUANT_AVX512
  if (has_avx512()) return descent_16(a, groups);
#endif
#if SAFEWEIGHTS_QUANT_AVX2
  if (has_avx2()) return descent_8(a, groups);
#endif
  descent_4(a, groups);
#endif
}

void search_scale_iq4_groups(int groups, const float* x, const float* w, float* scales) noexcept {
  int k = 0;
#if !SAFEWEIGHTS_QUANT_SCALAR
#if SAFEWEIGHTS_QUANT_AVX2
  if (has_avx2()) k = iq4_8(groups, x, w, scales);
#endif
  k += iq4_4(groups - k, x + 32 * k, w + 32 * k, scales + k);
#endif
  for (; k < groups; ++k) scales[k] = search_scale_iq4(x + 32 * k, w + 32 * k);
}

void codes_at_scale(int n, const float* x, float dm, float d, bool with_min, int lo, int hi, int offset, std::uint8_t* L) noexcept {
#if !SAFEWEIGHTS_QUANT_SCALAR && SAFEWEIGHTS_QUANT_AVX512
  if (n % 16 == 0 && has_avx512()) return codes_at_scale_16(n, x, dm, d, with_min, lo, hi, offset, L);
#endif
#if !SAFEWEIGHTS_QUANT_SCALAR && SAFEWEIGHTS_QUANT_AVX2
  if (n % 8 == 0 && has_avx2()) return codes_at_scale_8(n, x, dm, d, with_min, lo, hi, offset, L);
#endif
  codes_at_scale_lanes<4>(n, x, dm, d, with_min, lo, hi, offset, L);
}

}  // namespace safeweights::quant
