// Vectors of lanes for the searches that run many groups (or candidates) at once, one a lane, each lane
// doing the plain code's float operations in its order (scale_search_lanes.cpp, iq_search_lanes.cpp).
// GCC/Clang vector types: 4 lanes (SSE2, every x86-64, and other 128-bit SIMD) or 8 (AVX2, where
// has_avx2() says the CPU has it; the callers compile those paths with target("avx2"), never FMA:
// contraction would change the bytes). Internal to src/quant; include it only from the lanes files.
//
// Build switches: SAFEWEIGHTS_QUANT_SCALAR=1 makes the lanes files run the plain code one group after
// the other; SAFEWEIGHTS_QUANT_AVX2=0 never takes AVX2's 8 lanes (nor AVX-512's 16);
// SAFEWEIGHTS_QUANT_AVX512=0 never takes AVX-512's 16 (has_avx512(), intrinsics in
// scale_search_lanes.cpp). The quant judge builds all four.
//
// Thread safety: pure functions; has_avx2() reads the CPU once (a function-local static).
#pragma once

#include <cstdint>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>  // declares GCC's x86 builtins (clamp_lanes) for every instruction set
#endif

// The helpers are inlined, so GCC's note that passing wide vectors by value has another ABI under AVX
// does not concern them.
#if defined(__GNUC__)  // GCC and Clang
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#if !defined(SAFEWEIGHTS_QUANT_AVX2) && defined(__x86_64__) && defined(__GNUC__)
#define SAFEWEIGHTS_QUANT_AVX2 1
#endif
// AVX-512's 16 lanes (the K-quants' searches), where AVX2's are taken and not switched off.
#if !defined(SAFEWEIGHTS_QUANT_AVX512) && SAFEWEIGHTS_QUANT_AVX2
#define SAFEWEIGHTS_QUANT_AVX512 1
#endif

namespace safeweights::quant::lanes {

// GCC and Clang vector types, spelled out per width (GCC drops vector_size on a type that depends on a
// template parameter). Wider vectors than the registers would be lowered lane by lane.
template <int Lanes>
struct Vec;
template <>
struct Vec<4> {
  using F = float __attribute__((vector_size(16)));
  using I = std::int32_t __attribute__((vector_size(16)));
  using B = std::int8_t __attribute__((vector_size(4)));
};
template <>
struct Vec<8> {
  using F = float __attribute__((vector_size(32)));
  using I = std::int32_t __attribute__((vector_size(32)));
  using B = std::int8_t __attribute__((vector_size(8)));
};

// mask ? a : b, lane by lane (mask lanes are 0 or -1): one blend where the target has it (AVX), three
// bitwise operations where not (SSE2).
template <typename F, typename I>
[[gnu::always_inline]] inline F select(I mask, F a, F b) noexcept {
  return mask ? a : b;
}
template <typename I>
[[gnu::always_inline]] inline I select_int(I mask, I a, I b) noexcept {
  return mask ? a : b;
}

// clamp(l, lo, hi) lane by lane. GCC lowers the comparisons and selects of 8 lanes to two compares and
// two blends; AVX2's signed max and min give the same lanes in two instructions (the callers of 8
// lanes are compiled for AVX2). Clang finds the max and min itself.
template <typename I>
[[gnu::always_inline]] inline I clamp_lanes(I l, int lo, int hi) noexcept {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  if constexpr (sizeof(I) == 32) {
    using V = Vec<8>::I;
    return reinterpret_cast<I>(__builtin_ia32_pminsd256(__builtin_ia32_pmaxsd256(reinterpret_cast<V>(l), V{} + lo), V{} + hi));
  }
#endif
  l = l < lo ? I{} + lo : l;
  return l > hi ? I{} + hi : l;
}

// nearest_int() lane by lane, then clamp(l, lo, hi).
template <typename F, typename I>
[[gnu::always_inline]] inline I nearest_clamped(F f, int lo, int hi) noexcept {
  const F shifted = f + 12582912.0f;
  return clamp_lanes<I>((reinterpret_cast<I>(shifted) & 0x7fffff) - 0x400000, lo, hi);
}

// nearest_clamped(f, 0, hi) for f that is NaN, +infinity or in [0, 2^22): there the processor's own
// conversion (round to nearest even as nearest_int(), or as the rounding mode says, as its addition
// does) gives the same lanes in one instruction instead of three: nearest_int() is exact below 2^22,
// and both end at 0 for NaN and +infinity (the conversion's INT_MIN, nearest_int()'s -2^22, clamped).
template <typename F, typename I>
[[gnu::always_inline]] inline I nearest_clamped_nonnegative(F f, int hi) noexcept {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  if constexpr (sizeof(F) == 32) {
    using V = Vec<8>::F;
    return clamp_lanes<I>(reinterpret_cast<I>(__builtin_ia32_cvtps2dq256(reinterpret_cast<V>(f))), 0, hi);
  } else if constexpr (sizeof(F) == 16) {
    using V = Vec<4>::F;
    return clamp_lanes<I>(reinterpret_cast<I>(__builtin_ia32_cvtps2dq(reinterpret_cast<V>(f))), 0, hi);
  }
#endif
  return nearest_clamped<F, I>(f, 0, hi);
}

template <typename F, typename I>
[[gnu::always_inline]] inline F absolute(F v) noexcept {
  return reinterpret_cast<F>(reinterpret_cast<I>(v) & 0x7fffffff);
}

template <typename F>
[[gnu::always_inline]] inline F to_float(auto l) noexcept {
  return __builtin_convertvector(l, F);
}

// Lanes groups of n values (group k at p + k*n) as n vectors: vector i holds value i of each group.
template <typename F>
[[gnu::always_inline]] inline void transpose_in(int lanes, int n, const float* p, F* t) noexcept {
  for (int k = 0; k < lanes; ++k)
    for (int i = 0; i < n; ++i) t[i][k] = p[k * n + i];
}

#if SAFEWEIGHTS_QUANT_AVX512
// AVX-512 F/BW/DQ/VL (the 16-lane searches, written with intrinsics: GCC 12 lowers 64-byte vector
// extensions' masks partly to scalar code and miscompiled one such loop).
inline bool has_avx512() noexcept {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx512bw") != 0 && __builtin_cpu_supports("avx512dq") != 0 &&
           __builtin_cpu_supports("avx512vl") != 0;
  }();
  return has;
}
#endif

#if SAFEWEIGHTS_QUANT_AVX2
inline bool has_avx2() noexcept {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
}
#endif

}  // namespace safeweights::quant::lanes
