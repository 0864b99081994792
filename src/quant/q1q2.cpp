// ggml's two low-bit types with one float16 scale a block and no search: Q1_0 (128 elements, a sign bit
// each, the scale their mean |x|) and Q2_0 (64 elements, 2 bits each for -1, 0, 1, 2 times the scale,
// their largest |x|). ggml quantizes both with its reference code alone (an importance matrix is
// ignored: takes_importance() is false for them), and these follow it expression for expression.
#include <cmath>
#include <cstdint>

#include "quant/codecs.h"
#include "quant/rounding.h"

namespace safeweights::quant {
namespace {

constexpr std::size_t kQ1Block = 128, kQ1Bytes = 2 + kQ1Block / 8;
constexpr std::size_t kQ2Block = 64, kQ2Bytes = 2 + kQ2Block / 4;

// Q1_0: bit j of the block's bytes (low bit first) is set where x >= 0 (so -0.0 sets it and NaN does not);
// the scale is the sum of |x| in element order, divided by 128.
void quantize_q1_0(const float* x, std::byte* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, x += kQ1Block) {
    std::byte* out = dst + b * kQ1Bytes;
    float sum_abs = 0.0f;
    for (std::size_t j = 0; j < kQ1Block; ++j) sum_abs += std::fabs(x[j]);
    store_f16(out, sum_abs / static_cast<float>(kQ1Block));
    for (std::size_t byte = 0; byte < kQ1Block / 8; ++byte) {
      unsigned bits = 0;
      for (unsigned k = 0; k < 8; ++k) bits |= (x[8 * byte + k] >= 0.0f ? 1u : 0u) << k;
      out[2 + byte] = std::byte(static_cast<std::uint8_t>(bits));
    }
  }
}

void dequantize_q1_0(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * kQ1Bytes;
    const float d = load_f16(in), neg_d = -d;
    for (std::size_t j = 0; j < kQ1Block; ++j) *y++ = (load_u8(in + 2 + j / 8) >> (j % 8)) & 1u ? d : neg_d;
  }
}

// Q2_0's code of x at the inverse scale id: roundf(x * id) + 1 held to 0..3. ggml converts roundf's
// result with a plain (int) cast, which x86-64 makes INT32_MIN for NaN and out-of-range values (0 * inf
// where the scale is infinite, x / d beyond int where d is a subnormal): those land on code 0.
inline unsigned q2_code(float x, float id) noexcept {
  const std::int64_t q = static_cast<std::int64_t>(truncate_like_x86(std::round(x * id))) + 1;
  return static_cast<unsigned>(q < 0 ? 0 : q > 3 ? 3 : q);
}

// Q2_0: the scale is the largest |x| (NaN never wins); element j takes bits 2(j % 4) of byte j / 4.
void quantize_q2_0(const float* x, std::byte* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, x += kQ2Block) {
    std::byte* out = dst + b * kQ2Bytes;
    float amax = 0.0f;
    for (std::size_t j = 0; j < kQ2Block; ++j)
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]);
    const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
    store_f16(out, amax);
    for (std::size_t byte = 0; byte < kQ2Block / 4; ++byte) {
      unsigned codes = 0;
      for (unsigned k = 0; k < 4; ++k) codes |= q2_code(x[4 * byte + k], id) << (2 * k);
      out[2 + byte] = std::byte(static_cast<std::uint8_t>(codes));
    }
  }
}

void dequantize_q2_0(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* in = src + b * kQ2Bytes;
    const float d = load_f16(in);
    for (std::size_t j = 0; j < kQ2Block; ++j) {
      const int code = static_cast<int>((load_u8(in + 2 + j / 4) >> (2 * (j % 4))) & 3u);
      *y++ = static_cast<float>(code - 1) * d;
    }
  }
}

}  // namespace

Codec low_bit_codec(TensorType type) noexcept {
  switch (type) {
    case TensorType::Q1_0: return {quantize_q1_0, dequantize_q1_0};
    case TensorType::Q2_0: return {quantize_q2_0, dequantize_q2_0};
    default: return {};
  }
}

}  // namespace safeweights::quant
