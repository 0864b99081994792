// The Hub's tree API pages (JSON) into folder entries. Drawn below json/ in docs/ARCHITECTURE.md (it
// parses JSON), apart from the rest of io/, which reaches it through io/remote_listing.h only.

#include <string>
#include <string_view>

#include "io/remote_listing.h"
#include "json/dom.h"

namespace safeweights::listing {
namespace {

Error bad_page(const std::string& what) { return Error(ErrorKind::HttpError, "the listing is not a Hub tree response: " + what); }

}  // namespace

Result<Page> parse_hub_page(std::string_view text, std::string_view dir) {
  std::unique_ptr<simdjson::dom::parser> own;
  json::element root;
  if (auto err = json::parse_document(text, 16, own, root); err) return bad_page(std::string("not valid JSON: ") + simdjson::error_message(err));
  if (root.type() != json::element_type::ARRAY) return bad_page("not a JSON array");
  const std::string prefix = dir.empty() ? std::string() : std::string(dir) + "/";
  Page page;
  for (json::element item : json::as_array(root)) {
    if (item.type() != json::element_type::OBJECT) return bad_page("an item that is not an object");
    const simdjson::dom::object o = json::as_object(item);
    std::string_view type, path;
    if (o["type"].get_string().get(type) != simdjson::SUCCESS || o["path"].get_string().get(path) != simdjson::SUCCESS)
      return bad_page("an item without a string \"type\" and \"path\"");
    if (type != "file" && type != "directory") return bad_page("an item of type " + json::quoted(type));
    std::optional<std::string> name = entry_name(path, prefix);
    if (!name) return bad_page("the path " + json::quoted(path) + " is not a name directly in the folder asked for");
    std::uint64_t size = 0;
    if (type == "file" && o["size"].get_uint64().get(size) != simdjson::SUCCESS) return bad_page("a file without a byte count in \"size\"");
    page.entries.push_back({std::move(*name), size, type == "directory"});
  }
  return page;
}

}  // namespace safeweights::listing
