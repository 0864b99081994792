// The s3:// scheme's configuration chain (io/scheme_s3.cpp): the AWS SDKs' order (environment, shared
// credentials and config files) and the request URL. No network here: the scheme sends what this builds.

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status_macros.h"
#include "core/strings.h"
#include "io/secrets.h"
#include "io/uri.h"
#include "io/posix_util.h"
#include "safeweights/s3.h"

namespace safeweights {
namespace {

// An AWS file larger than this is not a configuration file.
constexpr long kMaxAwsFileBytes = 1 << 20;

std::string lower(std::string s) {
  for (char& c : s) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return s;
}

// An INI file as the AWS SDKs read it: [section] headers, "key = value" lines, '#' and ';' comments,
// and nested values ("s3 =" followed by indented "key = value" lines, kept as "s3.key").
using Section = std::map<std::string, std::string>;
struct AwsFile {
  std::string path;
  bool found = false;
  std::map<std::string, Section> sections;
};

Result<AwsFile> read_aws_file(const std::string& path) {
  AwsFile out;
  out.path = path;
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return out;  // a missing file is no error: the chain goes on
  struct stat st {};
  if (::fstat(::fileno(f.get()), &st) != 0 || !S_ISREG(st.st_mode)) return out;
  if (st.st_size > kMaxAwsFileBytes) {
    return Error(ErrorKind::EnvironmentFault, "AWS configuration file larger than 1 MiB").with_file(path);
  }
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  text.resize(std::fread(text.data(), 1, text.size(), f.get()));
  out.found = true;
  Section* section = nullptr;
  std::string parent;  // the key of a nested block ("s3"), while its indented lines last
  std::size_t line_no = 0;
  for (std::size_t pos = 0; pos <= text.size();) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view raw(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    const bool indented = !raw.empty() && (raw[0] == ' ' || raw[0] == '\t');
    std::string_view line = trim(raw, " \t\r");
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[') {
      if (line.back() != ']') {
        return Error(ErrorKind::EnvironmentFault, "line " + std::to_string(line_no) + ": a section header without its closing ']'").with_file(path);
      }
      section = &out.sections[std::string(trim(line.substr(1, line.size() - 2)))];
      parent.clear();
      continue;
    }
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos || section == nullptr) {
      // Never quote the line: it may hold a secret.
      return Error(ErrorKind::EnvironmentFault, "line " + std::to_string(line_no) + ": not a \"key = value\" line inside a [section]")
          .with_file(path);
    }
    std::string key = lower(std::string(trim(line.substr(0, eq))));
    std::string value(trim(line.substr(eq + 1)));
    if (indented && !parent.empty()) {
      (*section)[parent + "." + key] = value;
      continue;
    }
    parent = value.empty() ? key : std::string();
    (*section)[key] = std::move(value);
  }
  return out;
}

std::string home_file(const char* env_name, const char* default_name) {
  if (std::string v = getenv_string(env_name); !v.empty()) return v;
  const std::string home = getenv_string("HOME");
  return home.empty() ? std::string() : home + "/.aws/" + default_name;
}

// The profile's section: "[NAME]" in the credentials file, "[profile NAME]" (or "[default]") in the
// config file.
const Section* profile_section(const AwsFile& file, const std::string& profile, bool config_file) {
  std::vector<std::string> names;
  if (config_file) {
    names.push_back("profile " + profile);
    if (profile == "default") names.push_back("default");
  } else {
    names.push_back(profile);
  }
  for (const std::string& n : names) {
    if (auto it = file.sections.find(n); it != file.sections.end()) return &it->second;
  }
  return nullptr;
}

std::string get(const Section* s, const std::string& key) {
  if (s == nullptr) return {};
  auto it = s->find(key);
  return it == s->end() ? std::string() : it->second;
}

bool truthy(const std::string& v) {
  const std::string l = lower(v);
  return l == "true" || l == "1" || l == "yes";
}

bool valid_endpoint(const std::string& url) { return uri::starts_with_nocase(url, "http://") || uri::starts_with_nocase(url, "https://"); }

// A bucket name that can be the first label of a host name (virtual-hosted addressing).
bool dns_compatible(const std::string& bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (char c : bucket) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return bucket.front() != '-' && bucket.back() != '-';
}

// The profile a request uses, and the two AWS files its settings come from.
struct AwsSettings {
  std::string profile;
  bool profile_given = false;  // by the option or AWS_PROFILE, rather than "default"
  AwsFile credentials, config;
  const Section* credentials_section() const { return profile_section(credentials, profile, false); }
  const Section* config_section() const { return profile_section(config, profile, true); }
};

Result<AwsSettings> read_settings(const S3Options& options) {
  AwsSettings aws;
  aws.profile_given = !options.profile.empty() || !getenv_string("AWS_PROFILE").empty();
  aws.profile = !options.profile.empty() ? options.profile : (aws.profile_given ? getenv_string("AWS_PROFILE") : "default");
  SW_ASSIGN_OR_RETURN(aws.credentials, read_aws_file(home_file("AWS_SHARED_CREDENTIALS_FILE", "credentials")));
  SW_ASSIGN_OR_RETURN(aws.config, read_aws_file(home_file("AWS_CONFIG_FILE", "config")));
  return aws;
}

// The option, AWS_REGION, AWS_DEFAULT_REGION, the profile's region, else us-east-1.
Result<std::string> region_of(const S3Options& options, const AwsSettings& aws, const std::string& name) {
  std::string region = options.region;
  if (region.empty()) region = getenv_string("AWS_REGION");
  if (region.empty()) region = getenv_string("AWS_DEFAULT_REGION");
  if (region.empty()) region = get(aws.config_section(), "region");
  if (region.empty()) region = "us-east-1";
  for (char c : region) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
      return Error(ErrorKind::InvalidArgument, "the AWS region \"" + region + "\" is not a region name (a-z, 0-9, '-')").with_file(name);
    }
  }
  return region;
}

