// Listing remote folders: S3's ListObjectsV2 pages and the Hub's tree pages read into FolderEntry lists
// (the resolvers' list(), safeweights/resolver.h). Internal to src/io.
//
// The page readers treat a body as hostile: every name is checked (no '/', not empty, "." or "..", no
// NUL, under the folder asked for), sizes are parsed strictly, and the element texts are bounded by the
// body they come from. list_remote_folder() bounds the pages it asks for and the entries it keeps.
//
// Thread safety: pure functions, and list_remote_folder() is reentrant.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// The name of a listed entry `full` in the folder `prefix` (empty, or ending in '/'): what follows the
// prefix, when that is a valid name (UTF-8, not empty, "." or "..", no '/' nor NUL). nullopt otherwise.
std::optional<std::string> entry_name(std::string_view full, std::string_view prefix);

// The URL of rel="next" in a Link header ("<URL>; rel=\"next\", <...>; rel=\"prev\""), empty when none.
std::string next_link(std::string_view link);

// What is directly in the remote folder `name` (s3:// or hf://), sorted, through as many pages as the
// service sends (at most kMaxPages, kMaxFolderEntries entries). Errors name the folder.
Result<std::vector<FolderEntry>> list_remote_folder(const std::string& name, const HttpOptions& options);

// A local folder (symbolic links followed) or list_remote_folder(): what the resolvers' list() runs.
Result<std::vector<FolderEntry>> list_folder(const std::string& name, const HttpOptions& options);

}  // namespace safeweights::listing
