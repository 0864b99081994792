// Conversions of Python arguments that reach the file system or a file's contents: each kind of
// argument has one conversion, so every binding refuses the same inputs with the same error.
#include "bindings.h"

namespace safeweights::python {

std::string path_arg(const py::handle& path) {
  // PyUnicode_FSConverter is what open() uses: str (in the file system encoding, surrogateescape
  // included), bytes or os.PathLike, and ValueError("embedded null byte") for a NUL the C library
  // would silently cut the path at.
  PyObject* raw = nullptr;
  if (PyUnicode_FSConverter(path.ptr(), &raw) == 0) throw py::error_already_set();
  auto bytes = py::reinterpret_steal<py::bytes>(raw);
  return std::string(PyBytes_AS_STRING(raw), static_cast<std::size_t>(PyBytes_GET_SIZE(raw)));
}

std::string utf8_arg(const py::handle& text, std::string_view what) {
  if (!PyUnicode_Check(text.ptr()))
    throw py::type_error(std::string(what) + " must be str, not " + std::string(py::str(py::type::of(text).attr("__name__"))));
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(text.ptr(), &size);
  if (utf8 == nullptr) {
    // A lone surrogate (e.g. from os.fsdecode of undecodable bytes) has no UTF-8 form; the file
    // formats store names, keys and metadata as UTF-8 only. Chain the codec's error for the position.
    py::error_already_set cause;
    std::string shown = py::repr(text);
    if (shown.size() > 80) {  // a long value is not worth repeating whole; cut between characters
      std::size_t cut = 80;
      while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80) --cut;
      shown = shown.substr(0, cut) + "...";
    }
    py::raise_from(
        cause, PyExc_ValueError,
        (std::string(what) + " " + shown + " is not valid UTF-8 (it holds a lone surrogate): names, keys and metadata must be valid UTF-8").c_str());
    throw py::error_already_set();
  }
  return std::string(utf8, static_cast<std::size_t>(size));
}

}  // namespace safeweights::python
