// The scale searches of ggml's quantizers: given a group of values (and a weight per value), choose a
// scale (and for the affine searches a minimum) and the integer codes that go with it. They are shared
// by the K-quants (kquants.cpp) and the legacy types' weighted paths (legacy.cpp). Internal to
// src/quant.
//
// Each search follows the ggml function named beside it in the same float operations in the same order
// (this file is compiled without contraction and without fast-math), so that its scale and codes, and
// then the bytes of the blocks built from them, equal ggml's on every input, NaN and infinities
// included. Weights are read as given: ggml checks none of them.
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <bit>
#include <cstdint>

#include "quant/rounding.h"

namespace safeweights::quant {

inline int clamp(int v, int lo, int hi) noexcept { return v < lo ? lo : (v > hi ? hi : v); }

// The signed value of largest magnitude among n (first met; NaN never wins) and that magnitude.
void signed_max(int n, const float* x, float& max, float& amax) noexcept;

// Affine: scale and minimum for `n` (at most 32) values on codes 0..nmax, the best of the start and
// nstep+1 trial scales by the weighted |error| (use_mad) or squared error; returns the scale, stores
// -min in *neg_min and the codes in L. ggml's make_qkx2_quants, and make_qkx3_quants with weights (the
// two differ only where weights are absent, and for nstep < 1, which no caller uses).
float search_scale_min(int n, int nmax, const float* x, const float* w, std::uint8_t* L, float* neg_min, float rmin, float rdelta, int nstep,
                       bool use_mad);

// search_scale_min for `groups` groups of `n` values at once (8 or 16 groups, n at most 32): group k's
// values at x + k*n, its weights at w + k*n, its codes to L + k*n, its scale and -min to scales[k] and
// neg_mins[k]. Every result equals search_scale_min's (scale_search_lanes.cpp: one group a lane).
void search_scale_min_groups(int groups, int n, int nmax, const float* x, const float* w, std::uint8_t* L, float* scales, float* neg_mins, float rmin,
                             float rdelta, int nstep, bool use_mad);

// Symmetric: codes -nmax..nmax-1 for `n` values, the best of 19 trial scales by weighted squared error,
// weights `w` or, when w is null, x^2; L gets the codes plus nmax (all 0 for a group that is all zero,
// whose scale is 0). ggml's make_qx_quants with rmse_type 1.
float search_scale_symmetric_trials(int n, int nmax, const float* x, const float* w, std::int8_t* L);

// search_scale_symmetric_trials for `groups` groups of `n` values at once (8 or 16 groups, n at most
// 32), laid out as for search_scale_min_groups (w null: x^2); scales[k] is group k's scale.
void search_scale_symmetric_trials_groups(int groups, int n, int nmax, const float* x, const float* w, std::int8_t* L, float* scales);

// Symmetric codes for 16 values refined by coordinate descent on the x^2-weighted error; L gets the
// codes plus nmax. ggml's make_q3_quants with do_rmse (Q3_K without weights).
float search_scale_symmetric_descent(int nmax, const float* x, std::int8_t* L);
// The same for `groups` groups of 16 values at once (any count; group k at x + 16k, L + 16k).
void search_scale_symmetric_descent_groups(int groups, int nmax, const float* x, std::int8_t* L, float* scales);

// Non-negative codes 0..nmax for `n` values that are scales (so mostly positive), the best of 9 trial
// scales by weighted squared error, then refined by coordinate descent. Codes are bytes as in ggml:
// a negative code is kept modulo 256. ggml's make_qp_quants (the K-quants' weighted super-block scales).
float search_scale_positive(int n, int nmax, const float* x, std::uint8_t* L, const float* w);

// The codes clamp(nearest_int((x + dm) / d), lo, hi) + offset of n values (a multiple of 4), or of
// x / d without with_min: how the K-quants requantize a sub-block with its stored scale (and minimum),
// four values a vector (element-wise, so any order gives the same codes). Codes are stored as bytes.
void codes_at_scale(int n, const float* x, float dm, float d, bool with_min, int lo, int hi, int offset, std::uint8_t* L) noexcept;

// IQ4's sixteen levels (IQ4_NL, IQ4_XS), from ggml's published table.
inline constexpr std::int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
inline constexpr int kIq4Trials = 7;  // ggml tries the inverse scales (itry - 127) / max, itry in [-7, 7]

// The scale of 32 values on IQ4's levels: the least-squares scale of the levels that -max/127 picks,
// then of the 15 trial scales, the best by weighted squared error kept; 0 when all are zero (below
// kGroupMaxEps). ggml's search in quantize_row_iq4_nl_impl (weights w as given).
float search_scale_iq4(const float* x, const float* w) noexcept;
// search_scale_iq4 for `groups` groups of 32 at once (group k at x + 32k, w + 32k; its scale to
// scales[k]); any count, the lanes' remainder one at a time.
void search_scale_iq4_groups(int groups, const float* x, const float* w, float* scales) noexcept;

}  // namespace safeweights::quant
