// The list of formats and of plan providers: adding a format is its folder plus one line here.
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status_macros.h"
#include "dduf/format.h"
#include "gguf/format.h"
#include "hf/planner.h"
#include "model/folder_planner.h"
#include "original/planner.h"
#if SAFEWEIGHTS_WITH_PYTORCH
#include "pytorch/format.h"
#endif
#include "safeweights/folder.h"
#include "safeweights/format.h"
#include "safetensors/format.h"

namespace safeweights {
namespace {

// The file a model folder's tensors are read through: transformers' names, in the order it prefers them.
constexpr std::string_view kWeightsFiles[] = {"model.safetensors.index.json", "model.safetensors", "pytorch_model.bin.index.json",
                                              "pytorch_model.bin"};

std::span<const Format* const> registry() {
  static const Format* const kFormats[] = {
    &safetensors::safetensors_format(),
    &safetensors::index_format(),
    &dduf::dduf_format(),
#if SAFEWEIGHTS_WITH_PYTORCH  // the pytorch component (CMakeLists.txt): out of the registry when it is not built
    &pytorch::pytorch_format(),
#endif
    &gguf::gguf_format(),
  };
  return kFormats;
}

}  // namespace

std::span<const Format* const> formats() noexcept { return registry(); }

std::span<const FolderPlanner* const> folder_planners() noexcept {
  static const FolderPlanner* const kPlanners[] = {
      &hf::gguf_planner(),
  };
  return kPlanners;
}

const FolderPlanner* planner_for(const Folder& folder, const Format& output) {
  for (const FolderPlanner* planner : folder_planners())
    if (&planner->output() == &output && planner->knows(folder)) return planner;
  return nullptr;
}

const LayoutPlanner* layout_planner_for(const Folder& folder) {
  static const LayoutPlanner* const kLayouts[] = {
      &original::layout_planner(),
  };
  for (const LayoutPlanner* layout : kLayouts)
    if (layout->knows(folder)) return layout;
  return nullptr;
}

std::optional<std::string_view> weights_file_of(const Folder& folder) {
  for (std::string_view name : kWeightsFiles)
    if (folder.has_file(name)) return name;
  return std::nullopt;
}

const Format* find_format(std::string_view name) noexcept {
  for (const Format* format : registry())
    if (format->name() == name) return format;
  return nullptr;
}

const Resolver& resolver_of(const FormatOptions& options) { return options.resolver ? *options.resolver : uncached_resolver(); }

Result<const Format*> detect_format(const std::string& path, const FormatOptions& options) {
  // Detection reads the first bytes only (over HTTP they come with the opening request).
  SW_ASSIGN_OR_RETURN(SourcePtr source, resolver_of(options).open(path, FileBackend::Pread));
  std::vector<std::byte> head(static_cast<std::size_t>(std::min<std::uint64_t>(kDetectBytes, source->size())));
  if (Status s = source->read_at(0, head); !s.is_ok()) return std::move(s).error();
  const Format* best = &safetensors::safetensors_format();  // its reader says what is wrong with anything else
  int best_score = 0;
  for (const Format* format : registry()) {
    const int score = format->detect(head, source->size(), path);
    if (score > best_score) {
      best = format;
      best_score = score;
    }
  }
  return best;
}

const Format* format_claimed_by_name(std::string_view path) noexcept {
  if (path.starts_with("http://") || path.starts_with("https://")) path = path.substr(0, path.find_first_of("?#"));
  // The longest claim wins: an index is named *.safetensors.index.json.
  const Format* claimed = nullptr;
  std::size_t longest = 0;
  for (const Format* format : registry())
    for (std::string_view ext : format->claimed_extensions())
      if (ext.size() > longest && path.ends_with(ext)) {
        claimed = format;
        longest = ext.size();
      }
  return claimed;
}

Status Format::can_hold(TensorType) const { return Error(ErrorKind::NotSupported, std::string(name()) + " files are read, not written"); }

Result<std::unique_ptr<TensorSink>> Format::create(const std::string& path, std::vector<TensorDecl>, const Metadata*, const WriteOptions&) const {
  return Error(ErrorKind::NotSupported, std::string(name()) + " files are read, not written").with_file(path);
}

StoredType Format::stored_type(TensorType requested, std::span<const std::uint64_t>) const { return {requested, {}}; }

void Format::retype_metadata(Metadata&, TensorType) const {}

Result<MixPlan> Format::plan_mix(const QuantizeMix& mix, std::span<const MixTensor>, const Metadata&) const {
  return Error(ErrorKind::NotSupported,
               std::string(name()) + " has no quantization mixes (--type " + mix.file_type + " is llama-quantize's, for GGUF)");
}

Result<const Format*> output_format(const std::string& path, std::string_view to) {
  std::string known;  // the written formats' names or extensions, for the message
  for (const Format* format : registry()) {
    if (format->extensions().empty()) continue;
    if (!to.empty() && format->name() == to) return format;
    for (std::string_view ext : format->extensions()) {
      if (to.empty() && path.ends_with(ext)) return format;
      if (to.empty()) known += (known.empty() ? "" : ", ") + std::string(ext);
    }
    if (!to.empty()) known += (known.empty() ? "" : ", ") + std::string(format->name());
  }
  if (!to.empty()) return Error(ErrorKind::InvalidArgument, "no format named `" + std::string(to) + "` is written (" + known + ")");
  return Error(ErrorKind::InvalidArgument, "the output's extension picks its format, one of: " + known).with_file(path);
}

Result<std::unique_ptr<TensorFile>> open_tensors(const std::string& path, const std::string& entry, const FormatOptions& given) {
  // Without a resolver of the caller's, one of this call's that keeps what it opens: detecting the
  // format and opening the file then share one source (over HTTP, the first request and its block).
  FormatOptions options = given;
  if (!options.resolver) options.resolver = caching_resolver();
  std::string file = path;
  if (names_folder(path)) {
    SW_ASSIGN_OR_RETURN(Folder folder, Folder::open(path, resolver_of(options)));
    const std::optional<std::string_view> weights = weights_file_of(folder);
    if (!weights) {
      std::string names;
      for (std::string_view name : kWeightsFiles) names += (names.empty() ? "" : ", ") + std::string(name);
      return Error(ErrorKind::FileNotFound, "none of " + names + " in the folder").with_file(path);
    }
    file = folder.path_of(*weights);
  }
  SW_ASSIGN_OR_RETURN(const Format* format, detect_format(file, options));
  std::vector<std::string> members;
  if (!entry.empty()) members.push_back(entry);
  return format->open(file, members, options);
}

}  // namespace safeweights
