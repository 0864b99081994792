// A transformers folder of PyTorch weights to a folder transformers loads as it is (convert.h,
// convert_bin_folder): each .bin shard through convert() to the .safetensors file the Hub's conversion
// names, the index with its metadata's JSON types kept, and every small file that is not a weight or a
// pickle (config, tokenizer, generation config) copied. All or nothing: everything is written into a
// staging folder beside the output, which is renamed into place last.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <array>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "core/status_macros.h"
#include "convert/planned_folder.h"
#include "core/strings.h"
#include "io/posix_util.h"
#include "io/read_util.h"
#include "pytorch/index.h"
#include "safeweights/atomic_file.h"
#include "safeweights/cancel.h"
#include "safeweights/convert.h"
#include "safeweights/folder.h"
#include "safeweights/http.h"
#include "safeweights/pytorch.h"
#include "safeweights/text.h"

namespace safeweights {
namespace {

namespace fs = std::filesystem;

// What is copied beside the weights: top-level regular files of at most this size (a large
// tokenizer.json is tens of MiB), at most this much in all.
constexpr std::uint64_t kMaxSideFile = std::uint64_t{256} << 20;
constexpr std::uint64_t kMaxSideTotal = std::uint64_t{1} << 30;

// pytorch_model-00001-of-00002.bin -> model-00001-of-00002.safetensors (what the Hub's conversion names them).
Result<std::string> safetensors_name(const std::string& bin) {
  constexpr std::string_view kPrefix = "pytorch_model", kExt = ".bin";
  SW_RETURN_IF_ERROR(pytorch::check_shard_name(bin));
  std::string out = bin;
  if (out.starts_with(kPrefix)) out = "model" + out.substr(kPrefix.size());
  if (out.ends_with(kExt)) out.resize(out.size() - kExt.size());
  return out + ".safetensors";
}

// The new index: the input index's metadata, each value as the JSON it was, total_size computed anew.
std::string index_json(const HfIndex& index, std::uint64_t total_size, const std::map<std::string, std::string>& weight_map) {
  std::map<std::string_view, std::string> metadata;  // key -> JSON text
  for (std::size_t i = 0; i < index.metadata.size(); ++i)
    metadata[index.metadata[i].first] = i < index.metadata_json.size() ? index.metadata_json[i] : json_quote(index.metadata[i].second);
  metadata["total_size"] = std::to_string(total_size);
  return hf_index_text({metadata.begin(), metadata.end()}, {weight_map.begin(), weight_map.end()});
}

// Files that are weights or pickles (never copied: the weights are converted, a pickle is not read
// as data), the input's index (replaced by ours) and a safetensors index (ours is written).
bool is_weight_or_pickle(const std::string& name) {
  static constexpr std::array<std::string_view, 16> kSkipped = {".bin", ".pt",      ".pth", ".ckpt", ".pkl", ".pickle", ".safetensors", ".gguf",
                                                                ".h5",  ".msgpack", ".ot",  ".onnx", ".npy", ".npz",    ".joblib",      ".dduf"};
  if (name.ends_with(".index.json")) return true;  // pytorch_model.bin.index.json, model.safetensors.index.json, ...
  return std::ranges::any_of(kSkipped, [&](std::string_view ext) { return name.ends_with(ext); });
}

// The folders create_directories(folder) would create, innermost first. The path as given, not its
// lexical normal form: for `out/../x` create_directories makes `out` too.
std::vector<fs::path> missing_folders(const fs::path& folder) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::path p = folder; !p.empty() && !fs::exists(p, ec) && !ec; p = p.parent_path()) {
    if (p.has_filename() && p.filename() != "." && p.filename() != "..") out.push_back(p);  // `x/..` is not made
    if (p == p.parent_path()) break;
  }
  return out;
}

// The staging folder, `.<name>.sw-convert-<pid>-<random>` beside the output, and the parent folders
// made for it: removed on every path but the successful rename.
struct Staging {
  std::string path;
  std::vector<fs::path> created_parents;  // innermost first
  bool made = false;
  ~Staging() {
    std::error_code ec;
    if (made) fs::remove_all(path, ec);  // ours: made new by mkdir, and remove_all follows no symlink
    for (const auto& dir : created_parents)
      if (!fs::remove(dir, ec)) break;
  }
};

constexpr std::string_view kStagingTag = ".sw-convert-";

