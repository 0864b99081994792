// widen_numbers (hf/json_read.h): numbers of any size in a Hugging Face JSON file.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "hf/hf_files.h"
#include "hf/json_read.h"
#include "io/read_util.h"

namespace safeweights::hf {
namespace {

bool is_number_byte(char c) { return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'; }

// Whether `digits` (no sign, no leading zeros) is at most `limit`, both decimal.
bool at_most(std::string_view digits, std::string_view limit) {
  if (digits.size() != limit.size()) return digits.size() < limit.size();
  return digits <= limit;
}

// Whether the integer token `t` fits the parser's int64 or uint64.
bool fits_64_bits(std::string_view t) {
  if (t.starts_with('-')) return at_most(t.substr(1), "9223372036854775808");
  return at_most(t, "18446744073709551615");
}

// Whether a well-formed number token overflows a double (strtod: HUGE_VAL with ERANGE).
bool overflows_double(const std::string& t) {
  errno = 0;
  const double v = std::strtod(t.c_str(), nullptr);
  return errno == ERANGE && std::isinf(v);
}

// A JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. Only such tokens are rewritten.
bool well_formed(std::string_view t, bool& integer) {
  std::size_t i = 0;
  auto digits = [&] {
    const std::size_t start = i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
    return i - start;
  };
  if (i < t.size() && t[i] == '-') ++i;
  const std::size_t first = i;
  const std::size_t n = digits();
  if (n == 0 || (n > 1 && t[first] == '0')) return false;
  integer = i == t.size();
  if (i < t.size() && t[i] == '.') {
    ++i;
    if (digits() == 0) return false;
  }
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == t.size();
}

}  // namespace

Result<bool> has_model_file(const Folder& folder, std::string_view name) {
  const auto& entries = folder.entries();
  auto it = std::lower_bound(entries.begin(), entries.end(), name, [](const FolderEntry& e, std::string_view n) { return e.name < n; });
  if (it == entries.end() || it->name != name) return false;
  if (it->is_folder) return Error(ErrorKind::InvalidModelFolder, "is a folder, not a file").with_file(folder.path_of(name));
  return true;
}

Result<std::string> read_model_file(const Folder& folder, std::string_view name, std::uint64_t cap) {
  const std::string path = folder.path_of(name);
  SW_ASSIGN_OR_RETURN(bool present, has_model_file(folder, name));
  if (!present) return Error(ErrorKind::FileNotFound, "no such file in the folder").with_file(path);
  SW_ASSIGN_OR_RETURN(SourcePtr source, folder.open_file(name));
  auto bytes = read_small(*source, cap);
  if (!bytes.is_ok()) return error_of(bytes).with_file(path);
  return bytes;
}

std::size_t widen_numbers(std::string& text) {
  std::string out;
  std::size_t copied = 0;  // text[0, copied) is in `out` (only once something was rewritten)
  std::size_t rewritten = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    if (c != '-' && (c < '0' || c > '9')) continue;
    std::size_t end = i;
    while (end < text.size() && is_number_byte(text[end])) ++end;
    const std::string token = text.substr(i, end - i);
    bool integer = false;
    std::string replacement;
    if (well_formed(token, integer)) {
      if (overflows_double(token)) {
        replacement = "\"" + token + "\"";
      } else if (integer && !fits_64_bits(token)) {
        replacement = token + ".0";
      }
    }
    if (!replacement.empty()) {
      out.append(text, copied, i - copied);
      out += replacement;
      copied = end;
      ++rewritten;
    }
    i = end - 1;
  }
  if (rewritten != 0) {
    out.append(text, copied, std::string::npos);
    text = std::move(out);
  }
  return rewritten;
}

}  // namespace safeweights::hf
