// The HTTP transport (io/http_transport.h), which every remote scheme reads through: the HTTP(S)
// ByteSource (ranged GETs on reused libcurl handles, a small block cache for the small reads parsers
// make, parallel chunked transfers for large ones, a check of every response against what was asked
// and against the first response: size, ETag, Last-Modified), and the GET of a whole document. It
// knows no scheme: where requests go and how they are signed is the scheme's Target.

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "core/parallel.h"
#include "core/status_macros.h"
#include "safeweights/cancel.h"
#include "core/strings.h"
#include "io/curl_api.h"
#include "io/http_transport.h"
#include "io/secrets.h"
#include "io/uri.h"
#include "safeweights/http.h"

namespace safeweights::http {
namespace {

constexpr int kMaxRedirects = 10;
// How much later than the deadline libcurl's own timeout (the backstop) fires.
constexpr long kBackstopSlackMs = 500;
// Bodies of error and redirect responses are read (so the connection can be reused) up to this much;
// a longer one is cut, whatever the server announces.
constexpr std::uint64_t kMaxDiscardedBody = 64u << 10;
// Response headers of one request, all lines together, are read up to this much: no real server
// needs more, and a server that sends endless headers would otherwise keep a request alive forever.
constexpr std::uint64_t kMaxHeaderBytes = 128u << 10;
// An attempt that delivered at least this much (of a range it can resume) made progress: the retry
// budget starts again, so a server that cuts every response still delivers a large read. A server
// that trickles forever still ends, at the request's deadline.
constexpr std::uint64_t kProgressBytes = 64u << 10;
// How much of a service's own error text (a header, an element of an error body) a message quotes, and
// how much of an error body is kept.
constexpr std::size_t kMaxServiceText = 2048;

// libcurl's functions. open_url() has loaded the table before any HttpSource exists, so every caller
// below finds it.
const curl::Api& lib() noexcept { return *curl::api(); }

// Transport failures that the same request would meet again: an untrusted or mismatched certificate,
// a missing CA file, a URL curl cannot use. Retrying them only delays the error.
bool permanent_transport_error(CURLcode rc) {
  switch (rc) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT: return true;
    default: return false;
  }
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

// Header lines and values: blanks, and the line end curl leaves on each header line.
std::string_view trim_header(std::string_view s) { return trim(s, " \t\r\n"); }

// A decimal number of at most 64 bits; nullopt for anything else (signs, spaces, overflow, empty).
std::optional<std::uint64_t> parse_u64(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    if (__builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, static_cast<std::uint64_t>(c - '0'), &v)) return std::nullopt;
  }
  return v;
}

// "bytes a-b/T" (first, last, total) or "bytes */T" (unsatisfied: first = last = nullopt).
struct ContentRange {
  std::optional<std::uint64_t> first, last, total;
  bool valid = false;
};

ContentRange parse_content_range(std::string_view s) {
  ContentRange r;
  s = trim_header(s);
  if (s.size() < 6 || !iequals(s.substr(0, 6), "bytes ")) return r;
  s = trim_header(s.substr(6));
  auto slash = s.find('/');
  if (slash == std::string_view::npos) return r;
  std::string_view span = s.substr(0, slash), total = s.substr(slash + 1);
  if (total != "*") {
    r.total = parse_u64(total);
    if (!r.total) return r;
  }
  if (span == "*") {
    r.valid = r.total.has_value();
    return r;
  }
  auto dash = span.find('-');
  if (dash == std::string_view::npos) return r;
  r.first = parse_u64(span.substr(0, dash));
  r.last = parse_u64(span.substr(dash + 1));
  r.valid = r.first && r.last && *r.first <= *r.last;
  return r;
}

struct CurlSlist {
  curl_slist* list = nullptr;
  CurlSlist() = default;
  CurlSlist(const CurlSlist&) = delete;
  CurlSlist& operator=(const CurlSlist&) = delete;
  ~CurlSlist() { lib().slist_free_all(list); }
  bool append(const std::string& s) {
    curl_slist* next = lib().slist_append(list, s.c_str());
    if (next == nullptr) return false;
    list = next;
    return true;
  }
};

// A counting semaphore that bounds the requests in flight on one source, across every caller.
class Slots {
 public:
  explicit Slots(unsigned n) : free_(std::max(1u, n)) {}
  void acquire() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return free_ > 0; });
    --free_;
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      ++free_;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  unsigned free_;
};

// What one response said, and what its body did to the destination.
// What is asked: the same for every hop of a redirect chain and every attempt at a range.
struct ExchangeRequest {
  std::uint64_t offset = 0;           // first byte asked for
  std::span<std::byte> dst;           // where the asked bytes go (its size: bytes asked for)
  bool opening = false;               // the first request: learns size and validators
  std::optional<std::uint64_t> size;  // known total size (not yet known when opening)
  const std::string* etag = nullptr;  // validators of the first response (when not opening)
  const std::string* last_modified = nullptr;
  HttpStats* stats = nullptr;
  const std::string* name = nullptr;
  const HttpOptions* options = nullptr;  // the limits: deadline, minimum rate
  Clock::time_point deadline = Clock::time_point::max();
  // A document (a listing page) instead of a range: a GET without Range whose whole 200 body goes
  // here, at most document_cap bytes; dst, offset and the validators are unused.
  std::string* document = nullptr;
  std::uint64_t document_cap = 0;
  Document document_kind = Document::ListingPage;
  const PostBody* post = nullptr;  // a document asked for with a POST of this body (not redirected)
  bool version_pinned = false;     // the URL names one version (Target::version_pinned)
};

// One request and what its response has told so far.
struct Exchange : ExchangeRequest {
  explicit Exchange(const ExchangeRequest& request) : ExchangeRequest(request) {}

  // Response headers (of the latest status line; 1xx responses are forgotten).
  long status = 0;
  std::string content_range, resp_etag, resp_last_modified;
  std::optional<std::uint64_t> content_length;
  bool has_content_length = false;
  bool bad_content_length = false;
  std::string content_encoding;
  // What a refusing service says about itself: the Hub's X-Error-Code / X-Error-Message headers,
  // S3's x-amz-bucket-region, and the start of an error body (S3 sends <Code> and <Message> there).
  std::string service_code, service_message, bucket_region, error_body;
  std::string link;  // the Link header (the Hub's next page of a listing)

  // Progress, for the deadline and the minimum rate: bytes received (headers and body) and the
  // window the rate is measured over.
  std::uint64_t header_bytes = 0;
  bool headers_done = false;  // the blank line after a final (not 1xx) response's headers arrived
  std::uint64_t wire_bytes = 0;
  Clock::time_point window_start = Clock::now();
  std::uint64_t window_bytes = 0;
  std::string too_slow;  // the transfer stayed below the minimum rate: cut, worth another attempt

