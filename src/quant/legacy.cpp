// ggml's first block types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1 (32 elements a block). The quantizers
// follow ggml's reference quantizers (quantize_row_*_ref) step for step, and with importance weights its
// quantize_row_*_impl (Q4_0 ... Q5_1; ggml's Q8_0 ignores weights), in the same float operations in the
// same order, so that they give its bytes on any input; the dequantizers compute q*d (+ m) as ggml's do.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "quant/codecs.h"
#include "quant/q8_lanes.h"
#include "quant/scale_search.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace safeweights::quant {
namespace {

constexpr std::size_t kBlock = 32;

// The float -> 8-bit integer conversions ggml's C code writes ((int8_t)f, (uint8_t)f, an int8_t
// assigned a float) as x86-64 compilers emit them: truncate to int32 (NaN and values out of range give
// INT32_MIN, cvttss2si's "integer indefinite") and keep the low byte. Only NaN or infinite input reaches
// the out-of-range case.
inline std::uint8_t low_byte(float f) noexcept {
  const bool in_range = f >= -2147483648.0f && f < 2147483648.0f;
  const std::int32_t converted = static_cast<std::int32_t>(in_range ? f : 0.0f);
  const std::int32_t i = in_range ? converted : std::numeric_limits<std::int32_t>::min();
  return static_cast<std::uint8_t>(static_cast<std::uint32_t>(i) & 0xffu);
}
// roundf(f) (halves away from zero) converted as above. Written out so that the loop vectorises instead
// of calling roundf: truncation is exact here, so is f minus it, and the comparison with one half.
inline std::uint8_t rounded_low_byte(float f) noexcept {
  const bool in_range = f >= -2147483648.0f && f < 2147483648.0f;  // roundf keeps these in range
  const std::int32_t converted = static_cast<std::int32_t>(in_range ? f : 0.0f);
  const std::int32_t t = in_range ? converted : std::numeric_limits<std::int32_t>::min();
  const float frac = in_range ? f - static_cast<float>(t) : 0.0f;
  const std::int32_t q = t + (frac >= 0.5f ? 1 : 0) - (frac <= -0.5f ? 1 : 0);
  return static_cast<std::uint8_t>(static_cast<std::uint32_t>(q) & 0xffu);
}
// MIN(top, (int8_t)f) stored in a uint8_t.
inline std::uint8_t capped(float f, int top) noexcept {
  const int v = static_cast<std::int8_t>(low_byte(f));
  return static_cast<std::uint8_t>(v < top ? v : top);
}

// The value of largest magnitude (its sign kept), the first one met on ties; NaN never wins.
float signed_absmax(const float* x) noexcept {
  float amax = 0.0f, max = 0.0f;
  for (std::size_t j = 0; j < kBlock; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// Minimum and maximum as ggml takes them (NaN never wins; an all-NaN block keeps FLT_MAX / -FLT_MAX).
void min_max(const float* x, float& min, float& max) noexcept {
  min = std::numeric_limits<float>::max();
  max = -std::numeric_limits<float>::max();
  for (std::size_t j = 0; j < kBlock; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
}

// ggml's MAX(a, b) is (a > b ? a : b): a NaN in x is taken and forgotten again at the next number.
float absmax_ggml(const float* x) noexcept {
  float amax = 0.0f;
  for (std::size_t j = 0; j < kBlock; ++j) {
    const float a = std::fabs(x[j]);
    amax = amax > a ? amax : a;
  }
  return amax;
}

inline float inverse(float d) noexcept { return d != 0.0f ? 1.0f / d : 0.0f; }

// Elements j and j+16 of a 4- or 5-bit block: their low four bits share byte j of qs (for 4 bits
// unmasked, as ggml writes them), their fifth bits go to bits j and j+16 of qh.
template <int Bits>
inline void pack_pair(std::byte* qs, std::size_t j, std::uint8_t lo, std::uint8_t hi, std::uint32_t& qh) noexcept {
  if constexpr (Bits == 4) {
    qs[j] = static_cast<std::byte>(lo | (hi << 4));
  } else {
    qs[j] = static_cast<std::byte>((lo & 0xfu) | ((hi & 0xfu) << 4));
    qh |= ((lo & 0x10u) >> 4) << j;
    qh |= ((hi & 0x10u) >> 4) << (j + 16);
  }
}

// Symmetric 4 and 5 bits: d = signed max / -2^(bits-1), q = x/d + offset, nibble pairs (j, j+16).
template <int Bits>
void quantize_symmetric_each(const float* src, std::byte* dst, std::size_t blocks) {
  constexpr int kOffset = 1 << (Bits - 1);
  constexpr std::size_t kQs = Bits == 4 ? 2 : 6;  // where the nibbles start (Q5_0 puts qh first)
  for (std::size_t b = 0; b < blocks; ++b, src += kBlock) {
    std::byte* out = dst + b * (kQs + 16);
    const float d = signed_absmax(src) / static_cast<float>(-kOffset);
    const float id = inverse(d);
    store_f16(out, d);
    std::uint32_t qh = 0;
    for (std::size_t j = 0; j < 16; ++j) {
      const std::uint8_t lo = capped(src[j] * id + (static_cast<float>(kOffset) + 0.5f), 2 * kOffset - 1);
      const std::uint8_t hi = capped(src[j + 16] * id + (static_cast<float>(kOffset) + 0.5f), 2 * kOffset - 1);
      pack_pair<Bits>(out + kQs, j, lo, hi, qh);
    }
    if constexpr (Bits == 5) le::store(out + 2, qh, 4);
  }
}

// With a minimum: d = (max - min) / (2^bits - 1), q = (x - min)/d rounded half up.
template <int Bits>
void quantize_affine_each(const float* src, std::byte* dst, std::size_t blocks) {
  constexpr int kTop = (1 << Bits) - 1;
  constexpr std::size_t kQs = Bits == 4 ? 4 : 8;
  for (std::size_t b = 0; b < blocks; ++b, src += kBlock) {
    std::byte* out = dst + b * (kQs + 16);
    float min, max;
    min_max(src, min, max);
    const float d = (max - min) / static_cast<float>(kTop);
    const float id = inverse(d);
    store_f16(out, d);
    store_f16(out + 2, min);
    std::uint32_t qh = 0;
    for (std::size_t j = 0; j < 16; ++j) {
      const float x0 = (src[j] - min) * id;
      const float x1 = (src[j + 16] - min) * id;
      if constexpr (Bits == 4)
        pack_pair<Bits>(out + kQs, j, capped(x0 + 0.5f, kTop), capped(x1 + 0.5f, kTop), qh);
      else  // ggml does not cap Q5_1's values
        pack_pair<Bits>(out + kQs, j, low_byte(x0 + 0.5f), low_byte(x1 + 0.5f), qh);
    }
    if constexpr (Bits == 5) le::store(out + 4, qh, 4);
  }
}

// absmax_ggml of a block whose values are all finite, in four independent lanes (GCC and Clang vector
// types: every target has them, x86-64's baseline as SSE), because ggml's sequential form is a chain of
// 32 dependent comparisons that no compiler vectorises. Without a NaN every order gives the same
// maximum (fabs makes no -0), so the lanes' result is ggml's. False for a block with a NaN or an
// infinity: there the sequential form decides (a NaN makes ggml forget the values before it).
using Floats4 = float __attribute__((vector_size(16)));
using Ints4 = std::int32_t __attribute__((vector_size(16)));

bool finite_absmax(const float* x, float& amax) noexcept {
  Floats4 lane{}, poison{};  // a - a is 0 for a finite a, NaN for an infinite or NaN one
  for (std::size_t j = 0; j < kBlock; j += 4) {
    Floats4 v;
    std::memcpy(&v, x + j, sizeof v);
    const Floats4 a = reinterpret_cast<Floats4>(reinterpret_cast<Ints4>(v) & 0x7fffffff);
    const Ints4 keep = lane > a;  // -1 where lane > a: ggml's MAX(lane, a)
    lane = reinterpret_cast<Floats4>((keep & reinterpret_cast<Ints4>(lane)) | (~keep & reinterpret_cast<Ints4>(a)));
    poison += a - a;
  }
  float any = 0.0f;
  amax = 0.0f;
  for (int l = 0; l < 4; ++l) {
    amax = amax > lane[l] ? amax : lane[l];
    any += poison[l];
  }
  return any == 0.0f;
}

// The 32 codes roundf(x * id) of a block where every |x * id| < 127.5, computed as rounded_low_byte
// does (truncate, then compare the exact remainder with one half) without its range selection: every
// code is in [-127, 127], so narrowing with saturation (SSE2's packs) equals taking the low byte.
void small_codes(const float* x, float id, std::int8_t* q) noexcept {
#if defined(__SSE2__)
  const __m128 vid = _mm_set1_ps(id), half = _mm_set1_ps(0.5f), minus_half = _mm_set1_ps(-0.5f);
  __m128i w[kBlock / 4];
  for (std::size_t i = 0; i < kBlock / 4; ++i) {
    const __m128 v = _mm_mul_ps(_mm_loadu_ps(x + 4 * i), vid);
    const __m128i t = _mm_cvttps_epi32(v);
    const __m128 frac = _mm_sub_ps(v, _mm_cvtepi32_ps(t));
    const __m128i up = _mm_castps_si128(_mm_cmpge_ps(frac, half));          // -1 where frac >= 0.5
    const __m128i down = _mm_castps_si128(_mm_cmple_ps(frac, minus_half));  // -1 where frac <= -0.5
    w[i] = _mm_add_epi32(_mm_sub_epi32(t, up), down);
  }
  const __m128i lo = _mm_packs_epi16(_mm_packs_epi32(w[0], w[1]), _mm_packs_epi32(w[2], w[3]));
  const __m128i hi = _mm_packs_epi16(_mm_packs_epi32(w[4], w[5]), _mm_packs_epi32(w[6], w[7]));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), lo);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), hi);
#else
  for (std::size_t j = 0; j < kBlock; ++j) {
    const float v = x[j] * id;
    const auto t = static_cast<std::int32_t>(v);
    const float frac = v - static_cast<float>(t);
    q[j] = static_cast<std::int8_t>(t + (frac >= 0.5f ? 1 : 0) - (frac <= -0.5f ? 1 : 0));
  }
#endif
}

