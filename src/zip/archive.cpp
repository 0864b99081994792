// The strict ZIP / ZIP64 reader. Every record is bounds-checked against the source before it is read;
// every sum of offsets and sizes is overflow-checked.
#include <libdeflate.h>

#include <algorithm>
#include <cstring>

#include "core/little_endian.h"
#include "core/parallel.h"
#include "core/status_macros.h"
#include "json/json_parse.h"
#include "safeweights/zip.h"

namespace safeweights::zip {
namespace {

constexpr std::uint32_t kLocalSig = 0x04034b50;
constexpr std::uint32_t kCentralSig = 0x02014b50;
constexpr std::uint32_t kEocdSig = 0x06054b50;
constexpr std::uint32_t kZip64EocdSig = 0x06064b50;
constexpr std::uint32_t kZip64LocatorSig = 0x07064b50;
constexpr std::uint64_t kEocdSize = 22;
constexpr std::uint64_t kZip64EocdSize = 56;
constexpr std::uint64_t kLocatorSize = 20;
constexpr std::uint64_t kCentralSize = 46;
constexpr std::uint64_t kLocalSize = 30;
constexpr std::uint64_t kMaxComment = 65535;
constexpr std::uint16_t kZip64ExtraId = 0x0001;
constexpr std::uint16_t kUnicodePathExtraId = 0x7075;
constexpr int kMaxVersionNeeded = 63;  // 6.3: what CPython's zipfile accepts

// Flag bits (APPNOTE 4.4.4).
constexpr std::uint16_t kFlagEncrypted = 1u << 0;
constexpr std::uint16_t kFlagDataDescriptor = 1u << 3;
constexpr std::uint16_t kFlagStrongEncryption = 1u << 6;
constexpr std::uint16_t kFlagUtf8 = 1u << 11;
constexpr std::uint16_t kFlagMaskedDirectory = 1u << 13;

Error bad(std::string message) { return Error(ErrorKind::BadZipFile, std::move(message)); }
Error unsupported(std::string message) { return Error(ErrorKind::ZipUnsupported, std::move(message)); }

// Bytes of [offset, offset + length) from the source: a view when mapped, else copied into `buffer`.
Result<std::span<const std::byte>> fetch(const ByteSource& src, std::uint64_t offset, std::uint64_t length,
                                         std::vector<std::byte>& buffer) {
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
    if (extra.size() - pos < 4) return bad("malformed extra field: " + std::to_string(extra.size() - pos) + " stray bytes");
    const std::uint16_t id = le::u16(extra.data() + pos);
    const std::uint16_t size = le::u16(extra.data() + pos + 2);
    if (size > extra.size() - pos - 4) return bad("malformed extra field: block 0x" + std::to_string(id) + " runs past its end");
    if (id == kZip64ExtraId) {
      if (info.has_zip64) return bad("two ZIP64 extra blocks");
      info.has_zip64 = true;
      info.zip64 = extra.subspan(pos + 4, size);
    } else if (id == kUnicodePathExtraId) {
      return unsupported("Info-ZIP Unicode Path extra field (a second, possibly different name)");
    }
    pos += 4u + size;
  }
  return Status::ok();
}

Status check_name(std::string_view name, std::uint16_t flags) {
  if (name.empty()) return bad("empty entry name");
  bool ascii = true;
  for (char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F) return bad("entry name contains a control character (NUL truncation and similar tricks)");
    if (c >= 0x80) ascii = false;
  }
  if (!ascii) {
    if (!(flags & kFlagUtf8)) return bad("entry name is not ASCII and the UTF-8 flag (bit 11) is not set");
    if (!json::is_valid_utf8(name)) return bad("entry name is flagged UTF-8 but is not valid UTF-8");
  }
  return Status::ok();
}

Status check_flags(std::uint16_t flags, std::uint16_t method) {
  if (flags & (kFlagEncrypted | kFlagStrongEncryption)) return unsupported("encrypted entry");
  if (flags & kFlagMaskedDirectory) return unsupported("masked (encrypted) central directory");
  if (flags & kFlagDataDescriptor) return unsupported("entry uses a data descriptor (archive written as a stream)");
  // Bits 1-2 are compression-level hints; Info-ZIP sets them on entries it ends up storing.
  (void)method;
  const std::uint16_t allowed = kFlagUtf8 | 0x0006;
  if (flags & ~allowed) return unsupported("unsupported general-purpose flags " + std::to_string(flags));
  return Status::ok();
}

}  // namespace

