// A strict reader of the pieces of a SentencePiece model (tokenizer.model, a serialized ModelProto).
//
// Protobuf wire format: each field is a varint key (field number << 3 | wire type) followed by a varint
// (type 0), 8 bytes (1), a varint length and that many bytes (2), or 4 bytes (5). ModelProto's field 1
// is a repeated SentencePiece message: piece (1, string), score (2, float), type (3, enum). Everything
// else (trainer and normalizer specs) is skipped by its wire type. Every length is checked against the
// bytes that remain before it is used; groups (wire types 3 and 4) and field number 0 are refused.
#include <bit>
#include <cstring>

#include "hf/hf_files.h"

namespace safeweights::hf {
namespace {

class Wire {
 public:
  Wire(std::string_view bytes, std::size_t base, const std::string& what) : bytes_(bytes), base_(base), what_(what) {}

  bool done() const { return pos_ == bytes_.size(); }
  std::size_t offset() const { return base_ + pos_; }

  Error bad(const std::string& rule) const {
    return Error(ErrorKind::InvalidModelFolder, "SentencePiece model: " + rule).with_file(what_).with_offset(offset());
  }

  Result<std::uint64_t> varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ == bytes_.size()) return bad("truncated varint");
      const auto b = static_cast<std::uint8_t>(bytes_[pos_++]);
      if (shift == 63 && b > 1) return bad("varint over 64 bits");
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    return bad("varint longer than 10 bytes");
  }

  Result<std::string_view> take(std::uint64_t n) {
    if (n > bytes_.size() - pos_) return bad("a length of " + std::to_string(n) + " runs past the end of its message");
    auto out = bytes_.substr(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return out;
  }

  // Reads a field key: field number and wire type.
  Result<std::pair<std::uint64_t, unsigned>> key() {
    auto k = varint();
    if (!k.is_ok()) return std::move(k).status();
    const std::uint64_t field = *k >> 3;
    const auto wire = static_cast<unsigned>(*k & 7);
    if (field == 0) return bad("field number 0");
    if (wire == 3 || wire == 4 || wire > 5) return bad("wire type " + std::to_string(wire) + " (groups and unknown types are refused)");
    return std::pair{field, wire};
  }

  // The value of a field of wire type `wire`: a varint, or the bytes of a fixed or length-delimited one.
  Status skip(unsigned wire) {
    if (wire == 0) return varint().status();
    if (wire == 1) return take(8).status();
    if (wire == 5) return take(4).status();
    auto n = varint();
    if (!n.is_ok()) return std::move(n).status();
    return take(*n).status();
  }

 private:
  std::string_view bytes_;
  std::size_t base_;
  const std::string& what_;
  std::size_t pos_ = 0;
};

Result<Piece> parse_piece(std::string_view bytes, std::size_t base, const std::string& what) {
  Wire w(bytes, base, what);
  Piece p;
  bool have_piece = false;
  while (!w.done()) {
    auto k = w.key();
    if (!k.is_ok()) return std::move(k).status();
    const auto [field, wire] = *k;
    if (field == 1 && wire == 2) {
      auto n = w.varint();
      if (!n.is_ok()) return std::move(n).status();
      auto s = w.take(*n);
      if (!s.is_ok()) return std::move(s).status();
      p.piece = std::string(*s);
      have_piece = true;
    } else if (field == 2 && wire == 5) {
      auto s = w.take(4);
      if (!s.is_ok()) return std::move(s).status();
      std::uint32_t bits;
      std::memcpy(&bits, s->data(), 4);
      if constexpr (std::endian::native == std::endian::big) bits = __builtin_bswap32(bits);
      p.score = std::bit_cast<float>(bits);
    } else if (field == 3 && wire == 0) {
      auto v = w.varint();
      if (!v.is_ok()) return std::move(v).status();
      if (*v < kNormal || *v > kByte) return w.bad("piece type " + std::to_string(*v) + " is not one of NORMAL..BYTE (1-6)");
      p.type = static_cast<std::int32_t>(*v);
    } else if (field <= 3) {
      return w.bad("piece field " + std::to_string(field) + " has wire type " + std::to_string(wire));
    } else {
      Status s = w.skip(wire);
      if (!s.is_ok()) return s;
    }
  }
  if (!have_piece) return w.bad("a piece without its text");
  return p;
}

}  // namespace

Result<std::vector<Piece>> parse_sentencepiece(std::string_view bytes, const std::string& what) {
  Wire w(bytes, 0, what);
  std::vector<Piece> pieces;
  while (!w.done()) {
    auto k = w.key();
    if (!k.is_ok()) return std::move(k).status();
    const auto [field, wire] = *k;
    if (field != 1) {
      Status s = w.skip(wire);
      if (!s.is_ok()) return s;
      continue;
    }
    if (wire != 2) return w.bad("pieces (field 1) must be messages");
    auto n = w.varint();
    if (!n.is_ok()) return std::move(n).status();
    const std::size_t base = w.offset();
    auto body = w.take(*n);
    if (!body.is_ok()) return std::move(body).status();
    if (pieces.size() == kMaxVocab) return w.bad("more than " + std::to_string(kMaxVocab) + " pieces");
    auto p = parse_piece(*body, base, what);
    if (!p.is_ok()) return std::move(p).status();
    pieces.push_back(std::move(*p));
  }
  if (pieces.empty()) return w.bad("no pieces");
  return pieces;
}

}  // namespace safeweights::hf
