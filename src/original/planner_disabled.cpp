// The hf component switched off (SAFEWEIGHTS_WITH_HF=OFF): the original layouts are still recognised
// (layout.cpp), so that converting one is refused saying why rather than read as plain tensors.
#include "original/layout.h"
#include "original/planner.h"

namespace safeweights::original {
namespace {

Error refusal(const Folder& folder) {
  return Error(ErrorKind::NotSupported,
               "safeweights was built without the Hugging Face converter (SAFEWEIGHTS_WITH_HF=OFF), which original downloads need")
      .with_file(folder.name());
}

class DisabledPlanner final : public LayoutPlanner {
 public:
  bool knows(const Folder& folder) const override { return is_original_layout(folder); }
  Result<PlannedFolder> plan_folder(const Folder& folder, const FormatOptions&, std::optional<TensorType>) const override { return refusal(folder); }
  Result<PlannedTensors> plan_file(const Folder& folder, const FormatOptions&, const Format&, std::optional<TensorType>,
                                   std::vector<std::string>&) const override {
    return refusal(folder);
  }
};

}  // namespace

const LayoutPlanner& layout_planner() {
  static const DisabledPlanner planner;
  return planner;
}

}  // namespace safeweights::original
