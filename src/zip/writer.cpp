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
#include "zip/records.h"

namespace safeweights::zip {
namespace {

using records::CentralHeader;
using records::EndOfCentralDirectory;
using records::ExtraBlockHeader;
using records::kSaturated16;
using records::kSaturated32;
using records::LocalHeader;
using records::Zip64EndOfCentralDirectory;
using records::Zip64Extra;
using records::Zip64Locator;

constexpr std::uint64_t kZip64Limit = (1ull << 31) - 1;      // CPython switches to ZIP64 above this
constexpr std::uint16_t kVersion = 45;                       // 4.5: ZIP64
constexpr std::uint16_t kVersionMadeBy = 0x0300 | kVersion;  // Unix, 4.5
constexpr std::uint16_t kDosDate1980 = 0x0021;               // 1980-01-01, time 00:00: deterministic output
constexpr std::uint32_t kExternalAttributes = 0600u << 16;
constexpr std::uint16_t kAlignmentExtraId = 0xD935;  // Android's alignment block: u16 alignment + zeros
constexpr std::size_t kChunk = 1u << 20;             // small enough that CRC and write share the cache

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// The entry's central directory record: ZIP64 only for what exceeds CPython's limit.
void append_central_header(const Entry& e, std::string& out) {
  const bool big_size = e.size > kZip64Limit;
  const bool big_offset = e.header_offset > kZip64Limit;
  std::string extra;
  if (big_size || big_offset) {
    Zip64Extra z;
    if (big_size) z.size = e.size, z.compressed_size = e.compressed_size;
    if (big_offset) z.header_offset = e.header_offset;
    records::encode(z, extra);
  }
  CentralHeader h;
  h.version_made_by = kVersionMadeBy;
  h.version_needed = kVersion;
  h.flags = e.flags;
  h.date = kDosDate1980;
  h.crc32 = e.crc32;
  h.compressed_size = big_size ? kSaturated32 : static_cast<std::uint32_t>(e.compressed_size);
  h.size = big_size ? kSaturated32 : static_cast<std::uint32_t>(e.size);
  h.name_length = static_cast<std::uint16_t>(e.name.size());
  h.extra_length = static_cast<std::uint16_t>(extra.size());
  h.external_attributes = kExternalAttributes;
  h.header_offset = big_offset ? kSaturated32 : static_cast<std::uint32_t>(e.header_offset);
  records::encode(h, out);
  out += e.name;
  out += extra;
}

// The end records after a central directory of `cd_size` bytes at `cd_offset`: ZIP64 ones only where
// CPython writes them, then the classic one with saturated fields.
void append_end_records(std::uint64_t cd_offset, std::uint64_t cd_size, std::uint64_t count, std::string& out) {
  if (count > kSaturated16 || cd_offset > kZip64Limit || cd_size > kZip64Limit) {
    Zip64EndOfCentralDirectory z;
    z.version_made_by = kVersion;
    z.version_needed = kVersion;
    z.count_on_disk = z.count = count;
    z.cd_size = cd_size;
    z.cd_offset = cd_offset;
    records::encode(z, out);
    Zip64Locator locator;
    locator.eocd64_offset = cd_offset + cd_size;
    records::encode(locator, out);
  }
  EndOfCentralDirectory eocd;
  eocd.count_on_disk = eocd.count = static_cast<std::uint16_t>(std::min<std::uint64_t>(count, kSaturated16));
  eocd.cd_size = static_cast<std::uint32_t>(std::min<std::uint64_t>(cd_size, kSaturated32));
  eocd.cd_offset = static_cast<std::uint32_t>(std::min<std::uint64_t>(cd_offset, kSaturated32));
  records::encode(eocd, out);
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
  const auto [kept, inserted] = names_.insert(std::string(name));
  if (!inserted) return Error(ErrorKind::InvalidArgument, "duplicate entry name").with_file(path()).with_entry(name);
  Entry entry;
  entry.name = *kept;  // the set's nodes never move
  entry.header_offset = file_.append_position();
  entry.size = entry.compressed_size = size;
  entry.flags = is_ascii(name) ? 0 : (1u << 11);

  // Local header: ZIP64 sizes always (as CPython's force_zip64), then optional alignment padding.
  std::string extra;
  Zip64Extra sizes;
  sizes.size = sizes.compressed_size = size;
  records::encode(sizes, extra);
  const std::uint32_t align = options_.alignment;
  if (align > 1 && options_.align_entry(name)) {
    // The data starts after the fixed header, the name, the ZIP64 block and the alignment block's
    // header and u16 alignment; the padding makes that a multiple of `align`.
    const std::uint64_t base = entry.header_offset + LocalHeader::kSize + name.size() + extra.size() + ExtraBlockHeader::kSize + 2;
    const std::uint64_t pad = (align - base % align) % align;
    records::encode(ExtraBlockHeader{kAlignmentExtraId, static_cast<std::uint16_t>(2 + pad)}, extra);
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
  LocalHeader local;
  local.version_needed = kVersion;
  local.flags = entry.flags;
  local.date = kDosDate1980;
  local.crc32 = 0;  // patched once the data has been written
  local.compressed_size = local.size = kSaturated32;
  local.name_length = static_cast<std::uint16_t>(name.size());
  local.extra_length = static_cast<std::uint16_t>(extra.size());
  std::string header;
  records::encode(local, header);
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
      return Error(ErrorKind::ZipWrite, "entry source ended after " + std::to_string(done) + " of " + std::to_string(size) + " bytes")
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
  return file_.pwrite(entry.header_offset + LocalHeader::kCrcOffset, crc_bytes);
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

Status Writer::add_stream(std::string_view name, std::uint64_t size, const Producer& producer) { return write_entry(name, size, producer); }

Status Writer::finish() {
  if (failed_) return Error(failed_->kind(), "an earlier entry failed: " + failed_->message()).with_file(path());
  if (finished_) return Error(ErrorKind::InvalidArgument, "writer already finished").with_file(path());
  finished_ = true;
  const std::uint64_t cd_offset = file_.append_position();
  std::string cd;
  for (const Entry& e : entries_) append_central_header(e, cd);
  append_end_records(cd_offset, cd.size(), entries_.size(), cd);
  SW_RETURN_IF_ERROR(file_.append(std::as_bytes(std::span<const char>(cd.data(), cd.size()))));
  return file_.commit();
}

}  // namespace safeweights::zip
