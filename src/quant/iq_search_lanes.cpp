// nearest_neighbour() (iq_search.h): a key's neighbour list searched in lanes, one candidate a lane,
// each lane summing its candidate's distance in the plain search's operations and order (no sum runs
// across lanes, no contraction), so the chosen entry is the plain search's; the judge
// (tests/quant/ggml_differential.sh) checks each way this file is built (lanes.h). The grid
// quantizers spend most of their time here: a group off the grid has tens of candidates (IQ1: 70).
// With AVX2, a candidate's term for element i, w[i] x (scale x value - xval[i])^2, depends only on the
// level it has there: the terms of the (at most 8) levels are computed once a call, as the plain search
// computes each, and each candidate's sum adds the looked-up terms in element order (a permute a
// vector of 8 candidates): the same floats added in the same order.
#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstring>

#include "quant/iq_search.h"
#include "quant/lanes.h"
#include "quant/rounding.h"

#if !SAFEWEIGHTS_QUANT_SCALAR && SAFEWEIGHTS_QUANT_AVX2
#include <immintrin.h>
#endif

namespace safeweights::quant::iq {
namespace {

using lanes::select;
using lanes::select_int;
using lanes::Vec;

// The value a point (2l + 1) stands for: itself, or levels[l].
inline float point_value(std::int8_t p, const float* levels) noexcept { return levels != nullptr ? levels[(p - 1) / 2] : static_cast<float>(p); }

// The plain search: the candidates one after the other, the first strictly least distance kept.
[[maybe_unused]] int nearest_plain(const GridSearch& grid, std::span<const std::uint16_t> neighbours, const float* xval, const float* w, float scale,
                                   const float* levels) noexcept {
  float best_d2 = FLT_MAX;
  int best = neighbours[0];
  for (std::uint16_t candidate : neighbours) {
    const std::int8_t* pg = grid.point(candidate);
    float d2 = 0;
    for (int i = 0; i < grid.width; ++i) {
      const float diff = scale * point_value(pg[i], levels) - xval[i];
      d2 += w[i] * diff * diff;
    }
    if (d2 < best_d2) {
      best_d2 = d2;
      best = candidate;
    }
  }
  return best;
}

// Lanes candidates at once from the transposed chunks (GridSearch::lane_levels: `count` candidates from
// `chunk`); each lane keeps its first least distance, then the lanes' least, the earliest position among
// equals, is the plain search's choice. Returns its position in the list (0 where no distance compares
// below FLT_MAX).
template <int Lanes, int Width>
[[gnu::always_inline]] inline int position_lanes(const std::int8_t* chunk, int count, const float* xval, const float* w, float scale,
                                                 const float* levels) noexcept {
  using F = typename Vec<Lanes>::F;
  using I = typename Vec<Lanes>::I;
  using B = typename Vec<Lanes>::B;
  constexpr int width = Width;
  I lane_position;
  for (int k = 0; k < Lanes; ++k) lane_position[k] = k;
  F best = F{} + FLT_MAX;
  I best_position = I{};
  for (int first = 0; first < count; first += 8, chunk += 8 * width) {
    for (int half = 0; half < 8; half += Lanes) {
      F d2 = F{} + 0.0f;
      for (int i = 0; i < width; ++i) {
        B b;
        std::memcpy(&b, chunk + 8 * i + half, sizeof b);
        const I l = __builtin_convertvector(b, I);
        const F p = levels != nullptr ? select(l == 0, F{} + levels[0], select(l == 1, F{} + levels[1], F{} + levels[2]))
                                      : __builtin_convertvector(2 * l + 1, F);
        const F diff = scale * p - xval[i];
        d2 += w[i] * diff * diff;
      }
      const I better = d2 < best;
      best = select(better, d2, best);
      best_position = select_int(better, lane_position + (first + half), best_position);
    }
  }
  // The least distance over the lanes, then the earliest position holding it (none below FLT_MAX: 0).
  F least = best;
  for (int k = 1; k < Lanes; k *= 2) {
    F other;
    for (int j = 0; j < Lanes; ++j) other[j] = least[j ^ k];
    least = select(other < least, other, least);
  }
  const I holders = (best == least) & (best < FLT_MAX);
  I position_v = select_int(holders, best_position, I{} + 0x7fffffff);
  for (int k = 1; k < Lanes; k *= 2) {
    I other;
    for (int j = 0; j < Lanes; ++j) other[j] = position_v[j ^ k];
    position_v = select_int(other < position_v, other, position_v);
  }
  return position_v[0] == 0x7fffffff ? 0 : position_v[0];
}

// position_lanes() with 4 lanes, as a function (the trial search's, with SSE2).
template <int Width>
int position_4(const std::int8_t* chunk, int count, const float* xval, const float* w, float scale, const float* levels) noexcept {
  return position_lanes<4, Width>(chunk, count, xval, w, scale, levels);
}

// round_levels() in vectors of Lanes elements (n a multiple of Lanes).
template <int Lanes>
[[gnu::always_inline]] inline void round_levels_lanes(int n, const float* xval, float id, int levels, std::int8_t* L) noexcept {
  using F = typename Vec<Lanes>::F;
  using I = typename Vec<Lanes>::I;
  for (int first = 0; first < n; first += Lanes) {
    F x;
    std::memcpy(&x, xval + first, sizeof x);
    const I l = lanes::nearest_clamped<F, I>(0.5f * (id * x - 1), 0, levels - 1);
    for (int k = 0; k < Lanes; ++k) L[first + k] = static_cast<std::int8_t>(l[k]);
  }
}

#if !SAFEWEIGHTS_QUANT_SCALAR && SAFEWEIGHTS_QUANT_AVX2
[[gnu::target("avx2")]] void round_levels_8(int n, const float* xval, float id, int levels, std::int8_t* L) noexcept {
  round_levels_lanes<8>(n, xval, id, levels, L);
}

// One chunk's 8 distances from the table of terms, those not below FLT_MAX (NaN never compares below)
// as infinity.
template <int Width>
[[gnu::target("avx2"), gnu::always_inline]] inline __m256 chunk_distances(const __m256* terms, const std::int8_t* chunk) noexcept {
  __m256 d2 = _mm256_setzero_ps();
  for (int i = 0; i < Width; ++i) {
    const __m256i l = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(chunk + 8 * i)));
    d2 = _mm256_add_ps(d2, _mm256_permutevar8x32_ps(terms[i], l));
  }
  return _mm256_blendv_ps(_mm256_set1_ps(INFINITY), d2, _mm256_cmp_ps(d2, _mm256_set1_ps(FLT_MAX), _CMP_LT_OQ));
}