std::uint32_t crc32(std::uint32_t crc, std::span<const std::byte> bytes) noexcept {
  return libdeflate_crc32(crc, bytes.data(), bytes.size());
}

Result<Archive> Archive::open(SourcePtr source, const ArchiveLimits& limits) {
  const ByteSource& src = *source;
  const std::uint64_t size = src.size();
  auto fail = [&](Error e) -> Result<Archive> { return std::move(e.with_file(src.name())); };
  if (size < kEocdSize) return fail(bad("file too small to be a ZIP archive (" + std::to_string(size) + " bytes)"));

  // 1. End of central directory: the one record whose comment ends exactly at the end of the file.
  std::vector<std::byte> tail_buf;
  const std::uint64_t window = std::min(size, kEocdSize + kMaxComment);
  SW_ASSIGN_OR_RETURN(auto tail, fetch(src, size - window, window, tail_buf));
  std::uint64_t eocd_in_tail = UINT64_MAX;
  int candidates = 0;
  std::uint64_t last_signature = UINT64_MAX;
  for (std::uint64_t p = window - kEocdSize + 1; p-- > 0;) {
    if (le::u32(tail.data() + p) != kEocdSig) continue;
    if (last_signature == UINT64_MAX) last_signature = p;
    if (p + kEocdSize + le::u16(tail.data() + p + 20) == window) {
      ++candidates;
      if (eocd_in_tail == UINT64_MAX) eocd_in_tail = p;
    }
  }
  if (candidates == 0) {
    if (last_signature != UINT64_MAX) {
      return fail(bad("bytes after the end-of-central-directory record (trailing data)").with_offset(size - window + last_signature));
    }
    return fail(bad("no end-of-central-directory record: not a ZIP archive"));
  }
  if (candidates > 1) return fail(bad("several end-of-central-directory records could end the file (a comment hides one)"));
  const std::uint64_t eocd_pos = size - window + eocd_in_tail;
  const std::byte* eocd = tail.data() + eocd_in_tail;
  {
    // The comment may not contain anything that looks like an end record to another reader.
    std::span<const std::byte> comment = tail.subspan(static_cast<std::size_t>(eocd_in_tail + kEocdSize));
    for (std::size_t i = 0; i + 4 <= comment.size(); ++i) {
      std::uint32_t sig = le::u32(comment.data() + i);
      if (sig == kEocdSig || sig == kZip64EocdSig || sig == kZip64LocatorSig || sig == kCentralSig) {
        return fail(bad("archive comment contains a ZIP record signature").with_offset(eocd_pos + kEocdSize + i));
      }
    }
  }
  std::uint64_t disk = le::u16(eocd + 4), cd_disk = le::u16(eocd + 6);
  std::uint64_t count_disk = le::u16(eocd + 8), count = le::u16(eocd + 10);
  std::uint64_t cd_size = le::u32(eocd + 12), cd_offset = le::u32(eocd + 16);

  // 2. ZIP64 end records, immediately before the classic one.
  Archive archive;
  std::uint64_t cd_end = eocd_pos;
  if (eocd_pos >= kLocatorSize) {
    std::byte loc[kLocatorSize];
    SW_RETURN_IF_ERROR(src.read_at(eocd_pos - kLocatorSize, loc));
    if (le::u32(loc) == kZip64LocatorSig) {
      const std::uint64_t locator_pos = eocd_pos - kLocatorSize;
      if (le::u32(loc + 4) != 0 || le::u32(loc + 16) != 1) return fail(unsupported("multi-disk archive (ZIP64 locator)").with_offset(locator_pos));
      const std::uint64_t z_pos = le::u64(loc + 8);
      if (z_pos > locator_pos || locator_pos - z_pos < kZip64EocdSize) {
        return fail(bad("ZIP64 locator points outside the file").with_offset(locator_pos));
      }
      std::byte z[kZip64EocdSize];
      SW_RETURN_IF_ERROR(src.read_at(z_pos, z));
      if (le::u32(z) != kZip64EocdSig) return fail(bad("no ZIP64 end-of-central-directory record where the locator points").with_offset(z_pos));
      const std::uint64_t rest = le::u64(z + 4);
      if (rest < kZip64EocdSize - 12 || rest != locator_pos - z_pos - 12) {
        return fail(bad("ZIP64 end record size does not reach the locator exactly").with_offset(z_pos));
      }
      if ((le::u16(z + 14) & 0xFF) > kMaxVersionNeeded) return fail(unsupported("ZIP64 end record needs a newer ZIP version").with_offset(z_pos));
      if (le::u32(z + 16) != 0 || le::u32(z + 20) != 0) return fail(unsupported("multi-disk archive").with_offset(z_pos));
      const std::uint64_t z_count_disk = le::u64(z + 24), z_count = le::u64(z + 32);
      const std::uint64_t z_cd_size = le::u64(z + 40), z_cd_offset = le::u64(z + 48);
      // Classic fields either hold the same value or are saturated.
      auto agrees = [](std::uint64_t classic, std::uint64_t full, std::uint64_t saturated) {
        return classic == full || classic == saturated;
      };
      if (!agrees(disk, 0, 0xFFFF) || !agrees(cd_disk, 0, 0xFFFF) || !agrees(count_disk, z_count_disk, 0xFFFF) ||
          !agrees(count, z_count, 0xFFFF) || !agrees(cd_size, z_cd_size, 0xFFFFFFFF) ||
          !agrees(cd_offset, z_cd_offset, 0xFFFFFFFF)) {
        return fail(bad("end-of-central-directory record disagrees with the ZIP64 end record").with_offset(eocd_pos));
      }
      disk = cd_disk = 0;
      count_disk = z_count_disk;
      count = z_count;
      cd_size = z_cd_size;
      cd_offset = z_cd_offset;
      cd_end = z_pos;
      archive.zip64_ = true;
    }
  }
  // A count of exactly 65535 is real (CPython adds ZIP64 records only above it); saturated 32-bit
  // fields are not.
  if (!archive.zip64_ && (cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF)) {
    return fail(bad("saturated end-of-central-directory fields but no ZIP64 end records").with_offset(eocd_pos));
  }
  if (disk != 0 || cd_disk != 0) return fail(unsupported("multi-disk archive").with_offset(eocd_pos));
  if (count_disk != count) return fail(bad("entry counts in the end record disagree").with_offset(eocd_pos));

  // 3. The central directory ends exactly where the end records start: no gap, nothing prepended.
  std::uint64_t cd_stop = 0;
  if (__builtin_add_overflow(cd_offset, cd_size, &cd_stop) || cd_stop > cd_end) {
    return fail(bad("central directory runs past the end records").with_offset(cd_offset));
  }
  if (cd_stop != cd_end) {
    return fail(bad(std::to_string(cd_end - cd_stop) + " unaccounted bytes between the central directory and the end records "
                    "(prepended data or a hidden gap)")
                    .with_offset(cd_stop));
  }
  if (count > limits.max_entries) return fail(Error(ErrorKind::ResourceLimit, "more than " + std::to_string(limits.max_entries) + " entries"));
  if (cd_size > limits.max_central_directory) return fail(Error(ErrorKind::ResourceLimit, "central directory too large"));
  if (count > cd_size / kCentralSize) return fail(bad("entry count does not fit in the central directory").with_offset(eocd_pos));

  std::vector<std::byte> cd_buf;
  SW_ASSIGN_OR_RETURN(auto cd, fetch(src, cd_offset, cd_size, cd_buf));

  // 4. Central-directory records.
  archive.entries_.reserve(static_cast<std::size_t>(count));
  std::uint64_t pos = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t at = cd_offset + pos;
    if (cd_size - pos < kCentralSize) return fail(bad("central directory truncated").with_offset(at));
    const std::byte* r = cd.data() + pos;
    if (le::u32(r) != kCentralSig) return fail(bad("bad central directory record signature").with_offset(at));
    const std::uint16_t needed = le::u16(r + 6), flags = le::u16(r + 8), method = le::u16(r + 10);
    const std::uint32_t crc = le::u32(r + 16);
    std::uint64_t csize = le::u32(r + 20), usize = le::u32(r + 24);
    const std::uint64_t name_len = le::u16(r + 28), extra_len = le::u16(r + 30), comment_len = le::u16(r + 32);
    std::uint64_t disk_start = le::u16(r + 34), header_offset = le::u32(r + 42);
    if (cd_size - pos - kCentralSize < name_len + extra_len + comment_len) return fail(bad("central directory record runs past the directory").with_offset(at));
    Entry e;
    e.name.assign(reinterpret_cast<const char*>(r + kCentralSize), static_cast<std::size_t>(name_len));
    auto entry_fail = [&](Error err) { return fail(std::move(err.with_entry(e.name).with_offset(at))); };
    if ((needed & 0xFF) > kMaxVersionNeeded) return entry_fail(unsupported("entry needs ZIP version " + std::to_string((needed & 0xFF) / 10) + "." + std::to_string((needed & 0xFF) % 10)));
    if (auto s = check_flags(flags, method); !s.is_ok()) return entry_fail(std::move(s).error());
    if (auto s = check_name(e.name, flags); !s.is_ok()) return entry_fail(std::move(s).error());

    ExtraInfo extra;
    if (auto s = parse_extra(cd.subspan(static_cast<std::size_t>(pos + kCentralSize + name_len), static_cast<std::size_t>(extra_len)), extra); !s.is_ok()) {
      return entry_fail(std::move(s).error());
    }
    if (extra.has_zip64) {
      // Exactly the saturated fields, in order: size, compressed size, header offset, disk.
      std::size_t need = (usize == 0xFFFFFFFF) * 8 + (csize == 0xFFFFFFFF) * 8 + (header_offset == 0xFFFFFFFF) * 8 + (disk_start == 0xFFFF) * 4;
      if (extra.zip64.size() != need) return entry_fail(bad("ZIP64 extra block does not match the saturated fields"));
      std::size_t z = 0;
      if (usize == 0xFFFFFFFF) usize = le::u64(extra.zip64.data() + z), z += 8;
      if (csize == 0xFFFFFFFF) csize = le::u64(extra.zip64.data() + z), z += 8;
      if (header_offset == 0xFFFFFFFF) header_offset = le::u64(extra.zip64.data() + z), z += 8;
      if (disk_start == 0xFFFF) disk_start = le::u32(extra.zip64.data() + z);
    } else if (usize == 0xFFFFFFFF || csize == 0xFFFFFFFF || header_offset == 0xFFFFFFFF) {
      return entry_fail(bad("saturated size or offset without a ZIP64 extra block"));
    }
    if (disk_start != 0) return entry_fail(unsupported("entry on another disk"));
    if (method == 0 && csize != usize) return entry_fail(bad("stored entry whose compressed and uncompressed sizes differ"));
    e.header_offset = header_offset;
    e.size = usize;
    e.compressed_size = csize;
    e.crc32 = crc;
    e.method = method;
    e.flags = flags;
    archive.entries_.push_back(std::move(e));
    pos += kCentralSize + name_len + extra_len + comment_len;
  }
  if (pos != cd_size) {
    return fail(bad("central directory holds " + std::to_string(cd_size - pos) + " bytes beyond its " + std::to_string(count) +
                    " records (the entry count and the directory size disagree)")
                    .with_offset(cd_offset + pos));
  }

  // 5. Unique names.
  archive.sorted_.resize(archive.entries_.size());
  for (std::size_t i = 0; i < archive.sorted_.size(); ++i) archive.sorted_[i] = i;
  std::sort(archive.sorted_.begin(), archive.sorted_.end(),
            [&](std::size_t a, std::size_t b) { return archive.entries_[a].name < archive.entries_[b].name; });
  for (std::size_t i = 1; i < archive.sorted_.size(); ++i) {
    const Entry& e = archive.entries_[archive.sorted_[i]];
    if (e.name == archive.entries_[archive.sorted_[i - 1]].name) return fail(bad("duplicate entry name").with_entry(e.name));
  }

  // 6. Local headers agree with the central directory. A mapped archive is checked in place; any
  // other source gets the headers of a window of entries with one read_ranges() call (over HTTP, a
  // few parallel requests instead of two round trips per entry), then the same checks in entry order.
  auto check_local = [&](Entry& e, std::span<const std::byte> h, auto&& variable_part) -> Status {
    auto entry_fail = [&](Error err) -> Status { return std::move(err.with_file(src.name()).with_entry(e.name).with_offset(e.header_offset)); };
    if (le::u32(h.data()) != kLocalSig) return entry_fail(bad("bad local header signature"));
    if ((le::u16(h.data() + 4) & 0xFF) > kMaxVersionNeeded) return entry_fail(unsupported("local header needs a newer ZIP version"));
    if (le::u16(h.data() + 6) != e.flags) return entry_fail(bad("local header flags differ from the central directory"));
    if (le::u16(h.data() + 8) != e.method) return entry_fail(bad("local header method differs from the central directory"));
    if (le::u32(h.data() + 14) != e.crc32) return entry_fail(bad("local header CRC differs from the central directory"));
    std::uint64_t csize = le::u32(h.data() + 18), usize = le::u32(h.data() + 22);
    const std::uint64_t name_len = le::u16(h.data() + 26), extra_len = le::u16(h.data() + 28);
    const std::uint64_t fixed_end = e.header_offset + kLocalSize;
    if (cd_offset - fixed_end < name_len + extra_len) return entry_fail(bad("local header runs into the central directory"));
    SW_ASSIGN_OR_RETURN(std::span<const std::byte> var, variable_part(name_len + extra_len));
    if (name_len != e.name.size() || std::memcmp(var.data(), e.name.data(), e.name.size()) != 0) {
      return entry_fail(bad("local header name differs from the central directory"));
    }
    ExtraInfo extra;
    if (auto s = parse_extra(var.subspan(static_cast<std::size_t>(name_len)), extra); !s.is_ok()) return entry_fail(std::move(s).error());
    if (usize == 0xFFFFFFFF || csize == 0xFFFFFFFF) {
      // A local ZIP64 block carries both sizes (APPNOTE 4.5.3).
      if (!extra.has_zip64 || extra.zip64.size() != 16) return entry_fail(bad("local header ZIP64 block must hold both sizes"));
      usize = le::u64(extra.zip64.data());
      csize = le::u64(extra.zip64.data() + 8);
    }
    if (usize != e.size || csize != e.compressed_size) return entry_fail(bad("local header sizes differ from the central directory"));
    e.data_offset = fixed_end + name_len + extra_len;
    if (cd_offset - e.data_offset < e.compressed_size) return entry_fail(bad("entry data runs into the central directory"));
    return Status::ok();
  };
  auto inside = [&](const Entry& e) {
    std::uint64_t fixed_end = 0;
    return !__builtin_add_overflow(e.header_offset, kLocalSize, &fixed_end) && fixed_end <= cd_offset;
  };
  auto outside_fail = [&](const Entry& e) {
    return fail(bad("local header lies outside the entry area").with_entry(e.name).with_offset(e.header_offset));
  };
  if (src.mapped() != nullptr) {
    for (Entry& e : archive.entries_) {
      if (!inside(e)) return outside_fail(e);
      auto h = src.view(e.header_offset, kLocalSize);
      auto variable = [&](std::uint64_t n) -> Result<std::span<const std::byte>> {
        return src.view(e.header_offset + kLocalSize, n);
      };
      SW_RETURN_IF_ERROR(check_local(e, h, variable));
    }
  } else {
    // Read per entry: the fixed header, the name the central directory gives and room for a ZIP64
    // extra block. An entry whose local extra field is longer (alignment padding) gets a second read.
    // Windows of entries keep the scratch memory bounded whatever the entry count.
    constexpr std::size_t kWindow = 128;
    constexpr std::uint64_t kExtraGuess = 64;
    std::vector<ByteRange> ranges;
    std::vector<std::byte> first_buf, second_buf;
    std::vector<std::uint64_t> first_at, second_at;
    for (std::size_t w = 0; w < archive.entries_.size(); w += kWindow) {
      const std::size_t w_end = std::min(archive.entries_.size(), w + kWindow);
      ranges.clear();
      first_at.assign(w_end - w, UINT64_MAX);
      std::uint64_t total = 0;
      for (std::size_t i = w; i < w_end; ++i) {
        const Entry& e = archive.entries_[i];
        if (!inside(e)) continue;
        const std::uint64_t len = std::min<std::uint64_t>(kLocalSize + e.name.size() + kExtraGuess, cd_offset - e.header_offset);
        ranges.push_back({e.header_offset, len});
        first_at[i - w] = total;
        total += len;
      }
      first_buf.resize(static_cast<std::size_t>(total));
      SW_RETURN_IF_ERROR(src.read_ranges(ranges, first_buf));
      // Second reads: the variable parts that did not fit, for headers that are otherwise readable.
      ranges.clear();
      second_at.assign(w_end - w, UINT64_MAX);
      total = 0;
      for (std::size_t i = w; i < w_end; ++i) {
        const Entry& e = archive.entries_[i];
        if (first_at[i - w] == UINT64_MAX) continue;
        const std::byte* h = first_buf.data() + first_at[i - w];
        const std::uint64_t got = std::min<std::uint64_t>(kLocalSize + e.name.size() + kExtraGuess, cd_offset - e.header_offset);
        const std::uint64_t var_len = std::uint64_t{le::u16(h + 26)} + le::u16(h + 28);
        if (kLocalSize + var_len <= got || cd_offset - e.header_offset - kLocalSize < var_len) continue;
        ranges.push_back({e.header_offset + kLocalSize, var_len});
        second_at[i - w] = total;
        total += var_len;
      }
      second_buf.resize(static_cast<std::size_t>(total));
      SW_RETURN_IF_ERROR(src.read_ranges(ranges, second_buf));
      for (std::size_t i = w; i < w_end; ++i) {
        Entry& e = archive.entries_[i];
        if (first_at[i - w] == UINT64_MAX) return outside_fail(e);
        const std::span<const std::byte> got(first_buf.data() + first_at[i - w],
                                             static_cast<std::size_t>(std::min<std::uint64_t>(kLocalSize + e.name.size() + kExtraGuess,
                                                                                              cd_offset - e.header_offset)));
        auto variable = [&](std::uint64_t n) -> Result<std::span<const std::byte>> {
          if (kLocalSize + n <= got.size()) return got.subspan(kLocalSize, static_cast<std::size_t>(n));
          return std::span<const std::byte>(second_buf.data() + second_at[i - w], static_cast<std::size_t>(n));
        };
        SW_RETURN_IF_ERROR(check_local(e, got.first(kLocalSize), variable));
      }
    }
  }

  // 7. Entries tile the area before the central directory: no prepended bytes, gaps or overlaps.
  std::vector<const Entry*> by_offset;
  by_offset.reserve(archive.entries_.size());
  for (const Entry& e : archive.entries_) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) { return a->header_offset < b->header_offset; });
  std::uint64_t expected = 0;
  for (const Entry* e : by_offset) {
    if (e->header_offset < expected) return fail(bad("entry overlaps the previous one").with_entry(e->name).with_offset(e->header_offset));
    if (e->header_offset > expected) {
      return fail(bad(std::to_string(e->header_offset - expected) + " unaccounted bytes before this entry (prepended data or a hidden gap)")
                      .with_entry(e->name)
                      .with_offset(expected));
    }
    expected = e->data_offset + e->compressed_size;
  }
  if (expected != cd_offset) {
    return fail(bad(std::to_string(cd_offset - expected) + " unaccounted bytes before the central directory").with_offset(expected));
  }
  archive.source_ = std::move(source);
  return archive;
}

