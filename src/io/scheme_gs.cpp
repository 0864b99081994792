// The gs:// scheme (io/scheme.h): objects of Google Cloud Storage buckets, read through the JSON API
// (docs/REMOTE.md, "Google Cloud Storage"). gs://BUCKET/OBJECT is opened by asking the object's
// metadata (its size and generation) and then reading {endpoint}/storage/v1/b/BUCKET/o/OBJECT
// ?alt=media&generation=N with ranged GETs: every read names the generation opened, so an object
// replaced while it is read is RemoteChanged, never a mix of two versions. Folders (gs://BUCKET/ and
// gs://BUCKET/PREFIX/) are listed with the objects list (delimiter '/', pageToken pages).
//
// Credentials: a ready OAuth access token from $GOOGLE_OAUTH_ACCESS_TOKEN, else from the file named by
// $CLOUDSDK_AUTH_ACCESS_TOKEN_FILE (gcloud's), sent as a bearer token to the endpoint's origin only;
// else anonymous (public buckets). Application-default credentials (a refresh token or a service
// account's key) would need a token exchange this library does not make: a file of them is refused by
// name (EnvironmentFault), never silently ignored. $STORAGE_EMULATOR_HOST, as Google's client
// libraries read it, replaces the endpoint (and, as they do, means anonymous unless a token is given).

#include <cstdlib>
#include <optional>
#include <string>

#include "core/status_macros.h"
#include "core/strings.h"
#include "io/read_util.h"
#include "io/scheme.h"
#include "io/secrets.h"
#include "io/uri.h"

namespace safeweights::io {
namespace {

constexpr const char* kTokenEnv = "GOOGLE_OAUTH_ACCESS_TOKEN";
constexpr const char* kTokenFileEnv = "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE";
constexpr const char* kAdcEnv = "GOOGLE_APPLICATION_CREDENTIALS";
constexpr const char* kEmulatorEnv = "STORAGE_EMULATOR_HOST";
constexpr const char* kDefaultEndpoint = "https://storage.googleapis.com";
// An object's metadata is a few KiB; a credentials or token file is smaller still.
constexpr std::uint64_t kMaxMetadataBytes = 1u << 20;
constexpr std::uint64_t kMaxCredentialsFileBytes = 1u << 20;
// Cloud Storage's own limits: bucket names of 3-222 characters, object names of at most 1,024 bytes.
constexpr std::size_t kMaxBucketName = 222;
constexpr std::size_t kMaxObjectName = 1024;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

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

// $STORAGE_EMULATOR_HOST ("host:port" or a URL) without trailing slashes, else Cloud Storage's.
std::string endpoint() {
  std::string e = env(kEmulatorEnv);
  if (e.empty()) return kDefaultEndpoint;
  if (e.find("://") == std::string::npos) e = "http://" + e;
  while (e.ends_with('/')) e.pop_back();
  return e;
}

// The bearer token, and where it came from (for messages); an empty token: anonymous requests.
struct GsCredentials {
  std::string token;
  std::string from;
};

Error environment_fault(const std::string& message, const std::string& file) { return Error(ErrorKind::EnvironmentFault, message).with_file(file); }

Result<std::string> token_from_file(const std::string& path) {
  auto text = read_small_file(path, kMaxCredentialsFileBytes);
  if (!text.is_ok()) return environment_fault(std::string(kTokenFileEnv) + " names a file that cannot be read: " + text.error().message(), path);
  const std::string token(trim(std::string_view(*text).substr(0, text->find('\n')), " \t\r"));
  if (token.empty()) return environment_fault(std::string(kTokenFileEnv) + " names an empty file: no access token in it", path);
  return token;
}

// The application-default credentials file, when one is there: $GOOGLE_APPLICATION_CREDENTIALS (which
// must exist when set), else gcloud's (under $CLOUDSDK_CONFIG, else ~/.config/gcloud).
Result<std::optional<std::string>> adc_file() {
  if (std::string given = env(kAdcEnv); !given.empty()) return std::optional<std::string>(given);
  std::string dir = env("CLOUDSDK_CONFIG");
  if (dir.empty() && !env("HOME").empty()) dir = env("HOME") + "/.config/gcloud";
  if (dir.empty()) return std::optional<std::string>();
  const std::string path = dir + "/application_default_credentials.json";
  if (!open_file(path, FileBackend::Pread).is_ok()) return std::optional<std::string>();
  return std::optional<std::string>(path);
}

// EnvironmentFault naming the application-default credentials file and its type: each type needs a
// token exchange (OAuth refresh, a signed JWT, workload identity) that is not made here.
Error unsupported_adc(const std::string& path) {
  auto text = read_small_file(path, kMaxCredentialsFileBytes);
  if (!text.is_ok()) return environment_fault("application-default credentials cannot be read: " + text.error().message(), path);
  std::string type = listing::gs_credentials_type(*text);
  type = type.empty() ? std::string("without a \"type\"") : "of type \"" + secrets::scrub(type).substr(0, 64) + "\"";
  return environment_fault("application-default credentials " + type + " are not supported for gs:// (they need a token exchange): set " + kTokenEnv +
                               " (gcloud auth print-access-token) or " + kTokenFileEnv + ", or unset " + kAdcEnv +
                               " and move the file away for anonymous access to public buckets",
                           path);
}

// The credentials in the order the scheme's comment gives.
Result<GsCredentials> find_credentials() {
  GsCredentials creds;
  if (std::string token = env(kTokenEnv); !token.empty()) {
    creds = {std::move(token), kTokenEnv};
  } else if (std::string path = env(kTokenFileEnv); !path.empty()) {
    SW_ASSIGN_OR_RETURN(creds.token, token_from_file(path));
    creds.from = std::string(kTokenFileEnv) + " (" + path + ")";
  } else if (env(kEmulatorEnv).empty()) {
    SW_ASSIGN_OR_RETURN(std::optional<std::string> adc, adc_file());
    if (adc) return unsupported_adc(*adc);
    return creds;  // anonymous
  } else {
    return creds;  // an emulator: anonymous, as Google's client libraries make it
  }
  secrets::remember(creds.token);
  if (creds.token.find_first_of("\r\n") != std::string::npos)
    return environment_fault("the access token from " + creds.from + " contains a line break", "");
  return creds;
}

http::Signing signing_of(const GsCredentials& creds, const HttpOptions& options) {
  http::Signing signing;
  if (!creds.token.empty() && !http::has_authorization(options)) signing.headers.push_back("Authorization: Bearer " + creds.token);
  return signing;
}

// A refusal of the service, with what was (or was not) sent: the one hint a 401 or 403 needs.
Error refused(Error error, const GsCredentials& creds) {
  if (error.kind() != ErrorKind::HttpError) return error;
  const std::string& m = error.message();
  if (!m.starts_with("HTTP 401") && !m.starts_with("HTTP 403")) return error;
  const std::string hint = creds.token.empty() ? std::string("; no credentials were sent: set ") + kTokenEnv + " or " + kTokenFileEnv
                                               : "; the access token from " + creds.from + " was sent";
  return Error(error.kind(), m + hint).with_file(error.context().file);
}

class GsScheme final : public BucketScheme {
 public:
  std::string_view prefix() const override { return "gs://"; }

