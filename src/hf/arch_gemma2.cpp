// Gemma 2 (llama.cpp's "gemma2", Gemma2Model): pre and post norms around attention and MLP, RMS norms
// that scale by (1 + weight) (written as weight + 1), GELU (tanh), NEOX rope, the output tied to the
// embedding (which llama.cpp scales by sqrt(hidden) itself), attention and final logit soft-capping,
// and sliding-window attention on every other layer.
#include <array>
#include <cmath>

#include "hf/arch.h"
#include "hf/arch_gemma.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"Gemma2ForCausalLM"};

// Gemma 2's layer is rows::gemma_layer alone.
constexpr std::array<TensorRule, 0> kLayer = {};

// llama.cpp's gemma2 caps both logits always (50 and 30 when the keys are absent): a config without
// capping cannot be computed there.
Status check(const JsonFile& file, ModelConfig& c) {
  SW_RETURN_IF_ERROR(gemma::check_common(file, c, 2));
  const std::string a = "gemma2";
  for (std::string_view key : {"attn_logit_softcapping", "final_logit_softcapping"}) {
    SW_ASSIGN_OR_RETURN(auto cap, file.positive(file.root(), key));
    if (!cap) {
      return Error(ErrorKind::NotSupported,
                   "key " + json::quoted(key) + " is missing or null: llama.cpp's gemma2 architecture always caps the logits")
          .with_file(file.path());
    }
    c.arch_kv.push_back({a + "." + std::string(key), MetaValue::f32(static_cast<float>(*cap))});
  }
  return Status::ok();
}

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(gemma2) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "gemma2",
                                      .base = LayerBase::Gemma,
                                      .layer = kLayer,
                                      .activation = "gelu_pytorch_tanh",
                                      .norms_plus_one = true,
                                      .tied_output = true,
                                      .spm_space_prefix = false,
                                      .check = check};
  return kArch;
}

}  // namespace safeweights::hf
