#include "model/multi_file_sink.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/status_macros.h"
#include "safeweights/atomic_file.h"

namespace safeweights {

Result<std::vector<std::size_t>> plan_parts(std::span<const TensorDecl> tensors, std::span<const std::uint64_t> sizes, const SplitLimits& limits) {
  if (!limits.starts.empty()) {
    for (std::size_t k = 0; k < limits.starts.size(); ++k)
      if (limits.starts[k] >= std::max<std::size_t>(sizes.size(), 1) || (k == 0) != (limits.starts[k] == 0) ||
          (k > 0 && limits.starts[k] <= limits.starts[k - 1]))
        return Error(ErrorKind::InvalidArgument,
                     "a split's first tensors must start at 0 and increase within the " + std::to_string(sizes.size()) + " tensors");
    return limits.starts;
  }
  std::vector<std::size_t> starts{0};
  std::uint64_t bytes = 0, count = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    std::uint64_t next = 0;
    if (__builtin_add_overflow(bytes, sizes[i], &next))
      return Error(ErrorKind::ValidationOverflow, "a file's data size overflows 64 bits").with_tensor(tensors[i].name);
    const bool full = count != 0 && ((limits.max_tensors != 0 && count >= limits.max_tensors) || (limits.max_bytes != 0 && next > limits.max_bytes));
    if (full) {
      starts.push_back(i);
      bytes = sizes[i];
      count = 1;
    } else {
      bytes = next;
      ++count;
    }
  }
  return starts;
}

MultiFileSink::MultiFileSink(std::string display, std::vector<std::unique_ptr<PlannedFileSink>> parts, IndexFile index)
    : display_(std::move(display)), parts_(std::move(parts)), index_(std::move(index)) {
  for (std::size_t k = 0; k < parts_.size(); ++k) {
    paths_.push_back(parts_[k]->files().front());
    for (const TensorDecl& d : parts_[k]->decls()) part_of_.emplace(d.name, k);
  }
  if (!index_.path.empty()) paths_.push_back(index_.path);
}

Error MultiFileSink::finished_error() const { return Error(ErrorKind::InvalidArgument, "writer already finished").with_file(display_); }

Result<PlannedFileSink*> MultiFileSink::part(std::string_view name) {
  if (finished_) return finished_error();
  auto it = part_of_.find(name);
  if (it == part_of_.end()) {
    return Error(ErrorKind::InvalidArgument, "tensor was not declared when the writer was created").with_file(display_).with_tensor(name);
  }
  return parts_[it->second].get();
}

Status MultiFileSink::write(std::string_view name, std::span<const std::byte> data) {
  SW_ASSIGN_OR_RETURN(PlannedFileSink * p, part(name));
  return p->write(name, data);
}

Status MultiFileSink::write_chunk(std::string_view name, std::span<const std::byte> chunk) {
  SW_ASSIGN_OR_RETURN(PlannedFileSink * p, part(name));
  return p->write_chunk(name, chunk);
}

Status MultiFileSink::copy_chunk(std::string_view name, const ByteSource& source, std::uint64_t offset, std::uint64_t length) {
  SW_ASSIGN_OR_RETURN(PlannedFileSink * p, part(name));
  return p->copy_chunk(name, source, offset, length);
}

void MultiFileSink::abandon_all() noexcept {
  for (const auto& p : parts_) p->file().abandon();
}

Status MultiFileSink::finish() {
  if (finished_) return finished_error();
  finished_ = true;
  for (const auto& p : parts_) {
    if (Status s = p->complete(); !s.is_ok()) {
      abandon_all();
      return s;
    }
  }
  std::vector<AtomicFile*> files;
  for (const auto& p : parts_) files.push_back(&p->file());
  std::optional<AtomicFile> index;
  if (!index_.path.empty()) {
    auto file = AtomicFile::create(index_.path, {index_.text.size(), index_.durable});
    Status s = file.is_ok() ? file->append(std::as_bytes(std::span<const char>(index_.text.data(), index_.text.size()))) : std::move(file).status();
    if (!s.is_ok()) {
      abandon_all();
      return s;
    }
    index.emplace(std::move(file).value());
    files.push_back(&*index);
  }
  return AtomicFile::commit_all(files);
}

}  // namespace safeweights