struct Endpoint {
  std::string url;   // no trailing '/'
  bool aws = false;  // AWS's own (https://s3.REGION.amazonaws.com), not one configured
};

// The option, else the configured endpoint URLs in the SDKs' order (unless ignored), else AWS's.
Result<Endpoint> endpoint_of(const S3Options& options, const AwsSettings& aws, const std::string& region, const std::string& name) {
  std::string endpoint = options.endpoint_url;
  std::string endpoint_from = "the endpoint option";
  if (endpoint.empty() && !truthy(getenv_string("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"))) {
    const Section* conf = aws.config_section();
    const std::pair<std::string, std::string> candidates[] = {
        {getenv_string("AWS_ENDPOINT_URL_S3"), "AWS_ENDPOINT_URL_S3"},
        {getenv_string("AWS_ENDPOINT_URL"), "AWS_ENDPOINT_URL"},
        {get(conf, "s3.endpoint_url"), "endpoint_url of profile " + aws.profile + " in " + aws.config.path},
        {get(conf, "endpoint_url"), "endpoint_url of profile " + aws.profile + " in " + aws.config.path},
    };
    for (const auto& [value, from] : candidates) {
      if (!value.empty()) {
        endpoint = value;
        endpoint_from = from;
        break;
      }
    }
  }
  Endpoint out;
  out.aws = endpoint.empty();
  if (out.aws) endpoint = "https://s3." + region + ".amazonaws.com";
  while (endpoint.size() > 8 && endpoint.back() == '/') endpoint.pop_back();
  if (!valid_endpoint(endpoint) || endpoint.find_first_of(" \r\n?#") != std::string::npos) {
    return Error(ErrorKind::InvalidArgument, "the S3 endpoint from " + endpoint_from + " must be an http:// or https:// URL without query")
        .with_file(name);
  }
  out.url = std::move(endpoint);
  return out;
}

// The object's URL, virtual-hosted (BUCKET.host/KEY) or path style (host/BUCKET/KEY): the option, the
// profile's s3.addressing_style, else virtual for AWS's endpoint when the bucket can be a host name.
Result<std::string> object_url(const S3Location& location, const S3Options& options, const AwsSettings& aws, const Endpoint& endpoint,
                               const std::string& name) {
  std::string style = options.addressing_style;
  if (style.empty()) style = get(aws.config_section(), "s3.addressing_style");
  if (style.empty() || style == "auto") {
    const bool https = uri::starts_with_nocase(endpoint.url, "https://");
    style = endpoint.aws && dns_compatible(location.bucket) && !(https && location.bucket.find('.') != std::string::npos) ? "virtual" : "path";
  }
  const std::string key = uri::percent_encode(location.key, true);
  if (style == "virtual") {
    if (!dns_compatible(location.bucket)) {
      return Error(ErrorKind::InvalidArgument,
                   "bucket \"" + location.bucket + "\" is not a valid host name label: virtual-hosted addressing cannot reach it (use path style)")
          .with_file(name);
    }
    const std::size_t host = endpoint.url.find("://") + 3;
    return endpoint.url.substr(0, host) + location.bucket + "." + endpoint.url.substr(host) + "/" + key;
  }
  if (style == "path") return endpoint.url + "/" + uri::percent_encode(location.bucket, false) + "/" + key;
  return Error(ErrorKind::InvalidArgument, "S3 addressing style must be auto, virtual or path, got \"" + style + "\"").with_file(name);
}

