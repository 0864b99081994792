#include "safeweights/error.h"

#include <array>

namespace safeweights {
namespace {

struct KindEntry {
  std::size_t value;
  std::string_view name;
  std::string_view description;
};

constexpr std::array kKinds = {
#define SAFEWEIGHTS_X(name, value, doc) KindEntry{value, #name, doc},
    SAFEWEIGHTS_ERROR_KINDS(SAFEWEIGHTS_X)
#undef SAFEWEIGHTS_X
};

struct RuleEntry {
  std::size_t value;
  std::string_view code;
  std::string_view description;
};

constexpr std::array kRules = {
#define SAFEWEIGHTS_X(name, value, code, doc) RuleEntry{value, code, doc},
    SAFEWEIGHTS_ERROR_RULES(SAFEWEIGHTS_X)
#undef SAFEWEIGHTS_X
};

// The tables are indexed by value: the values must be 0, 1, 2, ... in the order they are listed.
template <class Table>
constexpr bool indexed_by_value(const Table& table) {
  for (std::size_t i = 0; i < table.size(); ++i)
    if (table[i].value != i) return false;
  return true;
}
static_assert(indexed_by_value(kKinds), "ErrorKind values must be 0, 1, 2, ... in list order");
static_assert(indexed_by_value(kRules), "ErrorRule values must be 0, 1, 2, ... in list order");

}  // namespace

std::string_view error_rule_code(ErrorRule rule) noexcept {
  auto i = static_cast<std::size_t>(rule);
  return i < kRules.size() ? kRules[i].code : std::string_view();
}

std::string_view error_rule_description(ErrorRule rule) noexcept {
  auto i = static_cast<std::size_t>(rule);
  return i < kRules.size() ? kRules[i].description : std::string_view();
}

std::optional<ErrorRule> error_rule_from_code(std::string_view code) noexcept {
  for (std::size_t i = 1; i < kRules.size(); ++i) {
    if (kRules[i].code == code) return static_cast<ErrorRule>(i);
  }
  return std::nullopt;
}

std::string_view error_kind_name(ErrorKind kind) noexcept {
  auto i = static_cast<std::size_t>(kind);
  return i < kKinds.size() ? kKinds[i].name : std::string_view("Unknown");
}

std::string_view error_kind_description(ErrorKind kind) noexcept {
  auto i = static_cast<std::size_t>(kind);
  return i < kKinds.size() ? kKinds[i].description : std::string_view();
}

std::optional<ErrorKind> error_kind_from_name(std::string_view name) noexcept {
  for (std::size_t i = 0; i < kKinds.size(); ++i) {
    if (kKinds[i].name == name) return static_cast<ErrorKind>(i);
  }
  return std::nullopt;
}

Error& Error::with_file(std::string_view file) & {
  if (context_.file.empty()) context_.file = file;
  return *this;
}
Error& Error::with_entry(std::string_view entry) & {
  if (context_.entry.empty()) context_.entry = entry;
  return *this;
}
Error& Error::with_tensor(std::string_view tensor) & {
  if (context_.tensor.empty()) context_.tensor = tensor;
  return *this;
}
Error& Error::with_rule(ErrorRule rule) & {
  if (rule_ == ErrorRule::Unspecified) rule_ = rule;
  return *this;
}
Error& Error::with_offset(std::uint64_t offset) & {
  if (!context_.offset) context_.offset = offset;
  return *this;
}

std::string Error::to_string() const {
  std::string out;
  if (!context_.file.empty()) {
    out += context_.file;
    if (!context_.entry.empty()) {
      out += "!";
      out += context_.entry;
    }
    out += ": ";
  }
  out += kind_name();
  out += ": ";
  out += message_;
  std::string where;
  if (!context_.tensor.empty()) {
    where += "tensor `";
    where += context_.tensor;
    where += '`';
  }
  if (context_.offset) {
    if (!where.empty()) where += ", ";
    where += "byte offset ";
    where += std::to_string(*context_.offset);
  }
  if (!where.empty()) {
    out += " (";
    out += where;
    out += ')';
  }
  return out;
}

}  // namespace safeweights
