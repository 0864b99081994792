// The gs:// scheme's credentials (io/gs_credentials.h).

#include "io/gs_credentials.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "core/status_macros.h"
#include "core/strings.h"
#include "io/http_transport.h"
#include "io/read_util.h"
#include "io/remote_listing.h"
#include "io/secrets.h"
#include "io/uri.h"
#include "io/posix_util.h"

namespace safeweights::io {
namespace {

constexpr const char* kTokenEnv = "GOOGLE_OAUTH_ACCESS_TOKEN";
constexpr const char* kTokenFileEnv = "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE";
constexpr const char* kAdcEnv = "GOOGLE_APPLICATION_CREDENTIALS";
constexpr const char* kMetadataHostEnv = "GCE_METADATA_HOST";
// Where Google's auth libraries trade a refresh token when the file names no "token_uri".
constexpr const char* kDefaultTokenUri = "https://oauth2.googleapis.com/token";
constexpr const char* kMetadataTokenPath = "/computeMetadata/v1/instance/service-accounts/default/token";
// A credentials or token file, a token endpoint's reply: a few KiB.
constexpr std::uint64_t kMaxCredentialsFileBytes = 1u << 20;
constexpr std::uint64_t kMaxTokenReplyBytes = 1u << 20;
// A token with less life left than this is traded again: the requests it signs must not outlive it.
constexpr auto kRefreshMargin = std::chrono::seconds(60);
// expires_in is capped at a year, so that the expiry cannot overflow the clock.
constexpr std::uint64_t kMaxExpiresIn = 365ull * 24 * 3600;

using Clock = http::Clock;

Error environment_fault(const std::string& message, const std::string& file) { return Error(ErrorKind::EnvironmentFault, message).with_file(file); }

// The tokens the exchanges returned, by what was traded for them (the token URI and refresh token, or
// the metadata server's URL), for the life of the process.
class TokenCache {
 public:
  // The token kept under `key` while more than kRefreshMargin of its life is left, else the token
  // `exchange` returns, kept (and registered with the scrubber).
  Result<std::string> get(const std::string& key, const std::function<Result<listing::GsAccessToken>()>& exchange) {
    std::lock_guard lock(mu_);
    if (auto it = tokens_.find(key); it != tokens_.end() && Clock::now() + kRefreshMargin < it->second.expiry) return it->second.token;
    const Clock::time_point asked = Clock::now();
    SW_ASSIGN_OR_RETURN(listing::GsAccessToken reply, exchange());
    secrets::remember(reply.access_token);
    tokens_[key] = {reply.access_token, asked + std::chrono::seconds(std::min(reply.expires_in, kMaxExpiresIn))};
    return std::move(reply.access_token);
  }

