// NVFP4 (ggml's GGML_TYPE_NVFP4, NVIDIA's 4-bit float with per-16 scales): blocks of 64 elements, four
// UE4M3 scale bytes (one per sub-block of 16) then 32 bytes of E2M1 codes (36 bytes). Both directions
// compute ggml's expressions (ggml-quants.c, ggml-impl.h's UE4M3 conversions) in its order; its
// quantizer takes no importance weights (quantize_nvfp4 ignores them), so there is no weighted path.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/codecs.h"
#include "quant/e2m1.h"

namespace safeweights::quant {
namespace {

constexpr std::size_t kBlock = 64, kSub = 16, kSubBlocks = kBlock / kSub, kBlockBytes = kSubBlocks + kBlock / 2;
constexpr std::uint8_t kUe4m3Max = 0x7e;  // 448, what ggml's conversion saturates to

// A UE4M3 scale byte's value, halved for the doubled E2M1 values (quant/e2m1.h). ggml reads bits 0-6 of
// any byte (bit 7 is ignored) but takes 0x7f (E4M3's NaN) as zero; 0xff is not special. Every value is
// exact in float, so the product below it is ggml's.
float ue4m3_half(std::uint8_t x) noexcept {
  if (x == 0 || x == 0x7f) return 0.0f;
  const int exponent = (x >> 3) & 0xf, mantissa = x & 0x7;
  if (exponent == 0) return std::ldexp(static_cast<float>(mantissa), -10);  // subnormal: m x 2^-9, halved
  return std::ldexp(static_cast<float>(8 + mantissa), exponent - 11);       // (1 + m/8) x 2^(e-7), halved
}

// ggml's float -> UE4M3: non-positive and NaN to 0, saturating at 448, rounding the mantissa by its
// next bit alone (half up, not to even); below the normal range, round(x x 2^9) as ggml writes it
// (x * 512 + 0.5, truncated), held to 1..7 or 0.
std::uint8_t to_ue4m3(float x) noexcept {
  if (!(x > 0.0f)) return 0;
  if (x > 448.0f) x = 448.0f;
  std::uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  int exponent = static_cast<int>((bits >> 23) & 0xffu) - 127 + 7;
  if (exponent <= 0) {
    const int m = static_cast<int>(x * 512.0f + 0.5f);
    return m < 1 ? 0 : static_cast<std::uint8_t>(m > 7 ? 7 : m);
  }
  if (exponent >= 15) return kUe4m3Max;
  int mantissa = static_cast<int>((bits >> 20) & 0x7u) + static_cast<int>((bits >> 19) & 0x1u);
  if (mantissa > 7) {
    mantissa = 0;
    if (++exponent >= 15) return kUe4m3Max;
  }
  return static_cast<std::uint8_t>(exponent << 3 | mantissa);
}

void dequantize_nvfp4(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * kBlockBytes;
    for (std::size_t s = 0; s < kSubBlocks; ++s, y += kSub) {
      const float d = ue4m3_half(load_u8(in + s));
      const std::byte* codes = in + kSubBlocks + s * kSub / 2;
      for (std::size_t j = 0; j < kSub / 2; ++j) {
        const unsigned byte = load_u8(codes + j);
        y[j] = static_cast<float>(kE2m1Doubled[byte & 0xfu]) * d;
        y[j + kSub / 2] = static_cast<float>(kE2m1Doubled[byte >> 4]) * d;
      }
    }
  }
}

// Each sub-block's scale maps its largest |x| (NaN skipped) to E2M1's largest value, 6; element j and
// element j + 8 share a byte (low nibble, high nibble).
void quantize_nvfp4(const float* x, std::byte* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    std::byte* out = dst + b * kBlockBytes;
    for (std::size_t s = 0; s < kSubBlocks; ++s, x += kSub) {
      float amax = 0.0f;
      for (std::size_t j = 0; j < kSub; ++j)
        if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
      const std::uint8_t scale = to_ue4m3(amax / 6.0f);
      out[s] = std::byte(scale);
      const float d = ue4m3_half(scale);
      std::byte* codes = out + kSubBlocks + s * kSub / 2;
      for (std::size_t j = 0; j < kSub / 2; ++j)
        codes[j] = std::byte(static_cast<std::uint8_t>(nearest_e2m1(x[j], d) | nearest_e2m1(x[j + kSub / 2], d) << 4));
    }
  }
}

}  // namespace

Codec nvfp4_codec() noexcept { return {quantize_nvfp4, dequantize_nvfp4}; }

}  // namespace safeweights::quant
