// Q8_0's quantizer eight blocks at a time (q8_lanes.h). ggml's reference for one block: amax = the
// largest |x|, d = amax / 127, id = d ? 1 / d : 0, the f16 of d, then each code roundf(x * id). For
// blocks of finite values every order of taking the maximum gives the same amax (fabs makes no -0), so
// each block's maximum is taken over 8-float vectors; d and id are one block a lane (the same IEEE
// division); the codes are rounded half away from zero as legacy.cpp's small_codes does (truncate,
// then compare the exact remainder with one half), which equals roundf while |x * id| < 127.5.
// Compiled with target("avx2") only, never FMA: no contraction (the quant judge,
// tests/quant/ggml_differential.sh, checks each way this file is built: lanes.h).
#include "quant/q8_lanes.h"

#include <cstdint>
#include <cstring>

#include "quant/codecs.h"
#include "quant/lanes.h"

#if !SAFEWEIGHTS_QUANT_SCALAR && SAFEWEIGHTS_QUANT_AVX2
#include <immintrin.h>
#endif

namespace safeweights::quant {
namespace {

#if !SAFEWEIGHTS_QUANT_SCALAR && SAFEWEIGHTS_QUANT_AVX2

constexpr int kBlock = 32;
constexpr int kBlockBytes = 2 + kBlock;

// The largest |x| of a block, and whether every value is finite (x - x is 0 for a finite x, NaN else).
[[gnu::target("avx2")]] inline float block_absmax(const float* x, bool& finite) noexcept {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 amax = _mm256_setzero_ps(), poison = _mm256_setzero_ps();
  for (int i = 0; i < kBlock; i += 8) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), magnitude);
    amax = _mm256_max_ps(amax, a);
    poison = _mm256_add_ps(poison, _mm256_sub_ps(a, a));
  }
  alignas(32) float lane[8], bad[8];
  _mm256_store_ps(lane, amax);
  _mm256_store_ps(bad, poison);
  float m = 0.0f, any = 0.0f;
  for (int l = 0; l < 8; ++l) {
    m = m > lane[l] ? m : lane[l];
    any += bad[l];
  }
  finite = any == 0.0f;
  return m;
}

// One block's 32 codes at inverse scale id, each |x * id| < 127.5 (so packing with saturation keeps
// every code as it is).
[[gnu::target("avx2")]] inline void block_codes(const float* x, float id, std::byte* q) noexcept {
  const __m256 vid = _mm256_set1_ps(id), half = _mm256_set1_ps(0.5f), minus_half = _mm256_set1_ps(-0.5f);
  __m256i w[4];
  for (int i = 0; i < 4; ++i) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), vid);
    const __m256i t = _mm256_cvttps_epi32(v);
    const __m256 frac = _mm256_sub_ps(v, _mm256_cvtepi32_ps(t));
    const __m256i up = _mm256_castps_si256(_mm256_cmp_ps(frac, half, _CMP_GE_OQ));          // -1 where frac >= 0.5
    const __m256i down = _mm256_castps_si256(_mm256_cmp_ps(frac, minus_half, _CMP_LE_OQ));  // -1 where frac <= -0.5
    w[i] = _mm256_add_epi32(_mm256_sub_epi32(t, up), down);
  }
  // The packs work within each 128-bit half: the bytes come out as groups of 4 codes in the order
  // w0[0:4] w1[0:4] w2[0:4] w3[0:4] w0[4:8] w1[4:8] w2[4:8] w3[4:8], put back in order by the permute.
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(w[0], w[1]), _mm256_packs_epi32(w[2], w[3]));
  const __m256i ordered = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), ordered);
}

[[gnu::target("avx2")]] bool blocks_8(const float* src, std::byte* dst) noexcept {
  alignas(32) float amax[8];
  for (int b = 0; b < 8; ++b) {
    bool finite = false;
    amax[b] = block_absmax(src + b * kBlock, finite);
    if (!finite) return false;
  }
  const __m256 m = _mm256_load_ps(amax);
  const __m256 d = _mm256_div_ps(m, _mm256_set1_ps(127.0f));
  const __m256 nonzero = _mm256_cmp_ps(d, _mm256_setzero_ps(), _CMP_NEQ_UQ);
  const __m256 id = _mm256_and_ps(nonzero, _mm256_div_ps(_mm256_set1_ps(1.0f), d));  // 1 / d, or 0 for d = 0
  const __m256 small = _mm256_cmp_ps(_mm256_mul_ps(m, id), _mm256_set1_ps(127.5f), _CMP_LT_OQ);
  if (_mm256_movemask_ps(small) != 0xff) return false;
  alignas(32) float ds[8], ids[8];
  _mm256_store_ps(ds, d);
  _mm256_store_ps(ids, id);
  for (int b = 0; b < 8; ++b) {
    std::byte* out = dst + b * kBlockBytes;
    store_f16(out, ds[b]);
    block_codes(src + b * kBlock, ids[b], out + 2);
  }
  return true;
}

#endif

}  // namespace

bool quantize_q8_0_8_blocks(const float* src, std::byte* dst) noexcept {
#if !SAFEWEIGHTS_QUANT_SCALAR && SAFEWEIGHTS_QUANT_AVX2
  if (lanes::has_avx2()) return blocks_8(src, dst);
#else
  (void)src;
  (void)dst;
#endif
  return false;
}

}  // namespace safeweights::quant
