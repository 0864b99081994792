// Loading through the library's loaders (safeweights/loader.h, safeweights/device.h): a _LoadPlan made
// from an open safetensors handle or from any tensor file the format registry opens, loaded into
// memory the caller's framework allocated (a torch tensor's data_ptr, on the CPU or a CUDA device).
#include <pybind11/stl.h>

#include <map>
#include <mutex>
#include <optional>

#include "bindings.h"
#include "safeweights/device.h"
#include "safeweights/format.h"

namespace safeweights::python {
namespace {

// One Device per CUDA device number for the life of the process (its streams and its cache of pinned
// staging buffers are reused by every load).
std::shared_ptr<Device> cuda_device(int index) {
  static std::mutex mu;
  static std::map<int, std::shared_ptr<Device>> devices;
  std::lock_guard<std::mutex> lock(mu);
  auto& d = devices[index];
  if (!d) d = value_or_raise(Device::open("cuda:" + std::to_string(index)), Domain::Safetensors);
  return d;
}

py::dict stats_dict(const DeviceLoadStats& s) {
  py::dict d;
  d["strategy"] = std::string(strategy_name(s.strategy));
  d["file_read_bytes"] = s.file_read_bytes;
  d["staged_bytes"] = s.staged_bytes;
  d["registered_bytes"] = s.registered_bytes;
  d["direct"] = s.direct;
  return d;
}

// Every tensor of a file any registered format opens (safetensors, sharded index, GGUF, PyTorch
// checkpoints), for loading.
class TensorSet {
 public:
  explicit TensorSet(std::shared_ptr<const TensorFile> file) : file_(std::move(file)) {}
  const TensorFile& file() const { return *file_; }
  std::shared_ptr<const void> keepalive() const { return file_; }

 private:
  std::shared_ptr<const TensorFile> file_;
};

}  // namespace

PyLoadPlan make_load_plan(std::shared_ptr<const void> keepalive, std::vector<TensorEntry> entries,
                          const std::optional<std::tuple<unsigned, std::uint64_t, std::uint64_t>>& shard, unsigned threads) {
  LoaderOptions options;
  options.threads = threads;
  if (shard) options.shard = TensorShard{std::get<0>(*shard), std::get<1>(*shard), std::get<2>(*shard)};
  auto plan = without_gil([&] { return LoadPlan::make(entries, options); });
  return PyLoadPlan{std::move(keepalive), value_or_raise(std::move(plan), Domain::Safetensors)};
}

std::vector<TensorEntry> select_entries(const TensorFile& file, const std::optional<std::vector<std::string>>& names) {
  if (!names) return {file.tensors().begin(), file.tensors().end()};
  std::vector<TensorEntry> out;
  out.reserve(names->size());
  for (const std::string& n : *names) {
    const TensorEntry* e = file.find(n);
    if (e == nullptr) raise_safetensor_error("File does not contain tensor " + n);
    out.push_back(*e);
  }
  return out;
}

void register_loading(py::module_& m) {
  py::class_<PyLoadPlan>(m, "_LoadPlan", "Where each tensor of a load goes (internal; see safeweights.torch).")
      .def_property_readonly("size", [](const PyLoadPlan& p) { return p.plan.size(); })
      .def_property_readonly("read_bytes", [](const PyLoadPlan& p) { return p.plan.read_bytes(); })
      .def("tensors",
           [](const PyLoadPlan& p) {
             // (name, dtype code, shape, contiguous strides in elements, offset, nbytes): what
             // Tensor.as_strided needs, computed here rather than per tensor in Python.
             py::list out(p.plan.tensors().size());
             std::size_t i = 0;
             for (const PlacedTensor& t : p.plan.tensors()) {
               py::tuple shape(t.shape.size()), strides(t.shape.size());
               std::uint64_t step = 1;
               for (std::size_t d = t.shape.size(); d-- > 0;) {
                 shape[d] = py::int_(t.shape[d]);
                 strides[d] = py::int_(step);
                 step *= t.shape[d];
               }
               out[i++] = py::make_tuple(std::string(t.entry.name), std::string(type_name(t.entry.type)), shape, strides, t.offset, t.nbytes);
             }
             return out;
           })
      .def(
          "load_into",
          [](const PyLoadPlan& p, std::uintptr_t address, std::uint64_t size) {
            if (size != p.plan.size()) throw py::value_error("destination size does not match the plan");
            Status s = without_gil([&] { return load_into(p.plan, {reinterpret_cast<std::byte*>(address), static_cast<std::size_t>(size)}); });
            ok_or_raise(s, Domain::Safetensors);
          },
          py::arg("address"), py::arg("size"), "Loads into host memory at address (size bytes, the plan's size).")
      .def(
          "load_device",
          [](const PyLoadPlan& p, std::uintptr_t address, std::uint64_t size, int device) {
            std::shared_ptr<Device> d = cuda_device(device);
            auto stats = without_gil([&] { return load_to_device(p.plan, *d, reinterpret_cast<void*>(address), size); });
            return stats_dict(value_or_raise(std::move(stats), Domain::Safetensors));
          },
          py::arg("address"), py::arg("size"), py::arg("device"), "Loads into CUDA device memory at address (size bytes) on device number `device`.");

  py::class_<TensorSet>(m, "_TensorSet", "The tensors of any supported file (internal; see safeweights.torch.load_tensors).")
      .def_static(
          "open",
          [](const std::string& path, bool allow_unknown, const py::object& key) {
            FormatOptions options;
            options.allow_unknown = allow_unknown;
            if (!key.is_none()) options.checkpoint_key = utf8_arg(key, "checkpoint key");
            auto file = without_gil([&]() -> Result<std::unique_ptr<TensorFile>> {
              auto format = detect_format(path, options);
              if (!format.is_ok()) return std::move(format).status();
              return (*format)->open(path, {}, options);
            });
            return TensorSet(std::shared_ptr<const TensorFile>(value_or_raise(std::move(file), Domain::Safetensors)));
          },
          py::arg("path"), py::arg("allow_unknown") = false, py::arg("key") = py::none())
      .def("keys",
           [](const TensorSet& s) {
             py::list out;
             for (const TensorEntry& e : s.file().tensors()) out.append(std::string(e.name));
             return out;
           })
      .def("format", [](const TensorSet& s) { return std::string(s.file().format()); })
      .def(
          "plan_load",
          [](const TensorSet& s, const std::optional<std::vector<std::string>>& names,
             const std::optional<std::tuple<unsigned, std::uint64_t, std::uint64_t>>& shard,
             unsigned threads) { return make_load_plan(s.keepalive(), select_entries(s.file(), names), shard, threads); },
          py::arg("names") = py::none(), py::arg("shard") = py::none(), py::arg("threads") = 0);
}

}  // namespace safeweights::python
