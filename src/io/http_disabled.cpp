// The http component switched off (SAFEWEIGHTS_WITH_HTTP=OFF): CMake compiles this file instead of
// http_source.cpp, so the library needs no libcurl. URLs are still recognised, so that callers route
// them here and report a clear error rather than trying to open "https://..." as a local file.
#include <string>
#include <string_view>

#include "io/remote_listing.h"
#include "safeweights/http.h"

namespace safeweights {

Result<SourcePtr> open_url(const std::string& url, const HttpOptions& /*options*/) {
  if (!is_url(url)) return Error(ErrorKind::InvalidArgument, "not an http://, https://, s3:// or hf:// name").with_file(url);
  return Error(ErrorKind::InvalidArgument, "safeweights was built without HTTP support (SAFEWEIGHTS_WITH_HTTP=OFF): cannot open URLs").with_file(url);
}

Result<SourcePtr> open_source(const std::string& path_or_url, FileBackend backend, const HttpOptions& options) {
  if (is_url(path_or_url)) return open_url(path_or_url, options);
  return open_file(path_or_url, backend);
}

namespace listing {
Result<std::vector<FolderEntry>> list_remote_folder(const std::string& name, const HttpOptions& /*options*/) {
  return Error(ErrorKind::InvalidArgument, "safeweights was built without HTTP support (SAFEWEIGHTS_WITH_HTTP=OFF): cannot list remote folders")
      .with_file(name);
}
}  // namespace listing

}  // namespace safeweights
