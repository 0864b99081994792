// Scalar conversions between float32 and the two 16-bit floats ggml stores (IEEE binary16 "F16" and
// bfloat16 "BF16"), with ggml's results on every input. Internal to src/quant: the block codecs use
// them for their scales, quantize.cpp for whole F16/BF16 rows.
//
// Rounding is to nearest, ties to even, in both narrowings; subnormals are kept (never flushed);
// overflow gives infinity. NaN: F16 gives the quiet NaN 0x7E00 with the input's sign (ggml's portable
// conversion; its F16C path keeps payload bits instead, so only NaN payloads can differ between ggml
// builds), BF16 keeps the top payload bits and sets the quiet bit. Widening is exact, but for NaN: F16's
// comes out quiet (ggml widens through a float multiplication), BF16's is kept as it is.
//
// Thread safety: pure functions.
#pragma once

#include <bit>
#include <cstdint>

namespace safeweights::quant {

inline std::uint16_t f32_to_f16(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t mag = bits & 0x7fffffffu;
  if (mag > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (mag >= 0x477ff000u) return sign | 0x7c00u;  // 65520 and up round to infinity
  if (mag >= 0x38800000u) {                       // a normal half: drop 13 mantissa bits
    const std::uint32_t kept = (mag - 0x38000000u) >> 13;  // exponent rebiased from 127 to 15
    const std::uint32_t dropped = mag & 0x1fffu;
    const std::uint32_t up = dropped > 0x1000u || (dropped == 0x1000u && (kept & 1u));
    return static_cast<std::uint16_t>(sign | (kept + up));  // a carry moves into the exponent, as it should
  }
  if (mag <= 0x33000000u) return sign;  // at most 2^-25 (half the least subnormal; the tie goes to 0)
  // A subnormal half counts units of 2^-24: the full significand shifted right, rounded to even.
  const std::uint32_t significand = (mag & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - (mag >> 23);  // 14..24 for the range left
  const std::uint32_t kept = significand >> shift;
  const std::uint32_t dropped = significand & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  const std::uint32_t up = dropped > half || (dropped == half && (kept & 1u));
  return static_cast<std::uint16_t>(sign | (kept + up));
}

inline float f16_to_f32(std::uint16_t half) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1fu;
  const std::uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1fu) {  // Inf; NaN keeps its payload and comes out quiet, as ggml's float arithmetic makes it
    const std::uint32_t quiet = mantissa != 0 ? 0x00400000u : 0u;
    return std::bit_cast<float>(sign | 0x7f800000u | quiet | (mantissa << 13));
  }
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa x 2^-24, exact in float32.
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
  return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
}

inline std::uint16_t f32_to_bf16(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  // Adding just under half an ulp, plus one when the kept part is odd, rounds to nearest even.
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

inline float bf16_to_f32(std::uint16_t value) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(value) << 16);
}

}  // namespace safeweights::quant
