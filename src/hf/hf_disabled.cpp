// The hf component switched off (SAFEWEIGHTS_WITH_HF=OFF): CMake compiles this file instead of src/hf/'s
// converter, so the library holds no tokenizer or config readers. These are the entry points of
// safeweights/hf_gguf.h (not installed then), which the plan provider (hf/planner.cpp) still calls.
#include <string>

#include "safeweights/hf_gguf.h"

namespace safeweights::hf {

// Not in an anonymous namespace: check_install.sh tells the implementation from this stub by those names.
static Error not_built(const std::string& folder) {
  return Error(ErrorKind::NotSupported, "safeweights was built without the Hugging Face converter (SAFEWEIGHTS_WITH_HF=OFF)").with_file(folder);
}

// Without the config reader the architecture cannot be read: every transformers folder (one with a
// config.json) counts, so that converting one to GGUF is refused with the
// reason (plan() below, which convert_path reaches for such a folder), rather than converted as a plain
// folder of tensors without its model metadata.
bool is_model_folder(const Folder& folder) { return folder.has_file("config.json"); }

bool is_model_folder(const std::string& folder) {
  auto opened = Folder::open(folder, uncached_resolver());
  return opened.is_ok() && is_model_folder(*opened);
}

Result<GgufConversion> plan(const Folder& folder, const TensorFile& /*weights*/, std::optional<TensorType> /*type*/, const GgufOptions& /*options*/) {
  return not_built(folder.name());
}

Result<GgufConversion> plan(const std::string& folder, const TensorFile& /*weights*/, std::optional<TensorType> /*type*/,
                            const GgufOptions& /*options*/) {
  return not_built(folder);
}

}  // namespace safeweights::hf
