// ggml's small rounding and search helpers that the codecs share (the K-quants' scale searches, iq.cpp, other.cpp), written to give
// ggml's result on every float input, NaN and infinities included. Internal to src/quant.
//
// Thread safety: pure functions.
#pragma once

#include <bit>
#include <cstdint>

namespace safeweights::quant {

constexpr float kGroupMaxEps = 1e-15f;  // below this a group counts as all zero (ggml's GROUP_MAX_EPS)

// Round to nearest (ties to even) by adding 1.5 x 2^23 and reading the low mantissa bits, as ggml does
// (its nearest_int): exact for |f| <= 2^22; for larger or non-finite input it gives ggml's value too,
// since it is the same bit manipulation.
inline int nearest_int(float f) noexcept {
  const auto bits = std::bit_cast<std::uint32_t>(f + 12582912.0f);
  return static_cast<int>(bits & 0x7fffffu) - 0x400000;
}

// The index of the value nearest to x among `n` ascending values, by bisection (ggml's best_index_int8): at
// or below the first 0, at or above the last n - 1, a tie goes to the upper value, NaN to n - 1.
inline int nearest_level(int n, const std::int8_t* values, float x) noexcept {
  if (x <= static_cast<float>(values[0])) return 0;
  if (x >= static_cast<float>(values[n - 1])) return n - 1;
  int lo = 0, hi = n - 1;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < static_cast<float>(values[mid]))
      hi = mid;
    else
      lo = mid;
  }
  return x - static_cast<float>(values[hi - 1]) < static_cast<float>(values[hi]) - x ? hi - 1 : hi;
}

// float -> integer as x86-64's truncating conversion does it (cvttss2si): in range, toward zero; NaN and
// out of range, INT32_MIN. ggml casts floats outside an integer type's range (MXFP4's exponent); this is
// what its x86-64 builds compute there.
inline std::int32_t truncate_like_x86(float f) noexcept {
  if (!(f > -2147483904.0f && f < 2147483648.0f)) return INT32_MIN;
  return static_cast<std::int32_t>(f);
}

}  // namespace safeweights::quant