  // Body.
  bool body_started = false;
  bool range_ignored = false;   // 200 to a ranged request: the body starts at byte 0
  std::uint64_t skip = 0;       // body bytes still to discard before `offset` (range ignored)
  std::uint64_t received = 0;   // bytes copied into dst
  std::uint64_t discarded = 0;  // body bytes of a response not copied (error pages, redirects)
  std::uint64_t learned_size = 0;
  bool complete = false;       // dst is full; a cut transfer after this is a success
  std::optional<Error> error;  // the response broke a rule: not retried
};

Error http_error(const Exchange& x, ErrorKind kind, std::string message) {
  return Error(kind, std::move(message)).with_file(*x.name).with_offset(x.offset + x.received);
}

// The text of an XML element in an S3 error body ("<Code>NoSuchKey</Code>"), empty when absent.
std::string xml_element(std::string_view body, std::string_view element) {
  const std::string open = "<" + std::string(element) + ">", close = "</" + std::string(element) + ">";
  const std::size_t start = body.find(open);
  if (start == std::string_view::npos) return {};
  const std::size_t end = body.find(close, start + open.size());
  if (end == std::string_view::npos) return {};
  return std::string(body.substr(start + open.size(), end - start - open.size()));
}

// A service's words as a message quotes them: scrubbed of the credentials first (io/secrets.h), then
// cut, so that a credential the cut would split cannot leave its first half behind.
std::string quoted_service_text(std::string_view text) { return secrets::scrub(text).substr(0, kMaxServiceText); }

// What the service said about a refusal, for the message: " (Code: message)", and for S3 a bucket in
// another region, the region to ask. Empty when it said nothing.
std::string service_detail(const Exchange& x) {
  std::string code = x.service_code, message = x.service_message, region = x.bucket_region;
  if (code.empty()) {
    code = xml_element(x.error_body, "Code");
    message = xml_element(x.error_body, "Message");
  }
  if (region.empty()) region = xml_element(x.error_body, "Region");
  code = quoted_service_text(code);
  message = quoted_service_text(message);
  region = quoted_service_text(region);
  std::string out;
  if (!code.empty()) out += " (" + code + (message.empty() ? std::string() : ": " + message) + ")";
  if (!region.empty()) out += "; the bucket is in region " + region + ": set AWS_REGION=" + region + " (--s3-region)";
  return out;
}

// How one attempt at a request ended: with its outcome (success, or an error no retry would change),
// or with a problem worth another attempt.
struct Attempt {
  bool retry = false;
  Status outcome;              // when !retry
  std::string problem;         // when retry: what went wrong, for the message if every attempt fails
  long status = 0;             // when retry: the HTTP status (0: none arrived); 5xx gives up as HttpError
  bool too_slow = false;       // when retry: cut for the minimum rate; gives up as Timeout
  std::uint64_t offset = 0;    // when retry: the first byte still missing
  std::uint64_t progress = 0;  // when retry: bytes this attempt delivered that the next one need not ask for
  static Attempt ended(Status s) {
    Attempt a;
    a.outcome = std::move(s);
    return a;
  }
};

// Checks a 200/206 response's headers before its first body byte is used.
void start_body(Exchange& x) {
  x.body_started = true;
  auto changed = [&](const std::string& what) {
    x.error =
        http_error(x, ErrorKind::RemoteChanged, "the remote file changed between requests (" + what + "); refusing to mix bytes of two versions");
  };
  if (x.bad_content_length) {
    x.error = http_error(x, ErrorKind::HttpError, "malformed Content-Length header");
    return;
  }
  // No encoding is asked for (no Accept-Encoding): an encoded body's bytes are not the file's, and
  // byte ranges of it mean nothing. Another attempt would get the same.
  if (!x.content_encoding.empty() && !iequals(x.content_encoding, "identity")) {
    x.error = http_error(
        x, ErrorKind::HttpError,
        "the server sent an encoded body (Content-Encoding: " + x.content_encoding + ") that was not asked for: its bytes are not the file's");
    return;
  }
  if (!x.opening) {
    // Both validators must stay as the first response gave them; one that appears or disappears
    // counts as a change too (a server switching versions behind a load balancer).
    if (*x.etag != x.resp_etag) {
      changed("ETag was " + (x.etag->empty() ? std::string("absent") : *x.etag) + ", now " +
              (x.resp_etag.empty() ? std::string("absent") : x.resp_etag));
      return;
    }
    if (*x.last_modified != x.resp_last_modified) {
      changed("Last-Modified was " + (x.last_modified->empty() ? std::string("absent") : *x.last_modified) + ", now " +
              (x.resp_last_modified.empty() ? std::string("absent") : x.resp_last_modified));
      return;
    }
  }
  if (x.status == 206) {
    ContentRange cr = parse_content_range(x.content_range);
    if (!cr.valid || !cr.first || !cr.total) {
      x.error = http_error(x, ErrorKind::HttpError, "206 response without a valid Content-Range (got \"" + x.content_range + "\")");
      return;
    }
    if (x.size && *cr.total != *x.size) {
      changed("size was " + std::to_string(*x.size) + " bytes, Content-Range now says " + std::to_string(*cr.total));
      return;
    }
    const std::uint64_t total = *cr.total;
    // The server clips the last byte to the file; anything else differing from the request is a
    // protocol violation.
    const std::uint64_t want_end = x.offset + x.dst.size();  // exclusive; no overflow: dst is memory
    const std::uint64_t expect_last = std::min(want_end, total) - 1;
    if (x.offset >= total || *cr.first != x.offset || *cr.last != expect_last) {
      x.error = http_error(x, ErrorKind::HttpError,
                           "Content-Range \"" + std::string(trim_header(x.content_range)) + "\" does not match the request for bytes " +
                               std::to_string(x.offset) + "-" + std::to_string(want_end - 1));
      return;
    }
    if (x.content_length && *x.content_length != *cr.last - *cr.first + 1) {
      x.error = http_error(x, ErrorKind::HttpError, "Content-Length disagrees with Content-Range");
      return;
    }
    if (x.opening) {
      x.learned_size = total;
      x.dst = x.dst.first(static_cast<std::size_t>(*cr.last - *cr.first + 1));
    }
    return;
  }
  // 200: the server ignored Range and sends the whole file from byte 0.
  x.range_ignored = true;
  x.skip = x.offset;
  if (!x.content_length) {
    x.error = http_error(x, ErrorKind::HttpError, "the server ignores Range requests and sends no Content-Length: the file's size is unknown");
    return;
  }
  if (x.size && *x.content_length != *x.size) {
    changed("size was " + std::to_string(*x.size) + " bytes, Content-Length now says " + std::to_string(*x.content_length));
    return;
  }
  if (x.opening) {
    x.learned_size = *x.content_length;
    x.dst = x.dst.first(static_cast<std::size_t>(std::min<std::uint64_t>(x.dst.size(), *x.content_length)));
    if (x.dst.empty()) x.complete = true;
  }
}

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto& x = *static_cast<Exchange*>(user);
  const std::size_t n = size * count;
  x.wire_bytes += n;
  x.header_bytes += n;
  if (x.header_bytes > kMaxHeaderBytes) {
    x.error = http_error(x, ErrorKind::HttpError, "the server sent more than " + std::to_string(kMaxHeaderBytes >> 10) + " KiB of response headers");
    return 0;  // cut the transfer
  }
  std::string_view line(data, n);
  if (line.size() >= 5 && line.substr(0, 5) == "HTTP/") {
    // A new response (after a 1xx): forget the previous one's headers.
    x.status = 0;
    x.content_range.clear();
    x.resp_etag.clear();
    x.resp_last_modified.clear();
    x.content_length.reset();
    x.has_content_length = x.bad_content_length = false;
    x.content_encoding.clear();
    x.service_code.clear();
    x.service_message.clear();
    x.bucket_region.clear();
    x.link.clear();
    x.headers_done = false;
    auto sp = line.find(' ');
    if (sp != std::string_view::npos) {
      auto code = parse_u64(line.substr(sp + 1, 3));
      if (code && *code < 1000) x.status = static_cast<long>(*code);
    }
    return n;
  }
  if (trim_header(line).empty() && x.status >= 200) x.headers_done = true;
  auto colon = line.find(':');
  if (colon == std::string_view::npos) return n;
  std::string_view key = trim_header(line.substr(0, colon)), value = trim_header(line.substr(colon + 1));
  if (iequals(key, "Content-Range")) {
    x.content_range = std::string(value);
  } else if (iequals(key, "ETag")) {
    x.resp_etag = std::string(value);
  } else if (iequals(key, "Last-Modified")) {
    x.resp_last_modified = std::string(value);
  } else if (iequals(key, "Content-Encoding")) {
    x.content_encoding = std::string(value);
  } else if (iequals(key, "X-Error-Code")) {
    // Kept whole (kMaxHeaderBytes bounds them): quoted_service_text() cuts them once scrubbed.
    x.service_code = std::string(value);
  } else if (iequals(key, "X-Error-Message")) {
    x.service_message = std::string(value);
  } else if (iequals(key, "x-amz-bucket-region")) {
    x.bucket_region = std::string(value);
  } else if (iequals(key, "Link")) {
    x.link = std::string(value.substr(0, kMaxServiceText));
  } else if (iequals(key, "Content-Length")) {
    auto v = parse_u64(value);
    if (!v || (x.has_content_length && x.content_length != v)) x.bad_content_length = true;
    x.content_length = v;
    x.has_content_length = true;
  }
  return n;
}

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto& x = *static_cast<Exchange*>(user);
  const std::size_t n = size * count;
  x.wire_bytes += n;
  if (x.stats) x.stats->bytes_received.fetch_add(n, std::memory_order_relaxed);
  if (x.status != 200 && x.status != 206) {
    // An error page or a redirect's body: read a little so the connection survives; keep its start,
    // where S3 says what went wrong.
    if (x.status >= 300 && x.error_body.size() < kMaxServiceText) {
      x.error_body.append(data, std::min<std::size_t>(n, kMaxServiceText - x.error_body.size()));
    }
    x.discarded += n;
    return x.discarded > kMaxDiscardedBody ? 0 : n;
  }
  if (x.document != nullptr) {
    if (x.document->size() + n > x.document_cap) {
      x.error = http_error(x, ErrorKind::ResourceLimit, "the response is larger than " + std::to_string(x.document_cap >> 20) + " MiB");
      return 0;
    }
    x.document->append(data, n);
    return n;
  }
  if (!x.body_started) start_body(x);
  if (x.error || x.complete) return 0;  // cut the transfer
  std::size_t pos = 0;
  if (x.skip > 0) {
    const std::size_t drop = static_cast<std::size_t>(std::min<std::uint64_t>(x.skip, n));
    x.skip -= drop;
    pos = drop;
  }
  const std::size_t room = x.dst.size() - static_cast<std::size_t>(x.received);
  const std::size_t take = std::min(room, n - pos);
  if (take > 0) std::memcpy(x.dst.data() + x.received, data + pos, take);
  x.received += take;
  pos += take;
  if (x.received == x.dst.size()) x.complete = true;
  if (pos < n) {
    // Bytes past what was asked: expected when streaming a 200, a protocol violation in a 206.
    if (!x.range_ignored) x.error = http_error(x, ErrorKind::HttpError, "response body longer than its Content-Range");
    return 0;
  }
  return n;
}

