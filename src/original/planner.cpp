// The original layouts' planner (original/planner.h). The transformers view is planned once
// (transformers_view: names, shard pieces, q/k unpermuted to transformers' rotary order; config.json
// and the tokenizer's files); a GGUF is hf::plan() of that view, read from memory through a resolver of
// its own, with each transformers tensor then replaced by its pieces of the shards. llama.cpp's
// permutation of q and k undoes ours, so those are copied in Meta's order, which is llama.cpp's.
#include "original/planner.h"

#include <algorithm>
#include <map>
#include <memory>
#include <unordered_map>

#include "core/status_macros.h"
#include "gguf/format.h"
#include "original/layout.h"
#include "original/model.h"
#include "original/params.h"
#include "original/weights.h"
#include "safeweights/hf_gguf.h"

namespace safeweights::original {
namespace {

// An original download's transformers view: its weights, the plan of each transformers tensor, and
// the files written beside them.
struct View {
  std::unique_ptr<ShardSet> weights;
  std::vector<ViewTensor> tensors;
  std::vector<std::pair<std::string, std::string>> files;
  std::vector<std::string> notes;
  std::string tokenizer_file;  // the folder's file the tokenizer's files are made from
};

// An error hf::plan() gave about a file of the view (which the folder does not hold) says which of the
// folder's files that one is made from; the context is kept.
Error about_the_folder(Error e, const Folder& folder, const View& view) {
  const std::string& file = e.context().file;
  const bool config = file == folder.path_of("config.json") || file == folder.path_of("generation_config.json");
  const bool tokenizer = std::ranges::any_of(view.files, [&](const auto& f) { return file == folder.path_of(f.first); });
  if (!config && !tokenizer) return e;
  Error out(e.kind(), e.message() + " (in the transformers files made from " + (config ? "params.json" : view.tokenizer_file) + ")");
  out.with_file(file).with_rule(e.rule());
  if (!e.context().entry.empty()) out.with_entry(e.context().entry);
  if (!e.context().tensor.empty()) out.with_tensor(e.context().tensor);
  if (e.context().offset) out.with_offset(*e.context().offset);
  return out;
}

// The weights' type for config.json: the matrices' type, or the one asked for.
TensorType written_type(const std::vector<ViewTensor>& tensors, std::optional<TensorType> type) {
  if (type) return *type;
  for (const ViewTensor& t : tensors)
    if (t.decl.shape.size() >= 2) return t.decl.dtype;
  return TensorType::F32;
}

// Meta's 3.2 small models have no output.weight: their embeddings are the output. Any other Llama
// without one is missing it (refused by the view).
void decide_tied(const ShardSet& weights, Model& m) {
  if (!m.mistral) m.dims.tied = m.version == "3.2" && weights.shard(0).find("output.weight") == nullptr;
}

Status check_vocabulary(const Model& m, const TokenizerFiles& t, const Folder& folder) {
  if (t.vocab_size <= *m.dims.vocab) return Status::ok();
  return Error(ErrorKind::InvalidModelFolder,
               "holds " + std::to_string(t.vocab_size) + " tokens, more than the embeddings' " + std::to_string(*m.dims.vocab) + " rows")
      .with_file(folder.path_of(m.tokenizer_file));
}

Result<View> transformers_view_of(const Folder& folder, const FormatOptions& read, std::optional<TensorType> type) {
  SW_ASSIGN_OR_RETURN(Params params, read_params(folder));
  SW_ASSIGN_OR_RETURN(Model model, decide_model(folder, params, read.original));
  SW_ASSIGN_OR_RETURN(NativeWeights native, native_weights(folder));
  View view;
  SW_ASSIGN_OR_RETURN(view.weights, ShardSet::open(folder, native, read));
  decide_tied(*view.weights, model);
  SW_ASSIGN_OR_RETURN(view.tensors, transformers_view(*view.weights, model.dims));
  SW_ASSIGN_OR_RETURN(TokenizerFiles tokenizer, tokenizer_files(folder, model));
  SW_RETURN_IF_ERROR(check_vocabulary(model, tokenizer, folder));
  view.files.emplace_back("config.json", config_json(model, tokenizer, written_type(view.tensors, type)));
  view.files.emplace_back("generation_config.json", generation_config_json(model, tokenizer));
  for (auto& file : tokenizer.files) view.files.push_back(std::move(file));
  view.notes = std::move(model.notes);
  view.tokenizer_file = model.tokenizer_file;
  return view;
}

// The view's files, served from memory as the only files of the folder they are named in.
class ViewResolver final : public Resolver {
 public:
  explicit ViewResolver(const std::vector<std::pair<std::string, std::string>>& files) {
    for (const auto& [name, text] : files) files_.emplace(name, &text);
  }
  Result<SourcePtr> open(const std::string& name, FileBackend) const override {
    const std::string base = name.substr(name.find_last_of('/') + 1);
    auto it = files_.find(base);
    if (it == files_.end()) return Error(ErrorKind::FileNotFound, "not a file of the transformers view").with_file(name);
    return memory_source(std::as_bytes(std::span<const char>(it->second->data(), it->second->size())), name);
  }
  Result<std::vector<FolderEntry>> list(const std::string&) const override {
    std::vector<FolderEntry> entries;
    for (const auto& [name, text] : files_) entries.push_back({name, text->size(), false});
    return entries;
  }

