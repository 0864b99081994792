#include "safeweights/resolver.h"

#include "io/scheme.h"

#include <map>
#include <mutex>
#include <utility>

namespace safeweights {
namespace {

Result<SourcePtr> open_any(const std::string& name, FileBackend backend, const HttpOptions& http) {
  if (is_url(name)) return open_url(name, http);  // scrubbed errors
  return open_file(name, backend);
}

Result<std::vector<FolderEntry>> list_any(const std::string& name, const HttpOptions& http) { return io::scheme_of(name).list(name, http); }

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
    auto entries = list_any(name, http_);
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
  Result<std::vector<FolderEntry>> list(const std::string& name) const override { return list_any(name, {}); }
};

}  // namespace

const Resolver& uncached_resolver() {
  static const PlainResolver resolver;
  return resolver;
}

std::shared_ptr<const Resolver> caching_resolver(const HttpOptions& http) { return std::make_shared<CachingResolver>(http); }

std::string sibling_name(std::string_view base, std::string_view file) { return io::scheme_of(base).sibling(base, file); }

}  // namespace safeweights
