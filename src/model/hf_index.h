// transformers' index of a sharded checkpoint (`model.safetensors.index.json`,
// `pytorch_model.bin.index.json`): {"metadata": {...}, "weight_map": {"tensor": "file", ...}}. One schema
// for whatever the shards are, so the safetensors and PyTorch readers share it. Internal.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "safeweights/error.h"

namespace safeweights {

struct HfIndex {
  std::vector<std::pair<std::string, std::string>> weight_map;  // file order
  std::vector<std::pair<std::string, std::string>> metadata;    // values: strings as-is, others as JSON text
  std::vector<std::string> metadata_json;                       // the same values as JSON text (a string quoted), so types survive a rewrite
};
// InvalidIndex for malformed JSON or schema, DuplicateKey for repeated keys.
Status parse_hf_index(std::string_view text, HfIndex& out);

}  // namespace safeweights
