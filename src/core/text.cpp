#include "safeweights/text.h"

#include <cstdarg>
#include <cstdio>
#include <utility>

#include "core/utf8.h"

namespace safeweights {
namespace {

// The length of the valid UTF-8 sequence starting at s[i], or 0 when the byte there starts none.
std::size_t utf8_length_at(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (len == 1) return 1;
  if (len == 0 || i + len > s.size() || !is_valid_utf8(s.substr(i, len))) return 0;
  return len;
}

// Each byte that does not start a valid UTF-8 sequence becomes U+FFFD.
std::string repair_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    if (const std::size_t len = utf8_length_at(s, i)) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

}  // namespace

std::string json_quote(std::string_view s) {
  std::string out;
  if (is_valid_utf8(s)) {
    append_json_string(out, s);
  } else {
    append_json_string(out, repair_utf8(s));
  }
  return out;
}

std::string printable(std::string_view s, LineBreaks line_breaks) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t len = utf8_length_at(s, i);
    if (len == 0 || (len == 1 && (c < 0x20 || c == 0x7F) && !(c == '\n' && line_breaks == LineBreaks::Keep))) {
      append_format(out, "\\x%02x", c);
      ++i;
    } else if (len == 2 && c == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0) {  // U+0080..U+009F
      append_format(out, "\\u{%02x}", static_cast<unsigned char>(s[i + 1]));            // C2 xx is U+00xx
      i += 2;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::string error_json(const Error& error) {
  JsonWriter w;
  w.object().key("kind").string(error.kind_name());
  if (error.rule() != ErrorRule::Unspecified) w.key("rule").string(error_rule_code(error.rule()));
  w.key("message").string(error.message());
  const ErrorContext& ctx = error.context();
  // The file the error is in: a shard or split sibling of the file asked about, as to_string() says.
  if (!ctx.file.empty()) w.key("file").string(ctx.file);
  if (!ctx.entry.empty()) w.key("entry").string(ctx.entry);
  if (!ctx.tensor.empty()) w.key("tensor").string(ctx.tensor);
  if (ctx.offset) w.key("offset").uint(*ctx.offset);
  return std::move(w.end().text());
}

std::string human_bytes(std::uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024.0 && unit < 6) {
    v /= 1024.0;
    ++unit;
  }
  char buf[32];
  if (unit == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[unit]);
  return buf;
}

void append_format(std::string& out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  if (n > 0) {
    const std::size_t at = out.size();
    out.resize(at + static_cast<std::size_t>(n) + 1);
    std::vsnprintf(out.data() + at, static_cast<std::size_t>(n) + 1, format, again);
    out.resize(at + static_cast<std::size_t>(n));
  }
  va_end(again);
}

std::string shape_string(std::span<const std::uint64_t> shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

}  // namespace safeweights
