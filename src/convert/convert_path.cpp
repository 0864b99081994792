// convert_path (include/safeweights/convert.h): a path in, a path out, routed by what the input is and
// what the output names, through the plan providers (model/folder_planner.h), none of which it names.
#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "convert/planned_folder.h"
#include "core/status_macros.h"
#include "io/input_files.h"
#include "model/folder_planner.h"
#include "safeweights/convert.h"
#include "safeweights/folder.h"
#include "safeweights/format.h"

namespace safeweights {
namespace {

// An output names a folder when it is one (not through a symlink), ends in `/`, or its last component
// has no `.`; anything else with no written format's extension is ambiguous.
bool names_a_folder(const std::string& output, bool is_folder) {
  if (is_folder || output.ends_with('/')) return true;
  const std::string base = output.substr(output.find_last_of('/') + 1);
  return !base.empty() && base.find('.') == std::string::npos;
}

// A folder converts only as a model: one with config.json, routed below (transformers' own, or a folder
// of .bin weights), where the native files a Mistral repository ships beside it are never read, or an
// original layout (asked first, convert_layout). Anything else is refused before a weight is read,
// never written as a plain dump that no loader takes for a model: bare weights with the file to give
// instead. A folder without weights is left to open_tensors(), which names the files it looked for.
Status check_convertible_folder(const Folder& folder) {
  // Any entry of that name: one that is not a regular file is refused by name on the way (docs/GGUF.md).
  if (std::ranges::any_of(folder.entries(), [](const FolderEntry& e) { return e.name == "config.json"; })) return Status::ok();
  const std::optional<std::string_view> weights = weights_file_of(folder);
  if (!weights) return Status::ok();
  const std::string what = weights->ends_with(".index.json") ? "index file" : "weights file";
  return Error(ErrorKind::InvalidModelFolder, "has weights but no config.json: give the " + what + " itself (" + folder.path_of(*weights) +
                                                  ") to convert its tensors as plain tensors")
      .with_file(folder.name());
}

// A conversion into a folder is several conversions and the folder's own files: it has no dry run.
Status refuse_dry_run(const ConvertOptions& options, const std::string& output) {
  if (!options.dry_run) return Status::ok();
  return Error(ErrorKind::NotSupported, "a dry run converts into a file, not a folder").with_file(output);
}

void append_inputs(ConvertOptions& options, const InputFiles& inputs) {
  for (std::string& name : inputs.names()) options.inputs.push_back(std::move(name));
}

// An original layout (Meta's, Mistral's): to a transformers folder when the output names a folder,
// else to the output's format (GGUF), in one pass from the native weights either way.
Result<ConvertReport> convert_layout(const LayoutPlanner& layout, const Folder& folder, const std::string& output, ConvertOptions options,
                                     const FormatOptions& read, const InputFiles& inputs) {
  std::error_code ec;
  const bool output_folder = std::filesystem::is_directory(std::filesystem::symlink_status(output, ec));
  if (options.to.empty() && !output_format(output).is_ok() && names_a_folder(output, output_folder)) {
    SW_RETURN_IF_ERROR(refuse_dry_run(options, output));
    SW_ASSIGN_OR_RETURN(PlannedFolder planned, layout.plan_folder(folder, read, options.type));
    append_inputs(options, inputs);
    return convert_planned_folder(std::move(planned), output, std::move(options));
  }
  SW_ASSIGN_OR_RETURN(const Format* out, output_format(output, options.to));
  std::vector<std::string> notes;
  SW_ASSIGN_OR_RETURN(PlannedTensors planned, layout.plan_file(folder, read, *out, options.type, notes));
  options.plan = std::move(planned.plan);
  append_inputs(options, inputs);
  SW_ASSIGN_OR_RETURN(ConvertReport report, convert(*planned.tensors, output, options));
  report.notes = std::move(notes);
  return report;
}

}  // namespace

Result<ConvertReport> convert_path(const std::string& input, const std::string& output, ConvertOptions options, const FormatOptions& given,
                                   const std::string& entry, const std::function<void(const TensorFile&)>& opened) {
  // Every file read goes through the one resolver, which notes it: no output may replace one.
  InputFiles inputs;
  FormatOptions read = given;
  read.resolver = recording_resolver(resolver_of(given), inputs);
  std::error_code ec;
  std::optional<Folder> folder;
  if (names_folder(input)) {
    SW_ASSIGN_OR_RETURN(Folder listed, Folder::open(input, resolver_of(read)));
    if (const LayoutPlanner* layout = layout_planner_for(listed)) return convert_layout(*layout, listed, output, std::move(options), read, inputs);
    SW_RETURN_IF_ERROR(check_convertible_folder(listed));
    folder.emplace(std::move(listed));
  }
  if (folder && options.to.empty() && is_bin_folder(*folder)) {
    const bool output_folder = std::filesystem::is_directory(std::filesystem::symlink_status(output, ec));
    std::string stripped = output;
    while (stripped.size() > 1 && stripped.ends_with('/')) stripped.pop_back();
    auto written = output_format(stripped);
    if (written.is_ok() && (output_folder || stripped != output))
      return Error(ErrorKind::InvalidArgument, "the output names a folder (it exists, or ends in /) named like a " + std::string((*written)->name()) +
                                                   " file: name a file to write, or a folder without that extension")
          .with_file(output);
    if (!written.is_ok()) {
      if (names_a_folder(output, output_folder)) {
        SW_RETURN_IF_ERROR(refuse_dry_run(options, output));
        return convert_bin_folder(input, output, read, options, opened);
      }
      return Error(ErrorKind::InvalidArgument,
                   "a folder of .bin weights converts to a file named .gguf, .safetensors or .safetensors.index.json, or to a folder: "
                   "name a new folder without a `.` in its last component, end the name with `/`, or create the folder first")
          .with_file(output);
    }
  }
  SW_ASSIGN_OR_RETURN(std::unique_ptr<TensorFile> file, open_tensors(input, entry, read));
  if (opened) opened(*file);
  SW_ASSIGN_OR_RETURN(const Format* out, output_format(output, options.to));
  // A model folder that a plan provider writes in this format (a Hugging Face one into GGUF: llama.cpp's
  // names, Q/K order, metadata and tokenizer).
  if (const FolderPlanner* planner = folder ? planner_for(*folder, *out) : nullptr) {
    // A mix quantizes what llama.cpp's converter would write as F32 (--outtype f32), in one pass.
    if (options.mix && !options.type) options.type = TensorType::F32;
    SW_ASSIGN_OR_RETURN(PlannedTensors planned, planner->plan(*folder, *file, options.type));
    options.plan = std::move(planned.plan);
    append_inputs(options, inputs);
    SW_ASSIGN_OR_RETURN(ConvertReport report, convert(*planned.tensors, output, options));
    report.notes = std::move(planned.notes);
    return report;
  }
  append_inputs(options, inputs);
  return convert(*file, output, options);
}

std::span<const std::string_view> plain_type_names() noexcept {
  static constexpr std::string_view kNames[] = {"f32",  "f16",  "bf16", "q8_0", "q4_0", "q4_1", "q5_0",
                                                "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "nvfp4"};
  return kNames;
}

bool is_bin_folder(const Folder& folder) { return folder.has_file("pytorch_model.bin") || folder.has_file("pytorch_model.bin.index.json"); }

bool is_bin_folder(const std::string& folder) {
  auto opened = Folder::open(folder, uncached_resolver());
  return opened.is_ok() && is_bin_folder(*opened);
}

}  // namespace safeweights
