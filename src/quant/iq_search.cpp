// ggml's grid search structures, built from the grids' level indices (iq_search.h).
#include "quant/iq_search.h"

#include <algorithm>
#include <limits>

#include "quant/iq_grids.h"

namespace safeweights::quant::iq {
namespace {

struct GridSpec {
  const std::uint16_t* codes;
  int size, width;
  unsigned base;  // of the codes' digits (the number of levels)
  int bits;       // of a level index in a key
  int nearest;    // distinct distances a neighbour list covers
};

// The keys whose level indices are all below `base` (those a quantizer can form: it clamps the indices).
bool valid_key(unsigned key, const GridSpec& spec) {
  for (int j = 0; j < spec.width; ++j)
    if (((key >> (spec.bits * j)) & ((1u << spec.bits) - 1)) >= spec.base) return false;
  return true;
}

// A neighbour list's level indices in chunks of 8 candidates, transposed (GridSearch::lane_levels).
void append_lane_chunks(GridSearch& s, std::span<const std::uint16_t> neighbours) {
  for (std::size_t first = 0; first < neighbours.size(); first += 8)
    for (int j = 0; j < s.width; ++j)
      for (std::size_t k = 0; k < 8; ++k)
        s.lane_levels.push_back(static_cast<std::int8_t>((s.point(neighbours[std::min(first + k, neighbours.size() - 1)])[j] - 1) / 2));
}

GridSearch build(const GridSpec& spec) {
  GridSearch s;
  s.width = spec.width;
  s.bits = spec.bits;
  s.points.resize(static_cast<std::size_t>(spec.size) * spec.width);
  s.map.assign(std::size_t{1} << (spec.bits * spec.width), -1);
  for (int i = 0; i < spec.size; ++i) {
    unsigned code = spec.codes[i], key = 0;
    for (int j = 0; j < spec.width; ++j, code /= spec.base) {
      const unsigned level = code % spec.base;
      s.points[static_cast<std::size_t>(i) * spec.width + j] = static_cast<std::int8_t>(2 * level + 1);
      key |= level << (spec.bits * j);
    }
    s.map[key] = i;
  }
  s.lane_at.assign(s.map.size(), 0);
  std::vector<int> distance(spec.size);
  for (unsigned key = 0; key < s.map.size(); ++key) {
    if (s.map[key] >= 0 || !valid_key(key, spec)) continue;
    for (int i = 0; i < spec.size; ++i) {
      int d2 = 0;
      for (int j = 0; j < spec.width; ++j) {
        const int diff =
            s.points[static_cast<std::size_t>(i) * spec.width + j] - static_cast<int>(2 * ((key >> (spec.bits * j)) & ((1u << spec.bits) - 1)) + 1);
        d2 += diff * diff;
      }
      distance[i] = d2;
    }
    s.map[key] = -1 - static_cast<std::int32_t>(s.lists.size());
    const std::size_t count_at = s.lists.size();
    s.lists.push_back(0);
    // The `nearest` smallest distinct distances in increasing order; each one's entries by index.
    int floor = -1;
    for (int round = 0; round < spec.nearest; ++round) {
      int next = std::numeric_limits<int>::max();
      for (int d2 : distance)
        if (d2 > floor && d2 < next) next = d2;
      if (next == std::numeric_limits<int>::max()) break;
      for (int i = 0; i < spec.size; ++i)
        if (distance[i] == next) s.lists.push_back(static_cast<std::uint16_t>(i));
      floor = next;
    }
    s.lists[count_at] = static_cast<std::uint16_t>(s.lists.size() - count_at - 1);
    s.lane_at[key] = static_cast<std::uint32_t>(s.lane_levels.size());
    append_lane_chunks(s, {s.lists.data() + count_at + 1, s.lists[count_at]});
  }
  return s;
}

}  // namespace

const GridSearch& grid_search(TensorType type) {
  switch (type) {
    case TensorType::IQ3_XXS: {
      static const GridSearch s = build({kIq3xxsCodes, 256, 4, kIq3Base, 3, 2});
      return s;
    }
    case TensorType::IQ3_S: {
      static const GridSearch s = build({kIq3sCodes, 512, 4, kIq3Base, 3, 3});
      return s;
    }
    case TensorType::IQ2_XXS: {
      static const GridSearch s = build({kIq2xxsCodes, 256, 8, kIq2Base, 2, 2});
      return s;
    }
    case TensorType::IQ2_XS: {
      static const GridSearch s = build({kIq2xsCodes, 512, 8, kIq2Base, 2, 2});
      return s;
    }
    case TensorType::IQ2_S: {
      static const GridSearch s = build({kIq2sCodes, 1024, 8, kIq2Base, 2, 1});
      return s;
    }
    default: {  // IQ1_S, IQ1_M
      static const GridSearch s = build({kIq1sCodes, 2048, 8, kIq1Base, 2, 3});
      return s;
    }
  }
}

}  // namespace safeweights::quant::iq
