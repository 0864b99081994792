// The strict ZIP / ZIP64 reader. Archive::open runs named steps in file order: find the end records,
// read the ZIP64 ones, check what they say, read the central directory, check names, read every local
// header, then check that entries (and, under the Container policy, their data descriptors) tile the
// file. Every record is bounds-checked against the source before it is decoded (zip/records.h); every
// sum of offsets and sizes is overflow-checked.
#include <libdeflate.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/parallel.h"
#include "core/status_macros.h"
#include "core/fault_guard.h"
#include "core/utf8.h"
#include "safeweights/cancel.h"
#include "safeweights/zip.h"
#include "zip/records.h"

namespace safeweights::zip {
namespace {

using records::CentralHeader;
using records::DataDescriptor;
using records::Decoded;
using records::EndOfCentralDirectory;
using records::ExtraBlockHeader;
using records::kSaturated16;
using records::kSaturated32;
using records::LocalHeader;
using records::Zip64EndOfCentralDirectory;
using records::Zip64Extra;
using records::Zip64Locator;

constexpr std::uint16_t kUnicodePathExtraId = 0x7075;
constexpr int kMaxVersionNeeded = 63;  // 6.3: what CPython's zipfile accepts
// Unmapped sources read local headers and descriptors in windows of this many entries: few requests,
// bounded scratch memory whatever the entry count.
constexpr std::size_t kReadWindow = 128;

// Flag bits (APPNOTE 4.4.4).
constexpr std::uint16_t kFlagEncrypted = 1u << 0;
constexpr std::uint16_t kFlagCompressionHints = 0x0006;  // bits 1-2
constexpr std::uint16_t kFlagDataDescriptor = 1u << 3;
constexpr std::uint16_t kFlagStrongEncryption = 1u << 6;
constexpr std::uint16_t kFlagUtf8 = 1u << 11;
constexpr std::uint16_t kFlagMaskedDirectory = 1u << 13;

Error bad(ErrorRule rule, std::string message) { return Error(ErrorKind::BadZipFile, std::move(message)).with_rule(rule); }
Error unsupported(ErrorRule rule, std::string message) { return Error(ErrorKind::ZipUnsupported, std::move(message)).with_rule(rule); }

std::string hex16(std::uint16_t v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%04X", static_cast<unsigned>(v));
  return buf;
}

// Bytes of [offset, offset + length) from the source: a view when mapped, else copied into `buffer`.
Result<std::span<const std::byte>> fetch(const ByteSource& src, std::uint64_t offset, std::uint64_t length, std::vector<std::byte>& buffer) {
  SW_RETURN_IF_ERROR(src.check_range(offset, length));
  auto view = src.view(offset, length);
  if (view.data() != nullptr || length == 0) return view;
  buffer.resize(static_cast<std::size_t>(length));
  SW_RETURN_IF_ERROR(src.read_at(offset, buffer));
  return std::span<const std::byte>(buffer);
}

struct ExtraInfo {
  std::span<const std::byte> zip64;  // payload of the 0x0001 block, if any
  bool has_zip64 = false;
};

// Walks an extra field: every block must be complete, with at most one ZIP64 block and no Info-ZIP
// Unicode Path block (whose name could differ from the header's).
Status parse_extra(std::span<const std::byte> extra, ExtraInfo& info) {
  std::size_t pos = 0;
  while (pos < extra.size()) {
    ExtraBlockHeader block;
    if (records::decode(extra.subspan(pos), block) != Decoded::Ok) {
      return bad(ErrorRule::ZipExtraField, "malformed extra field: " + std::to_string(extra.size() - pos) + " stray bytes");
    }
    if (block.size > extra.size() - pos - ExtraBlockHeader::kSize) {
      return bad(ErrorRule::ZipExtraField, "malformed extra field: block " + hex16(block.id) + " runs past its end");
    }
    if (block.id == Zip64Extra::kId) {
      if (info.has_zip64) return bad(ErrorRule::ZipExtraField, "two ZIP64 extra blocks");
      info.has_zip64 = true;
      info.zip64 = extra.subspan(pos + ExtraBlockHeader::kSize, block.size);
    } else if (block.id == kUnicodePathExtraId) {
      return unsupported(ErrorRule::ZipExtraField, "Info-ZIP Unicode Path extra field (a second, possibly different name)");
    }
    pos += ExtraBlockHeader::kSize + block.size;
  }
  return Status::ok();
}

Status check_name(std::string_view name, std::uint16_t flags) {
  if (name.empty()) return bad(ErrorRule::ZipEntryName, "empty entry name");
  bool ascii = true;
  for (char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F) return bad(ErrorRule::ZipEntryName, "entry name contains a control character (NUL truncation and similar tricks)");
    if (c >= 0x80) ascii = false;
  }
  if (!ascii) {
    if (!(flags & kFlagUtf8)) return bad(ErrorRule::ZipEntryName, "entry name is not ASCII and the UTF-8 flag (bit 11) is not set");
    if (!is_valid_utf8(name)) return bad(ErrorRule::ZipEntryName, "entry name is flagged UTF-8 but is not valid UTF-8");
  }
  return Status::ok();
}

Status check_flags(std::uint16_t flags, ArchivePolicy policy) {
  if (flags & (kFlagEncrypted | kFlagStrongEncryption)) return unsupported(ErrorRule::ZipEncryption, "encrypted entry");
  if (flags & kFlagMaskedDirectory) return unsupported(ErrorRule::ZipEncryption, "masked (encrypted) central directory");
  const bool descriptors_allowed = policy == ArchivePolicy::Container;
  if ((flags & kFlagDataDescriptor) && !descriptors_allowed) {
    return unsupported(ErrorRule::ZipFlags, "entry uses a data descriptor (archive written as a stream)");
  }
  // Bits 1-2 are compression-level hints; Info-ZIP sets them on entries it ends up storing.
  const std::uint16_t allowed = kFlagUtf8 | kFlagCompressionHints | (descriptors_allowed ? kFlagDataDescriptor : 0);
  if (flags & ~allowed) return unsupported(ErrorRule::ZipFlags, "unsupported general-purpose flags " + std::to_string(flags));
  return Status::ok();
}

// ---- End records ------------------------------------------------------------------------------------

// What the end records say, after the ZIP64 ones (when present) replaced saturated classic fields.
struct EndRecords {
  std::uint64_t eocd_pos = 0;  // the classic end record
  std::uint64_t cd_end = 0;    // where the end records start: the central directory must end here
  std::uint64_t disk = 0, cd_disk = 0, count_on_disk = 0, count = 0, cd_size = 0, cd_offset = 0;
  bool zip64 = false;
};

// The comment may not contain anything that looks like an end record to another reader.
// No record signature of any kind in the comment. CPython's zipfile and Info-ZIP ignore a local header
// or descriptor signature there, but a reader that scans for records (recovery tools, streaming from an
// offset) would take it for one: one archive, one reading.
Status check_archive_comment(std::span<const std::byte> comment, std::uint64_t comment_pos) {
  constexpr std::uint32_t kSignatures[] = {EndOfCentralDirectory::kSignature, Zip64EndOfCentralDirectory::kSignature,
                                           Zip64Locator::kSignature,          CentralHeader::kSignature,
                                           LocalHeader::kSignature,           DataDescriptor::kSignature};
  for (std::size_t i = 0; i + 4 <= comment.size(); ++i) {
    for (std::uint32_t sig : kSignatures) {
      if (records::starts_with_signature(comment.subspan(i), sig)) {
        return bad(ErrorRule::ZipEndRecord, "archive comment contains a ZIP record signature").with_offset(comment_pos + i);
      }
    }
  }
  return Status::ok();
}

// The one classic end record whose comment ends exactly at the end of the file.
Result<EndRecords> locate_end_record(const ByteSource& src) {
  const std::uint64_t size = src.size();
  constexpr std::uint64_t kEocdSize = EndOfCentralDirectory::kSize;
  if (size < kEocdSize) return bad(ErrorRule::ZipEndRecord, "file too small to be a ZIP archive (" + std::to_string(size) + " bytes)");
  std::vector<std::byte> tail_buf;
  const std::uint64_t window = std::min<std::uint64_t>(size, kEocdSize + EndOfCentralDirectory::kMaxComment);
  SW_ASSIGN_OR_RETURN(auto tail, fetch(src, size - window, window, tail_buf));
  std::uint64_t found = UINT64_MAX, last_signature = UINT64_MAX;
  int candidates = 0;
  EndOfCentralDirectory eocd;
  for (std::uint64_t p = window - kEocdSize + 1; p-- > 0;) {
    const auto at = tail.subspan(static_cast<std::size_t>(p));
    if (!records::starts_with_signature(at, EndOfCentralDirectory::kSignature)) continue;
    EndOfCentralDirectory candidate;
    if (records::decode(at, candidate) != Decoded::Ok) continue;
    if (last_signature == UINT64_MAX) last_signature = p;
    if (p + kEocdSize + candidate.comment_length == window) {
      ++candidates;
      if (found == UINT64_MAX) found = p, eocd = candidate;
    }
  }
  if (candidates == 0) {
    if (last_signature != UINT64_MAX) {
      // The last record read whole: say whether its comment length overshoots the file or bytes follow.
      EndOfCentralDirectory last;
      (void)records::decode(tail.subspan(static_cast<std::size_t>(last_signature)), last);
      const std::uint64_t comment_room = window - last_signature - kEocdSize;
      if (last.comment_length > comment_room) {
        return bad(ErrorRule::ZipEndRecord, "the end-of-central-directory record's comment length (" + std::to_string(last.comment_length) +
                                                ") runs " + std::to_string(last.comment_length - comment_room) + " bytes past the end of the file")
            .with_offset(size - window + last_signature);
      }
      return bad(ErrorRule::ZipLayout, std::to_string(comment_room - last.comment_length) +
                                           " bytes after the end-of-central-directory record and its comment (trailing data)")
          .with_offset(size - window + last_signature);
    }
    return bad(ErrorRule::ZipEndRecord, "no end-of-central-directory record: not a ZIP archive");
  }
  if (candidates > 1) return bad(ErrorRule::ZipEndRecord, "several end-of-central-directory records could end the file (a comment hides one)");
  EndRecords end;
  end.eocd_pos = end.cd_end = size - window + found;
  SW_RETURN_IF_ERROR(check_archive_comment(tail.subspan(static_cast<std::size_t>(found + kEocdSize)), end.eocd_pos + kEocdSize));
  end.disk = eocd.disk;
  end.cd_disk = eocd.cd_disk;
  end.count_on_disk = eocd.count_on_disk;
  end.count = eocd.count;
  end.cd_size = eocd.cd_size;
  end.cd_offset = eocd.cd_offset;
  return end;
}

// The ZIP64 end record that `locator` (at locator_pos) points to, ending exactly at the locator.
Result<Zip64EndOfCentralDirectory> read_zip64_end_record(const ByteSource& src, const Zip64Locator& locator, std::uint64_t locator_pos) {
  if (locator.eocd64_disk != 0 || locator.total_disks != 1)
    return unsupported(ErrorRule::ZipMultiDisk, "multi-disk archive (ZIP64 locator)").with_offset(locator_pos);
  const std::uint64_t z_pos = locator.eocd64_offset;
  if (z_pos > locator_pos || locator_pos - z_pos < Zip64EndOfCentralDirectory::kSize) {
    return bad(ErrorRule::ZipEndRecord, "ZIP64 locator points outside the file").with_offset(locator_pos);
  }
  std::byte bytes[Zip64EndOfCentralDirectory::kSize];
  SW_RETURN_IF_ERROR(src.read_at(z_pos, bytes));
  Zip64EndOfCentralDirectory z;
  if (records::decode(bytes, z) != Decoded::Ok) {
    return bad(ErrorRule::ZipEndRecord, "no ZIP64 end-of-central-directory record where the locator points").with_offset(z_pos);
  }
  constexpr std::uint64_t kBase = Zip64EndOfCentralDirectory::kRecordSizeBase;
  if (z.record_size < Zip64EndOfCentralDirectory::kSize - kBase || z.record_size != locator_pos - z_pos - kBase) {
    return bad(ErrorRule::ZipEndRecord, "ZIP64 end record size does not reach the locator exactly").with_offset(z_pos);
  }
  if ((z.version_needed & 0xFF) > kMaxVersionNeeded)
    return unsupported(ErrorRule::ZipVersion, "ZIP64 end record needs a newer ZIP version").with_offset(z_pos);
  if (z.disk != 0 || z.cd_disk != 0) return unsupported(ErrorRule::ZipMultiDisk, "multi-disk archive").with_offset(z_pos);
  return z;
}

// ZIP64 end records, immediately before the classic one, replace its fields; classic fields must hold
// the same value or be saturated.
Status read_zip64_end_records(const ByteSource& src, EndRecords& end) {
  if (end.eocd_pos < Zip64Locator::kSize) return Status::ok();
  const std::uint64_t locator_pos = end.eocd_pos - Zip64Locator::kSize;
  std::byte bytes[Zip64Locator::kSize];
  SW_RETURN_IF_ERROR(src.read_at(locator_pos, bytes));
  Zip64Locator locator;
  if (records::decode(bytes, locator) != Decoded::Ok) return Status::ok();  // no ZIP64 records
  SW_ASSIGN_OR_RETURN(Zip64EndOfCentralDirectory z, read_zip64_end_record(src, locator, locator_pos));
  auto agrees = [](std::uint64_t classic, std::uint64_t full, std::uint64_t saturated) { return classic == full || classic == saturated; };
  if (!agrees(end.disk, 0, kSaturated16) || !agrees(end.cd_disk, 0, kSaturated16) || !agrees(end.count_on_disk, z.count_on_disk, kSaturated16) ||
      !agrees(end.count, z.count, kSaturated16) || !agrees(end.cd_size, z.cd_size, kSaturated32) ||
      !agrees(end.cd_offset, z.cd_offset, kSaturated32)) {
    return bad(ErrorRule::ZipEndRecord, "end-of-central-directory record disagrees with the ZIP64 end record").with_offset(end.eocd_pos);
  }
  end.disk = end.cd_disk = 0;
  end.count_on_disk = z.count_on_disk;
  end.count = z.count;
  end.cd_size = z.cd_size;
  end.cd_offset = z.cd_offset;
  end.cd_end = locator.eocd64_offset;
  end.zip64 = true;
  return Status::ok();
}

// One disk; the central directory ends exactly where the end records start (no gap, nothing
// prepended); counts and sizes within the limits and possible.
Status check_end_records(const EndRecords& end, const ArchiveLimits& limits) {
  // A count of exactly 65535 is real (CPython adds ZIP64 records only above it); saturated 32-bit
  // fields are not.
  if (!end.zip64 && (end.cd_size == kSaturated32 || end.cd_offset == kSaturated32)) {
    return bad(ErrorRule::ZipEndRecord, "saturated end-of-central-directory fields but no ZIP64 end records").with_offset(end.eocd_pos);
  }
  if (end.disk != 0 || end.cd_disk != 0) return unsupported(ErrorRule::ZipMultiDisk, "multi-disk archive").with_offset(end.eocd_pos);
  if (end.count_on_disk != end.count) return bad(ErrorRule::ZipEndRecord, "entry counts in the end record disagree").with_offset(end.eocd_pos);
  std::uint64_t cd_stop = 0;
  if (__builtin_add_overflow(end.cd_offset, end.cd_size, &cd_stop) || cd_stop > end.cd_end) {
    return bad(ErrorRule::ZipCentralDirectory, "central directory runs past the end records").with_offset(end.cd_offset);
  }
  if (cd_stop != end.cd_end) {
    return bad(ErrorRule::ZipLayout, std::to_string(end.cd_end - cd_stop) +
                                         " unaccounted bytes between the central directory and the end records "
                                         "(prepended data or a hidden gap)")
        .with_offset(cd_stop);
  }
  if (end.count > limits.max_entries)
    return Error(ErrorKind::ResourceLimit, "more than " + std::to_string(limits.max_entries) + " entries").with_rule(ErrorRule::ZipLimit);
  if (end.cd_size > limits.max_central_directory)
    return Error(ErrorKind::ResourceLimit, "central directory too large").with_rule(ErrorRule::ZipLimit);
  if (end.count > end.cd_size / CentralHeader::kSize)
    return bad(ErrorRule::ZipCentralDirectory, "entry count does not fit in the central directory").with_offset(end.eocd_pos);
  return Status::ok();
}

// ---- Central directory ------------------------------------------------------------------------------

// Replaces the saturated fields of a central header by its ZIP64 block, which must hold exactly those.
Status resolve_central_zip64(const CentralHeader& h, const ExtraInfo& extra, Entry& e, std::uint64_t& disk_start) {
  const bool big_size = h.size == kSaturated32, big_csize = h.compressed_size == kSaturated32;
  const bool big_offset = h.header_offset == kSaturated32, big_disk = h.disk_start == kSaturated16;
  if (!extra.has_zip64) {
    if (big_size || big_csize || big_offset) return bad(ErrorRule::ZipExtraField, "saturated size or offset without a ZIP64 extra block");
    return Status::ok();
  }
  Zip64Extra z;
  if (extra.zip64.size() != Zip64Extra::payload_size(big_size, big_csize, big_offset, big_disk) ||
      records::decode(extra.zip64, big_size, big_csize, big_offset, big_disk, z) != Decoded::Ok) {
    return bad(ErrorRule::ZipExtraField, "ZIP64 extra block does not match the saturated fields");
  }
  e.size = z.size.value_or(e.size);
  e.compressed_size = z.compressed_size.value_or(e.compressed_size);
  e.header_offset = z.header_offset.value_or(e.header_offset);
  disk_start = z.disk_start.value_or(disk_start);
  return Status::ok();
}

// The central record at `pos` of the directory `cd` (at file offset `at`); `record_size` gets its length.
Result<Entry> read_central_record(std::span<const std::byte> cd, std::uint64_t pos, std::uint64_t at, ArchivePolicy policy,
                                  std::uint64_t& record_size) {
  CentralHeader h;
  switch (records::decode(cd.subspan(static_cast<std::size_t>(pos)), h)) {
    case Decoded::Truncated: return bad(ErrorRule::ZipCentralDirectory, "central directory truncated").with_offset(at);
    case Decoded::BadSignature: return bad(ErrorRule::ZipCentralDirectory, "bad central directory record signature").with_offset(at);
    case Decoded::Ok: break;
  }
  const std::uint64_t name_len = h.name_length, extra_len = h.extra_length, comment_len = h.comment_length;
  if (cd.size() - pos - CentralHeader::kSize < name_len + extra_len + comment_len) {
    return bad(ErrorRule::ZipCentralDirectory, "central directory record runs past the directory").with_offset(at);
  }
  record_size = CentralHeader::kSize + name_len + extra_len + comment_len;
  const std::byte* variable = cd.data() + pos + CentralHeader::kSize;
  Entry e;
  e.name = std::string_view(reinterpret_cast<const char*>(variable), static_cast<std::size_t>(name_len));
  auto entry_fail = [&](Error err) -> Result<Entry> { return std::move(err.with_entry(e.name).with_offset(at)); };
  const int needed = h.version_needed & 0xFF;
  if (needed > kMaxVersionNeeded) {
    return entry_fail(
        unsupported(ErrorRule::ZipVersion, "entry needs ZIP version " + std::to_string(needed / 10) + "." + std::to_string(needed % 10)));
  }
  if (auto s = check_flags(h.flags, policy); !s.is_ok()) return entry_fail(std::move(s).error());
  // Strict leaves compression to the layer above (DDUF names it in its own words); Container readers
  // get zero-copy sub-ranges, which a compressed entry cannot be.
  if (policy == ArchivePolicy::Container && h.method != 0) {
    return entry_fail(
        unsupported(ErrorRule::ZipCompression, "compressed entry (method " + std::to_string(h.method) + "): only stored entries are read"));
  }
  if (auto s = check_name(e.name, h.flags); !s.is_ok()) return entry_fail(std::move(s).error());
  ExtraInfo extra;
  if (auto s = parse_extra({variable + name_len, static_cast<std::size_t>(extra_len)}, extra); !s.is_ok()) {
    return entry_fail(std::move(s).error());
  }
  e.size = h.size;
  e.compressed_size = h.compressed_size;
  e.header_offset = h.header_offset;
  std::uint64_t disk_start = h.disk_start;
  if (auto s = resolve_central_zip64(h, extra, e, disk_start); !s.is_ok()) return entry_fail(std::move(s).error());
  if (disk_start != 0) return entry_fail(unsupported(ErrorRule::ZipMultiDisk, "entry on another disk"));
  if (h.method == 0 && e.compressed_size != e.size)
    return entry_fail(bad(ErrorRule::ZipCentralDirectory, "stored entry whose compressed and uncompressed sizes differ"));
  e.crc32 = h.crc32;
  e.method = h.method;
  e.flags = h.flags;
  return e;
}

// Every record, which together must fill the directory exactly. The directory is copied once into
// `copy` (names are views into it; a mapping could change under them), and the entries are reserved
// once from the count, which check_end_records bounded by the directory's size.
Result<std::vector<Entry>> read_central_directory(const ByteSource& src, const EndRecords& end, ArchivePolicy policy,
                                                  std::unique_ptr<std::byte[]>& copy) {
  SW_RETURN_IF_ERROR(src.check_range(end.cd_offset, end.cd_size));
  SW_ASSIGN_OR_RETURN(copy, allocate_uninitialized(end.cd_size, "central directory"));
  const std::span<std::byte> cd(copy.get(), static_cast<std::size_t>(end.cd_size));
  SW_RETURN_IF_ERROR(src.read_at(end.cd_offset, cd));
  std::vector<Entry> entries;
  entries.reserve(static_cast<std::size_t>(end.count));
  std::uint64_t pos = 0;
  for (std::uint64_t i = 0; i < end.count; ++i) {
    std::uint64_t record_size = 0;
    SW_ASSIGN_OR_RETURN(Entry e, read_central_record(cd, pos, end.cd_offset + pos, policy, record_size));
    entries.push_back(std::move(e));
    pos += record_size;
  }
  if (pos != end.cd_size) {
    return bad(ErrorRule::ZipCentralDirectory, "central directory holds " + std::to_string(end.cd_size - pos) + " bytes beyond its " +
                                                   std::to_string(end.count) + " records (the entry count and the directory size disagree)")
        .with_offset(end.cd_offset + pos);
  }
  return entries;
}

// Fills `sorted` with the entries' indices in name order; fails on a repeated name.
Status sort_unique_names(const std::vector<Entry>& entries, std::vector<std::size_t>& sorted) {
  sorted.resize(entries.size());
  for (std::size_t i = 0; i < sorted.size(); ++i) sorted[i] = i;
  std::sort(sorted.begin(), sorted.end(), [&](std::size_t a, std::size_t b) { return entries[a].name < entries[b].name; });
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    const Entry& e = entries[sorted[i]];
    if (e.name == entries[sorted[i - 1]].name) return bad(ErrorRule::ZipDuplicateName, "duplicate entry name").with_entry(e.name);
  }
  return Status::ok();
}

