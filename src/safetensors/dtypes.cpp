// The safetensors spelling of element types: the 22 header codes, and the reference's enum order,
// which its writer sorts by. The only place safetensors codes live.
#include <algorithm>
#include <array>
#include <cstring>

#include "safeweights/safetensors.h"
#include "safetensors/writer.h"

namespace safeweights::safetensors {
namespace {

struct Spelling {
  std::string_view code;
  TensorType type;
};

// In the reference's declaration order (its writer sorts tensors by this, descending).
constexpr std::array<Spelling, 22> kCodes = {{
    {"BOOL", TensorType::BOOL},
    {"F4", TensorType::F4},
    {"F6_E2M3", TensorType::F6_E2M3},
    {"F6_E3M2", TensorType::F6_E3M2},
    {"U8", TensorType::U8},
    {"I8", TensorType::I8},
    {"F8_E5M2", TensorType::F8_E5M2},
    {"F8_E4M3", TensorType::F8_E4M3},
    {"F8_E8M0", TensorType::F8_E8M0},
    {"F8_E4M3FNUZ", TensorType::F8_E4M3FNUZ},
    {"F8_E5M2FNUZ", TensorType::F8_E5M2FNUZ},
    {"I16", TensorType::I16},
    {"U16", TensorType::U16},
    {"F16", TensorType::F16},
    {"BF16", TensorType::BF16},
    {"I32", TensorType::I32},
    {"U32", TensorType::U32},
    {"F32", TensorType::F32},
    {"C64", TensorType::C64},
    {"F64", TensorType::F64},
    {"I64", TensorType::I64},
    {"U64", TensorType::U64},
}};

// rank_of[type] = position in kCodes + 1; 0 for types safetensors cannot spell.
constexpr std::array<std::uint8_t, kTensorTypeCount> make_ranks() {
  std::array<std::uint8_t, kTensorTypeCount> ranks{};
  for (std::size_t i = 0; i < kCodes.size(); ++i) ranks[static_cast<std::size_t>(kCodes[i].type)] = static_cast<std::uint8_t>(i + 1);
  return ranks;
}
constexpr auto kRanks = make_ranks();

// A code as two little-endian words (codes are at most 11 bytes) and its length, so matching is one
// table slot and one compare: no string compare, no scan (a scan over the 22 codes mispredicted on
// headers that mix types, 10% of a 20,000-tensor parse).
struct CodeKey {
  std::uint64_t lo = 0, hi = 0, size = 0;
  constexpr bool operator==(const CodeKey&) const = default;
  constexpr std::uint64_t mixed() const { return lo ^ (hi * 0x100000001b3ull) ^ (size << 56); }
};
constexpr std::size_t kLongestCode = 11;
static_assert(std::all_of(kCodes.begin(), kCodes.end(), [](const Spelling& s) { return s.code.size() <= kLongestCode; }));

constexpr CodeKey key_of_literal(std::string_view code) {
  CodeKey k;
  k.size = code.size();
  for (std::size_t i = 0; i < code.size(); ++i) (i < 8 ? k.lo : k.hi) |= std::uint64_t{static_cast<unsigned char>(code[i])} << (8 * (i % 8));
  return k;
}
std::uint64_t load_le(const char* p, std::size_t n) noexcept {  // n <= 8 bytes, little-endian
  std::uint64_t w = 0;
  if (n >= 4) {
    std::uint32_t a, b;
    std::memcpy(&a, p, 4);
    std::memcpy(&b, p + n - 4, 4);
    w = a | std::uint64_t{b} << (8 * (n - 4));  // overlapping bytes are the same bytes
    if (n == 8) std::memcpy(&w, p, 8);
  } else if (n > 0) {
    const auto byte = [&](std::size_t i) { return std::uint64_t{static_cast<unsigned char>(p[i])} << (8 * i); };
    w = byte(0) | byte(n / 2) | byte(n - 1);
  }
  return w;
}
CodeKey key_of(std::string_view code) noexcept {  // code.size() <= 16
  const std::size_t n = code.size();
  return {load_le(code.data(), std::min<std::size_t>(n, 8)), n > 8 ? load_le(code.data() + 8, n - 8) : 0, n};
}

// A multiplier that sends the 22 codes to 22 different slots of 32: the first odd one from the golden
// ratio's that does (2,066 steps on; found offline, since clang's constexpr step limit stops a search
// at compile time). The check below proves it when compiling.
constexpr int kSlotBits = 5;
constexpr std::size_t slot_of(const CodeKey& k, std::uint64_t multiplier) { return (k.mixed() * multiplier) >> (64 - kSlotBits); }
constexpr std::uint64_t kMultiplier = 0x9e3779b97f4a8c39ull;
constexpr bool distinct_slots() {
  std::array<bool, 1u << kSlotBits> used{};
  for (const Spelling& s : kCodes) {
    const std::size_t slot = slot_of(key_of_literal(s.code), kMultiplier);
    if (used[slot]) return false;
    used[slot] = true;
  }
  return true;
}
static_assert(distinct_slots(), "two codes share a slot: pick another multiplier");

struct Slot {
  CodeKey key;  // size 0: empty
  TensorType type = TensorType::F32;
};
constexpr std::array<Slot, 1u << kSlotBits> make_slots() {
  std::array<Slot, 1u << kSlotBits> slots{};
  for (const Spelling& s : kCodes) slots[slot_of(key_of_literal(s.code), kMultiplier)] = {key_of_literal(s.code), s.type};
  return slots;
}
constexpr auto kSlots = make_slots();

}  // namespace

std::optional<TensorType> type_from_code(std::string_view code) noexcept {
  if (code.empty() || code.size() > kLongestCode) return std::nullopt;
  const CodeKey key = key_of(code);
  const Slot& slot = kSlots[slot_of(key, kMultiplier)];
  if (slot.key == key) return slot.type;
  return std::nullopt;
}

bool can_store(TensorType type) noexcept { return kRanks[static_cast<std::size_t>(type)] != 0; }

std::string_view type_code(TensorType type) noexcept {
  const std::uint8_t rank = kRanks[static_cast<std::size_t>(type)];
  return rank == 0 ? std::string_view() : kCodes[rank - 1].code;
}

int writer_sort_rank(TensorType type) noexcept { return kRanks[static_cast<std::size_t>(type)]; }

}  // namespace safeweights::safetensors
