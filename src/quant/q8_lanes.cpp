// ggml's first block types' quantizers eight blocks at a time (q8_lanes.h). Q8_0: ggml's reference for one block: amax = the
// largest |x|, d = amax / 127, id = d ? 1 / d : 0, the f16 of d, then each code roundf(x * id). For
// blocks of finite values every order of taking the maximum gives the same amax (fabs makes no -0), so
// each block's maximum is taken over 8-float vectors; d and id are one block a lane (the same IEEE
// division); the codes are rounded half away from zero as legacy.cpp's small_codes does (truncate,
// then compare the exact remainder with one half), which equals roundf while |x * id| < 127.5.
// Q4_0, Q5_0, Q4_1 and Q5_1 (at the end) take their statistics (signed maximum; minimum and maximum)
// over 8-float vectors too, their scales one block a lane, and their codes as ggml's truncating
// conversions, 8 a vector. Compiled with target("avx2") only, never FMA: no contraction (the quant judge,
// tests/quant/ggml_differential.sh, checks each way this file is built: lanes.h).
#include "quant/q8_lanes.h"

#include <bit>
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

// Four vectors of 8 codes in [-128, 127] (codes 0..31 in order) as 32 bytes in order. The packs work
// within each 128-bit half: the bytes come out as groups of 4 codes in the order w0[0:4] w1[0:4] w2[0:4]
// w3[0:4] w0[4:8] w1[4:8] w2[4:8] w3[4:8], put back in order by the permute.
[[gnu::target("avx2")]] inline __m256i ordered_bytes(const __m256i* w) noexcept {
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(w[0], w[1]), _mm256_packs_epi32(w[2], w[3]));
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
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
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), ordered_bytes(w));
}

[[gnu::target("avx2")]] bool q8_0_blocks_8(const float* src, std::byte* dst) noexcept {
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

// The value of a block first equal to v (with of_magnitude, whose |x| equals v). ggml's sequential
// searches keep the first value met among equal ones, which decides the sign of the signed maximum
// (Q4_0, Q5_0: x and -x tie) and of a zero minimum or maximum (-0 == 0; the f16 keeps the sign). v is
// one of the block's values (magnitudes), so there is a first.
[[gnu::target("avx2")]] inline float first_equal(const float* x, float v, bool of_magnitude) noexcept {
  const __m256 keep = _mm256_castsi256_ps(_mm256_set1_epi32(of_magnitude ? 0x7fffffff : -1));
  const __m256 target = _mm256_set1_ps(v);
  std::uint32_t hits = 0;
  for (int i = 0; i < 4; ++i) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + 8 * i), keep);
    hits |= static_cast<std::uint32_t>(_mm256_movemask_ps(_mm256_cmp_ps(a, target, _CMP_EQ_OQ))) << (8 * i);
  }
  return x[std::countr_zero(hits)];
}

// A block's minimum and maximum, and whether every value is finite. Without a NaN every order gives
// the same values but for the sign of a zero, taken from the first zero as ggml's loop takes it.
[[gnu::target("avx2")]] inline bool block_min_max(const float* x, float& min, float& max) noexcept {
  __m256 lo = _mm256_loadu_ps(x), hi = lo, poison = _mm256_setzero_ps();
  for (int i = 0; i < kBlock; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    lo = _mm256_min_ps(lo, v);
    hi = _mm256_max_ps(hi, v);
    poison = _mm256_add_ps(poison, _mm256_sub_ps(v, v));
  }
  alignas(32) float l[8], h[8], bad[8];
  _mm256_store_ps(l, lo);
  _mm256_store_ps(h, hi);
  _mm256_store_ps(bad, poison);
  float any = 0.0f;
  min = l[0];
  max = h[0];
  for (int k = 0; k < 8; ++k) {
    min = l[k] < min ? l[k] : min;
    max = h[k] > max ? h[k] : max;
    any += bad[k];
  }
  if (any != 0.0f) return false;
  if (min == 0.0f) min = first_equal(x, 0.0f, false);
  if (max == 0.0f) max = first_equal(x, 0.0f, false);
  return true;
}

// Lanes whose scale (d, its inverse id = 1 / d or 0 for d = 0) comes from 8 blocks' statistic s as
// d = s / divisor; true when every |s * id| < bound, where the codes cannot leave the range the
// block's vector path assumes (false for the infinite inverse of a tiny d, or an infinite d).
[[gnu::target("avx2")]] inline bool scales(const float* s, float divisor, float bound, float* ds, float* ids) noexcept {
  const __m256 m = _mm256_load_ps(s);
  const __m256 d = _mm256_div_ps(m, _mm256_set1_ps(divisor));
  const __m256 nonzero = _mm256_cmp_ps(d, _mm256_setzero_ps(), _CMP_NEQ_UQ);
  const __m256 id = _mm256_and_ps(nonzero, _mm256_div_ps(_mm256_set1_ps(1.0f), d));
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 product = _mm256_and_ps(_mm256_mul_ps(m, id), magnitude);
  _mm256_store_ps(ds, d);
  _mm256_store_ps(ids, id);
  return _mm256_movemask_ps(_mm256_cmp_ps(product, _mm256_set1_ps(bound), _CMP_LT_OQ)) == 0xff;
}

