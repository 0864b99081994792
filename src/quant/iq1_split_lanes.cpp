// best_split_32_groups() and best_split_16_groups() (iq1_split.h): one group a lane (IQ1_S: two blocks'
// 16 groups, IQ1_M: a block's 16), every candidate (i1, i2, shift) in ggml's order tested by each lane
// against its own best in ggml's operations and order (no contraction) and taken by a select, so that
// no branch waits on the comparison (a group replaces its best about 30 times); the vectors of groups
// are independent chains, which the CPU overlaps. The judge (tests/quant/ggml_differential.sh) checks
// each way this file is built (lanes.h). IQ1 spends most of its time here: 1,122 candidates a group of
// 32 (IQ1_S), 612 a group of 16 (IQ1_M).
#include <cfloat>
#include <cstring>

#include "quant/iq1_split.h"
#include "quant/lanes.h"

namespace safeweights::quant::iq {
namespace {

using lanes::Vec;

// The best so far and ggml's test of a candidate against it.
struct Best {
  float score = -FLT_MAX;
  Split split;

  void consider(float sumqx, float sumq2, int i1, int i2, int shift) noexcept {
    if (sumq2 > 0 && sumqx * sumqx > score * sumq2) {
      split.scale = sumqx / sumq2;
      score = split.scale * sumqx;
      split.i1 = i1;
      split.i2 = i2;
      split.shift = shift;
    }
  }
};

// ggml's sums for IQ1_S's candidate (i1, i2) at the shifted levels v.
void sums_32(const float* sumx, const float* sumw, int i1, int i2, const float* v, float& sumqx, float& sumq2) noexcept {
  sumqx = (sumx[i1] - sumx[0]) * v[0] + (sumx[i2] - sumx[i1]) * v[1] + (sumx[32] - sumx[i2]) * v[2];
  sumq2 = (sumw[i1] - sumw[0]) * v[0] * v[0] + (sumw[i2] - sumw[i1]) * v[1] * v[1] + (sumw[32] - sumw[i2]) * v[2] * v[2];
}

// The constants of IQ1_M's sums: the top level for each shift, and the steps of the squared levels.
struct HalfLevels {
  float p2 = kIq1Plus[2], m2 = kIq1Minus[2];
  float cp1 = kIq1Plus[0] * kIq1Plus[0] - kIq1Plus[1] * kIq1Plus[1];
  float cp2 = kIq1Plus[1] * kIq1Plus[1] - kIq1Plus[2] * kIq1Plus[2];
  float cm1 = kIq1Minus[0] * kIq1Minus[0] - kIq1Minus[1] * kIq1Minus[1];
  float cm2 = kIq1Minus[1] * kIq1Minus[1] - kIq1Minus[2] * kIq1Minus[2];
};

// ggml's sums for IQ1_M's candidate (i1, i2), its four shift choices: half h's share, then the sums of
// the halves' shares in the order of the choices (plus-plus, plus-minus, minus-plus, minus-minus).
void sums_16(const float (*px)[17], const float (*pw)[17], int i1, int i2, float* sumqx, float* sumq2) noexcept {
  const HalfLevels c;
  float qx_p[2], qx_m[2], q2_p[2], q2_m[2];
  for (int h = 0; h < 2; ++h) {
    const float sx = px[h][i1] + px[h][i2];
    qx_p[h] = px[h][16] * c.p2 - sx;
    qx_m[h] = px[h][16] * c.m2 - sx;
    q2_p[h] = pw[h][16] * c.p2 * c.p2 + pw[h][i1] * c.cp1 + pw[h][i2] * c.cp2;
    q2_m[h] = pw[h][16] * c.m2 * c.m2 + pw[h][i1] * c.cm1 + pw[h][i2] * c.cm2;
  }
  const float qx[4] = {qx_p[0] + qx_p[1], qx_p[0] + qx_m[1], qx_m[0] + qx_p[1], qx_m[0] + qx_m[1]};
  const float q2[4] = {q2_p[0] + q2_p[1], q2_p[0] + q2_m[1], q2_m[0] + q2_p[1], q2_m[0] + q2_m[1]};
  std::memcpy(sumqx, qx, sizeof qx);
  std::memcpy(sumq2, q2, sizeof q2);
}

[[maybe_unused]] Split split_32_plain(const float* sumx, const float* sumw, float scale) noexcept {
  Best best;
  best.split.scale = scale;
  for (int i1 = 0; i1 <= 32; ++i1)
    for (int i2 = i1; i2 <= 32; ++i2)
      for (int shift : {1, -1}) {
        float sumqx, sumq2;
        sums_32(sumx, sumw, i1, i2, shift == 1 ? kIq1Plus : kIq1Minus, sumqx, sumq2);
        best.consider(sumqx, sumq2, i1, i2, shift);
      }
  return best.split;
}

[[maybe_unused]] Split split_16_plain(const float (*px)[17], const float (*pw)[17], float scale) noexcept {
  Best best;
  best.split.scale = scale;
  for (int i1 = 0; i1 <= 16; ++i1)
    for (int i2 = i1; i2 <= 16; ++i2) {
      float sumqx[4], sumq2[4];
      sums_16(px, pw, i1, i2, sumqx, sumq2);
      for (int k = 0; k < 4; ++k) best.consider(sumqx[k], sumq2[k], i1, i2, k);
    }
  return best.split;
}

// best_split_16_groups() with Lanes groups a vector, 16 / Lanes vectors side by side (their tests are
// independent chains, which the CPU overlaps). Each lane does split_16_plain()'s operations in its order.
template <int Lanes>
[[gnu::always_inline]] inline void split_16_groups_lanes(const float (*px)[2][17], const float (*pw)[2][17], const float* scale,
                                                         Split* out) noexcept {
  using F = typename Vec<Lanes>::F;
  using I = typename Vec<Lanes>::I;
  constexpr int V = 16 / Lanes;
  F gx[V][2][17], gw[V][2][17];  // the prefix sums, group g in lane g % Lanes of vector g / Lanes
  for (int g = 0; g < 16; ++g)
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i <= 16; ++i) {
        gx[g / Lanes][h][i][g % Lanes] = px[g][h][i];
        gw[g / Lanes][h][i][g % Lanes] = pw[g][h][i];
      }
  const HalfLevels c;
  F best_score[V], best_scale[V];
  I best_code[V];  // i1 << 8 | i2 << 2 | shift, or -1
  for (int v = 0; v < V; ++v) {
    best_score[v] = F{} - FLT_MAX;
    for (int k = 0; k < Lanes; ++k) best_scale[v][k] = scale[v * Lanes + k];
    best_code[v] = I{} - 1;
  }
  for (int i1 = 0; i1 <= 16; ++i1) {
    F head_p[V][2], head_m[V][2];
    for (int v = 0; v < V; ++v)
      for (int h = 0; h < 2; ++h) {
        head_p[v][h] = gw[v][h][16] * c.p2 * c.p2 + gw[v][h][i1] * c.cp1;
        head_m[v][h] = gw[v][h][16] * c.m2 * c.m2 + gw[v][h][i1] * c.cm1;
      }
    for (int i2 = i1; i2 <= 16; ++i2)
      for (int v = 0; v < V; ++v) {
        F qx_p[2], qx_m[2], q2_p[2], q2_m[2];
        for (int h = 0; h < 2; ++h) {
          const F sx = gx[v][h][i1] + gx[v][h][i2];
          qx_p[h] = gx[v][h][16] * c.p2 - sx;
          qx_m[h] = gx[v][h][16] * c.m2 - sx;
          q2_p[h] = head_p[v][h] + gw[v][h][i2] * c.cp2;
          q2_m[h] = head_m[v][h] + gw[v][h][i2] * c.cm2;
        }
        const F qx[4] = {qx_p[0] + qx_p[1], qx_p[0] + qx_m[1], qx_m[0] + qx_p[1], qx_m[0] + qx_m[1]};
        const F q2[4] = {q2_p[0] + q2_p[1], q2_p[0] + q2_m[1], q2_m[0] + q2_p[1], q2_m[0] + q2_m[1]};
        for (int k = 0; k < 4; ++k) {
          const I take = (q2[k] > 0.0f) & (qx[k] * qx[k] > best_score[v] * q2[k]);
          const F candidate_scale = qx[k] / q2[k];
          best_score[v] = lanes::select(take, candidate_scale * qx[k], best_score[v]);
          best_scale[v] = lanes::select(take, candidate_scale, best_scale[v]);
          best_code[v] = lanes::select_int(take, I{} + (i1 << 8 | i2 << 2 | k), best_code[v]);
        }
      }
  }
  for (int g = 0; g < 16; ++g) {
    const int code = best_code[g / Lanes][g % Lanes];
    out[g] = code < 0 ? Split{-1, -1, 0, scale[g]} : Split{code >> 8, (code >> 2) & 63, code & 3, best_scale[g / Lanes][g % Lanes]};
  }
}

// best_split_32_groups() with Lanes groups a vector, 16 / Lanes vectors side by side (independent chains;
// the groups past count are zeros, searched and not used). Each lane does split_32_plain()'s operations
// in its order.
template <int Lanes>
[[gnu::always_inline]] inline void split_32_groups_lanes(int count, const float (*sumx)[33], const float (*sumw)[33], const float* scale,
                                                         Split* out) noexcept {
  using F = typename Vec<Lanes>::F;
  using I = typename Vec<Lanes>::I;
  constexpr int V = 16 / Lanes;
  F gx[V][33] = {}, gw[V][33] = {};  // the prefix sums, group g in lane g % Lanes of vector g / Lanes
  for (int g = 0; g < count; ++g)
    for (int i = 0; i <= 32; ++i) {
      gx[g / Lanes][i][g % Lanes] = sumx[g][i];
      gw[g / Lanes][i][g % Lanes] = sumw[g][i];
    }
  const int vectors = (count + Lanes - 1) / Lanes;
  const float* const v[2] = {kIq1Plus, kIq1Minus};
  F best_score[V], best_scale[V];
  I best_code[V];  // i1 << 8 | i2 << 1 | (shift -1), or -1
  for (int w = 0; w < V; ++w) {
    best_score[w] = F{} - FLT_MAX;
    best_scale[w] = F{};
    best_code[w] = I{} - 1;
  }
  for (int i1 = 0; i1 <= 32; ++i1) {
    F head_x[V][2], head_w[V][2];
    for (int w = 0; w < vectors; ++w)
      for (int s = 0; s < 2; ++s) {
        head_x[w][s] = (gx[w][i1] - gx[w][0]) * v[s][0];
        head_w[w][s] = (gw[w][i1] - gw[w][0]) * v[s][0] * v[s][0];
      }
    for (int i2 = i1; i2 <= 32; ++i2)
      for (int w = 0; w < vectors; ++w) {
        const F bx = gx[w][i2] - gx[w][i1], cx = gx[w][32] - gx[w][i2], bw = gw[w][i2] - gw[w][i1], cw = gw[w][32] - gw[w][i2];
        for (int s = 0; s < 2; ++s) {
          const F qx = head_x[w][s] + bx * v[s][1] + cx * v[s][2];
          const F q2 = head_w[w][s] + bw * v[s][1] * v[s][1] + cw * v[s][2] * v[s][2];
          const I take = (q2 > 0.0f) & (qx * qx > best_score[w] * q2);
          const F candidate_scale = qx / q2;
          best_score[w] = lanes::select(take, candidate_scale * qx, best_score[w]);
          best_scale[w] = lanes::select(take, candidate_scale, best_scale[w]);
          best_code[w] = lanes::select_int(take, I{} + (i1 << 8 | i2 << 1 | s), best_code[w]);
        }
      }
  }
  for (int g = 0; g < count; ++g) {
    const int code = best_code[g / Lanes][g % Lanes];
    out[g] = code < 0 ? Split{-1, -1, 0, scale[g]} : Split{code >> 8, (code >> 1) & 127, code & 1 ? -1 : 1, best_scale[g / Lanes][g % Lanes]};
  }
}

#if !SAFEWEIGHTS_QUANT_SCALAR && SAFEWEIGHTS_QUANT_AVX2
[[gnu::target("avx2")]] void split_32_groups_8(int count, const float (*sumx)[33], const float (*sumw)[33], const float* scale, Split* out) noexcept {
  split_32_groups_lanes<8>(count, sumx, sumw, scale, out);
}
[[gnu::target("avx2")]] void split_16_groups_8(const float (*px)[2][17], const float (*pw)[2][17], const float* scale, Split* out) noexcept {
  split_16_groups_lanes<8>(px, pw, scale, out);
}
#endif

}  // namespace

void best_split_32_groups(int count, const float (*sumx)[33], const float (*sumw)[33], const float* scale, Split* out) noexcept {
#if SAFEWEIGHTS_QUANT_SCALAR
  for (int g = 0; g < count; ++g) out[g] = split_32_plain(sumx[g], sumw[g], scale[g]);
#else
#if SAFEWEIGHTS_QUANT_AVX2
  if (lanes::has_avx2()) return split_32_groups_8(count, sumx, sumw, scale, out);
#endif
  split_32_groups_lanes<4>(count, sumx, sumw, scale, out);
#endif
}

void best_split_16_groups(const float (*px)[2][17], const float (*pw)[2][17], const float* scale, Split* out) noexcept {
#if SAFEWEIGHTS_QUANT_SCALAR
  for (int g = 0; g < 16; ++g) out[g] = split_16_plain(px[g], pw[g], scale[g]);
#else
#if SAFEWEIGHTS_QUANT_AVX2
  if (lanes::has_avx2()) return split_16_groups_8(px, pw, scale, out);
#endif
  split_16_groups_lanes<4>(px, pw, scale, out);
#endif
}

}  // namespace safeweights::quant::iq