  Result<http::Target> target(const std::string& name, const HttpOptions& resolved) const override {
    SW_ASSIGN_OR_RETURN(GsLocation location, parse_gs_name(name));
    if (location.object.empty() || location.object.ends_with('/'))
      return Error(ErrorKind::InvalidArgument, "names a bucket or a folder, not an object: gs://BUCKET/OBJECT").with_file(name);
    SW_ASSIGN_OR_RETURN(GsCredentials creds, find_credentials());
    const http::Signing signing = signing_of(creds, resolved);
    const std::string url =
        endpoint() + "/storage/v1/b/" + uri::percent_encode(location.bucket, false) + "/o/" + uri::percent_encode(location.object, false);
    std::string link;
    auto body = http::get_document(name, http::Document::FileMetadata, url, signing, resolved, kMaxMetadataBytes,
                                   http::deadline_after(resolved.timeout_s), link);
    if (!body.is_ok()) return refused(body.error(), creds);
    auto object = listing::parse_gs_object(*body);
    if (!object.is_ok()) return error_of(object).with_file(name);
    return http::Target{url + "?alt=media&generation=" + object->generation, signing, true};
  }

  Status list_pages(listing::Listing& listing, const std::string& name, const HttpOptions& resolved) const override {
    SW_ASSIGN_OR_RETURN(GsLocation location, parse_gs_name(name));
    if (!location.object.empty() && !location.object.ends_with('/'))
      return Error(ErrorKind::InvalidArgument, "names an object, not a folder: end a prefix with '/' (gs://BUCKET/PREFIX/)").with_file(name);
    SW_ASSIGN_OR_RETURN(GsCredentials creds, find_credentials());
    const std::string& prefix = location.object;
    const std::string base = endpoint() + "/storage/v1/b/" + uri::percent_encode(location.bucket, false) +
                             "/o?delimiter=%2F&maxResults=1000&prefix=" + uri::percent_encode(prefix, false);
    auto url_of = [&](const std::string& token) { return token.empty() ? base : base + "&pageToken=" + uri::percent_encode(token, false); };
    Status s = listing.follow_tokens(
        url_of, signing_of(creds, resolved), [&](std::string_view body) { return listing::parse_gs_page(body, prefix); }, prefix);
    if (!s.is_ok()) return refused(std::move(s).error(), creds);
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
