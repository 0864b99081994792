// Listing remote folders: the pages of one listing under one deadline, and the page parsers (S3's
// ListObjectsV2, the Hub's tree API, Cloud Storage's objects list; Cloud Storage's object metadata
// too) that read them into FolderEntry lists (the resolvers' list(), safeweights/resolver.h).
// Internal to src/io.
//
// The page readers treat a body as hostile: every name is checked (no '/', not empty, "." or "..", no
// NUL, under the folder asked for), sizes are parsed strictly, and the element texts are bounded by the
// body they come from. A Listing bounds the pages it asks for and the entries it keeps.
//
// Thread safety: pure functions; a Listing has one owner.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/http_transport.h"
#include "safeweights/error.h"
#include "safeweights/http.h"
#include "safeweights/resolver.h"

namespace safeweights::listing {

// The largest listing page read (a ListObjectsV2 page of 1,000 keys is about 300 KiB).
inline constexpr std::uint64_t kMaxPageBytes = 16u << 20;
// Pages asked for, at most, for one folder.
inline constexpr int kMaxPages = 1000;

struct Page {
  std::vector<FolderEntry> entries;
  std::string next;  // S3: the continuation token; the Hub: the next page's URL. Empty: the last page.
};

// One ListObjectsV2 response (asked with delimiter '/' under `prefix`, which is empty or ends in '/').
// Keys directly under the prefix become files, CommonPrefixes folders; the prefix's own folder marker
// (a key equal to the prefix) is left out. With <EncodingType>url</EncodingType> the keys are
// percent-decoded, '+' as a space (what S3 sends and botocore decodes). HttpError naming the rule for a
// body that is not such a response.
Result<Page> parse_s3_page(std::string_view xml, std::string_view prefix);

// One page of the Hub's tree API for the folder `dir` of a repository ("" for its root): a JSON array
// of {"type": "file" | "directory", "path": "DIR/NAME", "size": N, ...}. HttpError for anything else.
Result<Page> parse_hub_page(std::string_view json, std::string_view dir);

// One page of Cloud Storage's objects list (JSON API, asked with delimiter '/' under `prefix`, which
// is empty or ends in '/'): {"items": [{"name": N, "size": "DIGITS", ...}], "prefixes": [P],
// "nextPageToken": T}, every member optional. Items become files (the prefix's own folder marker left
// out), prefixes folders. HttpError naming the rule for anything else. (io/gs_json.cpp)
Result<Page> parse_gs_page(std::string_view json, std::string_view prefix);

// What a Cloud Storage object's metadata (JSON API) says of the version it describes.
struct GsObject {
  std::uint64_t size = 0;
  std::string generation;  // decimal digits
};
// HttpError naming the rule for a body without a decimal "size" and "generation". (io/gs_json.cpp)
Result<GsObject> parse_gs_object(std::string_view json);

// What a Google application-default credentials file holds: its "type" ("authorized_user",
// "service_account", "external_account", ...) and an authorized_user's members. A member that is
// absent or not a string is empty; all are empty when the text is not a JSON object. (io/gs_json.cpp)
struct GsCredentialsFile {
  std::string type, client_id, client_secret, refresh_token, token_uri;
};
GsCredentialsFile parse_gs_credentials(std::string_view json);

// An OAuth token endpoint's (or the metadata server's) reply: {"access_token": T, "expires_in": N,
// "token_type": "Bearer"}. A missing "expires_in" is 0 (the token is used once, never cached).
// HttpError naming the rule for a body without a string "access_token", a "token_type" other than
// Bearer, or an "expires_in" that is not a whole number of seconds. (io/gs_json.cpp)
struct GsAccessToken {
  std::string access_token;
  std::uint64_t expires_in = 0;
};
Result<GsAccessToken> parse_gs_access_token(std::string_view json);

// The name of a listed entry `full` in the folder `prefix` (empty, or ending in '/'): what follows the
// prefix, when that is a valid name (UTF-8, not empty, "." or "..", no '/' nor NUL). nullopt otherwise.
std::optional<std::string> entry_name(std::string_view full, std::string_view prefix);

// A size as a listing spells it: decimal digits only, at most 64 bits. nullopt for anything else.
std::optional<std::uint64_t> parse_size(std::string_view s);

// The URL of rel="next" in a Link header ("<URL>; rel=\"next\", <...>; rel=\"prev\""), empty when none.
std::string next_link(std::string_view link);

// One remote folder's listing: its pages, all under one deadline computed when the listing starts
// (--timeout bounds the whole listing, not each page: a service answering a page a second with a next
// page forever would otherwise hold a listing for 1,000 pages), and the entries read so far. A scheme's
// list_pages() (io/scheme.h) fetches each page through it and adds what the page parser read.
class Listing {
 public:
  // `options` resolved (http::request_options); both must outlive the listing.
  Listing(const std::string& name, const HttpOptions& options);

  // The body of the next page, a GET of `url` (and its Link header), asked with what is left of the
  // deadline. Timeout, naming the pages read, once the deadline has passed; ResourceLimit past
  // kMaxPages.
  Result<std::string> fetch(const std::string& url, const http::Signing& signing, std::string& link);
  // A page's entries, read by the page parser, added to the listing's (at most kMaxFolderEntries).
  Status add(Result<Page>& page);
  // Every page of a listing whose pages are chained by a continuation token (S3, Cloud Storage):
  // `url_of(token)` is the page after `token` ("" for the first), `parse` reads a page (its `next`, the
  // token; empty on the last). HttpError when a page repeats the token it was asked with; FileNotFound
  // when nothing is under a non-empty `prefix` (object stores have no empty folders; an empty bucket
  // is still a folder).
  Status follow_tokens(const std::function<std::string(const std::string& token)>& url_of, const http::Signing& signing,
                       const std::function<Result<Page>(std::string_view body)>& parse, std::string_view prefix);
  bool empty() const { return entries_.empty(); }
  // The entries, sorted by name; HttpError when the service named one twice.
  Result<std::vector<FolderEntry>> sorted();

 private:
  // Timeout, naming the pages read and `why` (the deadline, or the page that missed it).
  Error stopped(const std::string& why) const;

  const std::string& name_;
  const HttpOptions& options_;
  const http::Clock::time_point deadline_;
  int pages_ = 0;
  std::vector<FolderEntry> entries_;
};

}  // namespace safeweights::listing
