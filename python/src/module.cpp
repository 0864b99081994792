// The _safeweights extension module: the native half of the safeweights Python package. The public API
// (safe_open, safeweights.numpy, safeweights.torch, safeweights.dduf) is written in Python on top of it.
#include "bindings.h"
#include "safeweights/cancel.h"
#include "safeweights/http.h"

namespace safeweights::python {
namespace {

// The thread Python runs signal handlers on (set once, at import).
unsigned long main_thread = 0;

// The cancellation poll (safeweights/cancel.h): library calls run with the GIL released, so Python
// cannot run its SIGINT handler until they return. On the main thread only (where Python runs signal
// handlers, and where taking the GIL cannot deadlock against a caller waiting for this work), take
// the GIL and run the pending handlers. When one raises (KeyboardInterrupt), the exception stays set
// on this thread and the operation stops with Interrupted; raise_error() then re-raises it as is.
// PyGILState_Ensure also works when this thread already holds the GIL (a call that did not release it).
bool poll_python_signals() noexcept {
  if (PyThread_get_thread_ident() != main_thread || !Py_IsInitialized()) return false;
  const PyGILState_STATE gil = PyGILState_Ensure();
  const bool stop = PyErr_Occurred() != nullptr || PyErr_CheckSignals() != 0;
  PyGILState_Release(gil);
  return stop;
}

void install_cancel_poll() {
  // The interpreter's main thread; without `threading` imported yet, no other thread can have
  // imported this module.
  py::object threading = py::module_::import("sys").attr("modules").attr("get")("threading");
  main_thread = threading.is_none() ? PyThread_get_thread_ident() : threading.attr("main_thread")().attr("ident").cast<unsigned long>();
  set_cancel_poll(poll_python_signals);
}

}  // namespace

Result<SourcePtr> open_input(const std::string& path_or_url, FileBackend backend) {
  // URLs are read with Range requests (HF_TOKEN is sent to huggingface.co over https only; see http.h).
  std::string warning;
  HttpOptions options;
  options.warn = [&](const std::string& message) { warning = message; };
  Result<SourcePtr> source = open_source(path_or_url, backend, options);
  if (!warning.empty()) {
    py::gil_scoped_acquire gil;  // also when the caller holds it
    if (PyErr_WarnEx(PyExc_UserWarning, warning.c_str(), 1) != 0) {
      // Warnings turned into errors: the pending exception is what raise_error() raises.
      return Error(ErrorKind::InvalidArgument, warning).with_file(path_or_url);
    }
  }
  return source;
}

std::shared_ptr<const HeldBuffer> hold_buffer(const py::handle& object) {
  auto* held = new HeldBuffer;
  if (PyObject_GetBuffer(object.ptr(), &held->view_, PyBUF_C_CONTIGUOUS) != 0) {
    delete held;
    throw py::error_already_set();
  }
  return std::shared_ptr<const HeldBuffer>(held, [](const HeldBuffer* p) {
    if (!Py_IsInitialized()) return;  // interpreter gone: leak rather than touch a dead runtime
    py::gil_scoped_acquire gil;
    PyBuffer_Release(&const_cast<HeldBuffer*>(p)->view_);
    delete p;
  });
}

}  // namespace safeweights::python

PYBIND11_MODULE(_safeweights, m) {
  namespace py = pybind11;
  using safeweights::python::MappedBuffer;
  m.doc() = "Native core of safeweights (internal: import safeweights instead).";
  m.attr("__version__") = SAFEWEIGHTS_VERSION;

  py::class_<MappedBuffer>(m, "_MappedBuffer", py::buffer_protocol(), "A zero-copy byte buffer over a mapped file; keeps the mapping alive.")
      .def_buffer([](MappedBuffer& b) {
        auto size = static_cast<py::ssize_t>(b.source->size());
        return py::buffer_info(const_cast<std::byte*>(b.source->mapped()), 1, py::format_descriptor<std::uint8_t>::format(), 1, {size},
                               {static_cast<py::ssize_t>(1)}, !b.writable);
      })
      .def("__len__", [](const MappedBuffer& b) { return b.source->size(); })
      .def_property_readonly("writable", [](const MappedBuffer& b) { return b.writable; });

  // The source registry's question (safeweights/http.h): the Python layer tests no name's prefix.
  m.def(
      "_is_remote", [](const std::string& name) { return safeweights::is_url(name); }, py::arg("name"),
      "Whether `name` is a remote name (http(s)://, s3://, gs://, hf://), as the library reads it.");

  safeweights::python::install_cancel_poll();
  safeweights::python::register_errors(m);
  safeweights::python::register_safetensors(m);
  safeweights::python::register_dduf(m);
  safeweights::python::register_formats(m);
  safeweights::python::register_convert(m);
  safeweights::python::register_loading(m);
  safeweights::python::register_quant(m);
}
