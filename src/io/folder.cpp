// Folders by name (safeweights/folder.h), and the listing of local folders every resolver shares.

#include "safeweights/folder.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "core/status_macros.h"
#include "io/remote_listing.h"
#include "safeweights/http.h"
#include "safeweights/hub.h"
#include "safeweights/s3.h"

namespace safeweights {
namespace {

namespace fs = std::filesystem;

// A local directory's files and folders, symbolic links followed (a Hugging Face cache snapshot is a
// folder of links). What is neither (a FIFO, a socket, a device, a dangling link) is listed as a file
// of size 0, never as absent: a reader that wants a file of that name then opens it, and the open
// refuses it by name without blocking or touching it (open_file checks the type first).
Result<std::vector<FolderEntry>> list_local_folder(const std::string& name) {
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

}  // namespace

Result<std::vector<FolderEntry>> Resolver::list(const std::string& name) const {
  if (is_url(name)) return Error(ErrorKind::NotSupported, "this resolver lists local folders only").with_file(name);
  return list_local_folder(name);
}

Result<std::vector<FolderEntry>> listing::list_folder(const std::string& name, const HttpOptions& http) {
  if (is_url(name)) return list_remote_folder(name, http);
  return list_local_folder(name);
}

bool names_folder(std::string_view name) {
  if (is_s3_url(name)) {
    auto location = parse_s3_url(name);
    return location.is_ok() && (location->key.empty() || location->key.ends_with('/'));
  }
  if (is_hf_url(name)) {
    auto location = parse_hf_url(name);
    return location.is_ok() && (location->path.empty() || name.ends_with('/'));
  }
  if (is_url(name)) return false;
  struct stat st {};
  return ::stat(std::string(name).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Result<Folder> Folder::open(const std::string& name, const Resolver& resolver) {
  if (!names_folder(name)) {
    if (is_url(name)) return Error(ErrorKind::InvalidArgument, "names a file, not a folder (end a folder's name with '/')").with_file(name);
    std::error_code ec;
    if (!std::filesystem::exists(name, ec)) return Error(ErrorKind::FileNotFound, "no such folder").with_file(name);
    return Error(ErrorKind::InvalidArgument, "not a folder").with_file(name);
  }
  std::string trimmed = name;
  const std::size_t keep = is_s3_url(name) ? name.find('/', 5) + 1 : is_url(name) ? name.find("://") + 3 : 1;
  while (trimmed.size() > keep && trimmed.back() == '/') trimmed.pop_back();
  SW_ASSIGN_OR_RETURN(std::vector<FolderEntry> entries, resolver.list(is_s3_url(trimmed) && !trimmed.ends_with('/') ? trimmed + "/" : trimmed));
  return Folder(std::move(trimmed), resolver, std::move(entries));
}

std::string Folder::base_name() const {
  std::string_view n = name_;
  if (is_hf_url(n)) {
    auto location = parse_hf_url(n);
    if (location.is_ok()) {
      const std::string& inner = location->path.empty() ? location->repo_id : location->path;
      return inner.substr(inner.find_last_of('/') + 1);
    }
  }
  if (!is_url(n)) {
    std::error_code ec;
    const fs::path p = fs::absolute(std::string(n), ec).lexically_normal();
    std::string base = p.filename().string();
    if (base.empty()) base = p.parent_path().filename().string();
    return base;
  }
  while (n.ends_with('/')) n.remove_suffix(1);
  return std::string(n.substr(n.find_last_of('/') + 1));
}

std::string Folder::path_of(std::string_view file) const {
  if (name_.ends_with('/')) return name_ + std::string(file);
  return name_ + "/" + std::string(file);
}

bool Folder::has_file(std::string_view file) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), file, [](const FolderEntry& e, std::string_view f) { return e.name < f; });
  return it != entries_.end() && it->name == file && !it->is_folder;
}

Result<SourcePtr> Folder::open_file(std::string_view file, FileBackend backend) const {
  if (!has_file(file)) return Error(ErrorKind::FileNotFound, "no such file in the folder").with_file(path_of(file));
  return resolver_->open(path_of(file), backend);
}

}  // namespace safeweights