// Where a request stood when a limit cut it, for the message.
std::string progress_of(const Exchange& x) {
  if (!x.headers_done) return "waiting for the response headers (" + std::to_string(x.header_bytes) + " bytes received)";
  if (x.document) return "receiving the body (" + std::to_string(x.document->size()) + " bytes)";
  return "receiving the body (" + std::to_string(x.received) + " of " + std::to_string(x.dst.size()) + " bytes)";
}

// The words messages use for a document's request.
struct DocumentWords {
  std::string_view request;  // what missed a deadline: "the listing request"
  std::string_view missing;  // what a 404 means: ": no such remote folder"
  std::string_view refused;  // what another status answered: " for a listing"
};

DocumentWords words_of(Document what) {
  switch (what) {
    case Document::ListingPage: return {"the listing request", ": no such remote folder", " for a listing"};
    case Document::FileMetadata: return {"the metadata request", ": no such remote file", " for the file's metadata"};
    case Document::AccessToken: return {"the token request", ": no such token endpoint", " for the token request"};
  }
  return {"the request", "", ""};
}

Error deadline_error(const Exchange& x) {
  const std::string what = x.document ? std::string(words_of(x.document_kind).request)
                                      : "the request for bytes " + std::to_string(x.offset) + "-" + std::to_string(x.offset + x.dst.size() - 1);
  return http_error(
      x, ErrorKind::Timeout,
      what + " missed its deadline of " + seconds(x.options->timeout_s) + " (--timeout, " + kHttpTimeoutEnv + ") while " + progress_of(x));
}

// libcurl calls this several times a second during a transfer, and about once a second while
// nothing arrives: the place to stop for a cancellation, the deadline and the minimum rate.
int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto& x = *static_cast<Exchange*>(user);
  if (Status s = check_cancelled(); !s.is_ok()) {
    x.error = http_error(x, s.error().kind(), s.error().message());
    return 1;  // abort the transfer
  }
  const auto now = Clock::now();
  if (now >= x.deadline) {
    x.error = deadline_error(x);
    return 1;
  }
  const HttpOptions& o = *x.options;
  if (o.min_rate > 0 && o.stall_timeout_s > 0 && now - x.window_start >= std::chrono::seconds(o.stall_timeout_s)) {
    const std::uint64_t got = x.wire_bytes - x.window_bytes;
    if (got < o.min_rate * static_cast<std::uint64_t>(o.stall_timeout_s)) {
      x.too_slow = "below the minimum rate of " + std::to_string(o.min_rate) + " bytes/s over " + std::to_string(o.stall_timeout_s) + " s (" +
                   std::to_string(got) + " bytes) while " + progress_of(x);
      return 1;
    }
    x.window_start = now;
    x.window_bytes = x.wire_bytes;
  }
  return 0;
}

