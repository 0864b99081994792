// The pytorch component switched off (SAFEWEIGHTS_WITH_PYTORCH=OFF): CMake compiles this file instead
// of src/pytorch/'s readers, so the library holds no pickle machine. The format registry leaves the
// PyTorch format out (src/model/registry.cpp); these are the entry points of safeweights/pytorch.h (not
// installed then), and the .bin folder converter of convert.h, which the CLI's convert still calls; they
// refuse every input.
#include <string>

#include "safeweights/convert.h"
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

namespace safeweights {

// The folder converter reads .bin shards (src/convert/bin_folder.cpp, built with the component).
Result<ConvertReport> convert_bin_folder(const std::string& input_folder, const std::string& /*output_folder*/, const FormatOptions& /*read*/,
                                         const ConvertOptions& /*options*/, const std::function<void(const TensorFile&)>& /*opened*/) {
  return pytorch::not_built(input_folder);
}

}  // namespace safeweights