// ---- Local headers ----------------------------------------------------------------------------------

// True when the entry's fixed local header lies before the central directory.
bool local_header_inside(const Entry& e, std::uint64_t cd_offset) {
  std::uint64_t fixed_end = 0;
  return !__builtin_add_overflow(e.header_offset, LocalHeader::kSize, &fixed_end) && fixed_end <= cd_offset;
}

Error local_header_outside(const Entry& e) {
  return bad(ErrorRule::ZipLocalHeader, "local header lies outside the entry area").with_entry(e.name).with_offset(e.header_offset);
}

// The local header's sizes (through its ZIP64 block when saturated), into usize / csize.
Status resolve_local_sizes(const LocalHeader& h, const ExtraInfo& extra, std::uint64_t& usize, std::uint64_t& csize) {
  usize = h.size;
  csize = h.compressed_size;
  if (usize != kSaturated32 && csize != kSaturated32) return Status::ok();
  // A local ZIP64 block carries both sizes (APPNOTE 4.5.3).
  Zip64Extra z;
  if (!extra.has_zip64 || extra.zip64.size() != Zip64Extra::payload_size(true, true, false, false) ||
      records::decode(extra.zip64, true, true, false, false, z) != Decoded::Ok) {
    return bad(ErrorRule::ZipExtraField, "local header ZIP64 block must hold both sizes");
  }
  usize = *z.size;
  csize = *z.compressed_size;
  return Status::ok();
}