// 8 bits: d = absmax / 127, q = round(x/d) (half away from zero). Q8_1 also stores sum(q) x d.
template <bool WithSum>
void quantize_q8_each(const float* src, std::byte* dst, std::size_t blocks) {
  constexpr std::size_t kQs = WithSum ? 4 : 2;
  for (std::size_t b = 0; b < blocks; ++b, src += kBlock) {
    std::byte* out = dst + b * (kQs + kBlock);
    float amax = 0.0f;
    const bool finite = finite_absmax(src, amax);
    if (!finite) amax = absmax_ggml(src);
    const float d = amax / 127.0f;
    const float id = inverse(d);
    store_f16(out, d);
    std::int8_t q[kBlock];
    if (finite && amax * id < 127.5f) {
      // Every |x| <= amax, so every |x * id| <= amax * id < 127.5 (about 127 for any finite block; the
      // product is infinite or NaN for the infinite 1/d of a tiny d).
      small_codes(src, id, q);
    } else {
      for (std::size_t j = 0; j < kBlock; ++j) q[j] = static_cast<std::int8_t>(rounded_low_byte(src[j] * id));
    }
    std::memcpy(out + kQs, q, kBlock);
    if constexpr (WithSum) {
      int sum = 0;
      for (std::int8_t v : q) sum += v;
      store_f16(out + 2, static_cast<float>(sum) * d);
    }
  }
}