class HttpSource final : public ByteSource {
 public:
  // `name` is what messages and name() say (an s3:// or hf:// name, or the URL; scrubbed, so a
  // presigned URL's signature is not repeated); `url` is where the requests go.
  HttpSource(std::string_view name, Target target, const HttpOptions& options)
      : name_(secrets::scrub(name)),
        request_url_(std::move(target.url)),
        options_(options),
        signing_(std::move(target.signing)),
        version_pinned_(target.version_pinned),
        slots_(options.parallel) {
    if (options_.readahead == 0) options_.readahead = 64u << 10;
    if (options_.chunk_size < options_.readahead) options_.chunk_size = options_.readahead;
    if (options_.parallel == 0) options_.parallel = 1;
    if (options_.max_retries < 0) options_.max_retries = 0;
  }
  ~HttpSource() override {
    for (CURL* h : handles_) lib().easy_cleanup(h);
  }

  // Request headers (the signature's, the caller's) for the URL's origin; no request.
  Status prepare();
  // prepare(), then the opening request.
  Status init();
  // One GET of the whole body at the source's URL (`what`: a listing page, a file's metadata), at most
  // `cap` bytes, with the redirects and retries of every request, by `deadline` (a listing's: the
  // whole listing's). `link` gets the response's Link header.
  // `post`: a POST of that body instead of the GET.
  Result<std::string> get_document(Document what, std::uint64_t cap, std::string& link, Clock::time_point deadline, const PostBody* post = nullptr);
  // The opening request, into `head`: size, validators, final URL, block 0.
  Status open_request(const std::shared_ptr<std::vector<std::byte>>& head);

  const std::string& name() const noexcept override { return name_; }
  std::uint64_t size() const noexcept override { return size_; }

  // Both reads' errors leave scrubbed (io/secrets.h): they may quote the server.
  Status read_at(std::uint64_t offset, std::span<std::byte> dst) const override { return secrets::scrub(read_at_unscrubbed(offset, dst)); }
  Status read_scatter(std::span<const ReadRequest> requests) const override { return secrets::scrub(read_scatter_unscrubbed(requests)); }

 private:
  struct Block {
    std::uint64_t index = 0;
    std::shared_ptr<const std::vector<std::byte>> bytes;
    std::uint64_t last_use = 0;
  };

  std::uint64_t small_read_limit() const { return 4 * options_.readahead; }
  Status read_at_unscrubbed(std::uint64_t offset, std::span<std::byte> dst) const {
    SW_RETURN_IF_ERROR(check_range(offset, dst.size()));
    if (dst.empty()) return Status::ok();
    if (dst.size() <= small_read_limit()) return cached_read(offset, dst);
    const ReadRequest r{offset, dst};
    return read_scatter_unscrubbed({&r, 1});
  }
  // Cached small runs are copied from the block cache; the others become requests, up to `parallel`
  // in flight: nearby small runs share one request (read into bounded scratch memory, then scattered),
  // large runs are split into chunk_size requests that write straight into the caller's memory.
  Status read_scatter_unscrubbed(std::span<const ReadRequest> requests) const;
  // What every request of this source carries: its name, limits and counters, and the deadline.
  ExchangeRequest request_base(Clock::time_point deadline) const {
    ExchangeRequest r;
    r.stats = options_.stats.get();
    r.name = &name_;
    r.options = &options_;
    r.deadline = deadline;
    r.version_pinned = version_pinned_;
    return r;
  }

  // One ranged GET of [offset, offset + dst.size()) into dst, with redirects, checks and retries.
  // Without validators, also same_as_cached().
  Status fetch(std::uint64_t offset, std::span<std::byte> dst) const;
  Status fetch_once(std::uint64_t offset, std::span<std::byte> dst) const;
  // Whether a change of the file between requests is seen by more than sizes and repeated bytes: the
  // URL names one version (Target::version_pinned), or the server sent a validator (ETag or
  // Last-Modified) that later responses are checked against.
  bool validated() const { return version_pinned_ || !etag_.empty() || !last_modified_.empty(); }
  // RemoteChanged when `got` (the bytes at `offset`, just received) differs from what the block cache
  // holds of the same bytes: without validators, the one way left to see a new version of equal size.
  Status same_as_cached(std::uint64_t offset, std::span<const std::byte> got) const;
  // Runs `attempt` until it ends with an outcome, pausing with exponential backoff after each attempt
  // that asks for a retry, at most options_.max_retries times: the one retry policy of every request.
  // Every attempt gets the request's `deadline` (a read's: options_.timeout_s from the first attempt;
  // a listing page's: the listing's); an attempt that made progress starts the retry budget again.
  Status with_retries(const std::function<Attempt(Clock::time_point deadline)>& attempt, Clock::time_point deadline) const;
  Status with_retries(const std::function<Attempt(Clock::time_point deadline)>& attempt) const {
    return with_retries(attempt, deadline_after(options_.timeout_s));
  }
  // check_cancelled(), naming the URL.
  Status cancelled() const;
  // Sleeps, waking for check_cancelled().
  Status pause_for(std::chrono::milliseconds pause) const;
  Status perform(Exchange& x, std::string& url, int& redirects, CURLcode& rc, std::string& curl_message) const;
  // perform() until the response is not a redirect: each hop is a fresh exchange of the same request,
  // `url` ends as the last hop's.
  Status perform_following_redirects(Exchange& x, std::string& url, CURLcode& rc, std::string& curl_message) const;
  // perform_following_redirects() for one attempt: the attempt's end when the exchange broke a rule or
  // could not be made (no retry changes that), else nullopt, with `rc` and `curl_message` told.
  std::optional<Attempt> send(Exchange& x, std::string& url, CURLcode& rc, std::string& curl_message) const {
    if (Status s = perform_following_redirects(x, url, rc, curl_message); !s.is_ok()) return Attempt::ended(std::move(s));
    if (x.error) return Attempt::ended(std::move(*x.error));
    return std::nullopt;
  }
  Status cached_read(std::uint64_t offset, std::span<std::byte> dst) const;
  std::shared_ptr<const std::vector<std::byte>> cache_find(std::uint64_t index) const;
  void cache_put(std::uint64_t index, std::shared_ptr<const std::vector<std::byte>> bytes) const;
  CURL* take_handle() const;
  void give_handle(CURL* h) const;

  std::string name_;
  std::string request_url_;  // the URL the opening request goes to
  HttpOptions options_;
  Signing signing_;
  bool version_pinned_ = false;
  std::optional<Origin> origin_;
  CurlSlist origin_headers_;  // the caller's headers (and the token): for the URL's own origin only
  CurlSlist other_headers_;   // empty list for any other origin a redirect leads to
  std::string url_;           // where requests go: the URL after the opening request's redirects
  std::uint64_t size_ = 0;
  std::string etag_, last_modified_;
  bool range_ignored_ = false;

  mutable Slots slots_;
  mutable std::mutex handles_mu_;
  mutable std::vector<CURL*> handles_;
  mutable std::mutex cache_mu_;
  mutable std::vector<Block> cache_;
  mutable std::uint64_t tick_ = 0;
};

