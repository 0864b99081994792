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

// Each result is computed for every class of input and the right one selected, without branches, so
// that row loops vectorise.
inline std::uint16_t f32_to_f16(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t mag = bits & 0x7fffffffu;
  // A normal half: rebias the exponent from 127 to 15 and drop 13 mantissa bits, rounding to even (a
  // carry moves into the exponent, as it should).
  const std::uint32_t normal = (mag - 0x38000000u + 0xfffu + ((mag >> 13) & 1u)) >> 13;
  // Below 2^-14, a subnormal half counts units of 2^-24: adding 0.5 (whose ulp is 2^-24) makes the
  // float adder round to that unit, to even; the sum's low bits are the half.
  const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(std::bit_cast<float>(mag) + 0.5f) - 0x3f000000u;
  std::uint32_t half = mag < 0x38800000u ? subnormal : normal;
  half = mag >= 0x477ff000u ? 0x7c00u : half;  // 65520 and up round to infinity
  half = mag > 0x7f800000u ? 0x7e00u : half;   // NaN
  return static_cast<std::uint16_t>(sign | half);
}

inline float f16_to_f32(std::uint16_t half) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  const std::uint32_t rest = static_cast<std::uint32_t>(half & 0x7fffu) << 13;
  // Normal values: the half's exponent and mantissa placed in a float32 read 2^-112 times the value;
  // one exact multiplication by 2^112 rebiases. Zero and subnormals: mantissa x 2^-24, from an integer,
  // so that no float32 subnormal is involved (a thread with denormals-are-zero set would read it as 0).
  const std::uint32_t normal = std::bit_cast<std::uint32_t>(std::bit_cast<float>(rest) * 0x1p112f);
  const auto mantissa = static_cast<std::int32_t>(half & 0x3ffu);
  const std::uint32_t small = std::bit_cast<std::uint32_t>(static_cast<float>(mantissa) * 0x1p-24f);
  const std::uint32_t finite = rest < 0x00800000u ? small : normal;
  // Inf; NaN keeps its payload and comes out quiet, as ggml's float arithmetic makes it.
  const std::uint32_t special = 0x7f800000u | rest | (rest != 0x0f800000u ? 0x00400000u : 0u);
  return std::bit_cast<float>(sign | (rest >= 0x0f800000u ? special : finite));
}

inline std::uint16_t f32_to_bf16(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  // Adding just under half an ulp, plus one when the kept part is odd, rounds to nearest even.
  const std::uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const std::uint32_t quiet_nan = (bits >> 16) | 0x40u;
  return static_cast<std::uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

inline float bf16_to_f32(std::uint16_t value) noexcept { return std::bit_cast<float>(static_cast<std::uint32_t>(value) << 16); }

}  // namespace safeweights::quant
