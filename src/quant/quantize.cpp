// Element conversion to and from F32 (include/safeweights/quantize.h): argument checks, the choice of
// row codec, and the codecs of the plain float types.
#include "safeweights/quantize.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "quant/codecs.h"

namespace safeweights {

namespace quant {
namespace {

void quantize_f32(const float* src, std::byte* dst, std::size_t n) {
  if (n != 0) std::memcpy(dst, src, n * sizeof(float));
}
void dequantize_f32(const std::byte* src, float* dst, std::size_t n) {
  if (n != 0) std::memcpy(dst, src, n * sizeof(float));
}
// Whole rows of 16-bit values go through a small aligned buffer of uint16_t, so that the conversion
// loop has no byte shuffling in it and vectorises; the buffer is stored/loaded little-endian.
constexpr std::size_t kChunk = 256;

template <std::uint16_t (*Narrow)(float)>
void quantize_16(const float* src, std::byte* dst, std::size_t n) {
  std::uint16_t chunk[kChunk];
  for (std::size_t i = 0; i < n; i += kChunk) {
    const std::size_t m = std::min(kChunk, n - i);
    for (std::size_t j = 0; j < m; ++j) chunk[j] = Narrow(src[i + j]);
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(dst + 2 * i, chunk, 2 * m);
    } else {
      for (std::size_t j = 0; j < m; ++j) store_u16(dst + 2 * (i + j), chunk[j]);
    }
  }
}

template <float (*Widen)(std::uint16_t)>
void dequantize_16(const std::byte* src, float* dst, std::size_t n) {
  std::uint16_t chunk[kChunk];
  for (std::size_t i = 0; i < n; i += kChunk) {
    const std::size_t m = std::min(kChunk, n - i);
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(chunk, src + 2 * i, 2 * m);
    } else {
      for (std::size_t j = 0; j < m; ++j) chunk[j] = load_u16(src + 2 * (i + j));
    }
    for (std::size_t j = 0; j < m; ++j) dst[i + j] = Widen(chunk[j]);
  }
}

}  // namespace

Codec float_codec(TensorType type) noexcept {
  switch (type) {
    case TensorType::F32: return {quantize_f32, dequantize_f32};
    case TensorType::F16: return {quantize_16<f32_to_f16>, dequantize_16<f16_to_f32>};
    case TensorType::BF16: return {quantize_16<f32_to_bf16>, dequantize_16<bf16_to_f32>};
    default: return {};
  }
}

}  // namespace quant

namespace {

quant::Codec codec(TensorType type) noexcept {
  for (auto family : {quant::float_codec, quant::legacy_codec, quant::k_codec, quant::other_codec, quant::low_bit_codec}) {
    const quant::Codec c = family(type);
    if (c.quantize != nullptr || c.dequantize != nullptr) return c;
  }
  return {};
}

Status unsupported(TensorType type, const char* what) {
  std::string message = std::string(what) + " " + std::string(type_name(type)) + " is not supported";
#if defined(SAFEWEIGHTS_WITH_QUANT) && !SAFEWEIGHTS_WITH_QUANT
  // The block codecs were left out (quant_disabled.cpp): say so for the types they would cover.
  if (type_info(type).block_elements > 1) message += ": safeweights was built without the quantizers (SAFEWEIGHTS_WITH_QUANT=OFF)";
#endif
  return Error(ErrorKind::NotSupported, message);
}

// The number of blocks (elements for a plain type) in `elements` values of `type`, after checking that
// `bytes` is exactly their size.
Result<std::size_t> blocks_of(TensorType type, std::size_t elements, std::size_t bytes, const char* what) {
  const TensorTypeInfo& info = type_info(type);
  const std::uint64_t shape[1] = {elements};
  auto need = tensor_nbytes(type, shape);
  if (!need.is_ok())
    return Error(ErrorKind::InvalidArgument, std::string(what) + " " + std::string(info.name) + ": " + std::to_string(elements) +
                                                 " elements are not whole blocks of " + std::to_string(info.block_elements));
  if (need.value() != bytes)
    return Error(ErrorKind::InvalidArgument, std::string(what) + " " + std::string(info.name) + ": " + std::to_string(elements) + " elements take " +
                                                 std::to_string(need.value()) + " bytes, not " + std::to_string(bytes));
  return elements / info.block_elements;
}

}  // namespace