// Why no credentials were found: a named profile that is nowhere, a way of getting them we do not run,
// or none anywhere.
Error no_credentials(const AwsSettings& aws, const std::string& name) {
  const Section* cred = aws.credentials_section();
  const Section* conf = aws.config_section();
  if (aws.profile_given && cred == nullptr && conf == nullptr) {
    return Error(ErrorKind::EnvironmentFault, "AWS profile \"" + aws.profile + "\" is in neither " + aws.credentials.path + " nor " + aws.config.path)
        .with_file(name);
  }
  for (const char* method : {"credential_process", "role_arn", "sso_session", "sso_start_url", "web_identity_token_file"}) {
    if (!get(conf, method).empty() || !get(cred, method).empty()) {
      return Error(ErrorKind::NotSupported, "profile " + aws.profile + " gets its credentials through " + method +
                                                ", which safeweights does not run; export AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and "
                                                "AWS_SESSION_TOKEN (e.g. from `aws configure export-credentials`)")
          .with_file(name);
    }
  }
  return Error(ErrorKind::EnvironmentFault, "no AWS credentials: looked in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, then profile " + aws.profile +
                                                " in " + aws.credentials.path + " and " + aws.config.path +
                                                "; for a public bucket, read anonymously (--s3-anonymous, anonymous=True)")
      .with_file(name);
}

// The key pair (and session token) from the environment, else from the profile in the credentials
// file, then the config file; each remembered by the message scrubber.
Status find_credentials(const AwsSettings& aws, const std::string& name, S3Request& req) {
  const std::string env_id = getenv_string("AWS_ACCESS_KEY_ID"), env_secret = getenv_string("AWS_SECRET_ACCESS_KEY");
  if (!env_id.empty() || !env_secret.empty()) {
    if (env_id.empty() || env_secret.empty()) {
      return Error(ErrorKind::EnvironmentFault, std::string("partial AWS credentials in the environment: ") +
                                                    (env_id.empty() ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY") + " is not set")
          .with_file(name);
    }
    req.access_key_id = env_id;
    req.secret_access_key = env_secret;
    req.session_token = getenv_string("AWS_SESSION_TOKEN");
    req.credentials_from = "environment";
  } else {
    for (const auto& [section, file] : {std::pair{aws.credentials_section(), &aws.credentials}, std::pair{aws.config_section(), &aws.config}}) {
      const std::string id = get(section, "aws_access_key_id"), secret = get(section, "aws_secret_access_key");
      if (id.empty() && secret.empty()) continue;
      if (id.empty() || secret.empty()) {
        return Error(ErrorKind::EnvironmentFault,
                     "profile " + aws.profile + " has " +
                         (id.empty() ? "aws_secret_access_key without aws_access_key_id" : "aws_access_key_id without aws_secret_access_key"))
            .with_file(file->path);
      }
      req.access_key_id = id;
      req.secret_access_key = secret;
      req.session_token = get(section, "aws_session_token");
      req.credentials_from = "profile " + aws.profile + " in " + file->path;
      break;
    }
  }
  if (req.access_key_id.empty()) return no_credentials(aws, name);
  for (const std::string* secret : {&req.access_key_id, &req.secret_access_key, &req.session_token}) {
    // The access key id too: it names the account, and with a leaked secret it is half the pair.
    secrets::remember(*secret);
    if (secret->find_first_of("\r\n") != std::string::npos) {
      return Error(ErrorKind::EnvironmentFault, "AWS credentials from " + req.credentials_from + " contain a line break").with_file(name);
    }
  }
  return Status::ok();
}

}  // namespace

Result<S3Request> resolve_s3_request(const S3Location& location, const S3Options& options) {
  const std::string name = "s3://" + location.bucket + "/" + location.key;
  SW_ASSIGN_OR_RETURN(AwsSettings aws, read_settings(options));
  S3Request req;
  SW_ASSIGN_OR_RETURN(req.region, region_of(options, aws, name));
  SW_ASSIGN_OR_RETURN(Endpoint endpoint, endpoint_of(options, aws, req.region, name));
  SW_ASSIGN_OR_RETURN(req.url, object_url(location, options, aws, endpoint, name));
  req.endpoint = std::move(endpoint.url);
  if (options.anonymous) return req;
  req.signed_request = true;
  SW_RETURN_IF_ERROR(find_credentials(aws, name, req));
  return req;
}

}  // namespace safeweights
