// The gs:// scheme (io/scheme.h): objects of Google Cloud Storage buckets, read through the JSON API
// (docs/REMOTE.md, "Google Cloud Storage"). gs://BUCKET/OBJECT is opened by asking the object's
// metadata (its size and generation) and then reading {endpoint}/storage/v1/b/BUCKET/o/OBJECT
// ?alt=media&generation=N with ranged GETs: every read names the generation opened, so an object
// replaced while it is read is RemoteChanged, never a mix of two versions. Folders (gs://BUCKET/ and
// gs://BUCKET/PREFIX/) are listed with the objects list (delimiter '/', pageToken pages).
//
// Credentials (io/gs_credentials.h): an OAuth access token, ready in the environment or traded for
// application-default credentials, sent as a bearer token to the endpoint's origin only; else
// anonymous (public buckets). $STORAGE_EMULATOR_HOST, as Google's client libraries read it, replaces
// the endpoint (and, as they do, means anonymous unless credentials are named explicitly).

#include <cstdlib>
#include <optional>
#include <string>

#include "core/status_macros.h"
#include "io/gs_credentials.h"
#include "io/scheme.h"
#include "io/uri.h"
#include "io/posix_util.h"

namespace safeweights::io {
namespace {

constexpr const char* kEmulatorEnv = "STORAGE_EMULATOR_HOST";
constexpr const char* kDefaultEndpoint = "https://storage.googleapis.com";
// An object's metadata is a few KiB.
constexpr std::uint64_t kMaxMetadataBytes = 1u << 20;
// Cloud Storage's own limits: bucket names of 3-222 characters, object names of at most 1,024 bytes.
constexpr std::size_t kMaxBucketName = 222;
constexpr std::size_t kMaxObjectName = 1024;

struct GsLocation {
  std::string bucket;
  std::string object;  // empty: the bucket's root
};

// gs://BUCKET/OBJECT split; InvalidArgument for a bucket outside Cloud Storage's naming rules or an
// object name it cannot hold.
Result<GsLocation> parse_gs_name(std::string_view name) {
  auto bad = [&](const std::string& why) { return Error(ErrorKind::InvalidArgument, why + " (gs://BUCKET/OBJECT)").with_file(name); };
  std::string_view rest = name.substr(5);
  const std::size_t slash = rest.find('/');
  GsLocation loc{std::string(rest.substr(0, slash)), slash == std::string_view::npos ? std::string() : std::string(rest.substr(slash + 1))};
  bool ok = loc.bucket.size() >= 3 && loc.bucket.size() <= kMaxBucketName;
  for (char c : loc.bucket) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_');
  if (!ok) return bad("a bucket name is 3 to 222 characters of a-z, 0-9, '.', '-' and '_'");
  if (loc.object.size() > kMaxObjectName) return bad("an object name is at most 1,024 bytes");
  if (loc.object.find_first_of(std::string_view("\0\r\n", 3)) != std::string::npos) return bad("an object name cannot hold NUL, CR or LF");
  return loc;
}

// $STORAGE_EMULATOR_HOST's URL, else Cloud Storage's.
std::string endpoint() {
  std::string e = getenv_string(kEmulatorEnv);
  return e.empty() ? std::string(kDefaultEndpoint) : google_host_url(std::move(e));
}

// The credentials of a request (io/gs_credentials.h), an emulator's rule applied.
Result<GsCredentials> credentials(const HttpOptions& resolved) { return find_gs_credentials(resolved, !getenv_string(kEmulatorEnv).empty()); }

http::Signing signing_of(const GsCredentials& creds) {
  http::Signing signing;
  if (!creds.token.empty()) signing.headers.push_back("Authorization: Bearer " + creds.token);
  return signing;
}

class GsScheme final : public BucketScheme {
 public:
  std::string_view prefix() const override { return "gs://"; }

  Result<http::Target> target(const std::string& name, const HttpOptions& resolved) const override {
    SW_ASSIGN_OR_RETURN(GsLocation location, parse_gs_name(name));
    if (location.object.empty() || location.object.ends_with('/'))
      return Error(ErrorKind::InvalidArgument, "names a bucket or a folder, not an object: gs://BUCKET/OBJECT").with_file(name);
    SW_ASSIGN_OR_RETURN(GsCredentials creds, credentials(resolved));
    const http::Signing signing = signing_of(creds);
    const std::string url =
        endpoint() + "/storage/v1/b/" + uri::percent_encode(location.bucket, false) + "/o/" + uri::percent_encode(location.object, false);
    std::string link;
    auto body = http::get_document(name, http::Document::FileMetadata, url, signing, resolved, kMaxMetadataBytes,
                                   http::deadline_after(resolved.timeout_s), link);
    if (!body.is_ok()) return gs_refused(body.error(), creds);
    auto object = listing::parse_gs_object(*body);
    if (!object.is_ok()) return error_of(object).with_file(name);
    return http::Target{url + "?alt=media&generation=" + object->generation, signing, true};
  }

  Status list_pages(listing::Listing& listing, const std::string& name, const HttpOptions& resolved) const override {
    SW_ASSIGN_OR_RETURN(GsLocation location, parse_gs_name(name));
    if (!location.object.empty() && !location.object.ends_with('/'))
      return Error(ErrorKind::InvalidArgument, "names an object, not a folder: end a prefix with '/' (gs://BUCKET/PREFIX/)").with_file(name);
    SW_ASSIGN_OR_RETURN(GsCredentials creds, credentials(resolved));
    const std::string& prefix = location.object;
    const std::string base = endpoint() + "/storage/v1/b/" + uri::percent_encode(location.bucket, false) +
                             "/o?delimiter=%2F&maxResults=1000&prefix=" + uri::percent_encode(prefix, false);
    auto url_of = [&](const std::string& token) { return token.empty() ? base : base + "&pageToken=" + uri::percent_encode(token, false); };
    Status s = listing.follow_tokens(
        url_of, signing_of(creds), [&](std::string_view body) { return listing::parse_gs_page(body, prefix); }, prefix);
    if (!s.is_ok()) return gs_refused(std::move(s).error(), creds);
    return Status::ok();
  }

 protected:
  std::optional<std::string> object_of(std::string_view name) const override {
    auto location = parse_gs_name(name);
    if (!location.is_ok()) return std::nullopt;
    return std::move(location->object);
  }
};

}  // namespace

const Scheme& gs_scheme() {
  static const GsScheme scheme;
  return scheme;
}

}  // namespace safeweights::io
