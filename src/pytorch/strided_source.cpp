// Gathering a strided view: the row-major element range asked for is cut into runs of elements that
// are contiguous in the storage (the innermost dimensions whose strides make them one block), copied
// from the mapping or read with batched scatter reads, then swapped when the storage is big-endian.
#include "pytorch/strided_source.h"

#include <algorithm>
#include <cstring>

#include "core/status_macros.h"

namespace safeweights::pytorch {
namespace {

class StridedSource final : public ByteSource {
 public:
  StridedSource(SourcePtr storage, StridedLayout layout, std::uint64_t nbytes, std::string name)
      : storage_(std::move(storage)), l_(std::move(layout)), nbytes_(nbytes), name_(std::move(name)) {
    // The innermost dimensions that form one contiguous block in the storage.
    run_ = 1;
    inner_ = l_.shape.size();
    while (inner_ > 0 && (l_.shape[inner_ - 1] == 1 || l_.stride[inner_ - 1] == run_)) {
      run_ *= l_.shape[inner_ - 1];
      --inner_;
    }
  }

  const std::string& name() const noexcept override { return name_; }
  std::uint64_t size() const noexcept override { return nbytes_; }
  // Advice about the view is advice about the storage from the view's first element on.
  void hint(ByteRange, AccessHint hint) const noexcept override {
    if (l_.base < storage_->size()) storage_->hint({l_.base, storage_->size() - l_.base}, hint);
  }

  Status read_at(std::uint64_t offset, std::span<std::byte> dst) const override {
    SW_RETURN_IF_ERROR(check_range(offset, dst.size()));
    if (dst.empty()) return Status::ok();
    const std::uint64_t first = offset / l_.elsize;
    const std::uint64_t last = (offset + dst.size() + l_.elsize - 1) / l_.elsize;  // exclusive
    const bool aligned = offset % l_.elsize == 0 && dst.size() % l_.elsize == 0;
    // Whole elements go straight to dst; a range that cuts elements goes through a small buffer.
    std::vector<std::byte> scratch;
    std::span<std::byte> out = dst;
    if (!aligned) {
      scratch.resize(static_cast<std::size_t>((last - first) * l_.elsize));
      out = scratch;
    }
    SW_RETURN_IF_ERROR(gather(first, last, out));
    if (l_.swap_unit > 1) swap(out);
    if (!aligned) std::memcpy(dst.data(), scratch.data() + (offset - first * l_.elsize), dst.size());
    return Status::ok();
  }

 private:
  // Storage element index of row-major element `e`.
  std::uint64_t storage_index(std::uint64_t e) const {
    std::uint64_t index = e % run_;
    std::uint64_t rest = e / run_;
    for (std::size_t d = inner_; d-- > 0;) {
      index += (rest % l_.shape[d]) * l_.stride[d];
      rest /= l_.shape[d];
    }
    return index;
  }

  Status gather(std::uint64_t first, std::uint64_t last, std::span<std::byte> out) const {
    const std::byte* mapped = storage_->mapped();
    constexpr std::size_t kBatch = 4096;  // scatter requests per read: bounded scratch
    std::vector<ReadRequest> batch;
    std::uint64_t at = 0;  // bytes of `out` filled
    for (std::uint64_t e = first; e < last;) {
      const std::uint64_t count = std::min(run_ - e % run_, last - e);
      const std::uint64_t from = l_.base + storage_index(e) * l_.elsize;
      const std::uint64_t len = count * l_.elsize;
      if (mapped) {
        std::memcpy(out.data() + at, mapped + from, static_cast<std::size_t>(len));
      } else {
        batch.push_back({from, out.subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(len))});
        if (batch.size() == kBatch) {
          SW_RETURN_IF_ERROR(storage_->read_scatter(batch));
          batch.clear();
        }
      }
      at += len;
      e += count;
    }
    if (!batch.empty()) SW_RETURN_IF_ERROR(storage_->read_scatter(batch));
    return Status::ok();
  }

  void swap(std::span<std::byte> out) const {
    for (std::size_t i = 0; i + l_.swap_unit <= out.size(); i += l_.swap_unit) std::reverse(out.begin() + i, out.begin() + i + l_.swap_unit);
  }

  SourcePtr storage_;
  StridedLayout l_;
  std::uint64_t nbytes_;
  std::string name_;
  std::uint64_t run_ = 1;  // elements per contiguous run
  std::size_t inner_ = 0;  // dimensions outside the run
};

}  // namespace

SourcePtr strided_source(SourcePtr storage, StridedLayout layout, std::uint64_t nbytes, std::string name) {
  return std::make_shared<StridedSource>(std::move(storage), std::move(layout), nbytes, std::move(name));
}

}  // namespace safeweights::pytorch
