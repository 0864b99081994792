// The format-neutral helpers every TensorFile and TensorSink share.
#include <algorithm>
#include <vector>

#include "core/status_macros.h"
#include "safeweights/cancel.h"
#include "safeweights/format.h"
#include "safeweights/tensor_file.h"

namespace safeweights {

Result<const TensorEntry*> TensorFile::tensor(std::string_view name) const {
  if (const TensorEntry* entry = find(name)) return entry;
  return Error(ErrorKind::TensorNotFound, "no tensor named `" + std::string(name) + "`").with_file(this->name()).with_tensor(name);
}

std::span<const std::byte> TensorEntry::view() const noexcept { return source->view(offset, nbytes); }

Status TensorEntry::read(std::span<std::byte> dst) const {
  if (dst.size() != nbytes) {
    return Error(ErrorKind::InvalidArgument, "destination of " + std::to_string(dst.size()) + " bytes for a tensor of " + std::to_string(nbytes))
        .with_tensor(name);
  }
  if (Status s = source->read_at(offset, dst); !s.is_ok()) return error_of(s).with_tensor(name);
  return Status::ok();
}

Result<std::vector<std::byte>> TensorEntry::read_owned() const {
  auto out = allocate_bytes(nbytes, "tensor `" + std::string(name) + "`");
  if (!out.is_ok()) return error_of(out).with_file(source->name());
  SW_RETURN_IF_ERROR(read(*out));
  return out;
}

Result<SlicePlan> TensorEntry::plan_slice(const SliceSpec& spec) const {
  auto plan = safeweights::plan_slice(shape, type, spec, offset);
  if (!plan.is_ok()) return error_of(plan).with_file(source->name()).with_tensor(name);
  return plan;
}

Status TensorEntry::read_slice(const SlicePlan& plan, std::span<std::byte> dst) const { return safeweights::read_slice(*source, plan, dst); }

Status TensorSink::copy_chunk(std::string_view name, const ByteSource& source, std::uint64_t offset, std::uint64_t length) {
  return copy_range(source, offset, length, copy_buffer_size(source), [&](std::span<const std::byte> part) -> Status {
    SW_RETURN_IF_ERROR(check_cancelled());
    return write_chunk(name, part);
  });
}

Status copy_tensor(const TensorEntry& entry, std::string_view name, TensorSink& to) {
  return to.copy_chunk(name, *entry.source, entry.offset, entry.nbytes);
}

Status copy_tensors(const TensorFile& from, TensorSink& to) {
  for (const TensorEntry& entry : from.tensors()) SW_RETURN_IF_ERROR(copy_tensor(entry, entry.name, to));
  return to.finish();
}

Result<CatTarget> cat_tensor(std::shared_ptr<const TensorFile> file, std::string_view name) {
  SW_ASSIGN_OR_RETURN(const TensorEntry* entry, file->tensor(name));
  CatTarget target;
  target.tensor = entry;
  // The entry's source is owned by the file: the source handed out shares the file's lifetime.
  target.source = SourcePtr(file, entry->source);
  target.offset = entry->offset;
  target.length = entry->nbytes;
  target.file = std::move(file);
  return target;
}

Result<CatTarget> Format::locate(const std::string& path, std::span<const std::string> names, const FormatOptions& options) const {
  if (names.size() != 1) {
    return Error(ErrorKind::InvalidArgument, "cat FILE TENSOR takes one tensor name (ENTRY TENSOR is for DDUF files)").with_file(path);
  }
  SW_ASSIGN_OR_RETURN(std::unique_ptr<TensorFile> file, open(path, {}, options));
  return cat_tensor(std::move(file), names[0]);
}

}  // namespace safeweights