const Entry* Archive::find(std::string_view name) const noexcept {
  auto it = std::lower_bound(sorted_.begin(), sorted_.end(), name,
                             [&](std::size_t i, std::string_view n) { return entries_[i].name < n; });
  if (it == sorted_.end() || entries_[*it].name != name) return nullptr;
  return &entries_[*it];
}

Result<SourcePtr> Archive::open_entry(const Entry& entry) const {
  return subrange_source(source_, entry.data_offset, entry.compressed_size, source_->name() + "!" + entry.name);
}

Status Archive::verify_crc(const Entry& entry) const {
  std::uint32_t crc = 0;
  auto view = source_->view(entry.data_offset, entry.compressed_size);
  if (view.data() != nullptr) {
    constexpr std::size_t kStep = 64u << 20;
    for (std::size_t off = 0; off < view.size(); off += kStep) crc = crc32(crc, view.subspan(off, std::min(kStep, view.size() - off)));
  } else {
    std::vector<std::byte> buf(static_cast<std::size_t>(std::min<std::uint64_t>(entry.compressed_size, 8u << 20)));
    for (std::uint64_t done = 0; done < entry.compressed_size;) {
      std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), entry.compressed_size - done));
      SW_RETURN_IF_ERROR(source_->read_at(entry.data_offset + done, {buf.data(), n}));
      crc = crc32(crc, {buf.data(), n});
      done += n;
    }
  }
  if (crc != entry.crc32) {
    char msg[96];
    std::snprintf(msg, sizeof msg, "CRC-32 is %08x, the archive records %08x", crc, entry.crc32);
    return Error(ErrorKind::CrcMismatch, msg).with_file(source_->name()).with_entry(entry.name).with_offset(entry.data_offset);
  }
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
