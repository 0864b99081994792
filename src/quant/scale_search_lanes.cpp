// The scale searches of scale_search.h for many groups at once: one group a lane of a vector. Each lane
// goes through the plain search's operations in its order (no sum runs across lanes, no contraction), so
// every result equals the plain search's, which the judge (tests/quant/ggml_differential.sh) checks
// for each way this file is built. Several groups a vector only keep more of the processor busy than
// one group's chain of dependent additions can.
//
// The lanes are the machine's registers: 4 (SSE2, every x86-64, and other 128-bit SIMD), or 8 with
// AVX2, chosen at run time. Built with SAFEWEIGHTS_QUANT_SCALAR=1 it runs the plain searches one group
// after the other; with SAFEWEIGHTS_QUANT_AVX2=0 it never takes AVX2's lanes.
#include <cstdint>
#include <cstring>

#include "quant/scale_search.h"

// The vector helpers below are internal and inlined, so GCC's note that passing wide vectors by value
// has another ABI under AVX does not concern them.
#if defined(__GNUC__)  // GCC and Clang
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#if !defined(SAFEWEIGHTS_QUANT_AVX2) && defined(__x86_64__) && defined(__GNUC__)
#define SAFEWEIGHTS_QUANT_AVX2 1
#endif

namespace safeweights::quant {
namespace {

// GCC and Clang vector types, spelled out per width (GCC drops vector_size on a type that depends on a
// template parameter). Wider vectors than the registers would be lowered lane by lane.
template <int Lanes>
struct Vec;
template <>
struct Vec<4> {
  using F = float __attribute__((vector_size(16)));
  using I = std::int32_t __attribute__((vector_size(16)));
};
template <>
struct Vec<8> {
  using F = float __attribute__((vector_size(32)));
  using I = std::int32_t __attribute__((vector_size(32)));
};

// mask ? a : b, lane by lane (mask lanes are 0 or -1).
template <typename F, typename I>
[[gnu::always_inline]] inline F select(I mask, F a, F b) noexcept {
  return reinterpret_cast<F>((mask & reinterpret_cast<I>(a)) | (~mask & reinterpret_cast<I>(b)));
}
template <typename I>
[[gnu::always_inline]] inline I select_int(I mask, I a, I b) noexcept {
  return (mask & a) | (~mask & b);
}

// nearest_int() lane by lane, then clamp(l, lo, hi).
template <typename F, typename I>
[[gnu::always_inline]] inline I nearest_clamped(F f, int lo, int hi) noexcept {
  const F shifted = f + 12582912.0f;
  I l = (reinterpret_cast<I>(shifted) & 0x7fffff) - 0x400000;
  l = select_int<I>(l < lo, I{} + lo, l);
  return select_int<I>(l > hi, I{} + hi, l);
}

template <typename F, typename I>
[[gnu::always_inline]] inline F absolute(F v) noexcept {
  return reinterpret_cast<F>(reinterpret_cast<I>(v) & 0x7fffffff);
}

template <typename F>
[[gnu::always_inline]] inline F to_float(auto l) noexcept {
  return __builtin_convertvector(l, F);
}

// Lanes groups of n values (group k at p + k*n) as n vectors: vector i holds value i of each group.
template <typename F>
[[gnu::always_inline]] inline void transpose_in(int lanes, int n, const float* p, F* t) noexcept {
  for (int k = 0; k < lanes; ++k)
    for (int i = 0; i < n; ++i) t[i][k] = p[k * n + i];
}

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

template <int Lanes>
[[gnu::always_inline]] inline void affine_lanes(const AffineSearch& a, int first) {
  using F = typename Vec<Lanes>::F;
  using I = typename Vec<Lanes>::I;
  const int n = a.n, nmax = a.nmax;
  F xt[32] = {}, wt[32] = {};
  transpose_in(Lanes, n, a.x + first * n, xt);
  transpose_in(Lanes, n, a.w + first * n, wt);
  auto error_term = [&](F diff) { return a.use_mad ? absolute<F, I>(diff) : diff * diff; };
  F min = xt[0], max = xt[0];
  F sum_w = wt[0];
  F sum_x = sum_w * xt[0];
  for (int i = 1; i < n; ++i) {
    min = select(xt[i] < min, xt[i], min);
    max = select(xt[i] > max, xt[i], max);
    sum_w += wt[i];
    sum_x += wt[i] * xt[i];
  }
  const F zero = F{} + 0.0f;
  min = select(min > 0, zero, min);
  const I flat = max == min;  // these lanes' search ends here: codes 0, scale 0
  F iscale = static_cast<float>(nmax) / (max - min);
  F scale = 1 / iscale;
  F best_mad = zero;
  I best[32], trial[32];
  for (int i = 0; i < n; ++i) {
    best[i] = nearest_clamped<F, I>(iscale * (xt[i] - min), 0, nmax);
    best_mad += wt[i] * error_term(scale * to_float<F>(best[i]) + min - xt[i]);
  }
  for (int is = 0; is <= a.nstep; ++is) {
    iscale = (a.rmin + a.rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    F sum_l = zero, sum_l2 = zero, sum_xl = zero;
    for (int i = 0; i < n; ++i) {
      trial[i] = nearest_clamped<F, I>(iscale * (xt[i] - min), 0, nmax);
      const F fl = to_float<F>(trial[i]);
      sum_l += wt[i] * fl;
      sum_l2 += wt[i] * fl * fl;
      sum_xl += wt[i] * fl * xt[i];
    }
    const F D = sum_w * sum_l2 - sum_l * sum_l;
    F this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    F this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    const I positive_min = this_min > 0;
    this_min = select(positive_min, zero, this_min);
    this_scale = select(positive_min, sum_xl / sum_l2, this_scale);
    F mad = zero;
    for (int i = 0; i < n; ++i) mad += wt[i] * error_term(this_scale * to_float<F>(trial[i]) + this_min - xt[i]);
    const I better = (D > 0) & (mad < best_mad) & ~flat;
    for (int i = 0; i < n; ++i) best[i] = select_int(better, trial[i], best[i]);
    best_mad = select(better, mad, best_mad);
    scale = select(better, this_scale, scale);
    min = select(better, this_min, min);
  }
  scale = select(flat, zero, scale);
  for (int k = 0; k < Lanes; ++k) {
    a.scales[first + k] = scale[k];
    a.neg_mins[first + k] = -min[k];
    for (int i = 0; i < n; ++i) a.L[(first + k) * n + i] = flat[k] ? 0 : static_cast<std::uint8_t>(best[i][k]);
  }
}

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
  F xt[P][32] = {}, wt[P][32] = {}, max[P], scale[P], best[P];
  I zero_group[P], L[P][32], trial[P][32];
  for (int p = 0; p < P; ++p) {
    transpose_in(Lanes, n, a.x + (first + p * Lanes) * n, xt[p]);
    if (a.w != nullptr)
      transpose_in(Lanes, n, a.w + (first + p * Lanes) * n, wt[p]);
    else
      for (int i = 0; i < n; ++i) wt[p][i] = xt[p][i] * xt[p][i];
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
        sumlx[p] += wt[p][i] * xt[p][i] * fl;
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

// ---- search_scale_symmetric_descent -----------------------------------------------------------------

// A lane whose pass changes no code stops, as the plain search breaks out of its loop. Each element's
// step waits on the one before it (a division among them), so two vectors of groups go through the
// loop side by side: their chains overlap. Handles 2 x Lanes groups.
template <int Lanes>
[[gnu::always_inline]] inline void descent_lanes(const SymmetricSearch& a, int first) {
  using F = typename Vec<Lanes>::F;
  using I = typename Vec<Lanes>::I;
  constexpr int n = 16, P = 2;
  const int nmax = a.nmax;
  F xt[P][n] = {}, wt[P][n] = {}, sumlx[P], suml2[P];
  I L[P][n], zero_group[P], active[P];
  for (int p = 0; p < P; ++p) {
    transpose_in(Lanes, n, a.x + (first + p * Lanes) * n, xt[p]);
    for (int i = 0; i < n; ++i) wt[p][i] = xt[p][i] * xt[p][i];
    F max;
    zero_group[p] = signed_max_lanes<F, I>(n, xt[p], max);
    symmetric_codes_lanes<F, I>(n, nmax, xt[p], wt[p], static_cast<float>(-nmax) / max, L[p], sumlx[p], suml2[p]);
    active[p] = ~zero_group[p];
  }
  for (int itry = 0; itry < 5; ++itry) {
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
    bool any = false;
    for (int p = 0; p < P; ++p) {
      active[p] &= changed[p];
      for (int k = 0; k < Lanes; ++k) any = any || active[p][k] != 0;
    }
    if (!any) break;
  }
  const F zero = F{} + 0.0f;
  for (int p = 0; p < P; ++p) {
    const F scale = select(suml2[p] > 0, sumlx[p] / suml2[p], zero);
    for (int k = 0; k < Lanes; ++k) {
      const int g = first + p * Lanes + k;
      a.scales[g] = zero_group[p][k] ? 0.0f : scale[k];
      for (int i = 0; i < n; ++i) a.L[g * n + i] = zero_group[p][k] ? 0 : static_cast<std::int8_t>(L[p][i][k] + nmax);
    }
  }
}

// ---- running the lanes ------------------------------------------------------------------------------

#if !SAFEWEIGHTS_QUANT_SCALAR
void affine_4(const AffineSearch& a, int groups) {
  for (int k = 0; k < groups; k += 4) affine_lanes<4>(a, k);
}
void symmetric_4(const SymmetricSearch& a, int groups) {
  for (int k = 0; k < groups; k += 8) symmetric_lanes<4, 2>(a, k);
}
void descent_4(const SymmetricSearch& a, int groups) {
  for (int k = 0; k < groups; k += 8) descent_lanes<4>(a, k);
}
#if SAFEWEIGHTS_QUANT_AVX2
// AVX2 without FMA: contraction would change the bytes.
[[gnu::target("avx2")]] void affine_8(const AffineSearch& a, int groups) {
  for (int k = 0; k < groups; k += 8) affine_lanes<8>(a, k);
}
[[gnu::target("avx2")]] void symmetric_8(const SymmetricSearch& a, int groups) {
  int k = 0;
  for (; k + 16 <= groups; k += 16) symmetric_lanes<8, 2>(a, k);
  for (; k < groups; k += 8) symmetric_lanes<8, 1>(a, k);
}
[[gnu::target("avx2")]] void descent_8(const SymmetricSearch& a, int groups) {
  for (int k = 0; k < groups; k += 16) descent_lanes<8>(a, k);
}
bool has_avx2() noexcept {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
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
#if SAFEWEIGHTS_QUANT_AVX2
  if (has_avx2()) return descent_8(a, groups);
#endif
  descent_4(a, groups);
#endif
}

void codes_at_scale(int n, const float* x, float dm, float d, bool with_min, int lo, int hi, int offset, std::uint8_t* L) noexcept {
  using F = Vec<4>::F;
  using I = Vec<4>::I;
  for (int i = 0; i < n; i += 4) {
    F v;
    std::memcpy(&v, x + i, sizeof v);
    if (with_min) v = v + dm;
    const I l = nearest_clamped<F, I>(v / d, lo, hi) + offset;
    for (int k = 0; k < 4; ++k) L[i + k] = static_cast<std::uint8_t>(l[k]);
  }
}

}  // namespace safeweights::quant