// Eight candidates a vector (`count` from `chunk`, as position_lanes()), their distances summed from the
// table of terms (the file's comment); each lane keeps its first least distance and its position, then
// the least over the lanes, the earliest position holding it. Returns that position (0 where no
// distance compares below FLT_MAX).
template <int Width>
[[gnu::target("avx2")]] int position_8(const std::int8_t* chunk, int count, const float* xval, const float* w, float scale,
                                       const float* levels) noexcept {
  const __m256 values =
      levels != nullptr ? _mm256_setr_ps(levels[0], levels[1], levels[2], 0, 0, 0, 0, 0) : _mm256_setr_ps(1, 3, 5, 7, 9, 11, 13, 15);
  const __m256 scaled = _mm256_mul_ps(_mm256_set1_ps(scale), values);
  __m256 terms[Width];
  for (int i = 0; i < Width; ++i) {
    const __m256 diff = _mm256_sub_ps(scaled, _mm256_set1_ps(xval[i]));
    terms[i] = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(w[i]), diff), diff);
  }
  if (count <= 16) {  // one or two chunks (padding repeats the last candidate): the first of least distance
    const __m256 d2 = chunk_distances<Width>(terms, chunk);
    const __m256 d2_next = count > 8 ? chunk_distances<Width>(terms, chunk + 8 * Width) : _mm256_set1_ps(INFINITY);
    __m256 least = _mm256_min_ps(d2, d2_next);
    least = _mm256_min_ps(least, _mm256_permute2f128_ps(least, least, 1));
    least = _mm256_min_ps(least, _mm256_permute_ps(least, 0x4e));
    least = _mm256_min_ps(least, _mm256_permute_ps(least, 0xb1));
    if (!(_mm256_cvtss_f32(least) < FLT_MAX)) return 0;
    const auto first = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(d2, least, _CMP_EQ_OQ)));
    return first != 0 ? __builtin_ctz(first)
                      : 8 + __builtin_ctz(static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(d2_next, least, _CMP_EQ_OQ))));
  }
  __m256 best = _mm256_set1_ps(FLT_MAX);
  __m256i best_position = _mm256_setzero_si256();
  __m256i position = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int first = 0; first < count; first += 8, chunk += 8 * Width) {
    __m256 d2 = _mm256_setzero_ps();
    for (int i = 0; i < Width; ++i) {
      const __m256i l = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(chunk + 8 * i)));
      d2 = _mm256_add_ps(d2, _mm256_permutevar8x32_ps(terms[i], l));
    }
    const __m256 better = _mm256_cmp_ps(d2, best, _CMP_LT_OQ);
    best = _mm256_blendv_ps(best, d2, better);
    best_position = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(best_position), _mm256_castsi256_ps(position), better));
    position = _mm256_add_epi32(position, _mm256_set1_epi32(8));
  }
  // No lane's distance is NaN (a NaN never compares below), so min gives the least.
  __m256 least = _mm256_min_ps(best, _mm256_permute2f128_ps(best, best, 1));
  least = _mm256_min_ps(least, _mm256_permute_ps(least, 0x4e));
  least = _mm256_min_ps(least, _mm256_permute_ps(least, 0xb1));
  if (!(_mm256_cvtss_f32(least) < FLT_MAX)) return 0;
  // The least position among the lanes that hold the least distance.
  const __m256i holders = _mm256_castps_si256(_mm256_cmp_ps(best, least, _CMP_EQ_OQ));
  __m256i chosen = _mm256_blendv_epi8(_mm256_set1_epi32(INT_MAX), best_position, holders);
  chosen = _mm256_min_epi32(chosen, _mm256_permute2x128_si256(chosen, chosen, 1));
  chosen = _mm256_min_epi32(chosen, _mm256_shuffle_epi32(chosen, 0x4e));
  chosen = _mm256_min_epi32(chosen, _mm256_shuffle_epi32(chosen, 0xb1));
  return _mm256_cvtsi256_si32(chosen);
}
#endif

