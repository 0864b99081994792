// In-memory and sub-range ByteSources, and the parts of ByteSource shared by every implementation.
#include <cerrno>
#include <cstring>
#include <unistd.h>

#include "io/posix_util.h"
#include "safeweights/source.h"

namespace safeweights {

std::string errno_text(int err) { return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")"; }

Status pread_exact(int fd, std::uint64_t offset, std::span<std::byte> dst, const std::string& name) {
  std::size_t done = 0;
  while (done < dst.size()) {
    // Linux transfers at most ~2 GiB per call; ask for no more so the arithmetic stays simple.
    std::size_t want = std::min<std::size_t>(dst.size() - done, std::size_t{1} << 30);
    ssize_t got = ::pread(fd, dst.data() + done, want, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return Error(ErrorKind::IoError, "read failed: " + errno_text(errno)).with_file(name).with_offset(offset + done);
    }
    if (got == 0) {
      return Error(ErrorKind::IoError, "unexpected end of file (was it truncated while open?)")
          .with_file(name)
          .with_offset(offset + done);
    }
    done += static_cast<std::size_t>(got);
  }
  return Status::ok();
}

Status pwrite_exact(int fd, std::uint64_t offset, std::span<const std::byte> src, const std::string& name) {
  std::size_t done = 0;
  while (done < src.size()) {
    std::size_t want = std::min<std::size_t>(src.size() - done, std::size_t{1} << 30);
    ssize_t put = ::pwrite(fd, src.data() + done, want, static_cast<off_t>(offset + done));
    if (put < 0) {
      if (errno == EINTR) continue;
      return Error(ErrorKind::IoError, "write failed: " + errno_text(errno)).with_file(name).with_offset(offset + done);
    }
    if (put == 0) {
      return Error(ErrorKind::IoError, "write made no progress").with_file(name).with_offset(offset + done);
    }
    done += static_cast<std::size_t>(put);
  }
  return Status::ok();
}

Status ByteSource::check_range(std::uint64_t offset, std::uint64_t length) const {
  const std::uint64_t total = size();
  if (offset > total || length > total - offset) {
    return Error(ErrorKind::OutOfRange, "read of " + std::to_string(length) + " bytes at offset " +
                                            std::to_string(offset) + " runs past the end (size " +
                                            std::to_string(total) + ")")
        .with_file(name())
        .with_offset(offset);
  }
  return Status::ok();
}

std::span<const std::byte> ByteSource::view(std::uint64_t offset, std::uint64_t length) const noexcept {
  const std::byte* base = mapped();
  const std::uint64_t total = size();
  if (base == nullptr || offset > total || length > total - offset) return {};
  return {base + offset, static_cast<std::size_t>(length)};
}

Status ByteSource::read_ranges(std::span<const ByteRange> ranges, std::span<std::byte> dst) const {
  std::size_t pos = 0;
  for (const ByteRange& r : ranges) {
    if (r.length > dst.size() - pos) {
      return Error(ErrorKind::InvalidArgument, "read_ranges: destination smaller than the ranges").with_file(name());
    }
    SW_RETURN_IF_ERROR(read_at(r.offset, dst.subspan(pos, static_cast<std::size_t>(r.length))));
    pos += static_cast<std::size_t>(r.length);
  }
  if (pos != dst.size()) {
    return Error(ErrorKind::InvalidArgument, "read_ranges: destination larger than the ranges").with_file(name());
  }
  return Status::ok();
}

namespace {

class MemorySource final : public ByteSource {
 public:
  MemorySource(std::span<const std::byte> bytes, std::string name, std::shared_ptr<const void> keepalive)
      : bytes_(bytes), name_(std::move(name)), keepalive_(std::move(keepalive)) {}
  const std::string& name() const noexcept override { return name_; }
  std::uint64_t size() const noexcept override { return bytes_.size(); }
  const std::byte* mapped() const noexcept override { return bytes_.data() ? bytes_.data() : kNoBytes; }
  Status read_at(std::uint64_t offset, std::span<std::byte> dst) const override {
    SW_RETURN_IF_ERROR(check_range(offset, dst.size()));
    if (!dst.empty()) std::memcpy(dst.data(), bytes_.data() + offset, dst.size());
    return Status::ok();
  }

 private:
  static constexpr std::byte kNoBytes[1] = {};
  std::span<const std::byte> bytes_;
  std::string name_;
  std::shared_ptr<const void> keepalive_;
};

class SubrangeSource final : public ByteSource {
 public:
  SubrangeSource(SourcePtr parent, std::uint64_t offset, std::uint64_t length, std::string name)
      : parent_(std::move(parent)), offset_(offset), length_(length), name_(std::move(name)) {}
  const std::string& name() const noexcept override { return name_; }
  std::uint64_t size() const noexcept override { return length_; }
  const std::byte* mapped() const noexcept override {
    const std::byte* base = parent_->mapped();
    return base ? base + offset_ : nullptr;
  }
  Status read_at(std::uint64_t offset, std::span<std::byte> dst) const override {
    SW_RETURN_IF_ERROR(check_range(offset, dst.size()));
    return parent_->read_at(offset_ + offset, dst);
  }
  Status read_ranges(std::span<const ByteRange> ranges, std::span<std::byte> dst) const override {
    std::vector<ByteRange> shifted;
    shifted.reserve(ranges.size());
    for (const ByteRange& r : ranges) {
      SW_RETURN_IF_ERROR(check_range(r.offset, r.length));
      shifted.push_back({offset_ + r.offset, r.length});
    }
    return parent_->read_ranges(shifted, dst);
  }
  void hint(ByteRange range, AccessHint hint) const noexcept override {
    if (range.offset >= length_) return;
    range.length = std::min(range.length, length_ - range.offset);
    parent_->hint({offset_ + range.offset, range.length}, hint);
  }

 private:
  SourcePtr parent_;
  std::uint64_t offset_;
  std::uint64_t length_;
  std::string name_;
};

}  // namespace

SourcePtr memory_source(std::span<const std::byte> bytes, std::string name, std::shared_ptr<const void> keepalive) {
  return std::make_shared<MemorySource>(bytes, std::move(name), std::move(keepalive));
}

SourcePtr owned_memory_source(std::vector<std::byte> bytes, std::string name) {
  auto holder = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  std::span<const std::byte> view(holder->data(), holder->size());
  return std::make_shared<MemorySource>(view, std::move(name), std::move(holder));
}

Result<SourcePtr> subrange_source(SourcePtr parent, std::uint64_t offset, std::uint64_t length, std::string name) {
  SW_RETURN_IF_ERROR(parent->check_range(offset, length));
  return SourcePtr(std::make_shared<SubrangeSource>(std::move(parent), offset, length, std::move(name)));
}

}  // namespace safeweights
