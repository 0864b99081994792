// Recognising an original layout (original/layout.h).
#include "original/layout.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <string_view>

namespace safeweights::original {
namespace {

constexpr std::string_view kPrefix = "consolidated";

bool is_consolidated(const FolderEntry& e) {
  return !e.is_folder && e.name.starts_with(kPrefix) && (e.name.ends_with(".pth") || e.name.ends_with(".safetensors") || e.name.ends_with(".json"));
}

// NN of consolidated.NN.pth (two or more digits); none for any other name.
std::optional<std::uint32_t> shard_index(std::string_view name) {
  constexpr std::string_view kHead = "consolidated.", kTail = ".pth";
  if (!name.starts_with(kHead) || !name.ends_with(kTail)) return std::nullopt;
  const std::string_view digits = name.substr(kHead.size(), name.size() - kHead.size() - kTail.size());
  std::uint32_t n = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (digits.size() < 2 || ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return n;
}

// consolidated-00001-of-00003.safetensors: a split file its index names.
bool is_split_part(std::string_view name) { return name.starts_with("consolidated-") && name.ends_with(".safetensors"); }

std::string shard_name(std::uint32_t index) {
  std::string digits = std::to_string(index);
  if (digits.size() < 2) digits.insert(0, 2 - digits.size(), '0');
  return "consolidated." + digits + ".pth";
}

}  // namespace

bool is_original_layout(const Folder& folder) {
  const auto& entries = folder.entries();
  if (std::ranges::any_of(entries, [](const FolderEntry& e) { return e.name == "config.json"; })) return false;
  return folder.has_file("params.json") &&
         std::ranges::any_of(entries, [](const FolderEntry& e) { return is_consolidated(e) && !e.name.ends_with(".json"); });
}

Result<NativeWeights> native_weights(const Folder& folder) {
  std::map<std::uint32_t, std::string> shards;
  NativeWeights out;
  bool single = false, index = false;
  for (const FolderEntry& e : folder.entries()) {
    if (!is_consolidated(e)) continue;
    if (const auto n = shard_index(e.name)) {
      if (!shards.emplace(*n, e.name).second)
        return Error(ErrorKind::InvalidModelFolder, "two files are shard " + std::to_string(*n) + " (" + shards[*n] + ")")
            .with_file(folder.path_of(e.name));
    } else if (e.name == "consolidated.safetensors") {
      single = true;
    } else if (e.name == "consolidated.safetensors.index.json") {
      index = true;
    } else if (!is_split_part(e.name)) {
      return Error(ErrorKind::InvalidModelFolder,
                   "not a file of Meta's or Mistral's layout (consolidated.NN.pth, consolidated.safetensors, consolidated.safetensors.index.json)")
          .with_file(folder.path_of(e.name));
    }
  }
  if (!shards.empty() && (single || index))
    return Error(ErrorKind::InvalidModelFolder, "holds both consolidated.*.pth and consolidated.safetensors weights: keep one of them")
        .with_file(folder.name());
  if (index) return NativeWeights{{"consolidated.safetensors.index.json"}, true};
  if (single) return NativeWeights{{"consolidated.safetensors"}, true};
  std::uint32_t expected = 0;
  for (const auto& [n, name] : shards) {
    if (n != expected)
      return Error(ErrorKind::InvalidModelFolder, "model-parallel shard " + shard_name(expected) + " is missing (" + std::to_string(shards.size()) +
                                                      " shards, numbered from 00 without a gap)")
          .with_file(folder.path_of(shard_name(expected)));
    out.files.push_back(name);
    ++expected;
  }
  if (out.files.empty())
    return Error(ErrorKind::FileNotFound, "no consolidated.NN.pth nor consolidated.safetensors in the folder").with_file(folder.name());
  return out;
}

}  // namespace safeweights::original
