#include "json/json_writer.h"

#include <cassert>
#include <charconv>

#include "safeweights/text.h"

namespace safeweights::json {

void append_uint(std::string& out, std::uint64_t value) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  (void)ec;
  out.append(buf, end);
}

void Writer::before_value() {
  // After a key the value follows its colon; in an array (or at the top) values are separated by commas.
  if (!open_.empty() && open_.back() == '{') {
    assert(!out_.empty() && out_.back() == ':');  // a value in an object comes after its key
    first_ = false;
    return;
  }
  if (!first_) out_.push_back(',');
  first_ = false;
}

Writer& Writer::object() {
  before_value();
  out_.push_back('{');
  open_.push_back('{');
  first_ = true;
  return *this;
}

Writer& Writer::array() {
  before_value();
  out_.push_back('[');
  open_.push_back('[');
  first_ = true;
  return *this;
}

Writer& Writer::end() {
  assert(!open_.empty());
  out_.push_back(open_.back() == '{' ? '}' : ']');
  open_.pop_back();
  first_ = false;
  return *this;
}

Writer& Writer::key(std::string_view name) {
  assert(!open_.empty() && open_.back() == '{');
  if (!first_) out_.push_back(',');
  out_ += json_quote(name);
  out_.push_back(':');
  first_ = true;  // the value that follows takes no comma
  return *this;
}

Writer& Writer::string(std::string_view value) {
  before_value();
  out_ += json_quote(value);
  return *this;
}

Writer& Writer::uint(std::uint64_t value) {
  before_value();
  append_uint(out_, value);
  return *this;
}

Writer& Writer::boolean(bool value) {
  before_value();
  out_ += value ? "true" : "false";
  return *this;
}

Writer& Writer::null() {
  before_value();
  out_ += "null";
  return *this;
}

Writer& Writer::raw(std::string_view json) {
  before_value();
  out_ += json;
  return *this;
}

Writer& Writer::uints(std::span<const std::uint64_t> values) {
  array();
  for (std::uint64_t v : values) uint(v);
  return end();
}

}  // namespace safeweights::json
