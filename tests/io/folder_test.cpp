// Folders by name: which names are folders, local listings (links followed, as readers follow them),
// and the listing pages of S3 (ListObjectsV2 XML) and the Hub (tree JSON) read as hostile input. The
// requests themselves are tested against a real S3-compatible server and a Hub stand-in in
// tests/remote/test_folders.py.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "io/remote_listing.h"
#include "safeweights/folder.h"

namespace safeweights {
namespace {

namespace fs = std::filesystem;
using listing::parse_hub_page;
using listing::parse_s3_page;

std::string names_of(const std::vector<FolderEntry>& entries) {
  std::string out;
  for (const FolderEntry& e : entries) out += (out.empty() ? "" : ",") + e.name + (e.is_folder ? "/" : ":" + std::to_string(e.size));
  return out;
}

TEST(FolderNames, RemoteNamesAreFoldersBySpelling) {
  EXPECT_TRUE(names_folder("s3://bucket/"));
  EXPECT_TRUE(names_folder("s3://bucket"));
  EXPECT_TRUE(names_folder("s3://bucket/models/llama/"));
  EXPECT_FALSE(names_folder("s3://bucket/models/llama"));
  EXPECT_FALSE(names_folder("s3://bucket/model.safetensors"));
  EXPECT_TRUE(names_folder("hf://org/repo"));
  EXPECT_TRUE(names_folder("hf://org/repo@refs%2Fpr%2F1"));
  EXPECT_TRUE(names_folder("hf://datasets/org/repo/"));
  EXPECT_TRUE(names_folder("hf://org/repo/text_encoder/"));
  EXPECT_FALSE(names_folder("hf://org/repo/config.json"));
  EXPECT_FALSE(names_folder("https://host/folder/"));
  EXPECT_FALSE(names_folder("hf://org"));
  EXPECT_TRUE(names_folder("gs://bucket/"));
  EXPECT_TRUE(names_folder("gs://bucket"));
  EXPECT_TRUE(names_folder("GS://bucket/models/llama/"));
  EXPECT_FALSE(names_folder("gs://bucket/model.safetensors"));
  EXPECT_FALSE(names_folder("gs://Bucket/"));  // not a bucket name
}

class LocalFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sw_folder_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "model" / "sub");
    std::ofstream(dir_ / "model" / "config.json") << "{}";
    std::ofstream(dir_ / "outside.bin") << "12345";
    fs::create_symlink(dir_ / "outside.bin", dir_ / "model" / "linked.bin");
    fs::create_symlink(dir_ / "nowhere", dir_ / "model" / "broken");
    ::mkfifo((dir_ / "model" / "pipe").c_str(), 0600);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(LocalFolder, ListsFilesAndFoldersFollowingLinks) {
  auto folder = Folder::open((dir_ / "model").string() + "/", uncached_resolver());
  ASSERT_TRUE(folder.is_ok()) << folder.error().message();
  // What is neither a file nor a folder is listed (size 0), so that a reader that wants it is refused by
  // name rather than finding it absent; opening it says what it is, without opening a FIFO (no block).
  EXPECT_EQ(names_of(folder->entries()), "broken:0,config.json:2,linked.bin:5,pipe:0,sub/");
  EXPECT_EQ(folder->name(), (dir_ / "model").string());
  EXPECT_EQ(folder->base_name(), "model");
  EXPECT_EQ(folder->path_of("config.json"), (dir_ / "model" / "config.json").string());
  EXPECT_TRUE(folder->has_file("linked.bin"));
  EXPECT_FALSE(folder->has_file("sub"));
  EXPECT_TRUE(folder->has_file("broken"));
  auto broken = folder->open_file("broken");
  ASSERT_FALSE(broken.is_ok());
  EXPECT_EQ(broken.error().kind(), ErrorKind::FileNotFound);
  EXPECT_EQ(broken.error().message(), "is a dangling symbolic link");
  auto pipe = folder->open_file("pipe");
  ASSERT_FALSE(pipe.is_ok());
  EXPECT_EQ(pipe.error().kind(), ErrorKind::IoError);
  EXPECT_EQ(pipe.error().message(), "is a FIFO, not a regular file");
  auto source = folder->open_file("linked.bin");
  ASSERT_TRUE(source.is_ok());
  EXPECT_EQ((*source)->size(), 5u);
  EXPECT_EQ(folder->open_file("missing.json").error().kind(), ErrorKind::FileNotFound);
}

TEST_F(LocalFolder, AFileOrNothingIsNoFolder) {
  EXPECT_EQ(Folder::open((dir_ / "outside.bin").string(), uncached_resolver()).error().kind(), ErrorKind::InvalidArgument);
  EXPECT_EQ(Folder::open((dir_ / "nothing").string(), uncached_resolver()).error().kind(), ErrorKind::FileNotFound);
  EXPECT_EQ(Folder::open("s3://bucket/model.safetensors", uncached_resolver()).error().kind(), ErrorKind::InvalidArgument);
}

constexpr const char* kHead = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>models</Name>)";

