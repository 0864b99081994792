#include "core/status_macros.h"
#include "safeweights/safetensors.h"

namespace safeweights::safetensors {

Result<Reader> Reader::open(const std::string& path, FileBackend backend, const ReadOptions& options) {
  SW_ASSIGN_OR_RETURN(SourcePtr source, open_file(path, backend));
  return open(std::move(source), options);
}

Result<Reader> Reader::open(SourcePtr source, const ReadOptions& options) {
  SW_ASSIGN_OR_RETURN(Header header, Header::parse(*source, options));
  return Reader(std::move(source), std::make_shared<const Header>(std::move(header)));
}

TensorView Reader::view(const TensorInfo& info) const noexcept {
  TensorView v;
  v.info = &info;
  v.offset = header_->data_start() + info.begin;
  v.data = source_->view(v.offset, info.nbytes());
  return v;
}

Result<TensorView> Reader::tensor(std::string_view name) const {
  const TensorInfo* info = header_->find(name);
  if (!info) {
    return Error(ErrorKind::TensorNotFound, "tensor `" + std::string(name) + "` not found").with_file(source_->name()).with_tensor(name);
  }
  return view(*info);
}

Status Reader::read(const TensorInfo& info, std::span<std::byte> dst) const {
  if (dst.size() != info.nbytes()) {
    return Error(ErrorKind::InvalidArgument, "destination has " + std::to_string(dst.size()) + " bytes, tensor has " + std::to_string(info.nbytes()))
        .with_file(source_->name())
        .with_tensor(info.name);
  }
  return source_->read_at(header_->data_start() + info.begin, dst);
}

Result<std::vector<std::byte>> Reader::read_owned(std::string_view name) const {
  SW_ASSIGN_OR_RETURN(TensorView v, tensor(name));
  auto out = allocate_bytes(v.info->nbytes(), "tensor `" + std::string(name) + "`");
  if (!out.is_ok()) return error_of(out).with_file(source_->name());
  SW_RETURN_IF_ERROR(read(*v.info, *out));
  return out;
}

Result<SlicePlan> Reader::plan_slice(const TensorInfo& info, const SliceSpec& spec) const {
  auto plan = safeweights::plan_slice(info.shape, info.dtype, spec, header_->data_start() + info.begin);
  if (!plan.is_ok()) {
    Error e = std::move(plan).error();
    e.with_file(source_->name()).with_tensor(info.name);
    return e;
  }
  return plan;
}

Status Reader::read_slice(const SlicePlan& plan, std::span<std::byte> dst) const { return safeweights::read_slice(*source_, plan, dst); }

}  // namespace safeweights::safetensors
