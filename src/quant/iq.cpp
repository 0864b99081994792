// The codecs of ggml's grid types: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M. A block stores,
// for each group of 8 (or 4) elements, the index of a grid entry (iq_grids.h), signs, and small scales
// under one float16 scale. Dequantizing computes ggml's products in its order; quantizing is ggml's search
// (ggml_quantize_chunk(), with and without importance), step for step, over iq_search.h's structures.
#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/codecs.h"
#include "quant/iq1_split.h"
#include "quant/iq_grids.h"
#include "quant/iq_search.h"
#include "quant/rounding.h"
#include "quant/scale_search.h"

namespace safeweights::quant {
namespace {

using iq::kIq1Delta;
using iq::kIq1Minus;
using iq::kIq1Plus;
using iq::sign_byte;

inline float signed_unit(unsigned signs, int j) noexcept { return (signs >> j) & 1u ? -1.0f : 1.0f; }

// Eight elements: scale x grid value x sign, in ggml's order ((scale x value) x sign).
template <typename Entry>
inline void put_signed(float scale, const Entry& values, unsigned signs, float* y) noexcept {
  for (int j = 0; j < 8; ++j) y[j] = scale * static_cast<float>(values[j]) * signed_unit(signs, j);
}

// Eight elements from two 4-wide IQ3 entries.
template <typename Entry>
inline void put_signed_pair(float scale, const Entry& first, const Entry& second, unsigned signs, float* y) noexcept {
  for (int j = 0; j < 4; ++j) {
    y[j] = scale * static_cast<float>(first[j]) * signed_unit(signs, j);
    y[j + 4] = scale * static_cast<float>(second[j]) * signed_unit(signs, j + 4);
  }
}

// IQ2_XXS (66 bytes a 256): float16 d, then per 32 elements 8 bytes: four grid indices, and a 32-bit word
// of four 7-bit sign codes and a 4-bit scale s (d x (0.5 + s) x 0.25).
void dequantize_iq2_xxs(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * 66;
    const float d = load_f16(in);
    for (int ib = 0; ib < 8; ++ib) {
      const std::byte* group = in + 2 + 8 * ib;
      const std::uint32_t word = le::u32(group + 4);
      const float db = d * (0.5f + static_cast<float>(word >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l, y += 8) put_signed(db, iq::kIq2xxsGrid[load_u8(group + l)], sign_byte(word >> (7 * l)), y);
    }
  }
}

// Two 4-bit scales a 32 elements, each for 16 of them: d x (0.5 + s) x 0.25 (IQ2_XS, IQ2_S).
inline void iq2_half_scales(float d, unsigned byte, float* db) noexcept {
  db[0] = d * (0.5f + static_cast<float>(byte & 0xfu)) * 0.25f;
  db[1] = d * (0.5f + static_cast<float>(byte >> 4)) * 0.25f;
}

// IQ2_XS (74 bytes a 256): float16 d, 32 16-bit words (a 9-bit grid index and a 7-bit sign code), 8 scale
// bytes.
void dequantize_iq2_xs(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * 74;
    const float d = load_f16(in);
    for (int ib = 0; ib < 8; ++ib) {
      float db[2];
      iq2_half_scales(d, load_u8(in + 66 + ib), db);
      for (int l = 0; l < 4; ++l, y += 8) {
        const unsigned q = load_u16(in + 2 + 2 * (4 * ib + l));
        put_signed(db[l / 2], iq::kIq2xsGrid[q & 511u], sign_byte(q >> 9), y);
      }
    }
  }
}

// IQ2_S (82 bytes a 256): float16 d, 32 low bytes of 10-bit grid indices, 32 sign bytes, 8 bytes of the
// indices' high bits (2 a group of 8), 8 scale bytes.
void dequantize_iq2_s(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * 82;
    const float d = load_f16(in);
    for (int ib = 0; ib < 8; ++ib) {
      float db[2];
      iq2_half_scales(d, load_u8(in + 74 + ib), db);
      const unsigned high = load_u8(in + 66 + ib);
      for (int l = 0; l < 4; ++l, y += 8) {
        const unsigned index = load_u8(in + 2 + 4 * ib + l) | ((high << (8 - 2 * l)) & 0x300u);
        put_signed(db[l / 2], iq::kIq2sGrid[index], load_u8(in + 34 + 4 * ib + l), y);
      }
    }
  }
}

// IQ3_XXS (98 bytes a 256): float16 d, 64 grid indices (one a 4 elements), then per 32 elements a 32-bit
// word of four 7-bit sign codes and a 4-bit scale s (d x (0.5 + s) x 0.5).
void dequantize_iq3_xxs(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * 98;
    const float d = load_f16(in);
    for (int ib = 0; ib < 8; ++ib) {
      const std::byte* qs = in + 2 + 8 * ib;
      const std::uint32_t word = le::u32(in + 66 + 4 * ib);
      const float db = d * (0.5f + static_cast<float>(word >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l, y += 8)
        put_signed_pair(db, iq::kIq3xxsGrid[load_u8(qs + 2 * l)], iq::kIq3xxsGrid[load_u8(qs + 2 * l + 1)], sign_byte(word >> (7 * l)), y);
    }
  }
}

// IQ3_S (110 bytes a 256): float16 d, 64 low bytes of 9-bit grid indices, 8 bytes of their high bits, 32
// sign bytes, 4 bytes of two 4-bit scales s (d x (1 + 2s), one a 32 elements).
void dequantize_iq3_s(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * 110;
    const float d = load_f16(in);
    for (int ib = 0; ib < 8; ++ib) {
      const unsigned scale_byte = load_u8(in + 106 + ib / 2);
      const float db = d * static_cast<float>(1 + 2 * static_cast<int>(ib % 2 ? scale_byte >> 4 : scale_byte & 0xfu));
      const unsigned high = load_u8(in + 66 + ib);
      const std::byte* qs = in + 2 + 8 * ib;
      for (int l = 0; l < 4; ++l, y += 8) {
        const unsigned first = load_u8(qs + 2 * l) | ((high << (8 - 2 * l)) & 256u);
        const unsigned second = load_u8(qs + 2 * l + 1) | ((high << (7 - 2 * l)) & 256u);
        put_signed_pair(db, iq::kIq3sGrid[first], iq::kIq3sGrid[second], load_u8(in + 74 + 4 * ib + l), y);
      }
    }
  }
}

