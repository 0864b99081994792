// The hf:// scheme (io/scheme.h; safeweights/hub.h): names of Hub repositories, their resolve URLs,
// the token as huggingface_hub finds it and the origins it may go to, and folders listed through the
// Hub's tree API (pages read by io/hub_tree.cpp).

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/status_macros.h"
#include "core/strings.h"
#include "io/scheme.h"
#include "io/secrets.h"
#include "io/uri.h"
#include "io/posix_util.h"
#include "safeweights/hub.h"

namespace safeweights {
namespace {

// The token file, where huggingface_hub writes it on `hf auth login`.
std::string token_path() {
  if (std::string p = getenv_string("HF_TOKEN_PATH"); !p.empty()) return p;
  if (std::string h = getenv_string("HF_HOME"); !h.empty()) return h + "/token";
  if (std::string x = getenv_string("XDG_CACHE_HOME"); !x.empty()) return x + "/huggingface/token";
  if (std::string home = getenv_string("HOME"); !home.empty()) return home + "/.cache/huggingface/token";
  return {};
}

}  // namespace

bool is_hf_url(std::string_view s) noexcept { return io::hf_scheme().owns(s); }

Result<HfLocation> parse_hf_url(std::string_view url) {
  auto bad = [&](const std::string& why) {
    return Error(ErrorKind::InvalidArgument, why + " (hf://[datasets/|spaces/]ORG/REPO[@REVISION]/PATH)").with_file(url);
  };
  if (!is_hf_url(url)) return bad("not an hf:// URL");
  std::string_view rest = url.substr(5);
  HfLocation loc;
  loc.repo_type = "model";
  if (rest.starts_with("datasets/")) {
    loc.repo_type = "dataset";
    rest.remove_prefix(9);
  } else if (rest.starts_with("spaces/")) {
    loc.repo_type = "space";
    rest.remove_prefix(7);
  } else if (rest.starts_with("models/")) {
    rest.remove_prefix(7);
  }
  const std::size_t org_end = rest.find('/');
  if (org_end == std::string_view::npos || org_end == 0) return bad("an hf:// URL names ORG/REPO");
  std::size_t repo_end = rest.find('/', org_end + 1);
  std::string_view repo_part = rest.substr(0, repo_end);
  std::string_view path = repo_end == std::string_view::npos ? std::string_view() : rest.substr(repo_end + 1);
  loc.revision = "main";
  if (const std::size_t at = repo_part.find('@'); at != std::string_view::npos) {
    auto revision = uri::percent_decode(repo_part.substr(at + 1));
    if (!revision || revision->empty()) return bad("empty or badly escaped revision after '@'");
    loc.revision = *revision;
    repo_part = repo_part.substr(0, at);
  }
  if (repo_part.size() <= org_end + 1) return bad("an hf:// URL names ORG/REPO");
  for (char c : repo_part) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '/')) {
      return bad("a repository id holds only letters, digits, '-', '_' and '.'");
    }
  }
  loc.repo_id = std::string(repo_part);
  while (path.ends_with('/')) path.remove_suffix(1);
  // Each segment must be a name: the resolve URL must not climb out of the repository.
  for (std::size_t pos = 0; pos < path.size();) {
    std::size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    std::string_view seg = path.substr(pos, end - pos);
    if (seg.empty() || seg == "." || seg == "..") return bad("a path inside the repository cannot have empty, \".\" or \"..\" segments");
    pos = end + 1;
  }
  if (path.find('\0') != std::string_view::npos) return bad("a path cannot hold a NUL byte");
  loc.path = std::string(path);
  return loc;
}

std::string hf_endpoint() {
  std::string e = getenv_string("HF_ENDPOINT");
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e.empty() ? std::string("https://huggingface.co") : e;
}

std::string hf_resolve_url(const HfLocation& location) {
  std::string prefix = location.repo_type == "dataset" ? "datasets/" : location.repo_type == "space" ? "spaces/" : "";
  return hf_endpoint() + "/" + prefix + location.repo_id + "/resolve/" + uri::percent_encode(location.revision, false) + "/" +
         uri::percent_encode(location.path, true);
}