// Eight blocks at a time where quantize_8_blocks takes them (q8_lanes.h); the blocks it leaves and a
// row's last ones (fewer than eight) one at a time by each(src, dst, blocks).
template <typename Each>
void by_eights(TensorType type, const float* src, std::byte* dst, std::size_t blocks, std::size_t block_bytes, Each each) {
  std::size_t b = 0;
  for (; b + 8 <= blocks; b += 8) {
    const float* x = src + b * kBlock;
    std::byte* out = dst + b * block_bytes;
    if (!quantize_8_blocks(type, x, out)) each(x, out, 8);
  }
  each(src + b * kBlock, dst + b * block_bytes, blocks - b);
}

template <int Bits>
void quantize_symmetric(const float* src, std::byte* dst, std::size_t blocks) {
  constexpr std::size_t kBytes = (Bits == 4 ? 2 : 6) + 16;
  by_eights(Bits == 4 ? TensorType::Q4_0 : TensorType::Q5_0, src, dst, blocks, kBytes, quantize_symmetric_each<Bits>);
}

template <int Bits>
void quantize_affine(const float* src, std::byte* dst, std::size_t blocks) {
  constexpr std::size_t kBytes = (Bits == 4 ? 4 : 8) + 16;
  by_eights(Bits == 4 ? TensorType::Q4_1 : TensorType::Q5_1, src, dst, blocks, kBytes, quantize_affine_each<Bits>);
}