// Eight IQ1 elements: scale x (grid value + delta).
inline void put_shifted(float scale, const std::array<std::int8_t, 8>& values, float delta, float* y) noexcept {
  for (int j = 0; j < 8; ++j) y[j] = scale * (static_cast<float>(values[j]) + delta);
}

// IQ1_S (50 bytes a 256): float16 d, 32 low bytes of 11-bit grid indices, then per 32 elements a 16-bit
// word: four 3-bit index highs, a 3-bit scale s (d x (2s + 1)) and the sign of the delta.
void dequantize_iq1_s(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * 50;
    const float d = load_f16(in);
    for (int ib = 0; ib < 8; ++ib) {
      const unsigned qh = load_u16(in + 34 + 2 * ib);
      const float dl = d * static_cast<float>(2 * static_cast<int>((qh >> 12) & 7u) + 1);
      const float delta = qh & 0x8000u ? -kIq1Delta : kIq1Delta;
      for (int l = 0; l < 4; ++l, y += 8) {
        const unsigned index = load_u8(in + 2 + 4 * ib + l) | (((qh >> (3 * l)) & 7u) << 8);
        put_shifted(dl, iq::kIq1sGrid[index], delta, y);
      }
    }
  }
}

// IQ1_M (56 bytes a 256): 32 low bytes of 11-bit grid indices, 16 bytes of (3-bit index high, delta sign)
// nibbles, 4 16-bit scale words: 3-bit scales s (d x (2s + 1), one a 16 elements) in their low 12 bits,
// the float16 d in their top nibbles.
void dequantize_iq1_m(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * 56;
    unsigned sc[4];
    for (int i = 0; i < 4; ++i) sc[i] = load_u16(in + 48 + 2 * i);
    const auto d_bits = static_cast<std::uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0xf0u) | ((sc[2] >> 4) & 0xf00u) | (sc[3] & 0xf000u));
    const float d = f16_to_f32(d_bits);
    for (int ib = 0; ib < 8; ++ib) {
      const unsigned scales = sc[ib / 2] >> (6 * (ib % 2));
      const float dl[2] = {d * static_cast<float>(2 * static_cast<int>(scales & 7u) + 1),
                           d * static_cast<float>(2 * static_cast<int>((scales >> 3) & 7u) + 1)};
      for (int l = 0; l < 4; ++l, y += 8) {
        const unsigned nibble = load_u8(in + 32 + 2 * ib + l / 2) >> (4 * (l % 2));
        const unsigned index = load_u8(in + 4 * ib + l) | ((nibble & 7u) << 8);
        put_shifted(dl[l / 2], iq::kIq1sGrid[index], nibble & 8u ? -kIq1Delta : kIq1Delta, y);
      }
    }
  }
}

// ---- quantizing: what the grid searches share --------------------------------------------------------

inline int clamp_int(int v, int lo, int hi) noexcept { return v < lo ? lo : (v > hi ? hi : v); }
inline float max_of(float a, float b) noexcept { return a > b ? a : b; }  // ggml's MAX: NaN in b wins

// |x| into xval and the signs as bits, 8 elements a byte. With even_signs (IQ2, IQ3_XXS: a sign code has
// 7 bits), a group of 8 with an odd count of negatives flips the sign of its element of least w x^2.
void split_signs(const float* x, const float* weight, int groups, bool even_signs, float* xval, std::uint8_t* signs) noexcept {
  for (int k = 0; k < groups; ++k) {
    int flips = 0;
    std::uint8_t s = 0;
    for (int i = 0; i < 8; ++i) {
      if (x[8 * k + i] >= 0) {
        xval[8 * k + i] = x[8 * k + i];
      } else {
        xval[8 * k + i] = -x[8 * k + i];
        ++flips;
        s = static_cast<std::uint8_t>(s | (1u << i));
      }
    }
    if (even_signs && flips % 2) {
      int imin = 0;
      float min = weight[8 * k] * x[8 * k] * x[8 * k];
      for (int i = 1; i < 8; ++i) {
        const float ax = weight[8 * k + i] * x[8 * k + i] * x[8 * k + i];
        if (ax < min) {
          min = ax;
          imin = i;
        }
      }
      xval[8 * k + imin] = -xval[8 * k + imin];
      s = static_cast<std::uint8_t>(s ^ (1u << imin));
    }
    signs[k] = even_signs ? static_cast<std::uint8_t>(s & 127) : s;
  }
}

// The grid entry nearest to the group xval (weights w) at `scale`, among a key's neighbours
// (iq::nearest_neighbour); its level indices into L.
int best_neighbour(const iq::GridSearch& grid, unsigned key, const float* xval, const float* w, float scale, std::int8_t* L,
                   const float* levels = nullptr) noexcept {
  const int best = iq::nearest_neighbour(grid, key, xval, w, scale, levels);
  const std::int8_t* pg = grid.point(best);
  for (int i = 0; i < grid.width; ++i) L[i] = static_cast<std::int8_t>((pg[i] - 1) / 2);
  return best;
}

// Moves one group's level indices L onto the grid: its key's entry, or the best neighbour at `scale`.
// Returns whether the key itself was on the grid.
bool snap_group(const iq::GridSearch& grid, const float* xval, const float* w, float scale, std::int8_t* L) noexcept {
  unsigned key = 0;
  for (int i = 0; i < grid.width; ++i) key |= static_cast<unsigned>(L[i]) << (grid.bits * i);
  if (grid.index_of(key) >= 0) return true;
  best_neighbour(grid, key, xval, w, scale, L);
  return false;
}

