// convert() for Python: open_tensors -> convert, as the CLI's `convert` does, without the GIL.
#include <cctype>
#include <string>

#include <pybind11/stl.h>

#include "bindings.h"
#include "safeweights/convert.h"
#include "safeweights/format.h"

namespace safeweights::python {
namespace {

// "q8_0", "Q8_0", "f16": a type's canonical name in any case.
TensorType type_arg(const std::string& name) {
  for (const TensorTypeInfo& info : tensor_type_table()) {
    if (info.name.size() != name.size()) continue;
    bool same = true;
    for (std::size_t i = 0; i < name.size() && same; ++i)
      same = std::toupper(static_cast<unsigned char>(name[i])) == static_cast<unsigned char>(info.name[i]);
    if (same) return info.type;
  }
  throw py::value_error("unknown tensor type `" + name + "`");
}

py::dict report_dict(const ConvertReport& report) {
  py::list tensors;
  for (const ConvertedTensor& t : report.tensors) {
    py::dict d;
    d["name"] = t.name;
    d["from"] = std::string(type_name(t.from));
    d["to"] = std::string(type_name(t.to));
    d["note"] = t.note;
    tensors.append(d);
  }
  py::dict out;
  out["tensors"] = tensors;
  out["bytes_written"] = report.bytes_written;
  out["files"] = report.files;
  out["notes"] = report.notes;
  return out;
}

}  // namespace

void register_convert(py::module_& m) {
  m.def(
      "_convert",
      [](const py::handle& input_object, const py::handle& output_object, const py::object& type, const py::object& to, const py::object& entry,
         unsigned threads, bool dedup, bool durable, bool carry_metadata, std::uint64_t split_max_bytes, std::uint64_t split_max_tensors,
         bool allow_unknown, const py::object& key, const py::object& llama_version, std::uint32_t max_position_embeddings, bool instruct) {
        const std::string input = path_arg(input_object), output = path_arg(output_object);
        FormatOptions read;
        read.resolver = caching_resolver();
        read.allow_unknown = allow_unknown;
        if (!key.is_none()) read.checkpoint_key = utf8_arg(key, "checkpoint key");
        if (!llama_version.is_none()) read.original.llama_version = utf8_arg(llama_version, "llama version");
        if (max_position_embeddings != 0) read.original.max_position_embeddings = max_position_embeddings;
        read.original.instruct = instruct;
        ConvertOptions options;
        if (!type.is_none()) options.type = type_arg(utf8_arg(type, "type"));
        if (!to.is_none()) options.to = utf8_arg(to, "format name");
        const std::string member = entry.is_none() ? std::string() : utf8_arg(entry, "entry name");
        options.threads = threads;
        options.dedup = dedup;
        options.carry_metadata = carry_metadata;
        options.write.durable = durable;
        options.write.split = {split_max_bytes, split_max_tensors};
        auto report = without_gil([&] { return convert_path(input, output, options, read, member); });
        return report_dict(value_or_raise(std::move(report), Domain::Safetensors));
      },
      py::arg("input"), py::arg("output"), py::arg("type") = py::none(), py::arg("to") = py::none(), py::arg("entry") = py::none(),
      py::arg("threads") = 0, py::arg("dedup") = false, py::arg("durable") = false, py::arg("carry_metadata") = true, py::arg("split_max_bytes") = 0,
      py::arg("split_max_tensors") = 0, py::arg("allow_unknown") = false, py::arg("key") = py::none(), py::arg("llama_version") = py::none(),
      py::arg("max_position_embeddings") = 0, py::arg("instruct") = false, "open_tensors(input) -> convert() into output; the report as a dict.");
}

}  // namespace safeweights::python
