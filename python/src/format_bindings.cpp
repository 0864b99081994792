// The format registry for Python: detect, validate and inspect any file the library reads, without
// the Python layer knowing the formats.
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "bindings.h"
#include "safeweights/format.h"

namespace safeweights::python {
namespace {

const Format& detect_or_raise(const std::string& path, const FormatOptions& options) {
  auto format = without_gil([&] { return detect_format(path, options); });
  return *value_or_raise(std::move(format), Domain::Safetensors);
}

FormatOptions options_for(bool strict, bool crc) {
  FormatOptions options;
  options.strict = strict;
  options.crc = crc;
  options.resolver = caching_resolver();  // detection and reading share one source
  return options;
}

}  // namespace

void register_formats(py::module_& m) {
  m.def(
      "_detect_format", [](const py::handle& path) { return std::string(detect_or_raise(path_arg(path), {}).name()); }, py::arg("path"),
      "The registry name of the file's format, found from its content.");
  m.def(
      "_validate",
      [](const py::handle& path_object, bool strict, bool crc, bool detect) {
        const std::string path = path_arg(path_object);
        const FormatOptions options = options_for(strict, crc);
        const Format& format = detect_or_raise(path, options);
        // As `safeweights validate`: a name that claims another format fails unless detect says to go by
        // content alone; raised as the claimed format's reader would raise it.
        const Format* claimed = format_claimed_by_name(path);
        if (!detect && claimed != nullptr && claimed != &format) {
          raise_error(
              Error(ErrorKind::UnknownFormat, "the name says " + std::string(claimed->name()) + " but the content is " + std::string(format.name()) +
                                                  ": a reader that trusts the name refuses it; rename the file, or pass "
                                                  "detect=True to validate it by its content")
                  .with_file(path),
              read_domain(*claimed));
        }
        auto summary = without_gil([&] { return format.validate(path, options); });
        return py::make_tuple(std::string(format.name()), value_or_raise(std::move(summary), read_domain(format)));
      },
      py::arg("path"), py::arg("strict") = false, py::arg("crc") = true, py::arg("detect") = false,
      "(format, summary) for a valid file; raises the format's error otherwise.");
  m.def(
      "_inspect",
      [](const py::handle& path_object, const py::object& entry) {
        const std::string path = path_arg(path_object);
        const FormatOptions options = options_for(false, true);
        const Format& format = detect_or_raise(path, options);
        std::vector<std::string> members;
        if (!entry.is_none()) members.push_back(utf8_arg(entry, "entry name"));
        auto text = without_gil([&] { return format.inspect(path, members, options, true); });
        return value_or_raise(std::move(text), read_domain(format));
      },
      py::arg("path"), py::arg("entry") = py::none(), "The JSON text `safeweights inspect --json` prints.");
}

}  // namespace safeweights::python
