// safeweights/hf_gguf.h — Hugging Face model folders to GGUF files that llama.cpp loads and runs.
//
// A folder with config.json naming a class an architecture of src/hf/ converts (LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, Gemma2ForCausalLM,
// Gemma3ForCausalLM, Phi3ForCausalLM; docs/GGUF.md lists them with llama.cpp's architecture names; any
// other is refused by name), its weights (model.safetensors, or shards with model.safetensors.index.json)
// and a tokenizer (in llama.cpp's order of preference: tokenizer.model, SentencePiece; tokenizer.json, a
// SentencePiece-style BPE with byte fallback or a byte-level BPE; plus tokenizer_config.json) is planned
// as llama.cpp's converter does it: llama.cpp's tensor names (fused, permuted, split or stacked as it
// wants them: a mixture of experts' per-expert tensors stacked into one [E, ...] tensor each, or
// transformers 5's fused experts split), the hyper-parameters under its keys with the value types its
// loader demands (rotary embeddings from transformers 4's rope_theta / rope_scaling or transformers 5's
// rope_parameters: default, linear, yarn, llama3 with its computed rope_freqs tensor, Phi-3's longrope
// with its factor tensors), and the tokenizer as GGUF metadata. The plan is handed to convert()
// (safeweights/convert.h, ConvertOptions::plan), which writes the file; convert_path() does so for a
// model folder written as GGUF, through the plan provider that src/hf/ registers (it includes nothing of
// convert/, nor convert/ of it). What llama.cpp would compute differently from transformers (another rope
// type or architecture, a config key not understood, another activation, experts weighted otherwise) is
// refused by name, never written.
// docs/GGUF.md says what is mapped and which llama.cpp version the rules come from.
//
// Every file of the folder is hostile input: JSON and protobuf files are read with size caps, numbers
// are range-checked, and errors name the file and the key.
//
// Thread safety: the functions keep no state; they may run concurrently.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/folder.h"
#include "safeweights/tensor_file.h"
#include "safeweights/tensor_type.h"

namespace safeweights::hf {
SAFEWEIGHTS_API_BEGIN

// Whether `folder` is a Hugging Face model folder for plan(): its config.json describes a model
// ("architectures" or "model_type"), or cannot be read at all (plan() then says why, naming the file,
// rather than the folder being converted as plain tensors). A folder without config.json, or whose
// config.json describes something else (a diffusers component), is not.
bool is_model_folder(const Folder& folder);
// The same for a folder's name, local or remote (safeweights/folder.h), opened with uncached_resolver().
bool is_model_folder(const std::string& folder);

// Options of a conversion to GGUF, for every architecture.
struct GgufOptions {
  // tokenizer.ggml.pre for a BPE tokenizer. Empty: recognised from what tokenizer.json's pre_tokenizer
  // is (its steps, its normalizer and model.ignore_merges; docs/GGUF.md lists the structures known); any
  // other pre-tokenizer is refused, naming it, unless a llama.cpp pre-tokenizer is named here.
  std::string bpe_pre;
};

// What plan() gives convert(): the tensors to read (the weights plus those llama.cpp's converter
// computes from config.json, such as rope_freqs for llama3 rope scaling) and the plan over them:
//   auto c = hf::plan(folder, *weights, type);  options.plan = std::move(c->plan);
//   convert(*c->tensors, out, options);
struct GgufConversion {
  std::unique_ptr<TensorFile> tensors;  // refers to the weights given to plan(), which must outlive it
  ConvertPlan plan;
  // What the user should know of the conversion (a multimodal folder's vision tower left out), as
  // ConvertReport::notes.
  std::vector<std::string> notes;
};

// Plans the conversion of `folder`, whose weights are `weights` (open_tensors(folder), format.h), to
// `type` (none: every tensor keeps its type; general.file_type then follows the weights' matrices): the
// tensors with their llama.cpp names and permutations, and the GGUF metadata (architecture,
// hyper-parameters, tokenizer).
// NotSupported, naming the file and the key, for what llama.cpp cannot compute as transformers does
// (experts weighted otherwise, a rope type or rope key not mapped, another activation, a tensor with no
// llama.cpp name); InvalidModelFolder for config or tokenizer files that are malformed, out of range or
// disagree with the weights (a shape, a token id), naming the file and the key or tensor; DuplicateKey
// for a repeated JSON key; TensorNotFound for a missing tensor; FileNotFound when there is no tokenizer.
Result<GgufConversion> plan(const Folder& folder, const TensorFile& weights, std::optional<TensorType> type, const GgufOptions& options = {});
// The same for a folder's name, local or remote, opened with uncached_resolver().
Result<GgufConversion> plan(const std::string& folder, const TensorFile& weights, std::optional<TensorType> type, const GgufOptions& options = {});

SAFEWEIGHTS_API_END
}  // namespace safeweights::hf
