// The gs:// scheme's credentials (io/scheme_gs.cpp; docs/REMOTE.md, "Google Cloud Storage"): where
// its bearer token comes from, in the order of docs/REMOTE.md's table, and the two token exchanges
// application-default credentials need without a signing library: a user's refresh token (what
// `gcloud auth application-default login` writes) traded at the OAuth token endpoint, and the token
// of the metadata server when $GCE_METADATA_HOST names one. Every request goes through the one HTTP
// transport (io/http_transport.h: its deadlines, retries and cancellation), and every credential
// read or received is registered with the scrubber (io/secrets.h). Internal to src/io.
//
// Thread safety: reentrant. The tokens an exchange returns are kept for the process, under one lock
// held through the exchange, so that threads asking at once share one exchange.
#pragma once

#include <string>

#include "safeweights/error.h"
#include "safeweights/http.h"

namespace safeweights::io {

// The bearer token the requests carry, and what it is, for messages.
struct GsCredentials {
  std::string token;  // empty: no token of ours is sent
  std::string sent;   // "the access token from GOOGLE_OAUTH_ACCESS_TOKEN", ...; empty: nothing was sent
};

// The credentials for a request under `resolved` (http::request_options()): nothing when the caller's
// headers hold an Authorization header; else the first of $GOOGLE_OAUTH_ACCESS_TOKEN,
// $CLOUDSDK_AUTH_ACCESS_TOKEN_FILE, the application-default credentials file, the metadata server at
// $GCE_METADATA_HOST; else anonymous. Under an emulator (`emulator`: $STORAGE_EMULATOR_HOST is set)
// only what is named explicitly counts: gcloud's own credentials file is not looked for.
// EnvironmentFault naming the file for credentials that cannot be used or that the token endpoint
// refuses; the transport's errors (IoError, Timeout, ...) for an exchange that could not be made.
Result<GsCredentials> find_gs_credentials(const HttpOptions& resolved, bool emulator);

// A host a Google setting names ($STORAGE_EMULATOR_HOST, $GCE_METADATA_HOST), "host:port" or a URL, as
// Google's libraries read it: a URL (http:// when no scheme is given) without trailing slashes.
std::string google_host_url(std::string host);

// A 401 or 403 of the service with what was (or was not) sent: the one hint such a refusal needs.
// Other errors are returned as they are.
Error gs_refused(Error error, const GsCredentials& creds);

}  // namespace safeweights::io
