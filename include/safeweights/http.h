// safeweights/http.h — remote files: a ByteSource over HTTP(S) Range requests (libcurl).
//
// open_url() returns a source that every reader (safetensors, DDUF, slices) uses unchanged. It never
// downloads more than a read asks for plus a bounded read-ahead: small reads go through a small cache
// of aligned blocks (so the header of a safetensors file or the end records of a ZIP cost one request),
// large reads and read_ranges() are split into chunks kept in flight on several reused connections and
// written straight into the caller's memory. Every response is checked: 206 with a Content-Range that
// is exactly the range asked for and the same total size, and the same ETag / Last-Modified as the
// first response; a file that changes between requests fails with RemoteChanged instead of mixing
// bytes. A server that ignores Range (200 with the whole body) is read as a stream up to the wanted
// bytes, then the transfer is cut. Connection errors, dropped bodies and 5xx are retried a bounded
// number of times with exponential backoff, resuming after the bytes already received. Every request
// has a deadline and a minimum transfer rate (Timeout when missed), and every transfer polls
// check_cancelled() (safeweights/cancel.h), so no read outlives its bounds or a Ctrl-C. Redirects are
// followed (at most 10); headers given by the caller (credentials) are sent to the origin of the URL
// only, never to another scheme, host or port a redirect leads to; HF_TOKEN only over https.
// docs/HTTP.md has the details.
//
// Thread safety: the source is immutable in what it returns; its cache and connection pool are
// internally synchronised, so every method may be called concurrently. HttpStats counters are atomic.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/s3.h"
#include "safeweights/source.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

// True when `s` is a remote name: a name of one of the source registry's remote schemes, http://,
// https://, s3:// (safeweights/s3.h), gs:// (docs/REMOTE.md) or hf:// (safeweights/hub.h), scheme
// case-insensitive. The one question callers ask instead of testing a name's prefix.
bool is_url(std::string_view s) noexcept;

// What a source (or several sharing one HttpStats) did on the network.
struct HttpStats {
  std::atomic<std::uint64_t> requests{0};        // HTTP requests sent, redirects and retries included
  std::atomic<std::uint64_t> bytes_received{0};  // response body bytes received (discarded ones included)
  std::atomic<std::uint64_t> retries{0};         // requests repeated after a connection error, cut body or 5xx
  std::atomic<std::uint64_t> redirects{0};       // redirects followed
  std::atomic<std::uint64_t> unvalidated{0};     // sources opened with no version pinned and no ETag nor Last-Modified
};

// The environment variable that sets HttpOptions::timeout_s when the caller leaves it unset: seconds
// (a decimal number; 0: no deadline).
inline constexpr const char* kHttpTimeoutEnv = "SAFEWEIGHTS_HTTP_TIMEOUT";
// The deadline of one request when neither the caller nor the environment sets one.
inline constexpr double kDefaultHttpTimeoutS = 600;

struct HttpOptions {
  // Extra request headers, "Name: value". Sent only to the URL's own origin (scheme, host, port).
  std::vector<std::string> headers;
  // When no Authorization header is given and a Hub token is found (hf_token(): HF_TOKEN, else the token
  // file), send "Authorization: Bearer TOKEN", but only over https and only to huggingface.co, its
  // subdomains, or the origin of $HF_ENDPOINT: a token is never sent to an arbitrary URL nor in clear
  // text. (Headers given here are the caller's choice: they are sent over http too.)
  bool use_hf_token = true;
  // How s3:// names are reached and signed (safeweights/s3.h); unused for other names.
  S3Options s3;
  long connect_timeout_ms = 10'000;
  // The deadline of one request (a block, or one chunk of a large read), its retries, backoff and
  // redirects included, in seconds; 0: none. A folder listing (Resolver::list) has one deadline for
  // all its pages. Negative (the default): $SAFEWEIGHTS_HTTP_TIMEOUT, else
  // kDefaultHttpTimeoutS. Missed: Timeout, naming the URL, what was slow and the limit.
  double timeout_s = -1;
  // The minimum transfer rate: a request that receives (headers and body) fewer than min_rate bytes/s
  // over a window of stall_timeout_s seconds is cut, and retried as a connection error; after the last
  // attempt, Timeout. 0: no minimum.
  std::uint64_t min_rate = 1024;
  long stall_timeout_s = 30;
  int max_retries = 4;            // attempts after the first, per request
  long backoff_initial_ms = 200;  // doubled after each retry, at most backoff_max_ms
  long backoff_max_ms = 5'000;
  unsigned parallel = 8;                // requests in flight at most, per source
  std::uint64_t chunk_size = 8u << 20;  // large reads are split into requests of this size
  std::uint64_t readahead = 64u << 10;  // block size of the small-read cache; first request's size
  unsigned cache_blocks = 64;           // blocks the small-read cache keeps (least recently used go)
  bool verify_tls = true;               // certificate and host name checks (https)
  // PEM file of trusted CAs (https). Empty: $AWS_CA_BUNDLE for s3:// names, else $CURL_CA_BUNDLE, else
  // $SSL_CERT_FILE (the variables boto3, huggingface_hub's requests and OpenSSL read), else the system's store.
  std::string ca_file;
  std::shared_ptr<HttpStats> stats;  // counters to add to; optional
  // Told, on the opening thread, what the caller should know but that is no error: a server that
  // sends neither ETag nor Last-Modified for a name whose requests do not name a version (gs://
  // names do: their generation), so versions can mix undetected (docs/HTTP.md). Optional.
  std::function<void(const std::string& message)> warn;
};

// Opens a remote name with one ranged GET of the first `readahead` bytes (no HEAD: hubs answer HEAD
// differently from GET). http(s):// URLs are requested as given; s3:// names at the URL and with the
// SigV4 signature resolve_s3_request() gives; hf:// names at their resolve URL (hf_resolve_url());
// gs:// names at Cloud Storage's media URL of the generation their metadata names (one request more,
// first; a later read of another generation is RemoteChanged; docs/REMOTE.md). The
// size comes from Content-Range (or Content-Length when the server ignores Range). FileNotFound for
// 404/410 (S3: NoSuchKey, NoSuchBucket); HttpError for other refusals, with the service's error code and
// message when it sends one (S3's XML error, the Hub's X-Error-Code); IoError when the server cannot be
// reached after the retries. Errors never repeat a credential the process holds, nor a URL's signature
// query values (docs/REMOTE.md). The source's name() is the name as given, a signature redacted.
Result<SourcePtr> open_url(const std::string& url, const HttpOptions& options = {});

// `text` as it may be shown: the value of every signature query parameter (a presigned URL's
// X-Amz-Signature, X-Amz-Credential, ...) and every credential this process holds, replaced by
// "<redacted>". The errors of remote sources are redacted already; this is for a name the caller
// echoes itself (the CLI's `validate` and `bench` print the name they were given).
std::string redact_secrets(std::string_view text);

// A URL through open_url(), anything else through open_file().
Result<SourcePtr> open_source(const std::string& path_or_url, FileBackend backend = FileBackend::Mmap, const HttpOptions& options = {});

SAFEWEIGHTS_API_END
}  // namespace safeweights
