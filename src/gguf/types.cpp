// The ggml spelling table (ggml type id <-> TensorType) and the GGUF value-type names: the only place
// that knows ggml's ids. Sizes and block rules come from TensorType (tensor_nbytes), never from here.
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>

#include "gguf/layout.h"
#include "safeweights/gguf.h"
#include "safeweights/text.h"

namespace safeweights::gguf {
namespace {

struct GgmlName {
  std::string_view name;
  std::optional<TensorType> type;  // nullopt: removed from GGUF files
};

using T = TensorType;
// Indexed by ggml type id (include/ggml.h of ggml 2026-08, GGML_TYPE_COUNT = 43).
constexpr std::array<GgmlName, 43> kGgml = {{
    {"F32", T::F32},
    {"F16", T::F16},
    {"Q4_0", T::Q4_0},
    {"Q4_1", T::Q4_1},
    {"Q4_2", std::nullopt},
    {"Q4_3", std::nullopt},
    {"Q5_0", T::Q5_0},
    {"Q5_1", T::Q5_1},
    {"Q8_0", T::Q8_0},
    {"Q8_1", T::Q8_1},
    {"Q2_K", T::Q2_K},
    {"Q3_K", T::Q3_K},
    {"Q4_K", T::Q4_K},
    {"Q5_K", T::Q5_K},
    {"Q6_K", T::Q6_K},
    {"Q8_K", T::Q8_K},
    {"IQ2_XXS", T::IQ2_XXS},
    {"IQ2_XS", T::IQ2_XS},
    {"IQ3_XXS", T::IQ3_XXS},
    {"IQ1_S", T::IQ1_S},
    {"IQ4_NL", T::IQ4_NL},
    {"IQ3_S", T::IQ3_S},
    {"IQ2_S", T::IQ2_S},
    {"IQ4_XS", T::IQ4_XS},
    {"I8", T::I8},
    {"I16", T::I16},
    {"I32", T::I32},
    {"I64", T::I64},
    {"F64", T::F64},
    {"IQ1_M", T::IQ1_M},
    {"BF16", T::BF16},
    {"Q4_0_4_4", std::nullopt},
    {"Q4_0_4_8", std::nullopt},
    {"Q4_0_8_8", std::nullopt},
    {"TQ1_0", T::TQ1_0},
    {"TQ2_0", T::TQ2_0},
    {"IQ4_NL_4_4", std::nullopt},
    {"IQ4_NL_4_8", std::nullopt},
    {"IQ4_NL_8_8", std::nullopt},
    {"MXFP4", T::MXFP4},
    {"NVFP4", T::NVFP4},
    {"Q1_0", T::Q1_0},
    {"Q2_0", T::Q2_0},
}};

}  // namespace

std::optional<TensorType> type_from_ggml(std::uint32_t id) noexcept { return id < kGgml.size() ? kGgml[id].type : std::nullopt; }

std::optional<std::uint32_t> ggml_id(TensorType type) noexcept {
  for (std::uint32_t id = 0; id < kGgml.size(); ++id)
    if (kGgml[id].type == type) return id;
  return std::nullopt;
}

std::string_view ggml_type_name(std::uint32_t id) noexcept { return id < kGgml.size() ? kGgml[id].name : std::string_view(); }

}  // namespace safeweights::gguf

namespace safeweights::gguf {
namespace {

template <typename F>
void append_float(std::string& out, F v) {
  if (std::isnan(v)) {
    out += "\"NaN\"";
  } else if (std::isinf(v)) {
    out += v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  } else {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
  }
}

}  // namespace

void append_value_json(std::string& out, const Value& value) {
  switch (value.type) {
    case ValueType::STRING: out += json_quote(value.str); return;
    case ValueType::BOOL: out += value.bits ? "true" : "false"; return;
    case ValueType::FLOAT32: append_float(out, std::bit_cast<float>(static_cast<std::uint32_t>(value.bits))); return;
    case ValueType::FLOAT64: append_float(out, std::bit_cast<double>(value.bits)); return;
    case ValueType::ARRAY:
      out += '[';
      for (std::size_t i = 0; i < value.items.size(); ++i) {
        if (i) out += ',';
        append_value_json(out, value.items[i]);
      }
      out += ']';
      return;
    default: out += is_signed(value.type) ? std::to_string(value.as_i64()) : std::to_string(value.bits);
  }
}

std::optional<std::uint32_t> llama_file_type(TensorType t) noexcept {
  switch (t) {
    case TensorType::F32: return 0;
    case TensorType::F16: return 1;
    case TensorType::Q4_0: return 2;
    case TensorType::Q4_1: return 3;
    case TensorType::Q8_0: return 7;
    case TensorType::Q5_0: return 8;
    case TensorType::Q5_1: return 9;
    case TensorType::Q2_K: return 10;
    case TensorType::Q3_K: return 11;
    case TensorType::Q4_K: return 14;
    case TensorType::Q5_K: return 16;
    case TensorType::Q6_K: return 18;
    case TensorType::BF16: return 32;
    case TensorType::NVFP4: return 39;  // LLAMA_FTYPE_MOSTLY_NVFP4 (llama.h), which llama-quantize does not list
    default: return std::nullopt;
  }
}

}  // namespace safeweights::gguf
