// safeweights/resolver.h — opening a file, and the files beside it, by name; listing a folder.
//
// Readers that need more than one file (a sharded checkpoint's index and its shards, a model folder's
// config.json beside its weights) open them through a Resolver, never with open_file() directly, so
// that the same reader works on local paths and on remote names (http(s)://, s3://, gs://, hf://): the
// Resolver is the one place that knows where files live, as LevelDB's Env. caching_resolver() opens
// paths with open_file() and remote names with open_url(), and keeps each source it opened, so that
// detecting a format and reading the file share one source (and, over HTTP, its first request and
// block cache). list() says what a folder holds: a local directory, an S3 prefix (ListObjectsV2), a
// Cloud Storage prefix (its objects list) or a Hub repository (its tree API); it is the only call that
// lists (safeweights/folder.h uses it).
//
// Thread safety: resolvers are safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/http.h"
#include "safeweights/source.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

// One thing directly in a folder.
struct FolderEntry {
  std::string name;  // its name in the folder: no '/', never empty, "." or ".."
  std::uint64_t size = 0;
  bool is_folder = false;
};

class Resolver {
 public:
  virtual ~Resolver() = default;
  // Opens a path or URL. FileNotFound when it does not exist.
  virtual Result<SourcePtr> open(const std::string& name, FileBackend backend = FileBackend::Mmap) const = 0;
  // What is directly in the folder `name` (names_folder() in safeweights/folder.h says which names are
  // folders), sorted by name. Local: the directory's files (symbolic links followed, as a reader
  // follows them) and folders; anything else (a FIFO, a socket, a device, a dangling link) is listed as
  // a file of size 0, so that a reader that wants it is refused by open_file() naming what it is,
  // rather than finding the name absent. s3://BUCKET/PREFIX/: the keys and common prefixes one level below, from
  // ListObjectsV2 pages (at most kMaxFolderEntries); gs://BUCKET/PREFIX/ likewise, from the objects
  // list's pages. hf://ORG/REPO[@REVISION][/DIR]: the Hub's tree of
  // that folder. FileNotFound when the folder does not exist (an S3 prefix with nothing under it, an
  // unknown repository or revision). The default implementation lists local folders through
  // open_file()'s rules and refuses remote ones (NotSupported).
  virtual Result<std::vector<FolderEntry>> list(const std::string& name) const;
};

// More entries than this in one folder are refused (ResourceLimit): no model folder comes close, and a
// listing must not grow without bound.
inline constexpr std::size_t kMaxFolderEntries = 100'000;

// Local paths through open_file(), URLs through open_url(http) (only when the build has HTTP
// support); every source opened is kept for the resolver's lifetime (failures too: a missing remote
// file costs one request), and so is every listing.
std::shared_ptr<const Resolver> caching_resolver(const HttpOptions& http = {});

// Opens paths and URLs without keeping anything: every open() and list() asks again (a remote file's
// detection and its reader then cost two opening requests). What a Format's open() and detect_format()
// use when FormatOptions::resolver is null; open_tensors() makes a caching_resolver() instead.
const Resolver& uncached_resolver();

// The name of `file` (a plain file name) in the folder of `base`, a path or URL: "a/b.json" + "c" gives
// "a/c"; "https://h/x/b.json?q" + "c" gives "https://h/x/c".
std::string sibling_name(std::string_view base, std::string_view file);

SAFEWEIGHTS_API_END
}  // namespace safeweights