// Rounds one group to level indices at inverse scale id (iq::round_levels), then onto the grid.
bool round_group(const iq::GridSearch& grid, const float* xval, const float* w, float id, float scale, int levels, std::int8_t* L) noexcept {
  iq::round_levels(grid.width, xval, id, levels, L);
  return snap_group(grid, xval, w, scale, L);
}

// The grid index of a group's level indices. ggml aborts when they are no grid entry (only NaN input
// gets there); entry 0 stands in then.
int grid_index(const iq::GridSearch& grid, const std::int8_t* L) noexcept {
  unsigned key = 0;
  for (int i = 0; i < grid.width; ++i) key |= static_cast<unsigned>(static_cast<std::uint8_t>(L[i])) << (grid.bits * i);
  const int index = grid.index_of(key & static_cast<unsigned>(grid.map.size() - 1));
  return index >= 0 ? index : 0;
}

// Least-squares sums of a group's levels (value 2l + 1) against xval: sum w x q and sum w q q.
void odd_level_sums(int n, const float* xval, const float* weight, const std::int8_t* L, float& sumqx, float& sumq2) noexcept {
  sumqx = 0;
  sumq2 = 0;
  for (int i = 0; i < n; ++i) {
    const float q = static_cast<float>(2 * L[i] + 1);
    sumqx += weight[i] * xval[i] * q;
    sumq2 += weight[i] * q * q;
  }
}

// ---- the scale search of IQ3_XXS, IQ3_S and IQ2_XS ------------------------------------------------------

// What differs between the types in the search of one group's scale.
struct SearchRules {
  int n;       // elements a group (32, or 16 for IQ2_XS)
  int levels;  // level indices 0 .. levels - 1
  int trials;  // inverse scales (2 levels - 1 + is x step) / max for is in [-trials, trials]
  float step;
  bool even_signs;    // 7-bit sign codes (IQ2, IQ3_XXS) or 8 sign bits (IQ3_S)
  float zero_below;   // a group whose max |x| is below this is all zero; 0: only a zero max is
  bool keep_on_grid;  // the final pass re-rounds only the sub-groups that were off the grid
  bool sigma_floor;   // without importance, weights are sigma2 / 4 + x^2 (IQ2_S), else x^2
};

// A group's outcome: its scale, and whether it was all zero (ggml then writes nothing for it).
struct GroupScale {
  float scale = 0;
  bool zero = false;
};