 private:
  struct Kept {
    std::string token;
    Clock::time_point expiry;
  };
  std::mutex mu_;
  std::map<std::string, Kept> tokens_;
};

TokenCache& token_cache() {
  static TokenCache cache;
  return cache;
}

// The options of a token request: the caller's deadline, retries and CA bundle, none of the caller's
// headers (they are meant for the storage service, not for the token's issuer).
HttpOptions token_request_options(const HttpOptions& resolved) {
  HttpOptions options = resolved;
  options.headers.clear();
  return options;
}

// A failed exchange: a refusal (HTTP 4xx) is EnvironmentFault with what to do, naming `file`; an
// exchange that could not be made keeps the transport's kind, with `what` said.
Error exchange_failed(const Error& error, const std::string& what, const std::string& remedy, const std::string& file) {
  const Error clean = secrets::scrub(error);
  if (clean.kind() == ErrorKind::HttpError && clean.message().starts_with("HTTP 4"))
    return environment_fault(what + " was refused (" + clean.message() + "): " + remedy, file);
  return Error(clean.kind(), what + " failed: " + clean.message()).with_file(file);
}

Result<listing::GsAccessToken> token_reply(const Result<std::string>& body, const std::string& what, const std::string& remedy,
                                           const std::string& file) {
  if (!body.is_ok()) return exchange_failed(body.error(), what, remedy, file);
  auto reply = listing::parse_gs_access_token(*body);
  if (!reply.is_ok()) return Error(ErrorKind::HttpError, what + ": " + reply.error().message()).with_file(file);
  return reply;
}

// The token endpoint of an authorized_user file: https, or http on this machine only (a stand-in), so
// that a refresh token and client secret never cross a network in clear.
Status check_token_uri(const std::string& uri, const std::string& path) {
  const std::optional<http::Origin> origin = http::origin_of(uri);
  const bool loopback = origin && (origin->host == "127.0.0.1" || origin->host == "localhost" || origin->host == "[::1]" || origin->host == "::1");
  if (origin && (origin->scheme == "https" || (origin->scheme == "http" && loopback))) return Status::ok();
  return environment_fault("application-default credentials with a \"token_uri\" that is not an https URL (or http on this machine): " +
                               secrets::scrub(uri).substr(0, 200),
                           path);
}

// A user's refresh token traded at the file's token endpoint (grant_type=refresh_token, RFC 6749 6).
Result<GsCredentials> from_authorized_user(const listing::GsCredentialsFile& file, const std::string& path, const HttpOptions& resolved) {
  secrets::remember(file.client_secret);
  secrets::remember(file.refresh_token);
  if (file.client_id.empty() || file.client_secret.empty() || file.refresh_token.empty()) {
    return environment_fault(
        "application-default credentials of type \"authorized_user\" without a string \"client_id\", \"client_secret\" and \"refresh_token\"", path);
  }
  const std::string uri = file.token_uri.empty() ? std::string(kDefaultTokenUri) : file.token_uri;
  SW_RETURN_IF_ERROR(check_token_uri(uri, path));
  const http::PostBody form{"application/x-www-form-urlencoded", "grant_type=refresh_token&client_id=" + uri::percent_encode(file.client_id, false) +
                                                                     "&client_secret=" + uri::percent_encode(file.client_secret, false) +
                                                                     "&refresh_token=" + uri::percent_encode(file.refresh_token, false)};
  const std::string what = "the refresh of the application-default credentials at " + secrets::scrub(uri);
  const std::string remedy = "run `gcloud auth application-default login` again, or set " + std::string(kTokenEnv);
  const HttpOptions options = token_request_options(resolved);
  auto token = token_cache().get(uri + '\n' + file.client_id + '\n' + file.refresh_token, [&]() {
    return token_reply(
        http::post_document(path, http::Document::AccessToken, uri, form, {}, options, kMaxTokenReplyBytes, http::deadline_after(options.timeout_s)),
        what, remedy, path);
  });
  if (!token.is_ok()) return error_of(token);
  return GsCredentials{std::move(*token), "the access token from the application-default credentials (" + path + ")"};
}

// The default service account's token from the metadata server (Compute Engine, GKE, Cloud Run).
Result<GsCredentials> from_metadata_server(const std::string& host, const HttpOptions& resolved) {
  const std::string url = google_host_url(host) + kMetadataTokenPath;
  http::Signing signing;
  signing.headers.push_back("Metadata-Flavor: Google");
  const std::string what = "the token request to the metadata server (" + std::string(kMetadataHostEnv) + ")";
  const std::string remedy = "give the instance a service account with the storage scope, or set " + std::string(kTokenEnv);
  const HttpOptions options = token_request_options(resolved);
  auto token = token_cache().get("metadata\n" + url, [&]() {
    std::string link;
    return token_reply(http::get_document(url, http::Document::AccessToken, url, signing, options, kMaxTokenReplyBytes,
                                          http::deadline_after(options.timeout_s), link),
                       what, remedy, url);
  });
  if (!token.is_ok()) return error_of(token);
  return GsCredentials{std::move(*token), "the access token from the metadata server (" + std::string(kMetadataHostEnv) + ")"};
}

// EnvironmentFault naming the file and its type: a service account's key needs an RS256-signed JWT,
// workload identity an exchange with Google's security token service; neither is made here.
Error unsupported_type(const std::string& type, const std::string& path) {
  const std::string named = type.empty() ? std::string("without a \"type\"") : "of type \"" + secrets::scrub(type).substr(0, 64) + "\"";
  const std::string why = type == "service_account"    ? "a service account's key needs a signed JWT"
                          : type == "external_account" ? "workload identity federation needs a token exchange with Google's STS"
                                                       : "a type this library does not know";
  const std::string how =
      type == "service_account" ? "gcloud auth print-access-token --impersonate-service-account=EMAIL" : "gcloud auth print-access-token";
  return environment_fault("application-default credentials " + named + " are not supported for gs:// (" + why + "): set " + kTokenEnv + " (" + how +
                               ") or " + kTokenFileEnv + ", or unset " + kAdcEnv + " and move the file away for anonymous access to public buckets",
                           path);
}

Result<GsCredentials> from_adc_file(const std::string& path, const HttpOptions& resolved) {
  auto text = read_small_file(path, kMaxCredentialsFileBytes);
  if (!text.is_ok()) return environment_fault("application-default credentials cannot be read: " + text.error().message(), path);
  const listing::GsCredentialsFile file = listing::parse_gs_credentials(*text);
  if (file.type == "authorized_user") return from_authorized_user(file, path, resolved);
  return unsupported_type(file.type, path);
}

Result<std::string> token_from_file(const std::string& path) {
  auto text = read_small_file(path, kMaxCredentialsFileBytes);
  if (!text.is_ok()) return environment_fault(std::string(kTokenFileEnv) + " names a file that cannot be read: " + text.error().message(), path);
  const std::string token(trim(std::string_view(*text).substr(0, text->find('\n')), " \t\r"));
  if (token.empty()) return environment_fault(std::string(kTokenFileEnv) + " names an empty file: no access token in it", path);
  return token;
}

// The application-default credentials file, when one is there: $GOOGLE_APPLICATION_CREDENTIALS (which
// must exist when set), else, but for an emulator, gcloud's (under $CLOUDSDK_CONFIG, else
// ~/.config/gcloud).
std::optional<std::string> adc_file(bool emulator) {
  if (std::string given = getenv_string(kAdcEnv); !given.empty()) return given;
  if (emulator) return std::nullopt;
  std::string dir = getenv_string("CLOUDSDK_CONFIG");
  if (dir.empty() && !getenv_string("HOME").empty()) dir = getenv_string("HOME") + "/.config/gcloud";
  if (dir.empty()) return std::nullopt;
  const std::string path = dir + "/application_default_credentials.json";
  if (!open_file(path, FileBackend::Pread).is_ok()) return std::nullopt;
  return path;
}

// The credentials after the caller's header and the two ready tokens: an exchange, or anonymous.
Result<GsCredentials> exchanged_credentials(const HttpOptions& resolved, bool emulator) {
  if (std::optional<std::string> adc = adc_file(emulator)) return from_adc_file(*adc, resolved);
  if (std::string host = getenv_string(kMetadataHostEnv); !host.empty()) return from_metadata_server(host, resolved);
  return GsCredentials{};  // anonymous
}

}  // namespace

Result<GsCredentials> find_gs_credentials(const HttpOptions& resolved, bool emulator) {
  if (http::has_authorization(resolved)) return GsCredentials{"", "the Authorization header given (--header)"};
  GsCredentials creds;
  if (std::string token = getenv_string(kTokenEnv); !token.empty()) {
    creds = {std::move(token), std::string("the access token from ") + kTokenEnv};
  } else if (std::string path = getenv_string(kTokenFileEnv); !path.empty()) {
    SW_ASSIGN_OR_RETURN(creds.token, token_from_file(path));
    creds.sent = std::string("the access token from ") + kTokenFileEnv + " (" + path + ")";
  } else {
    SW_ASSIGN_OR_RETURN(creds, exchanged_credentials(resolved, emulator));
  }
  secrets::remember(creds.token);
  if (creds.token.find_first_of("\r\n") != std::string::npos) return environment_fault(creds.sent + " contains a line break", "");
  return creds;
}

std::string google_host_url(std::string host) {
  if (host.find("://") == std::string::npos) host = "http://" + host;
  while (host.ends_with('/')) host.pop_back();
  return host;
}

Error gs_refused(Error error, const GsCredentials& creds) {
  if (error.kind() != ErrorKind::HttpError) return error;
  const std::string& m = error.message();
  if (!m.starts_with("HTTP 401") && !m.starts_with("HTTP 403")) return error;
  const std::string hint =
      creds.sent.empty() ? std::string("; no credentials were sent: set ") + kTokenEnv + " or " + kTokenFileEnv : "; " + creds.sent + " was sent";
  return Error(error.kind(), m + hint).with_file(error.context().file);
}

}  // namespace safeweights::io
