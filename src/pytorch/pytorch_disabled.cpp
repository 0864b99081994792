// The pytorch component switched off (SAFEWEIGHTS_WITH_PYTORCH=OFF): CMake compiles this file instead
// of src/pytorch/'s readers, so the library holds no pickle machine. The format registry leaves the
// PyTorch format out (src/model/registry.cpp); these are the entry points of safeweights/pytorch.h (not
// installed then); they refuse every input. (The .bin folder converter's stub is
// src/convert/bin_folder_disabled.cpp.)
#include <string>

#include "safeweights/pytorch.h"

namespace safeweights::pytorch {

// Not in an anonymous namespace: check_install.sh tells the implementation from this stub by those names.
static Error not_built(const std::string& input) {
  return Error(ErrorKind::NotSupported, "safeweights was built without PyTorch checkpoints (SAFEWEIGHTS_WITH_PYTORCH=OFF)").with_file(input);
}

Result<std::unique_ptr<Checkpoint>> open_checkpoint(const std::string& path, const FormatOptions& /*options*/) { return not_built(path); }

Result<std::unique_ptr<Checkpoint>> open_checkpoint(SourcePtr source, const FormatOptions& /*options*/) {
  return not_built(source ? source->name() : std::string());
}

Result<std::unique_ptr<Checkpoint>> open_checkpoint_index(const std::string& index_path, const FormatOptions& /*options*/) {
  return not_built(index_path);
}

}  // namespace safeweights::pytorch
