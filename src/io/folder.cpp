// Folders by name (safeweights/folder.h): what a folder is, how it is named and listed, its scheme's
// (io/scheme.h).

#include "safeweights/folder.h"

#include <algorithm>
#include <filesystem>

#include "core/status_macros.h"
#include "io/scheme.h"

namespace safeweights {

Result<std::vector<FolderEntry>> Resolver::list(const std::string& name) const {
  if (is_url(name)) return Error(ErrorKind::NotSupported, "this resolver lists local folders only").with_file(name);
  return io::file_scheme().list(name, {});
}

bool names_folder(std::string_view name) { return io::scheme_of(name).names_folder(name); }

Result<Folder> Folder::open(const std::string& name, const Resolver& resolver) {
  const io::Scheme& scheme = io::scheme_of(name);
  if (!scheme.names_folder(name)) {
    if (scheme.remote()) return Error(ErrorKind::InvalidArgument, "names a file, not a folder (end a folder's name with '/')").with_file(name);
    std::error_code ec;
    if (!std::filesystem::exists(name, ec)) return Error(ErrorKind::FileNotFound, "no such folder").with_file(name);
    return Error(ErrorKind::InvalidArgument, "not a folder").with_file(name);
  }
  std::string trimmed = name;
  const std::size_t keep = scheme.kept_prefix(name);
  while (trimmed.size() > keep && trimmed.back() == '/') trimmed.pop_back();
  SW_ASSIGN_OR_RETURN(std::vector<FolderEntry> entries, resolver.list(scheme.listing_name(trimmed)));
  return Folder(std::move(trimmed), resolver, std::move(entries));
}

std::string Folder::base_name() const { return io::scheme_of(name_).base_name(name_); }

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
