// The source registry (io/scheme.h): the one list of schemes, what a scheme does unless it says
// otherwise, and the public calls that route a name to its scheme (is_url, open_url, open_source).

#include "core/status_macros.h"
#include "io/scheme.h"
#include "io/secrets.h"
#include "io/uri.h"

namespace safeweights {
namespace io {

const std::vector<const Scheme*>& schemes() {
#define SAFEWEIGHTS_IO_ENTRY(name) &name##_scheme(),
  static const std::vector<const Scheme*> list = {SAFEWEIGHTS_IO_SCHEMES(SAFEWEIGHTS_IO_ENTRY)};
#undef SAFEWEIGHTS_IO_ENTRY
  return list;
}

const Scheme& scheme_of(std::string_view name) {
  for (const Scheme* s : schemes()) {
    if (s->owns(name)) return *s;
  }
  return file_scheme();
}

std::string remote_prefixes() {
  std::string out;
  for (const Scheme* s : schemes()) {
    if (!s->remote()) continue;
    if (!out.empty()) out += ", ";
    out += s->prefix();
  }
  return out;
}

bool Scheme::owns(std::string_view name) const { return remote() && uri::starts_with_nocase(name, prefix()); }

Result<SourcePtr> Scheme::open(const std::string& name, FileBackend /*backend*/, const HttpOptions& options) const {
  SW_ASSIGN_OR_RETURN(HttpOptions resolved, http::request_options(name, options, ca_bundle_env()));
  auto target = this->target(name, resolved);
  if (!target.is_ok()) return error_of(target).with_file(name);
  return http::open_target(name, std::move(*target), resolved);
}

Result<http::Target> Scheme::target(const std::string& name, const HttpOptions& /*resolved*/) const {
  return Error(ErrorKind::NotSupported, "not a remote name").with_file(name);
}

namespace {

Result<std::vector<FolderEntry>> list_unscrubbed(const Scheme& scheme, const std::string& name, const HttpOptions& options) {
  SW_ASSIGN_OR_RETURN(HttpOptions resolved, http::request_options(name, options, scheme.ca_bundle_env()));
  listing::Listing listing(name, resolved);
  SW_RETURN_IF_ERROR(scheme.list_pages(listing, name, resolved));
  return listing.sorted();
}

}  // namespace

// Its errors leave scrubbed (io/secrets.h): they may quote the service, and a page's names.
Result<std::vector<FolderEntry>> Scheme::list(const std::string& name, const HttpOptions& options) const {
  auto entries = list_unscrubbed(*this, name, options);
  if (!entries.is_ok()) return secrets::scrub(entries.error());
  return entries;
}

Status Scheme::list_pages(listing::Listing& /*listing*/, const std::string& name, const HttpOptions& /*resolved*/) const {
  return Error(ErrorKind::NotSupported, "names of " + std::string(prefix()) + " have no folder listing").with_file(name);
}

bool BucketScheme::names_folder(std::string_view name) const {
  const std::optional<std::string> object = object_of(name);
  return object && (object->empty() || object->ends_with('/'));
}

std::size_t Scheme::kept_prefix(std::string_view name) const { return name.find("://") + 3; }

std::string Scheme::base_name(std::string_view folder) const {
  while (folder.ends_with('/')) folder.remove_suffix(1);
  return std::string(folder.substr(folder.find_last_of('/') + 1));
}

std::string Scheme::sibling(std::string_view base, std::string_view file) const {
  // The scheme and host (bucket, repository) stay; the last path segment goes.
  const std::size_t host_start = base.find("://") + 3;
  const std::size_t path_start = base.find('/', host_start);
  if (path_start == std::string_view::npos) return std::string(base) + "/" + std::string(file);
  return std::string(base.substr(0, base.find_last_of('/') + 1)) + std::string(file);
}

}  // namespace io

bool is_url(std::string_view s) noexcept { return io::scheme_of(s).remote(); }

namespace {

Result<SourcePtr> open_url_unscrubbed(const std::string& url, const HttpOptions& options) {
  const io::Scheme& scheme = io::scheme_of(url);
  if (!scheme.remote()) return Error(ErrorKind::InvalidArgument, "not a remote name (" + io::remote_prefixes() + ")").with_file(url);
  return scheme.open(url, FileBackend::Mmap, options);
}

}  // namespace

// Its errors leave scrubbed (io/secrets.h): they may quote the service.
Result<SourcePtr> open_url(const std::string& url, const HttpOptions& options) {
  auto source = open_url_unscrubbed(url, options);
  if (!source.is_ok()) return secrets::scrub(source.error());
  return source;
}

Result<SourcePtr> open_source(const std::string& path_or_url, FileBackend backend, const HttpOptions& options) {
  if (is_url(path_or_url)) return open_url(path_or_url, options);
  return open_file(path_or_url, backend);
}

}  // namespace safeweights
