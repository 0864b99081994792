// Format conversion (include/safeweights/convert.h). Placeholder until the converter lands.
#include "safeweights/convert.h"

namespace safeweights {

Result<ConvertReport> convert(const TensorFile& input, const std::string& output_path, const ConvertOptions&) {
  return Error(ErrorKind::NotSupported, "conversion of " + input.name() + " to " + output_path + " is not implemented yet");
}

}  // namespace safeweights