std::string staging_name(const std::string& base) {
  std::random_device rd;
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, "%ld-%08x", static_cast<long>(::getpid()), static_cast<unsigned>(rd()));
  return "." + base + std::string(kStagingTag) + suffix;
}

// Removes the staging folders a killed conversion into the same output left (Ctrl-C ends the CLI at once):
// `.<base>.sw-convert-<pid>-...` whose process is gone.
void remove_stale_staging(const std::string& parent, const std::string& base) {
  const std::string prefix = "." + base + std::string(kStagingTag);
  std::error_code ec;
  std::vector<fs::path> stale;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix) || !fs::is_directory(it->symlink_status(ec))) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.push_back(it->path());
  }
  for (const fs::path& dir : stale) fs::remove_all(dir, ec);
}

Status check_side_size(const std::string& from, std::uint64_t size, std::uint64_t& total) {
  if (size > kMaxSideFile)
    return Error(ErrorKind::ResourceLimit,
                 "a file beside the weights is larger than 256 MiB, which no config or tokenizer file is: remove it "
                 "from the folder, or convert to a file (OUT.safetensors)")
        .with_file(from);
  total += size;
  if (total > kMaxSideTotal)
    return Error(ErrorKind::ResourceLimit, "the files beside the weights add up to more than 1 GiB: remove what is not config or tokenizer")
        .with_file(from);
  return Status::ok();
}

Status write_side_file(const std::string& folder, const std::string& name, std::span<const std::byte> bytes, bool durable) {
  SW_ASSIGN_OR_RETURN(AtomicFile out, AtomicFile::create(folder + "/" + name, {bytes.size(), durable}));
  SW_RETURN_IF_ERROR(out.append(bytes));
  return out.commit();
}

// Copies the top-level file `name` of a remote folder into `folder` atomically.
Status copy_remote_side_file(const Folder& input, const std::string& name, const std::string& folder, std::uint64_t& total, bool durable) {
  const std::string from = input.path_of(name);
  SW_ASSIGN_OR_RETURN(SourcePtr source, input.open_file(name));
  SW_RETURN_IF_ERROR(check_side_size(from, source->size(), total));
  auto bytes = read_small(*source, kMaxSideFile);
  if (!bytes.is_ok()) return error_of(bytes).with_file(from);
  return write_side_file(folder, name, std::as_bytes(std::span<const char>(bytes->data(), bytes->size())), durable);
}

// Copies the top-level file `name` of the local folder `input` into `folder` atomically, never
// through a symlink.
Status copy_side_file(const std::string& input, const std::string& name, const std::string& folder, std::uint64_t& total, bool durable) {
  const std::string from = input + "/" + name;
  const int fd = ::open(from.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Error(ErrorKind::IoError, "cannot open: " + errno_text(errno)).with_file(from);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Error(ErrorKind::IoError, "cannot stat: " + errno_text(errno)).with_file(from);
  if (!S_ISREG(st.st_mode)) return Error(ErrorKind::UnsafePath, "changed into something other than a file while being copied").with_file(from);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  SW_RETURN_IF_ERROR(check_side_size(from, size, total));
  std::vector<std::byte> bytes(static_cast<std::size_t>(size));
  SW_RETURN_IF_ERROR(pread_exact(fd, 0, bytes, from));
  return write_side_file(folder, name, bytes, durable);
}

// The files of a remote folder copied beside the weights (a listing has no links nor special files).
std::vector<std::string> remote_side_files(const Folder& input) {
  std::vector<std::string> names;
  for (const FolderEntry& e : input.entries())
    if (!e.is_folder && e.name[0] != '.' && !is_weight_or_pickle(e.name)) names.push_back(e.name);
  return names;
}

// The names of the files copied beside the weights, sorted. A symbolic link or a special file is
// refused by name (nothing is followed out of the folder); folders and hidden files are left out.
Result<std::vector<std::string>> side_files(const std::string& input) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(input, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.' || is_weight_or_pickle(name)) continue;
    const fs::file_status st = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_symlink(st))
      return Error(ErrorKind::UnsafePath,
                   "a symbolic link beside the weights is not followed: copy the folder with its links resolved "
                   "(cp -rL, for a Hugging Face cache snapshot) and convert the copy")
          .with_file(input + "/" + name);
    if (fs::is_directory(st)) continue;
    if (!fs::is_regular_file(st)) return Error(ErrorKind::UnsafePath, "not a regular file").with_file(input + "/" + name);
    names.push_back(name);
  }
  if (ec) return Error(ErrorKind::IoError, "cannot list the folder: " + ec.message()).with_file(input);
  std::ranges::sort(names);
  return names;
}