CURL* HttpSource::take_handle() const {
  {
    std::lock_guard lock(handles_mu_);
    if (!handles_.empty()) {
      CURL* h = handles_.back();
      handles_.pop_back();
      return h;
    }
  }
  return lib().easy_init();
}

void HttpSource::give_handle(CURL* h) const {
  // A handle keeps its connection open: the next request on it reuses the connection.
  std::lock_guard lock(handles_mu_);
  handles_.push_back(h);
}

Status HttpSource::perform_following_redirects(Exchange& x, std::string& url, CURLcode& rc, std::string& curl_message) const {
  const ExchangeRequest request = x;
  int redirects = 0;
  for (;;) {
    SW_RETURN_IF_ERROR(perform(x, url, redirects, rc, curl_message));
    if (x.status < 300 || x.status >= 400 || x.status == 304) return Status::ok();
    x = Exchange(request);
  }
}

Status HttpSource::perform(Exchange& x, std::string& url, int& redirects, CURLcode& rc, std::string& curl_message) const {
  CURL* h = take_handle();
  if (h == nullptr) return Error(ErrorKind::ResourceLimit, "cannot create a libcurl handle").with_file(name_);
  lib().easy_reset(h);  // keeps the handle's open connections, drops the previous request's options
  char errbuf[CURL_ERROR_SIZE] = {0};
  const std::string range = std::to_string(x.offset) + "-" + std::to_string(x.offset + x.dst.size() - 1);
  auto target = origin_of(url);
  const bool same_origin = target && origin_ && *target == *origin_;
  lib().easy_setopt(h, CURLOPT_URL, url.c_str());
  if (x.document == nullptr) lib().easy_setopt(h, CURLOPT_RANGE, range.c_str());
  if (x.post != nullptr) {
    lib().easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(x.post->data.size()));
    lib().easy_setopt(h, CURLOPT_POSTFIELDS, x.post->data.c_str());
  }
  lib().easy_setopt(h, CURLOPT_HTTPHEADER, same_origin ? origin_headers_.list : other_headers_.list);
  if (same_origin && !signing_.sigv4.empty()) {
    // libcurl signs (SigV4) the host, x-amz-date and the x-amz-* headers among origin_headers_.
    lib().easy_setopt(h, CURLOPT_AWS_SIGV4, signing_.sigv4.c_str());
    lib().easy_setopt(h, CURLOPT_USERNAME, signing_.user.c_str());
    lib().easy_setopt(h, CURLOPT_PASSWORD, signing_.password.c_str());
  }
  lib().easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);  // followed here, so headers stay with their origin
  lib().easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  lib().easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  lib().easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, options_.connect_timeout_ms);
  // The deadline and the minimum rate are checked by on_progress; libcurl's own timeout is the
  // backstop should the callback not run, set a little later so that the callback, which says what was
  // slow, normally fires first.
  if (x.deadline != Clock::time_point::max()) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(x.deadline - Clock::now()).count();
    lib().easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max<long long>(1, left) + kBackstopSlackMs));
  }
  lib().easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  lib().easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
  lib().easy_setopt(h, CURLOPT_XFERINFODATA, &x);
  lib().easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  lib().easy_setopt(h, CURLOPT_BUFFERSIZE, 256L << 10);
  lib().easy_setopt(h, CURLOPT_USERAGENT, "safeweights/0.1");
  lib().easy_setopt(h, CURLOPT_SSL_VERIFYPEER, options_.verify_tls ? 1L : 0L);
  lib().easy_setopt(h, CURLOPT_SSL_VERIFYHOST, options_.verify_tls ? 2L : 0L);
  if (!options_.ca_file.empty()) lib().easy_setopt(h, CURLOPT_CAINFO, options_.ca_file.c_str());
  lib().easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  lib().easy_setopt(h, CURLOPT_HEADERDATA, &x);
  lib().easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  lib().easy_setopt(h, CURLOPT_WRITEDATA, &x);
  lib().easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  if (x.stats) x.stats->requests.fetch_add(1, std::memory_order_relaxed);
  slots_.acquire();
  x.window_start = Clock::now();  // the wait for a free slot is not the server's slowness
  rc = lib().easy_perform(h);
  slots_.release();
  curl_message = errbuf[0] ? errbuf : lib().easy_strerror(rc);
  // libcurl's clock and ours may disagree by a hair: a timeout within the slack of the deadline is it.
  if (!x.error && rc == CURLE_OPERATION_TIMEDOUT && Clock::now() + std::chrono::milliseconds(kBackstopSlackMs) >= x.deadline) {
    x.error = deadline_error(x);
  }
  // An empty body never reaches on_body: its headers still need their checks (an empty file's 200).
  if ((x.status == 200 || x.status == 206) && !x.body_started && rc == CURLE_OK && x.document == nullptr) {
    start_body(x);
    if (!x.error && x.received == x.dst.size()) x.complete = true;
  }
  Status result;
  if (x.status >= 300 && x.status < 400 && x.status != 304) {
    char* location = nullptr;
    lib().easy_getinfo(h, CURLINFO_REDIRECT_URL, &location);
    if (location == nullptr) {
      result = http_error(x, ErrorKind::HttpError, "HTTP " + std::to_string(x.status) + " redirect without a usable Location" + service_detail(x));
    } else if (x.post != nullptr) {
      result =
          http_error(x, ErrorKind::HttpError, "HTTP " + std::to_string(x.status) + " redirect for a POST: not followed (its body is not resent)");
    } else if (++redirects > kMaxRedirects) {
      result = http_error(x, ErrorKind::HttpError, "more than " + std::to_string(kMaxRedirects) + " redirects");
    } else {
      url = location;
      if (x.stats) x.stats->redirects.fetch_add(1, std::memory_order_relaxed);
    }
  }
  lib().easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
  give_handle(h);
  return result;
}

// A failed exchange that is not a redirect, not a 416 and not a broken rule: worth another attempt
// (a cut transfer, a transport error, a busy server), or an answer that would not change.
Attempt failed_attempt(const Exchange& x, CURLcode rc, const std::string& curl_message) {
  Attempt a;
  a.retry = true;
  a.status = x.status;
  a.offset = x.offset + x.received;
  a.progress = x.received;
  if (rc == CURLE_OUT_OF_MEMORY && !x.headers_done) {
    // libcurl's answer to a header line over its 100 KiB limit; the server would send it again.
    return Attempt::ended(
        http_error(x, ErrorKind::HttpError, "the server sent a response header line longer than libcurl accepts (100 KiB): " + curl_message));
  }
  if (!x.too_slow.empty()) {
    a.too_slow = true;
    a.problem = "transfer too slow: " + x.too_slow;
  } else if (x.status == 200 || x.status == 206) {
    a.problem = rc == CURLE_OK ? std::string("the response ended early") : "transfer cut: " + curl_message;
  } else if (x.status == 0 && permanent_transport_error(rc)) {
    return Attempt::ended(http_error(x, ErrorKind::IoError, curl_message));
  } else if (x.status == 0) {
    a.problem = curl_message;
  } else if (x.status >= 500 || x.status == 429 || x.status == 408) {
    a.problem = "HTTP " + std::to_string(x.status) + service_detail(x);
  } else if ((x.status == 404 || x.status == 410) && x.version_pinned && !x.opening && x.document == nullptr) {
    return Attempt::ended(
        http_error(x, ErrorKind::RemoteChanged,
                   "HTTP " + std::to_string(x.status) + " for the version opened: the remote file changed or was deleted" + service_detail(x)));
  } else if (x.status == 404 || x.status == 410) {
    return Attempt::ended(http_error(x, ErrorKind::FileNotFound,
                                     "HTTP " + std::to_string(x.status) +
                                         std::string(words_of(x.document ? x.document_kind : Document::FileMetadata).missing) + service_detail(x)));
  } else {
    return Attempt::ended(http_error(
        x, ErrorKind::HttpError,
        "HTTP " + std::to_string(x.status) + std::string(x.document ? words_of(x.document_kind).refused : " for a ranged GET") + service_detail(x)));
  }
  return a;
}

