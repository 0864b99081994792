// ZIP layer tests: the Container policy on real torch.save output (compared with CPython's zipfile) and
// on hand-built archives with data descriptors, the Strict policy refusing them, and the writer's own
// error kind.
//
// Archives are built byte by byte by a writer of this file and CRCs come from a bitwise CRC-32 of this
// file, so expectations do not depend on the library's record codecs.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/dduf.h"
#include "safeweights/error.h"
#include "safeweights/source.h"
#include "safeweights/zip.h"

namespace {

namespace fs = std::filesystem;
using safeweights::ErrorKind;
using safeweights::ErrorRule;
using safeweights::FileBackend;
using safeweights::Result;
using safeweights::SourcePtr;
using safeweights::Status;
namespace zip = safeweights::zip;
using zip::ArchivePolicy;

// ---- helpers ----------------------------------------------------------------------------------------

std::uint32_t bitwise_crc32(std::string_view data) {
  std::uint32_t crc = 0xFFFFFFFF;
  for (unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

void put(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/zip_test.XXXXXX";
    path_ = ::mkdtemp(tmpl.data()) ? fs::path(tmpl) : fs::path();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

::testing::AssertionResult FailsWith(const Result<zip::Archive>& r, ErrorKind kind, std::string_view needle = {}) {
  if (r.is_ok()) return ::testing::AssertionFailure() << "opened, expected " << safeweights::error_kind_name(kind);
  if (r.error().kind() != kind || r.error().message().find(needle) == std::string::npos) {
    return ::testing::AssertionFailure() << "got " << r.error().to_string() << ", expected " << safeweights::error_kind_name(kind) << " containing '"
                                         << needle << "'";
  }
  return ::testing::AssertionSuccess();
}

// ---- a ZIP writer of this file ----------------------------------------------------------------------

enum class Descriptor { None, WithSignature, Bare };

struct TestEntry {
  std::string name;
  std::string data;
  Descriptor descriptor = Descriptor::None;
  bool zip64 = false;                            // local ZIP64 block (CPython's form: saturated fields, zero sizes) and 8-byte descriptor sizes
  bool miniz_zip64 = false;                      // miniz's form: zero local sizes, a ZIP64 block holding only the header offset
  bool local_values = false;                     // with a descriptor: the local header carries CRC and sizes anyway
  bool flag_without_descriptor = false;          // flag bit 3 set but no descriptor written
  bool descriptor_without_flag = false;          // descriptor written but flag bit 3 clear
  std::optional<std::uint32_t> descriptor_crc;   // a wrong value to write
  std::optional<std::uint64_t> descriptor_size;  // a wrong uncompressed size to write
  std::optional<bool> descriptor_zip64;          // descriptor size width other than the local header implies
  std::string after;                             // bytes after the entry (and its descriptor)
};

struct Built {
  std::string bytes;
  std::vector<std::uint64_t> header_offsets;
  std::vector<std::uint64_t> data_offsets;
};

Built build_zip(const std::vector<TestEntry>& entries) {
  Built b;
  std::string cd;
  for (const TestEntry& e : entries) {
    const bool has_flag = (e.descriptor != Descriptor::None && !e.descriptor_without_flag) || e.flag_without_descriptor;
    const std::uint16_t flags = has_flag ? 0x0008 : 0;
    const std::uint32_t crc = bitwise_crc32(e.data);
    const bool deferred = has_flag && !e.local_values;
    std::string extra;
    if (e.miniz_zip64) put(extra, 0x0001, 2), put(extra, 8, 2), put(extra, b.bytes.size(), 8);
    if (e.zip64) {
      put(extra, 0x0001, 2), put(extra, 16, 2);
      put(extra, deferred ? 0 : e.data.size(), 8), put(extra, deferred ? 0 : e.data.size(), 8);
    }
    const std::uint64_t header_offset = b.bytes.size();
    put(b.bytes, 0x04034b50, 4);
    put(b.bytes, e.zip64 ? 45 : 20, 2);
    put(b.bytes, flags, 2);
    put(b.bytes, 0, 2);     // stored
    put(b.bytes, 0, 2);     // time
    put(b.bytes, 0x21, 2);  // date
    put(b.bytes, deferred ? 0 : crc, 4);
    const std::uint64_t local_size = e.zip64 ? 0xFFFFFFFF : (deferred ? 0 : e.data.size());
    put(b.bytes, local_size, 4), put(b.bytes, local_size, 4);
    put(b.bytes, e.name.size(), 2), put(b.bytes, extra.size(), 2);
    b.bytes += e.name;
    b.bytes += extra;
    b.header_offsets.push_back(header_offset);
    b.data_offsets.push_back(b.bytes.size());
    b.bytes += e.data;
    if (e.descriptor != Descriptor::None) {
      if (e.descriptor == Descriptor::WithSignature) put(b.bytes, 0x08074b50, 4);
      put(b.bytes, e.descriptor_crc.value_or(crc), 4);
      const int width = e.descriptor_zip64.value_or(e.zip64 || e.miniz_zip64) ? 8 : 4;
      put(b.bytes, e.data.size(), width);
      put(b.bytes, e.descriptor_size.value_or(e.data.size()), width);
    }
    b.bytes += e.after;
    put(cd, 0x02014b50, 4);
    put(cd, 0x031e, 2), put(cd, e.zip64 ? 45 : 20, 2), put(cd, flags, 2), put(cd, 0, 2), put(cd, 0, 2), put(cd, 0x21, 2);
    put(cd, crc, 4), put(cd, e.data.size(), 4), put(cd, e.data.size(), 4);
    put(cd, e.name.size(), 2), put(cd, 0, 2), put(cd, 0, 2), put(cd, 0, 2), put(cd, 0, 2), put(cd, 0, 4);
    put(cd, header_offset, 4);
    cd += e.name;
  }
  const std::uint64_t cd_offset = b.bytes.size();
  b.bytes += cd;
  put(b.bytes, 0x06054b50, 4);
  put(b.bytes, 0, 2), put(b.bytes, 0, 2), put(b.bytes, entries.size(), 2), put(b.bytes, entries.size(), 2);
  put(b.bytes, cd.size(), 4), put(b.bytes, cd_offset, 4), put(b.bytes, 0, 2);
  return b;
}

// Opens `bytes` mapped (memory) and unmapped (a file read with pread): both must give the same verdict,
// which is returned (the unmapped one, whose error kinds are compared too).
Result<zip::Archive> open_both(const std::string& bytes, ArchivePolicy policy) {
  TempDir tmp;
  const fs::path path = tmp.path() / "a.zip";
  write_file(path, bytes);
  auto mapped = zip::Archive::open(safeweights::memory_source(std::as_bytes(std::span<const char>(bytes.data(), bytes.size())), "mem"), policy);
  auto file = safeweights::open_file(path.string(), FileBackend::Pread);
  EXPECT_TRUE(file.is_ok());
  EXPECT_EQ((*file)->mapped(), nullptr);
  auto unmapped = zip::Archive::open(std::move(file).value(), policy);
  EXPECT_EQ(mapped.is_ok(), unmapped.is_ok());
  if (!mapped.is_ok() && !unmapped.is_ok()) {
    EXPECT_EQ(mapped.error().kind(), unmapped.error().kind());
    EXPECT_EQ(mapped.error().message(), unmapped.error().message());
  }
  if (unmapped.is_ok()) {
    EXPECT_TRUE(unmapped->verify_all_crcs(1).is_ok());
  }
  return unmapped;
}

std::string payload(std::size_t n, char seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7);
  return s;
}

// ---- hand-built archives ----------------------------------------------------------------------------

TEST(ContainerPolicy, DescriptorWithAndWithoutSignature) {
  std::vector<TestEntry> entries = {
      {.name = "a/data.pkl", .data = payload(100, 'a'), .descriptor = Descriptor::WithSignature},
      {.name = "a/data/0", .data = payload(12, 'b'), .descriptor = Descriptor::Bare},
      {.name = "a/version", .data = "3\n"},
      {.name = "a/empty", .data = "", .descriptor = Descriptor::WithSignature},
  };
  Built b = build_zip(entries);
  auto archive = open_both(b.bytes, ArchivePolicy::Container);
  ASSERT_TRUE(archive.is_ok()) << archive.error().to_string();
  ASSERT_EQ(archive->entries().size(), entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const zip::Entry& e = archive->entries()[i];
    EXPECT_EQ(e.name, entries[i].name);
    EXPECT_EQ(e.header_offset, b.header_offsets[i]);
    EXPECT_EQ(e.data_offset, b.data_offsets[i]);
    EXPECT_EQ(e.size, entries[i].data.size());
    EXPECT_EQ(e.crc32, bitwise_crc32(entries[i].data));
  }
  EXPECT_EQ(archive->entries()[0].descriptor_size, 16u);
  EXPECT_EQ(archive->entries()[1].descriptor_size, 12u);
  EXPECT_EQ(archive->entries()[2].descriptor_size, 0u);
  // The same bytes are refused by the strict (DDUF) policy, as before.
  EXPECT_TRUE(FailsWith(open_both(b.bytes, ArchivePolicy::Strict), ErrorKind::ZipUnsupported, "data descriptor"));
  EXPECT_TRUE(FailsWith(zip::Archive::open(safeweights::memory_source(std::as_bytes(std::span<const char>(b.bytes.data(), b.bytes.size())), "m")),
                        ErrorKind::ZipUnsupported, "data descriptor"));
}

TEST(ContainerPolicy, Zip64Descriptor) {
  for (Descriptor d : {Descriptor::WithSignature, Descriptor::Bare}) {
    Built b = build_zip({{.name = "big", .data = payload(300, 'z'), .descriptor = d, .zip64 = true}, {.name = "tail", .data = "x"}});
    auto archive = open_both(b.bytes, ArchivePolicy::Container);
    ASSERT_TRUE(archive.is_ok()) << archive.error().to_string();
    EXPECT_EQ(archive->entries()[0].descriptor_size, d == Descriptor::WithSignature ? 24u : 20u);
    EXPECT_EQ(archive->entries()[0].data_offset, b.data_offsets[0]);
  }
}

TEST(ContainerPolicy, MinizZip64Form) {
  // What miniz writes for an entry at or past 4 GiB: zero local CRC and sizes, a local ZIP64 block with
  // the header offset only, an 8-byte-size descriptor.
  Built b =
      build_zip({{.name = "x", .data = "1"}, {.name = "y", .data = payload(50, 'm'), .descriptor = Descriptor::WithSignature, .miniz_zip64 = true}});
  auto archive = open_both(b.bytes, ArchivePolicy::Container);
  ASSERT_TRUE(archive.is_ok()) << archive.error().to_string();
  EXPECT_EQ(archive->entries()[1].descriptor_size, 24u);
  EXPECT_EQ(archive->entries()[1].data_offset, b.data_offsets[1]);
}

TEST(ContainerPolicy, LocalHeaderMayCarryTheValues) {
  Built b = build_zip({{.name = "a", .data = payload(40, 'q'), .descriptor = Descriptor::WithSignature, .local_values = true}});
  EXPECT_TRUE(open_both(b.bytes, ArchivePolicy::Container).is_ok());
}

struct BadCase {
  const char* what;
  std::vector<TestEntry> entries;
  ErrorKind kind;
  const char* message;
  ErrorRule rule = ErrorRule::ZipDataDescriptor;
};

TEST(ContainerPolicy, MalformedDescriptors) {
  const std::string d = payload(64, 'd');
  const std::vector<BadCase> cases = {
      {"descriptor missing",
       {{.name = "a", .data = d, .flag_without_descriptor = true}, {.name = "b", .data = "x"}},
       ErrorKind::BadZipFile,
       "data descriptor missing"},
      {"descriptor missing at the end",
       {{.name = "a", .data = d, .flag_without_descriptor = true}},
       ErrorKind::BadZipFile,
       "data descriptor missing"},
      {"descriptor CRC differs",
       {{.name = "a", .data = d, .descriptor = Descriptor::WithSignature, .descriptor_crc = 0x12345678}},
       ErrorKind::BadZipFile,
       "data descriptor CRC differs"},
      {"bare descriptor CRC differs",
       {{.name = "a", .data = d, .descriptor = Descriptor::Bare, .descriptor_crc = 1}},
       ErrorKind::BadZipFile,
       "data descriptor CRC differs"},
      {"descriptor size differs",
       {{.name = "a", .data = d, .descriptor = Descriptor::WithSignature, .descriptor_size = 65}},
       ErrorKind::BadZipFile,
       "data descriptor sizes differ"},
      {"zip64 descriptor size differs",
       {{.name = "a", .data = d, .descriptor = Descriptor::Bare, .zip64 = true, .descriptor_size = 1ull << 33}},
       ErrorKind::BadZipFile,
       "data descriptor sizes differ"},
      {"garbage after the descriptor",
       {{.name = "a", .data = d, .descriptor = Descriptor::WithSignature, .after = "JUNK"}, {.name = "b", .data = "x"}},
       ErrorKind::BadZipFile,
       "unaccounted bytes after the data descriptor"},
      {"garbage before the central directory",
       {{.name = "a", .data = d, .descriptor = Descriptor::WithSignature, .after = std::string(9, 'j')}},
       ErrorKind::BadZipFile,
       "unaccounted bytes after the data descriptor"},
      {"odd gap", {{.name = "a", .data = d, .descriptor = Descriptor::Bare, .after = "xx"}}, ErrorKind::BadZipFile, "neither a data descriptor"},
      {"4 bytes that are not a signature",
       {{.name = "a", .data = d, .descriptor = Descriptor::Bare, .after = "ABCD"}, {.name = "b", .data = "x"}},
       ErrorKind::BadZipFile,
       "no descriptor signature"},
      {"4-byte sizes after a ZIP64 local header",
       {{.name = "a", .data = d, .descriptor = Descriptor::WithSignature, .zip64 = true, .descriptor_zip64 = false}},
       ErrorKind::BadZipFile,
       "data descriptor missing"},
      {"8-byte sizes without a ZIP64 local header",
       {{.name = "a", .data = d, .descriptor = Descriptor::WithSignature, .descriptor_zip64 = true}},
       ErrorKind::BadZipFile,
       "8 unaccounted bytes after the data descriptor"},
      {"descriptor without the flag",
       {{.name = "a", .data = d, .descriptor = Descriptor::WithSignature, .descriptor_without_flag = true}},
       ErrorKind::BadZipFile,
       "unaccounted bytes before the central directory",
       ErrorRule::ZipLayout},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    const Result<zip::Archive> archive = open_both(build_zip(c.entries).bytes, ArchivePolicy::Container);
    EXPECT_TRUE(FailsWith(archive, c.kind, c.message));
    if (!archive.is_ok()) {
      EXPECT_EQ(safeweights::error_rule_code(archive.error().rule()), safeweights::error_rule_code(c.rule)) << archive.error().to_string();
    }
  }
}

TEST(ContainerPolicy, LocalValuesMustAgreeWhenPresent) {
  // Bit 3 with non-zero local sizes: they must be the central directory's.
  TestEntry e{.name = "a", .data = payload(10, 'w'), .descriptor = Descriptor::WithSignature, .local_values = true};
  Built b = build_zip({e});
  b.bytes[18] = 9;  // local compressed size 10 -> 9
  EXPECT_TRUE(FailsWith(open_both(b.bytes, ArchivePolicy::Container), ErrorKind::BadZipFile, "local header sizes differ"));
  b = build_zip({e});
  b.bytes[14] ^= 1;  // local CRC
  EXPECT_TRUE(FailsWith(open_both(b.bytes, ArchivePolicy::Container), ErrorKind::BadZipFile, "local header CRC differs"));
}

TEST(ContainerPolicy, CompressedEntriesRefused) {
  Built b = build_zip({{.name = "a", .data = payload(10, 'c'), .descriptor = Descriptor::WithSignature}});
  b.bytes[8] = 8;  // local method: deflate
  const std::size_t cd = b.bytes.size() - 22 - (46 + 1);
  b.bytes[cd + 10] = 8;  // central method
  EXPECT_TRUE(FailsWith(open_both(b.bytes, ArchivePolicy::Container), ErrorKind::ZipUnsupported, "compressed"));
}

TEST(ContainerPolicy, StrictChecksStillApply) {
  // Duplicate names, and an entry whose data runs past the central directory.
  EXPECT_TRUE(FailsWith(open_both(build_zip({{.name = "a", .data = "1"}, {.name = "a", .data = "2"}}).bytes, ArchivePolicy::Container),
                        ErrorKind::BadZipFile, "duplicate entry name"));
  Built b = build_zip({{.name = "a", .data = "x", .after = "??"}});
  EXPECT_TRUE(FailsWith(open_both(b.bytes, ArchivePolicy::Container), ErrorKind::BadZipFile, "unaccounted bytes"));
}

TEST(ZipErrors, ExtraFieldIdPrintedInHex) {
  // A central extra block 0xABCD that claims more bytes than the field holds.
  Built b = build_zip({{.name = "a", .data = "x"}});
  const std::size_t cd = b.bytes.size() - 22 - (46 + 1);
  std::string extra;
  put(extra, 0xABCD, 2), put(extra, 10, 2);
  b.bytes.insert(cd + 46 + 1, extra);
  b.bytes[cd + 30] = 4;                                               // extra length
  b.bytes[b.bytes.size() - 22 + 12] = static_cast<char>(46 + 1 + 4);  // central directory size
  auto r = open_both(b.bytes, ArchivePolicy::Strict);
  EXPECT_TRUE(FailsWith(r, ErrorKind::BadZipFile, "block 0xABCD runs past its end"));
}

TEST(ZipWriter, ShortProducerIsAZipWriteError) {
  TempDir tmp;
  auto w = zip::Writer::create((tmp.path() / "w.zip").string());
  ASSERT_TRUE(w.is_ok());
  int calls = 0;
  auto short_stream = [&](std::span<std::byte> chunk) -> Result<std::size_t> {
    if (calls++ > 0) return std::size_t{0};
    std::memset(chunk.data(), 'x', 4);
    return std::size_t{4};
  };
  Status s = w->add_stream("a.txt", 10, short_stream);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.error().kind(), ErrorKind::ZipWrite) << s.to_string();
  EXPECT_EQ(w->finish().error().kind(), ErrorKind::ZipWrite);  // the writer is spent
  EXPECT_FALSE(fs::exists(tmp.path() / "w.zip"));
}

TEST(ZipWriter, WrittenArchivesOpenUnderBothPolicies) {
  TempDir tmp;
  const fs::path out = tmp.path() / "w.zip";
  {
    auto w = zip::Writer::create(out.string(), {.alignment = 64});
    ASSERT_TRUE(w.is_ok());
    ASSERT_TRUE(w->add_bytes("a", std::as_bytes(std::span<const char>("hello", 5))).is_ok());
    ASSERT_TRUE(w->add_bytes("b/c", std::as_bytes(std::span<const char>("world!", 6))).is_ok());
    ASSERT_TRUE(w->finish().is_ok());
  }
  const std::string bytes = read_file(out);
  for (ArchivePolicy policy : {ArchivePolicy::Strict, ArchivePolicy::Container}) {
    auto a = open_both(bytes, policy);
    ASSERT_TRUE(a.is_ok()) << a.error().to_string();
    ASSERT_EQ(a->entries().size(), 2u);
    EXPECT_EQ(a->entries()[1].data_offset % 64, 0u);
    EXPECT_EQ(a->entries()[1].crc32, bitwise_crc32("world!"));
  }
}

// ---- torch.save output --------------------------------------------------------------------------------

struct ExpectedEntry {
  std::string name;
  std::uint64_t header_offset, data_offset, compressed_size, size;
  std::uint32_t crc;
};

std::vector<ExpectedEntry> read_manifest(const fs::path& path) {
  std::vector<ExpectedEntry> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    ExpectedEntry e;
    std::getline(fields, e.name, '\t');
    fields >> e.header_offset >> e.data_offset >> e.compressed_size >> e.size >> e.crc;
    out.push_back(e);
  }
  return out;
}

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string_view(ci) == "true";
}

