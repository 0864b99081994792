// Small string and path helpers shared by the library. Internal.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace safeweights {

// `s` without the leading and trailing characters that appear in `chars` (spaces and tabs unless told).
inline std::string_view trim(std::string_view s, std::string_view chars = " \t") {
  const auto first = s.find_first_not_of(chars);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(chars) - first + 1);
}

// The folder part of a path as open() would resolve it: "." for a bare name, "/" for a file at the root.
inline std::string folder_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace safeweights
