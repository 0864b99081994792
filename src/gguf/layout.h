// GGUF layout facts shared by the reader, the writer and the registration. Internal.
#pragma once

#include <array>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "safeweights/gguf.h"
#include "safeweights/tensor_type.h"

namespace safeweights::gguf {

inline constexpr std::string_view kMagic = "GGUF";
inline constexpr std::uint32_t kWriteVersion = 3;
inline constexpr std::string_view kAlignmentKey = "general.alignment";
inline constexpr std::string_view kFileTypeKey = "general.file_type";       // llama.cpp's llama_ftype, UINT32
inline constexpr std::uint64_t kMaxKeyBytes = 65535;                        // the spec's limit
inline constexpr std::uint64_t kMaxStringBytes = std::uint64_t{1} << 30;    // ggml's GGUF_MAX_STRING_LENGTH
inline constexpr std::uint64_t kMaxArrayElements = std::uint64_t{1} << 30;  // ggml's GGUF_MAX_ARRAY_ELEMENTS
// The largest alignment the writer pads to. Readers take any power of two up to 2^31 (as ggml does: the
// padding is in the file), but a writer multiplies it: a 64-byte file asking for 2^31 would become a
// 2 GiB output, padding held in memory as the header. Real files use 32 (gguf-py's and ggml's default).
inline constexpr std::uint32_t kMaxWriteAlignment = std::uint32_t{1} << 20;

// GGUF's value type ids (ggml's enum gguf_type), the id being the index: the metadata's value type
// (safeweights/metadata.h, whose numbers are not these) and the bytes of one value (0 for STRING and
// ARRAY).
struct ValueTypeId {
  ValueType type;
  int width;
};
inline constexpr ValueTypeId kValueTypeIds[] = {
    {ValueType::UINT8, 1},  {ValueType::INT8, 1},    {ValueType::UINT16, 2},  {ValueType::INT16, 2},  {ValueType::UINT32, 4},
    {ValueType::INT32, 4},  {ValueType::FLOAT32, 4}, {ValueType::BOOL, 1},    {ValueType::STRING, 0}, {ValueType::ARRAY, 0},
    {ValueType::UINT64, 8}, {ValueType::INT64, 8},   {ValueType::FLOAT64, 8},
};
// The value type of a GGUF id; nullopt for an id GGUF does not define.
inline std::optional<ValueType> value_type_of_id(std::uint64_t id) noexcept {
  if (id >= std::size(kValueTypeIds)) return std::nullopt;
  return kValueTypeIds[id].type;
}
// The same table the other way: GGUF's id, indexed by the value type's number.
inline constexpr auto kIdOfValueType = [] {
  std::array<std::uint32_t, std::size(kValueTypeIds)> ids{};
  for (std::uint32_t id = 0; id < ids.size(); ++id) ids[static_cast<std::size_t>(kValueTypeIds[id].type)] = id;
  return ids;
}();
static_assert(std::size(kValueTypeIds) == static_cast<std::size_t>(ValueType::ARRAY) + 1, "every value type has one GGUF id");
// GGUF's id of a value type; nullopt for a number outside the enum.
inline std::optional<std::uint32_t> value_type_id(ValueType type) noexcept {
  const auto i = static_cast<std::size_t>(type);
  if (i >= kIdOfValueType.size()) return std::nullopt;
  return kIdOfValueType[i];
}
// Bytes of one value of a fixed-size type; 0 for STRING and ARRAY; -1 for a number outside the enum.
inline int value_width(ValueType type) noexcept {
  const std::optional<std::uint32_t> id = value_type_id(type);
  return id ? kValueTypeIds[*id].width : -1;
}
// The value as JSON: integers exact, floats in their shortest round-trip form (NaN and the infinities
// as the strings "NaN", "Infinity", "-Infinity"), strings with json_quote, arrays as arrays.
void append_value_json(std::string& out, const Value& value);

inline bool is_signed(ValueType t) noexcept {
  return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 || t == ValueType::INT64;
}

// `v` rounded up to a multiple of `alignment` (a power of two); false when that overflows.
inline bool align_up(std::uint64_t v, std::uint64_t alignment, std::uint64_t& out) noexcept {
  const std::uint64_t rem = v & (alignment - 1);
  if (rem == 0) {
    out = v;
    return true;
  }
  return !__builtin_add_overflow(v, alignment - rem, &out);
}

// ggml's element-count rule for a tensor info (gguf.cpp, as llama-cpp-python 0.3.36 ships it): the
// dimensions multiplied in ne order (ne[0], the innermost, first: the reverse of the row-major shape),
// the tensor refused at the first dimension where the running product would pass INT64_MAX. A 0 ends
// the growth from there on but does not excuse an overflow before it: ne = [2^62, 2^62, 0] is refused,
// [0, 2^62, 2^62] accepted. Returns that dimension's index in ne, or -1 when the count fits.
// `shape` is row-major (a dimension over INT64_MAX is refused where it can grow the count; the reader
// and the writer refuse every such dimension first).
inline int ggml_count_overflow(std::span<const std::uint64_t> shape) noexcept {
  constexpr auto kMax = static_cast<std::uint64_t>(INT64_MAX);
  std::uint64_t count = 1;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    const std::uint64_t d = shape[shape.size() - 1 - k];  // ne[k]
    if (d != 0 && count > kMax / d) return static_cast<int>(k);
    count *= d;
  }
  return -1;
}

// A GGUF tensor's bytes, sized as ggml sizes it: its element count by the rule above (ValidationOverflow
// naming the dimension), then tensor_nbytes. A tensor with no elements holds 0 bytes whatever its other
// dimensions (tensor_nbytes multiplies the row-major shape from the left, so [2^62, 2^62, 0] would
// overflow there); its innermost dimension still obeys the block rule, which ggml checks on ne[0].
inline Result<std::uint64_t> ggml_nbytes(TensorType type, std::span<const std::uint64_t> shape) {
  if (const int at = ggml_count_overflow(shape); at >= 0) {
    std::string ne;
    for (std::size_t k = shape.size(); k-- > 0;) ne += (ne.empty() ? "" : ", ") + std::to_string(shape[k]);
    return Error(ErrorKind::ValidationOverflow, "the element count of ne = [" + ne + "] passes 2^63 - 1 at ne[" + std::to_string(at) +
                                                    "] (ggml multiplies ne[0], ne[1], ... in turn and refuses it there, even when a later "
                                                    "dimension is 0)");
  }
  for (const std::uint64_t d : shape)
    if (d == 0) {
      if (type_info(type).is_block())  // the block rule on ne[0] alone (its bytes cannot overflow)
        if (Result<std::uint64_t> innermost = tensor_nbytes(type, shape.last(1)); !innermost.is_ok()) return innermost;
      return std::uint64_t{0};
    }
  return tensor_nbytes(type, shape);
}

// ggml keeps a tensor name or a key up to its first NUL byte (a tensor's name is a C string; keys are
// looked up with strcmp): the name as ggml sees it.
inline std::string_view ggml_name(std::string_view raw) noexcept { return raw.substr(0, raw.find('\0')); }

}  // namespace safeweights::gguf