// Checks entry `e`'s local header `h` against its central record. `variable_part(n)` yields the n bytes
// after the fixed header (name and extra field), called once the header proves they lie before the
// central directory. Sets e.data_offset, and for an entry with a data descriptor, e.descriptor_size to
// the descriptor's size without signature (check_layout settles it).
template <class VariablePart>
Status check_local_header(Entry& e, std::span<const std::byte> fixed, std::uint64_t cd_offset, VariablePart&& variable_part) {
  LocalHeader h;
  if (records::decode(fixed, h) != Decoded::Ok) return bad(ErrorRule::ZipLocalHeader, "bad local header signature");
  // With a data descriptor the writer may leave CRC and sizes zero here (APPNOTE 4.4.4).
  const bool deferred = (e.flags & kFlagDataDescriptor) != 0;
  if ((h.version_needed & 0xFF) > kMaxVersionNeeded) return unsupported(ErrorRule::ZipVersion, "local header needs a newer ZIP version");
  if (h.flags != e.flags) return bad(ErrorRule::ZipLocalHeader, "local header flags differ from the central directory");
  if (h.method != e.method) return bad(ErrorRule::ZipLocalHeader, "local header method differs from the central directory");
  if (h.crc32 != e.crc32 && !(deferred && h.crc32 == 0)) return bad(ErrorRule::ZipLocalHeader, "local header CRC differs from the central directory");
  const std::uint64_t name_len = h.name_length, extra_len = h.extra_length;
  const std::uint64_t fixed_end = e.header_offset + LocalHeader::kSize;
  if (cd_offset - fixed_end < name_len + extra_len) return bad(ErrorRule::ZipLocalHeader, "local header runs into the central directory");
  SW_ASSIGN_OR_RETURN(std::span<const std::byte> var, variable_part(name_len + extra_len));
  if (name_len != e.name.size() || std::memcmp(var.data(), e.name.data(), e.name.size()) != 0) {
    return bad(ErrorRule::ZipLocalHeader, "local header name differs from the central directory");
  }
  ExtraInfo extra;
  SW_RETURN_IF_ERROR(parse_extra(var.subspan(static_cast<std::size_t>(name_len)), extra));
  std::uint64_t usize = 0, csize = 0;
  SW_RETURN_IF_ERROR(resolve_local_sizes(h, extra, usize, csize));
  const bool sizes_deferred = deferred && usize == 0 && csize == 0;
  if (!sizes_deferred && (usize != e.size || csize != e.compressed_size))
    return bad(ErrorRule::ZipLocalHeader, "local header sizes differ from the central directory");
  e.data_offset = fixed_end + name_len + extra_len;
  if (cd_offset - e.data_offset < e.compressed_size) return bad(ErrorRule::ZipLayout, "entry data runs into the central directory");
  // The descriptor's sizes are 8 bytes when the local header has a ZIP64 block (APPNOTE 4.3.9.2).
  if (deferred) e.descriptor_size = DataDescriptor::encoded_size(extra.has_zip64, false);
  return Status::ok();
}

