// The mixture-of-experts family: what an architecture's table says about its experts (MoeTable), the
// config keys that describe them (read_moe), and the plan of one layer's experts (plan_experts):
// per-expert tensors stacked into llama.cpp's ffn_{gate,up,down}_exps [E, ...], or transformers 5's
// fused experts.gate_up_proj [E, 2F, D] split into gate and up and experts.down_proj [E, D, F] as it
// is, the router kept F32 (ffn_gate_inp), shared experts and their gate. Each piece is a plan operation
// (ConvertTensor::pieces) the pipeline streams: no expert is read here. Internal to src/hf; the facts
// are llama.cpp's (conversion/qwen.py, llama.py, olmo.py; base.py's set_gguf_parameters and its list of
// tensors kept F32; src/models/*.cpp for what each architecture computes).
//
// Thread safety: constant tables and pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hf/arch.h"
#include "hf/hf_files.h"
#include "safeweights/error.h"
#include "safeweights/tensor_file.h"

namespace safeweights::hf {

// llama.cpp's loader holds at most LLAMA_MAX_EXPERTS (llama-hparams.h) experts per layer.
inline constexpr std::int64_t kMaxExperts = 1024;

struct MoeTable {
  std::string_view block;                  // the MLP's name in a layer: "mlp", Mixtral's "block_sparse_moe"
  std::string_view fused_block = {};       // the same with transformers 5's fused experts, when it differs (Mixtral: "mlp")
  std::array<std::string_view, 3> expert;  // one expert's gate, up and down: "gate_proj"... or "w1", "w3", "w2"
  bool fused = true;                       // transformers 5's experts.gate_up_proj / experts.down_proj accepted
  std::span<const TensorRule> shared{};    // the shared expert and its gate (Qwen2-MoE), after "model.layers.N."
  // Whether llama.cpp's graph renormalizes the chosen experts' weights to sum 1 (build_moe_ffn's norm_w).
  bool normalizes = true;
  // Whether transformers reads norm_topk_prob (its default false): it must then say what llama.cpp
  // computes. Without it (Mixtral) transformers always renormalizes.
  bool norm_key = true;
  // config.json's moe_intermediate_size is one expert's width, written as expert_feed_forward_length
  // (else the experts are intermediate_size wide, as Mixtral's, and no such key is written).
  bool expert_ffn_key = true;
  // decoder_sparse_step / mlp_only_layers (Qwen's): only every layer sparse, as llama.cpp has them.
  bool sparse_step_keys = true;
  // shared_expert_intermediate_size: the shared expert's width (expert_shared_feed_forward_length).
  bool shared_ffn_key = false;
};

class WithGenerated;

// One layer's experts as Architecture::plan_experts plans them: tensors appended to `out`, computed
// ones added to `computed`, and every input tensor they read named in `consumed` (so that the plan's
// check for tensors left over knows them).
struct LayerExperts {
  const ModelConfig& config;
  const TensorFile& weights;
  const std::string& hf;  // "model.layers.N."
  const std::string& gg;  // "blk.N."
  WithGenerated& computed;
  std::vector<ConvertTensor>& out;
  std::vector<std::string>& consumed;
};

// Reads the experts of an architecture with a MoeTable into `c.moe`, with llama.cpp's keys for them in
// `c.arch_kv`; NotSupported naming the key for what llama.cpp computes otherwise (norm_topk_prob,
// dense layers among sparse ones); InvalidModelFolder for missing or out-of-range counts.
Status read_moe(const JsonFile& file, ModelConfig& c);

// The experts of one layer of `weights`: `hf` is "model.layers.N.", `gg` "blk.N.". Appends to `out`;
// TensorNotFound / InvalidModelFolder (expect_tensor, hf/arch.h) for a missing or misshapen expert.
Status plan_experts(const MoeTable& table, const MoeConfig& moe, std::uint64_t hidden, const std::string& hf, const std::string& gg,
                    const TensorFile& weights, std::vector<ConvertTensor>& out);

// DeepSeek-V3's experts, which GLM-4.5 shares: n_routed_experts of moe_intermediate_size chosen by sigmoid
// scores plus e_score_correction_bias (exp_probs_b), routed_scaling_factor, norm_topk_prob, n_shared_experts
// shared experts run as one MLP n_shared_experts times as wide, and first_k_dense_replace dense layers
// first. What differs is how each llama.cpp architecture takes the keys:
struct SigmoidRouting {
  // llama.cpp's graph chooses experts within topk_group of n_group groups (deepseek2); false: it does
  // not group (glm4moe), so a topk_group below n_group (transformers' group mask) is refused. Both
  // written as expert_group_{count,used_count} when given, as llama.cpp's converter writes them.
  bool grouped = true;
  // expert_weights_norm written whatever norm_topk_prob says, transformers' default (true) when absent
  // (glm4moe's converter writes the key's value); false: only when true (deepseek2's).
  bool norm_always = false;
  // {arch}.vocab_size written (deepseek2's converter writes it).
  bool vocab_key = true;
};

// Reads those keys into c.moe, with llama.cpp's keys for them in c.arch_kv; NotSupported naming the
// key llama.cpp would compute otherwise, InvalidModelFolder for a malformed one.
Status read_sigmoid_experts(const JsonFile& file, ModelConfig& c, const SigmoidRouting& how);

// Layer `n`'s MLP for read_sigmoid_experts (`hf`: "model.layers.N.", `gg`: "blk.N."): dense below
// first_k_dense_replace, else the experts (both layouts), their correction bias and the shared experts.
Status plan_sigmoid_mlp(const ModelConfig& c, const TensorFile& weights, const std::string& hf, const std::string& gg, std::uint32_t n,
                        std::vector<ConvertTensor>& out);

}  // namespace safeweights::hf
