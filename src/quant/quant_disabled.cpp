// The quant component switched off (SAFEWEIGHTS_WITH_QUANT=OFF): CMake compiles this file instead of
// legacy.cpp, kquants.cpp, other.cpp and q1q2.cpp, so the library holds none of ggml's block codecs. quantize.cpp
// (F32, F16, BF16) stays: a block type then has no codec, and quantize() / dequantize() refuse it with
// NotSupported naming the option.
#include "quant/codecs.h"

namespace safeweights::quant {

Codec legacy_codec(TensorType /*type*/) noexcept { return {}; }
Codec k_codec(TensorType /*type*/) noexcept { return {}; }
Codec other_codec(TensorType /*type*/) noexcept { return {}; }
Codec low_bit_codec(TensorType /*type*/) noexcept { return {}; }

}  // namespace safeweights::quant