Status HttpSource::with_retries(const std::function<Attempt(Clock::time_point deadline)>& attempt, Clock::time_point deadline) const {
  HttpStats* stats = options_.stats.get();
  long backoff = std::max(1L, options_.backoff_initial_ms);
  int attempts = 0;
  for (int n = 0;; ++n, ++attempts) {
    SW_RETURN_IF_ERROR(cancelled());
    Attempt a = attempt(deadline);
    if (!a.retry) return std::move(a.outcome);
    if (a.progress >= kProgressBytes) {
      // Progress: the budget and the backoff start again (the deadline does not).
      n = 0;
      backoff = std::max(1L, options_.backoff_initial_ms);
    }
    const std::string tries = std::to_string(attempts + 1) + (attempts == 0 ? " attempt" : " attempts");
    if (n >= options_.max_retries) {
      const ErrorKind kind = a.too_slow ? ErrorKind::Timeout : a.status >= 500 ? ErrorKind::HttpError : ErrorKind::IoError;
      return Error(kind, "giving up after " + tries + ": " + a.problem).with_file(name_).with_offset(a.offset);
    }
    const auto pause = std::chrono::milliseconds(backoff);
    if (deadline != Clock::time_point::max() && Clock::now() + pause >= deadline) {
      return Error(ErrorKind::Timeout, "the request missed its deadline of " + seconds(options_.timeout_s) + " (--timeout, " + kHttpTimeoutEnv +
                                           ") after " + tries + ": " + a.problem)
          .with_file(name_)
          .with_offset(a.offset);
    }
    if (stats) stats->retries.fetch_add(1, std::memory_order_relaxed);
    SW_RETURN_IF_ERROR(pause_for(pause));
    backoff = std::min(options_.backoff_max_ms, backoff * 2);
  }
}

Status HttpSource::cancelled() const {
  Status s = check_cancelled();
  if (!s.is_ok()) s.error().with_file(name_);
  return s;
}

Status HttpSource::pause_for(std::chrono::milliseconds pause) const {
  // In slices, so that a cancellation does not wait for the backoff.
  const auto end = Clock::now() + pause;
  for (auto now = Clock::now(); now < end; now = Clock::now()) {
    std::this_thread::sleep_for(std::min<Clock::duration>(end - now, kPollInterval));
    SW_RETURN_IF_ERROR(cancelled());
  }
  return Status::ok();
}

Status HttpSource::fetch(std::uint64_t offset, std::span<std::byte> dst) const {
  if (dst.empty()) return Status::ok();
  SW_RETURN_IF_ERROR(fetch_once(offset, dst));
  return validated() ? Status::ok() : same_as_cached(offset, dst);
}

Status HttpSource::same_as_cached(std::uint64_t offset, std::span<const std::byte> got) const {
  const std::uint64_t bs = options_.readahead, end = offset + got.size();
  for (std::uint64_t i = offset / bs; i <= (end - 1) / bs; ++i) {
    auto block = cache_find(i);
    if (!block) continue;
    const std::uint64_t lo = std::max(offset, i * bs), hi = std::min(end, i * bs + block->size());
    if (lo >= hi) continue;
    if (std::memcmp(got.data() + (lo - offset), block->data() + (lo - i * bs), static_cast<std::size_t>(hi - lo)) != 0) {
      return Error(ErrorKind::RemoteChanged, "the remote file changed between requests (bytes " + std::to_string(lo) + "-" + std::to_string(hi - 1) +
                                                 " differ from an earlier response; the server sends no ETag nor Last-Modified); refusing to mix "
                                                 "bytes of two versions")
          .with_file(name_)
          .with_offset(lo);
    }
  }
  return Status::ok();
}

Status HttpSource::fetch_once(std::uint64_t offset, std::span<std::byte> dst) const {
  return with_retries([&](Clock::time_point deadline) -> Attempt {
    ExchangeRequest request = request_base(deadline);
    request.offset = offset;
    request.dst = dst;
    request.size = size_;
    request.etag = &etag_;
    request.last_modified = &last_modified_;
    Exchange x(request);
    std::string url = url_;
    CURLcode rc = CURLE_OK;
    std::string curl_message;
    if (auto ended = send(x, url, rc, curl_message)) return std::move(*ended);
    // Whatever arrived is in place; only the rest is asked for again.
    offset += x.received;
    dst = dst.subspan(static_cast<std::size_t>(x.received));
    if (x.complete || dst.empty()) return Attempt::ended(Status::ok());
    if (x.status == 416) {
      return Attempt::ended(http_error(x, ErrorKind::RemoteChanged, "HTTP 416 for a range inside the file: the remote file shrank"));
    }
    return failed_attempt(x, rc, curl_message);
  });
}

Status HttpSource::prepare() {
  origin_ = origin_of(request_url_);
  if (!origin_ || (origin_->scheme != "http" && origin_->scheme != "https")) {
    return Error(ErrorKind::InvalidArgument, "not a valid http(s) URL").with_file(name_);
  }
  for (const std::string& hdr : signing_.headers) {
    if (!origin_headers_.append(hdr)) return Error(ErrorKind::ResourceLimit, "out of memory").with_file(name_);
  }
  for (const std::string& hdr : options_.headers) {
    auto colon = hdr.find(':');
    if (colon == std::string::npos || colon == 0 || hdr.find_first_of("\r\n") != std::string::npos) {
      return Error(ErrorKind::InvalidArgument, "header must be \"Name: value\" on one line, got \"" + hdr + "\"").with_file(name_);
    }
    secrets::remember_header(hdr);
    if (!origin_headers_.append(hdr)) return Error(ErrorKind::ResourceLimit, "out of memory").with_file(name_);
  }
  return Status::ok();
}

