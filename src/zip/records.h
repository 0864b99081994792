// zip/records.h — every ZIP record layout, defined once (APPNOTE 6.3.x, section 4.3). Internal.
//
// Each record is a plain struct of its fixed fields, with decode() from bytes and encode() to bytes.
// decode() reads only the fixed part, after checking that the span holds it; it reports a short span
// or a wrong signature and judges nothing else: the reader (archive.cpp) decides what is acceptable
// and the writer (writer.cpp) what it emits. Variable parts (names, extra fields, comments) follow
// the fixed part and are left to the caller, whose lengths the fixed part gives.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/little_endian.h"

namespace safeweights::zip::records {

// Values a 32-bit (16-bit) field holds when the real value is in a ZIP64 record or extra block.
constexpr std::uint32_t kSaturated32 = 0xFFFFFFFF;
constexpr std::uint16_t kSaturated16 = 0xFFFF;

// What decode() found. Truncated: fewer bytes than the fixed part; BadSignature: another record.
enum class Decoded { Ok, Truncated, BadSignature };

// True when `bytes` starts with the 4-byte little-endian signature `sig`. Inline: the end-record search
// calls it at every byte of up to 64 KiB.
inline bool starts_with_signature(std::span<const std::byte> bytes, std::uint32_t sig) noexcept {
  return bytes.size() >= 4 && le::u32(bytes.data()) == sig;
}

// Local file header (4.3.7), followed by name_length + extra_length bytes, then the entry's data.
struct LocalHeader {
  static constexpr std::uint32_t kSignature = 0x04034b50;
  static constexpr std::size_t kSize = 30;
  static constexpr std::size_t kCrcOffset = 14;  // the writer patches the CRC once the data is known
  std::uint16_t version_needed = 0;
  std::uint16_t flags = 0;
  std::uint16_t method = 0;
  std::uint16_t time = 0;
  std::uint16_t date = 0;
  std::uint32_t crc32 = 0;
  std::uint32_t compressed_size = 0;
  std::uint32_t size = 0;
  std::uint16_t name_length = 0;
  std::uint16_t extra_length = 0;
};

// Central directory file header (4.3.12), followed by name, extra field and comment.
struct CentralHeader {
  static constexpr std::uint32_t kSignature = 0x02014b50;
  static constexpr std::size_t kSize = 46;
  std::uint16_t version_made_by = 0;
  std::uint16_t version_needed = 0;
  std::uint16_t flags = 0;
  std::uint16_t method = 0;
  std::uint16_t time = 0;
  std::uint16_t date = 0;
  std::uint32_t crc32 = 0;
  std::uint32_t compressed_size = 0;
  std::uint32_t size = 0;
  std::uint16_t name_length = 0;
  std::uint16_t extra_length = 0;
  std::uint16_t comment_length = 0;
  std::uint16_t disk_start = 0;
  std::uint16_t internal_attributes = 0;
  std::uint32_t external_attributes = 0;
  std::uint32_t header_offset = 0;
};

// End of central directory record (4.3.16), followed by comment_length bytes of comment.
struct EndOfCentralDirectory {
  static constexpr std::uint32_t kSignature = 0x06054b50;
  static constexpr std::size_t kSize = 22;
  static constexpr std::size_t kMaxComment = 65535;
  std::uint16_t disk = 0;
  std::uint16_t cd_disk = 0;
  std::uint16_t count_on_disk = 0;
  std::uint16_t count = 0;
  std::uint32_t cd_size = 0;
  std::uint32_t cd_offset = 0;
  std::uint16_t comment_length = 0;
};

// ZIP64 end of central directory record (4.3.14), version 1: no extensible data.
struct Zip64EndOfCentralDirectory {
  static constexpr std::uint32_t kSignature = 0x06064b50;
  static constexpr std::size_t kSize = 56;
  // record_size counts the bytes after itself: the size of the record less its first 12 bytes.
  static constexpr std::uint64_t kRecordSizeBase = 12;
  std::uint64_t record_size = kSize - kRecordSizeBase;
  std::uint16_t version_made_by = 0;
  std::uint16_t version_needed = 0;
  std::uint32_t disk = 0;
  std::uint32_t cd_disk = 0;
  std::uint64_t count_on_disk = 0;
  std::uint64_t count = 0;
  std::uint64_t cd_size = 0;
  std::uint64_t cd_offset = 0;
};

// ZIP64 end of central directory locator (4.3.15), right before the classic end record.
struct Zip64Locator {
  static constexpr std::uint32_t kSignature = 0x07064b50;
  static constexpr std::size_t kSize = 20;
  std::uint32_t eocd64_disk = 0;
  std::uint64_t eocd64_offset = 0;
  std::uint32_t total_disks = 1;
};

// One block of an extra field (4.5.1): u16 id, u16 payload size, payload.
struct ExtraBlockHeader {
  static constexpr std::size_t kSize = 4;
  std::uint16_t id = 0;
  std::uint16_t size = 0;
};

// The ZIP64 extended information extra block (4.5.3): the saturated fields of its header, in this
// order, each present only when saturated there.
struct Zip64Extra {
  static constexpr std::uint16_t kId = 0x0001;
  std::optional<std::uint64_t> size;
  std::optional<std::uint64_t> compressed_size;
  std::optional<std::uint64_t> header_offset;
  std::optional<std::uint32_t> disk_start;
  // Payload bytes of a block holding the given fields.
  static constexpr std::size_t payload_size(bool size, bool compressed_size, bool header_offset, bool disk_start) noexcept {
    return (std::size_t{size} + compressed_size + header_offset) * 8u + std::size_t{disk_start} * 4u;
  }
};

// Data descriptor (4.3.9): after an entry's data when flag bit 3 is set. The signature is optional;
// sizes are 8 bytes each when the entry's local header carries a ZIP64 extra block, else 4.
struct DataDescriptor {
  static constexpr std::uint32_t kSignature = 0x08074b50;
  std::uint32_t crc32 = 0;
  std::uint64_t compressed_size = 0;
  std::uint64_t size = 0;
  static constexpr std::size_t encoded_size(bool zip64, bool signature) noexcept { return (signature ? 4 : 0) + 4 + (zip64 ? 16 : 8); }
};

Decoded decode(std::span<const std::byte> bytes, LocalHeader& out) noexcept;
Decoded decode(std::span<const std::byte> bytes, CentralHeader& out) noexcept;
Decoded decode(std::span<const std::byte> bytes, EndOfCentralDirectory& out) noexcept;
Decoded decode(std::span<const std::byte> bytes, Zip64EndOfCentralDirectory& out) noexcept;
Decoded decode(std::span<const std::byte> bytes, Zip64Locator& out) noexcept;
Decoded decode(std::span<const std::byte> bytes, ExtraBlockHeader& out) noexcept;
// The payload of a ZIP64 block for a header whose saturated fields are the `want_*` ones. Truncated
// when the payload is shorter than they need (a longer payload is the caller's to judge).
Decoded decode(std::span<const std::byte> payload, bool want_size, bool want_compressed_size, bool want_header_offset, bool want_disk_start,
               Zip64Extra& out) noexcept;
// Exactly encoded_size(zip64, signature) bytes; BadSignature when `signature` but none is there.
Decoded decode(std::span<const std::byte> bytes, bool zip64, bool signature, DataDescriptor& out) noexcept;

// Each appends the record's encoding (fixed part only) to `out`.
void encode(const LocalHeader& record, std::string& out);
void encode(const CentralHeader& record, std::string& out);
void encode(const EndOfCentralDirectory& record, std::string& out);
void encode(const Zip64EndOfCentralDirectory& record, std::string& out);
void encode(const Zip64Locator& record, std::string& out);
void encode(const ExtraBlockHeader& record, std::string& out);
// The whole block, header included, holding the fields that are set, in APPNOTE order.
void encode(const Zip64Extra& record, std::string& out);
void encode(const DataDescriptor& record, bool zip64, bool signature, std::string& out);

}  // namespace safeweights::zip::records
