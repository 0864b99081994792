// Element conversion to and from F32 (include/safeweights/quantize.h). Placeholder until the
// converters land: only F32 is supported.
#include "safeweights/quantize.h"

#include <cstring>
#include <string>

namespace safeweights {

bool can_quantize(TensorType type) noexcept { return type == TensorType::F32; }
bool can_dequantize(TensorType type) noexcept { return type == TensorType::F32; }

namespace {
Status unsupported(TensorType type, const char* what) {
  return Error(ErrorKind::NotSupported, std::string(what) + " " + std::string(type_name(type)) + " is not supported");
}
Status copy_f32(std::span<const std::byte> src, std::span<std::byte> dst) {
  if (src.size() != dst.size())
    return Error(ErrorKind::InvalidArgument, "F32 conversion: " + std::to_string(src.size()) + " bytes in, " +
                                                 std::to_string(dst.size()) + " bytes out");
  if (!src.empty()) std::memcpy(dst.data(), src.data(), src.size());
  return Status::ok();
}
}  // namespace

Status quantize(TensorType type, std::span<const float> src, std::span<std::byte> dst) {
  if (type != TensorType::F32) return unsupported(type, "quantizing to");
  return copy_f32(std::as_bytes(src), dst);
}

Status dequantize(TensorType type, std::span<const std::byte> src, std::span<float> dst) {
  if (type != TensorType::F32) return unsupported(type, "dequantizing");
  return copy_f32(src, std::as_writable_bytes(dst));
}

}  // namespace safeweights
