// The pytorch component switched off (SAFEWEIGHTS_WITH_PYTORCH=OFF): CMake compiles this file instead
// of src/pytorch/'s readers, so the library holds no pickle machine. The format registry leaves the
// PyTorch format out (src/model/registry.cpp); these are the entry points of safeweights/pytorch.h (not
// installed then), which the CLI's convert still calls, and they refuse every input.
#include <string>

#include "safeweights/pytorch.h"

namespace safeweights::pytorch {

// Not in an anonymous namespace: check_install.sh tells the implementation from this stub by those names.
static Error not_built(const std::string& input) {
  return Error(ErrorKind::NotSupported, "safeweights was built without PyTorch checkpoints (SAFEWEIGHTS_WITH_PYTORCH=OFF)").with_file(input);
}

Result<std::unique_ptr<Checkpoint>> open_checkpoint(const std::string& path, const CheckpointOptions& /*options*/) { return not_built(path); }

Result<std::unique_ptr<Checkpoint>> open_checkpoint(SourcePtr source, const CheckpointOptions& /*options*/) {
  return not_built(source ? source->name() : std::string());
}

Result<std::unique_ptr<Checkpoint>> open_checkpoint_index(const std::string& index_path, const CheckpointOptions& /*options*/) {
  return not_built(index_path);
}

Status convert_to_safetensors(const std::string& input, const std::string& /*output*/, const ConvertOptions& /*options*/) { return not_built(input); }

Result<std::vector<std::string>> convert_folder(const std::string& input_folder, const std::string& /*output_folder*/,
                                                const ConvertOptions& /*options*/) {
  return not_built(input_folder);
}

}  // namespace safeweights::pytorch