// Gives the finished staging folder the output's name: a new name without replacing anything, or an
// empty folder replaced by rename(2) itself (which refuses one that is no longer empty).
Status move_into_place(const std::string& staging, const std::string& output, bool exists) {
  int rc = exists ? -1 : ::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, output.c_str(), RENAME_NOREPLACE);
  if (exists || (rc != 0 && (errno == EINVAL || errno == ENOSYS))) rc = ::rename(staging.c_str(), output.c_str());
  if (rc == 0) return Status::ok();
  if (errno == EEXIST || errno == ENOTEMPTY)
    return Error(ErrorKind::UnsafePath, "the output folder was filled by someone else meanwhile").with_file(output);
  return Error(ErrorKind::IoError, "cannot move the converted folder into place: " + errno_text(errno)).with_file(output);
}

// One checkpoint file to one safetensors file through the pipeline.
Result<ConvertReport> convert_checkpoint(const std::string& input, const std::string& output, const FormatOptions& read,
                                         const ConvertOptions& options, const std::function<void(const TensorFile&)>& opened) {
  SW_ASSIGN_OR_RETURN(std::unique_ptr<pytorch::Checkpoint> checkpoint, pytorch::open_checkpoint(input, read));
  if (opened) opened(*checkpoint);
  return convert(*checkpoint, output, options);
}

void add(ConvertReport& into, ConvertReport&& part) {
  for (ConvertedTensor& t : part.tensors) into.tensors.push_back(std::move(t));
  into.bytes_written += part.bytes_written;
}

// A .bin folder converts to the same shards, tensors and format; anything else names an output file.
Status check_same_shards(const ConvertOptions& options, const std::string& input_folder) {
  if (options.plan.tensors.empty() && options.to.empty() && !options.write.split.enabled()) return Status::ok();
  return Error(ErrorKind::InvalidArgument,
               "a folder of .bin shards converts to a folder of the same shards, tensors and format: to cut shards anew, write "
               "OUT/model.safetensors.index.json; for a tensor list or another format, name the output file")
      .with_file(input_folder);
}

// The output folder as named (without trailing slashes), its last name, the folder that holds it, and
// whether it exists already.
struct OutputFolder {
  std::string path;
  std::string base;
  std::string parent;
  bool exists = false;
};

// The output: a new folder, or an empty one (nothing is merged into a folder that holds files).
Result<OutputFolder> check_output_folder(const std::string& output_folder) {
  OutputFolder out;
  out.path = output_folder;
  while (out.path.size() > 1 && out.path.back() == '/') out.path.pop_back();
  out.base = out.path.substr(out.path.find_last_of('/') + 1);
  if (out.base.empty() || out.base == "." || out.base == ".." || out.path == "/")
    return Error(ErrorKind::InvalidArgument, "name the output folder, not `.`, `..` or `/`").with_file(output_folder);
  std::error_code ec;
  const fs::file_status existing = fs::symlink_status(out.path, ec);
  out.exists = fs::exists(existing);
  if (out.exists && !fs::is_directory(existing))
    return Error(ErrorKind::InvalidArgument, "the output exists and is not a folder: name a new or empty folder").with_file(out.path);
  if (out.exists && !fs::is_empty(out.path, ec))
    return Error(ErrorKind::InvalidArgument, "the output folder is not empty: name a new or empty folder (a model is never merged into another)")
        .with_file(out.path);
  out.parent = folder_of(out.path);
  return out;
}

// Makes the output's parent folders that are missing and, beside the output, the staging folder
// (after removing those that killed conversions into the same output left).
Status make_staging(Staging& staging, const OutputFolder& out) {
  staging.created_parents = missing_folders(out.parent);
  std::error_code ec;
  fs::create_directories(out.parent, ec);
  if (ec) return Error(ErrorKind::IoError, "cannot create the output's parent folder: " + ec.message()).with_file(out.parent);
  remove_stale_staging(out.parent, out.base);
  staging.path = (out.parent == "/" ? std::string() : out.parent) + "/" + staging_name(out.base);
  if (::mkdir(staging.path.c_str(), 0777) != 0)
    return Error(ErrorKind::IoError, "cannot create the staging folder: " + errno_text(errno)).with_file(staging.path);
  staging.made = true;
  return Status::ok();
}

