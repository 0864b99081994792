// safeweights/folder.h — a folder of files by name: a local directory, an S3 prefix, a Hub repository.
//
// Readers of a whole model folder (a Hugging Face folder converted to GGUF, open_tensors() of a folder,
// a folder of .bin shards) ask a Folder which files it holds and open them through its Resolver, so the
// same code reads /models/llama, s3://bucket/llama/ and hf://org/llama. A folder is listed once, when
// it is opened (Resolver::list: the directory, ListObjectsV2, the Hub's tree API), and never again;
// its files are then opened like any other file, reading only the bytes a reader asks for.
//
// Which names are folders (names_folder): a local directory; s3://BUCKET/ and s3://BUCKET/PREFIX/
// (ending in '/', as the AWS CLI writes a prefix), gs://BUCKET/ and gs://BUCKET/PREFIX/ likewise; hf://ORG/REPO[@REVISION] (a repository, with no
// path) and hf://ORG/REPO[@REVISION]/DIR/ (ending in '/').
//
// Thread safety: a Folder is immutable after open(); safe to share between threads.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/resolver.h"
#include "safeweights/source.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

// Whether `name` names a folder (above). Local names are checked with stat(2) (following symbolic
// links); remote names by their spelling alone, without a request.
bool names_folder(std::string_view name);

class Folder {
 public:
  // Lists `name` through `resolver` (which the Folder keeps a reference to: it must outlive it).
  // InvalidArgument when `name` is not a folder's name; the listing's errors otherwise.
  static Result<Folder> open(const std::string& name, const Resolver& resolver);

  // The folder as named, without trailing '/' (but "/" and "s3://BUCKET/" stay whole).
  const std::string& name() const noexcept { return name_; }
  // The folder's own last name: "llama" for /models/llama, s3://b/models/llama/ and hf://org/llama.
  std::string base_name() const;
  // The path or URL of `file` in the folder: "config.json" -> "s3://b/llama/config.json".
  std::string path_of(std::string_view file) const;
  // Whether the folder holds a file (not a folder) of that name.
  bool has_file(std::string_view file) const;
  // Everything directly in the folder, sorted by name.
  const std::vector<FolderEntry>& entries() const noexcept { return entries_; }
  // Opens a file of the folder through the resolver. FileNotFound when it holds none of that name.
  Result<SourcePtr> open_file(std::string_view file, FileBackend backend = FileBackend::Pread) const;
  const Resolver& resolver() const noexcept { return *resolver_; }

 private:
  Folder(std::string name, const Resolver& resolver, std::vector<FolderEntry> entries)
      : name_(std::move(name)), resolver_(&resolver), entries_(std::move(entries)) {}

  std::string name_;
  const Resolver* resolver_;
  std::vector<FolderEntry> entries_;
};

SAFEWEIGHTS_API_END
}  // namespace safeweights