class TorchSave : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const std::string cmd = std::string(ZIP_TEST_PYTHON) + " " + ZIP_TEST_TORCH_SCRIPT + " " + dir_->path().string();
    const int rc = std::system(cmd.c_str());
    status_ = (rc != -1 && WIFEXITED(rc)) ? WEXITSTATUS(rc) : -1;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (status_ == 77) {
      if (in_ci()) FAIL() << "torch is not importable by " << ZIP_TEST_PYTHON << " and CI=true";
      GTEST_SKIP() << "torch is not importable by " << ZIP_TEST_PYTHON;
    }
    ASSERT_EQ(status_, 0) << "make_torch_archives.py failed";
  }
  static fs::path file(const char* name) { return dir_->path() / name; }

  static inline TempDir* dir_ = nullptr;
  static inline int status_ = -1;
};

TEST_F(TorchSave, ContainerPolicyAgreesWithZipfile) {
  for (const char* name : {"small.pt", "many.pt", "large.pt", "buffer.pt"}) {
    SCOPED_TRACE(name);
    const auto expected = read_manifest(file(name).string() + ".entries");
    ASSERT_FALSE(expected.empty());
    for (FileBackend backend : {FileBackend::Mmap, FileBackend::Pread}) {
      auto source = safeweights::open_file(file(name).string(), backend);
      ASSERT_TRUE(source.is_ok());
      auto archive = zip::Archive::open(std::move(source).value(), ArchivePolicy::Container);
      ASSERT_TRUE(archive.is_ok()) << archive.error().to_string();
      ASSERT_EQ(archive->entries().size(), expected.size());
      for (std::size_t i = 0; i < expected.size(); ++i) {
        const zip::Entry& e = archive->entries()[i];
        EXPECT_EQ(e.name, expected[i].name);
        EXPECT_EQ(e.header_offset, expected[i].header_offset) << e.name;
        EXPECT_EQ(e.data_offset, expected[i].data_offset) << e.name;
        EXPECT_EQ(e.compressed_size, expected[i].compressed_size) << e.name;
        EXPECT_EQ(e.size, expected[i].size) << e.name;
        EXPECT_EQ(e.crc32, expected[i].crc) << e.name;
        EXPECT_GT(e.descriptor_size, 0u) << e.name;  // torch.save writes through miniz as a stream
        EXPECT_TRUE(archive->verify_crc(e).is_ok()) << e.name;
      }
      EXPECT_TRUE(archive->verify_all_crcs().is_ok());
    }
  }
}

