// Bindings for DDUF: the archive handle behind read_dduf_file / DDUFEntry, and the exporter behind
// export_entries_as_dduf / export_folder_as_dduf.
#include <pybind11/stl.h>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "safeweights/dduf.h"

namespace safeweights::python {
namespace {

class DDUFArchive {
 public:
  explicit DDUFArchive(dduf::Reader reader) : reader_(std::make_shared<const dduf::Reader>(std::move(reader))) {}
  const dduf::Reader& reader() const { return *reader_; }
  const std::shared_ptr<const dduf::Reader>& shared() const { return reader_; }

 private:
  std::shared_ptr<const dduf::Reader> reader_;
};

// One export in progress. An exporter that is dropped without finish() leaves nothing behind.
class DDUFExporter {
 public:
  explicit DDUFExporter(dduf::Exporter exporter) : exporter_(std::move(exporter)) {}
  dduf::Exporter& get() {
    if (!exporter_) throw py::value_error("the export is already finished or aborted");
    return *exporter_;
  }
  void abort() {
    py::gil_scoped_release nogil;
    exporter_.reset();
  }

 private:
  std::optional<dduf::Exporter> exporter_;
};

dduf::PackOptions pack_options(std::uint32_t alignment, bool reference_layout) {
  dduf::PackOptions options;
  options.alignment = reference_layout ? 0 : alignment;
  options.reference_layout = reference_layout;
  return options;
}

// The reading side: an open archive, its entries, their bytes and checks.
void register_archive(py::module_& m) {
  py::class_<DDUFArchive>(m, "_DDUFArchive", "An open DDUF archive (internal; use safeweights.dduf.read_dduf_file).")
      .def_static(
          "open",
          [](py::object path) {
            const std::string p = path_arg(path);
            Result<dduf::Reader> reader = [&]() -> Result<dduf::Reader> {
              py::gil_scoped_release nogil;
              Result<SourcePtr> source = open_input(p, FileBackend::MmapPrivate);
              if (!source.is_ok()) return std::move(source).status();
              return dduf::Reader::open(std::move(source).value());
            }();
            return DDUFArchive(value_or_raise(std::move(reader), Domain::DDUFRead));
          },
          py::arg("path"))
      .def(
          "entries",
          [](const DDUFArchive& a) {
            py::list out;
            for (const auto& e : a.reader().entries()) out.append(py::make_tuple(e.filename, e.offset, e.length));
            return out;
          },
          "[(filename, offset, length)] in central-directory order")
      .def(
          "buffer",
          [](const DDUFArchive& a, bool writable) -> py::object {
            const SourcePtr& source = a.reader().archive().source();
            if (source->mapped() == nullptr) return py::none();
            return py::cast(MappedBuffer{source, writable});
          },
          py::arg("writable") = false)
      .def(
          "read",
          [](const DDUFArchive& a, std::uint64_t offset, std::uint64_t length) {
            const SourcePtr& source = a.reader().archive().source();
            ok_or_raise(source->check_range(offset, length), Domain::DDUFRead);
            if (length > static_cast<std::uint64_t>(PY_SSIZE_T_MAX)) throw std::bad_alloc();
            PyObject* raw = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(length));
            if (raw == nullptr) throw py::error_already_set();
            py::bytes out = py::reinterpret_steal<py::bytes>(raw);
            std::span<std::byte> dst(reinterpret_cast<std::byte*>(PyBytes_AS_STRING(raw)), static_cast<std::size_t>(length));
            Status s = without_gil([&] { return source->read_at(offset, dst); });
            ok_or_raise(s, Domain::DDUFRead);
            return out;
          },
          py::arg("offset"), py::arg("length"))
      .def(
          "open_safetensors",
          [](const DDUFArchive& a, const py::handle& name_arg) {
            const std::string name = utf8_arg(name_arg, "entry name");
            Result<safetensors::Reader> reader = [&] {
              py::gil_scoped_release nogil;
              return a.reader().open_safetensors(name);
            }();
            if (!reader.is_ok() && reader.error().kind() == ErrorKind::InvalidArgument) raise_error(reader.error(), Domain::DDUFRead);
            return make_safe_file(value_or_raise(std::move(reader), Domain::Safetensors, "Error while deserializing header: "), true);
          },
          py::arg("name"), "A .safetensors entry as a safe_open handle, zero-copy.")
      .def(
          "verify",
          [](const DDUFArchive& a, bool crc, bool contents) {
            dduf::VerifyOptions options;
            options.crc = crc;
            options.contents = contents;
            Status s = without_gil([&] { return a.reader().verify(options); });
            ok_or_raise(s, Domain::DDUFRead);
          },
          py::arg("crc") = true, py::arg("contents") = true)
      .def_property_readonly("name", [](const DDUFArchive& a) { return a.reader().name(); })
      .def_property_readonly("model_index", [](const DDUFArchive& a) { return a.reader().model_index(); });
}

// The writing side: an export in progress, entry by entry.
void register_exporter(py::module_& m) {
  py::class_<DDUFExporter>(m, "_DDUFExporter", "A DDUF export in progress (internal).")
      .def_static(
          "create",
          [](py::object path, std::uint32_t alignment, bool reference_layout) {
            const std::string p = path_arg(path);
            Result<dduf::Exporter> ex = [&] {
              py::gil_scoped_release nogil;
              return dduf::Exporter::create(p, pack_options(alignment, reference_layout));
            }();
            return DDUFExporter(value_or_raise(std::move(ex), Domain::DDUFExport));
          },
          py::arg("path"), py::arg("alignment"), py::arg("reference_layout"))
      .def(
          "add_bytes",
          [](DDUFExporter& e, const py::handle& name_arg, py::object data) {
            const std::string name = utf8_arg(name_arg, "entry name");
            auto held = hold_buffer(data);
            dduf::Exporter& ex = e.get();
            ok_or_raise(without_gil([&] { return ex.add_bytes(name, held->bytes()); }), Domain::DDUFExport);
          },
          py::arg("name"), py::arg("data"))
      .def(
          "add_file",
          [](DDUFExporter& e, const py::handle& name_arg, py::object path) {
            const std::string name = utf8_arg(name_arg, "entry name");
            const std::string p = path_arg(path);
            dduf::Exporter& ex = e.get();
            ok_or_raise(without_gil([&] { return ex.add_file(name, p); }), Domain::DDUFExport);
          },
          py::arg("name"), py::arg("path"))
      .def("finish",
           [](DDUFExporter& e) {
             dduf::Exporter& ex = e.get();
             Status s = without_gil([&] { return ex.finish(); });
             e.abort();
             ok_or_raise(s, Domain::DDUFExport);
           })
      .def("abort", &DDUFExporter::abort);
}

// A folder packed in one call, and the entry-name and structure rules the Python side checks early.
void register_folder_and_rules(py::module_& m) {
  m.def(
      "_pack_folder",
      [](py::object folder, py::object path, std::uint32_t alignment, bool reference_layout) {
        const std::string f = path_arg(folder), p = path_arg(path);
        Status s = without_gil([&] { return dduf::pack_folder(f, p, pack_options(alignment, reference_layout)); });
        ok_or_raise(s, Domain::DDUFExport);
      },
      py::arg("folder"), py::arg("path"), py::arg("alignment"), py::arg("reference_layout"));

  m.def(
      "_validate_entry_name",
      [](const py::handle& name) -> py::tuple {
        Result<std::string> r = dduf::validate_entry_name(utf8_arg(name, "entry name"));
        if (r.is_ok()) return py::make_tuple(true, r.value());
        return py::make_tuple(false, r.error().message());
      },
      py::arg("name"), "(True, stripped name) or (False, message)");

  m.def(
      "_validate_structure",
      [](const py::handle& model_index, const py::list& name_args) {
        std::vector<std::string> names;
        names.reserve(name_args.size());
        for (const py::handle name : name_args) names.push_back(utf8_arg(name, "entry name"));
        ok_or_raise(dduf::validate_structure(utf8_arg(model_index, "model_index.json"), names), Domain::DDUFRead);
      },
      py::arg("model_index"), py::arg("names"));
}

}  // namespace

void register_dduf(py::module_& m) {
  register_archive(m);
  register_exporter(m);
  register_folder_and_rules(m);
}

}  // namespace safeweights::python
