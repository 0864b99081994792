// Gemma 1 (llama.cpp's "gemma", convert_hf_to_gguf.py's GemmaModel): Llama's layer unpermuted (NEOX
// rope), RMS norms that scale by (1 + weight) (written as weight + 1), GELU (tanh; transformers reads
// the legacy "gelu" of the first releases as the same), the output tied to the embedding (lm_head, when
// saved, dropped), a SentencePiece vocabulary without a space prefix, and token 107 as eot.
// llama.cpp's converter writes no rope keys for it: its loader's base 10000 is the only one it reads.
#include <array>

#include "hf/arch.h"
#include "hf/config_rules.h"
#include "hf/hf_files.h"
#include "hf/json_read.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 1> kClasses = {"GemmaForCausalLM"};
constexpr double kLlamaCppRopeBase = 10000.0;
// llama.cpp's GemmaModel.set_vocab names token 107 (<end_of_turn>) eot for every Gemma 1.
constexpr std::uint32_t kEotToken = 107;

constexpr std::array<TensorRule, 0> kLayer = {};

Status check(const JsonFile& file, ModelConfig& c) {
  SW_RETURN_IF_ERROR(refuse_true(file, "gemma", {"attention_bias", "use_bidirectional_attention"}));
  if (c.rope.type != "default") {
    return refuse_key(file, c.rope.source, "has rope type " + json::quoted(c.rope.type) + ": llama.cpp's converter writes no rope scaling for gemma");
  }
  // llama.cpp's converter writes no rope.freq_base; its loader then computes with 10000. Another base
  // is written (a file llama.cpp computes as transformers does, where its converter's would not).
  if (c.rope.theta.value_or(kLlamaCppRopeBase) == kLlamaCppRopeBase) c.rope.theta.reset();
  return Status::ok();
}

}  // namespace

SAFEWEIGHTS_HF_ARCHITECTURE(gemma) {
  static constexpr Architecture kArch{.classes = kClasses,
                                      .name = "gemma",
                                      .base = LayerBase::Llama,
                                      .layer = kLayer,
                                      .activation = "gelu_pytorch_tanh",
                                      .norms_plus_one = true,
                                      .tied_output = true,
                                      .spm_space_prefix = false,
                                      .check = check,
                                      .activation_alias = "gelu",
                                      .eot_token_id = kEotToken};
  return kArch;
}

}  // namespace safeweights::hf
