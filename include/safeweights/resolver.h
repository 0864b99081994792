// safeweights/resolver.h — opening a file, and the files beside it, by name.
//
// Readers that need more than one file (a sharded checkpoint's index and its shards; later a model
// folder's config.json beside its weights) open them through a Resolver, never with open_file()
// directly, so that the same reader works on local paths and on URLs. default_resolver() opens paths
// with open_file() and http(s):// URLs with open_url(), and keeps each source it opened, so that
// detecting a format and reading the file share one source (and, over HTTP, its first request and
// block cache).
//
// Thread safety: resolvers are safe to share between threads.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/http.h"
#include "safeweights/source.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

class Resolver {
 public:
  virtual ~Resolver() = default;
  // Opens a path or URL. FileNotFound when it does not exist.
  virtual Result<SourcePtr> open(const std::string& name, FileBackend backend = FileBackend::Mmap) const = 0;
};

// Local paths through open_file(), URLs through open_url(http) (only when the build has HTTP
// support); every source opened is kept for the resolver's lifetime (failures too: a missing remote
// file costs one request).
std::shared_ptr<const Resolver> default_resolver(const HttpOptions& http = {});

// Opens paths and URLs without keeping anything.
const Resolver& plain_resolver();

// The name of `file` (a plain file name) in the folder of `base`, a path or URL: "a/b.json" + "c" gives
// "a/c"; "https://h/x/b.json?q" + "c" gives "https://h/x/c".
std::string sibling_name(std::string_view base, std::string_view file);

SAFEWEIGHTS_API_END
}  // namespace safeweights
