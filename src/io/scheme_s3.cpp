// The s3:// scheme (io/scheme.h; safeweights/s3.h): s3://BUCKET/KEY names, requests signed with
// SigV4 by libcurl after the configuration chain (io/s3_config.cpp), folders listed with
// ListObjectsV2 (pages read by io/s3_listing.cpp).

#include "core/status_macros.h"
#include "io/scheme.h"
#include "io/uri.h"
#include "safeweights/s3.h"

namespace safeweights {

bool is_s3_url(std::string_view s) noexcept { return io::s3_scheme().owns(s); }

Result<S3Location> parse_s3_url(std::string_view url) {
  if (!is_s3_url(url)) return Error(ErrorKind::InvalidArgument, "not an s3:// URL").with_file(url);
  std::string_view rest = url.substr(5);
  const std::size_t slash = rest.find('/');
  S3Location loc;
  loc.bucket = std::string(rest.substr(0, slash));
  if (slash != std::string_view::npos) loc.key = std::string(rest.substr(slash + 1));
  // S3's rules, with the legacy ones (upper case, '_', up to 255 characters) that old buckets still have.
  bool ok = !loc.bucket.empty() && loc.bucket.size() <= 255;
  for (char c : loc.bucket) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_');
  }
  if (!ok) {
    return Error(ErrorKind::InvalidArgument, "an s3:// URL needs a bucket name of letters, digits, '.', '-' and '_': s3://BUCKET/KEY").with_file(url);
  }
  if (loc.key.find('\0') != std::string::npos) return Error(ErrorKind::InvalidArgument, "an S3 key cannot hold a NUL byte").with_file(url);
  return loc;
}

namespace io {
namespace {

// How libcurl signs the requests of an S3 request's configuration (none for anonymous access).
http::Signing s3_signing(const S3Request& request) {
  http::Signing signing;
  if (!request.signed_request) return signing;
  signing.sigv4 = "aws:amz:" + request.region + ":s3";
  signing.user = request.access_key_id;
  signing.password = request.secret_access_key;
  // S3 wants the payload's hash in a signed header; a GET has an empty payload.
  signing.headers.push_back("x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  if (!request.session_token.empty()) signing.headers.push_back("x-amz-security-token: " + request.session_token);
  return signing;
}

class S3Scheme final : public BucketScheme {
 public:
  std::string_view prefix() const override { return "s3://"; }
  const char* ca_bundle_env() const override { return "AWS_CA_BUNDLE"; }

  Result<http::Target> target(const std::string& name, const HttpOptions& resolved) const override {
    SW_ASSIGN_OR_RETURN(S3Location location, parse_s3_url(name));
    if (location.key.empty() || location.key.back() == '/') {
      return Error(ErrorKind::InvalidArgument, "names a bucket or a folder, not an object: s3://BUCKET/KEY").with_file(name);
    }
    SW_ASSIGN_OR_RETURN(S3Request request, resolve_s3_request(location, resolved.s3));
    return http::Target{request.url, s3_signing(request), false};
  }

  // The pages of ListObjectsV2 under the folder's prefix, one level deep (delimiter '/').
  Status list_pages(listing::Listing& listing, const std::string& name, const HttpOptions& resolved) const override {
    SW_ASSIGN_OR_RETURN(S3Location location, parse_s3_url(name));
    if (!location.key.empty() && !location.key.ends_with('/'))
      return Error(ErrorKind::InvalidArgument, "names an object, not a folder: end a prefix with '/' (s3://BUCKET/PREFIX/)").with_file(name);
    const std::string prefix = location.key;
    location.key.clear();  // the bucket's URL
    auto request = resolve_s3_request(location, resolved.s3);
    if (!request.is_ok()) return error_of(request).with_file(name);
    // The query in SigV4's canonical form already (names sorted, values percent-encoded), whatever
    // libcurl's version does to it before signing.
    auto url_of = [&](const std::string& token) {
      std::string query = token.empty() ? std::string() : "continuation-token=" + uri::percent_encode(token, false) + "&";
      return request->url + "?" + query + "delimiter=%2F&encoding-type=url&list-type=2&prefix=" + uri::percent_encode(prefix, false);
    };
    return listing.follow_tokens(
        url_of, s3_signing(*request), [&](std::string_view body) { return listing::parse_s3_page(body, prefix); }, prefix);
  }

 protected:
  std::optional<std::string> object_of(std::string_view name) const override {
    auto location = parse_s3_url(name);
    if (!location.is_ok()) return std::nullopt;
    return std::move(location->key);
  }
};

}  // namespace

const Scheme& s3_scheme() {
  static const S3Scheme scheme;
  return scheme;
}

}  // namespace io
}  // namespace safeweights
