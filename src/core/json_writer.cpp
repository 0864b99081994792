// JsonWriter (safeweights/text.h): the one writer of the JSON documents the library and the CLI print.
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "safeweights/text.h"

namespace safeweights {

void JsonWriter::before_value() {
  // After a key the value follows its colon; in an array (or at the top) values are separated by commas.
  if (!open_.empty() && open_.back() == '{') {
    assert(!out_.empty() && out_.back() == ':');  // a value in an object comes after its key
    first_ = false;
    return;
  }
  if (!first_) out_.push_back(',');
  first_ = false;
}

JsonWriter& JsonWriter::open(char bracket) {
  before_value();
  out_.push_back(bracket);
  open_.push_back(bracket);
  first_ = true;
  return *this;
}

JsonWriter& JsonWriter::object() { return open('{'); }

JsonWriter& JsonWriter::array() { return open('['); }

JsonWriter& JsonWriter::end() {
  assert(!open_.empty());
  out_.push_back(open_.back() == '{' ? '}' : ']');
  open_.pop_back();
  first_ = false;
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view name) {
  assert(!open_.empty() && open_.back() == '{');
  if (!first_) out_.push_back(',');
  out_ += json_quote(name);
  out_.push_back(':');
  first_ = true;  // the value that follows takes no comma
  return *this;
}

JsonWriter& JsonWriter::string(std::string_view value) {
  before_value();
  out_ += json_quote(value);
  return *this;
}

JsonWriter& JsonWriter::uint(std::uint64_t value) {
  before_value();
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  out_.append(buf, r.ptr);
  return *this;
}

JsonWriter& JsonWriter::boolean(bool value) {
  before_value();
  out_ += value ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::null() {
  before_value();
  out_ += "null";
  return *this;
}

JsonWriter& JsonWriter::number(double value) {
  if (!std::isfinite(value)) return null();
  before_value();
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  out_.append(buf, r.ptr);
  return *this;
}

JsonWriter& JsonWriter::fixed(double value, int decimals) {
  if (!std::isfinite(value)) return null();
  before_value();
  const int n = std::snprintf(nullptr, 0, "%.*f", decimals, value);  // the largest double has 309 digits
  const std::size_t at = out_.size();
  out_.resize(at + static_cast<std::size_t>(n) + 1);
  std::snprintf(out_.data() + at, static_cast<std::size_t>(n) + 1, "%.*f", decimals, value);
  out_.pop_back();  // snprintf's terminating NUL
  return *this;
}

JsonWriter& JsonWriter::raw(std::string_view json) {
  before_value();
  out_ += json;
  return *this;
}

JsonWriter& JsonWriter::uints(std::span<const std::uint64_t> values) {
  array();
  for (std::uint64_t v : values) uint(v);
  return end();
}

}  // namespace safeweights
