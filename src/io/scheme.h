// The source registry: one Scheme per kind of name (local paths, http(s)://, s3://, hf://, gs://),
// as formats have theirs (safeweights/format.h). A scheme owns everything about its names: which names
// are its own, how they split (bucket, key, repository, revision), where a file's requests go and how
// they are signed, the credentials it looks up, how a folder is listed and which names are folders.
// The remote ones read through the one HTTP transport (io/http_transport.h). Everything else asks
// the registry (scheme_of) and never tests a name's prefix itself. Internal to src/io.
//
// A new scheme: a file src/io/scheme_NAME.cpp defining a Scheme and NAME_scheme(), which returns it;
// its entry in SAFEWEIGHTS_IO_SCHEMES (below); and the file in SAFEWEIGHTS_SOURCES.
//
// Thread safety: schemes are stateless singletons; every method is reentrant.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/http_transport.h"
#include "io/remote_listing.h"
#include "safeweights/error.h"
#include "safeweights/http.h"
#include "safeweights/resolver.h"
#include "safeweights/source.h"

namespace safeweights::io {

class Scheme {
 public:
  virtual ~Scheme() = default;

  // The name's prefix, "s3://"; empty for local paths (the scheme of every name no other claims).
  virtual std::string_view prefix() const = 0;
  // Whether `name` is one of this scheme's (remote schemes: the prefix, case-insensitive).
  virtual bool owns(std::string_view name) const;
  bool remote() const { return !prefix().empty(); }

  // Opens the file `name`. Remote schemes: target() through the transport (backend unused).
  virtual Result<SourcePtr> open(const std::string& name, FileBackend backend, const HttpOptions& options) const;
  // Where the reads of the file `name` go and how they are signed (remote schemes), under the
  // options request_options() resolved. InvalidArgument for a name of a folder, not a file.
  virtual Result<http::Target> target(const std::string& name, const HttpOptions& resolved) const;
  // The environment variable naming the CA bundle this scheme's clients read first ($AWS_CA_BUNDLE);
  // nullptr: only the common ones (http_transport.h, request_options).
  virtual const char* ca_bundle_env() const { return nullptr; }

  // What is directly in the folder `name`, sorted by name (safeweights/resolver.h, Resolver::list).
  // Remote schemes: list_pages() under one listing (its deadline and bounds), then sorted and checked
  // for names given twice; errors scrubbed (io/secrets.h).
  virtual Result<std::vector<FolderEntry>> list(const std::string& name, const HttpOptions& options) const;
  // The pages of the remote folder `name`, each fetched through `listing` and its entries added to it.
  // NotSupported where the scheme has no listing.
  virtual Status list_pages(listing::Listing& listing, const std::string& name, const HttpOptions& resolved) const;
  // Whether `name` names a folder (safeweights/folder.h): remote names by their spelling alone.
  virtual bool names_folder(std::string_view name) const = 0;
  // How many leading characters of a folder's name trailing '/' are never cut from ("s3://b/": the
  // bucket's root keeps its slash; "/" stays "/").
  virtual std::size_t kept_prefix(std::string_view name) const;
  // The name list() wants for the folder `trimmed` (its name without trailing '/').
  virtual std::string listing_name(std::string trimmed) const { return trimmed; }
  // The folder's own last name: "llama" for /models/llama, s3://b/models/llama/ and hf://org/llama.
  virtual std::string base_name(std::string_view folder) const;
  // The name of `file` (a plain file name) in the folder of `base`, a name of this scheme.
  virtual std::string sibling(std::string_view base, std::string_view file) const;
};

// A scheme of BUCKET/OBJECT names (s3://, gs://): the bucket's root and names ending in '/' (as the
// stores' own tools write a prefix) are folders; a folder is listed by its prefix, which ends in '/'.
class BucketScheme : public Scheme {
 public:
  bool names_folder(std::string_view name) const override;
  // "s3://BUCKET/" keeps its slash: the bucket's root.
  std::size_t kept_prefix(std::string_view name) const override { return name.find('/', prefix().size()) + 1; }
  std::string listing_name(std::string trimmed) const override { return trimmed.ends_with('/') ? trimmed : trimmed + "/"; }

 protected:
  // The object (key) part of a well-formed name; nullopt for a malformed one.
  virtual std::optional<std::string> object_of(std::string_view name) const = 0;
};

// The scheme of `name`: the remote scheme that owns it, else the local one.
const Scheme& scheme_of(std::string_view name);
// The registered schemes, remote ones first, the local one last.
const std::vector<const Scheme*>& schemes();
// The remote schemes' prefixes, for messages: "http://, https://, s3://, hf://, gs://".
std::string remote_prefixes();

// The schemes, in the order a name is offered to them: each NAME is defined in its file
// (io/scheme_*.cpp) as `const Scheme& NAME_scheme()`. A new scheme is its file, one entry here and
// its line in CMakeLists.txt; the list of schemes() and the declarations below follow. The local one
// is last: it owns every name no remote scheme owns.
#define SAFEWEIGHTS_IO_SCHEMES(X) X(http) X(https) X(s3) X(hf) X(gs) X(file)

#define SAFEWEIGHTS_IO_DECLARE(name) const Scheme& name##_scheme();
SAFEWEIGHTS_IO_SCHEMES(SAFEWEIGHTS_IO_DECLARE)
#undef SAFEWEIGHTS_IO_DECLARE

// The Hub's token for a request to `url` (hf:// and https:// names alike): "Authorization: Bearer
// TOKEN" added to `signing` when the caller gives no Authorization header, options.use_hf_token holds,
// a token is found and the URL's origin may have it (https, huggingface.co or its subdomains, or
// $HF_ENDPOINT's origin). io/scheme_hf.cpp owns the policy.
Status add_hub_token(const std::string& url, const HttpOptions& options, http::Signing& signing);

}  // namespace safeweights::io
