// safeweights inspect [--json] FILE
#include <cctype>
#include <cstdio>
#include <map>
#include <memory>

#include "cli_common.h"
#include "safeweights/dduf.h"
#include "safeweights/safetensors.h"
#include "safeweights/sharded.h"

namespace safeweights::cli {
namespace {

struct InspectOptions {
  std::string file;
  std::string entry;  // DDUF: a .safetensors entry to inspect
  bool json = false;
  std::string backend = "mmap";
};

std::string tensor_json(const safetensors::TensorInfo& t) {
  std::string out = "{\"name\":" + json_string(t.name) + ",\"dtype\":" + json_string(type_name(t.dtype)) + ",\"shape\":[";
  for (std::size_t i = 0; i < t.shape.size(); ++i) out += (i ? "," : "") + std::to_string(t.shape[i]);
  out += "],\"data_offsets\":[" + std::to_string(t.begin) + "," + std::to_string(t.end) + "]";
  return out;
}

struct Totals {
  std::uint64_t tensors = 0, params = 0, bytes = 0;
};

void print_table(const std::vector<std::pair<const safetensors::TensorInfo*, std::string>>& rows, bool with_shard) {
  std::size_t name_w = 4, shape_w = 5, shard_w = 5;
  for (const auto& [t, shard] : rows) {
    name_w = std::max(name_w, t->name.size());
    shape_w = std::max(shape_w, shape_string(t->shape).size());
    shard_w = std::max(shard_w, shard.size());
  }
  name_w = std::min<std::size_t>(name_w, 80);
  if (with_shard) std::printf("%-*s  ", static_cast<int>(shard_w), "SHARD");
  std::printf("%-*s  %-11s  %-*s  %10s\n", static_cast<int>(name_w), "NAME", "DTYPE", static_cast<int>(shape_w), "SHAPE", "SIZE");
  for (const auto& [t, shard] : rows) {
    if (with_shard) std::printf("%-*s  ", static_cast<int>(shard_w), shard.c_str());
    std::printf("%-*.*s  %-11s  %-*s  %10s\n", static_cast<int>(name_w), static_cast<int>(t->name.size()), t->name.data(),
                std::string(type_name(t->dtype)).c_str(), static_cast<int>(shape_w), shape_string(t->shape).c_str(),
                human_bytes(t->nbytes()).c_str());
  }
  std::map<TensorType, Totals> by_dtype;
  Totals all;
  for (const auto& [t, shard] : rows) {
    auto& d = by_dtype[t->dtype];
    ++d.tensors;
    d.params += t->num_elements();
    d.bytes += t->nbytes();
    ++all.tensors;
    all.params += t->num_elements();
    all.bytes += t->nbytes();
  }
  std::printf("\nTotals by dtype:\n");
  for (const auto& [dtype, tot] : by_dtype) {
    std::printf("  %-11s %8llu tensors  %16llu params  %10s\n", std::string(type_name(dtype)).c_str(),
                static_cast<unsigned long long>(tot.tensors), static_cast<unsigned long long>(tot.params),
                human_bytes(tot.bytes).c_str());
  }
  std::printf("  %-11s %8llu tensors  %16llu params  %10s\n", "all", static_cast<unsigned long long>(all.tensors),
              static_cast<unsigned long long>(all.params), human_bytes(all.bytes).c_str());
}

int inspect_safetensors(const InspectOptions& opt, const safetensors::Reader& reader, const std::string& display) {
  const auto& h = reader.header();
  if (opt.json) {
    std::string out = "{\"format\":\"safetensors\",\"header_size\":" + std::to_string(h.header_size()) + ",\"metadata\":";
    if (!h.has_metadata()) {
      out += "null";
    } else {
      out += "{";
      for (std::size_t i = 0; i < h.metadata().size(); ++i) {
        out += (i ? "," : "") + json_string(h.metadata()[i].first) + ":" + json_string(h.metadata()[i].second);
      }
      out += "}";
    }
    out += ",\"tensors\":[";
    bool first = true;
    for (const auto& t : h.tensors()) {
      out += (first ? "" : ",") + tensor_json(t) + "}";
      first = false;
    }
    out += "]}";
    std::printf("%s\n", out.c_str());
    return kExitOk;
  }
  std::printf("file:        %s\nformat:      safetensors\nheader:      %llu bytes\ntensors:     %zu\ndata:        %s\n",
              display.c_str(), static_cast<unsigned long long>(h.header_size()), h.tensors().size(),
              human_bytes(h.data_size()).c_str());
  if (h.has_metadata()) {
    std::printf("metadata:\n");
    for (const auto& [k, v] : h.metadata()) std::printf("  %s: %s\n", k.c_str(), v.c_str());
  } else {
    std::printf("metadata:    (none)\n");
  }
  std::printf("\n");
  std::vector<std::pair<const safetensors::TensorInfo*, std::string>> rows;
  for (const auto& t : h.tensors()) rows.emplace_back(&t, "");
  print_table(rows, false);
  return kExitOk;
}

int inspect_safetensors_file(const InspectOptions& opt) {
  auto reader = open_safetensors_input(opt.file, parse_backend(opt.backend));
  if (!reader.is_ok()) {
    print_error(reader.error());
    return kExitInvalid;
  }
  return inspect_safetensors(opt, *reader, opt.file);
}

int inspect_dduf(const InspectOptions& opt) {
  auto reader = open_dduf_input(opt.file, parse_backend(opt.backend));
  if (!reader.is_ok()) {
    print_error(reader.error());
    return kExitInvalid;
  }
  if (!opt.entry.empty()) {
    auto st = reader->open_safetensors(opt.entry);
    if (!st.is_ok()) {
      print_error(st.error());
      return kExitInvalid;
    }
    return inspect_safetensors(opt, *st, opt.file + "!" + opt.entry);
  }
  if (opt.json) {
    std::string out = "{\"format\":\"dduf\",\"entries\":[";
    bool first = true;
    for (const auto& e : reader->entries()) {
      out += std::string(first ? "" : ",") + "{\"name\":" + json_string(e.filename) + ",\"offset\":" + std::to_string(e.offset) +
             ",\"length\":" + std::to_string(e.length) + "}";
      first = false;
    }
    // model_index.json was validated as a JSON object; embed it as is, minus surrounding whitespace.
    std::string_view index = reader->model_index();
    while (!index.empty() && std::isspace(static_cast<unsigned char>(index.back()))) index.remove_suffix(1);
    while (!index.empty() && std::isspace(static_cast<unsigned char>(index.front()))) index.remove_prefix(1);
    out += "],\"components\":" + std::string(index) + "}";
    std::printf("%s\n", out.c_str());
    return kExitOk;
  }
  std::uint64_t total = 0;
  std::size_t name_w = 4;
  for (const auto& e : reader->entries()) {
    total += e.length;
    name_w = std::max(name_w, e.filename.size());
  }
  std::printf("file:        %s\nformat:      dduf%s\nentries:     %zu (%s of data)\ncomponents:  ", opt.file.c_str(),
              reader->archive().uses_zip64() ? " (ZIP64)" : "", reader->entries().size(), human_bytes(total).c_str());
  for (std::size_t i = 0; i < reader->components().size(); ++i) std::printf("%s%s", i ? ", " : "", reader->components()[i].c_str());
  std::printf("\n\n%-*s  %14s  %12s  %s\n", static_cast<int>(name_w), "ENTRY", "OFFSET", "SIZE", "ALIGNMENT");
  for (const auto& e : reader->entries()) {
    std::uint64_t align = 1;
    while (align < 4096 && e.offset % (align * 2) == 0) align *= 2;
    std::printf("%-*s  %14llu  %12s  %llu\n", static_cast<int>(name_w), e.filename.c_str(), static_cast<unsigned long long>(e.offset),
                human_bytes(e.length).c_str(), static_cast<unsigned long long>(e.offset == 0 ? 4096 : align));
  }
  return kExitOk;
}

int inspect_index(const InspectOptions& opt) {
  auto reader = open_sharded_input(opt.file, parse_backend(opt.backend));
  if (!reader.is_ok()) {
    print_error(reader.error());
    return kExitInvalid;
  }
  if (opt.json) {
    std::string out = "{\"format\":\"safetensors-index\",\"shards\":[";
    for (std::size_t i = 0; i < reader->shard_files().size(); ++i) out += (i ? "," : "") + json_string(reader->shard_files()[i]);
    out += "],\"metadata\":{";
    bool first = true;
    for (const auto& [k, v] : reader->index_metadata()) {
      out += (first ? "" : ",") + json_string(k) + ":" + json_string(v);
      first = false;
    }
    out += "},\"tensors\":[";
    first = true;
    for (const auto& name : reader->names()) {
      auto loc = reader->find(name);
      out += (first ? "" : ",") + tensor_json(*loc->info) + ",\"shard\":" + json_string(loc->shard->name().substr(loc->shard->name().find_last_of('/') + 1)) + "}";
      first = false;
    }
    out += "]}";
    std::printf("%s\n", out.c_str());
    return kExitOk;
  }
  std::printf("file:        %s\nformat:      safetensors-index\nshards:      %zu\ntensors:     %zu\n", opt.file.c_str(),
              reader->shards().size(), reader->names().size());
  for (const auto& [k, v] : reader->index_metadata()) std::printf("index metadata: %s: %s\n", k.c_str(), v.c_str());
  std::printf("\n");
  std::vector<std::pair<const safetensors::TensorInfo*, std::string>> rows;
  for (const auto& name : reader->names()) {
    auto loc = reader->find(name);
    const std::string& shard = loc->shard->name();
    rows.emplace_back(loc->info, shard.substr(shard.find_last_of('/') + 1));
  }
  print_table(rows, true);
  return kExitOk;
}

}  // namespace

void add_inspect_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show a file's tensors (name, dtype, shape, size), totals by dtype and metadata");
  cmd->add_option("FILE", opt->file, "a safetensors or DDUF file (a path or an http(s):// URL), or *.safetensors.index.json")->required();
  cmd->add_option("ENTRY", opt->entry, "DDUF: a .safetensors entry to inspect as a safetensors file");
  cmd->add_flag("--json", opt->json, "machine-readable: {format, header_size, metadata, tensors: [{name, dtype, shape, data_offsets}]}; DDUF: {format, entries: [{name, offset, length}], components}");
  cmd->add_option("--backend", opt->backend, "how files are read")->check(CLI::IsMember({"mmap", "pread"}));
  add_http_options(cmd);
  cmd->callback([opt, &exit_code] {
    switch (detect_format(opt->file)) {
      case Format::SafetensorsIndex: exit_code = inspect_index(*opt); break;
      case Format::Dduf: exit_code = inspect_dduf(*opt); break;
      default: exit_code = inspect_safetensors_file(*opt); break;
    }
  });
}

}  // namespace safeweights::cli
