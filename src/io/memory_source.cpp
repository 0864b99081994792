// In-memory and sub-range ByteSources, and the parts of ByteSource shared by every implementation.
#include <cerrno>
#include <cstring>
#include <vector>

#include <sys/uio.h>
#include <unistd.h>

#include "core/fault_guard.h"
#include "io/posix_util.h"
#include "io/read_util.h"
#include "safeweights/source.h"

namespace safeweights {
namespace {

// Linux transfers at most ~2 GiB per call; ask for no more so the arithmetic stays simple.
constexpr std::size_t kMaxTransfer = std::size_t{1} << 30;
// Linux's UIO_MAXIOV is 1024; a longer run of requests takes several calls.
constexpr int kMaxIovecs = 1024;

}  // namespace

std::string errno_text(int err) { return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")"; }

Status pread_exact(int fd, std::uint64_t offset, std::span<std::byte> dst, const std::string& name) {
  std::size_t done = 0;
  while (done < dst.size()) {
    // Linux transfers at most ~2 GiB per call; ask for no more so the arithmetic stays simple.
    std::size_t want = std::min(dst.size() - done, kMaxTransfer);
    ssize_t got = ::pread(fd, dst.data() + done, want, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return Error(ErrorKind::IoError, "read failed: " + errno_text(errno)).with_file(name).with_offset(offset + done);
    }
    if (got == 0) {
      return Error(ErrorKind::IoError, "unexpected end of file (was it truncated while open?)").with_file(name).with_offset(offset + done);
    }
    done += static_cast<std::size_t>(got);
  }
  return Status::ok();
}

namespace {

// preadv(2) of `runs`, which follow each other in the file, until every destination is full. A short transfer resumes at the first byte not yet read.
Status preadv_adjacent(int fd, std::span<const ReadRequest> runs, const std::string& name) {
  std::uint64_t offset = runs.front().offset;
  std::size_t run = 0, skip = 0;  // the first run not yet full, and how much of it is
  for (;;) {
    while (run < runs.size() && runs[run].dst.empty()) ++run;
    if (run == runs.size()) return Status::ok();
    iovec iov[kMaxIovecs];
    int n = 0;
    std::size_t bytes = 0;
    for (std::size_t k = run; k < runs.size() && n < kMaxIovecs && bytes < kMaxTransfer; ++k) {
      const std::size_t from = k == run ? skip : 0;
      const std::size_t len = std::min(runs[k].dst.size() - from, kMaxTransfer - bytes);
      iov[n++] = {runs[k].dst.data() + from, len};
      bytes += len;
    }
    ssize_t got = ::preadv(fd, iov, n, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      return Error(ErrorKind::IoError, "read failed: " + errno_text(errno)).with_file(name).with_offset(offset);
    }
    if (got == 0) {
      return Error(ErrorKind::IoError, "unexpected end of file (was it truncated while open?)").with_file(name).with_offset(offset);
    }
    offset += static_cast<std::uint64_t>(got);
    for (std::size_t left = static_cast<std::size_t>(got); left > 0;) {
      const std::size_t take = std::min(left, runs[run].dst.size() - skip);
      skip += take;
      left -= take;
      if (skip == runs[run].dst.size()) {
        ++run;
        skip = 0;
      }
    }
  }
}

}  // namespace

Status pread_scatter(int fd, std::span<const ReadRequest> requests, const std::string& name) {
  for (std::size_t i = 0; i < requests.size();) {
    std::size_t j = i + 1;
    while (j < requests.size() && requests[j].offset == requests[j - 1].offset + requests[j - 1].dst.size()) ++j;
    if (j == i + 1) {
      SW_RETURN_IF_ERROR(pread_exact(fd, requests[i].offset, requests[i].dst, name));
    } else {
      SW_RETURN_IF_ERROR(preadv_adjacent(fd, requests.subspan(i, j - i), name));
    }
    i = j;
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
    return Error(ErrorKind::OutOfRange, "read of " + std::to_string(length) + " bytes at offset " + std::to_string(offset) +
                                            " runs past the end (size " + std::to_string(total) + ")")
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

Status ByteSource::check_requests(std::span<const ReadRequest> requests) const {
  for (const ReadRequest& r : requests) SW_RETURN_IF_ERROR(check_range(r.offset, r.dst.size()));
  return Status::ok();
}

Status ByteSource::read_scatter(std::span<const ReadRequest> requests) const {
  SW_RETURN_IF_ERROR(check_requests(requests));
  for (const ReadRequest& r : requests) SW_RETURN_IF_ERROR(read_at(r.offset, r.dst));
  return Status::ok();
}

Status ByteSource::read_ranges(std::span<const ByteRange> ranges, std::span<std::byte> dst) const {
  std::vector<ReadRequest> requests;
  requests.reserve(ranges.size());
  std::size_t pos = 0;
  for (const ByteRange& r : ranges) {
    if (r.length > dst.size() - pos) {
      return Error(ErrorKind::InvalidArgument, "read_ranges: destination smaller than the ranges").with_file(name());
    }
    requests.push_back({r.offset, dst.subspan(pos, static_cast<std::size_t>(r.length))});
    pos += static_cast<std::size_t>(r.length);
  }
  if (pos != dst.size()) {
    return Error(ErrorKind::InvalidArgument, "read_ranges: destination larger than the ranges").with_file(name());
  }
  return read_scatter(requests);
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
    // The caller's memory may itself be a file mapping (a numpy.memmap handed to the library).
    return guarded_copy(dst.data(), bytes_.data() + offset, dst.size(), name_, offset);
  }
  Status read_scatter(std::span<const ReadRequest> requests) const override {
    SW_RETURN_IF_ERROR(check_requests(requests));
    return copy_runs(bytes_.data(), requests, SIZE_MAX, name_);
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
  Status read_scatter(std::span<const ReadRequest> requests) const override {
    // Checked here, against this entry's bounds: the parent would accept bytes outside the entry.
    SW_RETURN_IF_ERROR(check_requests(requests));
    std::vector<ReadRequest> shifted(requests.begin(), requests.end());
    for (ReadRequest& r : shifted) r.offset += offset_;  // no overflow: inside the parent, checked at creation
    return parent_->read_scatter(shifted);
  }
  Status check_not_truncated() const override { return parent_->check_not_truncated(); }
  std::optional<FileRegion> file_region() const noexcept override {
    auto region = parent_->file_region();
    if (region) region->offset += offset_;  // no overflow: inside the parent, checked at creation
    return region;
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
