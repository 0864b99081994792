// Shared pieces of the _safeweights extension module: error translation, the buffer object that hands
// zero-copy views of a mapping to numpy and torch, and the per-area registration functions.
//
// Every binding follows one pattern: convert Python arguments while holding the GIL, release the GIL
// around the library call (I/O, parsing, copying), and translate a failed Status into the Python
// exception class the package defines (see safeweights/_errors.py), with the error's stable kind,
// file, entry, tensor and byte offset as attributes.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <vector>
#include <tuple>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "safeweights/error.h"
#include "safeweights/format.h"
#include "safeweights/loader.h"
#include "safeweights/safetensors.h"
#include "safeweights/source.h"

namespace safeweights::python {

namespace py = pybind11;

// Which family of Python exceptions a failure belongs to.
enum class Domain {
  Safetensors,  // SafetensorError
  DDUFRead,     // DDUFCorruptedFileError (BadZipFile kinds also derive from zipfile.BadZipFile)
  DDUFExport,   // DDUFExportError
};

// The family for errors met reading a file of the registry format `format`: a DDUF archive raises the
// hub's DDUF classes whatever the kind (huggingface_hub's reader raises DDUFCorruptedFileError for any
// fault, a member's included); every other format raises SafetensorError. The error's kind cannot decide
// it: the ZIP kinds come from PyTorch archives too, and the safetensors kinds from DDUF members.
Domain read_domain(const Format& format);

// Raises the Python exception for `error` (the GIL must be held). `prefix` is prepended to the
// message, as the reference does ("Error while deserializing header: ").
[[noreturn]] void raise_error(const Error& error, Domain domain, std::string_view prefix = {});
// A SafetensorError with a plain message.
[[noreturn]] void raise_safetensor_error(const std::string& message);

// Runs fn (a library call: I/O, parsing, copying) with the GIL released and returns its result.
template <typename F>
auto without_gil(F&& fn) {
  py::gil_scoped_release nogil;
  return fn();
}

// Returns the value of a Result or raises.
template <typename T>
T value_or_raise(Result<T>&& result, Domain domain, std::string_view prefix = {}) {
  if (!result.is_ok()) raise_error(result.error(), domain, prefix);
  return std::move(result).value();
}
inline void ok_or_raise(const Status& status, Domain domain, std::string_view prefix = {}) {
  if (!status.is_ok()) raise_error(status.error(), domain, prefix);
}

// The whole of a mapped source as a one-dimensional byte buffer, for numpy.frombuffer /
// torch.frombuffer / memoryview. Holding it keeps the mapping alive. `writable` exports a writable
// buffer, allowed only over a copy-on-write mapping (FileBackend::MmapPrivate).
struct MappedBuffer {
  SourcePtr source;
  bool writable = false;
};

// A Python bytes-like object's memory, exported as one C-contiguous read-only block for as long as
// the returned pointer lives: the exporter keeps it alive and unmovable (a bytearray cannot be
// resized while exported). A strided buffer (memoryview[::2], a transposed array) raises BufferError
// instead of being read as if it were contiguous. The last reference may be dropped on any thread;
// the export is released with the GIL held.
class HeldBuffer {
 public:
  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(view_.buf), static_cast<std::size_t>(view_.len)}; }

 private:
  friend std::shared_ptr<const HeldBuffer> hold_buffer(const py::handle& object);
  Py_buffer view_{};
};
std::shared_ptr<const HeldBuffer> hold_buffer(const py::handle& object);

// A safe_open handle (_SafeFile) over an opened reader; writable_views only for copy-on-write maps.
py::object make_safe_file(safetensors::Reader reader, bool writable_views);

// A path argument as open() takes it (str, bytes or os.PathLike), encoded for the file system. Raises
// ValueError("embedded null byte") as open() does, TypeError for other types.
std::string path_arg(const py::handle& path);
// A str that becomes (or looks up) a tensor name, entry name, metadata key or value, as UTF-8. Raises
// TypeError for a non-str and ValueError naming `what` for a str with no UTF-8 form (a lone surrogate).
std::string utf8_arg(const py::handle& text, std::string_view what);

// Opens a local path, or an http(s):// URL (not mapped: tensors are then read into owned memory).
Result<SourcePtr> open_input(const std::string& path_or_url, FileBackend backend);

void register_errors(py::module_& m);
void register_safetensors(py::module_& m);
void register_formats(py::module_& m);
void register_convert(py::module_& m);
void register_dduf(py::module_& m);
void register_quant(py::module_& m);

// A LoadPlan (safeweights/loader.h) and what keeps its entries' sources alive: the Python class
// _LoadPlan, made by _SafeFile.plan_load and _TensorSet.plan_load.
struct PyLoadPlan {
  std::shared_ptr<const void> keepalive;
  LoadPlan plan;
};
// A plan for `entries`, optionally tensor-parallel (dim, rank, world); raises on a bad shard.
PyLoadPlan make_load_plan(std::shared_ptr<const void> keepalive, std::vector<TensorEntry> entries,
                          const std::optional<std::tuple<unsigned, std::uint64_t, std::uint64_t>>& shard, unsigned threads);

void register_loading(py::module_& m);

}  // namespace safeweights::python