// What a conversion wrote into the staging folder: the report, and the names of its files in the
// order written.
struct Staged {
  ConvertReport report;
  std::vector<std::string> written;
};

// One conversion of a .bin folder: the input and how to read and write it, as convert_bin_folder was given them.
struct BinFolderJob {
  const Folder& input;
  const std::string& input_folder;
  const FormatOptions& read;
  const ConvertOptions& options;
  const std::function<void(const TensorFile&)>& opened;
  bool remote;
};

// The shard's tensors are the ones the index lists for it (a tensor dropped as a copy of a shared
// storage is not missing when deduplicating); each is entered in the new index under the shard's new name.
Status check_against_index(const ConvertReport& done, const std::string& bin, const std::set<std::string>& listed, const std::string& name,
                           const std::string& index_path, std::map<std::string, std::string>& weight_map, bool dedup) {
  for (const ConvertedTensor& t : done.tensors) {
    if (!listed.contains(t.name))
      return Error(ErrorKind::InvalidIndex, "tensor `" + t.name + "` of shard `" + bin + "` is not listed for it in the index").with_file(index_path);
    weight_map[t.name] = name;
  }
  for (const std::string& tensor : listed)
    if (!weight_map.contains(tensor) && !dedup)
      return Error(ErrorKind::InvalidIndex, "the index lists `" + tensor + "` in `" + bin + "`, which does not hold it").with_file(index_path);
  return Status::ok();
}

// Each shard the index names to its safetensors file, checked against the index, then the new index.
Status convert_shards(const BinFolderJob& job, const std::string& staging, Staged& staged) {
  const std::string index_path = job.input.path_of("pytorch_model.bin.index.json");
  SW_ASSIGN_OR_RETURN(HfIndex index, pytorch::read_bin_index(index_path, resolver_of(job.read)));
  std::map<std::string, std::set<std::string>> shards;  // shard file -> tensors the index puts there
  for (const auto& [tensor, file] : index.weight_map) shards[file].insert(tensor);
  std::map<std::string, std::string> weight_map;
  std::uint64_t total = 0;
  for (const auto& [bin, listed] : shards) {
    SW_ASSIGN_OR_RETURN(std::string name, safetensors_name(bin));
    SW_ASSIGN_OR_RETURN(ConvertReport done, convert_checkpoint(job.input.path_of(bin), staging + "/" + name, job.read, job.options, job.opened));
    SW_RETURN_IF_ERROR(check_against_index(done, bin, listed, name, index_path, weight_map, job.options.dedup));
    total += done.bytes_written;
    add(staged.report, std::move(done));
    staged.written.push_back(name);
  }
  const std::string json = index_json(index, total, weight_map);
  constexpr std::string_view kIndex = "model.safetensors.index.json";
  SW_RETURN_IF_ERROR(
      write_side_file(staging, std::string(kIndex), std::as_bytes(std::span<const char>(json.data(), json.size())), job.options.write.durable));
  staged.written.emplace_back(kIndex);
  return Status::ok();
}

// The weights into the staging folder: pytorch_model.bin to model.safetensors, or every shard and the index.
Status convert_weights(const BinFolderJob& job, bool sharded, const std::string& staging, Staged& staged) {
  if (sharded) return convert_shards(job, staging, staged);
  SW_ASSIGN_OR_RETURN(ConvertReport done,
                      convert_checkpoint(job.input.path_of("pytorch_model.bin"), staging + "/model.safetensors", job.read, job.options, job.opened));
  add(staged.report, std::move(done));
  staged.written.emplace_back("model.safetensors");
  return Status::ok();
}

// The names of the files copied beside the weights, listed before anything is written.
Result<std::vector<std::string>> files_to_copy(const BinFolderJob& job) {
  if (job.remote) return remote_side_files(job.input);
  return side_files(job.input_folder);
}

// The files beside the weights (config, tokenizer) into the staging folder, within the size caps.
Status copy_side_files(const BinFolderJob& job, const std::vector<std::string>& names, const std::string& staging, Staged& staged) {
  std::uint64_t side_total = 0;
  const bool durable = job.options.write.durable;
  for (const std::string& name : names) {
    if (job.remote) {
      SW_RETURN_IF_ERROR(copy_remote_side_file(job.input, name, staging, side_total, durable));
    } else {
      SW_RETURN_IF_ERROR(copy_side_file(job.input_folder, name, staging, side_total, durable));
    }
    staged.written.push_back(name);
  }
  return Status::ok();
}

