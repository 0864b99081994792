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

#include "quant/lanes.h"
#include "quant/scale_search.h"

namespace safeweights::quant {
namespace {

using lanes::absolute;
using lanes::nearest_clamped;
using lanes::select;
using lanes::select_int;
using lanes::to_float;
using lanes::transpose_in;
using lanes::Vec;
#if SAFEWEIGHTS_QUANT_AVX2 && !SAFEWEIGHTS_QUANT_SCALAR
using lanes::has_avx2;
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
        descent_pass<Lanes, 4>(at, list + start, left < 4 * Lanes ? left : 4 * Lanes, pass == 0, st);
        start += 4 * Lanes;
      } else if (left > Lanes) {
        descent_pass<Lanes, 2>(at, list + start, left, pass == 0, st);
        start += 2 * Lanes;
      } else {
        descent_pass<Lanes, 1>(at, list + start, left, pass == 0, st);
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
  for (int k = 0; k < groups; k += 4) affine_lanes<4>(a, k);
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
  for (int k = 0; k < groups; k += 8) affine_lanes<8>(a, k);
}
[[gnu::target("avx2")]] void symmetric_8(const SymmetricSearch& a, int groups) {
  int k = 0;
  for (; k + 16 <= groups; k += 16) symmetric_lanes<8, 2>(a, k);
  for (; k < groups; k += 8) symmetric_lanes<8, 1>(a, k);
}
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
#if !SAFEWEIGHTS_QUANT_SCALAR && SAFEWEIGHTS_QUANT_AVX2
  if (n % 8 == 0 && has_avx2()) return codes_at_scale_8(n, x, dm, d, with_min, lo, hi, offset, L);
#endif
  codes_at_scale_lanes<4>(n, x, dm, d, with_min, lo, hi, offset, L);
}

}  // namespace safeweights::quant
