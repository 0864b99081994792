// Meta's original download and Mistral's native layout as a layout planner (model/folder_planner.h):
// what the registry lists, so that convert_path() routes such a folder here without naming it.
// Internal.
#pragma once

#include "model/folder_planner.h"

namespace safeweights::original {

// Knows a folder is_original_layout() recognises; plans it as a transformers folder, or as GGUF
// through hf::plan() run on that transformers view (so the GGUF written directly is the GGUF of the
// folder it would write).
const LayoutPlanner& layout_planner();

}  // namespace safeweights::original
