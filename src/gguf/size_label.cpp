// general.size_label (gguf/size_label.h): gguf-py's parameter count and rounded notation.
#include "gguf/size_label.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace safeweights::gguf {
namespace {

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<std::uint64_t>::max() : sum;
}

std::uint64_t saturating_product(std::span<const std::uint64_t> shape) {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<std::uint64_t>::max();
  }
  return n;
}

}  // namespace

void ParameterCount::add(std::string_view name, std::span<const std::uint64_t> shape) {
  const std::uint64_t size = saturating_product(shape);
  total = saturating_add(total, size);
  if (name.find("_exps.") == std::string_view::npos || shape.size() < 3) {
    shared = saturating_add(shared, size);
    return;
  }
  // A bias [E, n] names its experts one dimension further in than a weight [E, rows, cols].
  const std::uint64_t n = shape[shape.size() - (name.find(".bias") != std::string_view::npos ? 2 : 3)];
  if (n == 0) return;  // no elements: nothing to share out
  expert = saturating_add(expert, size / n);
  expert_sum = saturating_add(expert_sum, n);
  ++expert_tensors;
}

std::string rounded_count(std::uint64_t count) {
  // gguf-py compares the integer with 1e12, 1e9, 1e6 and scales it by a float product.
  const double c = static_cast<double>(count);
  const auto [scaled, suffix] = c > 1e12  ? std::pair{c * 1e-12, 'T'}
                                : c > 1e9 ? std::pair{c * 1e-9, 'B'}
                                : c > 1e6 ? std::pair{c * 1e-6, 'M'}
                                          : std::pair{c * 1e-3, 'K'};
  // Decimals enough for two digits: the digits of round(scaled) (Python's round, half to even, as
  // nearbyint rounds by default), leading zeros stripped, so 0 has none.
  const double whole = std::nearbyint(scaled);
  int digits = 0;
  for (double w = whole; w >= 1; w /= 10) ++digits;
  const int decimals = std::max(2 - digits, 0);
  char text[64];
  std::snprintf(text, sizeof text, "%.*f%c", decimals, scaled, suffix);
  return text;
}

std::string size_label(const ParameterCount& count) {
  if (count.total == 0) return {};
  const std::uint64_t experts = count.experts();
  if (experts == 0) return rounded_count(count.total);
  return std::to_string(experts) + "x" + rounded_count(saturating_add(count.shared, count.expert));
}

}  // namespace safeweights::gguf
