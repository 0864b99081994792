// JSON parsing shared by the formats, without simdjson in the interface: validation, the top level of a
// document, UTF-8 checks. Internal. Schemas live with their formats (src/<format>/); they reach the
// parser itself through json/dom.h.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status_macros.h"
#include "safeweights/error.h"

namespace safeweights::json {

// Bytes the JSON parser may read past the end of its input: buffers handed to the *_padded functions
// must have this many readable bytes after the text.
inline constexpr std::size_t kJsonPadding = 64;

// Whether `text` is one valid JSON document (strict RFC 8259, UTF-8, depth-limited). On failure, the
// message says why.
Status validate_json(std::string_view text, int max_depth = 1024);

// The top level of a JSON document: its type as Python names it (dict, list, str, int, float, bool,
// NoneType) and, for an object, its keys in order. InvalidArgument when `text` is not valid JSON.
struct TopLevel {
  std::string python_type;
  std::vector<std::string> keys;
  std::optional<std::string> duplicate_key;  // the first key that repeats, if any
};
Status read_top_level(std::string_view text, TopLevel& out);

// A hash of `s` under `seed`, for tables keyed by names a file chose. Seeded per process (hash_seed()),
// so whoever wrote the file cannot predict the layout and make lookups quadratic. Not cryptographic.
std::uint64_t hash_seed() noexcept;

inline std::uint64_t fold_mul(std::uint64_t a, std::uint64_t b) noexcept {
  __uint128_t m = static_cast<__uint128_t>(a) * b;
  return static_cast<std::uint64_t>(m) ^ static_cast<std::uint64_t>(m >> 64);
}

inline std::uint64_t hash_key(std::string_view s, std::uint64_t seed) noexcept {
  constexpr std::uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull;
  std::uint64_t h = seed ^ fold_mul(s.size() ^ k0, k1);
  const char* p = s.data();
  const std::size_t n = s.size();
  std::uint64_t tail = 0;
  if (n >= 8) {
    std::size_t i = 0;
    for (; i + 8 < n; i += 8) {
      std::uint64_t v;
      std::memcpy(&v, p + i, 8);
      h = fold_mul(h ^ v ^ k0, k1);
    }
    std::memcpy(&tail, p + n - 8, 8);  // the last 8 bytes, overlapping the previous block
  } else {
    for (std::size_t i = 0; i < n; ++i) tail = (tail << 8) | static_cast<unsigned char>(p[i]);
  }
  return fold_mul(h ^ tail ^ k1, k0 ^ seed);
}

// Whether `text` is valid UTF-8 (SIMD).
bool is_valid_utf8(std::string_view text) noexcept;

}  // namespace safeweights::json
