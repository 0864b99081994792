// Checkpoint -> safetensors: the reader's entries (already contiguous little-endian bytes) declared
// to the safetensors StreamWriter and copied with copy_tensors; --dedup leaves out names that are the
// same tensor as a kept one and records them in the metadata.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/status_macros.h"
#include "safeweights/cancel.h"
#include "safeweights/pytorch.h"
#include "safeweights/safetensors_writer.h"

namespace safeweights::pytorch {
namespace {

// The tensors of a checkpoint that are written: all of them, or one per storage with --dedup.
class Selection final : public TensorFile {
 public:
  Selection(const Checkpoint& from, std::vector<TensorEntry> entries, MetadataEntries metadata)
      : from_(from), entries_(std::move(entries)), metadata_(std::move(metadata)) {
    for (std::size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].name, i);
  }
  std::string_view format() const noexcept override { return from_.format(); }
  const std::string& name() const noexcept override { return from_.name(); }
  std::span<const TensorEntry> tensors() const noexcept override { return entries_; }
  const TensorEntry* find(std::string_view n) const noexcept override {
    auto it = index_.find(n);
    return it == index_.end() ? nullptr : &entries_[it->second];
  }
  const MetadataEntries* metadata() const noexcept override { return &metadata_; }

 private:
  const Checkpoint& from_;
  std::vector<TensorEntry> entries_;
  MetadataEntries metadata_;
  std::unordered_map<std::string_view, std::size_t> index_;
};

// A name is an alias when it is the same tensor as the kept one of its storage: both cover the whole
// storage with the same type and shape. The kept one is the smallest such name (as safetensors'
// convert.py chooses); views of other shapes are written with their own contents.
Selection select(const Checkpoint& c, bool dedup) {
  MetadataEntries metadata = c.metadata() ? *c.metadata() : MetadataEntries{};
  std::vector<TensorEntry> kept;
  if (!dedup) return Selection(c, std::vector<TensorEntry>(c.tensors().begin(), c.tensors().end()), metadata);
  std::unordered_map<std::string_view, const TensorEntry*> keeper;  // storage -> kept entry
  for (const TensorEntry& e : c.tensors()) {
    if (!c.covers_storage(e)) continue;
    auto [it, fresh] = keeper.emplace(c.storage_of(e), &e);
    if (!fresh && e.name < it->second->name) it->second = &e;
  }
  std::map<std::string, std::string> aliases;
  for (const TensorEntry& e : c.tensors()) {
    auto it = keeper.find(c.storage_of(e));
    const TensorEntry* k = it == keeper.end() ? nullptr : it->second;
    if (k && k != &e && c.covers_storage(e) && k->type == e.type && std::ranges::equal(k->shape, e.shape)) {
      aliases.emplace(std::string(e.name), std::string(k->name));
      continue;
    }
    kept.push_back(e);
  }
  for (auto& [alias, name] : aliases) metadata.emplace_back(alias, name);
  return Selection(c, std::move(kept), std::move(metadata));
}

// Forwards to the writer, reporting progress after each tensor and checking for cancellation.
class ProgressSink final : public TensorSink {
 public:
  ProgressSink(TensorSink& to, const Selection& from, const ConvertOptions& options) : to_(to), from_(from), options_(options) {}
  Status write(std::string_view name, std::span<const std::byte> data) override { return to_.write(name, data); }
  Status write_chunk(std::string_view name, std::span<const std::byte> chunk) override {
    SW_RETURN_IF_ERROR(check_cancelled());
    SW_RETURN_IF_ERROR(to_.write_chunk(name, chunk));
    bytes_ += chunk.size();
    if (const TensorEntry* e = from_.find(name); e && (written_ += chunk.size()) == e->nbytes) {
      written_ = 0;
      ++tensors_;
      if (options_.progress) options_.progress(tensors_, bytes_);
    }
    return Status::ok();
  }
  Status finish() override { return to_.finish(); }

 private:
  TensorSink& to_;
  const Selection& from_;
  const ConvertOptions& options_;
  std::uint64_t bytes_ = 0;
  std::uint64_t written_ = 0;  // of the current tensor
  std::size_t tensors_ = 0;
};

}  // namespace

Status convert_to_safetensors(const std::string& input, const std::string& output, const ConvertOptions& options) {
  SW_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, open_checkpoint(input, options.read));
  const Selection selection = select(*checkpoint, options.dedup);
  std::vector<TensorDecl> decls;
  decls.reserve(selection.tensors().size());
  for (const TensorEntry& e : selection.tensors())
    decls.push_back({std::string(e.name), e.type, std::vector<std::uint64_t>(e.shape.begin(), e.shape.end())});
  safetensors::WriteOptions write;
  write.durable = options.durable;
  SW_ASSIGN_OR_RETURN(safetensors::StreamWriter writer,
                      safetensors::StreamWriter::create(output, std::move(decls), *selection.metadata(), write));
  ProgressSink sink(writer, selection, options);
  if (Status s = copy_tensors(selection, sink); !s.is_ok()) return std::move(s.error().with_file(input));
  return Status::ok();
}

}  // namespace safeweights::pytorch
