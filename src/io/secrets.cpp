// The registry of credentials and the message scrubber (io/secrets.h).

#include "io/secrets.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <mutex>
#include <set>
#include <vector>

#include "core/strings.h"
#include "io/uri.h"
#include "safeweights/http.h"

namespace safeweights::secrets {
namespace {

bool lower_equals(std::string_view a, std::string_view lower) {
  return a.size() == lower.size() &&
         std::equal(a.begin(), a.end(), lower.begin(), [](char x, char y) { return std::tolower(static_cast<unsigned char>(x)) == y; });
}

bool contains_nocase(std::string_view text, std::string_view lower) {
  for (std::size_t i = 0; i + lower.size() <= text.size(); ++i) {
    if (lower_equals(text.substr(i, lower.size()), lower)) return true;
  }
  return false;
}

std::string base64(std::string_view s) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < s.size(); i += 3) {
    std::uint32_t v = static_cast<unsigned char>(s[i]) << 16;
    if (i + 1 < s.size()) v |= static_cast<unsigned char>(s[i + 1]) << 8;
    if (i + 2 < s.size()) v |= static_cast<unsigned char>(s[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < s.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < s.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

// Each character of `from` in `s` replaced by its escape.
std::string escaped(std::string_view s, std::string_view from, const std::string_view* escapes) {
  std::string out;
  for (char c : s) {
    const std::size_t at = from.find(c);
    if (at == std::string_view::npos) {
      out += c;
    } else {
      out += escapes[at];
    }
  }
  return out;
}

// The spellings a credential may take in a quoted text: as it is, percent-encoded (upper- and
// lower-case hex: how URLs and form bodies carry it), JSON-escaped ('/' as "\/"), XML-escaped, base64.
std::vector<std::string> spellings(std::string_view secret) {
  static constexpr std::string_view kJson[] = {"\\/", "\\\""};
  static constexpr std::string_view kXml[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
  std::string encoded = uri::percent_encode(secret, false), lower = encoded;
  for (std::size_t i = 0; i + 2 < lower.size(); ++i) {
    if (lower[i] != '%') continue;
    lower[i + 1] = static_cast<char>(std::tolower(static_cast<unsigned char>(lower[i + 1])));
    lower[i + 2] = static_cast<char>(std::tolower(static_cast<unsigned char>(lower[i + 2])));
  }
  return {std::string(secret), std::move(encoded), std::move(lower), escaped(secret, "/\"", kJson), escaped(secret, "&<>\"'", kXml), base64(secret)};
}

// The registered spellings, longest first, so that a credential holding another is redacted whole.
struct Registry {
  std::mutex mu;
  std::set<std::string> secrets;
  std::vector<std::string> patterns;
};

Registry& registry() {
  static Registry* const r = new Registry;  // never destroyed: errors may be scrubbed during exit
  return *r;
}

// Query parameters whose value is a credential (lower case): presigned S3 and GCS URLs, SAS tokens,
// bearer tokens in a query.
constexpr std::array<std::string_view, 10> kSignatureParameters = {"x-amz-signature",      "x-amz-credential",
                                                                   "x-amz-security-token", "signature",
                                                                   "awsaccesskeyid",       "x-goog-signature",
                                                                   "x-goog-credential",    "sig",
                                                                   "access_token",         "token"};

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; }

// The value of every NAME=VALUE with NAME a signature parameter (a whole word) replaced.
std::string scrub_signature_values(std::string_view text) {
  std::string out;
  std::size_t copied = 0;
  for (std::size_t eq = text.find('='); eq != std::string_view::npos; eq = text.find('=', eq + 1)) {
    std::size_t start = eq;
    while (start > copied && name_char(text[start - 1])) --start;
    const std::string_view name = text.substr(start, eq - start);
    const bool secret =
        std::any_of(kSignatureParameters.begin(), kSignatureParameters.end(), [&](std::string_view p) { return lower_equals(name, p); });
    if (!secret) continue;
    std::size_t end = text.find_first_of("&#;, \t\r\n\"'<>()[]", eq + 1);
    if (end == std::string_view::npos) end = text.size();
    if (end == eq + 1) continue;
    out.append(text.substr(copied, eq + 1 - copied)).append(kRedacted);
    copied = end;
    eq = end - 1;
  }
  out.append(text.substr(copied));
  return out;
}

}  // namespace

void remember(std::string_view secret) {
  if (secret.size() < kMinSecretBytes) return;
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (!r.secrets.emplace(secret).second) return;
  for (std::string& s : spellings(secret)) {
    if (s.size() >= kMinSecretBytes && std::find(r.patterns.begin(), r.patterns.end(), s) == r.patterns.end()) r.patterns.push_back(std::move(s));
  }
  std::stable_sort(r.patterns.begin(), r.patterns.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

void remember_header(std::string_view header) {
  const std::size_t colon = header.find(':');
  if (colon == std::string_view::npos) return;
  const std::string_view name = trim(header.substr(0, colon), " \t"), value = trim(header.substr(colon + 1), " \t");
  static constexpr std::string_view kWords[] = {"auth", "cookie", "token", "key", "secret", "session", "signature", "credential", "password"};
  if (std::none_of(std::begin(kWords), std::end(kWords), [&](std::string_view w) { return contains_nocase(name, w); })) return;
  remember(value);
  if (const std::size_t space = value.find(' '); space != std::string_view::npos) remember(trim(value.substr(space + 1), " \t"));
}

std::string scrub(std::string_view text) {
  std::string out = scrub_signature_values(text);
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (const std::string& pattern : r.patterns) {
    for (std::size_t at = out.find(pattern); at != std::string::npos; at = out.find(pattern, at + kRedacted.size())) {
      out.replace(at, pattern.size(), kRedacted);
    }
  }
  return out;
}

Error scrub(const Error& error) {
  const ErrorContext& c = error.context();
  Error out = Error(error.kind(), scrub(error.message())).with_rule(error.rule());
  if (!c.file.empty()) out.with_file(scrub(c.file));
  if (!c.entry.empty()) out.with_entry(scrub(c.entry));
  if (!c.tensor.empty()) out.with_tensor(scrub(c.tensor));
  if (c.offset) out.with_offset(*c.offset);
  return out;
}

Status scrub(Status status) {
  if (status.is_ok()) return status;
  return scrub(status.error());
}

}  // namespace safeweights::secrets

namespace safeweights {

// safeweights/http.h's public face of the scrubber.
std::string redact_secrets(std::string_view text) { return secrets::scrub(text); }

}  // namespace safeweights