// A 4- or 5-bit block's codes min(top, (int)(((x - min) * id) + add)) (min = 0: x * id + add), each
// in [0, 127] (so truncating to int32 is ggml's conversion to int8_t), stored as ggml packs them:
// codes j and j+16 as the low and high nibble of byte j of qs, their fifth bits as bits j and j+16 of
// qh (5 bits).
template <int Bits>
[[gnu::target("avx2")]] inline void block_nibbles(const float* x, float min, float id, float add, std::byte* qs, std::byte* qh) noexcept {
  const __m256 vmin = _mm256_set1_ps(min), vid = _mm256_set1_ps(id), vadd = _mm256_set1_ps(add);
  const __m256i top = _mm256_set1_epi32((1 << Bits) - 1);
  __m256i w[4];
  for (int i = 0; i < 4; ++i) {
    const __m256 v = _mm256_sub_ps(_mm256_loadu_ps(x + 8 * i), vmin);  // x - 0 is x
    w[i] = _mm256_min_epi32(_mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(v, vid), vadd)), top);
  }
  const __m256i bytes = ordered_bytes(w);
  const __m128i low4 = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm256_castsi256_si128(bytes), hi = _mm256_extracti128_si256(bytes, 1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm_or_si128(_mm_and_si128(lo, low4), _mm_slli_epi16(_mm_and_si128(hi, low4), 4)));
  if constexpr (Bits == 5) {
    // Bit 4 of each byte shifted to bit 7 (within 16-bit words, so no bit crosses into its byte).
    le::store(qh, static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_slli_epi16(bytes, 3))), 4);
  }
}

// Q4_0, Q5_0: d = signed max / -2^(bits-1), codes min(top, (int8_t)(x * id + 2^(bits-1) + 0.5)).
template <int Bits>
[[gnu::target("avx2")]] bool symmetric_blocks_8(const float* src, std::byte* dst) noexcept {
  constexpr int kOffset = 1 << (Bits - 1);
  constexpr int kQs = Bits == 4 ? 2 : 6;
  alignas(32) float max[8], ds[8], ids[8];
  for (int b = 0; b < 8; ++b) {
    bool finite = false;
    const float amax = block_absmax(src + b * kBlock, finite);
    if (!finite) return false;
    max[b] = amax > 0.0f ? first_equal(src + b * kBlock, amax, true) : 0.0f;
  }
  // |x * id| <= |max * id| (about 2^(bits-1)) < 2^(bits-1) + 1: the sums lie in (-0.5, 2^bits + 1.5).
  if (!scales(max, static_cast<float>(-kOffset), static_cast<float>(kOffset + 1), ds, ids)) return false;
  for (int b = 0; b < 8; ++b) {
    std::byte* out = dst + b * (kQs + 16);
    store_f16(out, ds[b]);
    block_nibbles<Bits>(src + b * kBlock, 0.0f, ids[b], static_cast<float>(kOffset) + 0.5f, out + kQs, out + 2);
  }
  return true;
}

// Q4_1, Q5_1: d = (max - min) / top, codes (x - min) * id + 0.5 truncated (Q4_1 capped at 15).
template <int Bits>
[[gnu::target("avx2")]] bool affine_blocks_8(const float* src, std::byte* dst) noexcept {
  constexpr int kTop = (1 << Bits) - 1;
  constexpr int kQs = Bits == 4 ? 4 : 8;
  alignas(32) float min[8], range[8], ds[8], ids[8];
  for (int b = 0; b < 8; ++b) {
    float max = 0.0f;
    if (!block_min_max(src + b * kBlock, min[b], max)) return false;
    range[b] = max - min[b];
  }
  // 0 <= (x - min) * id <= range * id < top + 0.5: every code in [0, top] (Q5_1's uncapped ones too).
  if (!scales(range, static_cast<float>(kTop), static_cast<float>(kTop) + 0.5f, ds, ids)) return false;
  for (int b = 0; b < 8; ++b) {
    std::byte* out = dst + b * (kQs + 16);
    store_f16(out, ds[b]);
    store_f16(out + 2, min[b]);
    block_nibbles<Bits>(src + b * kBlock, min[b], ids[b], 0.5f, out + kQs, out + 4);
  }
  return true;
}
#endif

}  // namespace

bool quantize_8_blocks(TensorType type, const float* src, std::byte* dst) noexcept {
#if !SAFEWEIGHTS_QUANT_SCALAR && SAFEWEIGHTS_QUANT_AVX2
  if (!lanes::has_avx2()) return false;
  switch (type) {
    case TensorType::Q8_0: return q8_0_blocks_8(src, dst);
    case TensorType::Q4_0: return symmetric_blocks_8<4>(src, dst);
    case TensorType::Q5_0: return symmetric_blocks_8<5>(src, dst);
    case TensorType::Q4_1: return affine_blocks_8<4>(src, dst);
    case TensorType::Q5_1: return affine_blocks_8<5>(src, dst);
    default: return false;
  }
#else
  (void)type;
  (void)src;
  (void)dst;
  return false;
#endif
}

}  // namespace safeweights::quant
