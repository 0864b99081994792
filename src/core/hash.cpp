#include "core/hash.h"

#include <chrono>
#include <random>

namespace safeweights {

std::uint64_t hash_seed() noexcept {
  static const std::uint64_t seed = [] {
    std::random_device rd;
    return (std::uint64_t{rd()} << 32) ^ rd() ^ static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  return seed;
}

}  // namespace safeweights
