// The HTTP transport the remote schemes (io/scheme.h) read through: ranged GETs, the block cache,
// parallel chunks, retries, deadlines and the pinning of a file's version (io/http_source.cpp), and the
// one request of a whole document (a listing page, an object's metadata, an OAuth token). It knows no scheme: a scheme
// says where a name's requests go and how they are authenticated (a Target), and the transport sends
// them under the rules of safeweights/http.h. Internal to src/io. Without the http component
// (io/http_disabled.cpp) every call reports that the library was built without HTTP support.
//
// Thread safety: reentrant; a source opened here is safe to share (safeweights/http.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/http.h"
#include "safeweights/source.h"

namespace safeweights::http {

using Clock = std::chrono::steady_clock;

// How the requests for a name are authenticated beyond the caller's headers. Every field is sent to
// the request URL's own origin only, never to another a redirect leads to.
struct Signing {
  std::string sigv4;                 // CURLOPT_AWS_SIGV4's provider, "aws:amz:REGION:s3"; empty: no signature
  std::string user, password;        // the access key id and secret key; secret
  std::vector<std::string> headers;  // "Name: value" lines: signed x-amz-* headers, a bearer token; secret
};

// Where the reads of a remote file go.
struct Target {
  std::string url;
  Signing signing;
  // The URL names one version of the file (gs:// pins the generation): a 404 after the opening
  // request means that version is gone, RemoteChanged rather than FileNotFound.
  bool version_pinned = false;
};

// The deadline `timeout_s` seconds from now (HttpOptions::timeout_s, resolved: 0 is none).
Clock::time_point deadline_after(double timeout_s);

// "1.5 s", "600 s": a limit as the user gave it, for messages.
std::string seconds(double s);

// The options every request for `name` runs under: the deadline (HttpOptions::timeout_s, else
// $SAFEWEIGHTS_HTTP_TIMEOUT, else the default) and the CA bundle (the caller's, else `ca_env` when
// given and set, else $CURL_CA_BUNDLE, else $SSL_CERT_FILE). IoError when libcurl cannot be loaded.
Result<HttpOptions> request_options(const std::string& name, const HttpOptions& options, const char* ca_env);

// Opens `target` as the source `name` (what name() and messages say), with the opening request.
// `resolved` comes from request_options().
Result<SourcePtr> open_target(const std::string& name, Target target, const HttpOptions& resolved);

// What a document is, for messages: a page of a folder's listing (404: "no such remote folder"), a
// file's metadata (404: "no such remote file"), or an access token from a token endpoint.
enum class Document { ListingPage, FileMetadata, AccessToken };

// One GET of a whole document at `url` (no Range), at most `cap` bytes, with the redirects and retries
// of every request, by `deadline`; `link` gets the response's Link header. FileNotFound for 404/410;
// errors name `name`.
Result<std::string> get_document(const std::string& name, Document what, const std::string& url, const Signing& signing, const HttpOptions& resolved,
                                 std::uint64_t cap, Clock::time_point deadline, std::string& link);

// The body of a document asked for with a POST rather than a GET (an OAuth token exchange's form).
// It may hold credentials: the caller registers them (io/secrets.h) before the request.
struct PostBody {
  std::string content_type;  // "application/x-www-form-urlencoded"
  std::string data;
};

// get_document() with a POST of `body`: the same caps, retries and deadline. A redirect is not
// followed (a POST's body is not resent to another URL): it is HttpError.
Result<std::string> post_document(const std::string& name, Document what, const std::string& url, const PostBody& body, const Signing& signing,
                                  const HttpOptions& resolved, std::uint64_t cap, Clock::time_point deadline);

// The scheme, host and port of a URL, lower-cased, the port filled in from the scheme (libcurl's URL
// parser). nullopt for what is not a URL.
struct Origin {
  std::string scheme, host, port;
  bool operator==(const Origin&) const = default;
};
std::optional<Origin> origin_of(const std::string& url);

// Whether the caller's headers (HttpOptions::headers) hold an Authorization header: a scheme's own
// credentials then stay unsent.
bool has_authorization(const HttpOptions& options);

}  // namespace safeweights::http
