// The codecs of ggml's grid types: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M. A block stores,
// for each group of 8 (or 4) elements, the index of a grid entry (iq_grids.h), signs, and small scales
// under one float16 scale. Dequantizing computes ggml's products in its order.
#include <cstdint>

#include "quant/codecs.h"
#include "quant/iq_grids.h"

namespace safeweights::quant {
namespace {

using iq::kIq1Delta;
using iq::sign_byte;

inline float signed_unit(unsigned signs, int j) noexcept { return (signs >> j) & 1u ? -1.0f : 1.0f; }

// Eight elements: scale x grid value x sign, in ggml's order ((scale x value) x sign).
template <typename Entry>
inline void put_signed(float scale, const Entry& values, unsigned signs, float* y) noexcept {
  for (int j = 0; j < 8; ++j) y[j] = scale * static_cast<float>(values[j]) * signed_unit(signs, j);
}

// Eight elements from two 4-wide IQ3 entries.
template <typename Entry>
inline void put_signed_pair(float scale, const Entry& first, const Entry& second, unsigned signs, float* y) noexcept {
  for (int j = 0; j < 4; ++j) {
    y[j] = scale * static_cast<float>(first[j]) * signed_unit(signs, j);
    y[j + 4] = scale * static_cast<float>(second[j]) * signed_unit(signs, j + 4);
  }
}

// IQ2_XXS (66 bytes a 256): float16 d, then per 32 elements 8 bytes: four grid indices, and a 32-bit word
// of four 7-bit sign codes and a 4-bit scale s (d x (0.5 + s) x 0.25).
void dequantize_iq2_xxs(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * 66;
    const float d = load_f16(in);
    for (int ib = 0; ib < 8; ++ib) {
      const std::byte* group = in + 2 + 8 * ib;
      const std::uint32_t word = le::u32(group + 4);
      const float db = d * (0.5f + static_cast<float>(word >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l, y += 8) put_signed(db, iq::kIq2xxsGrid[load_u8(group + l)], sign_byte(word >> (7 * l)), y);
    }
  }
}

// Two 4-bit scales a 32 elements, each for 16 of them: d x (0.5 + s) x 0.25 (IQ2_XS, IQ2_S).
inline void iq2_half_scales(float d, unsigned byte, float* db) noexcept {
  db[0] = d * (0.5f + static_cast<float>(byte & 0xfu)) * 0.25f;
  db[1] = d * (0.5f + static_cast<float>(byte >> 4)) * 0.25f;
}

// IQ2_XS (74 bytes a 256): float16 d, 32 16-bit words (a 9-bit grid index and a 7-bit sign code), 8 scale
// bytes.
void dequantize_iq2_xs(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * 74;
    const float d = load_f16(in);
    for (int ib = 0; ib < 8; ++ib) {
      float db[2];
      iq2_half_scales(d, load_u8(in + 66 + ib), db);
      for (int l = 0; l < 4; ++l, y += 8) {
        const unsigned q = load_u16(in + 2 + 2 * (4 * ib + l));
        put_signed(db[l / 2], iq::kIq2xsGrid[q & 511u], sign_byte(q >> 9), y);
      }
    }
  }
}

// IQ2_S (82 bytes a 256): float16 d, 32 low bytes of 10-bit grid indices, 32 sign bytes, 8 bytes of the
// indices' high bits (2 a group of 8), 8 scale bytes.
void dequantize_iq2_s(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * 82;
    const float d = load_f16(in);
    for (int ib = 0; ib < 8; ++ib) {
      float db[2];
      iq2_half_scales(d, load_u8(in + 74 + ib), db);
      const unsigned high = load_u8(in + 66 + ib);
      for (int l = 0; l < 4; ++l, y += 8) {
        const unsigned index = load_u8(in + 2 + 4 * ib + l) | ((high << (8 - 2 * l)) & 0x300u);
        put_signed(db[l / 2], iq::kIq2sGrid[index], load_u8(in + 34 + 4 * ib + l), y);
      }
    }
  }
}

// IQ3_XXS (98 bytes a 256): float16 d, 64 grid indices (one a 4 elements), then per 32 elements a 32-bit
// word of four 7-bit sign codes and a 4-bit scale s (d x (0.5 + s) x 0.5).
void dequantize_iq3_xxs(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * 98;
    const float d = load_f16(in);
    for (int ib = 0; ib < 8; ++ib) {
      const std::byte* qs = in + 2 + 8 * ib;
      const std::uint32_t word = le::u32(in + 66 + 4 * ib);
      const float db = d * (0.5f + static_cast<float>(word >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l, y += 8)
        put_signed_pair(db, iq::kIq3xxsGrid[load_u8(qs + 2 * l)], iq::kIq3xxsGrid[load_u8(qs + 2 * l + 1)], sign_byte(word >> (7 * l)), y);
    }
  }
}