bool can_quantize(TensorType type) noexcept { return codec(type).quantize != nullptr; }
bool can_dequantize(TensorType type) noexcept { return codec(type).dequantize != nullptr; }

Status quantize(TensorType type, std::span<const float> src, std::span<std::byte> dst) {
  const quant::Codec c = codec(type);
  if (c.quantize == nullptr) return unsupported(type, "quantizing to");
  auto blocks = blocks_of(type, src.size(), dst.size(), "quantizing to");
  if (!blocks.is_ok()) return std::move(blocks).error();
  c.quantize(src.data(), dst.data(), blocks.value());
  return Status::ok();
}

bool takes_importance(TensorType type) noexcept {
  switch (type) {
    case TensorType::Q4_0:
    case TensorType::Q4_1:
    case TensorType::Q5_0:
    case TensorType::Q5_1:
    case TensorType::Q2_K:
    case TensorType::Q3_K:
    case TensorType::Q4_K:
    case TensorType::Q5_K:
    case TensorType::Q6_K:
    case TensorType::IQ4_NL:
    case TensorType::IQ4_XS:
    case TensorType::IQ3_XXS:
    case TensorType::IQ3_S:
    case TensorType::IQ2_XXS:
    case TensorType::IQ2_XS:
    case TensorType::IQ2_S:
    case TensorType::IQ1_S:
    case TensorType::IQ1_M: return true;
    default: return false;
  }
}

bool requires_importance(TensorType type) noexcept {
  return type == TensorType::IQ2_XXS || type == TensorType::IQ2_XS || type == TensorType::IQ1_S || type == TensorType::IQ1_M;
}

Status quantize_rows(TensorType type, std::span<const float> src, std::span<std::byte> dst, std::size_t row_length,
                     std::span<const float> importance) {
  if (importance.empty() || !takes_importance(type)) return quantize(type, src, dst);
  const quant::Codec c = codec(type);
  if (c.quantize_weighted == nullptr) return unsupported(type, "importance-weighted quantizing to");
  if (row_length == 0 || importance.size() != row_length || src.size() % row_length != 0)
    return Error(ErrorKind::InvalidArgument, "quantizing to " + std::string(type_name(type)) +
                                                 " with importance weights: " + std::to_string(importance.size()) + " weights for rows of " +
                                                 std::to_string(row_length) + ", " + std::to_string(src.size()) + " elements");
  auto blocks = blocks_of(type, src.size(), dst.size(), "quantizing to");
  if (!blocks.is_ok()) return std::move(blocks).error();
  const std::size_t block_elements = type_info(type).block_elements;
  if (row_length % block_elements != 0)
    return Error(ErrorKind::InvalidArgument, "quantizing to " + std::string(type_name(type)) + ": rows of " + std::to_string(row_length) +
                                                 " are not whole blocks of " + std::to_string(block_elements));
  const std::size_t rows = src.size() / row_length;
  if (rows == 0) return Status::ok();
  const std::size_t row_bytes = dst.size() / rows;
  for (std::size_t r = 0; r < rows; ++r) c.quantize_weighted(src.data() + r * row_length, dst.data() + r * row_bytes, row_length, importance.data());
  return Status::ok();
}

Status dequantize(TensorType type, std::span<const std::byte> src, std::span<float> dst) {
  const quant::Codec c = codec(type);
  if (c.dequantize == nullptr) return unsupported(type, "dequantizing");
  auto blocks = blocks_of(type, dst.size(), src.size(), "dequantizing");
  if (!blocks.is_ok()) return std::move(blocks).error();
  c.dequantize(src.data(), dst.data(), blocks.value());
  return Status::ok();
}

}  // namespace safeweights