Status with_entry_context(Status s, const Entry& e) {
  if (s.is_ok()) return s;
  return error_of(s).with_entry(e.name).with_offset(e.header_offset);
}

// A mapped archive is checked in place.
Status read_local_headers_mapped(const ByteSource& src, std::uint64_t cd_offset, std::vector<Entry>& entries) {
  for (Entry& e : entries) {
    if (!local_header_inside(e, cd_offset)) return local_header_outside(e);
    auto variable = [&](std::uint64_t n) -> Result<std::span<const std::byte>> { return src.view(e.header_offset + LocalHeader::kSize, n); };
    SW_RETURN_IF_ERROR(with_entry_context(check_local_header(e, src.view(e.header_offset, LocalHeader::kSize), cd_offset, variable), e));
  }
  return Status::ok();
}

// Bytes read first for an entry's local header: the fixed part, the name the central directory gives
// and room for a ZIP64 extra block, as far as the central directory.
std::uint64_t first_read_length(const Entry& e, std::uint64_t cd_offset) {
  constexpr std::uint64_t kExtraGuess = 64;
  return std::min<std::uint64_t>(LocalHeader::kSize + e.name.size() + kExtraGuess, cd_offset - e.header_offset);
}

// Any other source gets the headers of a window of entries with one read_ranges() call (over HTTP, a
// few parallel requests instead of two round trips per entry), then the same checks in entry order. An
// entry whose local extra field is longer than guessed (alignment padding) gets a second read.
Status read_local_headers_window(const ByteSource& src, std::uint64_t cd_offset, std::span<Entry> window) {
  std::vector<ByteRange> ranges;
  std::vector<std::uint64_t> first_at(window.size(), UINT64_MAX), second_at(window.size(), UINT64_MAX);
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < window.size(); ++i) {
    if (!local_header_inside(window[i], cd_offset)) continue;
    const std::uint64_t len = first_read_length(window[i], cd_offset);
    ranges.push_back({window[i].header_offset, len});
    first_at[i] = total;
    total += len;
  }
  std::vector<std::byte> first_buf(static_cast<std::size_t>(total));
  SW_RETURN_IF_ERROR(src.read_ranges(ranges, first_buf));
  // Second reads: the variable parts that did not fit, for headers that are otherwise readable.
  ranges.clear();
  total = 0;
  for (std::size_t i = 0; i < window.size(); ++i) {
    if (first_at[i] == UINT64_MAX) continue;
    const Entry& e = window[i];
    LocalHeader h;
    // A header without its signature fails in check_local_header before its variable part is needed.
    if (records::decode({first_buf.data() + first_at[i], LocalHeader::kSize}, h) != Decoded::Ok) continue;
    const std::uint64_t var_len = std::uint64_t{h.name_length} + h.extra_length;
    if (LocalHeader::kSize + var_len <= first_read_length(e, cd_offset) || cd_offset - e.header_offset - LocalHeader::kSize < var_len) continue;
    ranges.push_back({e.header_offset + LocalHeader::kSize, var_len});
    second_at[i] = total;
    total += var_len;
  }
  std::vector<std::byte> second_buf(static_cast<std::size_t>(total));
  SW_RETURN_IF_ERROR(src.read_ranges(ranges, second_buf));
  for (std::size_t i = 0; i < window.size(); ++i) {
    Entry& e = window[i];
    if (first_at[i] == UINT64_MAX) return local_header_outside(e);
    const std::span<const std::byte> got(first_buf.data() + first_at[i], static_cast<std::size_t>(first_read_length(e, cd_offset)));
    auto variable = [&](std::uint64_t n) -> Result<std::span<const std::byte>> {
      if (LocalHeader::kSize + n <= got.size()) return got.subspan(LocalHeader::kSize, static_cast<std::size_t>(n));
      return std::span<const std::byte>(second_buf.data() + second_at[i], static_cast<std::size_t>(n));
    };
    SW_RETURN_IF_ERROR(with_entry_context(check_local_header(e, got.first(LocalHeader::kSize), cd_offset, variable), e));
  }
  return Status::ok();
}

