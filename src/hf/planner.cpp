// The Hugging Face converter as a plan provider (hf/planner.h). Compiled with or without the hf
// component: it calls the entry points of safeweights/hf_gguf.h, which hf_disabled.cpp also defines
// (a transformers folder then converts to GGUF as a refusal that says why, never as plain tensors).
#include "hf/planner.h"

#include <utility>

#include "core/status_macros.h"
#include "gguf/format.h"
#include "safeweights/hf_gguf.h"

namespace safeweights {
namespace {

// Not in hf's anonymous namespace: tests/install/check_install.sh takes what is there for the hf
// component's code, and this file is compiled without the component too.
class HfGgufPlanner final : public FolderPlanner {
 public:
  const Format& output() const noexcept override { return gguf::gguf_format(); }
  bool knows(const Folder& folder) const override { return hf::is_model_folder(folder); }
  Result<PlannedTensors> plan(const Folder& folder, const TensorFile& weights, std::optional<TensorType> type) const override {
    SW_ASSIGN_OR_RETURN(hf::GgufConversion planned, hf::plan(folder, weights, type));
    return PlannedTensors{std::move(planned.tensors), std::move(planned.plan), std::move(planned.notes)};
  }
};

}  // namespace

const FolderPlanner& hf::gguf_planner() {
  static const HfGgufPlanner planner;
  return planner;
}

}  // namespace safeweights
