// convert() for Python: open_tensors -> convert, as the CLI's `convert` does, without the GIL.
#include <algorithm>
#include <cctype>
#include <string>

#include <pybind11/stl.h>

#include "bindings.h"
#include "safeweights/convert.h"
#include "safeweights/format.h"
#include "safeweights/gguf.h"

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

// llama-quantize's file type and knobs, from formats.convert()'s keywords (a dict; docs/PYTHON.md).
QuantizeMix mix_arg(const std::string& file_type, const py::dict& knobs) {
  QuantizeMix mix;
  mix.file_type = file_type;
  const auto text = [&](const char* key) { return knobs.contains(key) && !knobs[key].is_none() ? utf8_arg(knobs[key], key) : std::string(); };
  if (std::string t = text("output_tensor_type"); !t.empty()) mix.output_tensor_type = type_arg(t);
  if (std::string t = text("token_embedding_type"); !t.empty()) mix.token_embedding_type = type_arg(t);
  if (knobs.contains("tensor_types"))
    for (const auto& item : knobs["tensor_types"].cast<std::vector<std::pair<std::string, std::string>>>())
      mix.tensor_types.emplace_back(item.first, type_arg(item.second));
  if (knobs.contains("tensor_type_files"))  // after tensor_types, each file's entries in turn
    for (const py::handle path : knobs["tensor_type_files"].cast<py::list>())
      for (auto& entry : value_or_raise(gguf::read_tensor_type_file(path_arg(path)), Domain::Safetensors))
        mix.tensor_types.push_back(std::move(entry));
  if (knobs.contains("prune_layers")) {  // ints, read as the CLI's --prune-layers list
    std::string list;
    for (const long layer : knobs["prune_layers"].cast<std::vector<long>>()) list += (list.empty() ? "" : ",") + std::to_string(layer);
    mix.prune_layers = value_or_raise(gguf::parse_prune_layers(list), Domain::Safetensors);
  }
  mix.pure = knobs.contains("pure") && knobs["pure"].cast<bool>();
  mix.leave_output_tensor = knobs.contains("leave_output_tensor") && knobs["leave_output_tensor"].cast<bool>();
  mix.allow_requantize = knobs.contains("allow_requantize") && knobs["allow_requantize"].cast<bool>();
  if (knobs.contains("imatrix") && !knobs["imatrix"].is_none()) mix.imatrix = path_arg(knobs["imatrix"]);
  if (knobs.contains("include_weights")) mix.include_weights = knobs["include_weights"].cast<std::vector<std::string>>();
  if (knobs.contains("exclude_weights")) mix.exclude_weights = knobs["exclude_weights"].cast<std::vector<std::string>>();
  if (knobs.contains("override_kv"))
    for (const std::string& spec : knobs["override_kv"].cast<std::vector<std::string>>())
      mix.override_kv.push_back(value_or_raise(gguf::parse_kv_override(spec), Domain::Safetensors));
  return mix;
}

// `type`: a tensor type's name, but for llama-quantize's file types: all of them when one of its knobs
// is given, else those not among plain_type_names() (IQ4_XS is the file type, q4_k every tensor Q4_K).
void set_type(ConvertOptions& options, const std::string& name, const py::dict& knobs) {
  std::string lower = name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto plain = plain_type_names();
  const bool offered = std::find(plain.begin(), plain.end(), lower) != plain.end();
  if (knobs.empty() && (offered || !gguf::is_llama_file_type(name))) {
    try {
      options.type = type_arg(name);
      return;
    } catch (const py::value_error&) {
      if (!gguf::is_llama_file_type(name)) throw py::value_error("unknown tensor type `" + name + "`, and not a llama-quantize file type either");
    }
  }
  if (!gguf::is_llama_file_type(name)) throw py::value_error("llama-quantize's options need a file type (Q4_K_M, ...) as type, not `" + name + "`");
  options.mix = mix_arg(name, knobs);
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
         bool allow_unknown, const py::object& key, const py::object& llama_version, std::uint32_t max_position_embeddings, bool instruct,
         const py::dict& mix, bool dry_run, bool keep_split) {
        const std::string input = path_arg(input_object), output = path_arg(output_object);
        FormatOptions read;
        read.resolver = caching_resolver();
        read.allow_unknown = allow_unknown;
        if (!key.is_none()) read.checkpoint_key = utf8_arg(key, "checkpoint key");
        if (!llama_version.is_none()) read.original.llama_version = utf8_arg(llama_version, "llama version");
        if (max_position_embeddings != 0) read.original.max_position_embeddings = max_position_embeddings;
        read.original.instruct = instruct;
        ConvertOptions options;
        if (!type.is_none())
          set_type(options, utf8_arg(type, "type"), mix);
        else if (!mix.empty())
          throw py::value_error("llama-quantize's options need a file type (Q4_K_M, ...) as type");
        if (!to.is_none()) options.to = utf8_arg(to, "format name");
        const std::string member = entry.is_none() ? std::string() : utf8_arg(entry, "entry name");
        options.threads = threads;
        options.dedup = dedup;
        options.carry_metadata = carry_metadata;
        options.write.durable = durable;
        options.write.split = {split_max_bytes, split_max_tensors};
        options.dry_run = dry_run;
        options.keep_split = keep_split;
        auto report = without_gil([&] { return convert_path(input, output, options, read, member); });
        return report_dict(value_or_raise(std::move(report), Domain::Safetensors));
      },
      py::arg("input"), py::arg("output"), py::arg("type") = py::none(), py::arg("to") = py::none(), py::arg("entry") = py::none(),
      py::arg("threads") = 0, py::arg("dedup") = false, py::arg("durable") = false, py::arg("carry_metadata") = true, py::arg("split_max_bytes") = 0,
      py::arg("split_max_tensors") = 0, py::arg("allow_unknown") = false, py::arg("key") = py::none(), py::arg("llama_version") = py::none(),
      py::arg("max_position_embeddings") = 0, py::arg("instruct") = false, py::arg("mix") = py::dict(), py::arg("dry_run") = false,
      py::arg("keep_split") = false, "open_tensors(input) -> convert() into output; the report as a dict.");
}

}  // namespace safeweights::python
