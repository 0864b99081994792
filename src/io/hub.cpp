// hf:// names to resolve URLs, and the Hub token as huggingface_hub finds it. No network here.

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/strings.h"
#include "io/secrets.h"
#include "io/uri.h"
#include "safeweights/hub.h"

namespace safeweights {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// The token file, where huggingface_hub writes it on `hf auth login`.
std::string token_path() {
  if (std::string p = env("HF_TOKEN_PATH"); !p.empty()) return p;
  if (std::string h = env("HF_HOME"); !h.empty()) return h + "/token";
  if (std::string x = env("XDG_CACHE_HOME"); !x.empty()) return x + "/huggingface/token";
  if (std::string home = env("HOME"); !home.empty()) return home + "/.cache/huggingface/token";
  return {};
}

}  // namespace

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
  std::string e = env("HF_ENDPOINT");
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e.empty() ? std::string("https://huggingface.co") : e;
}

std::string hf_resolve_url(const HfLocation& location) {
  std::string prefix = location.repo_type == "dataset" ? "datasets/" : location.repo_type == "space" ? "spaces/" : "";
  return hf_endpoint() + "/" + prefix + location.repo_id + "/resolve/" + uri::percent_encode(location.revision, false) + "/" +
         uri::percent_encode(location.path, true);
}

std::optional<std::string> hf_token() {
  if (std::string t = env("HF_TOKEN"); !t.empty()) {
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

}  // namespace safeweights