// Q8_0 eight blocks at a time where it can; Q8_1 one at a time.
template <bool WithSum>
void quantize_q8(const float* src, std::byte* dst, std::size_t blocks) {
  if constexpr (WithSum)
    quantize_q8_each<true>(src, dst, blocks);
  else
    by_eights(TensorType::Q8_0, src, dst, blocks, 2 + kBlock, quantize_q8_each<false>);
}

// ---- with importance weights (ggml's quantize_row_q4_0_impl ... q5_1_impl) ---------------------------

// The mean square of a whole row, its sum taken in order (the weighted paths' sigma2).
float row_mean_square(const float* x, std::size_t n) noexcept {
  float sum = 0;
  for (std::size_t j = 0; j < n; ++j) sum += x[j] * x[j];
  return sum / static_cast<float>(n);
}

// The weights of consecutive blocks: importance x sqrt(sigma2 + x^2).
void block_weights(const float* x, const float* importance, float sigma2, float* weight, std::size_t n) noexcept {
  for (std::size_t j = 0; j < n; ++j) weight[j] = importance[j] * std::sqrt(sigma2 + x[j] * x[j]);
}

// Blocks are searched eight at a time (scale_search.h's groups, one block a lane); a row's last blocks,
// fewer than eight, one by one.
constexpr std::size_t kGroup = 8;

// The weighted paths' walk over a row: sigma2 (the row's mean square), then for each group of up to
// kGroup blocks their weights, search(blocks in the group, values, weights), and store(block, index
// in the group) for each block.
template <typename Search, typename Store>
void weighted_blocks(const float* src, std::size_t row_length, const float* importance, Search&& search, Store&& store) {
  const float sigma2 = row_mean_square(src, row_length);
  const std::size_t blocks = row_length / kBlock;
  float weight[kGroup * kBlock];
  for (std::size_t b = 0; b < blocks; b += kGroup) {
    const std::size_t group = std::min(kGroup, blocks - b);
    const float* x = src + b * kBlock;
    block_weights(x, importance + b * kBlock, sigma2, weight, group * kBlock);
    search(group, x, static_cast<const float*>(weight));
    for (std::size_t k = 0; k < group; ++k) store(b + k, k);
  }
}

// Symmetric 4 and 5 bits: make_qx_quants' trial search over each block, codes 0..2^bits-1 (offset
// 2^(bits-1)) packed as the reference path packs them.
template <int Bits>
void quantize_symmetric_weighted(const float* src, std::byte* dst, std::size_t row_length, const float* importance) {
  constexpr int kOffset = 1 << (Bits - 1);
  constexpr std::size_t kQs = Bits == 4 ? 2 : 6;
  float d[kGroup];
  std::int8_t L[kGroup * kBlock];
  auto search = [&](std::size_t group, const float* x, const float* weight) {
    if (group == kGroup)
      search_scale_symmetric_trials_groups(kGroup, kBlock, kOffset, x, weight, L, d);
    else
      for (std::size_t k = 0; k < group; ++k)
        d[k] = search_scale_symmetric_trials(kBlock, kOffset, x + k * kBlock, weight + k * kBlock, L + k * kBlock);
  };
  auto store = [&](std::size_t block, std::size_t k) {
    std::byte* out = dst + block * (kQs + 16);
    const std::int8_t* l = L + k * kBlock;
    store_f16(out, d[k]);
    std::uint32_t qh = 0;
    for (std::size_t j = 0; j < 16; ++j) pack_pair<Bits>(out + kQs, j, static_cast<std::uint8_t>(l[j]), static_cast<std::uint8_t>(l[j + 16]), qh);
    if constexpr (Bits == 5) le::store(out + 2, qh, 4);
  };
  weighted_blocks(src, row_length, importance, search, store);
}

