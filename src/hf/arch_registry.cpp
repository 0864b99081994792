// The lookup over the architectures hf/arch.h lists (SAFEWEIGHTS_HF_ARCHITECTURES, the one place that
// names them all).
#include <array>

#include "hf/arch.h"

namespace safeweights::hf {
namespace {

// Every architecture of SAFEWEIGHTS_HF_ARCHITECTURES, in its order.
auto all() {
#define SAFEWEIGHTS_HF_ENTRY(name) &name##_architecture(),
  return std::to_array<const Architecture*>({SAFEWEIGHTS_HF_ARCHITECTURES(SAFEWEIGHTS_HF_ENTRY)});
#undef SAFEWEIGHTS_HF_ENTRY
}

}  // namespace

const Architecture* find_architecture(std::string_view hf_class) {
  for (const Architecture* a : all()) {
    for (std::string_view c : a->classes) {
      if (c == hf_class) return a;
    }
  }
  return nullptr;
}

std::string supported_classes() {
  std::string out;
  for (const Architecture* a : all()) {
    for (std::string_view c : a->classes) out += (out.empty() ? "" : ", ") + std::string(c);
  }
  return out;
}

}  // namespace safeweights::hf