// IQ3_S (110 bytes a 256): float16 d, 64 low bytes of 9-bit grid indices, 8 bytes of their high bits, 32
// sign bytes, 4 bytes of two 4-bit scales s (d x (1 + 2s), one a 32 elements).
void dequantize_iq3_s(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * 110;
    const float d = load_f16(in);
    for (int ib = 0; ib < 8; ++ib) {
      const unsigned scale_byte = load_u8(in + 106 + ib / 2);
      const float db = d * static_cast<float>(1 + 2 * static_cast<int>(ib % 2 ? scale_byte >> 4 : scale_byte & 0xfu));
      const unsigned high = load_u8(in + 66 + ib);
      const std::byte* qs = in + 2 + 8 * ib;
      for (int l = 0; l < 4; ++l, y += 8) {
        const unsigned first = load_u8(qs + 2 * l) | ((high << (8 - 2 * l)) & 256u);
        const unsigned second = load_u8(qs + 2 * l + 1) | ((high << (7 - 2 * l)) & 256u);
        put_signed_pair(db, iq::kIq3sGrid[first], iq::kIq3sGrid[second], load_u8(in + 74 + 4 * ib + l), y);
      }
    }
  }
}

// Eight IQ1 elements: scale x (grid value + delta).
inline void put_shifted(float scale, const std::array<std::int8_t, 8>& values, float delta, float* y) noexcept {
  for (int j = 0; j < 8; ++j) y[j] = scale * (static_cast<float>(values[j]) + delta);
}

// IQ1_S (50 bytes a 256): float16 d, 32 low bytes of 11-bit grid indices, then per 32 elements a 16-bit
// word: four 3-bit index highs, a 3-bit scale s (d x (2s + 1)) and the sign of the delta.
void dequantize_iq1_s(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * 50;
    const float d = load_f16(in);
    for (int ib = 0; ib < 8; ++ib) {
      const unsigned qh = load_u16(in + 34 + 2 * ib);
      const float dl = d * static_cast<float>(2 * static_cast<int>((qh >> 12) & 7u) + 1);
      const float delta = qh & 0x8000u ? -kIq1Delta : kIq1Delta;
      for (int l = 0; l < 4; ++l, y += 8) {
        const unsigned index = load_u8(in + 2 + 4 * ib + l) | (((qh >> (3 * l)) & 7u) << 8);
        put_shifted(dl, iq::kIq1sGrid[index], delta, y);
      }
    }
  }
}

// IQ1_M (56 bytes a 256): 32 low bytes of 11-bit grid indices, 16 bytes of (3-bit index high, delta sign)
// nibbles, 4 16-bit scale words: 3-bit scales s (d x (2s + 1), one a 16 elements) in their low 12 bits,
// the float16 d in their top nibbles.
void dequantize_iq1_m(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * 56;
    unsigned sc[4];
    for (int i = 0; i < 4; ++i) sc[i] = load_u16(in + 48 + 2 * i);
    const auto d_bits = static_cast<std::uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0xf0u) | ((sc[2] >> 4) & 0xf00u) | (sc[3] & 0xf000u));
    const float d = f16_to_f32(d_bits);
    for (int ib = 0; ib < 8; ++ib) {
      const unsigned scales = sc[ib / 2] >> (6 * (ib % 2));
      const float dl[2] = {d * static_cast<float>(2 * static_cast<int>(scales & 7u) + 1),
                           d * static_cast<float>(2 * static_cast<int>((scales >> 3) & 7u) + 1)};
      for (int l = 0; l < 4; ++l, y += 8) {
        const unsigned nibble = load_u8(in + 32 + 2 * ib + l / 2) >> (4 * (l % 2));
        const unsigned index = load_u8(in + 4 * ib + l) | ((nibble & 7u) << 8);
        put_shifted(dl[l / 2], iq::kIq1sGrid[index], nibble & 8u ? -kIq1Delta : kIq1Delta, y);
      }
    }
  }
}

}  // namespace

Codec iq_grid_codec(TensorType type) noexcept {
  switch (type) {
    case TensorType::IQ2_XXS: return {nullptr, dequantize_iq2_xxs};
    case TensorType::IQ2_XS: return {nullptr, dequantize_iq2_xs};
    case TensorType::IQ2_S: return {nullptr, dequantize_iq2_s};
    case TensorType::IQ3_XXS: return {nullptr, dequantize_iq3_xxs};
    case TensorType::IQ3_S: return {nullptr, dequantize_iq3_s};
    case TensorType::IQ1_S: return {nullptr, dequantize_iq1_s};
    case TensorType::IQ1_M: return {nullptr, dequantize_iq1_m};
    default: return {};
  }
}

}  // namespace safeweights::quant