// One group: its scale, level indices L (rules.n of them, in grid.width sub-groups) and signs (n / 8
// bytes). The search tries 2 x trials + 1 scales, keeps the best least-squares one, then re-rounds the
// sub-groups that fell off the grid at the chosen scale.
GroupScale search_group(const SearchRules& rules, const iq::GridSearch& grid, const float* x, const float* importance, float sigma2, std::int8_t* L,
                        std::uint8_t* signs) noexcept {
  const int n = rules.n, width = grid.width, groups = n / width;
  float weight[32], root[32], xval[32];
  for (int i = 0; i < n; ++i)
    weight[i] = importance != nullptr ? importance[i] * std::sqrt(sigma2 + x[i] * x[i])
                : rules.sigma_floor   ? 0.25f * sigma2 + x[i] * x[i]
                                      : x[i] * x[i];
  for (int i = 0; i < n; ++i) root[i] = std::sqrt(weight[i]);
  split_signs(x, weight, n / 8, rules.even_signs, xval, signs);
  float max = xval[0];
  for (int i = 1; i < n; ++i) max = max_of(max, xval[i]);
  std::memset(L, 0, static_cast<std::size_t>(n));
  if (rules.zero_below > 0 ? max < rules.zero_below : max == 0) return {0, true};
  bool on_grid[8];
  for (int k = 0; k < groups; ++k) on_grid[k] = rules.keep_on_grid;
  float ids[32];
  const int count = 2 * rules.trials + 1;
  for (int t = 0; t < count; ++t) ids[t] = (static_cast<float>(2 * rules.levels - 1) + static_cast<float>(t - rules.trials) * rules.step) / max;
  iq::TrialBest trials{max / static_cast<float>(2 * rules.levels - 1), 0};
  iq::search_trials(grid, n, rules.levels, xval, weight, root, ids, count, trials, L, on_grid);
  float scale = trials.scale;
  int off_grid = 0;
  for (int k = 0; k < groups; ++k) off_grid += on_grid[k] ? 0 : 1;
  if (off_grid > 0 && scale > 0) {
    const float id = 1 / scale;
    for (int k = 0; k < groups; ++k) {
      if (rules.keep_on_grid && on_grid[k]) continue;
      round_group(grid, xval + width * k, root + width * k, id, scale, rules.levels, L + width * k);
    }
    float sumqx, sumq2;
    odd_level_sums(n, xval, weight, L, sumqx, sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  if (scale < 0) {  // never in practice; ggml flips the sign bytes then
    scale = -scale;
    for (int k = 0; k < n / 8; ++k) signs[k] = static_cast<std::uint8_t>(rules.even_signs ? ~signs[k] & 127 : ~signs[k]);
  }
  return {scale, false};
}

constexpr SearchRules kIq3xxsRules{32, 8, 15, 0.2f, true, 1e-8f, true, false};
constexpr SearchRules kIq3sRules{32, 8, 9, 0.2f, false, 0, false, false};
constexpr SearchRules kIq2xsRules{16, 3, 9, 0.1f, true, 1e-15f, true, false};
constexpr SearchRules kIq2sRules{16, 3, 9, 0.1f, false, 1e-8f, true, true};

// Searches every group of a 256-element block (rules.n elements each) and hands each group that is not
// all zero to write(ib, L, signs), in order; fills scales (0 for an all-zero group) and returns the
// largest scale, as ggml's MAX() finds it over the written groups.
template <typename Write>
float search_block(const SearchRules& rules, const iq::GridSearch& grid, const float* x, const float* importance, float sigma2, float* scales,
                   Write&& write) noexcept {
  float max_scale = 0;
  for (int ib = 0; ib < 256 / rules.n; ++ib) {
    std::int8_t L[32];
    std::uint8_t signs[4];
    const GroupScale group =
        search_group(rules, grid, x + rules.n * ib, importance != nullptr ? importance + rules.n * ib : nullptr, sigma2, L, signs);
    scales[ib] = group.scale;
    if (group.zero) continue;
    write(ib, L, signs);
    max_scale = max_of(max_scale, group.scale);
  }
  return max_scale;
}

// A group scale as a 4-bit multiple of the block's d: scale ~ d x (2l + 1).
inline unsigned scale_code(float id, float scale) noexcept { return static_cast<unsigned>(clamp_int(nearest_int(0.5f * (id * scale - 1)), 0, 15)); }

// The block's row mean square, doubled (IQ3's sigma2).
float doubled_mean_square(const float* x) noexcept {
  float sumx2 = 0;
  for (int i = 0; i < 256; ++i) sumx2 += x[i] * x[i];
  return 2 * sumx2 / 256;
}

// IQ3_XXS: 64 grid indices, 8 words of 4 sign codes and a 4-bit scale; d = max scale / 31 x 1.0125.
void quantize_iq3_xxs_block(const float* x, const float* importance, std::byte* out) noexcept {
  const iq::GridSearch& grid = iq::grid_search(TensorType::IQ3_XXS);
  std::uint8_t qs[64] = {};
  std::uint32_t words[8] = {};
  float scales[8];
  const float max_scale = search_block(kIq3xxsRules, grid, x, importance, doubled_mean_square(x), scales,
                                       [&](int ib, const std::int8_t* L, const std::uint8_t* signs) {  // an all-zero group's stay 0
                                         for (int k = 0; k < 8; ++k) qs[8 * ib + k] = static_cast<std::uint8_t>(grid_index(grid, L + 4 * k));
                                         words[ib] = signs[0] | (signs[1] << 7) | (signs[2] << 14) | (static_cast<std::uint32_t>(signs[3]) << 21);
                                       });
  std::memset(out, 0, 98);
  if (max_scale == 0) return;
  const float d = max_scale / 31;
  store_f16(out, d * 1.0125f);
  const float id = 1 / d;
  for (int ib = 0; ib < 8; ++ib) words[ib] |= scale_code(id, scales[ib]) << 28;
  std::memcpy(out + 2, qs, 64);
  for (int ib = 0; ib < 8; ++ib) le::store(out + 66 + 4 * ib, words[ib], 4);
}

// IQ3_S: 64 low bytes of 9-bit grid indices, their high bits, 32 sign bytes, 4-bit scales in pairs;
// d = max scale / 31 x 1.033. An all-zero group writes nothing and, as in ggml, the next group's indices
// and signs take its place (ggml advances its cursors only past written groups).
void quantize_iq3_s_block(const float* x, const float* importance, std::byte* out) noexcept {
  const iq::GridSearch& grid = iq::grid_search(TensorType::IQ3_S);
  std::memset(out, 0, 110);
  std::byte* qs = out + 2;
  std::byte* qh = out + 66;
  std::byte* sign_bytes = out + 74;
  float scales[8];
  const float max_scale =
      search_block(kIq3sRules, grid, x, importance, doubled_mean_square(x), scales, [&](int ib, const std::int8_t* L, const std::uint8_t* signs) {
        for (int k = 0; k < 8; ++k) {
          const int index = grid_index(grid, L + 4 * k);
          qs[k] = std::byte(static_cast<std::uint8_t>(index & 255));
          qh[ib] |= std::byte(static_cast<std::uint8_t>((index >> 8) << k));
        }
        qs += 8;
        for (int k = 0; k < 4; ++k) sign_bytes[k] = std::byte(signs[k]);
        sign_bytes += 4;
      });
  if (max_scale == 0) return;
  const float d = max_scale / 31;
  store_f16(out, d * 1.033f);
  const float id = 1 / d;
  for (int ib = 0; ib < 8; ib += 2)
    out[106 + ib / 2] = std::byte(static_cast<std::uint8_t>(scale_code(id, scales[ib]) | (scale_code(id, scales[ib + 1]) << 4)));
}

// The block's mean square (IQ2_XXS, IQ2_XS sigma2).
float mean_square(const float* x) noexcept {
  float sumx2 = 0;
  for (int i = 0; i < 256; ++i) sumx2 += x[i] * x[i];
  return sumx2 / 256;
}

// Sixteen 4-bit scale codes, two a byte, low nibble first (IQ2_XS, IQ2_S).
void store_scale_nibbles(float id, const float* scales, std::byte* out) noexcept {
  for (int ib = 0; ib < 16; ib += 2)
    out[ib / 2] = std::byte(static_cast<std::uint8_t>(scale_code(id, scales[ib]) | (scale_code(id, scales[ib + 1]) << 4)));
}

// IQ2_XS (importance only): 32 words of a 9-bit grid index and a 7-bit sign code, a 4-bit scale a 16
// elements; d = max scale / 31.
void quantize_iq2_xs_block(const float* x, const float* importance, std::byte* out) noexcept {
  const iq::GridSearch& grid = iq::grid_search(TensorType::IQ2_XS);
  std::uint16_t q2[32] = {};
  float scales[16];
  const float max_scale =
      search_block(kIq2xsRules, grid, x, importance, mean_square(x), scales, [&](int ib, const std::int8_t* L, const std::uint8_t* signs) {
        for (int k = 0; k < 2; ++k) q2[2 * ib + k] = static_cast<std::uint16_t>(grid_index(grid, L + 8 * k) | (signs[k] << 9));
      });
  std::memset(out, 0, 74);
  if (max_scale == 0) return;
  const float d = max_scale / 31;
  store_f16(out, d);
  for (int i = 0; i < 32; ++i) store_u16(out + 2 + 2 * i, q2[i]);
  store_scale_nibbles(1 / d, scales, out + 66);
}

// IQ2_S: 32 low bytes of 10-bit grid indices, 32 sign bytes, the indices' high bits, a 4-bit scale a 16
// elements; d = max scale / 31 x 0.9875.
void quantize_iq2_s_block(const float* x, const float* importance, std::byte* out) noexcept {
  const iq::GridSearch& grid = iq::grid_search(TensorType::IQ2_S);
  std::memset(out, 0, 82);
  float scales[16];
  const float max_scale =
      search_block(kIq2sRules, grid, x, importance, doubled_mean_square(x), scales, [&](int ib, const std::int8_t* L, const std::uint8_t* signs) {
        for (int k = 0; k < 2; ++k) {
          const int i8 = 2 * ib + k;
          const int index = grid_index(grid, L + 8 * k);
          out[2 + i8] = std::byte(static_cast<std::uint8_t>(index & 255));
          out[66 + i8 / 4] |= std::byte(static_cast<std::uint8_t>((index >> 8) << (2 * (i8 % 4))));
          out[34 + i8] = std::byte(signs[k]);
        }
      });
  if (max_scale == 0) return;
  const float d = max_scale / 31;
  store_f16(out, d * 0.9875f);
  store_scale_nibbles(1 / d, scales, out + 74);
}

// One 32-element IQ2_XXS group (importance only): a scale from search_scale_positive() (ggml's make_qp_quants) on 4 levels, 13 trial
// scales around its effective max, then the grid rounding at the best one.
GroupScale iq2_xxs_group(const iq::GridSearch& grid, const float* x, const float* importance, float sigma2, std::int8_t* L,
                         std::uint8_t* signs) noexcept {
  constexpr int kLevels = 3;
  float weight[32], root[32], xval[32];
  for (int i = 0; i < 32; ++i) weight[i] = importance[i] * std::sqrt(sigma2 + x[i] * x[i]);
  for (int i = 0; i < 32; ++i) root[i] = std::sqrt(weight[i]);
  split_signs(x, weight, 4, true, xval, signs);
  float max = xval[0];
  for (int i = 1; i < 32; ++i) max = max_of(max, xval[i]);
  std::memset(L, 0, 32);
  if (max < 1e-15f) return {0, true};
  std::uint8_t levels[32];
  float scale = search_scale_positive(32, kLevels + 1, xval, levels, weight);
  const float eff_max = scale * kLevels;
  if (eff_max <= 0) return {0, true};
  float ids[13];
  for (int is = -6; is <= 6; ++is) ids[is + 6] = (2 * kLevels - 1 + static_cast<float>(is) * 0.1f) / eff_max;
  iq::TrialBest trials{scale, 0};
  bool on_grid[4];  // not used: the final pass re-rounds every sub-group
  iq::search_trials(grid, 32, kLevels, xval, weight, root, ids, 13, trials, L, on_grid);
  scale = trials.scale;
  if (scale > 0) {
    const float id = 1 / scale;
    for (int k = 0; k < 4; ++k) round_group(grid, xval + 8 * k, root + 8 * k, id, scale, kLevels, L + 8 * k);
    float sumqx, sumq2;
    odd_level_sums(32, xval, weight, L, sumqx, sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  if (scale < 0) {
    scale = -scale;
    for (int k = 0; k < 4; ++k) signs[k] = static_cast<std::uint8_t>(~signs[k] & 127);
  }
  return {scale, false};
}

// IQ2_XXS (importance only): per 32 elements four 8-bit grid indices and a word of four sign codes and a
// 4-bit scale; d = max scale / 31.
void quantize_iq2_xxs_block(const float* x, const float* importance, std::byte* out) noexcept {
  const iq::GridSearch& grid = iq::grid_search(TensorType::IQ2_XXS);
  std::uint32_t q2[16] = {};
  float scales[8];
  float max_scale = 0;
  const float sigma2 = mean_square(x);
  for (int ib = 0; ib < 8; ++ib) {
    std::int8_t L[32];
    std::uint8_t signs[4];
    const GroupScale group = iq2_xxs_group(grid, x + 32 * ib, importance + 32 * ib, sigma2, L, signs);
    scales[ib] = group.scale;
    if (group.zero) continue;
    for (int k = 0; k < 4; ++k) {
      q2[2 * ib] |= static_cast<std::uint32_t>(grid_index(grid, L + 8 * k)) << (8 * k);
      q2[2 * ib + 1] |= static_cast<std::uint32_t>(signs[k]) << (7 * k);
    }
    max_scale = max_of(max_scale, scales[ib]);
  }
  std::memset(out, 0, 66);
  if (max_scale == 0) return;
  const float d = max_scale / 31;
  store_f16(out, d);
  const float id = 1 / d;
  for (int ib = 0; ib < 8; ++ib) q2[2 * ib + 1] |= scale_code(id, scales[ib]) << 28;
  for (int i = 0; i < 16; ++i) le::store(out + 2 + 4 * i, q2[i], 4);
}

// ---- IQ1_S -----------------------------------------------------------------------------------------

// A value and its position, sorted by value as ggml sorts them: with the C library's qsort, which in
// glibc is a top-down merge sort (halves of n / 2 and n - n / 2, ties taken from the left half), so
// equal values keep their order. Written out here so that every platform orders ties (and NaN, which
// compares equal to everything) as ggml does on glibc.
struct Ranked {
  float value;
  int index;
};

void merge_sort(Ranked* a, int n, Ranked* tmp) noexcept {
  if (n <= 1) return;
  const int n1 = n / 2, n2 = n - n1;
  merge_sort(a, n1, tmp);
  merge_sort(a + n1, n2, tmp);
  int i = 0, j = n1, out = 0;
  while (i < n1 && j < n) tmp[out++] = !(a[i].value > a[j].value) ? a[i++] : a[j++];
  while (i < n1) tmp[out++] = a[i++];
  std::memcpy(a, tmp, sizeof(Ranked) * static_cast<std::size_t>(out));
}

// n values (at most 32) and their positions in merge_sort()'s order. Without NaN that order is the
// stable one (the merge takes ties from the left), which ordering (value, position) pairs gives: keys
// that order the floats as they compare (-0 as +0), then the position.
// With a NaN, merge_sort() itself.
void sort_like_qsort(const float* x, int n, Ranked* sorted) noexcept {
  bool nan = false;
  for (int i = 0; i < n; ++i) nan = nan || std::isnan(x[i]);
  if (nan) {
    Ranked tmp[32];
    for (int j = 0; j < n; ++j) sorted[j] = {x[j], j};
    merge_sort(sorted, n, tmp);
    return;
  }
  // Each value's rank among the (key, position) pairs, counted without branches (the compiler runs the
  // count in vectors), then each value put at its rank.
  std::int32_t keys[32];
  for (int i = 0; i < n; ++i) {
    const auto bits = std::bit_cast<std::uint32_t>(x[i] == 0 ? 0.0f : x[i]);
    const std::uint32_t order = bits & 0x80000000u ? ~bits : bits | 0x80000000u;
    keys[i] = static_cast<std::int32_t>(order ^ 0x80000000u);  // ordered as signed integers
  }
  for (int i = 0; i < n; ++i) {
    int rank = 0;
    for (int j = 0; j < n; ++j) rank += static_cast<int>(keys[j] < keys[i]) + static_cast<int>(keys[j] == keys[i] && j < i);
    sorted[rank] = {x[i], i};
  }
}

// The grid entries of `groups` sub-groups of 8 level indices L (sub-group k's levels shifted as
// levels[k]): a key's own entry, or its best neighbour at `scale`. When any was off the grid, the scale is
// refitted to the chosen entries (kept if the fit is not positive). Returns the scale.
float fit_iq1_entries(const iq::GridSearch& grid, int groups, const float* const* levels, const float* x, const float* weight, float scale,
                      std::int8_t* L, int* index) noexcept {
  bool all_on_grid = true;
  for (int k = 0; k < groups; ++k) {
    unsigned key = 0;
    for (int j = 0; j < 8; ++j) key |= static_cast<unsigned>(L[8 * k + j]) << (2 * j);
    index[k] = grid.index_of(key);
    if (index[k] < 0) {
      all_on_grid = false;
      index[k] = best_neighbour(grid, key, x + 8 * k, weight + 8 * k, scale, L + 8 * k, levels[k]);
    }
  }
  if (all_on_grid) return scale;
  float sumqx = 0, sumq2 = 0;
  for (int k = 0; k < groups; ++k) {
    const std::int8_t* pg = grid.point(index[k]);
    for (int j = 0; j < 8; ++j) {
      const float q = levels[k][(pg[j] - 1) / 2];
      sumqx += weight[8 * k + j] * q * x[8 * k + j];
      sumq2 += weight[8 * k + j] * q * q;
    }
  }
  return sumqx > 0 && sumq2 > 0 ? sumqx / sumq2 : scale;
}

struct Iq1Group {
  float scale = 0;
  int shift = 1;  // +1: levels + delta, -1: levels - delta
  bool zero = true;
  int index[4] = {};
};

// One 32-element IQ1_S group, what its split search needs: its weights, its values sorted and the prefix
// sums of w x and w over them; false when the group is all zero (its max below 1e-12).
struct Iq1sSorted {
  float weight[32];
  Ranked sorted[32];
  float max = 0;
};
bool iq1_s_prepare(const float* x, const float* importance, float sigma2, Iq1sSorted& s, float* sumx, float* sumw) noexcept {
  for (int i = 0; i < 32; ++i) s.weight[i] = importance[i] * std::sqrt(sigma2 + x[i] * x[i]);
  std::fill(sumx, sumx + 33, 0.0f);
  std::fill(sumw, sumw + 33, 0.0f);
  s.max = std::fabs(x[0]);
  for (int i = 1; i < 32; ++i) s.max = max_of(s.max, std::fabs(x[i]));
  if (s.max < 1e-12f) return false;  // the split search runs on zeros and is not used
  sort_like_qsort(x, 32, s.sorted);
  for (int j = 0; j < 32; ++j) {
    const int i = s.sorted[j].index;
    sumx[j + 1] = sumx[j] + s.weight[i] * x[i];
    sumw[j + 1] = sumw[j] + s.weight[i];
  }
  return true;
}

// The rest of one IQ1_S group after its split (iq::best_split_32_groups()): the levels, the sign of the
// scale, then the grid entries of the 4 sub-groups (a neighbour where the split is off the grid).
Iq1Group iq1_s_finish(const iq::GridSearch& grid, const float* x, const Iq1sSorted& s, const iq::Split& split) noexcept {
  Iq1Group g;
  const int best1 = split.i1, best2 = split.i2;
  int best_shift = split.shift;
  float scale = split.scale;
  if (best1 < 0 || best2 < 0 || best_shift == 0) return g;
  std::int8_t L[32];
  for (int j = 0; j < 32; ++j) L[s.sorted[j].index] = static_cast<std::int8_t>(j < best1 ? 0 : j < best2 ? 1 : 2);
  if (scale < 0) {
    for (std::int8_t& l : L) l = static_cast<std::int8_t>(2 - l);
    scale = -scale;
    best_shift = -best_shift;
  }
  const float* xx = best_shift == 1 ? kIq1Plus : kIq1Minus;
  const float* levels[4] = {xx, xx, xx, xx};
  scale = fit_iq1_entries(grid, 4, levels, x, s.weight, scale, L, g.index);
  g.scale = scale;
  g.shift = best_shift;
  g.zero = false;
  return g;
}

// One IQ1_S block from its groups (per 32 elements four 11-bit grid indices, a 3-bit scale and the
// shift's sign; d = max scale / 15 x 1.125).
void write_iq1_s_block(const Iq1Group* groups, std::byte* out) noexcept {
  std::memset(out, 0, 50);
  std::uint16_t qh[8] = {};
  float max_scale = 0;
  for (int ib = 0; ib < 8; ++ib) {
    const Iq1Group& g = groups[ib];
    if (g.zero) continue;
    for (int k = 0; k < 4; ++k) {
      out[2 + 4 * ib + k] = std::byte(static_cast<std::uint8_t>(g.index[k] & 255));
      qh[ib] = static_cast<std::uint16_t>(qh[ib] | ((g.index[k] >> 8) << (3 * k)));
    }
    max_scale = max_of(max_scale, g.scale);
  }
  if (max_scale != 0) {
    const float d = max_scale / 15;
    store_f16(out, d * 1.125f);
    const float id = 1 / d;
    for (int ib = 0; ib < 8; ++ib) {
      unsigned l = static_cast<unsigned>(clamp_int(nearest_int(0.5f * (id * groups[ib].scale - 1)), 0, 7));
      if (groups[ib].shift == -1) l |= 8;
      qh[ib] = static_cast<std::uint16_t>(qh[ib] | (l << 12));
    }
  }
  for (int ib = 0; ib < 8; ++ib) store_u16(out + 34 + 2 * ib, qh[ib]);
}

// IQ1_S (importance only), a row: two blocks at a time, their 16 groups' split searches together (one
// group a lane: two independent vectors of them with AVX2), between what comes before and after.
void quantize_iq1_s_row(const float* src, std::byte* dst, std::size_t row_length, const float* importance) {
  const iq::GridSearch& grid = iq::grid_search(TensorType::IQ1_S);
  const std::size_t blocks = row_length / 256;
  for (std::size_t b = 0; b < blocks; b += 2) {
    const int count = b + 1 < blocks ? 2 : 1;
    const float* x = src + 256 * b;
    Iq1sSorted sorted[16];
    float sumx[16][33], sumw[16][33], maxes[16];
    bool nonzero[16];
    for (int k = 0; k < count; ++k) {
      const float sigma2 = doubled_mean_square(x + 256 * k);
      for (int ib = 0; ib < 8; ++ib) {
        const int g = 8 * k + ib;
        nonzero[g] = iq1_s_prepare(x + 32 * g, importance + 256 * b + 32 * g, sigma2, sorted[g], sumx[g], sumw[g]);
        maxes[g] = sorted[g].max;
      }
    }
    iq::Split splits[16];
    iq::best_split_32_groups(8 * count, sumx, sumw, maxes, splits);  // iq1_split_lanes.cpp
    for (int k = 0; k < count; ++k) {
      Iq1Group groups[8];
      for (int ib = 0; ib < 8; ++ib) {
        const int g = 8 * k + ib;
        if (nonzero[g]) groups[ib] = iq1_s_finish(grid, x + 32 * g, sorted[g], splits[g]);
      }
      write_iq1_s_block(groups, dst + 50 * (b + static_cast<std::size_t>(k)));
    }
  }
}

// ---- IQ1_M -----------------------------------------------------------------------------------------

// The shifted levels of IQ1_M's sub-group k (0: elements 0-7, 1: 8-15) under shift code `shift` (bit 1:
// first half minus, bit 0: second half minus).
inline const float* iq1_m_levels(int shift, int k) noexcept {
  const bool minus = k == 0 ? shift >= 2 : shift % 2 == 1;
  return minus ? kIq1Minus : kIq1Plus;
}

struct Iq1mGroup {
  float scale = 0;
  int shift = 0;
  bool zero = true;
  int index[2] = {};
};

// One 16-element IQ1_M group, what its split search needs: its values sorted and the per-half prefix
// sums of w x and w over them; false when the group is all zero (its max below 1e-7).
struct Iq1mSorted {
  Ranked sorted[16];
  float max = 0;
};
bool iq1_m_prepare(const float* x, const float* weight, Iq1mSorted& s, float (*px)[17], float (*pw)[17]) noexcept {
  px[0][0] = px[1][0] = 0;
  pw[0][0] = pw[1][0] = 0;
  s.max = std::fabs(x[0]);
  for (int i = 1; i < 16; ++i) s.max = max_of(s.max, std::fabs(x[i]));
  if (s.max < 1e-7f) {  // the split search runs on zeros and is not used
    for (int h = 0; h < 2; ++h) {
      std::fill(px[h] + 1, px[h] + 17, 0.0f);
      std::fill(pw[h] + 1, pw[h] + 17, 0.0f);
    }
    return false;
  }
  sort_like_qsort(x, 16, s.sorted);
  for (int j = 0; j < 16; ++j) {
    const int i = s.sorted[j].index;
    const int h = i < 8 ? 0 : 1;
    px[h][j + 1] = px[h][j] + weight[i] * x[i];
    px[1 - h][j + 1] = px[1 - h][j];
    pw[h][j + 1] = pw[h][j] + weight[i];
    pw[1 - h][j + 1] = pw[1 - h][j];
  }
  return true;
}

// The rest of one IQ1_M group after its split (iq::best_split_16_groups()): the levels, the sign of the
// scale, then the two sub-groups' entries.
Iq1mGroup iq1_m_finish(const iq::GridSearch& grid, const float* x, const float* weight, const Iq1mSorted& s, const iq::Split& split) noexcept {
  Iq1mGroup g;
  const int best1 = split.i1, best2 = split.i2;
  int best_k = split.shift;
  float scale = split.scale;
  if (best1 < 0 || best2 < 0 || best_k < 0) return g;
  std::int8_t L[16];
  for (int j = 0; j < 16; ++j) L[s.sorted[j].index] = static_cast<std::int8_t>(j < best1 ? 0 : j < best2 ? 1 : 2);
  if (scale < 0) {
    for (std::int8_t& l : L) l = static_cast<std::int8_t>(2 - l);
    scale = -scale;
    best_k = 3 - best_k;
  }
  const float* levels[2] = {iq1_m_levels(best_k, 0), iq1_m_levels(best_k, 1)};
  scale = fit_iq1_entries(grid, 2, levels, x, weight, scale, L, g.index);
  g.scale = scale;
  g.shift = best_k;
  g.zero = false;
  return g;
}

// Importance x sqrt(sigma2 + x^2) for 16 elements.
void iq1_m_weights(const float* x, const float* importance, float sigma2, float* weight) noexcept {
  for (int i = 0; i < 16; ++i) weight[i] = importance[i] * std::sqrt(sigma2 + x[i] * x[i]);
}

// IQ1_M (importance only): per 16 elements two 11-bit grid indices with their shift bits and a 3-bit
// scale; the float16 d, refitted to the rounded scales and times 1.1125, spread over the scale words'
// top nibbles.
void quantize_iq1_m_block(const float* x, const float* importance, std::byte* out) noexcept {
  static constexpr std::uint8_t kShiftMasks[4] = {0x00, 0x80, 0x08, 0x88};
  const iq::GridSearch& grid = iq::grid_search(TensorType::IQ1_M);
  std::memset(out, 0, 56);
  std::uint8_t qs[32] = {}, qh[16] = {};
  float scales[16];
  int shifts[16];
  float max_scale = 0;
  const float sigma2 = doubled_mean_square(x);
  // The 16 groups' split searches run together (one group a lane), between what comes before and after.
  float weights[256], px[16][2][17], pw[16][2][17], maxes[16];
  Iq1mSorted sorted[16];
  bool nonzero[16];
  for (int ib = 0; ib < 16; ++ib) {
    iq1_m_weights(x + 16 * ib, importance + 16 * ib, sigma2, weights + 16 * ib);
    nonzero[ib] = iq1_m_prepare(x + 16 * ib, weights + 16 * ib, sorted[ib], px[ib], pw[ib]);
    maxes[ib] = sorted[ib].max;
  }
  iq::Split splits[16];
  iq::best_split_16_groups(px, pw, maxes, splits);  // iq1_split_lanes.cpp
  for (int ib = 0; ib < 16; ++ib) {
    const Iq1mGroup g = nonzero[ib] ? iq1_m_finish(grid, x + 16 * ib, weights + 16 * ib, sorted[ib], splits[ib]) : Iq1mGroup{};
    scales[ib] = g.scale;
    shifts[ib] = g.shift;
    if (g.zero) continue;
    qs[2 * ib] = static_cast<std::uint8_t>(g.index[0] & 255);
    qs[2 * ib + 1] = static_cast<std::uint8_t>(g.index[1] & 255);
    qh[ib] = static_cast<std::uint8_t>((g.index[0] >> 8) | ((g.index[1] >> 8) << 4));
    max_scale = max_of(max_scale, scales[ib]);
  }
  std::uint16_t sc[4] = {};
  if (max_scale != 0) {
    float d = max_scale / 15;
    const float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int ib = 0; ib < 16; ++ib) {
      const int l = clamp_int(nearest_int(0.5f * (id * scales[ib] - 1)), 0, 7);
      sc[ib / 4] = static_cast<std::uint16_t>(sc[ib / 4] | (l << (3 * (ib % 4))));
      qh[ib] = static_cast<std::uint8_t>(qh[ib] | kShiftMasks[shifts[ib]]);
      const float* weight = weights + 16 * ib;
      for (int k = 0; k < 2; ++k) {
        const float* xx = iq1_m_levels(shifts[ib], k);
        const std::int8_t* pg = grid.point(qs[2 * ib + k] + ((qh[ib] << (8 - 4 * k)) & 0x700));
        for (int j = 0; j < 8; ++j) {
          const float q = xx[(pg[j] - 1) / 2] * static_cast<float>(2 * l + 1);
          sumqx += weight[8 * k + j] * q * x[16 * ib + 8 * k + j];
          sumq2 += weight[8 * k + j] * q * q;
        }
      }
    }
    if (sumq2 > 0) d = sumqx / sumq2;
    const std::uint16_t bits = f32_to_f16(d * 1.1125f);
    sc[0] = static_cast<std::uint16_t>(sc[0] | ((bits & 0x000f) << 12));
    sc[1] = static_cast<std::uint16_t>(sc[1] | ((bits & 0x00f0) << 8));
    sc[2] = static_cast<std::uint16_t>(sc[2] | ((bits & 0x0f00) << 4));
    sc[3] = static_cast<std::uint16_t>(sc[3] | (bits & 0xf000));
  }
  std::memcpy(out, qs, 32);
  std::memcpy(out + 32, qh, 16);
  for (int i = 0; i < 4; ++i) store_u16(out + 48 + 2 * i, sc[i]);
}

// Rows of whole 256-element blocks, with or without importance (one weight per column of the row).
template <void (*Block)(const float*, const float*, std::byte*), std::size_t BlockBytes>
void quantize_blocks(const float* src, std::byte* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) Block(src + 256 * b, nullptr, dst + BlockBytes * b);
}
template <void (*Block)(const float*, const float*, std::byte*), std::size_t BlockBytes>
void quantize_blocks_weighted(const float* src, std::byte* dst, std::size_t row_length, const float* importance) {
  for (std::size_t b = 0; b < row_length / 256; ++b) Block(src + 256 * b, importance + 256 * b, dst + BlockBytes * b);
}

}  // namespace

Codec iq_grid_codec(TensorType type) noexcept {
  switch (type) {
    case TensorType::IQ2_XXS: return {nullptr, dequantize_iq2_xxs, quantize_blocks_weighted<quantize_iq2_xxs_block, 66>};
    case TensorType::IQ2_XS: return {nullptr, dequantize_iq2_xs, quantize_blocks_weighted<quantize_iq2_xs_block, 74>};
    case TensorType::IQ2_S: return {quantize_blocks<quantize_iq2_s_block, 82>, dequantize_iq2_s, quantize_blocks_weighted<quantize_iq2_s_block, 82>};
    case TensorType::IQ3_XXS:
      return {quantize_blocks<quantize_iq3_xxs_block, 98>, dequantize_iq3_xxs, quantize_blocks_weighted<quantize_iq3_xxs_block, 98>};
    case TensorType::IQ3_S:
      return {quantize_blocks<quantize_iq3_s_block, 110>, dequantize_iq3_s, quantize_blocks_weighted<quantize_iq3_s_block, 110>};
    case TensorType::IQ1_S: return {nullptr, dequantize_iq1_s, quantize_iq1_s_row};
    case TensorType::IQ1_M: return {nullptr, dequantize_iq1_m, quantize_blocks_weighted<quantize_iq1_m_block, 56>};
    default: return {};
  }
}

}  // namespace safeweights::quant
