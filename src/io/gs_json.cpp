// Cloud Storage's JSON documents (io/remote_listing.h): objects-list pages, an object's metadata, an
// application-default credentials file, an OAuth token endpoint's reply. Drawn below json/ in docs/ARCHITECTURE.md (it
// parses JSON), like io/hub_tree.cpp; the gs:// scheme reaches it through io/remote_listing.h only.

#include <string>
#include <string_view>

#include "io/remote_listing.h"
#include "json/dom.h"

namespace safeweights::listing {
namespace {

Error bad_page(const std::string& what) { return Error(ErrorKind::HttpError, "the listing is not a Cloud Storage objects list: " + what); }
Error bad_object(const std::string& what) { return Error(ErrorKind::HttpError, "the object's metadata is not Cloud Storage's: " + what); }

// A member that must be a string when present. Absent: an empty view, and true.
bool optional_string(const simdjson::dom::object& o, const char* key, std::string_view& out) {
  simdjson::dom::element e;
  if (o[key].get(e) != simdjson::SUCCESS) return true;
  return e.get_string().get(out) == simdjson::SUCCESS;
}

// A member that must be an array when present. Absent: true, and `present` false.
bool optional_array(const simdjson::dom::object& o, const char* key, simdjson::dom::array& out, bool& present) {
  simdjson::dom::element e;
  present = o[key].get(e) == simdjson::SUCCESS;
  return !present || e.get_array().get(out) == simdjson::SUCCESS;
}

Status add_items(const simdjson::dom::array& items, std::string_view prefix, Page& page) {
  for (json::element item : items) {
    std::string_view name, size;
    if (item.type() != json::element_type::OBJECT) return bad_page("an item that is not an object");
    const simdjson::dom::object o = json::as_object(item);
    if (o["name"].get_string().get(name) != simdjson::SUCCESS || o["size"].get_string().get(size) != simdjson::SUCCESS)
      return bad_page("an item without a string \"name\" and a string \"size\"");
    if (name == prefix) continue;  // the folder's own marker object
    std::optional<std::string> entry = entry_name(name, prefix);
    if (!entry) return bad_page("the object " + json::quoted(name) + " is not a name directly in the folder asked for");
    std::optional<std::uint64_t> bytes = parse_size(size);
    if (!bytes) return bad_page("the size " + json::quoted(size) + " of " + json::quoted(name) + " is not a byte count");
    page.entries.push_back({std::move(*entry), *bytes, false});
  }
  return Status::ok();
}

Status add_prefixes(const simdjson::dom::array& prefixes, std::string_view prefix, Page& page) {
  for (json::element item : prefixes) {
    std::string_view full;
    if (item.get_string().get(full) != simdjson::SUCCESS || !full.ends_with('/')) return bad_page("a prefix that is not a string ending in '/'");
    std::optional<std::string> entry = entry_name(full.substr(0, full.size() - 1), prefix);
    if (!entry) return bad_page("the prefix " + json::quoted(full) + " is not a folder directly in the folder asked for");
    page.entries.push_back({std::move(*entry), 0, true});
  }
  return Status::ok();
}

}  // namespace

Result<Page> parse_gs_page(std::string_view text, std::string_view prefix) {
  std::unique_ptr<simdjson::dom::parser> own;
  json::element root;
  if (auto err = json::parse_document(text, 16, own, root); err) return bad_page(std::string("not valid JSON: ") + simdjson::error_message(err));
  if (root.type() != json::element_type::OBJECT) return bad_page("not a JSON object");
  const simdjson::dom::object o = json::as_object(root);
  simdjson::dom::array items, prefixes;
  bool has_items = false, has_prefixes = false;
  std::string_view next;
  if (!optional_array(o, "items", items, has_items) || !optional_array(o, "prefixes", prefixes, has_prefixes))
    return bad_page("\"items\" or \"prefixes\" is not an array");
  if (!optional_string(o, "nextPageToken", next)) return bad_page("\"nextPageToken\" is not a string");
  Page page;
  if (has_items) {
    if (Status s = add_items(items, prefix, page); !s.is_ok()) return std::move(s).error();
  }
  if (has_prefixes) {
    if (Status s = add_prefixes(prefixes, prefix, page); !s.is_ok()) return std::move(s).error();
  }
  page.next = std::string(next);
  return page;
}

Result<GsObject> parse_gs_object(std::string_view text) {
  std::unique_ptr<simdjson::dom::parser> own;
  json::element root;
  if (auto err = json::parse_document(text, 16, own, root); err) return bad_object(std::string("not valid JSON: ") + simdjson::error_message(err));
  if (root.type() != json::element_type::OBJECT) return bad_object("not a JSON object");
  const simdjson::dom::object o = json::as_object(root);
  std::string_view size, generation;
  if (o["size"].get_string().get(size) != simdjson::SUCCESS || o["generation"].get_string().get(generation) != simdjson::SUCCESS)
    return bad_object("no string \"size\" and \"generation\"");
  std::optional<std::uint64_t> bytes = parse_size(size);
  if (!bytes || !parse_size(generation)) return bad_object("\"size\" or \"generation\" is not a decimal number");
  return GsObject{*bytes, std::string(generation)};
}

GsCredentialsFile parse_gs_credentials(std::string_view text) {
  std::unique_ptr<simdjson::dom::parser> own;
  json::element root;
  GsCredentialsFile file;
  if (json::parse_document(text, 16, own, root) || root.type() != json::element_type::OBJECT) return file;
  const simdjson::dom::object o = json::as_object(root);
  auto member = [&](const char* key, std::string& out) {
    std::string_view v;
    if (optional_string(o, key, v)) out = std::string(v);
  };
  member("type", file.type);
  member("client_id", file.client_id);
  member("client_secret", file.client_secret);
  member("refresh_token", file.refresh_token);
  member("token_uri", file.token_uri);
  return file;
}

Result<GsAccessToken> parse_gs_access_token(std::string_view text) {
  auto bad = [](const std::string& what) { return Error(ErrorKind::HttpError, "the reply is not an OAuth access token: " + what); };
  std::unique_ptr<simdjson::dom::parser> own;
  json::element root;
  if (auto err = json::parse_document(text, 16, own, root); err) return bad(std::string("not valid JSON: ") + simdjson::error_message(err));
  if (root.type() != json::element_type::OBJECT) return bad("not a JSON object");
  const simdjson::dom::object o = json::as_object(root);
  GsAccessToken token;
  std::string_view access, type;
  if (o["access_token"].get_string().get(access) != simdjson::SUCCESS || access.empty()) return bad("no string \"access_token\"");
  if (!optional_string(o, "token_type", type) || !(type.empty() || type == "Bearer" || type == "bearer"))
    return bad("a \"token_type\" other than Bearer");
  simdjson::dom::element expires;
  if (o["expires_in"].get(expires) == simdjson::SUCCESS && expires.get_uint64().get(token.expires_in) != simdjson::SUCCESS)
    return bad("\"expires_in\" is not a whole number of seconds");
  token.access_token = std::string(access);
  return token;
}

}  // namespace safeweights::listing
