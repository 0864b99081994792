// safeweights/metadata.h — file-level metadata, typed and format-neutral.
//
// A Metadata is a list of key/typed-value pairs in file order. GGUF's own pairs are its entries as
// they are; the string maps of the other formats (safetensors `__metadata__`, a transformers index's
// "metadata", a PyTorch checkpoint's {"format": "pt"}) are STRING entries whose keys carry the prefix
// `safetensors.` (kStringMapPrefix), the key GGUF files already use for them (docs/GGUF.md,
// "Conversion"). Each format maps Metadata through its own table when it writes: GGUF writes the
// entries as they are; safetensors writes the STRING entries under the prefix, without it. So no format
// knows another, and a conversion carries metadata between any two formats.
//
// The value types are GGUF's (the only typed metadata of the formats read here), but not its ids:
// each format maps them through its own table (GGUF's ids live in src/gguf/).
//
// Thread safety: plain values; const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "safeweights/export.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

// File-level metadata as text, in file order: the string map of safetensors and the formats like it.
using MetadataEntries = std::vector<std::pair<std::string, std::string>>;

// Value types. Their numbers are this library's, not a file's: a format maps them through its own table.
enum class MetaType : std::uint32_t {
  BOOL,
  UINT8,
  INT8,
  UINT16,
  INT16,
  UINT32,
  INT32,
  UINT64,
  INT64,
  FLOAT32,
  FLOAT64,
  STRING,
  ARRAY,
};

// "BOOL", "UINT8" ... "ARRAY"; "?" for a number outside the enum.
std::string_view meta_type_name(MetaType type) noexcept;

// One value. Scalars keep their exact bits; arrays hold scalars or strings (GGUF arrays of arrays are
// refused, as ggml refuses them).
struct MetaValue {
  MetaType type = MetaType::UINT8;
  MetaType elem_type = MetaType::UINT8;  // ARRAY: the elements' type
  std::uint64_t bits = 0;                // integers: zero- or sign-extended to 64 bits; floats: their bit pattern; BOOL: 0/1
  std::string str;                       // STRING
  std::vector<MetaValue> items;          // ARRAY

  static MetaValue u8(std::uint8_t v) { return scalar(MetaType::UINT8, v); }
  static MetaValue i8(std::int8_t v) { return scalar(MetaType::INT8, static_cast<std::uint64_t>(static_cast<std::int64_t>(v))); }
  static MetaValue u16(std::uint16_t v) { return scalar(MetaType::UINT16, v); }
  static MetaValue i16(std::int16_t v) { return scalar(MetaType::INT16, static_cast<std::uint64_t>(static_cast<std::int64_t>(v))); }
  static MetaValue u32(std::uint32_t v) { return scalar(MetaType::UINT32, v); }
  static MetaValue i32(std::int32_t v) { return scalar(MetaType::INT32, static_cast<std::uint64_t>(static_cast<std::int64_t>(v))); }
  static MetaValue u64(std::uint64_t v) { return scalar(MetaType::UINT64, v); }
  static MetaValue i64(std::int64_t v) { return scalar(MetaType::INT64, static_cast<std::uint64_t>(v)); }
  static MetaValue f32(float v);
  static MetaValue f64(double v);
  static MetaValue boolean(bool v) { return scalar(MetaType::BOOL, v ? 1 : 0); }
  static MetaValue string(std::string v);
  // Every item must be of type `elem` (checked by the writer).
  static MetaValue array(MetaType elem, std::vector<MetaValue> items);

  // Numeric views (no range checks: ask `type` first).
  std::uint64_t as_u64() const noexcept { return bits; }
  std::int64_t as_i64() const noexcept { return static_cast<std::int64_t>(bits); }
  double as_f64() const noexcept;  // FLOAT32 and FLOAT64

  bool operator==(const MetaValue&) const = default;

 private:
  static MetaValue scalar(MetaType type, std::uint64_t bits) {
    MetaValue v;
    v.type = type;
    v.bits = bits;
    return v;
  }
};

struct MetaEntry {
  std::string key;
  MetaValue value;
  bool operator==(const MetaEntry&) const = default;
};

// The key prefix of string-map entries.
inline constexpr std::string_view kStringMapPrefix = "safetensors.";

class Metadata {
 public:
  Metadata() = default;
  // `string_map`: read from a string-map format (so a safetensors output keeps the map even when it is
  // empty, as `__metadata__: {}` stays `{}`).
  explicit Metadata(std::vector<MetaEntry> entries, bool string_map = false) : entries_(std::move(entries)), string_map_(string_map) {}
  // A string map: "k": "v" becomes the STRING entry "safetensors.k".
  static Metadata from_string_map(const MetadataEntries& map);

  std::span<const MetaEntry> entries() const noexcept { return entries_; }
  bool empty() const noexcept { return entries_.empty(); }
  std::size_t size() const noexcept { return entries_.size(); }
  bool is_string_map() const noexcept { return string_map_; }

  // nullptr when absent.
  const MetaValue* find(std::string_view key) const noexcept;
  // Replaces the value of `entry.key` in place, else appends the entry.
  void set(MetaEntry entry);
  // set() of each entry of `over`, in its order.
  void merge(const Metadata& over);
  // Removes the entry of `key`, if any.
  void erase(std::string_view key) noexcept;

  // The string map: the STRING entries under kStringMapPrefix, without it, in order; nullopt when there
  // are none and the metadata was not read from a string map.
  std::optional<MetadataEntries> to_string_map() const;

  bool operator==(const Metadata&) const = default;

 private:
  std::vector<MetaEntry> entries_;
  bool string_map_ = false;
};

SAFEWEIGHTS_API_END
}  // namespace safeweights
