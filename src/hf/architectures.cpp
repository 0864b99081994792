// The lookup over every architecture registered with SAFEWEIGHTS_HF_ARCHITECTURE (hf/arch.h): the build
// writes hf/architectures.inc with one SAFEWEIGHTS_HF_ENTRY(id) per src/hf/arch_<id>.cpp, in file-name
// order (CMakeLists.txt), so no list here names them.
#include <array>

#include "hf/arch.h"

namespace safeweights::hf {

#define SAFEWEIGHTS_HF_ENTRY(id) SAFEWEIGHTS_HF_ARCHITECTURE(id);
#include "hf/architectures.inc"
#undef SAFEWEIGHTS_HF_ENTRY

namespace {

// Every registered architecture, in the order messages list them.
auto all() {
#define SAFEWEIGHTS_HF_ENTRY(id) &safeweights_hf_architecture_##id(),
  return std::to_array<const Architecture*>({
#include "hf/architectures.inc"
  });
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
