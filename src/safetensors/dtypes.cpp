// The safetensors spelling of element types: the 22 header codes, and the reference's enum order,
// which its writer sorts by. The only place safetensors codes live.
#include <array>

#include "safeweights/safetensors.h"
#include "safetensors/rules.h"

namespace safeweights::safetensors {
namespace {

struct Spelling {
  std::string_view code;
  TensorType type;
};

// In the reference's declaration order (its writer sorts tensors by this, descending).
constexpr std::array<Spelling, 22> kCodes = {{
    {"BOOL", TensorType::BOOL},       {"F4", TensorType::F4},
    {"F6_E2M3", TensorType::F6_E2M3}, {"F6_E3M2", TensorType::F6_E3M2},
    {"U8", TensorType::U8},           {"I8", TensorType::I8},
    {"F8_E5M2", TensorType::F8_E5M2}, {"F8_E4M3", TensorType::F8_E4M3},
    {"F8_E8M0", TensorType::F8_E8M0}, {"F8_E4M3FNUZ", TensorType::F8_E4M3FNUZ},
    {"F8_E5M2FNUZ", TensorType::F8_E5M2FNUZ},
    {"I16", TensorType::I16},         {"U16", TensorType::U16},
    {"F16", TensorType::F16},         {"BF16", TensorType::BF16},
    {"I32", TensorType::I32},         {"U32", TensorType::U32},
    {"F32", TensorType::F32},         {"C64", TensorType::C64},
    {"F64", TensorType::F64},         {"I64", TensorType::I64},
    {"U64", TensorType::U64},
}};

// rank_of[type] = position in kCodes + 1; 0 for types safetensors cannot spell.
constexpr std::array<std::uint8_t, kTensorTypeCount> make_ranks() {
  std::array<std::uint8_t, kTensorTypeCount> ranks{};
  for (std::size_t i = 0; i < kCodes.size(); ++i) ranks[static_cast<std::size_t>(kCodes[i].type)] = static_cast<std::uint8_t>(i + 1);
  return ranks;
}
constexpr auto kRanks = make_ranks();

}  // namespace

std::optional<TensorType> type_from_code(std::string_view code) noexcept {
  // Called once per tensor of every header: compare only the codes of the same length and first letter.
  if (code.empty()) return std::nullopt;
  for (const Spelling& s : kCodes) {
    if (s.code.size() == code.size() && s.code[0] == code[0] && s.code == code) return s.type;
  }
  return std::nullopt;
}

bool can_store(TensorType type) noexcept { return kRanks[static_cast<std::size_t>(type)] != 0; }

std::string_view type_code(TensorType type) noexcept {
  const std::uint8_t rank = kRanks[static_cast<std::size_t>(type)];
  return rank == 0 ? std::string_view() : kCodes[rank - 1].code;
}

int writer_sort_rank(TensorType type) noexcept { return kRanks[static_cast<std::size_t>(type)]; }

}  // namespace safeweights::safetensors
