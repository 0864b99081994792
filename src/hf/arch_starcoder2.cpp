// StarCoder2 (llama.cpp's "starcoder2", its converter's plain TextModel): LayerNorm with biases, a bias
// on every projection, the two-matrix GELU MLP (c_fc, c_proj), NEOX rope over whole heads (no
// permutation). llama.cpp's loader requires the output projection's, the MLP's and the norms' biases
// (use_bias false is refused), and attends to the whole context: the released checkpoints' sliding window
// (4096 of 16384) binds in transformers and not in llama.cpp, whose logits differ past the window. Its
// converter writes the file as if there were none; we write the window as the context (within which both
// compute the same) and say so in a note.
#include <array>

#include "hf/arch.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"Starcoder2ForCausalLM"};

constexpr std::array<TensorRule, 16> kLayer = {{
    rows::kAttnNorm,
    rows::kAttnNormBias,
    rows::q(Permute::None),
    rows::kQkvBias[0],
    rows::k(Permute::None),
    rows::kQkvBias[1],
    rows::kV,
    rows::kQkvBias[2],
    rows::kO,
    rows::kOBias,
    rows::kFfnNorm,
    rows::kFfnNormBias,
    rows::kGeluMlp[0],
    rows::kGeluMlp[1],
    rows::kGeluMlp[2],
    rows::kGeluMlp[3],
}};

Status check(const JsonFile& file, ModelConfig& c) {
  auto refuse = [&](const std::string& what) { return Error(ErrorKind::NotSupported, what).with_file(file.path()); };
  SW_ASSIGN_OR_RETURN(auto bias, file.boolean(file.root(), "use_bias"));
  if (bias == false) return refuse("key `use_bias` is false: llama.cpp's starcoder2 architecture requires the projections' biases");
  SW_ASSIGN_OR_RETURN(auto window, file.count(file.root(), "sliding_window"));
  if (window && c.max_position_embeddings && *window < *c.max_position_embeddings) {
    c.notes.push_back("sliding_window (" + std::to_string(*window) + ") is below max_position_embeddings (" +
                      std::to_string(*c.max_position_embeddings) +
                      "): llama.cpp's starcoder2 attends to the whole context, so starcoder2.context_length is the window, within "
                      "which it computes what transformers computes (llama.cpp's converter writes " +
                      std::to_string(*c.max_position_embeddings) + ")");
    c.max_position_embeddings = window;
  }
  return Status::ok();
}

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(starcoder2) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "starcoder2",
                                      .base = LayerBase::None,
                                      .layer = kLayer,
                                      .activation = "gelu_pytorch_tanh",
                                      .check = check,
                                      .norm = Norm::LayerNorm};
  return kArch;
}

}  // namespace safeweights::hf
