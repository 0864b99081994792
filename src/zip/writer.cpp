// The ZIP writer: CPython zipfile's layout (what huggingface_hub's DDUF exporter produces), plus an
// optional alignment block in local headers.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "core/little_endian.h"
#include "core/status_macros.h"
#include "io/posix_util.h"
#include "safeweights/zip.h"

namespace safeweights::zip {
namespace {

constexpr std::uint64_t kZip64Limit = (1ull << 31) - 1;  // CPython switches to ZIP64 above this
constexpr std::uint16_t kVersion = 45;                    // 4.5: ZIP64
constexpr std::uint16_t kVersionMadeBy = 0x0300 | kVersion;  // Unix, 4.5
constexpr std::uint16_t kDosDate1980 = 0x0021;            // 1980-01-01, time 00:00: deterministic output
constexpr std::uint32_t kExternalAttributes = 0600u << 16;
constexpr std::uint16_t kAlignmentExtraId = 0xD935;       // Android's alignment block: u16 alignment + zeros
constexpr std::size_t kChunk = 1u << 20;                  // small enough that CRC and write share the cache

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

}  // namespace

Result<Writer> Writer::create(const std::string& path, WriterOptions options) {
  const std::uint32_t a = options.alignment;
  if (a > 1 && ((a & (a - 1)) != 0 || a > 32768)) {
    return Error(ErrorKind::InvalidArgument, "alignment must be a power of two no larger than 32768").with_file(path);
  }
  SW_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::create(path, {0, options.durable}));
  return Writer(std::move(file), std::move(options));
}

Status Writer::write_entry(std::string_view name, std::uint64_t size, const Producer& producer) {
  if (failed_) return Error(failed_->kind(), "an earlier entry failed: " + failed_->message()).with_file(path());
  if (finished_) return Error(ErrorKind::InvalidArgument, "writer already finished").with_file(path());
  if (name.empty() || name.size() > 0xFFFF) return Error(ErrorKind::InvalidArgument, "entry name must have 1 to 65535 bytes").with_file(path());
  if (!names_.insert(std::string(name)).second) {
    return Error(ErrorKind::InvalidArgument, "duplicate entry name").with_file(path()).with_entry(name);
  }
  Entry entry;
  entry.name = std::string(name);
  entry.header_offset = file_.append_position();
  entry.size = entry.compressed_size = size;
  entry.flags = is_ascii(name) ? 0 : (1u << 11);

  // Local header: ZIP64 sizes always (as CPython's force_zip64), then optional alignment padding.
  std::string extra;
  le::append(extra, 0x0001, 2);
  le::append(extra, 16, 2);
  le::append(extra, size, 8);
  le::append(extra, size, 8);
  const std::uint32_t align = options_.alignment;
  if (align > 1 && options_.align_entry(name)) {
    std::uint64_t base = entry.header_offset + 30 + name.size() + extra.size() + 6;
    std::uint64_t pad = (align - base % align) % align;
    le::append(extra, kAlignmentExtraId, 2);
    le::append(extra, 2 + pad, 2);
    le::append(extra, align, 2);
    extra.append(static_cast<std::size_t>(pad), '\0');
  }
  Status written = write_entry_bytes(entry, extra, producer);
  if (!written.is_ok()) {
    failed_ = written.error();
    file_.abandon();
    return written;
  }
  entries_.push_back(std::move(entry));
  return Status::ok();
}

Status Writer::write_entry_bytes(Entry& entry, const std::string& extra, const Producer& producer) {
  const std::string_view name = entry.name;
  const std::uint64_t size = entry.size;
  std::string header;
  le::append(header, 0x04034b50, 4);
  le::append(header, kVersion, 2);
  le::append(header, entry.flags, 2);
  le::append(header, 0, 2);  // stored
  le::append(header, 0, 2);  // time
  le::append(header, kDosDate1980, 2);
  le::append(header, 0, 4);  // CRC, patched once the data has been written
  le::append(header, 0xFFFFFFFF, 4);
  le::append(header, 0xFFFFFFFF, 4);
  le::append(header, name.size(), 2);
  le::append(header, extra.size(), 2);
  header += name;
  header += extra;
  SW_RETURN_IF_ERROR(file_.append(std::as_bytes(std::span<const char>(header.data(), header.size()))));
  entry.data_offset = file_.append_position();

  // Data and CRC in one pass.
  std::uint32_t crc = 0;
  std::vector<std::byte> buf(static_cast<std::size_t>(std::min<std::uint64_t>(size, kChunk)));
  for (std::uint64_t done = 0; done < size;) {
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), size - done));
    SW_ASSIGN_OR_RETURN(std::size_t got, producer({buf.data(), want}));
    if (got == 0 || got > want) {
      return Error(ErrorKind::DDUFExport, "entry source ended after " + std::to_string(done) + " of " + std::to_string(size) + " bytes")
          .with_file(path())
          .with_entry(name);
    }
    crc = crc32(crc, {buf.data(), got});
    SW_RETURN_IF_ERROR(file_.append({buf.data(), got}));
    done += got;
    data_bytes_ += got;
    if (options_.progress) options_.progress(data_bytes_);
  }
  entry.crc32 = crc;
  std::byte crc_bytes[4];
  le::store(crc_bytes, crc, 4);
  return file_.pwrite(entry.header_offset + 14, crc_bytes);
}

