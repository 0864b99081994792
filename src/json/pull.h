// A strict single-pass JSON reader (RFC 8259) for schema readers that write what they need straight
// into their own arrays: no document tree, no tape, no index of the text. Internal.
//
// The caller owns the text, which must be writable and have kJsonPadding bytes after it: strings are
// unescaped in place (an unescaped string is never longer than its escaped form), so a key or a string
// value is a view into the text, valid as long as the text. The text must already be valid UTF-8
// (is_valid_utf8); escapes are checked here (a lone surrogate is an error).
//
// Every method returns false on a syntax error and then leaves error() set; the schema reader stops.
// Errors are simdjson's codes, so messages match the DOM parser the other schemas use.
#pragma once

#include <simdjson.h>

#include <locale.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "core/utf8.h"
#include "json/json_parse.h"

namespace safeweights::json {

// What simdjson reports before any error in document order, from the original text (strings unescaped
// in place no longer show it), fed in pieces: UNCLOSED_STRING when a string is still open at the end,
// else UNESCAPED_CHARS when a string holds a control byte, else TAPE_ERROR when the root's opening
// bracket is not matched by the last token, else SUCCESS.
class QuoteScan {
 public:
  void feed(const char* p, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) {
      const char c = p[i];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
        if (first_ == 0) first_ = c == 0 ? 1 : c;
        last_ = c;
      }
      if (in_string_ && static_cast<unsigned char>(c) < 0x20) control_ = true;
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = !in_string_;
      }
    }
  }
  simdjson::error_code finish() const noexcept {
    if (in_string_) return simdjson::UNCLOSED_STRING;
    if (control_) return simdjson::UNESCAPED_CHARS;
    if ((first_ == '{' && last_ != '}') || (first_ == '[' && last_ != ']')) return simdjson::TAPE_ERROR;
    return simdjson::SUCCESS;
  }

 private:
  bool in_string_ = false, escaped_ = false, control_ = false;
  char first_ = 0, last_ = 0;  // the first and last bytes that are not whitespace
};

class Pull {
 public:
  // `max_depth`: containers that may be open at once (the root counts).
  Pull(char* text, std::size_t size, int max_depth) : p_(text), begin_(text), end_(text + size), max_depth_(max_depth) {
    std::memset(end_, 0, kJsonPadding);  // a NUL sentinel: never valid where a token is expected
  }

  simdjson::error_code error() const noexcept { return error_; }
  std::size_t offset() const noexcept { return static_cast<std::size_t>(p_ - begin_); }
  std::size_t remaining() const noexcept { return static_cast<std::size_t>(end_ - p_); }
  const char* text() const noexcept { return begin_; }
  // Whether a number token "-0" (no fraction or exponent) was read: serde reads it as a float.
  bool saw_negative_zero() const noexcept { return negative_zero_; }

  // The first byte of the next token (whitespace skipped); 0 at the end of the text.
  char peek() noexcept {
    while (is_space(*p_)) ++p_;
    return p_ < end_ ? *p_ : '\0';
  }
  // The whole text is one value followed by whitespace only.
  bool at_end() noexcept {
    peek();
    return p_ == end_ || fail(simdjson::TAPE_ERROR);
  }
  bool empty_document() noexcept {
    peek();
    return p_ == end_;
  }

  // Objects: begin_object() at '{', then next_member() until it says there is no more.
  bool begin_object() noexcept { return open('{'); }
  bool next_member(bool& more, std::string_view& key) noexcept {
    if (!next_item('}', more)) return false;
    if (!more) return true;
    if (peek() != '"') return fail(simdjson::TAPE_ERROR);
    if (!string(key)) return false;
    if (peek() != ':') return fail(simdjson::TAPE_ERROR);
    ++p_;
    return true;
  }
  bool begin_array() noexcept { return open('['); }
  bool next_element(bool& more) noexcept { return next_item(']', more); }