Result<std::string> HttpSource::get_document(Document what, std::uint64_t cap, std::string& link, Clock::time_point deadline, const PostBody* post) {
  std::string body;
  SW_RETURN_IF_ERROR(with_retries(
      [&](Clock::time_point attempt_deadline) -> Attempt {
        body.clear();
        ExchangeRequest request = request_base(attempt_deadline);
        request.document = &body;
        request.document_cap = cap;
        request.document_kind = what;
        request.post = post;
        Exchange x(request);
        std::string url = request_url_;
        CURLcode rc = CURLE_OK;
        std::string curl_message;
        if (auto ended = send(x, url, rc, curl_message)) return std::move(*ended);
        if (x.status == 200 && rc == CURLE_OK) {
          link = x.link;
          return Attempt::ended(Status::ok());
        }
        // A listing page is not resumed: a retry asks for it whole again.
        Attempt a = failed_attempt(x, rc, curl_message);
        a.offset = 0;
        a.progress = 0;
        return a;
      },
      deadline));
  return body;
}

Status HttpSource::init() {
  SW_RETURN_IF_ERROR(prepare());
  // The opening request: the first block, which also tells the size and the validators.
  auto head = std::make_shared<std::vector<std::byte>>(static_cast<std::size_t>(options_.readahead));
  SW_RETURN_IF_ERROR(open_request(head));
  if (!validated()) {
    if (options_.stats) options_.stats->unvalidated.fetch_add(1, std::memory_order_relaxed);
    if (options_.warn) {
      options_.warn(name_ +
                    ": the server sends no ETag nor Last-Modified: a change of the file between requests is "
                    "detected only where sizes or repeated bytes differ (docs/HTTP.md)");
    }
  }
  return Status::ok();
}

Status HttpSource::open_request(const std::shared_ptr<std::vector<std::byte>>& head) {
  return with_retries([&](Clock::time_point deadline) -> Attempt {
    ExchangeRequest request = request_base(deadline);
    request.opening = true;
    request.dst = *head;
    Exchange x(request);
    std::string url = request_url_;
    CURLcode rc = CURLE_OK;
    std::string curl_message;
    if (auto ended = send(x, url, rc, curl_message)) return std::move(*ended);
    if (x.status == 416) {
      // Only an empty file has no byte 0.
      ContentRange cr = parse_content_range(x.content_range);
      if (cr.valid && !cr.first && cr.total && *cr.total == 0) {
        url_ = url;
        size_ = 0;
        etag_ = x.resp_etag;
        last_modified_ = x.resp_last_modified;
        return Attempt::ended(Status::ok());
      }
      return Attempt::ended(http_error(x, ErrorKind::HttpError, "HTTP 416 for the first bytes of the file"));
    }
    if ((x.status == 200 || x.status == 206) && (x.complete || (rc == CURLE_OK && x.received == x.dst.size()))) {
      url_ = url;
      size_ = x.learned_size;
      etag_ = x.resp_etag;
      last_modified_ = x.resp_last_modified;
      range_ignored_ = x.range_ignored;
      head->resize(static_cast<std::size_t>(x.received));
      // A partial first block (a short file) is still the whole of block 0.
      if (!head->empty()) cache_put(0, std::move(head));
      return Attempt::ended(Status::ok());
    }
    // Nothing of the opening request is kept: a retry starts again at byte 0.
    Attempt a = failed_attempt(x, rc, curl_message);
    a.offset = 0;
    a.progress = 0;
    return a;
  });
}

std::shared_ptr<const std::vector<std::byte>> HttpSource::cache_find(std::uint64_t index) const {
  std::lock_guard lock(cache_mu_);
  for (Block& b : cache_) {
    if (b.index == index) {
      b.last_use = ++tick_;
      return b.bytes;
    }
  }
  return nullptr;
}

void HttpSource::cache_put(std::uint64_t index, std::shared_ptr<const std::vector<std::byte>> bytes) const {
  std::lock_guard lock(cache_mu_);
  for (Block& b : cache_) {
    if (b.index == index) {
      b.last_use = ++tick_;
      return;
    }
  }
  if (cache_.size() < std::max(1u, options_.cache_blocks)) {
    cache_.push_back({index, std::move(bytes), ++tick_});
    return;
  }
  auto oldest = std::min_element(cache_.begin(), cache_.end(), [](const Block& a, const Block& b) { return a.last_use < b.last_use; });
  *oldest = {index, std::move(bytes), ++tick_};
}

Status HttpSource::cached_read(std::uint64_t offset, std::span<std::byte> dst) const {
  const std::uint64_t bs = options_.readahead;
  const std::uint64_t first = offset / bs, last = (offset + dst.size() - 1) / bs;
  // At most small_read_limit / readahead + 2 blocks: held here so eviction cannot pull them away.
  std::vector<std::shared_ptr<const std::vector<std::byte>>> blocks(static_cast<std::size_t>(last - first + 1));
  for (std::uint64_t i = first; i <= last; ++i) blocks[i - first] = cache_find(i);
  // Each run of missing blocks is one request.
  for (std::uint64_t i = first; i <= last;) {
    if (blocks[i - first]) {
      ++i;
      continue;
    }
    std::uint64_t j = i;
    while (j + 1 <= last && !blocks[j + 1 - first]) ++j;
    const std::uint64_t lo = i * bs, hi = std::min((j + 1) * bs, size_);
    std::vector<std::byte> run(static_cast<std::size_t>(hi - lo));
    SW_RETURN_IF_ERROR(fetch(lo, run));
    for (std::uint64_t k = i; k <= j; ++k) {
      const std::uint64_t b_lo = k * bs, b_hi = std::min((k + 1) * bs, size_);
      auto block = std::make_shared<std::vector<std::byte>>(run.begin() + static_cast<std::ptrdiff_t>(b_lo - lo),
                                                            run.begin() + static_cast<std::ptrdiff_t>(b_hi - lo));
      blocks[k - first] = block;
      cache_put(k, std::move(block));
    }
    i = j + 1;
  }
  std::size_t done = 0;
  for (std::uint64_t i = first; i <= last; ++i) {
    const auto& b = *blocks[i - first];
    const std::uint64_t from = (i == first) ? offset - i * bs : 0;
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(b.size() - from, dst.size() - done));
    std::memcpy(dst.data() + done, b.data() + from, n);
    done += n;
  }
  return Status::ok();
}

