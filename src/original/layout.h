// Meta's original download and Mistral's native layout recognised by content: params.json beside
// consolidated.NN.pth (Meta's model-parallel shards, NN from 00) or consolidated.safetensors (with or
// without its index), and no config.json (a transformers folder wins: a Mistral repository ships its
// transformers shards beside the native file, each reader ignoring the other's). Internal to
// src/original; needs nothing of the hf component, so the refusal of a build without it still
// recognises the layout.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/folder.h"

namespace safeweights::original {

// The weight files of an original layout.
struct NativeWeights {
  // Meta's model-parallel shards in index order (joined tensor by tensor), or the one file: Mistral's
  // consolidated.safetensors, its index consolidated.safetensors.index.json (split files, each tensor
  // whole), or a single consolidated.00.pth.
  std::vector<std::string> files;
  bool safetensors = false;
};

// Whether `folder` is an original layout (no config.json, params.json, a consolidated.* weight file).
bool is_original_layout(const Folder& folder);
// Its weight files. InvalidModelFolder naming the file for a shard missing from the sequence
// (consolidated.00.pth .. consolidated.NN.pth), a consolidated.* name outside the layout, or both .pth
// and .safetensors weights.
Result<NativeWeights> native_weights(const Folder& folder);

}  // namespace safeweights::original
