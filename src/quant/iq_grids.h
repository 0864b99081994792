// The code-books of ggml's IQ1, IQ2 and IQ3 types (format facts, as data) and the sign table they share.
// Internal to src/quant.
//
// A grid entry is a short vector of small values; a block stores an entry's index instead of the
// values. Every grid is defined once, in iq_grids.cpp, as one code per entry (the entry's level
// indices as the digits of a number, element 0 least significant) and expanded here at compile time
// into the values themselves. tests/python/test_iq_grids.py compares every entry with gguf-py's own
// copy of the tables.
//
// Thread safety: constant data.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace safeweights::quant::iq {

// `Size` entries of `Width` values each.
template <typename T, std::size_t Size, std::size_t Width>
struct Grid {
  std::array<std::array<T, Width>, Size> entries;
  constexpr const std::array<T, Width>& operator[](std::size_t i) const noexcept { return entries[i]; }
  static constexpr std::size_t size() noexcept { return Size; }
  static constexpr std::size_t width() noexcept { return Width; }
};

// The codes themselves: the level index of element j of entry i is digit j of code i, base kIq2Base (IQ2,
// IQ1) or kIq3Base (IQ3). The quantizers search in level indices (iq_search.h).
constexpr unsigned kIq2Base = 3, kIq1Base = 3, kIq3Base = 8;
extern const std::uint16_t kIq2xxsCodes[256];
extern const std::uint16_t kIq2xsCodes[512];
extern const std::uint16_t kIq2sCodes[1024];
extern const std::uint16_t kIq3xxsCodes[256];
extern const std::uint16_t kIq3sCodes[512];
extern const std::uint16_t kIq1sCodes[2048];

extern const Grid<std::uint8_t, 256, 8> kIq2xxsGrid;  // values 8, 25, 43
extern const Grid<std::uint8_t, 512, 8> kIq2xsGrid;   // values 8, 25, 43
extern const Grid<std::uint8_t, 1024, 8> kIq2sGrid;   // values 8, 25, 43
extern const Grid<std::uint8_t, 256, 4> kIq3xxsGrid;  // values 4, 12, 20, 28, 36, 44, 52, 62
extern const Grid<std::uint8_t, 512, 4> kIq3sGrid;    // values 1, 3, 5, ..., 15
extern const Grid<std::int8_t, 2048, 8> kIq1sGrid;    // values -1, 0, 1 (IQ1_S and IQ1_M)

// The IQ2/IQ3 sign codes: 7 stored bits give the signs of elements 0..6 (a set bit is negative); the
// eighth sign makes the count of negatives even. Returns the 8 sign bits.
constexpr std::uint8_t sign_byte(unsigned seven_bits) noexcept {
  const unsigned low = seven_bits & 0x7fu;
  return static_cast<std::uint8_t>(low | ((static_cast<unsigned>(__builtin_popcount(low)) & 1u) << 7));
}

// IQ1's shift of every grid value: a block's values are scale x (grid value +/- kIq1Delta).
constexpr float kIq1Delta = 0.125f;

}  // namespace safeweights::quant::iq
