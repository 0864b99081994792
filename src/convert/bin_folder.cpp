// A transformers folder of PyTorch weights to safetensors files (convert.h, convert_bin_folder): each
// .bin shard through convert() to the .safetensors file the Hub's conversion names, then the index.
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "core/status_macros.h"
#include "pytorch/index.h"
#include "safeweights/atomic_file.h"
#include "safeweights/convert.h"
#include "safeweights/pytorch.h"
#include "safeweights/text.h"

namespace safeweights {
namespace {

// pytorch_model-00001-of-00002.bin -> model-00001-of-00002.safetensors (what the Hub's conversion names them).
Result<std::string> safetensors_name(const std::string& bin) {
  constexpr std::string_view kPrefix = "pytorch_model", kExt = ".bin";
  SW_RETURN_IF_ERROR(pytorch::check_shard_name(bin));
  std::string out = bin;
  if (out.starts_with(kPrefix)) out = "model" + out.substr(kPrefix.size());
  if (out.ends_with(kExt)) out.resize(out.size() - kExt.size());
  return out + ".safetensors";
}

// transformers' json.dumps(index, indent=2, sort_keys=True).
std::string index_json(const std::map<std::string, std::string>& metadata, const std::map<std::string, std::string>& weight_map) {
  std::string out = "{\n  \"metadata\": {";
  bool first = true;
  for (const auto& [k, v] : metadata) {
    out += std::string(first ? "\n    " : ",\n    ") + json_quote(k) + ": " + (k == "total_size" ? v : json_quote(v));
    first = false;
  }
  out += "\n  },\n  \"weight_map\": {";
  first = true;
  for (const auto& [k, v] : weight_map) {
    out += std::string(first ? "\n    " : ",\n    ") + json_quote(k) + ": " + json_quote(v);
    first = false;
  }
  return out + "\n  }\n}\n";
}

// Removes the files a failed folder conversion committed (added only once committed, so a file that
// was there before and is left untouched by a failed write is never removed), then the folders it
// created (innermost first, each only if empty), unless disarmed.
struct Cleanup {
  std::vector<std::string> files;
  std::vector<std::filesystem::path> created;  // innermost first
  bool armed = true;
  ~Cleanup() {
    if (!armed) return;
    for (const std::string& f : files) std::remove(f.c_str());
    std::error_code ec;
    for (const auto& dir : created)
      if (!std::filesystem::remove(dir, ec)) break;
  }
};

// The folders create_directories(folder) would create, innermost first. The path as given, not its
// lexical normal form: for `out/../x` create_directories makes `out` too.
std::vector<std::filesystem::path> missing_folders(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  std::filesystem::path start = folder;
  while (!start.empty() && !start.has_filename()) start = start.parent_path();  // a trailing '/'
  for (std::filesystem::path p = start; !p.empty() && !std::filesystem::exists(p, ec) && !ec; p = p.parent_path()) {
    if (p.has_filename() && p.filename() != "." && p.filename() != "..") out.push_back(p);  // `x/..` is not made
    if (p == p.parent_path()) break;
  }
  return out;
}

// One checkpoint file to one safetensors file through the pipeline.
Result<ConvertReport> convert_checkpoint(const std::string& input, const std::string& output, const FormatOptions& read,
                                         const ConvertOptions& options, const std::function<void(const TensorFile&)>& opened) {
  SW_ASSIGN_OR_RETURN(std::unique_ptr<pytorch::Checkpoint> checkpoint, pytorch::open_checkpoint(input, read));
  if (opened) opened(*checkpoint);
  return convert(*checkpoint, output, options);
}

}  // namespace

Result<std::vector<std::string>> convert_bin_folder(const std::string& input_folder, const std::string& output_folder, const FormatOptions& read,
                                                    const ConvertOptions& options, const std::function<void(const TensorFile&)>& opened) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!options.plan.tensors.empty() || !options.to.empty() || options.write.split.enabled())
    return Error(ErrorKind::InvalidArgument, "a folder of .bin shards converts to safetensors shards of the same tensors").with_file(input_folder);
  const std::string index_path = input_folder + "/pytorch_model.bin.index.json";
  const std::string single = input_folder + "/pytorch_model.bin";
  const bool sharded = fs::exists(index_path, ec);
  if (!sharded && !fs::exists(single, ec))
    return Error(ErrorKind::FileNotFound, "neither pytorch_model.bin nor pytorch_model.bin.index.json in the folder").with_file(input_folder);
  Cleanup cleanup;
  cleanup.created = missing_folders(output_folder);
  fs::create_directories(output_folder, ec);
  if (ec) return Error(ErrorKind::IoError, "cannot create the output folder: " + ec.message()).with_file(output_folder);
  if (!sharded) {
    SW_RETURN_IF_ERROR(convert_checkpoint(single, output_folder + "/model.safetensors", read, options, opened).status());
    cleanup.armed = false;
    return std::vector<std::string>{"model.safetensors"};
  }
  SW_ASSIGN_OR_RETURN(auto index, pytorch::read_bin_index(index_path, resolver_of(read)));
  std::map<std::string, std::set<std::string>> shards;  // shard file -> tensors the index puts there
  for (const auto& [tensor, file] : index.weight_map) shards[file].insert(tensor);
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> written_files;
  std::uint64_t total = 0;
  for (const auto& [bin, listed] : shards) {
    SW_ASSIGN_OR_RETURN(std::string name, safetensors_name(bin));
    SW_ASSIGN_OR_RETURN(ConvertReport done, convert_checkpoint(input_folder + "/" + bin, output_folder + "/" + name, read, options, opened));
    cleanup.files.push_back(output_folder + "/" + name);
    for (const ConvertedTensor& t : done.tensors) {
      if (!listed.contains(t.name))
        return Error(ErrorKind::InvalidIndex, "tensor `" + t.name + "` of shard `" + bin + "` is not listed for it in the index")
            .with_file(index_path);
      weight_map[t.name] = name;
    }
    for (const std::string& tensor : listed)
      if (!weight_map.contains(tensor) && !options.dedup)
        return Error(ErrorKind::InvalidIndex, "the index lists `" + tensor + "` in `" + bin + "`, which does not hold it").with_file(index_path);
    total += done.bytes_written;
    written_files.push_back(name);
  }
  std::map<std::string, std::string> metadata(index.metadata.begin(), index.metadata.end());
  metadata["total_size"] = std::to_string(total);
  const std::string json = index_json(metadata, weight_map);
  SW_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::create(output_folder + "/model.safetensors.index.json", {json.size(), options.write.durable}));
  SW_RETURN_IF_ERROR(file.append(std::as_bytes(std::span<const char>(json.data(), json.size()))));
  SW_RETURN_IF_ERROR(file.commit());
  cleanup.armed = false;
  written_files.push_back("model.safetensors.index.json");
  return written_files;
}

}  // namespace safeweights
