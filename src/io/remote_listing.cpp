// One remote folder's listing (io/remote_listing.h): its pages under one deadline, its entries bounded.

#include <algorithm>

#include "core/status_macros.h"
#include "io/remote_listing.h"
#include "safeweights/cancel.h"

namespace safeweights::listing {

Listing::Listing(const std::string& name, const HttpOptions& options)
    : name_(name), options_(options), deadline_(http::deadline_after(options.timeout_s)) {}

Result<std::string> Listing::fetch(const std::string& url, const http::Signing& signing, std::string& link) {
  if (pages_ == kMaxPages)
    return Error(ErrorKind::ResourceLimit, "the listing goes on past " + std::to_string(kMaxPages) + " pages").with_file(name_);
  if (Status s = check_cancelled(); !s.is_ok()) return std::move(s.error().with_file(name_));
  if (http::Clock::now() >= deadline_) {
    return stopped("it missed its deadline of " + http::seconds(options_.timeout_s) + " (--timeout, " + kHttpTimeoutEnv +
                   ", which bounds the whole listing)");
  }
  auto body = http::get_document(name_, http::Document::ListingPage, url, signing, options_, kMaxPageBytes, deadline_, link);
  if (!body.is_ok()) {
    if (body.error().kind() == ErrorKind::Timeout) return stopped("page " + std::to_string(pages_ + 1) + ": " + body.error().message());
    return body;
  }
  ++pages_;
  return body;
}

Status Listing::add(Result<Page>& page) {
  if (!page.is_ok()) return error_of(page).with_file(name_);
  if (entries_.size() + page->entries.size() > kMaxFolderEntries)
    return Error(ErrorKind::ResourceLimit, "more than " + std::to_string(kMaxFolderEntries) + " entries in the folder").with_file(name_);
  for (FolderEntry& e : page->entries) entries_.push_back(std::move(e));
  return Status::ok();
}

Status Listing::follow_tokens(const std::function<std::string(const std::string& token)>& url_of, const http::Signing& signing,
                              const std::function<Result<Page>(std::string_view body)>& parse, std::string_view prefix) {
  std::string token;
  for (;;) {
    std::string link;
    SW_ASSIGN_OR_RETURN(std::string body, fetch(url_of(token), signing, link));
    auto page = parse(body);
    SW_RETURN_IF_ERROR(add(page));
    if (page->next.empty()) break;
    if (page->next == token) return Error(ErrorKind::HttpError, "the listing repeats its continuation token").with_file(name_);
    token = std::move(page->next);
  }
  if (entries_.empty() && !prefix.empty()) return Error(ErrorKind::FileNotFound, "no such remote folder: nothing under this prefix").with_file(name_);
  return Status::ok();
}

Result<std::vector<FolderEntry>> Listing::sorted() {
  std::sort(entries_.begin(), entries_.end(), [](const FolderEntry& a, const FolderEntry& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < entries_.size(); ++i) {
    if (entries_[i].name == entries_[i - 1].name)
      return Error(ErrorKind::HttpError, "the listing names `" + entries_[i].name + "` twice").with_file(name_);
  }
  return std::move(entries_);
}

Error Listing::stopped(const std::string& why) const {
  return Error(ErrorKind::Timeout, "the listing stopped after " + std::to_string(pages_) + (pages_ == 1 ? " page" : " pages") + " (" +
                                       std::to_string(entries_.size()) + " entries): " + why)
      .with_file(name_);
}

}  // namespace safeweights::listing
