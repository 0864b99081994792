// Bindings for safetensors: the file handle behind safe_open, and the reference's low-level API
// (TensorSpec, serialize, serialize_file, deserialize).
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "dtype_names.h"
#include "safeweights/tensor_type.h"
#include "safeweights/safetensors.h"
#include "safeweights/safetensors_writer.h"
#include "safeweights/slice.h"

namespace safeweights::python {
namespace {

constexpr std::string_view kHeaderPrefix = "Error while deserializing header: ";

// An open safetensors file. close() drops the handle's reference; arrays already handed out keep the
// mapping alive through their MappedBuffer. All methods may be called from any thread.
class SafeFile {
 public:
  SafeFile(safetensors::Reader reader, bool writable_views)
      : reader_(std::make_shared<const safetensors::Reader>(std::move(reader))), writable_views_(writable_views) {}

  std::shared_ptr<const safetensors::Reader> reader() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (!reader_) raise_safetensor_error("File is closed");
    return reader_;
  }
  void close() {
    std::shared_ptr<const safetensors::Reader> dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      dropped = std::move(reader_);
    }
    // The last reference may unmap; do that without the GIL.
    py::gil_scoped_release nogil;
    dropped.reset();
  }
  bool closed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reader_ == nullptr;
  }
  bool writable_views() const { return writable_views_; }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const safetensors::Reader> reader_;
  bool writable_views_;
};

const safetensors::TensorInfo& find_tensor(const safetensors::Reader& reader, const std::string& name) {
  const safetensors::TensorInfo* info = reader.header().find(name);
  if (info == nullptr) raise_safetensor_error("File does not contain tensor " + name);
  return *info;
}

py::list shape_list(std::span<const std::uint64_t> shape) {
  py::list out(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) out[i] = py::int_(shape[i]);
  return out;
}

py::tuple info_tuple(const safetensors::Reader& reader, const safetensors::TensorInfo& info) {
  return py::make_tuple(std::string(type_name(info.dtype)), shape_list(info.shape), py::int_(reader.header().data_start() + info.begin),
                        py::int_(info.nbytes()));
}

// A bytearray of n bytes, not zero-filled (it is about to be overwritten).
py::bytearray new_bytearray(std::uint64_t n) {
  if (n > static_cast<std::uint64_t>(PY_SSIZE_T_MAX)) throw std::bad_alloc();
  PyObject* o = PyByteArray_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(n));
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::bytearray>(o);
}
std::span<std::byte> bytearray_span(py::bytearray& b) {
  return {reinterpret_cast<std::byte*>(PyByteArray_AS_STRING(b.ptr())), static_cast<std::size_t>(PyByteArray_GET_SIZE(b.ptr()))};
}

std::unique_ptr<SafeFile> open_reader(SourcePtr source, bool writable) {
  Result<safetensors::Reader> reader = [&] {
    py::gil_scoped_release nogil;
    return safetensors::Reader::open(std::move(source));
  }();
  return std::make_unique<SafeFile>(value_or_raise(std::move(reader), Domain::Safetensors, kHeaderPrefix), writable);
}

// Slice items as the Python layer sends them: ("i", index) | ("s", start, stop, step) | ("e",) | ("n",).
SliceSpec slice_spec_from(const py::sequence& items) {
  SliceSpec spec;
  for (const py::handle item : items) {
    auto t = py::reinterpret_borrow<py::tuple>(item);
    const std::string tag = t[0].cast<std::string>();
    auto opt = [&](std::size_t i) -> std::optional<std::int64_t> {
      if (t[i].is_none()) return std::nullopt;
      return t[i].cast<std::int64_t>();
    };
    if (tag == "i")
      spec.items.push_back(SliceItem::at(t[1].cast<std::int64_t>()));
    else if (tag == "s")
      spec.items.push_back(SliceItem::range(opt(1), opt(2), opt(3)));
    else if (tag == "e")
      spec.items.push_back(SliceItem::ellipsis());
    else if (tag == "n")
      spec.items.push_back(SliceItem::new_axis());
    else
      throw py::value_error("bad slice item tag");
  }
  return spec;
}

// ---- low-level API -----------------------------------------------------------------------------

struct TensorSpec {
  TensorType dtype;
  std::vector<std::uint64_t> shape;
  std::uintptr_t data_ptr;
  std::uint64_t data_len;
};

