// fuzz_listing — arbitrary bytes as a remote folder's listing page and as a service's error text: the
// readers a service's answers reach before anything is opened (src/io/remote_listing.h) and the
// message scrubber (src/io/secrets.h).
//
// Input: byte 0 picks the reader (bit 0 clear: an S3 ListObjectsV2 page, set: a Hub tree page; bit 1
// set: a Cloud Storage objects list page and, of the same body, an object's metadata); then the folder
// asked for up to the first '\n' (an S3 or Cloud Storage prefix such as "llama/", a Hub folder such as
// "unet"), then the page's body, which is also read as a Link header and scrubbed as a message.
//
// What must hold: a reader fails cleanly with HttpError or gives entries whose names are plain names
// directly in the folder (entry_name() accepts them: not empty, ".", "..", no '/', NUL or invalid
// UTF-8), folders with size 0; the Hub's pages never carry a next token. next_link() gives a part of
// its input. scrub() leaves none of the registered credentials in its output.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_common.h"
#include "io/remote_listing.h"
#include "io/secrets.h"

using namespace safeweights;

namespace {

// Credentials the scrubber knows during the run, in the alphabets services use.
constexpr std::string_view kSecrets[] = {"AKIAFUZZKEY000000001", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYFUZZKEY00", "hf_FuzzToken0123456789"};

void check_page(const Result<listing::Page>& page, std::string_view prefix, bool hub) {
  if (!page.is_ok()) {
    FUZZ_CHECK(page.error().kind() == ErrorKind::HttpError);
    return;
  }
  for (const FolderEntry& e : page->entries) {
    FUZZ_CHECK(listing::entry_name(std::string(prefix) + e.name, prefix).has_value());
    FUZZ_CHECK(!e.is_folder || e.size == 0);
  }
  FUZZ_CHECK(!hub || page->next.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool registered = [] {
    for (std::string_view s : kSecrets) secrets::remember(s);
    return true;
  }();
  (void)registered;
  if (size < 1) return 0;
  const bool hub = (data[0] & 1) != 0;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::size_t newline = rest.find('\n');
  std::string_view folder = newline == std::string_view::npos ? std::string_view() : rest.substr(0, newline);
  const std::string_view body = newline == std::string_view::npos ? rest : rest.substr(newline + 1);

  if ((data[0] & 2) != 0) {
    check_page(listing::parse_gs_page(body, folder), folder, false);
    const Result<listing::GsObject> object = listing::parse_gs_object(body);
    FUZZ_CHECK(object.is_ok() ? !object->generation.empty() : object.error().kind() == ErrorKind::HttpError);
    const Result<listing::GsAccessToken> token = listing::parse_gs_access_token(body);
    FUZZ_CHECK(token.is_ok() ? !token->access_token.empty() : token.error().kind() == ErrorKind::HttpError);
    (void)listing::parse_gs_credentials(body);
  } else if (hub) {
    const std::string prefix = folder.empty() ? std::string() : std::string(folder) + "/";
    check_page(listing::parse_hub_page(body, folder), prefix, true);
  } else {
    check_page(listing::parse_s3_page(body, folder), folder, false);
  }

  const std::string next = listing::next_link(body);
  FUZZ_CHECK(next.empty() || body.find(next) != std::string_view::npos);

  const std::string scrubbed = secrets::scrub(body);
  for (std::string_view s : kSecrets) FUZZ_CHECK(scrubbed.find(s) == std::string::npos);
  return 0;
}