TEST(S3Listing, KeysAndCommonPrefixesOneLevelDown) {
  const std::string xml = std::string(kHead) +
                          "<Prefix>llama/</Prefix><KeyCount>4</KeyCount><MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter>"
                          "<IsTruncated>false</IsTruncated><EncodingType>url</EncodingType>"
                          "<Contents><Key>llama/</Key><Size>0</Size></Contents>"
                          "<Contents><Key>llama/config.json</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified>"
                          "<ETag>&quot;abc&quot;</ETag><Size>612</Size><StorageClass>STANDARD</StorageClass></Contents>"
                          "<Contents><Key>llama/my+model+%C3%A9%2B1.safetensors</Key><Size>18446744073709551615</Size></Contents>"
                          "<CommonPrefixes><Prefix>llama/text_encoder/</Prefix></CommonPrefixes></ListBucketResult>";
  auto page = parse_s3_page(xml, "llama/");
  ASSERT_TRUE(page.is_ok()) << page.error().message();
  // The folder marker (the prefix's own key) is left out; '+' is a space, %2B a plus.
  EXPECT_EQ(names_of(page->entries), "config.json:612,my model \xC3\xA9+1.safetensors:18446744073709551615,text_encoder/");
  EXPECT_TRUE(page->next.empty());
}

TEST(S3Listing, RawKeysWhenNotUrlEncodedAndTheContinuationToken) {
  const std::string xml = std::string(kHead) +
                          "<IsTruncated>true</IsTruncated><NextContinuationToken>1/a+b=&amp;</NextContinuationToken>"
                          "<Contents><Key>a&amp;b &#233;&#x4E2D;.json</Key><Size>1</Size></Contents></ListBucketResult>";
  auto page = parse_s3_page(xml, "");
  ASSERT_TRUE(page.is_ok()) << page.error().message();
  EXPECT_EQ(names_of(page->entries), "a&b \xC3\xA9\xE4\xB8\xAD.json:1");
  EXPECT_EQ(page->next, "1/a+b=&");
}

TEST(S3Listing, HostilePagesAreRefused) {
  auto refused = [](const std::string& body, const char* prefix = "") {
    auto page = parse_s3_page(std::string(kHead) + body + "</ListBucketResult>", prefix);
    return !page.is_ok() && page.error().kind() == ErrorKind::HttpError;
  };
  EXPECT_TRUE(refused("<Contents><Key>../x</Key><Size>1</Size></Contents>", "a/"));                                     // outside the prefix
  EXPECT_TRUE(refused("<Contents><Key>a/b/c</Key><Size>1</Size></Contents>", "a/"));                                    // not one level down
  EXPECT_TRUE(refused("<Contents><Key>a/..</Key><Size>1</Size></Contents>", "a/"));                                     // a dot name
  EXPECT_TRUE(refused("<Contents><Key>a/x%00y</Key><Size>1</Size></Contents><EncodingType>url</EncodingType>", "a/"));  // NUL
  EXPECT_TRUE(refused("<Contents><Key>a/%G1</Key><Size>1</Size></Contents><EncodingType>url</EncodingType>", "a/"));
  EXPECT_TRUE(refused("<Contents><Key>a/x</Key><Size>-1</Size></Contents>", "a/"));
  EXPECT_TRUE(refused("<Contents><Key>a/x</Key><Size>18446744073709551616</Size></Contents>", "a/"));
  EXPECT_TRUE(refused("<Contents><Key>a/x</Key></Contents>", "a/"));
  EXPECT_TRUE(refused("<Contents><Key>a/&bogus;</Key><Size>1</Size></Contents>", "a/"));
  EXPECT_TRUE(refused("<Contents><Key>a/&#0;</Key><Size>1</Size></Contents>", "a/"));
  EXPECT_TRUE(refused("<CommonPrefixes><Prefix>a/b</Prefix></CommonPrefixes>", "a/"));
  EXPECT_TRUE(refused("<IsTruncated>true</IsTruncated>"));
  EXPECT_TRUE(refused("<IsTruncated>maybe</IsTruncated>"));
  EXPECT_FALSE(parse_s3_page("<Error><Code>AccessDenied</Code></Error>", "").is_ok());
}