// The key of `width` level indices (element 0 in the lowest bits).
inline unsigned key_of(const GridSearch& grid, const std::int8_t* L) noexcept {
  unsigned key = 0;
  for (int j = 0; j < grid.width; ++j) key |= static_cast<unsigned>(L[j]) << (grid.bits * j);
  return key;
}

// ggml's test of a trial's sums against the best so far; true when the trial becomes the best.
inline bool take_trial(float sumqx, float sumq2, TrialBest& best) noexcept {
  if (!(sumq2 > 0 && sumqx * sumqx > best.best * sumq2)) return false;
  best.scale = sumqx / sumq2;
  best.best = best.scale * sumqx;
  return true;
}

// The plain trial loop: one trial after the other.
[[maybe_unused]] void search_trials_plain(const GridSearch& grid, int n, int levels, const float* xval, const float* weight, const float* root,
                                          const float* ids, int count, TrialBest& best, std::int8_t* L, bool* on_grid) noexcept {
  const int width = grid.width, groups = n / width;
  for (int t = 0; t < count; ++t) {
    const float id = ids[t], scale = 1 / id;
    std::int8_t trial[32];
    bool on_grid_trial[8];
    for (int i = 0; i < n; ++i) {
      const int l = nearest_int(0.5f * (id * xval[i] - 1));
      trial[i] = static_cast<std::int8_t>(l < 0 ? 0 : l > levels - 1 ? levels - 1 : l);
    }
    for (int k = 0; k < groups; ++k) {
      std::int8_t* group = trial + width * k;
      const unsigned key = key_of(grid, group);
      on_grid_trial[k] = grid.map[key] >= 0;
      if (on_grid_trial[k]) continue;
      const std::int8_t* pg = grid.point(nearest_neighbour(grid, key, xval + width * k, root + width * k, scale, nullptr));
      for (int j = 0; j < width; ++j) group[j] = static_cast<std::int8_t>((pg[j] - 1) / 2);
    }
    float sumqx = 0, sumq2 = 0;
    for (int i = 0; i < n; ++i) {
      const float q = static_cast<float>(2 * trial[i] + 1);
      sumqx += weight[i] * xval[i] * q;
      sumq2 += weight[i] * q * q;
    }
    if (!take_trial(sumqx, sumq2, best)) continue;
    std::memcpy(L, trial, static_cast<std::size_t>(n));
    std::memcpy(on_grid, on_grid_trial, static_cast<std::size_t>(groups));
  }
}

