// s3:// and hf:// names: parsing, the AWS configuration chain in the SDKs' order, the request URLs, and
// the Hub token's lookup. No network: what these build is sent by open_url(), tested against a real S3
// server and a Hub-like server in tests/remote/.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "safeweights/http.h"
#include "safeweights/hub.h"
#include "safeweights/s3.h"

namespace safeweights {
namespace {

namespace fs = std::filesystem;

// Every variable the chain reads, cleared for a test and restored after it.
class CleanEnv {
 public:
  CleanEnv() {
    for (const char* name : kNames) {
      if (const char* v = std::getenv(name)) saved_[name] = v;
      ::unsetenv(name);
    }
    home_ = fs::temp_directory_path() / ("sw_remote_" + std::to_string(::getpid()));
    fs::remove_all(home_);
    fs::create_directories(home_ / ".aws");
    set("HOME", home_.string());
  }
  ~CleanEnv() {
    for (const char* name : kNames) {
      ::unsetenv(name);
      if (auto it = saved_.find(name); it != saved_.end()) ::setenv(name, it->second.c_str(), 1);
    }
    fs::remove_all(home_);
  }
  void set(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }
  void write(const std::string& relative, const std::string& text) {
    fs::create_directories((home_ / relative).parent_path());
    std::ofstream(home_ / relative) << text;
  }
  std::string path(const std::string& relative) const { return (home_ / relative).string(); }

