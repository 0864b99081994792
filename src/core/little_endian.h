// Little-endian loads and stores, for every binary format. Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace safeweights::le {

inline std::uint64_t load(const std::byte* p, int bytes) noexcept {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  // One load for the common widths (the parsers' inner loops), whether or not `bytes` is a constant.
  switch (bytes) {
    case 8: {
      std::uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case 4: {
      std::uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case 2: {
      std::uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case 1: return std::to_integer<std::uint64_t>(p[0]);
    default: break;
  }
#endif
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint64_t>(p[i]);
  return v;
}
inline std::uint16_t u16(const std::byte* p) noexcept { return static_cast<std::uint16_t>(load(p, 2)); }
inline std::uint32_t u32(const std::byte* p) noexcept { return static_cast<std::uint32_t>(load(p, 4)); }
inline std::uint64_t u64(const std::byte* p) noexcept { return load(p, 8); }

inline void append(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
inline void store(std::byte* p, std::uint64_t v, int bytes) noexcept {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xFF);
}

}  // namespace safeweights::le