Status HttpSource::read_scatter_unscrubbed(std::span<const ReadRequest> requests) const {
  SW_RETURN_IF_ERROR(check_requests(requests));
  struct Piece {
    std::uint64_t offset, length;
    std::byte* out;
  };
  std::vector<Piece> pieces;
  pieces.reserve(requests.size());
  for (const ReadRequest& r : requests) {
    if (r.dst.empty()) continue;
    // A run that continues the previous one both in the file and in memory joins it: one request
    // straight into the caller's memory instead of two (read_ranges of adjacent ranges, for one).
    if (!pieces.empty() && pieces.back().offset + pieces.back().length == r.offset && pieces.back().out + pieces.back().length == r.dst.data()) {
      pieces.back().length += r.dst.size();
      continue;
    }
    pieces.push_back({r.offset, r.dst.size(), r.dst.data()});
  }

  // Small ranges the block cache already holds cost nothing.
  const std::uint64_t bs = options_.readahead;
  std::vector<Piece> wanted;
  for (const Piece& p : pieces) {
    bool cached = p.length <= small_read_limit();
    for (std::uint64_t i = p.offset / bs; cached && i <= (p.offset + p.length - 1) / bs; ++i) cached = cache_find(i) != nullptr;
    if (cached) {
      SW_RETURN_IF_ERROR(cached_read(p.offset, {p.out, static_cast<std::size_t>(p.length)}));
    } else {
      wanted.push_back(p);
    }
  }
  std::sort(wanted.begin(), wanted.end(), [](const Piece& a, const Piece& b) { return a.offset < b.offset; });

  // Jobs: a group of nearby small ranges fetched as one span into scratch memory (at most chunk_size),
  // or one chunk of a large range fetched straight into the caller's memory.
  struct Job {
    std::uint64_t offset, length;
    std::byte* direct;         // non-null: the bytes go here
    std::size_t first, count;  // else: scattered to wanted[first, first + count)
  };
  std::vector<Job> jobs;
  const std::uint64_t chunk = range_ignored_ ? UINT64_MAX : options_.chunk_size;
  for (std::size_t i = 0; i < wanted.size();) {
    const Piece& p = wanted[i];
    if (p.length >= chunk || range_ignored_) {
      for (std::uint64_t off = 0; off < p.length; off += std::min(chunk, p.length - off)) {
        jobs.push_back({p.offset + off, std::min(chunk, p.length - off), p.out + off, 0, 0});
      }
      ++i;
      continue;
    }
    std::uint64_t lo = p.offset, hi = p.offset + p.length;
    std::size_t j = i + 1;
    while (j < wanted.size() && wanted[j].length < chunk && wanted[j].offset <= hi + bs &&
           std::max(hi, wanted[j].offset + wanted[j].length) - lo <= chunk) {
      hi = std::max(hi, wanted[j].offset + wanted[j].length);
      ++j;
    }
    if (j == i + 1) {
      jobs.push_back({lo, hi - lo, p.out, 0, 0});
    } else {
      jobs.push_back({lo, hi - lo, nullptr, i, j - i});
    }
    i = j;
  }
  // A server that ignores Range streams every request from byte 0: one at a time is the least waste.
  const unsigned threads = range_ignored_ ? 1u : options_.parallel;
  return parallel_for(jobs.size(), threads, [&](std::size_t k) -> Status {
    const Job& job = jobs[k];
    if (job.direct != nullptr) return fetch(job.offset, {job.direct, static_cast<std::size_t>(job.length)});
    std::vector<std::byte> scratch(static_cast<std::size_t>(job.length));
    SW_RETURN_IF_ERROR(fetch(job.offset, scratch));
    for (std::size_t m = job.first; m < job.first + job.count; ++m) {
      const Piece& p = wanted[m];
      std::memcpy(p.out, scratch.data() + (p.offset - job.offset), static_cast<std::size_t>(p.length));
    }
    return Status::ok();
  });
}

// HttpOptions::timeout_s as the request deadlines use it: the caller's, else the environment's, else
// the default; 0 (none) for anything beyond a few decades.
Result<double> resolve_timeout(double given) {
  double t = given;
  if (std::isnan(t)) return Error(ErrorKind::InvalidArgument, "the HTTP timeout is not a number");
  if (t < 0) {
    t = kDefaultHttpTimeoutS;
    if (const char* env = std::getenv(kHttpTimeoutEnv); env != nullptr && *env != '\0') {
      char* end = nullptr;
      t = std::strtod(env, &end);
      if (end == env || *end != '\0' || std::isnan(t) || t < 0) {
        return Error(ErrorKind::InvalidArgument, std::string(kHttpTimeoutEnv) + " must be a number of seconds (0: no deadline), got \"" + env + "\"");
      }
    }
  }
  return t > 1e9 ? 0.0 : t;
}

// The CA bundle the environment names, as the clients users run read it (HttpOptions::ca_file):
// the scheme's own variable first.
std::string ca_bundle_from_environment(const char* ca_env) {
  for (const char* name : {ca_env, "CURL_CA_BUNDLE", "SSL_CERT_FILE"}) {
    if (name == nullptr) continue;
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return v;
  }
  return {};
}

}  // namespace

Clock::time_point deadline_after(double timeout_s) {
  if (timeout_s <= 0) return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
}

// "1.5 s", "600 s": a limit as the user gave it.
std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

Result<HttpOptions> request_options(const std::string& name, const HttpOptions& options, const char* ca_env) {
  const char* why = nullptr;
  if (curl::api(&why) == nullptr) return Error(ErrorKind::IoError, why).with_file(name);
  HttpOptions resolved = options;
  auto timeout = resolve_timeout(options.timeout_s);
  if (!timeout.is_ok()) return error_of(timeout).with_file(name);
  resolved.timeout_s = *timeout;
  if (resolved.ca_file.empty()) resolved.ca_file = ca_bundle_from_environment(ca_env);
  return resolved;
}

Result<SourcePtr> open_target(const std::string& name, Target target, const HttpOptions& resolved) {
  auto source = std::make_shared<HttpSource>(name, std::move(target), resolved);
  SW_RETURN_IF_ERROR(source->init());
  return SourcePtr(std::move(source));
}

Result<std::string> get_document(const std::string& name, Document what, const std::string& url, const Signing& signing, const HttpOptions& resolved,
                                 std::uint64_t cap, Clock::time_point deadline, std::string& link) {
  HttpSource source(name, Target{url, signing, false}, resolved);
  SW_RETURN_IF_ERROR(source.prepare());
  return source.get_document(what, cap, link, deadline);
}

Result<std::string> post_document(const std::string& name, Document what, const std::string& url, const PostBody& body, const Signing& signing,
                                  const HttpOptions& resolved, std::uint64_t cap, Clock::time_point deadline) {
  Signing typed = signing;
  typed.headers.push_back("Content-Type: " + body.content_type);
  HttpSource source(name, Target{url, std::move(typed), false}, resolved);
  SW_RETURN_IF_ERROR(source.prepare());
  std::string link;
  return source.get_document(what, cap, link, deadline, &body);
}

std::optional<Origin> origin_of(const std::string& url) {
  if (curl::api() == nullptr) return std::nullopt;
  CURLU* u = lib().url();
  if (u == nullptr) return std::nullopt;
  std::optional<Origin> out;
  if (lib().url_set(u, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK) {
    char *scheme = nullptr, *host = nullptr, *port = nullptr;
    if (lib().url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK && lib().url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        lib().url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
      Origin o{scheme, host, port};
      for (auto& c : o.scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      for (auto& c : o.host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out = std::move(o);
    }
    lib().free(scheme);
    lib().free(host);
    lib().free(port);
  }
  lib().url_cleanup(u);
  return out;
}

bool has_authorization(const HttpOptions& options) {
  for (const std::string& hdr : options.headers) {
    const auto colon = hdr.find(':');
    if (colon != std::string::npos && iequals(trim_header(std::string_view(hdr).substr(0, colon)), "Authorization")) return true;
  }
  return false;
}

}  // namespace safeweights::http
