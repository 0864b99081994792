// Metadata (include/safeweights/metadata.h): typed values and the string-map table.
#include "safeweights/metadata.h"

#include <algorithm>
#include <array>
#include <bit>

namespace safeweights {
namespace {

// In MetaType's order.
constexpr std::array<std::string_view, 13> kTypeNames = {"BOOL",   "UINT8", "INT8",    "UINT16",  "INT16",  "UINT32", "INT32",
                                                         "UINT64", "INT64", "FLOAT32", "FLOAT64", "STRING", "ARRAY"};

}  // namespace

std::string_view meta_type_name(MetaType type) noexcept {
  const auto i = static_cast<std::size_t>(type);
  return i < kTypeNames.size() ? kTypeNames[i] : std::string_view("?");
}

MetaValue MetaValue::f32(float v) { return scalar(MetaType::FLOAT32, std::bit_cast<std::uint32_t>(v)); }
MetaValue MetaValue::f64(double v) { return scalar(MetaType::FLOAT64, std::bit_cast<std::uint64_t>(v)); }

MetaValue MetaValue::string(std::string v) {
  MetaValue out;
  out.type = MetaType::STRING;
  out.str = std::move(v);
  return out;
}

MetaValue MetaValue::array(MetaType elem, std::vector<MetaValue> items) {
  MetaValue out;
  out.type = MetaType::ARRAY;
  out.elem_type = elem;
  out.items = std::move(items);
  return out;
}

double MetaValue::as_f64() const noexcept {
  if (type == MetaType::FLOAT32) return std::bit_cast<float>(static_cast<std::uint32_t>(bits));
  return std::bit_cast<double>(bits);
}

Metadata Metadata::from_string_map(const MetadataEntries& map) {
  std::vector<MetaEntry> entries;
  entries.reserve(map.size());
  for (const auto& [k, v] : map) entries.push_back({std::string(kStringMapPrefix) + k, MetaValue::string(v)});
  return Metadata(std::move(entries), /*string_map=*/true);
}

const MetaValue* Metadata::find(std::string_view key) const noexcept {
  auto it = std::ranges::find(entries_, key, &MetaEntry::key);
  return it == entries_.end() ? nullptr : &it->value;
}

void Metadata::set(MetaEntry entry) {
  auto it = std::ranges::find(entries_, entry.key, &MetaEntry::key);
  if (it != entries_.end())
    it->value = std::move(entry.value);
  else
    entries_.push_back(std::move(entry));
}

void Metadata::merge(const Metadata& over) {
  for (const MetaEntry& e : over.entries_) set(e);
}

void Metadata::erase(std::string_view key) noexcept {
  auto it = std::ranges::find(entries_, key, &MetaEntry::key);
  if (it != entries_.end()) entries_.erase(it);
}

std::optional<MetadataEntries> Metadata::to_string_map() const {
  MetadataEntries map;
  for (const MetaEntry& e : entries_)
    if (e.key.starts_with(kStringMapPrefix) && e.value.type == MetaType::STRING) map.emplace_back(e.key.substr(kStringMapPrefix.size()), e.value.str);
  if (map.empty() && !string_map_) return std::nullopt;
  return map;
}

}  // namespace safeweights
