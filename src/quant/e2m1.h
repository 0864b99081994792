// OCP's 4-bit float E2M1 as ggml stores it, shared by MXFP4 (other.cpp) and NVFP4 (nvfp4.cpp): the
// sixteen codes' values doubled, so that they are integers (ggml's kvalues_mxfp4; its scales are halved
// to match), and ggml's choice of a code for a value. Internal to src/quant.
//
// Thread safety: constants and pure functions.
#pragma once

#include <cmath>
#include <cstdint>

namespace safeweights::quant {

// Code i's value times two: 0, 0.5, 1, 1.5, 2, 3, 4, 6 doubled, then the same negated (bit 3 the sign).
inline constexpr std::int8_t kE2m1Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// The E2M1 code nearest to x / e (the first of equals): |value x e - x| over all 16 codes, as ggml's
// best_index_mxfp4 searches them (NaN and infinities find no smaller error and give code 0).
inline int nearest_e2m1(float x, float e) noexcept {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kE2m1Doubled[0]) * e - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kE2m1Doubled[i]) * e - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

}  // namespace safeweights::quant
