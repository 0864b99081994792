// Hashing names a file chose (tensor names, pickle keys, JSON keys) for the tables that index them.
// Internal.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace safeweights {

// A hash of `s` under `seed`, for tables keyed by names a file chose. Seeded per process (hash_seed()),
// so whoever wrote the file cannot predict the layout and make lookups quadratic. Not cryptographic.
std::uint64_t hash_seed() noexcept;

inline std::uint64_t fold_mul(std::uint64_t a, std::uint64_t b) noexcept {
  __uint128_t m = static_cast<__uint128_t>(a) * b;
  return static_cast<std::uint64_t>(m) ^ static_cast<std::uint64_t>(m >> 64);
}

// Sixteen bytes a round with one multiply (the seed in both operands, so a name cannot be chosen to
// zero a product): a tensor name is typically 30-60 bytes, and a round of eight was most of the cost
// of indexing a 20,000-tensor header.
inline std::uint64_t hash_key(std::string_view s, std::uint64_t seed) noexcept {
  constexpr std::uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull;
  const char* p = s.data();
  const std::size_t n = s.size();
  const std::uint64_t secret = fold_mul(seed ^ k0, k1);  // mixed, so no block pair collides for every seed
  auto load64 = [](const char* q) {
    std::uint64_t v;
    std::memcpy(&v, q, 8);
    return v;
  };
  auto load32 = [](const char* q) {
    std::uint32_t v;
    std::memcpy(&v, q, 4);
    return std::uint64_t{v};
  };
  std::uint64_t h = seed ^ fold_mul(n ^ k0, k1);
  std::uint64_t a = 0, b = 0;  // the last (up to) sixteen bytes; with n, they determine every byte
  if (n > 16) {
    for (std::size_t i = 0; i + 16 < n; i += 16) h = fold_mul(load64(p + i) ^ secret, load64(p + i + 8) ^ h);
    a = load64(p + n - 16);
    b = load64(p + n - 8);
  } else if (n >= 8) {
    a = load64(p);
    b = load64(p + n - 8);
  } else if (n >= 4) {
    a = load32(p);
    b = load32(p + n - 4);
  } else if (n > 0) {
    a = std::uint64_t{static_cast<unsigned char>(p[0])} << 16 | std::uint64_t{static_cast<unsigned char>(p[n / 2])} << 8 |
        static_cast<unsigned char>(p[n - 1]);
  }
  return fold_mul(fold_mul(a ^ secret, b ^ h) ^ k0, h ^ seed ^ k1);
}

// The hasher for unordered containers keyed by names a file chose: hash_key under the process's seed
// (std::hash's fixed seed lets a file author make every name collide).
struct SeededHash {
  std::size_t operator()(std::string_view s) const noexcept { return hash_key(s, hash_seed()); }
};

}  // namespace safeweights