// Local headers agree with the central directory.
Status read_local_headers(const ByteSource& src, std::uint64_t cd_offset, std::vector<Entry>& entries) {
  if (src.mapped() != nullptr) return read_local_headers_mapped(src, cd_offset, entries);
  for (std::size_t w = 0; w < entries.size(); w += kReadWindow) {
    const std::size_t n = std::min(kReadWindow, entries.size() - w);
    SW_RETURN_IF_ERROR(read_local_headers_window(src, cd_offset, std::span<Entry>(entries).subspan(w, n)));
  }
  return Status::ok();
}

// ---- Layout and data descriptors --------------------------------------------------------------------

// A data descriptor placed by check_layout, to be read and compared with the central directory.
struct PendingDescriptor {
  Entry* entry;
  std::uint64_t offset;
  bool zip64;
  bool signature;
};

// The descriptor of `e`, whose data ends at `data_end`, with the next record at `next`: the bytes
// between are exactly one descriptor, with or without its signature.
Result<PendingDescriptor> place_descriptor(Entry& e, std::uint64_t data_end, std::uint64_t next) {
  const std::uint64_t bare = e.descriptor_size;  // as check_local_header set it: no signature
  const bool zip64 = bare == DataDescriptor::encoded_size(true, false);
  const std::uint64_t gap = next - data_end;
  auto fail = [&](std::string message) -> Result<PendingDescriptor> {
    return bad(ErrorRule::ZipDataDescriptor, std::move(message)).with_entry(e.name).with_offset(data_end);
  };
  if (gap < bare) {
    return fail("data descriptor missing: " + std::to_string(gap) + " bytes after the entry's data, " + std::to_string(bare) + " needed");
  }
  const std::uint64_t with_signature = DataDescriptor::encoded_size(zip64, true);
  if (gap > with_signature) return fail(std::to_string(gap - with_signature) + " unaccounted bytes after the data descriptor");
  if (gap != bare && gap != with_signature) {
    return fail(std::to_string(gap) + " bytes after the entry's data: neither a data descriptor (" + std::to_string(bare) +
                ") nor one with its signature (" + std::to_string(with_signature) + ")");
  }
  e.descriptor_size = gap;
  return PendingDescriptor{&e, data_end, zip64, gap == with_signature};
}

