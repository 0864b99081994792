// Vectors of lanes for the searches that run many groups (or candidates) at once, one a lane, each lane
// doing the plain code's float operations in its order (scale_search_lanes.cpp, iq_search_lanes.cpp).
// GCC/Clang vector types: 4 lanes (SSE2, every x86-64, and other 128-bit SIMD) or 8 (AVX2, where
// has_avx2() says the CPU has it; the callers compile those paths with target("avx2"), never FMA:
// contraction would change the bytes). Internal to src/quant; include it only from the lanes files.
//
// Build switches: SAFEWEIGHTS_QUANT_SCALAR=1 makes the lanes files run the plain code one group after
// the other; SAFEWEIGHTS_QUANT_AVX2=0 never takes AVX2's 8 lanes. The quant judge builds all three.
//
// Thread safety: pure functions; has_avx2() reads the CPU once (a function-local static).
#pragma once

#include <cstdint>

// The helpers are inlined, so GCC's note that passing wide vectors by value has another ABI under AVX
// does not concern them.
#if defined(__GNUC__)  // GCC and Clang
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#if !defined(SAFEWEIGHTS_QUANT_AVX2) && defined(__x86_64__) && defined(__GNUC__)
#define SAFEWEIGHTS_QUANT_AVX2 1
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

// mask ? a : b, lane by lane (mask lanes are 0 or -1).
template <typename F, typename I>
[[gnu::always_inline]] inline F select(I mask, F a, F b) noexcept {
  return reinterpret_cast<F>((mask & reinterpret_cast<I>(a)) | (~mask & reinterpret_cast<I>(b)));
}
template <typename I>
[[gnu::always_inline]] inline I select_int(I mask, I a, I b) noexcept {
  return (mask & a) | (~mask & b);
}

// nearest_int() lane by lane, then clamp(l, lo, hi).
template <typename F, typename I>
[[gnu::always_inline]] inline I nearest_clamped(F f, int lo, int hi) noexcept {
  const F shifted = f + 12582912.0f;
  I l = (reinterpret_cast<I>(shifted) & 0x7fffff) - 0x400000;
  l = select_int<I>(l < lo, I{} + lo, l);
  return select_int<I>(l > hi, I{} + hi, l);
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
