// An index of names a file chose (tensor names), by hash_key (core/hash.h) under a per-process seed: open
// addressing with linear probing in one array sized once from the count, so building it costs one
// allocation and a file crafted to collide cannot make lookups quadratic. Used by the safetensors
// header and the GGUF reader. Internal.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/hash.h"

namespace safeweights {

// Capacity a power of two, at most two thirds full (a few probes per lookup). A slot holds the upper
// 32 bits of the name's hash (a tag, so most mismatches never touch the name) and the position + 1
// (0: empty).
class NameTable {
 public:
  static std::size_t capacity_for(std::size_t count) noexcept {
    std::size_t cap = 16;
    while (cap < count + count / 2) cap <<= 1;
    return cap;
  }
  NameTable() = default;
  // Slots of its own, for `count` names.
  NameTable(std::size_t count, std::uint64_t seed) : seed_(seed), owned_(capacity_for(count), 0), slots_(owned_) {}
  // In `slots` (capacity_for(count) zeroed slots), which the caller owns and keeps.
  NameTable(std::span<std::uint64_t> slots, std::uint64_t seed) : seed_(seed), slots_(slots) {}
  // Movable (a vector's move keeps its buffer, so the view stays right), not copyable.
  NameTable(NameTable&&) noexcept = default;
  NameTable& operator=(NameTable&&) noexcept = default;
  NameTable(const NameTable&) = delete;
  NameTable& operator=(const NameTable&) = delete;
  std::uint64_t hash(std::string_view name) const noexcept { return hash_key(name, seed_); }
  void prefetch(std::uint64_t hash) const noexcept { __builtin_prefetch(&slots_[hash & (slots_.size() - 1)]); }
  // The slot for `name` (with hash `hash`): holding a position whose name equals `name`, or empty.
  template <typename NameOf>
  std::uint64_t& slot(std::string_view name, std::uint64_t hash, NameOf&& name_of) {
    const std::size_t mask = slots_.size() - 1;
    const std::uint64_t tag = hash >> 32;
    for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
      std::uint64_t& s = slots_[i];
      if (s == 0 || ((s >> 32) == tag && name_of(static_cast<std::uint32_t>(s) - 1) == name)) return s;
    }
  }
  // The position of `name`, or -1.
  template <typename NameOf>
  std::int64_t find(std::string_view name, NameOf&& name_of) const noexcept {
    if (slots_.empty()) return -1;
    const std::uint64_t s = const_cast<NameTable*>(this)->slot(name, hash(name), name_of);
    return s == 0 ? -1 : static_cast<std::int64_t>(static_cast<std::uint32_t>(s) - 1);
  }
  static std::uint64_t make(std::uint64_t hash, std::uint32_t position) { return (hash >> 32 << 32) | (position + 1u); }
  std::span<std::uint64_t> slots() const noexcept { return slots_; }

 private:
  std::uint64_t seed_ = 0;
  std::vector<std::uint64_t> owned_;
  std::span<std::uint64_t> slots_;
};

}  // namespace safeweights
