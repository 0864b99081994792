// Private bindings for element conversion (safeweights/quantize.h): _quantize and _dequantize, which
// tests/python/test_quant_interop.py compares with gguf-py's numpy quantizers. Not public API.
#include <cstring>
#include <string>

#include "bindings.h"
#include "safeweights/quantize.h"

namespace safeweights::python {
namespace {

TensorType type_named(const std::string& name) {
  for (const TensorTypeInfo& info : tensor_type_table())
    if (info.name == name) return info.type;
  throw py::value_error("unknown tensor type `" + name + "`");
}

// A C-contiguous buffer's bytes (the caller keeps `view` alive while they are used).
std::span<const std::byte> bytes_of(const py::buffer& buffer, py::buffer_info& view) {
  view = buffer.request();
  if (view.ndim > 1 && view.strides.back() != view.itemsize) throw py::value_error("the buffer must be C-contiguous");
  return {static_cast<const std::byte*>(view.ptr), static_cast<std::size_t>(view.size * view.itemsize)};
}

}  // namespace

void register_quant(py::module_& m) {
  m.def(
      "_quantize",
      [](const std::string& type_name, const py::buffer& values) {
        const TensorType type = type_named(type_name);
        py::buffer_info view;
        const std::span<const std::byte> raw = bytes_of(values, view);
        if (raw.size() % sizeof(float) != 0) throw py::value_error("float32 input expected");
        std::vector<float> floats(raw.size() / sizeof(float));
        if (!raw.empty()) std::memcpy(floats.data(), raw.data(), raw.size());
        const std::uint64_t shape[1] = {floats.size()};
        auto size = tensor_nbytes(type, shape);  // when it fails, quantize() says why, naming the type
        std::string out(size.is_ok() ? size.value() : 0, '\0');
        const Status status = without_gil([&] { return quantize(type, floats, std::as_writable_bytes(std::span(out.data(), out.size()))); });
        if (!status.is_ok()) raise_error(status.error(), Domain::Safetensors);
        return py::bytes(out);
      },
      py::arg("type"), py::arg("values"), "float32 values -> the bytes of `type` (private; see quantize.h).");
  m.def(
      "_dequantize",
      [](const std::string& type_name, const py::buffer& data, std::size_t count) {
        const TensorType type = type_named(type_name);
        py::buffer_info view;
        const std::span<const std::byte> raw = bytes_of(data, view);
        std::string out(count * sizeof(float), '\0');
        const Status status = without_gil([&] { return dequantize(type, raw, std::span(reinterpret_cast<float*>(out.data()), count)); });
        if (!status.is_ok()) raise_error(status.error(), Domain::Safetensors);
        return py::bytes(out);
      },
      py::arg("type"), py::arg("data"), py::arg("count"), "`count` elements of `type` -> float32 bytes (private; see quantize.h).");
}

}  // namespace safeweights::python
