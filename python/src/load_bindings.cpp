// Loading through the library's loaders (safeweights/loader.h, safeweights/device.h): a _LoadPlan made
// from an open safetensors handle or from any tensor file the format registry opens, loaded into
// memory the caller's framework allocated (a torch tensor's data_ptr, on the CPU or a CUDA device).
#include <pybind11/stl.h>

#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "bindings.h"
#include "safeweights/device.h"
#include "safeweights/format.h"
#include "safeweights/group.h"

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

// A GroupTransport over a Python object with `rank`, `size`, `all_gather(bytes) -> bytes` and
// `broadcast(address, length, root)` (safeweights._load.TorchGroup: torch.distributed, each call
// waited on with a deadline). Called from the loader's thread with the GIL released: each call takes
// it. A Python exception becomes the call's error: Timeout for a TimeoutError, else IoError.
class PyGroupTransport final : public GroupTransport {
 public:
  explicit PyGroupTransport(py::object group)
      : group_(std::move(group)), rank_(group_.attr("rank").cast<std::uint64_t>()), size_(group_.attr("size").cast<std::uint64_t>()) {}
  std::uint64_t rank() const override { return rank_; }
  std::uint64_t size() const override { return size_; }

  Status all_gather(std::span<const std::byte> mine, std::span<std::byte> all) override {
    return call([&]() -> Status {
      py::bytes got = group_.attr("all_gather")(py::bytes(reinterpret_cast<const char*>(mine.data()), mine.size()));
      const std::string_view v = got;
      if (v.size() != all.size())
        return Error(ErrorKind::IoError,
                     "process group: all_gather returned " + std::to_string(v.size()) + " bytes, not " + std::to_string(all.size()));
      std::memcpy(all.data(), v.data(), v.size());
      return Status::ok();
    });
  }
  Status broadcast(void* data, std::uint64_t length, std::uint64_t root) override {
    return call([&]() -> Status {
      group_.attr("broadcast")(reinterpret_cast<std::uintptr_t>(data), length, root);
      return Status::ok();
    });
  }

 private:
  template <class F>
  Status call(F&& fn) {
    py::gil_scoped_acquire gil;
    try {
      return fn();
    } catch (py::error_already_set& e) {
      const bool timeout = e.matches(PyExc_TimeoutError);
      return Error(timeout ? ErrorKind::Timeout : ErrorKind::IoError, std::string("process group: ") + e.what());
    }
  }

  py::object group_;
  std::uint64_t rank_, size_;
};

py::dict group_stats_dict(const GroupLoadStats& s) {
  py::dict d;
  d["read_bytes"] = s.read_bytes;
  d["shared_bytes"] = s.shared_bytes;
  d["received_bytes"] = s.received_bytes;
  d["read_seconds"] = s.read_seconds;
  d["exchange_seconds"] = s.exchange_seconds;
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

namespace {

// A load's plan: its tensors' places, and the loads into host or CUDA memory, alone or as one rank of a
// process group.
void register_load_plan(py::module_& m) {
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
          py::arg("address"), py::arg("size"), py::arg("device"), "Loads into CUDA device memory at address (size bytes) on device number `device`.")
      .def(
          "load_into_group",
          [](const PyLoadPlan& p, std::uintptr_t address, std::uint64_t size, py::object group) {
            PyGroupTransport transport(std::move(group));
            auto stats = without_gil([&] {
              return load_into_group(p.plan, {reinterpret_cast<std::byte*>(address), static_cast<std::size_t>(size)}, transport);
            });
            return group_stats_dict(value_or_raise(std::move(stats), Domain::Safetensors));
          },
          py::arg("address"), py::arg("size"), py::arg("group"),
          "A group load (safeweights/group.h) into host memory at address; `group` is the transport (safeweights._load.TorchGroup).")
      .def(
          "load_device_group",
          [](const PyLoadPlan& p, std::uintptr_t address, std::uint64_t size, int device, py::object group) {
            PyGroupTransport transport(std::move(group));
            std::shared_ptr<Device> d = cuda_device(device);
            auto stats = without_gil([&] { return load_to_device_group(p.plan, *d, reinterpret_cast<void*>(address), size, transport); });
            GroupLoadStats s = value_or_raise(std::move(stats), Domain::Safetensors);
            py::dict out = group_stats_dict(s);
            out["device"] = stats_dict(s.device);
            return out;
          },
          py::arg("address"), py::arg("size"), py::arg("device"), py::arg("group"), "A group load into CUDA device memory at address.");
}

// A rank that failed before its plan existed, taking part in the group's first step.
void register_group_fail(py::module_& m) {
  m.def(
      "_group_fail",
      [](py::object group, const std::string& kind, const std::string& message, const std::string& file) {
        PyGroupTransport transport(std::move(group));
        Error why(error_kind_from_name(kind).value_or(ErrorKind::InvalidArgument), message);
        if (!file.empty()) why.with_file(file);
        Status s = without_gil([&] { return fail_group(transport, std::move(why)); });
        (void)s;
      },
      py::arg("group"), py::arg("kind"), py::arg("message"), py::arg("file") = "",
      "For a rank whose group load failed before it could start (its file did not open): takes part in the first step, so that the "
      "other ranks fail instead of waiting.");
}

// The tensors of any supported file, by the registry, and load plans over them.
void register_tensor_set(py::module_& m) {
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

}  // namespace

void register_loading(py::module_& m) {
  register_load_plan(m);
  register_group_fail(m);
  register_tensor_set(m);
}

}  // namespace safeweights::python
