#include "safeweights/resolver.h"

#include "io/remote_listing.h"
#include "safeweights/hub.h"
#include "safeweights/s3.h"

#include <map>
#include <mutex>
#include <utility>

namespace safeweights {
namespace {

Result<SourcePtr> open_any(const std::string& name, FileBackend backend, const HttpOptions& http) {
  if (is_url(name)) return open_url(name, http);
  return open_file(name, backend);
}

// Keeps what it opened: a format's detection and its reader share one source.
class CachingResolver final : public Resolver {
 public:
  explicit CachingResolver(HttpOptions http) : http_(std::move(http)) {}

  Result<SourcePtr> open(const std::string& name, FileBackend backend) const override {
    const auto key = std::make_pair(name, is_url(name) ? FileBackend::Mmap : backend);
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = opened_.find(key); it != opened_.end()) return it->second;
    auto source = open_any(name, backend, http_);
    opened_.emplace(key, source);
    return source;
  }

  Result<std::vector<FolderEntry>> list(const std::string& name) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = listed_.find(name); it != listed_.end()) return it->second;
    auto entries = listing::list_folder(name, http_);
    listed_.emplace(name, entries);
    return entries;
  }

 private:
  HttpOptions http_;
  mutable std::mutex mutex_;
  mutable std::map<std::pair<std::string, FileBackend>, Result<SourcePtr>> opened_;
  mutable std::map<std::string, Result<std::vector<FolderEntry>>> listed_;
};

class PlainResolver final : public Resolver {
 public:
  Result<SourcePtr> open(const std::string& name, FileBackend backend) const override { return open_any(name, backend, {}); }
  Result<std::vector<FolderEntry>> list(const std::string& name) const override { return listing::list_folder(name, {}); }
};

}  // namespace

const Resolver& plain_resolver() {
  static const PlainResolver resolver;
  return resolver;
}

std::shared_ptr<const Resolver> default_resolver(const HttpOptions& http) { return std::make_shared<CachingResolver>(http); }

std::string sibling_name(std::string_view base, std::string_view file) {
  std::string_view folder = base;
  if (is_url(base)) {
    // Drop the query and fragment of an http(s) URL (an s3:// key or an hf:// path may hold '?' and
    // '#'), then the last path segment; the scheme and host (bucket, repository) stay.
    if (!is_s3_url(base) && !is_hf_url(base)) folder = folder.substr(0, folder.find_first_of("?#"));
    const std::size_t host_start = folder.find("://") + 3;
    const std::size_t path_start = folder.find('/', host_start);
    if (path_start == std::string_view::npos) return std::string(folder) + "/" + std::string(file);
    return std::string(folder.substr(0, folder.find_last_of('/') + 1)) + std::string(file);
  }
  const std::size_t slash = folder.find_last_of('/');
  if (slash == std::string_view::npos) return std::string(file);
  return std::string(folder.substr(0, slash + 1)) + std::string(file);
}

}  // namespace safeweights
