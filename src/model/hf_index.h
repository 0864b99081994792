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

// An index as transformers writes it, json.dumps(index, indent=2, sort_keys=True) + "\n": `metadata`
// gives each key its value as JSON text (an integer stays an integer), `weight_map` each tensor its
// file; both are sorted here. Keys are unique.
std::string hf_index_text(std::vector<std::pair<std::string_view, std::string>> metadata,
                          std::vector<std::pair<std::string_view, std::string_view>> weight_map);

}  // namespace safeweights
