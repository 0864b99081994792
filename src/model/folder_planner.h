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
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
  std::vector<std::string> notes;  // ConvertReport::notes
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

// What a layout planner answers for a transformers folder: the weights under transformers' names and
// the plan that writes them, the files written beside them (config.json, generation_config.json, the
// tokenizer's files: name and text), and what was inferred rather than read (said to the user).
struct PlannedFolder {
  PlannedTensors weights;
  std::vector<std::pair<std::string, std::string>> files;
  std::vector<std::string> notes;
};

// A kind of model folder whose weights are not what open_tensors() reads (Meta's original download,
// Mistral's native layout: params.json beside consolidated.* files): its planner opens them itself, as
// a transformers folder or as a file of a format a plan is written in (GGUF).
class LayoutPlanner {
 public:
  virtual ~LayoutPlanner() = default;
  // Whether `folder` is of the layout it plans (recognised by content, never by globbing).
  virtual bool knows(const Folder& folder) const = 0;
  // As a transformers folder. Files are opened through `read`'s resolver.
  virtual Result<PlannedFolder> plan_folder(const Folder& folder, const FormatOptions& read, std::optional<TensorType> type) const = 0;
  // As a file of `output`'s format; NotSupported when it has no plan for that format. `notes` as above.
  virtual Result<PlannedTensors> plan_file(const Folder& folder, const FormatOptions& read, const Format& output, std::optional<TensorType> type,
                                           std::vector<std::string>& notes) const = 0;
};

// The layout planner that knows `folder`; nullptr when none does.
const LayoutPlanner* layout_planner_for(const Folder& folder);

// Every plan provider built, in the order they are asked.
std::span<const FolderPlanner* const> folder_planners() noexcept;
// The first plan provider that knows `folder` and writes `output`; nullptr when none does.
const FolderPlanner* planner_for(const Folder& folder, const Format& output);
// The file of `folder` that open_tensors() reads its tensors through (transformers' names, in the order
// it prefers them: model.safetensors.index.json, model.safetensors, pytorch_model.bin.index.json,
// pytorch_model.bin); none when it holds none of them.
std::optional<std::string_view> weights_file_of(const Folder& folder);

}  // namespace safeweights
