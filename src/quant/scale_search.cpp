// The scale searches of ggml's quantizers (scale_search.h), each in ggml's float operations and order.
#include "quant/scale_search.h"

#include <cmath>

namespace safeweights::quant {
namespace {

// ggml's MAX(a, b) and MIN(a, b): (a > b ? a : b) and (a < b ? a : b), whose NaN behaviour matters.
inline float max_of(float a, float b) noexcept { return a > b ? a : b; }
inline int min_of(int a, int b) noexcept { return a < b ? a : b; }

// The start of the symmetric searches: the signed maximum, or true for a group that is all zero (|max|
// below kGroupMaxEps), whose codes are then 0 and scale 0.
bool zero_group(int n, const float* x, std::int8_t* L, float& max) noexcept {
  float amax;
  signed_max(n, x, max, amax);
  if (amax >= kGroupMaxEps) return false;
  for (int i = 0; i < n; ++i) L[i] = 0;
  return true;
}

// Codes -nmax..nmax-1 of n values at 1/scale `iscale` (stored in L unless it is null), and their
// weighted sums of l x and l^2 (weights w, or x^2 where w is null).
void symmetric_codes(int n, int nmax, const float* x, const float* w, float iscale, std::int8_t* L, float& sumlx, float& suml2) noexcept {
  sumlx = suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    if (L != nullptr) L[i] = static_cast<std::int8_t>(l);
    const float wi = w != nullptr ? w[i] : x[i] * x[i];
    sumlx += wi * x[i] * static_cast<float>(l);
    suml2 += wi * static_cast<float>(l) * static_cast<float>(l);
  }
}

}  // namespace

void signed_max(int n, const float* x, float& max, float& amax) noexcept {
  max = 0;
  amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
}

float search_scale_min(int n, int nmax, const float* x, const float* w, std::uint8_t* L, float* neg_min, float rmin, float rdelta, int nstep,
                       bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *neg_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_mad = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<std::uint8_t>(clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_mad += w[i] * diff;
  }
  std::uint8_t trial[32];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      trial[i] = static_cast<std::uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float mad = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(trial[i]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        mad += w[i] * diff;
      }
      if (mad < best_mad) {
        for (int i = 0; i < n; ++i) L[i] = trial[i];
        best_mad = mad;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

float search_scale_symmetric_trials(int n, int nmax, const float* x, const float* w, std::int8_t* L) {
  float max;
  if (zero_group(n, x, L, max)) return 0.0f;
  float sumlx, suml2;
  symmetric_codes(n, nmax, x, w, static_cast<float>(-nmax) / max, L, sumlx, suml2);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    symmetric_codes(n, nmax, x, w, iscale, nullptr, sumlx, suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      symmetric_codes(n, nmax, x, w, iscale, L, sumlx, suml2);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<std::int8_t>(L[i] + nmax);
  return scale;
}

float search_scale_symmetric_descent(int nmax, const float* x, std::int8_t* L) {
  float max;
  if (zero_group(16, x, L, max)) return 0.0f;
  float sumlx, suml2;
  symmetric_codes(16, nmax, x, nullptr, static_cast<float>(-nmax) / max, L, sumlx, suml2);
  for (int itry = 0; itry < 5; ++itry) {
    int changed = 0;
    for (int i = 0; i < 16; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0) {
        float sl2 = suml2 - w * li * li;
        const int new_l = clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          const float fl = static_cast<float>(new_l);
          slx += w * x[i] * fl;
          sl2 += w * fl * fl;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<std::int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < 16; ++i) L[i] = static_cast<std::int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

float search_scale_positive(int n, int nmax, const float* x, std::uint8_t* L, const float* w) {
  float max = 0;
  for (int i = 0; i < n; ++i) max = max_of(max, x[i]);
  if (max < kGroupMaxEps) {  // all zero (or NaN at the end)
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float fmax = static_cast<float>(nmax);
  float iscale = fmax / max;
  for (int i = 0; i < n; ++i) L[i] = static_cast<std::uint8_t>(nearest_int(iscale * x[i]));
  const float scale = 1 / iscale;
  float best_mse = 0;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * static_cast<float>(L[i]);
    best_mse += w[i] * diff * diff;
  }
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float iscale_is = (0.1f * static_cast<float>(is) + fmax) / max;
    const float scale_is = 1 / iscale_is;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      const int l = min_of(nmax, nearest_int(iscale_is * x[i]));
      const float diff = x[i] - scale_is * static_cast<float>(l);
      mse += w[i] * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = iscale_is;
    }
  }
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = min_of(nmax, nearest_int(iscale * x[i]));
    L[i] = static_cast<std::uint8_t>(l);  // a negative code wraps, as in ggml's uint8_t array
    const float fl = static_cast<float>(l);
    sumlx += w[i] * x[i] * fl;
    suml2 += w[i] * fl * fl;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w[i] * x[i] * li;
      float sl2 = suml2 - w[i] * li * li;
      if (slx > 0 && sl2 > 0) {
        const int new_l = min_of(nmax, nearest_int(x[i] * sl2 / slx));
        if (new_l != L[i]) {
          const float fl = static_cast<float>(new_l);
          slx += w[i] * x[i] * fl;
          sl2 += w[i] * fl * fl;
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<std::uint8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

namespace {
// Weighted sums of IQ4 levels q against 32 values at inverse scale id: sum w q x and sum w q q.
void iq4_level_sums(const float* x, const float* w, float id, float& sumqx, float& sumq2) noexcept {
  sumqx = sumq2 = 0;
  for (int j = 0; j < 32; ++j) {
    const float q = kIq4Levels[nearest_level(16, kIq4Levels, id * x[j])];
    sumqx += w[j] * q * x[j];
    sumq2 += w[j] * q * q;
  }
}
}  // namespace

float search_scale_iq4(const float* x, const float* w) noexcept {
  float max, amax;
  signed_max(32, x, max, amax);
  if (amax < kGroupMaxEps) return 0;
  float sumqx, sumq2;
  iq4_level_sums(x, w, 1 / (-max / kIq4Levels[0]), sumqx, sumq2);
  float d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
  float best = d * sumqx;
  for (int itry = -kIq4Trials; itry <= kIq4Trials; ++itry) {
    iq4_level_sums(x, w, static_cast<float>(itry + kIq4Levels[0]) / max, sumqx, sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

}  // namespace safeweights::quant
