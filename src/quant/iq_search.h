// The search structures of ggml's grid quantizers (IQ3_XXS, IQ3_S; IQ2_XXS, IQ2_XS, IQ2_S; IQ1_S, IQ1_M),
// derived from the grids (iq_grids.h) at first use. Internal to src/quant.
//
// A quantizer rounds each group of 4 (IQ3) or 8 (IQ2, IQ1) values to level indices and packs them into a
// key (`bits` per element). When the key is a grid entry, map gives its index. When it is not, the
// entry is chosen among the key's neighbours: the grid entries at the `nearest` smallest squared
// distances from the key (in units where level l sits at 2l + 1), ordered by distance, then index.
// This is the list ggml_quantize_init() builds, so that the search visits candidates in ggml's order.
//
// Thread safety: grid_search() builds each type's structure once (a function-local static: concurrent
// first calls wait for one build); the structures are immutable afterwards.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "safeweights/tensor_type.h"

namespace safeweights::quant::iq {

struct GridSearch {
  int width = 0;                     // elements a grid entry
  int bits = 0;                      // bits of a level index in a key
  std::vector<std::int8_t> points;   // entry i, element j: 2 x level + 1, at i x width + j
  std::vector<std::int32_t> map;     // key -> grid index, or -1 - (position of its neighbours)
  std::vector<std::uint16_t> lists;  // at a position: the count, then the neighbours' indices
  // The neighbours' level indices (point = 2 x level + 1), for searching them in lanes: a list's
  // candidates in chunks of 8, each chunk transposed (element i of its 8 candidates side by side), the
  // last chunk padded with its last candidate; a key's list starts at lane_levels[lane_at[key]].
  std::vector<std::int8_t> lane_levels;
  std::vector<std::uint32_t> lane_at;

  const std::int8_t* point(int index) const noexcept { return points.data() + static_cast<std::ptrdiff_t>(index) * width; }
  // The key's grid index, or -1 when the key is no grid entry.
  int index_of(unsigned key) const noexcept { return map[key] >= 0 ? map[key] : -1; }
  // The neighbours of a key that is no grid entry (empty for a grid entry).
  std::span<const std::uint16_t> neighbours_of(unsigned key) const noexcept {
    if (map[key] >= 0) return {};
    const std::uint16_t* at = lists.data() + (-1 - map[key]);
    return {at + 1, at[0]};
  }
};

// The grid index of the neighbour of `key` (a key that is no grid entry) nearest to the group xval with
// weights w at `scale`: the least sum over the group's elements, in order, of w x (scale x p - xval)^2,
// where p is the entry's value (2l + 1) or, with `levels`, levels[l] (IQ1's shifted levels); the first
// of equal sums, as ggml's strict comparison keeps it. Where no sum compares below FLT_MAX (NaN) ggml
// aborts (IQ1: scans the whole grid, past its arrays); the first neighbour stands in then. Runs the candidates in lanes (iq_search_lanes.cpp).
int nearest_neighbour(const GridSearch& grid, unsigned key, const float* xval, const float* w, float scale, const float* levels = nullptr) noexcept;

// The level indices of n values (a multiple of 4) at inverse scale id, element by element as ggml rounds
// them before the grid lookup: clamp(nearest_int(0.5 x (id x xval - 1)), 0, levels - 1), level l
// standing for 2l + 1. In lanes (iq_search_lanes.cpp); each element's result is the plain one.
void round_levels(int n, const float* xval, float id, int levels, std::int8_t* L) noexcept;

// The running best of a trial-scale search (search_trials()): sumqx / sumq2 of the best trial and
// scale x sumqx, ggml's `best`.
struct TrialBest {
  float scale = 0;
  float best = 0;
};

// ggml's loop over trial scales (IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S), for the inverse scales
// ids[0 .. count) in order: the n values xval (n <= 32, sub-groups of grid.width) rounded at id to level
// indices (round_levels()), each sub-group moved onto the grid (its key's entry, or nearest_neighbour()
// with weights root at scale 1 / id), then sumqx = sum of weight x xval x q and sumq2 = sum of
// weight x q x q (q = 2l + 1), element by element. A trial with sumq2 > 0 and sumqx^2 > best x sumq2
// becomes the best: its levels go to L, whether each sub-group's key was a grid entry to on_grid, and
// best is updated. The trials run as lanes of vectors (iq_search_lanes.cpp), each lane doing the plain
// loop's operations in its order, and are compared one after the other, so the result is the plain one.
void search_trials(const GridSearch& grid, int n, int levels, const float* xval, const float* weight, const float* root, const float* ids, int count,
                   TrialBest& best, std::int8_t* L, bool* on_grid) noexcept;

// The structure of IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S or IQ1_M (IQ1_M shares IQ1_S's).
const GridSearch& grid_search(TensorType type);

}  // namespace safeweights::quant::iq
