// The credentials this process holds, and the one scrubber of every error that quotes a server.
//
// A server's words are hostile input that messages quote for people (S3's <Message>, the Hub's
// X-Error-Message, headers, libcurl's text, a listing page): a hostile or careless service can reflect
// the request's credentials in them, and the message then reaches stderr, --json output, logs and
// Python exceptions. So each credential is registered where it is loaded (the S3 configuration chain:
// access key id, secret key, session token; the Hub token; Cloud Storage's tokens, client secret and
// refresh token; the caller's credential headers), and every error leaving the HTTP layer goes through
// scrub(): each occurrence of a credential, as it is, percent-encoded, JSON- or XML-escaped, or in
// base64, becomes kRedacted, and so does the value of a signature query parameter (a presigned URL's
// X-Amz-Signature, ...) wherever a URL is quoted.
//
// Thread safety: every function may be called from any thread (the registry is locked).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "safeweights/error.h"

namespace safeweights::secrets {

inline constexpr std::string_view kRedacted = "<redacted>";
// Values shorter than this are not registered: every credential the services issue is longer (an AWS
// access key id has 20 characters, a Hub token 37), and redacting a short word wherever its letters
// occur would garble the messages.
inline constexpr std::size_t kMinSecretBytes = 8;

// Registers a credential: from now on scrub() redacts it. Empty and short values are ignored;
// registering a value twice costs nothing.
void remember(std::string_view secret);

// Registers the credentials of a request header the caller gives ("Name: value"): the value of
// Authorization, Proxy-Authorization, Cookie and of any header whose name speaks of a token, key,
// secret, session, signature, credential, password or auth, and of "Scheme credentials" values the
// credentials alone too.
void remember_header(std::string_view header);

// `text` with every registered credential and every signature query value replaced by kRedacted.
std::string scrub(std::string_view text);

// The error with its message and the names in its context scrubbed; kind, rule and offset kept.
Error scrub(const Error& error);
Status scrub(Status status);

}  // namespace safeweights::secrets