 private:
  static constexpr const char* kNames[] = {"HOME",
                                           "AWS_ACCESS_KEY_ID",
                                           "AWS_SECRET_ACCESS_KEY",
                                           "AWS_SESSION_TOKEN",
                                           "AWS_PROFILE",
                                           "AWS_SHARED_CREDENTIALS_FILE",
                                           "AWS_CONFIG_FILE",
                                           "AWS_REGION",
                                           "AWS_DEFAULT_REGION",
                                           "AWS_ENDPOINT_URL",
                                           "AWS_ENDPOINT_URL_S3",
                                           "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
                                           "HF_ENDPOINT",
                                           "HF_TOKEN",
                                           "HF_TOKEN_PATH",
                                           "HF_HOME",
                                           "XDG_CACHE_HOME"};
  std::map<std::string, std::string> saved_;
  fs::path home_;
};

S3Request resolve(const std::string& url, const S3Options& options = {}) {
  auto loc = parse_s3_url(url);
  EXPECT_TRUE(loc.is_ok()) << url;
  auto req = resolve_s3_request(*loc, options);
  EXPECT_TRUE(req.is_ok()) << (req.is_ok() ? "" : req.error().to_string());
  return req.is_ok() ? *req : S3Request{};
}

Error resolve_error(const std::string& url, const S3Options& options = {}) {
  auto req = resolve_s3_request(*parse_s3_url(url), options);
  EXPECT_FALSE(req.is_ok()) << url;
  return req.is_ok() ? Error(ErrorKind::IoError, "resolved") : req.error();
}

TEST(RemoteNames, EverySchemeIsAUrl) {
  for (const char* s : {"http://h/x", "HTTPS://h/x", "s3://b/k", "S3://b/k", "hf://o/r/f", "Hf://o/r/f", "gs://b/o", "GS://b/o"})
    EXPECT_TRUE(is_url(s)) << s;
  for (const char* s : {"s3:/b/k", "file:///x", "/tmp/s3://b", "hf:o/r", "ftp://h/x", "gs:/b/o"}) EXPECT_FALSE(is_url(s)) << s;
}

TEST(S3Url, SplitsBucketAndKeyAsGiven) {
  auto loc = parse_s3_url("s3://my-bucket.v2/dir/a b ü+=?#.safetensors");
  ASSERT_TRUE(loc.is_ok());
  EXPECT_EQ(loc->bucket, "my-bucket.v2");
  EXPECT_EQ(loc->key, "dir/a b ü+=?#.safetensors");
  EXPECT_EQ(parse_s3_url("s3://bucket")->key, "");
  for (const char* bad : {"s3://", "s3:///key", "s3://bu cket/k", "s3://bück/k"}) {
    auto r = parse_s3_url(bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.error().kind(), ErrorKind::InvalidArgument);
  }
  EXPECT_FALSE(parse_s3_url(std::string("s3://bucket/a\0b", 15)).is_ok());
}

TEST(S3Config, AwsDefaultsAreVirtualHostedInUsEast1) {
  CleanEnv env;
  env.set("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE");
  env.set("AWS_SECRET_ACCESS_KEY", "secret-in-env");
  S3Request r = resolve("s3://models/dir/a b ü+.bin");
  EXPECT_EQ(r.url, "https://models.s3.us-east-1.amazonaws.com/dir/a%20b%20%C3%BC%2B.bin");
  EXPECT_EQ(r.region, "us-east-1");
  EXPECT_TRUE(r.signed_request);
  EXPECT_EQ(r.access_key_id, "AKIDEXAMPLE");
  EXPECT_EQ(r.credentials_from, "environment");
  // A dotted bucket cannot match the wildcard certificate: path style on https.
  EXPECT_EQ(resolve("s3://my.models/k").url, "https://s3.us-east-1.amazonaws.com/my.models/k");
}

TEST(S3Config, EnvironmentComesBeforeTheProfileAndTheProfileBeforeDefaults) {
  CleanEnv env;
  env.write(".aws/credentials",
            "[default]\naws_access_key_id = FROMFILE\naws_secret_access_key = "
            "file-secret\n[other]\naws_access_key_id=OTHER\naws_secret_access_key=other-secret\naws_session_token=tok\n");
  env.write(".aws/config",
            "[default]\nregion = eu-west-1\n# a comment\n[profile other]\nregion=ap-south-1\nendpoint_url = http://127.0.0.1:9000/\ns3 =\n  "
            "addressing_style = virtual\n");
  S3Request r = resolve("s3://models/k");
  EXPECT_EQ(r.access_key_id, "FROMFILE");
  EXPECT_EQ(r.region, "eu-west-1");
  EXPECT_EQ(r.url, "https://models.s3.eu-west-1.amazonaws.com/k");
  EXPECT_EQ(r.credentials_from, "profile default in " + env.path(".aws/credentials"));

  env.set("AWS_PROFILE", "other");
  r = resolve("s3://models/k");
  EXPECT_EQ(r.access_key_id, "OTHER");
  EXPECT_EQ(r.session_token, "tok");
  EXPECT_EQ(r.region, "ap-south-1");
  EXPECT_EQ(r.url, "http://models.127.0.0.1:9000/k");  // the profile's nested s3 addressing_style

  env.set("AWS_REGION", "us-west-2");
  env.set("AWS_DEFAULT_REGION", "ca-central-1");
  env.set("AWS_ENDPOINT_URL", "http://localhost:1");
  env.set("AWS_ENDPOINT_URL_S3", "http://localhost:2");
  env.set("AWS_ACCESS_KEY_ID", "ENV");
  env.set("AWS_SECRET_ACCESS_KEY", "env-secret");
  S3Options path_style;
  path_style.addressing_style = "path";
  r = resolve("s3://models/k", path_style);
  EXPECT_EQ(r.access_key_id, "ENV");
  EXPECT_EQ(r.session_token, "");
  EXPECT_EQ(r.region, "us-west-2");
  EXPECT_EQ(r.url, "http://localhost:2/models/k");

  ::unsetenv("AWS_REGION");
  ::unsetenv("AWS_ENDPOINT_URL_S3");
  r = resolve("s3://models/k", path_style);
  EXPECT_EQ(r.region, "ca-central-1");
  EXPECT_EQ(r.url, "http://localhost:1/models/k");

  env.set("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true");
  EXPECT_EQ(resolve("s3://models/k", path_style).url, "https://s3.ca-central-1.amazonaws.com/models/k");

  S3Options given;  // options come before everything
  given.region = "sa-east-1";
  given.endpoint_url = "http://127.0.0.1:5000";
  given.profile = "default";
  r = resolve("s3://models/k", given);
  EXPECT_EQ(r.region, "sa-east-1");
  EXPECT_EQ(r.url, "http://127.0.0.1:5000/models/k");  // path style on a custom endpoint
}

TEST(S3Config, ExplicitFilesAndAnonymousAccess) {
  CleanEnv env;
  env.write("elsewhere/creds", "[team]\naws_access_key_id = TEAM\naws_secret_access_key = team-secret\n");
  env.write("elsewhere/conf", "[profile team]\nregion = eu-central-1\n");
  env.set("AWS_SHARED_CREDENTIALS_FILE", env.path("elsewhere/creds"));
  env.set("AWS_CONFIG_FILE", env.path("elsewhere/conf"));
  S3Options team;
  team.profile = "team";
  S3Request r = resolve("s3://models/k", team);
  EXPECT_EQ(r.access_key_id, "TEAM");
  EXPECT_EQ(r.region, "eu-central-1");

  S3Options anonymous;
  anonymous.anonymous = true;
  r = resolve("s3://public-models/k", anonymous);  // no credentials anywhere, none needed
  EXPECT_FALSE(r.signed_request);
  EXPECT_TRUE(r.access_key_id.empty());
}

TEST(S3Config, MissingOrUnusableCredentialsAreNamedWithoutSecrets) {
  CleanEnv env;
  Error e = resolve_error("s3://models/k");
  EXPECT_EQ(e.kind(), ErrorKind::EnvironmentFault);
  EXPECT_NE(e.message().find("no AWS credentials"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find(env.path(".aws/credentials")), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("anonymous"), std::string::npos) << e.message();

  env.set("AWS_SECRET_ACCESS_KEY", "only-the-secret");
  e = resolve_error("s3://models/k");
  EXPECT_EQ(e.kind(), ErrorKind::EnvironmentFault);
  EXPECT_NE(e.message().find("AWS_ACCESS_KEY_ID is not set"), std::string::npos) << e.message();
  EXPECT_EQ(e.to_string().find("only-the-secret"), std::string::npos);
  ::unsetenv("AWS_SECRET_ACCESS_KEY");

  env.set("AWS_PROFILE", "nope");
  e = resolve_error("s3://models/k");
  EXPECT_EQ(e.kind(), ErrorKind::EnvironmentFault);
  EXPECT_NE(e.message().find("AWS profile \"nope\" is in neither"), std::string::npos) << e.message();

  env.write(".aws/config", "[profile sso]\nsso_session = corp\n[profile broken]\naws_access_key_id = X\n");
  env.set("AWS_PROFILE", "sso");
  e = resolve_error("s3://models/k");
  EXPECT_EQ(e.kind(), ErrorKind::NotSupported);
  EXPECT_NE(e.message().find("sso_session"), std::string::npos) << e.message();
  env.set("AWS_PROFILE", "broken");
  e = resolve_error("s3://models/k");
  EXPECT_EQ(e.kind(), ErrorKind::EnvironmentFault);
  EXPECT_NE(e.message().find("aws_access_key_id without aws_secret_access_key"), std::string::npos) << e.message();
}

TEST(S3Config, MalformedSettingsAreRefusedByName) {
  CleanEnv env;
  env.write(".aws/config", "[default]\nregion = eu-west-1\nthis line holds AKIA-secret\n");
  Error e = resolve_error("s3://models/k");
  EXPECT_EQ(e.kind(), ErrorKind::EnvironmentFault);  // the file is the environment's, not the call's
  EXPECT_NE(e.message().find("line 3"), std::string::npos) << e.message();
  EXPECT_EQ(e.to_string().find("AKIA-secret"), std::string::npos) << e.to_string();
  EXPECT_EQ(e.context().file, env.path(".aws/config"));

  env.write(".aws/config", "");
  env.set("AWS_ACCESS_KEY_ID", "A");
  env.set("AWS_SECRET_ACCESS_KEY", "B");
  env.set("AWS_ENDPOINT_URL", "ftp://host");
  e = resolve_error("s3://models/k");
  EXPECT_NE(e.message().find("AWS_ENDPOINT_URL"), std::string::npos) << e.message();
  ::unsetenv("AWS_ENDPOINT_URL");
  env.set("AWS_REGION", "us east");
  e = resolve_error("s3://models/k");
  EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);  // a setting's value, which the call may give too
  EXPECT_NE(e.message().find("not a region name"), std::string::npos) << e.message();
  ::unsetenv("AWS_REGION");
  S3Options virtual_style;
  virtual_style.addressing_style = "virtual";
  e = resolve_error("s3://Legacy_Bucket/k", virtual_style);
  EXPECT_NE(e.message().find("virtual-hosted addressing cannot reach it"), std::string::npos) << e.message();
  virtual_style.addressing_style = "sideways";
  e = resolve_error("s3://models/k", virtual_style);
  EXPECT_NE(e.message().find("auto, virtual or path"), std::string::npos) << e.message();
}

TEST(HubUrl, ModelsDatasetsSpacesAndRevisions) {
  auto m = parse_hf_url("hf://org/repo/sub/model.safetensors");
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ(m->repo_type, "model");
  EXPECT_EQ(m->repo_id, "org/repo");
  EXPECT_EQ(m->revision, "main");
  EXPECT_EQ(m->path, "sub/model.safetensors");

  auto d = parse_hf_url("hf://datasets/org/data@refs%2Fpr%2F3/a b.json");
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(d->repo_type, "dataset");
  EXPECT_EQ(d->revision, "refs/pr/3");
  EXPECT_EQ(d->path, "a b.json");

  auto folder = parse_hf_url("hf://org/repo@v1.0");
  ASSERT_TRUE(folder.is_ok());
  EXPECT_EQ(folder->revision, "v1.0");
  EXPECT_EQ(folder->path, "");

  for (const char* bad : {"hf://org", "hf:///repo/x", "hf://org/repo@/x", "hf://org/repo/../other/x", "hf://org/re po/x", "hf://org/repo@%zz/x",
                          "hf://org/repo/a//b"}) {
    auto r = parse_hf_url(bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.error().kind(), ErrorKind::InvalidArgument);
  }
}

TEST(HubUrl, ResolveUrlsFollowTheEndpoint) {
  CleanEnv env;
  EXPECT_EQ(hf_resolve_url(*parse_hf_url("hf://org/repo/sub/a b.safetensors")), "https://huggingface.co/org/repo/resolve/main/sub/a%20b.safetensors");
  env.set("HF_ENDPOINT", "https://hub.example:8443/");
  EXPECT_EQ(hf_resolve_url(*parse_hf_url("hf://datasets/org/data@refs%2Fpr%2F3/x.json")),
            "https://hub.example:8443/datasets/org/data/resolve/refs%2Fpr%2F3/x.json");
  EXPECT_EQ(hf_resolve_url(*parse_hf_url("hf://spaces/org/app/app.py")), "https://hub.example:8443/spaces/org/app/resolve/main/app.py");
}

TEST(HubToken, EnvironmentThenTheTokenFile) {
  CleanEnv env;
  EXPECT_FALSE(hf_token().has_value());
  env.write(".cache/huggingface/token", "hf_default\n");
  EXPECT_EQ(hf_token(), "hf_default");
  env.write("hfhome/token", "hf_home \n");
  env.set("HF_HOME", env.path("hfhome"));
  EXPECT_EQ(hf_token(), "hf_home");
  env.write("explicit", "hf_explicit");
  env.set("HF_TOKEN_PATH", env.path("explicit"));
  EXPECT_EQ(hf_token(), "hf_explicit");
  env.set("HF_TOKEN", "hf_env");
  EXPECT_EQ(hf_token(), "hf_env");
}

}  // namespace
}  // namespace safeweights
