// The http component switched off (SAFEWEIGHTS_WITH_HTTP=OFF): CMake compiles this file instead of
// http_source.cpp, so the library needs no libcurl. The schemes still recognise their names, so that
// callers route them to the transport, whose every call reports a clear error rather than trying to
// open "https://..." as a local file.
#include <string>

#include "io/http_transport.h"

namespace safeweights::http {
namespace {

Error without_http(const std::string& name) {
  return Error(ErrorKind::InvalidArgument,
               "safeweights was built without HTTP support (SAFEWEIGHTS_WITH_HTTP=OFF): cannot open URLs nor list remote folders")
      .with_file(name);
}

}  // namespace

Clock::time_point deadline_after(double /*timeout_s*/) { return Clock::time_point::max(); }

std::string seconds(double s) { return std::to_string(s) + " s"; }

Result<HttpOptions> request_options(const std::string& name, const HttpOptions& /*options*/, const char* /*ca_env*/) { return without_http(name); }

Result<SourcePtr> open_target(const std::string& name, Target /*target*/, const HttpOptions& /*resolved*/) { return without_http(name); }

Result<std::string> get_document(const std::string& name, Document /*what*/, const std::string& /*url*/, const Signing& /*signing*/,
                                 const HttpOptions& /*resolved*/, std::uint64_t /*cap*/, Clock::time_point /*deadline*/, std::string& /*link*/) {
  return without_http(name);
}

Result<std::string> post_document(const std::string& name, Document /*what*/, const std::string& /*url*/, const PostBody& /*body*/,
                                  const Signing& /*signing*/, const HttpOptions& /*resolved*/, std::uint64_t /*cap*/,
                                  Clock::time_point /*deadline*/) {
  return without_http(name);
}

std::optional<Origin> origin_of(const std::string& /*url*/) { return std::nullopt; }

bool has_authorization(const HttpOptions& /*options*/) { return false; }

}  // namespace safeweights::http
