// Runs every file of tests/corpus/safetensors/ (made by tests/corpus/make_corpus.py) through the reader
// and checks the ErrorKind named by the file: `<Kind>--<rule>.safetensors`, or `valid--<rule>`.
#include <gtest/gtest.h>

#include <cctype>
#include <set>
#include <string>
#include <vector>

#include "test_util.h"

#ifndef SAFEWEIGHTS_CORPUS_DIR
#error "SAFEWEIGHTS_CORPUS_DIR must be defined"
#endif

namespace {

using namespace swt;
namespace st = safeweights::safetensors;
using K = safeweights::ErrorKind;

struct CorpusFile {
  std::string path;
  std::string name;  // file name
  std::string kind;  // "valid" or an ErrorKind name
};

void PrintTo(const CorpusFile& f, std::ostream* os) { *os << f.name; }

std::vector<CorpusFile> corpus_files() {
  std::vector<CorpusFile> v;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(SAFEWEIGHTS_CORPUS_DIR, ec)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".safetensors") continue;
    const auto sep = name.find("--");
    v.push_back({e.path().string(), name, sep == std::string::npos ? std::string() : name.substr(0, sep)});
  }
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return v;
}

std::string test_name(const ::testing::TestParamInfo<CorpusFile>& info) {
  std::string s;
  for (char c : info.param.name.substr(0, info.param.name.size() - std::string(".safetensors").size()))
    s += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return s;
}

TEST(Corpus, FolderIsComplete) {
  const auto files = corpus_files();
  ASSERT_GE(files.size(), 30u) << "corpus folder: " << SAFEWEIGHTS_CORPUS_DIR;
  std::set<std::string> kinds;
  std::size_t valid = 0;
  for (const auto& f : files) {
    ASSERT_FALSE(f.kind.empty()) << f.name << " is not named <Kind>--<rule>.safetensors";
    if (f.kind == "valid") {
      ++valid;
      continue;
    }
    ASSERT_TRUE(safeweights::error_kind_from_name(f.kind).has_value()) << f.name << ": unknown kind " << f.kind;
    kinds.insert(f.kind);
  }
  EXPECT_GE(valid, 5u);
  for (const char* k : {"HeaderTooSmall", "HeaderTooLarge", "InvalidHeaderLength", "InvalidHeader", "InvalidHeaderDeserialization", "InvalidOffset",
                        "TensorInvalidInfo", "MetadataIncompleteBuffer", "ValidationOverflow", "MisalignedSlice", "DuplicateKey", "NonCanonicalEntry",
                        "UnknownField"})
    EXPECT_TRUE(kinds.count(k)) << "no corpus file for " << k;
}

class CorpusFileTest : public ::testing::TestWithParam<CorpusFile> {};

TEST_P(CorpusFileTest, HasTheKindInItsName) {
  const CorpusFile& f = GetParam();
  const std::string bytes = read_file_bytes(f.path);
  const bool unknown_field_only = f.kind == "UnknownField" || f.name.rfind("valid--unknown-", 0) == 0;
  const std::optional<K> expected = (f.kind == "valid" || f.kind == "UnknownField") ? std::nullopt : safeweights::error_kind_from_name(f.kind);
  ASSERT_TRUE(f.kind == "valid" || safeweights::error_kind_from_name(f.kind).has_value()) << f.name;

  st::ReadOptions strict;
  strict.reject_unknown_fields = true;
  const std::optional<K> expected_strict = unknown_field_only ? std::optional<K>(K::UnknownField) : expected;

  // In memory.
  for (bool is_strict : {false, true}) {
    auto want = is_strict ? expected_strict : expected;
    auto src = mem(bytes, f.path);
    auto r = st::Header::parse(*src, is_strict ? strict : st::ReadOptions{});
    if (!want) {
      EXPECT_TRUE(IsOk(r)) << f.name << (is_strict ? " (strict)" : "");
    } else {
      ASSERT_TRUE(IsKind(r, *want)) << f.name << (is_strict ? " (strict)" : "");
      EXPECT_EQ(r.error().context().file, f.path);
    }
  }
  // From disk, with both backends.
  for (auto backend : {safeweights::FileBackend::Mmap, safeweights::FileBackend::Pread}) {
    auto r = st::Reader::open(f.path, backend);
    const char* bname = backend == safeweights::FileBackend::Mmap ? "mmap" : "pread";
    if (!expected) {
      ASSERT_TRUE(IsOk(r)) << f.name << " " << bname;
      // Every tensor of a valid file can be read, and agrees with the file's bytes.
      for (const auto& info : r->header().tensors()) {
        std::vector<std::byte> buf(info.nbytes());
        ASSERT_TRUE(IsOk(r->entry(info).read(buf))) << info.name;
        EXPECT_EQ(to_string(buf), bytes.substr(r->header().data_start() + info.begin, info.nbytes()));
      }
    } else {
      ASSERT_TRUE(IsKind(r, *expected)) << f.name << " " << bname;
      EXPECT_EQ(r.error().context().file, f.path) << describe(r.error());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Files, CorpusFileTest, ::testing::ValuesIn(corpus_files()), test_name);

// Context of per-tensor errors in the corpus: the tensor is named.
TEST(Corpus, PerTensorErrorsNameTheTensor) {
  const std::string dir = SAFEWEIGHTS_CORPUS_DIR;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"InvalidOffset--hole.safetensors", "b"},
      {"InvalidOffset--overlap.safetensors", "b"},
      {"InvalidOffset--not-starting-at-zero.safetensors", "a"},
      {"InvalidOffset--end-before-begin.safetensors", "b"},
      {"InvalidOffset--duplicate-name-last-wins-hole.safetensors", "a"},
      {"TensorInvalidInfo--i32-2x2-4-bytes.safetensors", "t"},
      {"ValidationOverflow--2-x-2pow63m1.safetensors", "t"},
      {"MisalignedSlice--f4-1x3.safetensors", "t"},
  };
  for (const auto& [file, tensor] : cases) {
    auto r = st::Reader::open(dir + "/" + file);
    ASSERT_FALSE(r.is_ok()) << file;
    EXPECT_EQ(r.error().context().tensor, tensor) << file << ": " << describe(r.error());
  }
}

}  // namespace