 private:
  std::map<std::string, const std::string*> files_;  // sorted, as a listing is
};

// The transformers tensors as declared (names, types, shapes), for hf::plan(), which reads no bytes of a
// Llama-family weight: their bytes are nowhere (a read fails, never reaches outside).
class DeclaredFile final : public TensorFile {
 public:
  DeclaredFile(std::string name, const std::vector<ViewTensor>& tensors) : name_(std::move(name)), none_(memory_source({}, name_)) {
    for (const ViewTensor& t : tensors) {
      TensorEntry e{.name = t.decl.name, .type = t.decl.dtype, .shape = t.decl.shape, .source = none_.get()};
      entries_.push_back(e);
    }
  }
  std::string_view format() const noexcept override { return "original"; }
  const std::string& name() const noexcept override { return name_; }
  std::span<const TensorEntry> tensors() const noexcept override { return entries_; }
  const TensorEntry* find(std::string_view name) const noexcept override {
    for (const TensorEntry& e : entries_)
      if (e.name == name) return &e;
    return nullptr;
  }
  const Metadata* metadata() const noexcept override { return nullptr; }

 private:
  std::string name_;
  SourcePtr none_;
  std::vector<TensorEntry> entries_;
};

// hf::plan's tensors mapped back onto the shards: a transformers tensor becomes its pieces, and
// llama.cpp's q/k permutation cancels the view's unpermutation; a tensor hf::plan computed is borrowed.
Status map_onto_shards(View& view, hf::GgufConversion& gguf, std::vector<ConvertTensor>& out) {
  std::unordered_map<std::string_view, const ViewTensor*> by_name;
  for (const ViewTensor& t : view.tensors) by_name.emplace(t.decl.name, &t);
  for (ConvertTensor& t : gguf.plan.tensors) {
    auto it = by_name.find(t.source);
    if (it == by_name.end()) {
      const TensorEntry* computed = gguf.tensors->find(t.source);
      if (!computed) return Error(ErrorKind::TensorNotFound, "the GGUF plan names a tensor of neither view").with_tensor(t.source);
      view.weights->borrow(*computed);
      out.push_back(std::move(t));
      continue;
    }
    const ConvertTensor& from = it->second->plan;
    if (t.permute_heads != from.permute_heads)
      return Error(ErrorKind::NotSupported, "llama.cpp's rotary permutation does not undo transformers' here").with_tensor(t.name);
    ConvertTensor mapped = from;
    mapped.name = std::move(t.name);
    mapped.type = t.type;
    mapped.permute_heads = 0;
    mapped.unpermute = false;
    out.push_back(std::move(mapped));
  }
  return Status::ok();
}

class OriginalPlanner final : public LayoutPlanner {
 public:
  bool knows(const Folder& folder) const override { return is_original_layout(folder); }

  Result<PlannedFolder> plan_folder(const Folder& folder, const FormatOptions& read, std::optional<TensorType> type) const override {
    SW_ASSIGN_OR_RETURN(View view, transformers_view_of(folder, read, type));
    PlannedFolder out;
    for (ViewTensor& t : view.tensors) out.weights.plan.tensors.push_back(std::move(t.plan));
    out.weights.tensors = std::move(view.weights);
    out.files = std::move(view.files);
    out.notes = std::move(view.notes);
    return out;
  }

  Result<PlannedTensors> plan_file(const Folder& folder, const FormatOptions& read, const Format& output, std::optional<TensorType> type,
                                   std::vector<std::string>& notes) const override {
    if (&output != &gguf::gguf_format())
      return Error(ErrorKind::NotSupported,
                   "an original download converts to a transformers folder (OUT/) or to GGUF (OUT.gguf), not to " + std::string(output.name()))
          .with_file(folder.name());
    SW_ASSIGN_OR_RETURN(View view, transformers_view_of(folder, read, type));
    const ViewResolver resolver(view.files);
    // The folder's name is kept without its last '/', which a remote folder's name needs to name one.
    const std::string view_name = names_folder(folder.name()) ? folder.name() : folder.name() + "/";
    SW_ASSIGN_OR_RETURN(Folder view_folder, Folder::open(view_name, resolver));
    auto declared = std::make_unique<DeclaredFile>(folder.name(), view.tensors);
    auto planned = hf::plan(view_folder, *declared, type);
    if (!planned.is_ok()) return about_the_folder(std::move(planned).error(), folder, view);
    hf::GgufConversion gguf = std::move(planned).value();
    PlannedTensors out;
    SW_RETURN_IF_ERROR(map_onto_shards(view, gguf, out.plan.tensors));
    out.plan.metadata = std::move(gguf.plan.metadata);
    view.weights->keep(std::move(declared));
    view.weights->keep(std::move(gguf.tensors));
    out.tensors = std::move(view.weights);
    for (std::string& note : view.notes) notes.push_back(std::move(note));
    return out;
  }
};

}  // namespace

const LayoutPlanner& layout_planner() {
  static const OriginalPlanner planner;
  return planner;
}

}  // namespace safeweights::original
