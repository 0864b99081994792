// ListObjectsV2 pages (S3's XML) into folder entries, and the Link header's next page. The body is a
// service's answer, read as hostile input: only the few elements a listing needs are looked at, each
// bounded by the body, every entity and escape decoded strictly.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status_macros.h"
#include "core/utf8.h"
#include "io/remote_listing.h"
#include "io/uri.h"

namespace safeweights::listing {
namespace {

Error bad_page(const std::string& what) { return Error(ErrorKind::HttpError, "the listing is not a ListObjectsV2 response: " + what); }

// The text of the next <tag>...</tag> at or after `from` (elements of a listing carry no attributes),
// and where it ends. nullopt when there is none.
struct Element {
  std::string_view text;
  std::size_t end = 0;
};
std::optional<Element> next_element(std::string_view xml, std::string_view tag, std::size_t from) {
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on "</" + std::string(tag).
  std::string open(1, '<'), close("</");
  open.append(tag).push_back('>');
  close.append(tag).push_back('>');
  const std::size_t start = xml.find(open, from);
  if (start == std::string_view::npos) return std::nullopt;
  const std::size_t end = xml.find(close, start + open.size());
  if (end == std::string_view::npos) return std::nullopt;
  return Element{xml.substr(start + open.size(), end - start - open.size()), end + close.size()};
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// XML character data with its five named entities and numeric references decoded. nullopt for an
// unknown entity, a reference to no character, or markup inside the text.
std::optional<std::string> xml_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (c == '<') return std::nullopt;
    if (c != '&') {
      out += c;
      ++i;
      continue;
    }
    const std::size_t semi = s.find(';', i);
    if (semi == std::string_view::npos || semi - i > 12) return std::nullopt;
    const std::string_view name = s.substr(i + 1, semi - i - 1);
    i = semi + 1;
    if (name == "amp") {
      out += '&';
    } else if (name == "lt") {
      out += '<';
    } else if (name == "gt") {
      out += '>';
    } else if (name == "quot") {
      out += '"';
    } else if (name == "apos") {
      out += '\'';
    } else if (name.size() >= 2 && name[0] == '#') {
      const bool hex = name[1] == 'x';
      std::string_view digits = name.substr(hex ? 2 : 1);
      if (digits.empty()) return std::nullopt;
      std::uint32_t cp = 0;
      for (char d : digits) {
        int v = -1;
        if (d >= '0' && d <= '9') v = d - '0';
        if (hex && d >= 'a' && d <= 'f') v = d - 'a' + 10;
        if (hex && d >= 'A' && d <= 'F') v = d - 'A' + 10;
        if (v < 0) return std::nullopt;
        cp = cp * (hex ? 16 : 10) + static_cast<std::uint32_t>(v);
        if (cp > 0x10FFFF) return std::nullopt;
      }
      if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
      append_utf8(out, cp);
    } else {
      return std::nullopt;
    }
  }
  return out;
}

// A key or prefix as the listing gives it: XML-decoded, then percent-decoded ('+' is a space) when
// the response says it is url-encoded.
Result<std::string> listed_name(std::string_view raw, bool url_encoded, std::string_view element) {
  std::optional<std::string> text = xml_text(raw);
  if (!text) return bad_page("a malformed <" + std::string(element) + ">");
  if (!url_encoded) return std::move(*text);
  for (char& c : *text)
    if (c == '+') c = ' ';
  std::optional<std::string> decoded = uri::percent_decode(*text);
  if (!decoded) return bad_page("a badly escaped <" + std::string(element) + ">");
  return std::move(*decoded);
}

// The name of `full` (a key or common prefix) inside the folder `prefix`: what follows the prefix, less
// one trailing '/' for a folder. Empty for the prefix's own folder marker.
Result<std::string> name_in_folder(std::string_view full, std::string_view prefix, bool folder) {
  if (folder) {
    if (!full.ends_with('/')) return bad_page("a common prefix that does not end in '/'");
    full.remove_suffix(1);
  } else if (full == prefix) {
    return std::string();
  }
  std::optional<std::string> name = entry_name(full, prefix);
  if (!name) return bad_page("an entry outside the prefix, or whose name cannot be a file's name in the folder");
  return std::move(*name);
}

}  // namespace

std::optional<std::uint64_t> parse_size(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  return v;
}

std::optional<std::string> entry_name(std::string_view full, std::string_view prefix) {
  if (!full.starts_with(prefix)) return std::nullopt;
  const std::string_view name = full.substr(prefix.size());
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos || name.find('\0') != std::string_view::npos ||
      !is_valid_utf8(name)) {
    return std::nullopt;
  }
  return std::string(name);
}

Result<Page> parse_s3_page(std::string_view xml, std::string_view prefix) {
  if (xml.find("<ListBucketResult") == std::string_view::npos) return bad_page("no <ListBucketResult>");
  Page page;
  bool url_encoded = false;
  if (auto e = next_element(xml, "EncodingType", 0)) url_encoded = e->text == "url";
  for (auto c = next_element(xml, "Contents", 0); c; c = next_element(xml, "Contents", c->end)) {
    auto key = next_element(c->text, "Key", 0);
    auto size = next_element(c->text, "Size", 0);
    if (!key || !size) return bad_page("a <Contents> without <Key> or <Size>");
    SW_ASSIGN_OR_RETURN(std::string full, listed_name(key->text, url_encoded, "Key"));
    SW_ASSIGN_OR_RETURN(std::string name, name_in_folder(full, prefix, false));
    auto bytes = parse_size(size->text);
    if (!bytes) return bad_page("a <Size> that is not a byte count");
    if (!name.empty()) page.entries.push_back({std::move(name), *bytes, false});
  }
  for (auto c = next_element(xml, "CommonPrefixes", 0); c; c = next_element(xml, "CommonPrefixes", c->end)) {
    auto p = next_element(c->text, "Prefix", 0);
    if (!p) return bad_page("a <CommonPrefixes> without <Prefix>");
    SW_ASSIGN_OR_RETURN(std::string full, listed_name(p->text, url_encoded, "Prefix"));
    SW_ASSIGN_OR_RETURN(std::string name, name_in_folder(full, prefix, true));
    page.entries.push_back({std::move(name), 0, true});
  }
  auto truncated = next_element(xml, "IsTruncated", 0);
  if (truncated && truncated->text == "true") {
    auto token = next_element(xml, "NextContinuationToken", 0);
    std::optional<std::string> text = token ? xml_text(token->text) : std::nullopt;
    if (!text || text->empty()) return bad_page("<IsTruncated> true without a <NextContinuationToken>");
    page.next = std::move(*text);
  } else if (truncated && truncated->text != "false") {
    return bad_page("an <IsTruncated> that is neither true nor false");
  }
  return page;
}

std::string next_link(std::string_view link) {
  // Link: <URL>; rel="next", <URL>; rel="prev"  (RFC 8288)
  for (std::size_t pos = 0; pos < link.size();) {
    const std::size_t open = link.find('<', pos);
    if (open == std::string_view::npos) break;
    const std::size_t close = link.find('>', open);
    if (close == std::string_view::npos) break;
    std::size_t end = link.find('<', close);
    if (end == std::string_view::npos) end = link.size();
    const std::string_view params = link.substr(close + 1, end - close - 1);
    if (params.find("rel=\"next\"") != std::string_view::npos || params.find("rel=next") != std::string_view::npos) {
      return std::string(link.substr(open + 1, close - open - 1));
    }
    pos = end;
  }
  return {};
}

}  // namespace safeweights::listing
