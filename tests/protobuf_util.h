// Protocol buffer fields for tests that write a SentencePiece model by hand (tests/hf, tests/original):
// a varint, a length-delimited field, a ModelProto piece.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace swt {

inline std::string varint(std::uint64_t v) {
  std::string s;
  do {
    s += static_cast<char>((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  return s;
}
// Field `field` of wire type 2 (length-delimited) holding `body`.
inline std::string ld(int field, const std::string& body) { return varint(static_cast<std::uint64_t>(field) << 3 | 2) + varint(body.size()) + body; }
// A SentencePiece piece message (ModelProto.pieces' body): text, score, type.
inline std::string piece(const std::string& text, float score, int type) {
  std::string s = ld(1, text) + varint(2 << 3 | 5);
  s.append(reinterpret_cast<const char*>(&score), 4);
  return s + varint(3 << 3) + varint(static_cast<std::uint64_t>(type));
}

}  // namespace swt