TEST(GsListing, ItemsAndPrefixesOneLevelDownAndTheNextPage) {
  const std::string json = R"({"kind":"storage#objects","nextPageToken":"CgVsbGFtYS8=",)"
                           R"("prefixes":["llama/text_encoder/"],)"
                           R"("items":[{"name":"llama/","size":"0"},{"name":"llama/config.json","size":"612","generation":"17"},)"
                           R"({"name":"llama/my model \u00e9.safetensors","size":"18446744073709551615"}]})";
  auto page = listing::parse_gs_page(json, "llama/");
  ASSERT_TRUE(page.is_ok()) << page.error().message();
  // The folder marker (the prefix's own object) is left out.
  EXPECT_EQ(names_of(page->entries), "config.json:612,my model \xC3\xA9.safetensors:18446744073709551615,text_encoder/");
  EXPECT_EQ(page->next, "CgVsbGFtYS8=");
  auto empty = listing::parse_gs_page(R"({"kind":"storage#objects"})", "");
  ASSERT_TRUE(empty.is_ok()) << empty.error().message();
  EXPECT_TRUE(empty->entries.empty() && empty->next.empty());
}

TEST(GsListing, HostilePagesAndMetadataAreRefused) {
  for (const char* body :
       {"[]", "not json", R"({"items":{}})", R"({"prefixes":"a/"})", R"({"nextPageToken":1})", R"({"items":[{"name":"d/a","size":1}]})",
        R"({"items":[{"name":"d/a"}]})", R"({"items":[{"name":"d/a","size":"-1"}]})", R"({"items":[{"name":"d/a","size":"18446744073709551616"}]})",
        R"({"items":[{"name":"other/a","size":"1"}]})", R"({"items":[{"name":"d/a/b","size":"1"}]})", R"({"items":[{"name":"d/..","size":"1"}]})",
        R"({"items":[{"name":"d/a\u0000b","size":"1"}]})", R"({"prefixes":["d/b"]})", R"({"prefixes":["d/b/c/"]})", R"({"prefixes":[1]})"}) {
    auto page = listing::parse_gs_page(body, "d/");
    ASSERT_FALSE(page.is_ok()) << body;
    EXPECT_EQ(page.error().kind(), ErrorKind::HttpError) << body;
  }
  auto object = listing::parse_gs_object(R"({"name":"a","size":"400168","generation":"1795761114527760283"})");
  ASSERT_TRUE(object.is_ok()) << object.error().message();
  EXPECT_EQ(object->size, 400168u);
  EXPECT_EQ(object->generation, "1795761114527760283");
  for (const char* body : {"{}", R"({"size":"1"})", R"({"size":1,"generation":"2"})", R"({"size":"1","generation":"x"})", "[]", "nope"}) {
    auto refused = listing::parse_gs_object(body);
    ASSERT_FALSE(refused.is_ok()) << body;
    EXPECT_EQ(refused.error().kind(), ErrorKind::HttpError) << body;
  }
  EXPECT_EQ(listing::parse_gs_credentials(R"({"type":"service_account","private_key":"k"})").type, "service_account");
  EXPECT_EQ(listing::parse_gs_credentials(R"({"type":1})").type, "");
  EXPECT_EQ(listing::parse_gs_credentials("not json").type, "");
  const listing::GsCredentialsFile user = listing::parse_gs_credentials(
      R"({"type":"authorized_user","client_id":"id","client_secret":"s","refresh_token":"r","token_uri":"https://t/token","quota_project_id":"p"})");
  EXPECT_EQ(user.client_id + "," + user.client_secret + "," + user.refresh_token + "," + user.token_uri, "id,s,r,https://t/token");
  EXPECT_EQ(listing::parse_gs_credentials(R"({"type":"authorized_user","refresh_token":7})").refresh_token, "");
}

TEST(GsListing, AccessTokenReplies) {
  auto token = listing::parse_gs_access_token(R"({"access_token":"ya29.x","expires_in":3599,"token_type":"Bearer"})");
  ASSERT_TRUE(token.is_ok()) << token.error().message();
  EXPECT_EQ(token->access_token, "ya29.x");
  EXPECT_EQ(token->expires_in, 3599u);
  auto once = listing::parse_gs_access_token(R"({"access_token":"ya29.y"})");
  ASSERT_TRUE(once.is_ok());
  EXPECT_EQ(once->expires_in, 0u);
  for (const char* body : {"{}", R"({"access_token":""})", R"({"access_token":1})", R"({"access_token":"a","token_type":"MAC"})",
                           R"({"access_token":"a","expires_in":-5})", R"({"access_token":"a","expires_in":"60"})", "[]", "nope"}) {
    auto refused = listing::parse_gs_access_token(body);
    ASSERT_FALSE(refused.is_ok()) << body;
    EXPECT_EQ(refused.error().kind(), ErrorKind::HttpError) << body;
    EXPECT_TRUE(refused.error().message().starts_with("the reply is not an OAuth access token: ")) << refused.error().message();
  }
}

TEST(HubListing, FilesAndDirectoriesOfOneFolder) {
  const std::string json =
      R"([{"type":"file","oid":"1","size":612,"path":"unet/config.json"},)"
      R"({"type":"file","oid":"2","size":5000000000,"path":"unet/diffusion_pytorch_model.safetensors","lfs":{"oid":"x","size":5000000000}},)"
      R"({"type":"directory","oid":"3","size":0,"path":"unet/sub"}])";
  auto page = parse_hub_page(json, "unet");
  ASSERT_TRUE(page.is_ok()) << page.error().message();
  EXPECT_EQ(names_of(page->entries), "config.json:612,diffusion_pytorch_model.safetensors:5000000000,sub/");
  auto root = parse_hub_page(R"([{"type":"directory","oid":"3","path":"unet"}])", "");
  ASSERT_TRUE(root.is_ok()) << root.error().message();
  EXPECT_EQ(names_of(root->entries), "unet/");
}

TEST(HubListing, HostilePagesAreRefused) {
  for (const char* body :
       {R"({"path":"a"})", R"([{"type":"file","path":"../a","size":1}])", R"([{"type":"file","path":"other/a","size":1}])",
        R"([{"type":"file","path":"d/a/b","size":1}])", R"([{"type":"file","path":"d/a","size":-1}])", R"([{"type":"file","path":"d/a"}])",
        R"([{"type":"link","path":"d/a"}])", R"([{"type":"file","path":"d/a\u0000b","size":1}])", "[1]", "not json"}) {
    auto page = parse_hub_page(body, "d");
    ASSERT_FALSE(page.is_ok()) << body;
    EXPECT_EQ(page.error().kind(), ErrorKind::HttpError) << body;
  }
}

TEST(HubListing, NextLinkOfALinkHeader) {
  EXPECT_EQ(listing::next_link(R"(<https://hub/api/models/a/b/tree/main?cursor=xyz>; rel="next")"),
            "https://hub/api/models/a/b/tree/main?cursor=xyz");
  EXPECT_EQ(listing::next_link(R"(<https://p>; rel="prev", <https://n>; rel="next")"), "https://n");
  EXPECT_EQ(listing::next_link(R"(<https://p>; rel="prev")"), "");
  EXPECT_EQ(listing::next_link(""), "");
}

}  // namespace
}  // namespace safeweights
