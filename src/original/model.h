// What an original download is, decided from params.json, the folder's tokenizer and the options
// (Llama's version, the context length, the rotary scaling), and the transformers files that say it:
// config.json and generation_config.json as transformers' converters compute them, and the tokenizer's
// files. Internal to src/original.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "original/params.h"
#include "original/weights.h"
#include "safeweights/error.h"
#include "safeweights/folder.h"
#include "safeweights/format.h"
#include "safeweights/tensor_type.h"

namespace safeweights::original {

enum class TokenizerKind { SentencePiece, Tiktoken, Tekken };

struct Model {
  bool mistral = false;
  std::string version;  // Meta's Llama: "1", "2", "3", "3.1", "3.2"; empty for Mistral
  TokenizerKind tokenizer = TokenizerKind::SentencePiece;
  std::string tokenizer_file;  // the folder's tokenizer file
  Dimensions dims;
  double norm_eps = 1e-5;
  double rope_theta = 10000;
  std::optional<double> llama3_factor;  // llama3 rope scaling (3.1: 8, 3.2: 32)
  std::uint32_t context = 0;
  std::optional<std::uint32_t> sliding_window;
  bool instruct = false;
  std::vector<std::string> notes;  // what was inferred
};

// Meta's FeedForward width (transformers' compute_intermediate_size): int(8 * dim / 3), times
// ffn_dim_multiplier (1), rounded up to a multiple of multiple_of (256).
std::uint64_t meta_intermediate_size(const Params& params);

// Decides everything but what needs the weights (dims.vocab when params.json leaves it, dims.tied for
// Meta). InvalidArgument naming the option when the version cannot be inferred or contradicts the
// folder; InvalidModelFolder naming params.json for dimensions that disagree.
Result<Model> decide_model(const Folder& folder, const Params& params, const OriginalOptions& options);

// The tokenizer's files and ids, in transformers' form.
struct TokenizerFiles {
  std::vector<std::pair<std::string, std::string>> files;  // name -> text (or bytes: a copied tokenizer.model)
  std::uint32_t vocab_size = 0;
  std::uint32_t bos = 0, eos = 0;
  std::optional<std::uint32_t> pad;
  std::vector<std::uint32_t> eos_ids;  // several (Llama 3.1 instruct)
};
Result<TokenizerFiles> tokenizer_files(const Folder& folder, const Model& model);

// config.json and generation_config.json, for weights of `dtype`.
std::string config_json(const Model& model, const TokenizerFiles& tokenizer, TensorType dtype);
std::string generation_config_json(const Model& model, const TokenizerFiles& tokenizer);

}  // namespace safeweights::original
