// nearest_neighbour() (iq_search.h): a key's neighbour list searched in lanes, one candidate a lane,
// each lane summing its candidate's distance in the plain search's operations and order (no sum runs
// across lanes, no contraction), so the chosen entry is the plain search's; the judge
// (tests/quant/ggml_differential.sh) checks each way this file is built (lanes.h). The grid
// quantizers spend most of their time here: a group off the grid has tens of candidates (IQ1: 70).
#include <cfloat>
#include <cstring>

#include "quant/iq_search.h"
#include "quant/lanes.h"

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

// Lanes candidates at once from the transposed chunks (GridSearch::lane_points); each lane keeps its
// first least distance, then the lanes' least, the earliest position among equals, is the plain
// search's choice.
template <int Lanes, int Width>
[[gnu::always_inline]] inline int nearest_lanes(const GridSearch& grid, unsigned key, const float* xval, const float* w, float scale,
                                                const float* levels) noexcept {
  using F = typename Vec<Lanes>::F;
  using I = typename Vec<Lanes>::I;
  using B = typename Vec<Lanes>::B;
  const std::span<const std::uint16_t> neighbours = grid.neighbours_of(key);
  const std::int8_t* chunk = grid.lane_points.data() + grid.lane_at[key];
  constexpr int width = Width;
  const int count = static_cast<int>(neighbours.size());
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
        F p = __builtin_convertvector(__builtin_convertvector(b, I), F);
        if (levels != nullptr) p = select(p == 1.0f, F{} + levels[0], select(p == 3.0f, F{} + levels[1], F{} + levels[2]));
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
  const int position = position_v[0] == 0x7fffffff ? 0 : position_v[0];
  return neighbours[position];
}

#if !SAFEWEIGHTS_QUANT_SCALAR && SAFEWEIGHTS_QUANT_AVX2
[[gnu::target("avx2")]] int nearest_8(const GridSearch& grid, unsigned key, const float* xval, const float* w, float scale,
                                      const float* levels) noexcept {
  return grid.width == 4 ? nearest_lanes<8, 4>(grid, key, xval, w, scale, levels) : nearest_lanes<8, 8>(grid, key, xval, w, scale, levels);
}
#endif

}  // namespace

int nearest_neighbour(const GridSearch& grid, unsigned key, const float* xval, const float* w, float scale, const float* levels) noexcept {
#if SAFEWEIGHTS_QUANT_SCALAR
  return nearest_plain(grid, grid.neighbours_of(key), xval, w, scale, levels);
#else
#if SAFEWEIGHTS_QUANT_AVX2
  if (lanes::has_avx2()) return nearest_8(grid, key, xval, w, scale, levels);
#endif
  return grid.width == 4 ? nearest_lanes<4, 4>(grid, key, xval, w, scale, levels) : nearest_lanes<4, 8>(grid, key, xval, w, scale, levels);
#endif
}

}  // namespace safeweights::quant::iq