std::string supported_dtype_names() {
  std::vector<std::string_view> names;
  for (const PythonDtypeName& d : kPythonDtypeNames)
    for (std::string_view n : {d.numpy, d.torch})
      if (!n.empty() && std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  std::string out;
  for (std::string_view n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

TensorSpec make_tensor_spec(const std::string& dtype_name_in, const std::vector<std::uint64_t>& shape, std::uintptr_t data_ptr,
                            std::uint64_t data_len) {
  std::optional<TensorType> dtype = type_from_numpy_name(dtype_name_in);
  if (!dtype) dtype = type_from_torch_name(dtype_name_in);
  if (!dtype) raise_safetensor_error("Unknown dtype \"" + dtype_name_in + "\". Supported dtypes: " + supported_dtype_names());
  TensorSpec spec{*dtype, shape, data_ptr, data_len};
  // torch stores float4 packed two to a byte and reports the packed shape; the file holds the logical
  // element count.
  if (dtype_name_in == "float4_e2m1fn_x2" && !spec.shape.empty()) {
    std::uint64_t& last = spec.shape.back();
    if (last > UINT64_MAX / 2) raise_safetensor_error("Error while serializing: ValidationOverflow");
    last *= 2;
  }
  return spec;
}

struct SerializeInput {
  std::vector<std::string> names;
  std::vector<safetensors::TensorData> tensors;
  std::optional<MetadataEntries> metadata;
};

SerializeInput serialize_input(const py::dict& tensor_dict, const std::optional<py::dict>& metadata) {
  SerializeInput in;
  in.tensors.reserve(tensor_dict.size());
  for (auto [key, value] : tensor_dict) {
    if (!py::isinstance<TensorSpec>(value))
      throw py::type_error("serialize expects a dict of str -> TensorSpec, got " + std::string(py::str(py::type::of(value).attr("__name__"))) +
                           " for key " + std::string(py::repr(key)));
    const auto& spec = value.cast<const TensorSpec&>();
    in.tensors.push_back({utf8_arg(key, "tensor name"),
                          spec.dtype,
                          spec.shape,
                          {reinterpret_cast<const std::byte*>(spec.data_ptr), static_cast<std::size_t>(spec.data_len)}});
  }
  if (metadata) {
    safetensors::MetadataEntries entries;
    for (auto [k, v] : *metadata) {
      if (!py::isinstance<py::str>(k) || !py::isinstance<py::str>(v)) throw py::type_error("metadata must be a dict of str -> str");
      entries.emplace_back(utf8_arg(k, "metadata key"), utf8_arg(v, "metadata value"));
    }
    in.metadata = std::move(entries);
  }
  return in;
}

}  // namespace

py::object make_safe_file(safetensors::Reader reader, bool writable_views) {
  return py::cast(std::make_unique<SafeFile>(std::move(reader), writable_views));
}

namespace {

using SafeFileClass = py::class_<SafeFile>;

// Opening: a path (mapped, or read with pread) or a caller's buffer.
void define_opening(SafeFileClass& c) {
  c.def_static(
       "open",
       [](const py::handle& filename, const std::string& backend) {
         const std::string path = path_arg(filename);
         const FileBackend b = backend == "pread" ? FileBackend::Pread : FileBackend::MmapPrivate;
         Result<SourcePtr> source = [&] {
           py::gil_scoped_release nogil;
           return open_input(path, b);
         }();
         return open_reader(value_or_raise(std::move(source), Domain::Safetensors, kHeaderPrefix), b != FileBackend::Pread);
       },
       py::arg("filename"), py::arg("backend"))
      .def_static(
          "from_buffer",
          [](py::object data) {
            auto held = hold_buffer(data);
            SourcePtr source = memory_source(held->bytes(), "<bytes>", held);
            // Views of caller memory are read-only: the caller may share those bytes.
            return open_reader(std::move(source), false);
          },
          py::arg("data"));
}

// What the header says: names, metadata, each tensor's type, shape and place.
void define_header_queries(SafeFileClass& c) {
  c.def("keys",
        [](const SafeFile& f) {
          auto r = f.reader();
          std::vector<std::string_view> names;
          names.reserve(r->header().tensors().size());
          for (const auto& t : r->header().tensors()) names.push_back(t.name);
          std::sort(names.begin(), names.end());
          py::list out(names.size());
          for (std::size_t i = 0; i < names.size(); ++i) out[i] = py::str(names[i].data(), names[i].size());
          return out;
        })
      .def("offset_keys",
           [](const SafeFile& f) {
             auto r = f.reader();
             py::list out(r->header().tensors().size());
             std::size_t i = 0;
             for (const auto& t : r->header().tensors()) out[i++] = py::str(t.name.data(), t.name.size());
             return out;
           })
      .def("metadata",
           [](const SafeFile& f) -> py::object {
             auto r = f.reader();
             if (!r->header().has_metadata()) return py::none();
             py::dict out;
             for (const auto& [k, v] : r->header().metadata()) out[py::str(k)] = py::str(v);
             return out;
           })
      .def(
          "contains", [](const SafeFile& f, const py::handle& name) { return f.reader()->header().find(utf8_arg(name, "tensor name")) != nullptr; },
          py::arg("name"))
      .def(
          "info",
          [](const SafeFile& f, const py::handle& name) {
            auto r = f.reader();
            return info_tuple(*r, find_tensor(*r, utf8_arg(name, "tensor name")));
          },
          py::arg("name"), "(dtype code, shape, absolute byte offset, byte length)")
      .def(
          "infos",
          [](const SafeFile& f) {
            auto r = f.reader();
            py::list out(r->header().tensors().size());
            std::size_t i = 0;
            for (const auto& t : r->header().tensors()) {
              out[i++] = py::make_tuple(py::str(t.name.data(), t.name.size()), std::string(type_name(t.dtype)), shape_list(t.shape),
                                        py::int_(r->header().data_start() + t.begin), py::int_(t.nbytes()));
            }
            return out;
          },
          "(name, dtype code, shape, absolute byte offset, byte length) for every tensor, in file order")
      .def("data_range", [](const SafeFile& f) {
        auto r = f.reader();
        return py::make_tuple(r->header().data_start(), r->header().data_size());
      });
}

// The bytes: the mapping itself, copies of a tensor or a slice, read-ahead.
void define_reads(SafeFileClass& c) {
  c.def(
       "buffer",
       [](const SafeFile& f, bool writable) -> py::object {
         auto r = f.reader();
         if (r->source().mapped() == nullptr) return py::none();
         if (writable && !f.writable_views()) return py::none();
         return py::cast(MappedBuffer{r->source_ptr(), writable});
       },
       py::arg("writable") = false,
       "The whole file as a zero-copy buffer when it is mapped, else None. writable=True only for "
       "copy-on-write mappings (else None).")
      .def(
          "read",
          [](const SafeFile& f, const py::handle& name) {
            auto r = f.reader();
            const auto& info = find_tensor(*r, utf8_arg(name, "tensor name"));
            py::bytearray out = new_bytearray(info.nbytes());
            auto dst = bytearray_span(out);
            // The source's error as it is (an IoError naming only the file raises OSError), not
            // TensorEntry::read's, which adds the tensor.
            const TensorEntry entry = r->entry(info);
            ok_or_raise(without_gil([&] { return entry.source->read_at(entry.offset, dst); }), Domain::Safetensors);
            return out;
          },
          py::arg("name"), "A copy of the tensor's bytes (GIL released while reading).")
      .def(
          "read_slice",
          [](const SafeFile& f, const py::handle& name_arg, const py::sequence& items) {
            auto r = f.reader();
            const std::string name = utf8_arg(name_arg, "tensor name");
            const auto& info = find_tensor(*r, name);
            SliceSpec spec = slice_spec_from(items);
            const TensorEntry entry = r->entry(info);
            Result<SlicePlan> plan = entry.plan_slice(spec);
            if (!plan.is_ok()) plan.error().with_tensor(name);
            SlicePlan p = value_or_raise(std::move(plan), Domain::Safetensors);
            py::bytearray out = new_bytearray(p.nbytes());
            auto dst = bytearray_span(out);
            ok_or_raise(without_gil([&] { return entry.read_slice(p, dst); }), Domain::Safetensors);
            return py::make_tuple(shape_list(p.shape()), out);
          },
          py::arg("name"), py::arg("items"), "(result shape, bytearray) reading only the bytes the slice needs.")
      .def(
          "populate",
          [](const SafeFile& f, std::uint64_t offset, std::uint64_t length) {
            auto r = f.reader();
            py::gil_scoped_release nogil;
            r->source().hint({offset, length}, AccessHint::WillNeed);
          },
          py::arg("offset"), py::arg("length"), "Fault in a range of a mapped file ahead of use (GIL released).");
}

// The file's name, load plans over it, and closing it.
void define_loads_and_lifetime(SafeFileClass& c) {
  c.def_property_readonly("name", [](const SafeFile& f) { return f.reader()->name(); })
      .def(
          "plan_load",
          [](const SafeFile& f, const std::optional<std::vector<std::string>>& names,
             const std::optional<std::tuple<unsigned, std::uint64_t, std::uint64_t>>& shard, unsigned threads) {
            std::shared_ptr<const safetensors::Reader> r = f.reader();
            std::vector<TensorEntry> entries;
            if (names) {
              for (const std::string& n : *names) entries.push_back(r->entry(find_tensor(*r, n)));
            } else {
              for (const safetensors::TensorInfo& info : r->header().tensors()) entries.push_back(r->entry(info));
            }
            return make_load_plan(r, std::move(entries), shard, threads);
          },
          py::arg("names") = py::none(), py::arg("shard") = py::none(), py::arg("threads") = 0,
          "A _LoadPlan for the named tensors (all, in file order, by default).")
      .def("close", &SafeFile::close)
      .def_property_readonly("closed", &SafeFile::closed);
}

// The reference's low-level API (0.8 form): TensorSpec, serialize, serialize_file, deserialize.
void register_low_level_api(py::module_& m) {
  py::class_<TensorSpec>(m, "TensorSpec",
                         "A tensor to serialize: dtype name (numpy/torch spelling), shape, and the address and "
                         "length of its little-endian, C-order bytes. The caller keeps the memory alive until "
                         "serialize/serialize_file returns.")
      .def(py::init(&make_tensor_spec), py::kw_only(), py::arg("dtype"), py::arg("shape"), py::arg("data_ptr"), py::arg("data_len"))
      .def_property_readonly("dtype", [](const TensorSpec& s) { return std::string(type_name(s.dtype)); })
      .def_property_readonly("shape", [](const TensorSpec& s) { return s.shape; })
      .def_property_readonly("data_ptr", [](const TensorSpec& s) { return s.data_ptr; })
      .def_property_readonly("data_len", [](const TensorSpec& s) { return s.data_len; })
      .def("__repr__", [](const TensorSpec& s) {
        // Plain string building: no iostream, so no std::locale in the module's hot paths.
        std::string o = "TensorSpec(dtype='";
        o += type_name(s.dtype);
        o += "', shape=[";
        for (std::size_t i = 0; i < s.shape.size(); ++i) {
          if (i) o += ", ";
          o += std::to_string(s.shape[i]);
        }
        o += "], data_ptr=" + std::to_string(s.data_ptr) + ", data_len=" + std::to_string(s.data_len) + ")";
        return o;
      });

  m.def(
      "serialize",
      [](const py::dict& tensor_dict, std::optional<py::dict> metadata) {
        SerializeInput in = serialize_input(tensor_dict, metadata);
        safetensors::Layout plan = value_or_raise(safetensors::plan_data(in.tensors, in.metadata), Domain::Safetensors, "Error while serializing: ");
        if (plan.file_size() > static_cast<std::uint64_t>(PY_SSIZE_T_MAX)) throw std::bad_alloc();
        PyObject* raw = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(plan.file_size()));
        if (raw == nullptr) throw py::error_already_set();
        py::bytes out = py::reinterpret_steal<py::bytes>(raw);
        auto* dst = reinterpret_cast<std::byte*>(PyBytes_AS_STRING(raw));
        {
          py::gil_scoped_release nogil;
          safetensors::serialize_into(plan, in.tensors, std::span<std::byte>(dst, static_cast<std::size_t>(plan.file_size())));
        }
        return out;
      },
      py::arg("tensor_dict"), py::arg("metadata") = py::none(),
      "The safetensors file for these tensors, as bytes, byte-identical to the reference (GIL released while copying).");

  m.def(
      "serialize_file",
      [](const py::dict& tensor_dict, py::object filename, std::optional<py::dict> metadata) {
        SerializeInput in = serialize_input(tensor_dict, metadata);
        const std::string path = path_arg(filename);
        Status s;
        {
          py::gil_scoped_release nogil;
          s = safetensors::write_file(path, in.tensors, in.metadata);
        }
        ok_or_raise(s, Domain::Safetensors, "Error while serializing: ");
      },
      py::arg("tensor_dict"), py::arg("filename"), py::arg("metadata") = py::none(),
      "Writes the file atomically (temporary file + rename); the GIL is released while writing.");

  m.def(
      "deserialize",
      [](py::object data) {
        auto held = hold_buffer(data);
        Result<safetensors::Reader> reader = without_gil([&] { return safetensors::Reader::open(memory_source(held->bytes(), "<bytes>")); });
        auto r = value_or_raise(std::move(reader), Domain::Safetensors, "Error while deserializing: ");
        py::list out;
        for (const auto& t : r.header().tensors()) {
          py::dict d;
          d["shape"] = shape_list(t.shape);
          d["dtype"] = std::string(type_name(t.dtype));
          auto view = r.entry(t).view();
          d["data"] = py::bytearray(reinterpret_cast<const char*>(view.data()), view.size());
          out.append(py::make_tuple(py::str(t.name.data(), t.name.size()), d));
        }
        return out;
      },
      py::arg("bytes"), "[(name, {shape, dtype, data: bytearray})] in file order (copies, as the reference).");
}

}  // namespace

void register_safetensors(py::module_& m) {
  SafeFileClass safe_file(m, "_SafeFile", "An open safetensors file (internal; use safeweights.safe_open).");
  define_opening(safe_file);
  define_header_queries(safe_file);
  define_reads(safe_file);
  define_loads_and_lifetime(safe_file);
  register_low_level_api(m);

  m.def("_dtype_table", [] {
    py::list out;
    for (const PythonDtypeName& d : kPythonDtypeNames)
      out.append(py::make_tuple(std::string(safetensors::type_code(d.type)), type_bits(d.type), std::string(d.numpy), std::string(d.torch)));
    return out;
  });
}

}  // namespace safeweights::python
