// The pytorch component switched off (SAFEWEIGHTS_WITH_PYTORCH=OFF): CMake compiles this file instead of
// bin_folder.cpp, which reads .bin shards. convert.h's folder converter, which the CLI's convert still
// calls, then refuses every input.
#include <string>

#include "convert/planned_folder.h"
#include "safeweights/convert.h"

namespace safeweights {

Result<ConvertReport> convert_bin_folder(const std::string& input_folder, const std::string& /*output_folder*/, const FormatOptions& /*read*/,
                                         const ConvertOptions& /*options*/, const std::function<void(const TensorFile&)>& /*opened*/) {
  return Error(ErrorKind::NotSupported, "safeweights was built without PyTorch checkpoints (SAFEWEIGHTS_WITH_PYTORCH=OFF)").with_file(input_folder);
}

Result<ConvertReport> convert_planned_folder(PlannedFolder /*planned*/, const std::string& output_folder, ConvertOptions /*options*/) {
  return Error(ErrorKind::NotSupported, "safeweights was built without PyTorch checkpoints (SAFEWEIGHTS_WITH_PYTORCH=OFF)").with_file(output_folder);
}

}  // namespace safeweights
