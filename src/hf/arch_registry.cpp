// The list of architectures (hf/arch.h): the one place that names them all.
#include <array>

#include "hf/arch.h"

namespace safeweights::hf {
namespace {

std::array<const Architecture*, 6> all() {
  return {&llama_architecture(), &qwen2_architecture(), &qwen3_architecture(), &gemma2_architecture(), &gemma3_architecture(), &phi3_architecture()};
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
