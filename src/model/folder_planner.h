// Plan providers: a kind of model folder that converts to one format through a plan of its own (src/hf/:
// a Hugging Face model folder written as llama.cpp's GGUF). Declared here, below nothing that
// provides one, so that convert_path() asks them without naming any; listed in model/registry.cpp,
// the one file that knows which exist. Internal.
//
// Thread safety: plan providers are immutable; every function may be called from any thread.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "safeweights/error.h"
#include "safeweights/folder.h"
#include "safeweights/format.h"
#include "safeweights/tensor_file.h"
#include "safeweights/tensor_type.h"

namespace safeweights {

// What a plan provider answers: the tensors to read (over the folder's weights, which must outlive
// them) and the plan convert() writes them by.
struct PlannedTensors {
  std::unique_ptr<TensorFile> tensors;
  ConvertPlan plan;
};

class FolderPlanner {
 public:
  virtual ~FolderPlanner() = default;
  // The format its plans are written in.
  virtual const Format& output() const noexcept = 0;
  // Whether `folder` is of the kind it plans (plan() then answers, or says why it cannot).
  virtual bool knows(const Folder& folder) const = 0;
  // The plan of `folder`, whose weights are `weights`, for `type` (none: every tensor keeps its type).
  virtual Result<PlannedTensors> plan(const Folder& folder, const TensorFile& weights, std::optional<TensorType> type) const = 0;
};

// Every plan provider built, in the order they are asked.
std::span<const FolderPlanner* const> folder_planners() noexcept;
// The first plan provider that knows `folder` and writes `output`; nullptr when none does.
const FolderPlanner* planner_for(const Folder& folder, const Format& output);
// The file of `folder` that open_tensors() reads its tensors through (transformers' names, in the order
// it prefers them: model.safetensors.index.json, model.safetensors, pytorch_model.bin.index.json,
// pytorch_model.bin); none when it holds none of them.
std::optional<std::string_view> weights_file_of(const Folder& folder);

}  // namespace safeweights