Status Writer::add_bytes(std::string_view name, std::span<const std::byte> bytes) {
  std::size_t pos = 0;
  return write_entry(name, bytes.size(), [&](std::span<std::byte> chunk) -> Result<std::size_t> {
    std::size_t n = std::min(chunk.size(), bytes.size() - pos);
    std::memcpy(chunk.data(), bytes.data() + pos, n);
    pos += n;
    return n;
  });
}

Status Writer::add_file(std::string_view name, const std::string& source_path) {
  SW_ASSIGN_OR_RETURN(SourcePtr source, open_file(source_path, FileBackend::Pread));
  source->hint({0, source->size()}, AccessHint::Sequential);
  std::uint64_t pos = 0;
  return write_entry(name, source->size(), [&](std::span<std::byte> chunk) -> Result<std::size_t> {
    SW_RETURN_IF_ERROR(source->read_at(pos, chunk));
    pos += chunk.size();
    return chunk.size();
  });
}

Status Writer::add_stream(std::string_view name, std::uint64_t size, const Producer& producer) {
  return write_entry(name, size, producer);
}

Status Writer::finish() {
  if (failed_) return Error(failed_->kind(), "an earlier entry failed: " + failed_->message()).with_file(path());
  if (finished_) return Error(ErrorKind::InvalidArgument, "writer already finished").with_file(path());
  finished_ = true;
  const std::uint64_t cd_offset = file_.append_position();
  std::string cd;
  for (const Entry& e : entries_) {
    const bool big_size = e.size > kZip64Limit;
    const bool big_offset = e.header_offset > kZip64Limit;
    std::string extra;
    if (big_size || big_offset) {
      le::append(extra, 0x0001, 2);
      le::append(extra, (big_size ? 16 : 0) + (big_offset ? 8 : 0), 2);
      if (big_size) {
        le::append(extra, e.size, 8);
        le::append(extra, e.compressed_size, 8);
      }
      if (big_offset) le::append(extra, e.header_offset, 8);
    }
    le::append(cd, 0x02014b50, 4);
    le::append(cd, kVersionMadeBy, 2);
    le::append(cd, kVersion, 2);
    le::append(cd, e.flags, 2);
    le::append(cd, 0, 2);
    le::append(cd, 0, 2);
    le::append(cd, kDosDate1980, 2);
    le::append(cd, e.crc32, 4);
    le::append(cd, big_size ? 0xFFFFFFFF : e.compressed_size, 4);
    le::append(cd, big_size ? 0xFFFFFFFF : e.size, 4);
    le::append(cd, e.name.size(), 2);
    le::append(cd, extra.size(), 2);
    le::append(cd, 0, 2);  // comment
    le::append(cd, 0, 2);  // disk
    le::append(cd, 0, 2);  // internal attributes
    le::append(cd, kExternalAttributes, 4);
    le::append(cd, big_offset ? 0xFFFFFFFF : e.header_offset, 4);
    cd += e.name;
    cd += extra;
  }
  const std::uint64_t cd_size = cd.size();
  const std::uint64_t count = entries_.size();
  std::string end;
  if (count > 0xFFFF || cd_offset > kZip64Limit || cd_size > kZip64Limit) {
    const std::uint64_t z_pos = cd_offset + cd_size;
    le::append(end, 0x06064b50, 4);
    le::append(end, 44, 8);
    le::append(end, kVersion, 2);
    le::append(end, kVersion, 2);
    le::append(end, 0, 4);
    le::append(end, 0, 4);
    le::append(end, count, 8);
    le::append(end, count, 8);
    le::append(end, cd_size, 8);
    le::append(end, cd_offset, 8);
    le::append(end, 0x07064b50, 4);
    le::append(end, 0, 4);
    le::append(end, z_pos, 8);
    le::append(end, 1, 4);
  }
  le::append(end, 0x06054b50, 4);
  le::append(end, 0, 2);
  le::append(end, 0, 2);
  le::append(end, std::min<std::uint64_t>(count, 0xFFFF), 2);
  le::append(end, std::min<std::uint64_t>(count, 0xFFFF), 2);
  le::append(end, std::min<std::uint64_t>(cd_size, 0xFFFFFFFF), 4);
  le::append(end, std::min<std::uint64_t>(cd_offset, 0xFFFFFFFF), 4);
  le::append(end, 0, 2);
  cd += end;
  SW_RETURN_IF_ERROR(file_.append(std::as_bytes(std::span<const char>(cd.data(), cd.size()))));
  return file_.commit();
}

}  // namespace safeweights::zip