// The trial loop with Lanes trials at once, one a lane: the rounding, the keys and the sums in vectors,
// each off-grid sub-group's neighbour search for its lane's scale, then ggml's comparison lane by lane in
// trial order.
template <int Lanes, int Width, int (*Position)(const std::int8_t*, int, const float*, const float*, float, const float*) noexcept>
[[gnu::always_inline]] inline void search_trials_lanes(const GridSearch& grid, int n, int levels, const float* xval, const float* weight,
                                                       const float* root, const float* ids, int count, TrialBest& best, std::int8_t* L,
                                                       bool* on_grid) noexcept {
  using F = typename Vec<Lanes>::F;
  using I = typename Vec<Lanes>::I;
  constexpr int width = Width;
  const int groups = n / width;
  for (int first = 0; first < count; first += Lanes) {
    const int used = std::min(Lanes, count - first);
    F id;
    for (int k = 0; k < Lanes; ++k) id[k] = ids[first + std::min(k, used - 1)];
    const F scale = 1 / id;
    I level[32];
    for (int i = 0; i < n; ++i) level[i] = lanes::nearest_clamped<F, I>(0.5f * (id * xval[i] - 1), 0, levels - 1);
    unsigned on_grid_bits[Lanes] = {};
    for (int k = 0; k < groups; ++k) {
      I key = level[width * k];
      for (int j = 1; j < width; ++j) key |= level[width * k + j] << (grid.bits * j);
      for (int t = 0; t < used; ++t) {
        const auto lane_key = static_cast<unsigned>(key[t]);
        const int at = grid.map[lane_key];
        if (at >= 0) {  // a grid entry keeps its levels
          on_grid_bits[t] |= 1u << k;
          continue;
        }
        const std::int8_t* chunk = grid.lane_levels.data() + grid.lane_at[lane_key];
        const int position = Position(chunk, grid.lists[-1 - at], xval + width * k, root + width * k, scale[t], nullptr);
        const std::int8_t* column = chunk + position / 8 * 8 * width + position % 8;  // the candidate's levels, 8 apart
        for (int j = 0; j < width; ++j) level[width * k + j][t] = column[8 * j];
      }
    }
    F sumqx = F{}, sumq2 = F{};
    for (int i = 0; i < n; ++i) {
      const F q = lanes::to_float<F>(2 * level[i] + 1);
      sumqx += weight[i] * xval[i] * q;
      sumq2 += weight[i] * q * q;
    }
    for (int t = 0; t < used; ++t) {
      if (!take_trial(sumqx[t], sumq2[t], best)) continue;
      for (int i = 0; i < n; ++i) L[i] = static_cast<std::int8_t>(level[i][t]);
      for (int k = 0; k < groups; ++k) on_grid[k] = (on_grid_bits[t] >> k) & 1u;
    }
  }
}

#if !SAFEWEIGHTS_QUANT_SCALAR && SAFEWEIGHTS_QUANT_AVX2
[[gnu::target("avx2")]] void search_trials_8(const GridSearch& grid, int n, int levels, const float* xval, const float* weight, const float* root,
                                             const float* ids, int count, TrialBest& best, std::int8_t* L, bool* on_grid) noexcept {
  if (grid.width == 4) return search_trials_lanes<8, 4, position_8<4>>(grid, n, levels, xval, weight, root, ids, count, best, L, on_grid);
  search_trials_lanes<8, 8, position_8<8>>(grid, n, levels, xval, weight, root, ids, count, best, L, on_grid);
}
#endif

}  // namespace

void search_trials(const GridSearch& grid, int n, int levels, const float* xval, const float* weight, const float* root, const float* ids, int count,
                   TrialBest& best, std::int8_t* L, bool* on_grid) noexcept {
#if SAFEWEIGHTS_QUANT_SCALAR
  search_trials_plain(grid, n, levels, xval, weight, root, ids, count, best, L, on_grid);
#else
#if SAFEWEIGHTS_QUANT_AVX2
  if (lanes::has_avx2()) return search_trials_8(grid, n, levels, xval, weight, root, ids, count, best, L, on_grid);
#endif
  if (grid.width == 4) return search_trials_lanes<4, 4, position_4<4>>(grid, n, levels, xval, weight, root, ids, count, best, L, on_grid);
  search_trials_lanes<4, 8, position_4<8>>(grid, n, levels, xval, weight, root, ids, count, best, L, on_grid);
#endif
}

int nearest_neighbour(const GridSearch& grid, unsigned key, const float* xval, const float* w, float scale, const float* levels) noexcept {
  const std::span<const std::uint16_t> neighbours = grid.neighbours_of(key);
#if SAFEWEIGHTS_QUANT_SCALAR
  return nearest_plain(grid, neighbours, xval, w, scale, levels);
#else
  const std::int8_t* chunk = grid.lane_levels.data() + grid.lane_at[key];
  const int count = static_cast<int>(neighbours.size());
#if SAFEWEIGHTS_QUANT_AVX2
  if (lanes::has_avx2())
    return neighbours[grid.width == 4 ? position_8<4>(chunk, count, xval, w, scale, levels) : position_8<8>(chunk, count, xval, w, scale, levels)];
#endif
  return neighbours[grid.width == 4 ? position_lanes<4, 4>(chunk, count, xval, w, scale, levels)
                                    : position_lanes<4, 8>(chunk, count, xval, w, scale, levels)];
#endif
}

void round_levels(int n, const float* xval, float id, int levels, std::int8_t* L) noexcept {
#if SAFEWEIGHTS_QUANT_SCALAR
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(0.5f * (id * xval[i] - 1));
    L[i] = static_cast<std::int8_t>(l < 0 ? 0 : l > levels - 1 ? levels - 1 : l);
  }
#else
#if SAFEWEIGHTS_QUANT_AVX2
  if (n % 8 == 0 && lanes::has_avx2()) return round_levels_8(n, xval, id, levels, L);
#endif
  round_levels_lanes<4>(n, xval, id, levels, L);
#endif
}

}  // namespace safeweights::quant::iq
