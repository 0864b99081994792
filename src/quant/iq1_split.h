// IQ1_S's and IQ1_M's split search: a group's values, sorted, are cut into three runs (levels -1, 0, 1, each
// shifted by +delta or -delta), and ggml tries every pair of cut points (i1 <= i2) with every shift choice,
// keeping the least-squares best. Internal to src/quant (iq.cpp is the caller).
//
// The search visits the candidates in ggml's order and keeps a candidate when sumqx^2 > best x sumq2, the
// comparison ggml makes (not a comparison of scores, which would round differently), so the choice is
// ggml's. iq1_split_lanes.cpp searches many groups at once, one a lane.
//
// Thread safety: pure functions.
#pragma once

#include "quant/iq_grids.h"

namespace safeweights::quant::iq {

// IQ1's three levels shifted by +delta (shift 1) and by -delta (shift -1).
constexpr float kIq1Plus[3] = {-1 + kIq1Delta, kIq1Delta, 1 + kIq1Delta};
constexpr float kIq1Minus[3] = {-1 - kIq1Delta, -kIq1Delta, 1 - kIq1Delta};

// The chosen cut points (sorted positions below i1 take level 0, below i2 level 1, the rest level 2), the
// shift choice, and the scale sumqx / sumq2 of the choice; i1 = -1 when no candidate passed (NaN).
struct Split {
  int i1 = -1, i2 = -1;
  int shift = 0;  // IQ1_S: 1 or -1; IQ1_M: 0..3 (bit 1: first half -delta, bit 0: second half -delta)
  float scale = 0;
};

// IQ1_S, `count` groups (at most 16: two blocks) of 32 values: group g's sumx[g][j] and sumw[g][j] (j =
// 0..32) are the prefix sums of w x and w over its sorted values, its split into out[g] (scale[g] where no
// candidate passes). With lanes, one group a lane, as best_split_16_groups().
void best_split_32_groups(int count, const float (*sumx)[33], const float (*sumw)[33], const float* scale, Split* out) noexcept;

// IQ1_M, 16 groups (a block) of 16 values in two halves of 8: group g's px[g][h][j], pw[g][h][j] (j =
// 0..16) are the prefix sums of w x and w over its sorted values that belong to half h, its split into
// out[g] (scale[g] where no candidate passes). With lanes, one group a lane: each lane tests every candidate in
// ggml's order against its own best and takes it by a select, so that no branch waits on the
// comparison (a group replaces its best about 30 times).
void best_split_16_groups(const float (*px)[2][17], const float (*pw)[2][17], const float* scale, Split* out) noexcept;

}  // namespace safeweights::quant::iq