// Entries tile the area before the central directory: no prepended bytes, gaps or overlaps. An
// entry's data descriptor, if any, is part of the entry; its placement is returned for checking.
Result<std::vector<PendingDescriptor>> check_layout(std::vector<Entry>& entries, std::uint64_t cd_offset) {
  std::vector<Entry*> by_offset;
  by_offset.reserve(entries.size());
  for (Entry& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) { return a->header_offset < b->header_offset; });
  std::vector<PendingDescriptor> descriptors;
  std::uint64_t expected = 0;
  for (std::size_t i = 0; i < by_offset.size(); ++i) {
    Entry& e = *by_offset[i];
    if (e.header_offset < expected)
      return bad(ErrorRule::ZipLayout, "entry overlaps the previous one").with_entry(e.name).with_offset(e.header_offset);
    if (e.header_offset > expected) {
      return bad(ErrorRule::ZipLayout,
                 std::to_string(e.header_offset - expected) + " unaccounted bytes before this entry (prepended data or a hidden gap)")
          .with_entry(e.name)
          .with_offset(expected);
    }
    expected = e.data_offset + e.compressed_size;  // no overflow: check_local_header kept it before cd_offset
    if (e.descriptor_size == 0) continue;
    const std::uint64_t next = i + 1 < by_offset.size() ? by_offset[i + 1]->header_offset : cd_offset;
    if (next < expected) continue;  // the next entry overlaps this one's data: reported above
    SW_ASSIGN_OR_RETURN(PendingDescriptor d, place_descriptor(e, expected, next));
    descriptors.push_back(d);
    expected += e.descriptor_size;
  }
  if (expected != cd_offset) {
    return bad(ErrorRule::ZipLayout, std::to_string(cd_offset - expected) + " unaccounted bytes before the central directory").with_offset(expected);
  }
  return descriptors;
}

