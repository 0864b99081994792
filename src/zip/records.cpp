// ZIP record codecs. Each fixed record's layout is one field list (fields()), walked by a decoder, an
// encoder and, at compile time, a counter that proves the list adds up to the record's size.
#include "zip/records.h"

#include <type_traits>

#include "core/little_endian.h"

namespace safeweights::zip::records {
namespace {

// The fields after the signature, in file order; each field's width is its type's size.
template <class R, class V>
constexpr void fields(R& r, V& v) requires std::is_same_v<std::remove_const_t<R>, LocalHeader> {
  v(r.version_needed), v(r.flags), v(r.method), v(r.time), v(r.date), v(r.crc32), v(r.compressed_size), v(r.size), v(r.name_length),
      v(r.extra_length);
}
template <class R, class V>
constexpr void fields(R& r, V& v) requires std::is_same_v<std::remove_const_t<R>, CentralHeader> {
  v(r.version_made_by), v(r.version_needed), v(r.flags), v(r.method), v(r.time), v(r.date), v(r.crc32), v(r.compressed_size), v(r.size),
      v(r.name_length), v(r.extra_length), v(r.comment_length), v(r.disk_start), v(r.internal_attributes), v(r.external_attributes),
      v(r.header_offset);
}
template <class R, class V>
constexpr void fields(R& r, V& v) requires std::is_same_v<std::remove_const_t<R>, EndOfCentralDirectory> {
  v(r.disk), v(r.cd_disk), v(r.count_on_disk), v(r.count), v(r.cd_size), v(r.cd_offset), v(r.comment_length);
}
template <class R, class V>
constexpr void fields(R& r, V& v) requires std::is_same_v<std::remove_const_t<R>, Zip64EndOfCentralDirectory> {
  v(r.record_size), v(r.version_made_by), v(r.version_needed), v(r.disk), v(r.cd_disk), v(r.count_on_disk), v(r.count), v(r.cd_size), v(r.cd_offset);
}
template <class R, class V>
constexpr void fields(R& r, V& v) requires std::is_same_v<std::remove_const_t<R>, Zip64Locator> {
  v(r.eocd64_disk), v(r.eocd64_offset), v(r.total_disks);
}

struct FieldCounter {
  std::size_t bytes = 0;
  template <class T>
  constexpr void operator()(const T&) {
    bytes += sizeof(T);
  }
};
struct FieldDecoder {
  const std::byte* p;
  template <class T>
  void operator()(T& field) {
    field = static_cast<T>(le::load(p, sizeof(T)));
    p += sizeof(T);
  }
};
struct FieldEncoder {
  std::string& out;
  template <class T>
  void operator()(const T& field) {
    le::append(out, field, sizeof(T));
  }
};

template <class R>
constexpr std::size_t counted_size() {
  R r{};
  FieldCounter c;
  fields(r, c);
  return 4 + c.bytes;
}
static_assert(counted_size<LocalHeader>() == LocalHeader::kSize);
static_assert(counted_size<CentralHeader>() == CentralHeader::kSize);
static_assert(counted_size<EndOfCentralDirectory>() == EndOfCentralDirectory::kSize);
static_assert(counted_size<Zip64EndOfCentralDirectory>() == Zip64EndOfCentralDirectory::kSize);
static_assert(counted_size<Zip64Locator>() == Zip64Locator::kSize);

template <class R>
Decoded decode_fixed(std::span<const std::byte> bytes, R& out) noexcept {
  if (bytes.size() < R::kSize) return Decoded::Truncated;
  if (le::u32(bytes.data()) != R::kSignature) return Decoded::BadSignature;
  FieldDecoder d{bytes.data() + 4};
  fields(out, d);
  return Decoded::Ok;
}

template <class R>
void encode_fixed(const R& record, std::string& out) {
  le::append(out, R::kSignature, 4);
  FieldEncoder e{out};
  fields(record, e);
}

}  // namespace

Decoded decode(std::span<const std::byte> bytes, LocalHeader& out) noexcept { return decode_fixed(bytes, out); }
Decoded decode(std::span<const std::byte> bytes, CentralHeader& out) noexcept { return decode_fixed(bytes, out); }
Decoded decode(std::span<const std::byte> bytes, EndOfCentralDirectory& out) noexcept { return decode_fixed(bytes, out); }
Decoded decode(std::span<const std::byte> bytes, Zip64EndOfCentralDirectory& out) noexcept { return decode_fixed(bytes, out); }
Decoded decode(std::span<const std::byte> bytes, Zip64Locator& out) noexcept { return decode_fixed(bytes, out); }

Decoded decode(std::span<const std::byte> bytes, ExtraBlockHeader& out) noexcept {
  if (bytes.size() < ExtraBlockHeader::kSize) return Decoded::Truncated;
  out.id = le::u16(bytes.data());
  out.size = le::u16(bytes.data() + 2);
  return Decoded::Ok;
}

Decoded decode(std::span<const std::byte> payload, bool want_size, bool want_compressed_size, bool want_header_offset, bool want_disk_start,
               Zip64Extra& out) noexcept {
  if (payload.size() < Zip64Extra::payload_size(want_size, want_compressed_size, want_header_offset, want_disk_start)) {
    return Decoded::Truncated;
  }
  const std::byte* p = payload.data();
  auto take = [&p](int bytes) {
    const std::uint64_t v = le::load(p, bytes);
    p += bytes;
    return v;
  };
  out = {};
  if (want_size) out.size = take(8);
  if (want_compressed_size) out.compressed_size = take(8);
  if (want_header_offset) out.header_offset = take(8);
  if (want_disk_start) out.disk_start = static_cast<std::uint32_t>(take(4));
  return Decoded::Ok;
}

Decoded decode(std::span<const std::byte> bytes, bool zip64, bool signature, DataDescriptor& out) noexcept {
  if (bytes.size() < DataDescriptor::encoded_size(zip64, signature)) return Decoded::Truncated;
  const std::byte* p = bytes.data();
  if (signature) {
    if (le::u32(p) != DataDescriptor::kSignature) return Decoded::BadSignature;
    p += 4;
  }
  const int width = zip64 ? 8 : 4;
  out.crc32 = le::u32(p);
  out.compressed_size = le::load(p + 4, width);
  out.size = le::load(p + 4 + width, width);
  return Decoded::Ok;
}

void encode(const LocalHeader& record, std::string& out) { encode_fixed(record, out); }
void encode(const CentralHeader& record, std::string& out) { encode_fixed(record, out); }
void encode(const EndOfCentralDirectory& record, std::string& out) { encode_fixed(record, out); }
void encode(const Zip64EndOfCentralDirectory& record, std::string& out) { encode_fixed(record, out); }
void encode(const Zip64Locator& record, std::string& out) { encode_fixed(record, out); }

void encode(const ExtraBlockHeader& record, std::string& out) {
  le::append(out, record.id, 2);
  le::append(out, record.size, 2);
}

void encode(const Zip64Extra& record, std::string& out) {
  const std::size_t payload = Zip64Extra::payload_size(record.size.has_value(), record.compressed_size.has_value(), record.header_offset.has_value(),
                                                       record.disk_start.has_value());
  encode(ExtraBlockHeader{Zip64Extra::kId, static_cast<std::uint16_t>(payload)}, out);
  if (record.size) le::append(out, *record.size, 8);
  if (record.compressed_size) le::append(out, *record.compressed_size, 8);
  if (record.header_offset) le::append(out, *record.header_offset, 8);
  if (record.disk_start) le::append(out, *record.disk_start, 4);
}

void encode(const DataDescriptor& record, bool zip64, bool signature, std::string& out) {
  if (signature) le::append(out, DataDescriptor::kSignature, 4);
  le::append(out, record.crc32, 4);
  le::append(out, record.compressed_size, zip64 ? 8 : 4);
  le::append(out, record.size, zip64 ? 8 : 4);
}

}  // namespace safeweights::zip::records