TEST_F(TorchSave, StrictPolicyRefusesThem) {
  for (const char* name : {"small.pt", "many.pt", "large.pt", "buffer.pt"}) {
    SCOPED_TRACE(name);
    auto source = safeweights::open_file(file(name).string());
    ASSERT_TRUE(source.is_ok());
    EXPECT_TRUE(FailsWith(zip::Archive::open(*source), ErrorKind::ZipUnsupported, "data descriptor"));
    EXPECT_TRUE(FailsWith(zip::Archive::open(*source, ArchivePolicy::Strict), ErrorKind::ZipUnsupported, "data descriptor"));
    auto dduf = safeweights::dduf::Reader::open(file(name).string());
    ASSERT_FALSE(dduf.is_ok());
    EXPECT_EQ(dduf.error().kind(), ErrorKind::ZipUnsupported);
  }
}

TEST_F(TorchSave, LegacySerializationIsNotAZip) {
  auto source = safeweights::open_file(file("legacy.pt").string());
  ASSERT_TRUE(source.is_ok());
  EXPECT_TRUE(FailsWith(zip::Archive::open(*source, ArchivePolicy::Container), ErrorKind::BadZipFile));
}

TEST_F(TorchSave, EveryTruncationFailsCleanly) {
  // Cutting the small checkpoint anywhere (or flipping a byte of a descriptor) never opens.
  const std::string bytes = read_file(file("small.pt"));
  for (std::size_t cut = 0; cut < bytes.size(); cut += 7) {
    auto r = open_both(bytes.substr(0, cut), ArchivePolicy::Container);
    EXPECT_FALSE(r.is_ok()) << cut;
  }
  const auto expected = read_manifest(file("small.pt").string() + ".entries");
  for (const ExpectedEntry& e : expected) {
    for (std::uint64_t k = 0; k < 16; ++k) {
      std::string flipped = bytes;
      flipped[static_cast<std::size_t>(e.data_offset + e.compressed_size + k)] ^= 0x20;
      auto r = open_both(flipped, ArchivePolicy::Container);
      EXPECT_TRUE(FailsWith(r, ErrorKind::BadZipFile)) << e.name << " descriptor byte " << k;
    }
  }
}

}  // namespace
