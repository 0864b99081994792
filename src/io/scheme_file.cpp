// The local scheme (io/scheme.h): paths on this machine's file systems, every name no remote scheme
// owns. Files open with open_file(); folders are listed from the directory.

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "io/scheme.h"

namespace safeweights::io {
namespace {

namespace fs = std::filesystem;

class FileScheme final : public Scheme {
 public:
  std::string_view prefix() const override { return {}; }

  Result<SourcePtr> open(const std::string& name, FileBackend backend, const HttpOptions& /*options*/) const override {
    return open_file(name, backend);
  }

  // A local directory's files and folders, symbolic links followed (a Hugging Face cache snapshot is a
  // folder of links). What is neither (a FIFO, a socket, a device, a dangling link) is listed as a file
  // of size 0, never as absent: a reader that wants a file of that name then opens it, and the open
  // refuses it by name without blocking or touching it (open_file checks the type first).
  Result<std::vector<FolderEntry>> list(const std::string& name, const HttpOptions& /*options*/) const override {
    std::error_code ec;
    if (!fs::is_directory(name, ec)) {
      if (!fs::exists(fs::symlink_status(name, ec))) return Error(ErrorKind::FileNotFound, "no such folder").with_file(name);
      return Error(ErrorKind::InvalidArgument, "not a folder").with_file(name);
    }
    std::vector<FolderEntry> entries;
    for (fs::directory_iterator it(name, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code st_ec;
      const fs::file_status st = it->status(st_ec);  // a dangling link: an error, and not a folder
      if (entries.size() == kMaxFolderEntries)
        return Error(ErrorKind::ResourceLimit, "more than " + std::to_string(kMaxFolderEntries) + " entries in the folder").with_file(name);
      FolderEntry e{it->path().filename().string(), 0, !st_ec && fs::is_directory(st)};
      if (!st_ec && fs::is_regular_file(st)) e.size = it->file_size(st_ec);
      entries.push_back(std::move(e));
    }
    if (ec) return Error(ErrorKind::IoError, "cannot list the folder: " + ec.message()).with_file(name);
    std::sort(entries.begin(), entries.end(), [](const FolderEntry& a, const FolderEntry& b) { return a.name < b.name; });
    return entries;
  }

  bool names_folder(std::string_view name) const override {
    struct stat st {};
    return ::stat(std::string(name).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }

  std::size_t kept_prefix(std::string_view /*name*/) const override { return 1; }  // "/" stays "/"

  std::string base_name(std::string_view folder) const override {
    std::error_code ec;
    const fs::path p = fs::absolute(std::string(folder), ec).lexically_normal();
    std::string base = p.filename().string();
    if (base.empty()) base = p.parent_path().filename().string();
    return base;
  }

  std::string sibling(std::string_view base, std::string_view file) const override {
    const std::size_t slash = base.find_last_of('/');
    if (slash == std::string_view::npos) return std::string(file);
    return std::string(base.substr(0, slash + 1)) + std::string(file);
  }
};

}  // namespace

const Scheme& file_scheme() {
  static const FileScheme scheme;
  return scheme;
}

}  // namespace safeweights::io