// With a minimum: make_qkx3_quants' affine search over each block (ggml's steps -0.9 + 0.05 k, k = 0..36).
template <int Bits>
void quantize_affine_weighted(const float* src, std::byte* dst, std::size_t row_length, const float* importance) {
  constexpr int kTop = (1 << Bits) - 1;
  constexpr std::size_t kQs = Bits == 4 ? 4 : 8;
  float d[kGroup], neg_min[kGroup];
  std::uint8_t L[kGroup * kBlock];
  auto search = [&](std::size_t group, const float* x, const float* weight) {
    if (group == kGroup)
      search_scale_min_groups(kGroup, kBlock, kTop, x, weight, L, d, neg_min, -0.9f, 0.05f, 36, false);
    else
      for (std::size_t k = 0; k < group; ++k)
        d[k] = search_scale_min(kBlock, kTop, x + k * kBlock, weight + k * kBlock, L + k * kBlock, &neg_min[k], -0.9f, 0.05f, 36, false);
  };
  auto store = [&](std::size_t block, std::size_t k) {
    std::byte* out = dst + block * (kQs + 16);
    const std::uint8_t* l = L + k * kBlock;
    store_f16(out, d[k]);
    store_f16(out + 2, -neg_min[k]);
    std::uint32_t qh = 0;
    for (std::size_t j = 0; j < 16; ++j) pack_pair<Bits>(out + kQs, j, l[j], l[j + 16], qh);
    if constexpr (Bits == 5) le::store(out + 4, qh, 4);
  };
  weighted_blocks(src, row_length, importance, search, store);
}

// The 32 unsigned codes of a 4- or 5-bit block: nibbles (j, j+16), the fifth bits from qh.
template <int Bits>
void codes(const std::byte* qs, const std::byte* qh_bytes, int* q) noexcept {
  std::uint32_t qh = 0;
  if constexpr (Bits == 5) qh = le::u32(qh_bytes);
  for (std::size_t j = 0; j < 16; ++j) {
    const unsigned byte = load_u8(qs + j);
    q[j] = static_cast<int>((byte & 0xfu) | (((qh >> j) & 1u) << 4));
    q[j + 16] = static_cast<int>((byte >> 4) | (((qh >> (j + 16)) & 1u) << 4));
  }
}

template <int Bits>
void dequantize_symmetric(const std::byte* src, float* dst, std::size_t blocks) {
  constexpr std::size_t kQs = Bits == 4 ? 2 : 6;
  constexpr int kOffset = 1 << (Bits - 1);
  for (std::size_t b = 0; b < blocks; ++b, dst += kBlock) {
    const std::byte* in = src + b * (kQs + 16);
    const float d = load_f16(in);
    int q[kBlock];
    codes<Bits>(in + kQs, in + 2, q);
    for (std::size_t j = 0; j < kBlock; ++j) dst[j] = static_cast<float>(q[j] - kOffset) * d;
  }
}

template <int Bits>
void dequantize_affine(const std::byte* src, float* dst, std::size_t blocks) {
  constexpr std::size_t kQs = Bits == 4 ? 4 : 8;
  for (std::size_t b = 0; b < blocks; ++b, dst += kBlock) {
    const std::byte* in = src + b * (kQs + 16);
    const float d = load_f16(in), m = load_f16(in + 2);
    int q[kBlock];
    codes<Bits>(in + kQs, in + 4, q);
    for (std::size_t j = 0; j < kBlock; ++j) dst[j] = static_cast<float>(q[j]) * d + m;
  }
}

template <bool WithSum>
void dequantize_q8(const std::byte* src, float* dst, std::size_t blocks) {
  constexpr std::size_t kQs = WithSum ? 4 : 2;
  for (std::size_t b = 0; b < blocks; ++b, dst += kBlock) {
    const std::byte* in = src + b * (kQs + kBlock);
    const float d = load_f16(in);
    for (std::size_t j = 0; j < kBlock; ++j) dst[j] = static_cast<float>(load_i8(in + kQs + j)) * d;
  }
}

}  // namespace

Codec legacy_codec(TensorType type) noexcept {
  switch (type) {
    case TensorType::Q4_0: return {quantize_symmetric<4>, dequantize_symmetric<4>, quantize_symmetric_weighted<4>};
    case TensorType::Q5_0: return {quantize_symmetric<5>, dequantize_symmetric<5>, quantize_symmetric_weighted<5>};
    case TensorType::Q4_1: return {quantize_affine<4>, dequantize_affine<4>, quantize_affine_weighted<4>};
    case TensorType::Q5_1: return {quantize_affine<5>, dequantize_affine<5>, quantize_affine_weighted<5>};
    case TensorType::Q8_0: return {quantize_q8<false>, dequantize_q8<false>};
    case TensorType::Q8_1: return {quantize_q8<true>, dequantize_q8<true>};
    default: return {};
  }
}

}  // namespace safeweights::quant
