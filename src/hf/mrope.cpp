// Multimodal rope sections (hf/mrope.h).
#include "hf/mrope.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "hf/config_rules.h"

namespace safeweights::hf {
namespace {

constexpr std::size_t kSections = 4;  // llama.cpp's GGML_MROPE_SECTIONS
constexpr std::array<std::int64_t, kSections> kDefaultSections = {11, 11, 10, 0};
constexpr std::int64_t kMaxSection = 1 << 16;

// Whether llama.cpp's interleaved rope rotates every rotary pair by a text position: pair s falls in
// sector s % (sum of sections), which takes the time, height or width position (all equal for text)
// when sector % 3 is that section's index and sector < 3 x its size, and the fourth (0) otherwise.
bool every_pair_rotates(const std::array<std::int64_t, kSections>& sections, std::uint32_t pairs) {
  const std::int64_t sum = sections[0] + sections[1] + sections[2] + sections[3];
  for (std::int64_t s = 0; s < sum && s < pairs; ++s) {
    if (s >= 3 * sections[static_cast<std::size_t>(s % 3)]) return false;
  }
  return true;
}

MetaValue int32_array(const std::array<std::int64_t, kSections>& values) {
  std::vector<MetaValue> items;
  for (std::int64_t v : values) items.push_back(MetaValue::i32(static_cast<std::int32_t>(v)));
  return MetaValue::array(MetaType::INT32, std::move(items));
}

// The rope object's mrope_section padded with zeros to four sections; unset when the object has none.
Result<std::optional<std::array<std::int64_t, kSections>>> given_sections(const JsonFile& file, const ModelConfig& c) {
  using Sections = std::optional<std::array<std::int64_t, kSections>>;
  const std::string key = c.rope.source + ".mrope_section";
  auto rope = c.rope.source.empty() ? std::nullopt : JsonFile::member(file.root(), c.rope.source);
  auto given = rope ? JsonFile::member(*rope, "mrope_section") : std::nullopt;
  if (!given) return Sections();
  if (given->type() != json::element_type::ARRAY || json::as_array(*given).size() > kSections) {
    return file.bad(key, "must be a list of at most 4 section sizes");
  }
  std::array<std::int64_t, kSections> sections = {};
  std::size_t i = 0;
  for (auto v : json::as_array(*given)) {
    if (v.type() != json::element_type::INT64 || v.get_int64().value_unsafe() < 0 || v.get_int64().value_unsafe() > kMaxSection) {
      return file.bad(key, "must hold section sizes from 0 to " + std::to_string(kMaxSection));
    }
    sections[i++] = v.get_int64().value_unsafe();
  }
  return Sections(sections);
}

}  // namespace

Status read_mrope_sections(const JsonFile& file, ModelConfig& c, std::uint32_t rope_dims, std::uint32_t head_dim) {
  const std::string key = c.rope.source + ".mrope_section";
  SW_ASSIGN_OR_RETURN(auto given, given_sections(file, c));
  const std::array<std::int64_t, kSections> sections = given.value_or(kDefaultSections);
  // Without the key llama.cpp's converter writes its default sections whatever the head size (text rotates
  // the same whatever they are), so only sections the file gives are checked.
  const std::int64_t sum = sections[0] + sections[1] + sections[2] + sections[3];
  if (given && (sum == 0 || sum > head_dim)) {
    return file.bad(key, "must sum to between 1 and head_dim (" + std::to_string(head_dim) + ")");
  }
  if (given && !every_pair_rotates(sections, rope_dims / 2)) {
    return refuse_key(file, key,
                      "leaves rotary pairs to llama.cpp's fourth rope section, which text positions do not rotate (transformers "
                      "rotates them)");
  }
  c.arch_kv.push_back({std::string(c.arch->name) + ".rope.dimension_sections", int32_array(sections)});
  return Status::ok();
}

Status read_sectioned_mrope(const JsonFile& file, ModelConfig& c, std::uint32_t rope_dims) {
  SW_ASSIGN_OR_RETURN(auto given, given_sections(file, c));
  if (!given) return Status::ok();
  const std::string key = c.rope.source + ".mrope_section";
  const std::array<std::int64_t, kSections>& sections = *given;
  if (sections[3] != 0) {
    return refuse_key(file, key, "has a fourth section, which text positions do not rotate in llama.cpp (transformers rotates it)");
  }
  if (sections[0] + sections[1] + sections[2] != rope_dims / 2) {
    return file.bad(key, "must sum to the rotary pairs of a head (" + std::to_string(rope_dims / 2) + "), as transformers splits them");
  }
  c.arch_kv.push_back({std::string(c.arch->name) + ".rope.dimension_sections", int32_array(sections)});
  return Status::ok();
}

}  // namespace safeweights::hf
