// The _safeweights extension module: the native half of the safeweights Python package. The public API
// (safe_open, safeweights.numpy, safeweights.torch, safeweights.dduf) is written in Python on top of it.
#include "bindings.h"
#include "safeweights/http.h"

namespace safeweights::python {

Result<SourcePtr> open_input(const std::string& path_or_url, FileBackend backend) {
  // URLs are read with Range requests (HF_TOKEN is sent to huggingface.co only; see http.h).
  return open_source(path_or_url, backend);
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

  py::class_<MappedBuffer>(m, "_MappedBuffer", py::buffer_protocol(),
                           "A zero-copy byte buffer over a mapped file; keeps the mapping alive.")
      .def_buffer([](MappedBuffer& b) {
        auto size = static_cast<py::ssize_t>(b.source->size());
        return py::buffer_info(const_cast<std::byte*>(b.source->mapped()), 1, py::format_descriptor<std::uint8_t>::format(),
                               1, {size}, {static_cast<py::ssize_t>(1)}, !b.writable);
      })
      .def("__len__", [](const MappedBuffer& b) { return b.source->size(); })
      .def_property_readonly("writable", [](const MappedBuffer& b) { return b.writable; });

  safeweights::python::register_errors(m);
  safeweights::python::register_safetensors(m);
  safeweights::python::register_dduf(m);
  safeweights::python::register_formats(m);
}