  // A string at '"', unescaped in place.
  bool string(std::string_view& out) noexcept {
    ++p_;
    char* const start = p_;
    // Fast path: no escape. Sixteen (SSE2) or eight bytes at a time look for '"', '\\' or a control
    // byte; the padding after the text holds NULs, so the scan always stops.
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    for (;;) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p_));
      const __m128i control = _mm_xor_si128(_mm_cmpeq_epi8(_mm_max_epu8(v, space), v), _mm_set1_epi8(-1));
      const auto special =
          static_cast<unsigned>(_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)), control)));
      if (special == 0) {
        p_ += 16;
        continue;
      }
      p_ += __builtin_ctz(special);
      break;
    }
#else
    for (;;) {
      std::uint64_t w;
      std::memcpy(&w, p_, 8);
      const std::uint64_t special = has_byte(w, '"') | has_byte(w, '\\') | has_less_than(w, 0x20);
      if (special == 0) {
        p_ += 8;
        continue;
      }
      p_ += __builtin_ctzll(special) / 8;
      break;
    }
#endif
    if (*p_ == '"' && p_ < end_) {
      out = std::string_view(start, static_cast<std::size_t>(p_ - start));
      ++p_;
      return true;
    }
    return unescape(start, out);
  }

  struct Number {
    enum Kind { kUnsigned, kOther } kind = kOther;  // kUnsigned: a non-negative integer that fits 64 bits
    std::uint64_t value = 0;
  };
  // A number at '-' or a digit. Integers of up to 19 digits take the short path; anything longer, or
  // with a fraction or an exponent, the rare one.
  bool number(Number& out) noexcept {
    const char* const start = p_;
    const bool negative = *p_ == '-';
    if (negative) ++p_;
    if (!is_digit(*p_) || (*p_ == '0' && is_digit(p_[1]))) return fail(simdjson::NUMBER_ERROR);  // no digit, leading zero
    const char* const digits = p_;
    std::uint64_t v = 0;
    while (is_digit(*p_)) v = v * 10 + static_cast<unsigned>(*p_++ - '0');  // may wrap: checked below
    if (*p_ == '.' || *p_ == 'e' || *p_ == 'E' || p_ - digits > 19) return rare_number(start, digits, out);
    // As simdjson: a negative integer must fit in 64 signed bits, and a number must end at a structural
    // character or whitespace.
    if (negative && v > std::uint64_t{1} << 63) return fail(simdjson::NUMBER_ERROR);
    if (!ends_token()) return fail(simdjson::NUMBER_ERROR);
    if (negative && v == 0) negative_zero_ = true;
    out.kind = negative ? Number::kOther : Number::kUnsigned;
    out.value = v;
    return true;
  }

  // Any value, checked and skipped. `on_object_key(key)` is called for each key of every object in it
  // with the key's depth, so the caller can look for repeats.
  template <typename OnObject>
  bool skip(OnObject&& on_object) noexcept {
    switch (peek()) {
      case '{': {
        if (!begin_object()) return false;
        auto keys = on_object();
        for (bool more = true;;) {
          std::string_view key;
          if (!next_member(more, key)) return false;
          if (!more) return true;
          keys(key);
          if (!skip(on_object)) return false;
        }
      }
      case '[': {
        if (!begin_array()) return false;
        for (bool more = true;;) {
          if (!next_element(more)) return false;
          if (!more) return true;
          if (!skip(on_object)) return false;
        }
      }
      case '"': {
        std::string_view s;
        return string(s);
      }
      case 't': return literal("true", simdjson::T_ATOM_ERROR);
      case 'f': return literal("false", simdjson::F_ATOM_ERROR);
      case 'n': return literal("null", simdjson::N_ATOM_ERROR);
      default: {
        if (*p_ != '-' && !is_digit(*p_)) return fail(simdjson::TAPE_ERROR);
        Number n;
        return number(n);
      }
    }
  }
  bool null() noexcept { return literal("null", simdjson::N_ATOM_ERROR); }

  // Exact matching for a schema reader's fast path over text in one expected spelling (no whitespace,
  // no escapes): each call advances only on a match, records no error and writes nothing, so after a
  // mismatch the reader rewinds to its mark and reads the same value the general way, with the same
  // result. A mark is taken between values.
  struct Mark {
    char* at;
    int depth;
  };
  Mark mark() const noexcept { return {p_, depth_}; }
  void rewind(const Mark& m) noexcept { p_ = m.at, depth_ = m.depth; }
  // Whether `levels` more containers may open here.
  bool depth_allows(int levels) const noexcept { return depth_ + levels <= max_depth_; }
  // These bytes, exactly (the padding's NULs never match a literal's bytes). Compared a word at a
  // time (the padding makes the loads safe): a call to memcmp per field was 7% of a parse.
  template <std::size_t N>
  [[gnu::always_inline]] bool exact(const char (&literal)[N]) noexcept {
    constexpr std::size_t L = N - 1;
    static_assert(L >= 1 && L <= 24 && L + 8 <= kJsonPadding);
    if constexpr (L < 8) {
      std::uint64_t want = 0;
      for (std::size_t i = 0; i < L; ++i) want |= std::uint64_t{static_cast<unsigned char>(literal[i])} << (8 * i);
      constexpr std::uint64_t mask = (std::uint64_t{1} << (8 * L)) - 1;
      if ((load64(p_) & mask) != want) return false;
    } else {
      for (std::size_t i = 0; i + 8 <= L; i += 8) {
        if (load64(p_ + i) != load64(literal + i)) return false;
      }
      if constexpr (L % 8 != 0) {
        if (load64(p_ + L - 8) != load64(literal + L - 8)) return false;  // the last 8, overlapping
      }
    }
    p_ += L;
    return true;
  }
  // A run of [A-Za-z0-9_] closed by '"', of at most `max` bytes; the quote is consumed, not returned.
  [[gnu::always_inline]] bool word_until_quote(std::size_t max, std::string_view& out) noexcept {
    const char* const start = p_;
    for (std::size_t i = 0; i <= max; ++i) {
      const char c = p_[i];
      if (c == '"') {
        if (i == 0) return false;
        out = std::string_view(start, i);
        p_ += i + 1;
        return true;
      }
      if (!is_digit(c) && !(c >= 'A' && c <= 'Z') && !(c >= 'a' && c <= 'z') && c != '_') return false;
    }
    return false;
  }
  // A non-negative integer of at most 19 digits (so it fits 64 bits) without a leading zero, ended by
  // `stop`; the stop byte is not consumed. Anything else (a sign, a fraction, an exponent) is a mismatch.
  // Up to sixteen digits are read as two words of eight (SWAR) with no branch on the count, which
  // varies from number to number (a digit at a time, a chain of dependent multiplies, and then a
  // branch per word were the largest part of a 20,000-tensor parse). The padding makes the loads safe.
  [[gnu::always_inline]] bool plain_u64(char stop1, char stop2, std::uint64_t& out) noexcept {
    const char* q = p_;
    if (*q == '0' && is_digit(q[1])) return false;  // a leading zero
    const std::uint64_t w1 = digit_values(load64(q)), w2 = digit_values(load64(q + 8));
    const std::size_t n1 = leading_digits(w1), n2 = leading_digits(w2);
    if (n1 == 0) return false;
    std::uint64_t v;
    std::size_t digits;
    if (n1 + n2 < 16) {
      digits = n1 == 8 ? 8 + n2 : n1;
      const std::uint64_t first = eight_digits(w1 << (8 * (8 - n1)));
      const std::uint64_t second = eight_digits((w2 << (8 * (8 - n2) & 63)) & -static_cast<std::uint64_t>(n2 != 0));
      v = n1 == 8 ? first * kPow10[n2] + second : first;
    } else {
      // Sixteen digits or more: rare (a header's sizes and offsets are far below 10^16).
      v = eight_digits(w1) * kPow10[8] + eight_digits(w2);
      digits = 16;
      while (digits < 20 && is_digit(q[digits])) v = v * 10 + static_cast<unsigned>(q[digits++] - '0');  // no wrap below 20
    }
    q += digits;
    if (digits > 19 || (*q != stop1 && *q != stop2)) return false;
    out = v;
    p_ = const_cast<char*>(q);
    return true;
  }

  bool fail(simdjson::error_code e) noexcept {
    if (error_ == simdjson::SUCCESS) error_ = e;
    return false;
  }

 private:
  static bool is_space(char c) noexcept { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
  static bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }
  static constexpr std::uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;
  static std::uint64_t has_zero(std::uint64_t w) noexcept { return (w - kOnes) & ~w & kHighs; }
  static std::uint64_t has_byte(std::uint64_t w, char c) noexcept { return has_zero(w ^ (kOnes * static_cast<unsigned char>(c))); }
  // Bytes below n (n <= 128), exact: bytes with the high bit set never count.
  static std::uint64_t has_less_than(std::uint64_t w, unsigned n) noexcept { return (w - kOnes * n) & ~w & kHighs; }

  static std::uint64_t load64(const char* p) noexcept {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  }
  // Each byte's digit value (0 to 9) where the byte is a digit; other bytes hold something above 9.
  static std::uint64_t digit_values(std::uint64_t w) noexcept { return w ^ (kOnes * '0'); }
  // How many of the word's bytes, from the first, are digits (0 to 8). The test of each byte is exact
  // up to the first byte that is not a digit: an add's carry only moves towards later bytes.
  static std::size_t leading_digits(std::uint64_t values) noexcept {
    const std::uint64_t non_digit = ((values + kOnes * 0x76) | values) & kHighs;
    return non_digit == 0 ? 8 : static_cast<std::size_t>(__builtin_ctzll(non_digit)) / 8;
  }
  static constexpr std::uint64_t kPow10[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
  // The value of eight digit values (0 to 9, the first in the lowest byte): pairs, then fours, then
  // all eight, one multiply each.
  static std::uint64_t eight_digits(std::uint64_t w) noexcept {
    w = (w * 10 + (w >> 8)) & 0x00FF00FF00FF00FFull;
    w = (w * 100 + (w >> 16)) & 0x0000FFFF0000FFFFull;
    return (w * 10000 + (w >> 32)) & 0xFFFFFFFFull;
  }

  // A number with a fraction or an exponent, or an integer of 20 digits or more, from its start again.
  [[gnu::noinline]] bool rare_number(const char* start, const char* digits, Number& out) noexcept {
    const bool negative = *start == '-';
    p_ = const_cast<char*>(digits);
    std::uint64_t v = 0;
    bool overflow = false;
    while (is_digit(*p_)) {
      overflow |= __builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, static_cast<unsigned>(*p_ - '0'), &v);
      ++p_;
    }
    bool integer = true;
    if (*p_ == '.') {
      integer = false;
      ++p_;
      if (!is_digit(*p_)) return fail(simdjson::NUMBER_ERROR);
      while (is_digit(*p_)) ++p_;
    }
    if (*p_ == 'e' || *p_ == 'E') {
      integer = false;
      ++p_;
      if (*p_ == '+' || *p_ == '-') ++p_;
      if (!is_digit(*p_)) return fail(simdjson::NUMBER_ERROR);
      while (is_digit(*p_)) ++p_;
    }
    // As simdjson: an integer beyond 64 bits (signed when negative) or a number beyond the range of a
    // double is an error.
    if (integer && (overflow || (negative && v > std::uint64_t{1} << 63))) return fail(simdjson::NUMBER_ERROR);
    if (!integer && !finite_double(start, p_)) return fail(simdjson::NUMBER_ERROR);
    if (!ends_token()) return fail(simdjson::NUMBER_ERROR);
    out.kind = integer && !negative ? Number::kUnsigned : Number::kOther;
    out.value = v;
    return true;
  }

  // Rare (the header's numbers are integers), so a copy and strtod in the C locale are fine.
  static bool finite_double(const char* begin, const char* end) {
    static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", locale_t{});
    const std::string token(begin, end);
    const double d = strtod_l(token.c_str(), nullptr, c_locale);
    return d <= 1.7976931348623157e308 && d >= -1.7976931348623157e308;
  }

  bool open(char c) noexcept {
    if (peek() != c) return fail(simdjson::TAPE_ERROR);
    if (++depth_ > max_depth_) return fail(simdjson::DEPTH_ERROR);
    ++p_;
    first_ = true;
    return true;
  }
  // After '{' or '[' (first_) or after a value: the closing bracket, or a comma (none before the first).
  bool next_item(char close, bool& more) noexcept {
    const char c = peek();
    if (c == close) {
      ++p_;
      --depth_;
      more = false;
      first_ = false;
      return true;
    }
    if (first_) {
      first_ = false;
    } else {
      if (c != ',') return fail(simdjson::TAPE_ERROR);
      ++p_;
    }
    more = true;
    if (close == '}' ? peek() == '}' : peek() == ']') return fail(simdjson::TAPE_ERROR);  // trailing comma
    return true;
  }

  bool literal(const char* word, simdjson::error_code e) noexcept {
    const std::size_t n = std::strlen(word);
    if (std::memcmp(p_, word, n) != 0) return fail(e);
    p_ += n;
    return ends_token() || fail(e);
  }
  // Whether a number or literal ends here: at a structural character, whitespace or the end.
  bool ends_token() const noexcept {
    const char c = *p_;
    return p_ == end_ || is_space(c) || c == ',' || c == ':' || c == ']' || c == '}' || c == '[' || c == '{';
  }

  static int hex(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  bool read_u4(unsigned& v) noexcept {
    v = 0;
    for (int i = 0; i < 4; ++i) {
      const int h = hex(p_[i]);
      if (h < 0) return fail(simdjson::STRING_ERROR);
      v = v << 4 | static_cast<unsigned>(h);
    }
    p_ += 4;
    return true;
  }

  // The slow path of string(): p_ is at the first '\\' or control byte or the closing '"' past the end.
  bool unescape(char* start, std::string_view& out) noexcept {
    char* w = p_;
    for (;;) {
      if (p_ >= end_) return fail(simdjson::UNCLOSED_STRING);
      const char c = *p_;
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) return fail(simdjson::UNESCAPED_CHARS);
      if (c != '\\') {
        *w++ = *p_++;
        continue;
      }
      ++p_;
      const char e = *p_++;
      switch (e) {
        case '"':
        case '\\':
        case '/': *w++ = e; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        case 'u': {
          unsigned cp = 0;
          if (!read_u4(cp)) return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(simdjson::STRING_ERROR);
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned low = 0;
            if (p_[0] != '\\' || p_[1] != 'u') return fail(simdjson::STRING_ERROR);
            p_ += 2;
            if (!read_u4(low)) return false;
            if (low < 0xDC00 || low > 0xDFFF) return fail(simdjson::STRING_ERROR);
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          w = put_utf8(w, cp);
          break;
        }
        default: return fail(simdjson::STRING_ERROR);
      }
    }
    out = std::string_view(start, static_cast<std::size_t>(w - start));
    ++p_;
    return true;
  }
  static char* put_utf8(char* w, unsigned cp) noexcept {
    if (cp < 0x80) {
      *w++ = static_cast<char>(cp);
    } else if (cp < 0x800) {
      *w++ = static_cast<char>(0xC0 | cp >> 6);
      *w++ = static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *w++ = static_cast<char>(0xE0 | cp >> 12);
      *w++ = static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      *w++ = static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *w++ = static_cast<char>(0xF0 | cp >> 18);
      *w++ = static_cast<char>(0x80 | (cp >> 12 & 0x3F));
      *w++ = static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      *w++ = static_cast<char>(0x80 | (cp & 0x3F));
    }
    return w;
  }

  char* p_;
  char* const begin_;
  char* const end_;
  int max_depth_;
  int depth_ = 0;
  bool first_ = false;
  bool negative_zero_ = false;
  simdjson::error_code error_ = simdjson::SUCCESS;
};

}  // namespace safeweights::json
