// The http:// and https:// schemes (io/scheme.h): a URL is requested as given. The Hub's token goes
// with a request to the Hub's own origin (io/scheme_hf.cpp says when); nothing else is added. An HTTP
// server has no listing: an http(s) name is a file, never a folder.

#include "io/scheme.h"

namespace safeweights::io {
namespace {

class HttpScheme final : public Scheme {
 public:
  explicit HttpScheme(std::string_view prefix) : prefix_(prefix) {}

  std::string_view prefix() const override { return prefix_; }

  Result<http::Target> target(const std::string& name, const HttpOptions& resolved) const override {
    http::Target target{name, {}, false};
    if (Status s = add_hub_token(name, resolved, target.signing); !s.is_ok()) return std::move(s).error();
    return target;
  }

  Status list_pages(listing::Listing& /*listing*/, const std::string& name, const HttpOptions& /*resolved*/) const override {
    return Error(ErrorKind::NotSupported, "an http(s) URL has no listing: name the files (s3://, gs:// and hf:// folders are listed)")
        .with_file(name);
  }

  bool names_folder(std::string_view /*name*/) const override { return false; }

  // The query and fragment go before the last path segment does.
  std::string sibling(std::string_view base, std::string_view file) const override {
    return Scheme::sibling(base.substr(0, base.find_first_of("?#")), file);
  }

 private:
  std::string_view prefix_;
};

}  // namespace

const Scheme& http_scheme() {
  static const HttpScheme scheme("http://");
  return scheme;
}

const Scheme& https_scheme() {
  static const HttpScheme scheme("https://");
  return scheme;
}

}  // namespace safeweights::io
