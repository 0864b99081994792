// The Hugging Face converter as a plan provider (model/folder_planner.h): what the registry lists, so
// that convert_path() routes a model folder written as GGUF here without naming either. Internal.
#pragma once

#include "model/folder_planner.h"

namespace safeweights::hf {

// A folder is_model_folder() knows, planned by plan() (safeweights/hf_gguf.h) for the GGUF format.
const FolderPlanner& gguf_planner();

}  // namespace safeweights::hf
