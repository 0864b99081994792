#include "io/read_util.h"

#include <cstring>
#include <algorithm>
#include <vector>

#include "core/fault_guard.h"
#include "core/status_macros.h"

namespace safeweights {
namespace {

std::string describe_size(std::uint64_t bytes) {
  if (bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

}  // namespace

Result<std::string> read_small(const ByteSource& source, std::uint64_t cap) {
  if (source.size() > cap) {
    return Error(ErrorKind::ResourceLimit,
                 "larger than " + describe_size(cap) + " (" + std::to_string(source.size()) + " bytes): refusing to read it into memory");
  }
  std::string text(static_cast<std::size_t>(source.size()), '\0');
  SW_RETURN_IF_ERROR(source.read_at(0, std::as_writable_bytes(std::span<char>(text.data(), text.size()))));
  return text;
}

Result<std::string> read_small_file(const std::string& path, std::uint64_t cap) {
  SW_ASSIGN_OR_RETURN(SourcePtr source, open_file(path, FileBackend::Pread));
  auto text = read_small(*source, cap);
  if (!text.is_ok()) return error_of(text).with_file(path);
  return text;
}

std::uint64_t copy_buffer_size(const ByteSource& source) noexcept { return source.file_region() ? std::uint64_t{256} << 10 : std::uint64_t{8} << 20; }

Status copy_range(const ByteSource& source, std::uint64_t offset, std::uint64_t length, std::uint64_t chunk, const ByteSink& sink) {
  SW_RETURN_IF_ERROR(source.check_range(offset, length));
  if (auto view = source.view(offset, length); view.data() != nullptr || length == 0) {
    Status written = sink(view);
    if (!written.is_ok()) SW_RETURN_IF_ERROR(source.check_not_truncated());  // blame a shrunk input first
    return written;
  }
  std::vector<std::byte> buf(static_cast<std::size_t>(std::min(std::max<std::uint64_t>(chunk, 1), length)));
  for (std::uint64_t done = 0; done < length;) {
    const std::uint64_t n = std::min<std::uint64_t>(buf.size(), length - done);
    std::span<std::byte> part(buf.data(), static_cast<std::size_t>(n));
    SW_RETURN_IF_ERROR(source.read_at(offset + done, part));
    SW_RETURN_IF_ERROR(sink(part));
    done += n;
  }
  return Status::ok();
}

Status copy_runs(const std::byte* base, std::span<const ReadRequest> requests, std::size_t below, const std::string& name) {
  std::size_t at = 0;  // the request being copied, for the error
  const bool copied = guarded([&] {
    for (; at < requests.size(); ++at) {
      const ReadRequest& r = requests[at];
      if (!r.dst.empty() && r.dst.size() < below) std::memcpy(r.dst.data(), base + r.offset, r.dst.size());
    }
  });
  return copied ? Status::ok() : Status(mapping_shrank(name, requests[at].offset));
}

}  // namespace safeweights
