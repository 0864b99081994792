#include "model/planned_sink.h"

#include <utility>

#include "core/status_macros.h"

namespace safeweights {

Result<std::unique_ptr<PlannedFileSink>> PlannedFileSink::create(const std::string& path, std::vector<TensorDecl> decls, std::vector<Slot> slots,
                                                                 std::span<const std::byte> header, std::uint64_t file_size, bool durable) {
  AtomicFileOptions file_options;
  file_options.preallocate = file_size;
  file_options.durable = durable;
  SW_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::create(path, file_options));
  SW_RETURN_IF_ERROR(file.append(header));
  SW_RETURN_IF_ERROR(file.truncate(file_size));
  return std::unique_ptr<PlannedFileSink>(new PlannedFileSink(std::move(file), std::move(decls), std::move(slots)));
}

PlannedFileSink::PlannedFileSink(AtomicFile file, std::vector<TensorDecl> decls, std::vector<Slot> slots)
    : file_(std::move(file)), decls_(std::move(decls)), slots_(std::move(slots)), written_(decls_.size(), 0) {
  by_name_.reserve(decls_.size());
  for (std::size_t i = 0; i < decls_.size(); ++i) by_name_.emplace(decls_[i].name, i);
}

Error PlannedFileSink::misuse(std::string message, std::string_view tensor) const {
  Error e(ErrorKind::InvalidArgument, std::move(message));
  e.with_file(file_.target());
  if (!tensor.empty()) e.with_tensor(tensor);
  return e;
}

Result<std::size_t> PlannedFileSink::lookup(std::string_view name) const {
  if (finished_) return misuse("writer already finished", {});
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return misuse("tensor was not declared when the writer was created", name);
  return it->second;
}

Result<std::size_t> PlannedFileSink::next_chunk(std::string_view name, std::uint64_t length) {
  SW_ASSIGN_OR_RETURN(std::size_t i, lookup(name));
  if (length > slots_[i].nbytes - written_[i]) {
    return misuse("more bytes than the tensor holds (" + std::to_string(slots_[i].nbytes) + ")", name);
  }
  return i;
}

Status PlannedFileSink::put(std::size_t i, std::span<const std::byte> chunk) {
  SW_RETURN_IF_ERROR(file_.pwrite(slots_[i].offset + written_[i], chunk));
  written_[i] += chunk.size();
  return Status::ok();
}

Status PlannedFileSink::write(std::string_view name, std::span<const std::byte> data) {
  SW_ASSIGN_OR_RETURN(std::size_t i, lookup(name));
  if (written_[i] != 0) return misuse("tensor already written", name);
  if (data.size() != slots_[i].nbytes) {
    return misuse("tensor needs " + std::to_string(slots_[i].nbytes) + " bytes, got " + std::to_string(data.size()), name);
  }
  return put(i, data);
}

Status PlannedFileSink::write_chunk(std::string_view name, std::span<const std::byte> chunk) {
  SW_ASSIGN_OR_RETURN(std::size_t i, next_chunk(name, chunk.size()));
  return put(i, chunk);
}

Status PlannedFileSink::copy_chunk(std::string_view name, const ByteSource& source, std::uint64_t offset, std::uint64_t length) {
  SW_ASSIGN_OR_RETURN(std::size_t i, next_chunk(name, length));
  if (Status s = file_.copy_from(slots_[i].offset + written_[i], source, offset, length); !s.is_ok()) {
    return error_of(s).with_tensor(name);
  }
  written_[i] += length;
  return Status::ok();
}

Status PlannedFileSink::complete() const {
  for (std::size_t i = 0; i < decls_.size(); ++i) {
    if (written_[i] != slots_[i].nbytes) {
      return misuse("tensor incomplete: " + std::to_string(written_[i]) + " of " + std::to_string(slots_[i].nbytes) + " bytes written",
                    decls_[i].name);
    }
  }
  return Status::ok();
}

Status PlannedFileSink::finish() {
  if (finished_) return misuse("writer already finished", {});
  finished_ = true;
  if (Status s = complete(); !s.is_ok()) {
    file_.abandon();
    return s;
  }
  return file_.commit();
}

}  // namespace safeweights