// Gives the finished staging folder the output's name (unless cancelled meanwhile); from then on it is
// the output, no longer removed. Durable: the parent folder synced, so the rename outlives a crash.
Status publish(Staging& staging, const OutputFolder& out, bool durable) {
  SW_RETURN_IF_ERROR(check_cancelled());
  SW_RETURN_IF_ERROR(move_into_place(staging.path, out.path, out.exists));
  staging.made = false;
  staging.created_parents.clear();
  if (durable) {
    const int dir = ::open(out.parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
  }
  return Status::ok();
}

}  // namespace

Result<ConvertReport> convert_bin_folder(const std::string& input_folder, const std::string& output_folder, const FormatOptions& read,
                                         const ConvertOptions& options, const std::function<void(const TensorFile&)>& opened) {
  SW_RETURN_IF_ERROR(check_same_shards(options, input_folder));
  SW_ASSIGN_OR_RETURN(Folder input, Folder::open(input_folder, resolver_of(read)));
  const bool sharded = input.has_file("pytorch_model.bin.index.json");
  if (!sharded && !input.has_file("pytorch_model.bin"))
    return Error(ErrorKind::FileNotFound, "neither pytorch_model.bin nor pytorch_model.bin.index.json in the folder").with_file(input_folder);
  SW_ASSIGN_OR_RETURN(OutputFolder out, check_output_folder(output_folder));
  const BinFolderJob job{input, input_folder, read, options, opened, is_url(input_folder)};
  SW_ASSIGN_OR_RETURN(std::vector<std::string> copied, files_to_copy(job));

  Staging staging;
  SW_RETURN_IF_ERROR(make_staging(staging, out));
  Staged staged;
  SW_RETURN_IF_ERROR(convert_weights(job, sharded, staging.path, staged));
  SW_RETURN_IF_ERROR(copy_side_files(job, copied, staging.path, staged));
  SW_RETURN_IF_ERROR(publish(staging, out, options.write.durable));
  for (const std::string& name : staged.written) staged.report.files.push_back(out.path + "/" + name);
  return std::move(staged.report);
}

}  // namespace safeweights

namespace safeweights {
namespace {

// Weights that fit one shard are model.safetensors, with no index, as transformers saves them: the one
// shard renamed, the index removed (both still in the staging folder).
Status unshard_one(const std::string& staging, ConvertReport& report) {
  if (report.files.size() != 2 || !report.files[1].ends_with(".safetensors.index.json")) return Status::ok();
  const std::string model = staging + "/model.safetensors";
  if (::rename(report.files[0].c_str(), model.c_str()) != 0 || ::unlink(report.files[1].c_str()) != 0)
    return Error(ErrorKind::IoError, "cannot rename the one shard to model.safetensors: " + errno_text(errno)).with_file(report.files[0]);
  report.files = {model};
  return Status::ok();
}

}  // namespace

Result<ConvertReport> convert_planned_folder(PlannedFolder planned, const std::string& output_folder, ConvertOptions options) {
  SW_ASSIGN_OR_RETURN(OutputFolder out, check_output_folder(output_folder));
  Staging staging;
  SW_RETURN_IF_ERROR(make_staging(staging, out));
  options.plan = std::move(planned.weights.plan);
  options.to.clear();
  SW_ASSIGN_OR_RETURN(ConvertReport report, convert(*planned.weights.tensors, staging.path + "/model.safetensors.index.json", options));
  SW_RETURN_IF_ERROR(unshard_one(staging.path, report));
  std::vector<std::string> written;
  for (const std::string& file : report.files) written.push_back(file.substr(file.find_last_of('/') + 1));
  for (const auto& [name, text] : planned.files) {
    SW_RETURN_IF_ERROR(write_side_file(staging.path, name, std::as_bytes(std::span<const char>(text.data(), text.size())), options.write.durable));
    written.push_back(name);
  }
  SW_RETURN_IF_ERROR(publish(staging, out, options.write.durable));
  report.files.clear();
  for (const std::string& name : written) report.files.push_back(out.path + "/" + name);
  report.notes = std::move(planned.notes);
  return report;
}

}  // namespace safeweights
