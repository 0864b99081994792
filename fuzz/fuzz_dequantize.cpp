// fuzz_dequantize — element conversion (safeweights/quantize.h) on arbitrary bytes.
//
// Input: byte 0 picks the type; the rest, cut to whole blocks, is read two ways: as stored blocks of
// that type (dequantized), and as float32 values (quantized, then dequantized back). Every supported
// type must convert without error or undefined behaviour (the sanitizers), and a type that is not
// supported must be refused with NotSupported; the values also go through quantize_rows() with
// importance weights. Where the algorithm guarantees it, quantizing the dequantized values gives the
// stored bytes back:
//  - F16 and BF16: every value but NaN (whose payload ggml does not keep);
//  - Q8_0: a block whose scale d is finite and positive, whose codes lie in -127..127 and reach ±127
//    (then 127 x d and 127 x d / 127 are exact, d comes back, and each q x d / d rounds back to q);
//  - Q4_0 and Q5_0: a block with finite non-zero d whose first largest value is the code -8 (-16) x d.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_common.h"
#include "safeweights/quantize.h"

using namespace safeweights;

namespace {

constexpr std::size_t kMaxBlocks = 16;

std::uint16_t u16_at(const std::byte* p) {
  return static_cast<std::uint16_t>(std::to_integer<unsigned>(p[0]) | (std::to_integer<unsigned>(p[1]) << 8));
}

bool half_is_finite_nonzero(std::uint16_t h) { return (h & 0x7c00u) != 0x7c00u && (h & 0x7fffu) != 0; }

// Whether quantize(dequantize(block)) must give the block back (see the file comment).
bool round_trips(TensorType type, const std::byte* block) {
  switch (type) {
    case TensorType::F16: {
      const std::uint16_t h = u16_at(block);
      return (h & 0x7c00u) != 0x7c00u || (h & 0x3ffu) == 0;
    }
    case TensorType::BF16: {
      const std::uint16_t h = u16_at(block);
      return (h & 0x7f80u) != 0x7f80u || (h & 0x7fu) == 0;
    }
    case TensorType::Q8_0: {  // d comes back as absmax / 127: positive
      if (!half_is_finite_nonzero(u16_at(block)) || (u16_at(block) & 0x8000u) != 0) return false;
      bool reaches = false;
      for (int j = 0; j < 32; ++j) {
        const int q = static_cast<std::int8_t>(std::to_integer<std::uint8_t>(block[2 + j]));
        if (q == -128) return false;
        reaches = reaches || q == 127 || q == -127;
      }
      return reaches;
    }
    case TensorType::Q4_0:
    case TensorType::Q5_0: {
      if (!half_is_finite_nonzero(u16_at(block))) return false;
      const bool five = type == TensorType::Q5_0;
      const std::size_t qs = five ? 6 : 2;
      std::uint32_t qh = 0;
      if (five)
        for (int i = 0; i < 4; ++i) qh |= std::to_integer<std::uint32_t>(block[2 + i]) << (8 * i);
      const int offset = five ? 16 : 8;
      // Codes in element order; the first of largest magnitude must be code 0 (value -offset x d).
      int best = -1;
      int best_code = 0;
      for (int j = 0; j < 32; ++j) {
        const unsigned byte = std::to_integer<unsigned>(block[qs + j % 16]);
        const int low = static_cast<int>(j < 16 ? (byte & 0xfu) : (byte >> 4));
        const int code = low | static_cast<int>(((qh >> j) & 1u) << 4);
        const int magnitude = code >= offset ? code - offset : offset - code;
        if (magnitude > best) {
          best = magnitude;
          best_code = code;
        }
      }
      return best_code == 0;
    }
    default: return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const auto type = static_cast<TensorType>(data[0] % kTensorTypeCount);
  const TensorTypeInfo& info = type_info(type);
  const std::span<const std::byte> rest(reinterpret_cast<const std::byte*>(data + 1), size - 1);

  // Element and byte counts of whole blocks (plain types: whole elements).
  const std::size_t block_elements = info.block_elements;
  const std::size_t block_bytes = info.is_block() ? info.block_bytes : (info.bits + 7) / 8;
  if (block_bytes == 0 || info.bits % 8 != 0) return 0;  // sub-byte plain types: never supported
  const std::size_t blocks = std::min(rest.size() / block_bytes, kMaxBlocks);

  // 1. The bytes as stored blocks.
  std::vector<std::byte> stored(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(blocks * block_bytes));
  std::vector<float> values(blocks * block_elements);
  const Status status = dequantize(type, stored, values);
  if (!can_dequantize(type)) {
    FUZZ_CHECK(!status.is_ok() && status.error().kind() == ErrorKind::NotSupported);
  } else {
    FUZZ_CHECK(status.is_ok());
    if (can_quantize(type)) {
      std::vector<std::byte> again(stored.size());
      FUZZ_CHECK(quantize(type, values, again).is_ok());
      for (std::size_t b = 0; b < blocks; ++b)
        if (round_trips(type, stored.data() + b * block_bytes))
          FUZZ_CHECK(std::memcmp(again.data() + b * block_bytes, stored.data() + b * block_bytes, block_bytes) == 0);
    }
  }

  // 2. The bytes as float32 values, quantized and read back.
  const std::size_t floats = std::min(rest.size() / sizeof(float) / block_elements, kMaxBlocks) * block_elements;
  std::vector<float> input(floats);
  if (floats != 0) std::memcpy(input.data(), rest.data(), floats * sizeof(float));
  std::vector<std::byte> packed(floats / block_elements * block_bytes);
  const Status quantized = quantize(type, input, packed);
  if (!can_quantize(type)) {
    FUZZ_CHECK(!quantized.is_ok() && quantized.error().kind() == ErrorKind::NotSupported);
    return 0;
  }
  FUZZ_CHECK(quantized.is_ok());
  std::vector<float> back(floats);
  FUZZ_CHECK(dequantize(type, packed, back).is_ok());

  // 3. The same values with importance weights (their magnitudes, NaN and infinities included), one
  // row: the weighted quantizers (the IQ types' searches) take any input without error or UB.
  if (takes_importance(type) && floats != 0) {
    std::vector<float> importance(floats);
    for (std::size_t i = 0; i < floats; ++i) importance[i] = std::fabs(input[floats - 1 - i]);
    const Status weighted = quantize_rows(type, input, packed, floats, importance);
    // NotSupported: a weighted path this build lacks (quantize.h); never for a type requires_importance().
    FUZZ_CHECK(weighted.is_ok() || (weighted.error().kind() == ErrorKind::NotSupported && !requires_importance(type)));
    if (weighted.is_ok()) FUZZ_CHECK(dequantize(type, packed, back).is_ok());
  }
  return 0;
}
