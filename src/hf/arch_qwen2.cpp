// Qwen2 (llama.cpp's "qwen2", Qwen2Model): Llama's layer with q/k/v biases, which it requires, and
// NEOX rope, so no row permutation.
#include <array>

#include "hf/arch.h"
#include "hf/arch_qwen.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"Qwen2ForCausalLM"};

}  // namespace

Status check_qwen_sliding_window(const JsonFile& file, ModelConfig&) {
  SW_ASSIGN_OR_RETURN(auto sliding, file.boolean(file.root(), "use_sliding_window"));
  if (sliding.value_or(false)) {
    return Error(ErrorKind::NotSupported, "key `use_sliding_window` is true: llama.cpp's qwen architectures have no sliding-window attention")
        .with_file(file.path());
  }
  return Status::ok();
}

SAFEWEIGHTS_HF_ARCHITECTURE(qwen2) {
  static constexpr Architecture kArch{
      .classes = kClasses, .name = "qwen2", .base = LayerBase::Llama, .layer = rows::kQkvBias, .check = check_qwen_sliding_window};
  return kArch;
}

}  // namespace safeweights::hf