// The descriptor's bytes agree with the central directory: CRC and both sizes.
Status check_descriptor(const PendingDescriptor& d, std::span<const std::byte> bytes) {
  const Entry& e = *d.entry;
  auto fail = [&](std::string message) -> Status {
    return bad(ErrorRule::ZipDataDescriptor, std::move(message)).with_entry(e.name).with_offset(d.offset);
  };
  DataDescriptor desc;
  if (records::decode(bytes, d.zip64, d.signature, desc) != Decoded::Ok) {
    return fail("4 unaccounted bytes before the data descriptor (no descriptor signature)");
  }
  if (desc.crc32 != e.crc32) return fail("data descriptor CRC differs from the central directory");
  if (desc.size != e.size || desc.compressed_size != e.compressed_size) return fail("data descriptor sizes differ from the central directory");
  return Status::ok();
}

// Reads every placed descriptor (in place when mapped, else a window at a time) and checks it.
Status verify_descriptors(const ByteSource& src, std::span<const PendingDescriptor> descriptors) {
  std::vector<ByteRange> ranges;
  std::vector<std::byte> buf;
  for (std::size_t w = 0; w < descriptors.size(); w += kReadWindow) {
    const auto window = descriptors.subspan(w, std::min(kReadWindow, descriptors.size() - w));
    const bool mapped = src.mapped() != nullptr;
    ranges.clear();
    std::uint64_t total = 0;
    for (const PendingDescriptor& d : window) {
      ranges.push_back({d.offset, d.entry->descriptor_size});
      total += d.entry->descriptor_size;
    }
    if (!mapped) {
      buf.resize(static_cast<std::size_t>(total));
      SW_RETURN_IF_ERROR(src.read_ranges(ranges, buf));
    }
    std::uint64_t at = 0;
    for (std::size_t i = 0; i < window.size(); ++i) {
      const auto length = static_cast<std::size_t>(ranges[i].length);
      auto bytes = mapped ? src.view(ranges[i].offset, length) : std::span<const std::byte>(buf.data() + at, length);
      SW_RETURN_IF_ERROR(check_descriptor(window[i], bytes));
      at += length;
    }
  }
  return Status::ok();
}

}  // namespace

std::uint32_t crc32(std::uint32_t crc, std::span<const std::byte> bytes) noexcept { return libdeflate_crc32(crc, bytes.data(), bytes.size()); }

