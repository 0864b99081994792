// safeweights/s3.h — s3://bucket/key names: where they point and how requests to them are signed.
//
// An s3:// name is read like an https:// URL (safeweights/http.h: ranged GETs, parallel chunks, the
// object's ETag pinned for the whole read, retries, deadlines); this header says how the name becomes
// a request: which endpoint and addressing style, which region, which credentials. Requests are signed
// with AWS Signature Version 4 by libcurl (CURLOPT_AWS_SIGV4), never by code of ours.
//
// Configuration is looked up in the order the AWS SDKs use (docs/REMOTE.md has the full table):
//   credentials  S3Options::anonymous (none), AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN),
//                then the profile (S3Options::profile, AWS_PROFILE, "default") in the shared credentials
//                file (AWS_SHARED_CREDENTIALS_FILE, ~/.aws/credentials), then in the config file
//                (AWS_CONFIG_FILE, ~/.aws/config);
//   region       S3Options::region, AWS_REGION, AWS_DEFAULT_REGION, the profile's region, "us-east-1";
//   endpoint     S3Options::endpoint_url, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
//                endpoint_url (all but the first ignored when AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is
//                true), else AWS: https://s3.REGION.amazonaws.com.
// Secrets are never put in an error message, a log line or a process title.
//
// Thread safety: the functions are reentrant; they read the environment and the AWS files when called.
#pragma once

#include <string>
#include <string_view>

#include "safeweights/error.h"
#include "safeweights/export.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

// How requests for s3:// names are made. Empty fields are looked up as the header says.
struct S3Options {
  std::string region;
  std::string endpoint_url;  // "https://host[:port][/path]" or "http://..." (an S3-compatible server)
  std::string profile;
  bool anonymous = false;  // unsigned requests, for public buckets; no credentials are looked up
  // "virtual": https://BUCKET.ENDPOINT/KEY; "path": https://ENDPOINT/BUCKET/KEY. Empty: the profile's
  // s3 addressing_style, else virtual-hosted on AWS for bucket names that are valid host labels, path
  // style otherwise and on any other endpoint (S3-compatible servers serve path style).
  std::string addressing_style;
};

// True when `s` starts with s3:// (scheme case-insensitive).
bool is_s3_url(std::string_view s) noexcept;

// s3://BUCKET/KEY split. The key may be empty (the bucket's root) and holds any bytes but NUL; the
// bucket must follow S3's naming rules (3-63 characters of a-z 0-9 . -). InvalidArgument otherwise.
struct S3Location {
  std::string bucket;
  std::string key;
};
Result<S3Location> parse_s3_url(std::string_view url);

// Where a request for an s3:// name goes and how it is signed, after the configuration chain.
struct S3Request {
  std::string url;       // the object's http(s) URL, key percent-encoded as SigV4 expects
  std::string region;    // the signing region
  std::string endpoint;  // the endpoint the URL was built on (for messages)
  bool signed_request = false;
  std::string access_key_id;      // when signed
  std::string secret_access_key;  // when signed; secret
  std::string session_token;      // optional; secret
  std::string credentials_from;   // where the credentials were found (for messages): "environment", "profile NAME in FILE"
};

// Resolves the configuration chain for `location` (the object's URL is built for its key; an empty key
// gives the bucket's URL, for listing). EnvironmentFault when the environment cannot serve the
// request: no credentials where requests must be signed (the message lists where it looked and names
// S3Options::anonymous), partial credentials, a profile in neither AWS file, a malformed AWS file;
// NotSupported for a profile of a kind not read here (SSO, a role, a credential process);
// InvalidArgument for a malformed region, endpoint or addressing style (naming the variable or file).
// No message repeats a secret. The credentials found are remembered, so that no error of this library
// repeats them (docs/REMOTE.md, "Credentials in messages").
Result<S3Request> resolve_s3_request(const S3Location& location, const S3Options& options = {});

SAFEWEIGHTS_API_END
}  // namespace safeweights