std::optional<std::string> hf_token() {
  if (std::string t = getenv_string("HF_TOKEN"); !t.empty()) {
    secrets::remember(t);
    return t;
  }
  const std::string path = token_path();
  if (path.empty()) return std::nullopt;
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return std::nullopt;
  char buf[4096];
  const std::size_t n = std::fread(buf, 1, sizeof buf, f.get());
  std::string_view text(buf, n);
  text = trim(text.substr(0, text.find('\n')), " \t\r");
  if (text.empty()) return std::nullopt;
  secrets::remember(text);
  return std::string(text);
}

namespace io {
namespace {

// Whether the Hub token may go to this origin: https only (a token in clear text is a token given
// away), and only to the hub, its subdomains (CDN), or the configured endpoint.
bool hub_token_origin(const http::Origin& origin) {
  if (origin.scheme != "https") return false;
  const std::string& h = origin.host;
  if (h == "huggingface.co" || h.ends_with(".huggingface.co")) return true;
  if (const char* endpoint = std::getenv("HF_ENDPOINT"); endpoint != nullptr && *endpoint != '\0') return http::origin_of(endpoint) == origin;
  return false;
}

class HfScheme final : public Scheme {
 public:
  std::string_view prefix() const override { return "hf://"; }

  Result<http::Target> target(const std::string& name, const HttpOptions& resolved) const override {
    SW_ASSIGN_OR_RETURN(HfLocation location, parse_hf_url(name));
    if (location.path.empty()) return Error(ErrorKind::InvalidArgument, "names a repository, not a file: hf://ORG/REPO/PATH").with_file(name);
    http::Target target{hf_resolve_url(location), {}, false};
    SW_RETURN_IF_ERROR(add_hub_token(target.url, resolved, target.signing));
    return target;
  }

  // The pages of the Hub's tree API for the folder (not recursive), following rel="next" on the
  // endpoint's own origin only: the token goes nowhere else.
  Status list_pages(listing::Listing& listing, const std::string& name, const HttpOptions& resolved) const override {
    SW_ASSIGN_OR_RETURN(HfLocation location, parse_hf_url(name));
    const std::string endpoint = hf_endpoint();
    const std::string kind = location.repo_type == "dataset" ? "datasets" : location.repo_type == "space" ? "spaces" : "models";
    std::string url = endpoint + "/api/" + kind + "/" + location.repo_id + "/tree/" + uri::percent_encode(location.revision, false);
    if (!location.path.empty()) {
      // Appended in two steps: GCC 12 sees a false overlap (-Wrestrict) in "/" + a temporary here.
      url += '/';
      url += uri::percent_encode(location.path, true);
    }
    http::Signing signing;
    SW_RETURN_IF_ERROR(add_hub_token(url, resolved, signing));
    while (!url.empty()) {
      std::string link;
      SW_ASSIGN_OR_RETURN(std::string body, listing.fetch(url, signing, link));
      auto p = listing::parse_hub_page(body, location.path);
      SW_RETURN_IF_ERROR(listing.add(p));
      url = listing::next_link(link);
      if (!url.empty() && !url.starts_with(endpoint + "/"))
        return Error(ErrorKind::HttpError, "the listing's next page is on another host than the Hub's endpoint: not followed").with_file(name);
    }
    return Status::ok();
  }

  // A repository (no path), or a folder of it (ending in '/').
  bool names_folder(std::string_view name) const override {
    auto location = parse_hf_url(name);
    return location.is_ok() && (location->path.empty() || name.ends_with('/'));
  }

  std::string base_name(std::string_view folder) const override {
    auto location = parse_hf_url(folder);
    if (!location.is_ok()) return Scheme::base_name(folder);
    const std::string& inner = location->path.empty() ? location->repo_id : location->path;
    return inner.substr(inner.find_last_of('/') + 1);
  }
};

}  // namespace

const Scheme& hf_scheme() {
  static const HfScheme scheme;
  return scheme;
}

Status add_hub_token(const std::string& url, const HttpOptions& options, http::Signing& signing) {
  if (!options.use_hf_token || http::has_authorization(options)) return Status::ok();
  const auto origin = http::origin_of(url);
  if (!origin || !hub_token_origin(*origin)) return Status::ok();
  const std::optional<std::string> token = hf_token();
  if (!token) return Status::ok();
  if (token->find_first_of("\r\n") != std::string::npos) return Error(ErrorKind::EnvironmentFault, "the Hub token contains a line break");
  signing.headers.push_back("Authorization: Bearer " + *token);
  return Status::ok();
}

}  // namespace io
}  // namespace safeweights