Result<Archive> Archive::open(SourcePtr source, const ArchiveLimits& limits) { return open(std::move(source), ArchivePolicy::Strict, limits); }

Result<Archive> Archive::open(SourcePtr source, ArchivePolicy policy, const ArchiveLimits& limits) {
  Archive archive;
  Status opened = archive.read_structure(*source, policy, limits);
  if (!opened.is_ok()) return error_of(opened).with_file(source->name());
  archive.source_ = std::move(source);
  return archive;
}

Status Archive::read_structure(const ByteSource& src, ArchivePolicy policy, const ArchiveLimits& limits) {
  SW_ASSIGN_OR_RETURN(EndRecords end, locate_end_record(src));
  SW_RETURN_IF_ERROR(read_zip64_end_records(src, end));
  SW_RETURN_IF_ERROR(check_end_records(end, limits));
  zip64_ = end.zip64;
  SW_ASSIGN_OR_RETURN(entries_, read_central_directory(src, end, policy, directory_));
  SW_RETURN_IF_ERROR(sort_unique_names(entries_, sorted_));
  SW_RETURN_IF_ERROR(read_local_headers(src, end.cd_offset, entries_));
  SW_ASSIGN_OR_RETURN(std::vector<PendingDescriptor> descriptors, check_layout(entries_, end.cd_offset));
  return verify_descriptors(src, descriptors);
}

const Entry* Archive::find(std::string_view name) const noexcept {
  auto it = std::lower_bound(sorted_.begin(), sorted_.end(), name, [&](std::size_t i, std::string_view n) { return entries_[i].name < n; });
  if (it == sorted_.end() || entries_[*it].name != name) return nullptr;
  return &entries_[*it];
}

Result<SourcePtr> Archive::open_entry(const Entry& entry) const {
  return subrange_source(source_, entry.data_offset, entry.compressed_size, source_->name() + "!" + std::string(entry.name));
}

Status Archive::verify_crc(const Entry& entry) const {
  std::uint32_t crc = 0;
  auto view = source_->view(entry.data_offset, entry.compressed_size);
  if (view.data() != nullptr) {
    // In one guarded section: a file truncated under the mapping is an error, not SIGBUS.
    constexpr std::size_t kStep = 64u << 20;
    if (!guarded([&] {
          for (std::size_t off = 0; off < view.size(); off += kStep) crc = crc32(crc, view.subspan(off, std::min(kStep, view.size() - off)));
        })) {
      return mapping_shrank(source_->name(), entry.data_offset).with_entry(entry.name);
    }
  } else {
    std::vector<std::byte> buf(static_cast<std::size_t>(std::min<std::uint64_t>(entry.compressed_size, 8u << 20)));
    for (std::uint64_t done = 0; done < entry.compressed_size;) {
      std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), entry.compressed_size - done));
      SW_RETURN_IF_ERROR(source_->read_at(entry.data_offset + done, {buf.data(), n}));
      crc = crc32(crc, {buf.data(), n});
      done += n;
    }
  }
  if (crc != entry.crc32) return crc_mismatch(entry, crc);
  return Status::ok();
}

Error Archive::crc_mismatch(const Entry& entry, std::uint32_t crc) const {
  char msg[96];
  std::snprintf(msg, sizeof msg, "CRC-32 is %08x, the archive records %08x", crc, entry.crc32);
  return Error(ErrorKind::CrcMismatch, msg).with_file(source_->name()).with_entry(entry.name).with_offset(entry.data_offset);
}

Status Archive::copy_entry_checked(const Entry& entry, std::uint64_t chunk, const ByteSink& sink) const {
  SW_ASSIGN_OR_RETURN(SourcePtr src, open_entry(entry));
  std::uint32_t crc = 0;
  // A mapped source hands over the whole entry at once: CRC and write it in pieces that fit a cache.
  constexpr std::size_t kPiece = 1u << 20;
  std::uint64_t done = 0;
  auto checked_sink = [&](std::span<const std::byte> part) -> Status {
    for (std::size_t off = 0; off < part.size(); off += kPiece) {
      SW_RETURN_IF_ERROR(check_cancelled());
      auto piece = part.subspan(off, std::min(kPiece, part.size() - off));
      // The piece may lie in the archive's mapping: a file truncated under it is an error, not SIGBUS.
      if (!guarded([&] { crc = crc32(crc, piece); })) {
        return mapping_shrank(source_->name(), entry.data_offset + done).with_entry(entry.name);
      }
      SW_RETURN_IF_ERROR(sink(piece));
      done += piece.size();
    }
    return Status::ok();
  };
  if (Status s = copy_range(*src, 0, src->size(), chunk, checked_sink); !s.is_ok()) {
    return Error(s.error()).with_entry(entry.name);
  }
  if (crc != entry.crc32) return crc_mismatch(entry, crc);
  return Status::ok();
}

Status Archive::verify_all_crcs(unsigned threads) const {
  // Largest entries first, so one big entry does not start last.
  std::vector<std::size_t> order(entries_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return entries_[a].size > entries_[b].size; });
  std::vector<Status> results(entries_.size());
  (void)parallel_for(order.size(), threads, [&](std::size_t k) {
    results[order[k]] = verify_crc(entries_[order[k]]);
    return Status::ok();  // every entry is checked; the first failure in entry order is reported
  });
  for (auto& s : results) {
    if (!s.is_ok()) return std::move(s);
  }
  return Status::ok();
}

}  // namespace safeweights::zip
