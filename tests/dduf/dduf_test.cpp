// DDUF tests: huggingface_hub's reference test cases against our API, round trips through pack_folder /
// Reader / unpack, a sparse ZIP64 archive larger than 4 GiB, and the malformed-archive corpus.
//
// Expected values come from the reference (dduf.md §2, §3) or are computed here independently of the
// library: archives are built byte by byte with a ZIP writer of this file, CRCs with a table-driven
// CRC-32 of this file, and offsets from the hub reader's formula (header offset + 30 + name + extra).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "test_util.h"
#include "safeweights/atomic_file.h"
#include "safeweights/dduf.h"
#include "safeweights/error.h"
#include "safeweights/safetensors.h"
#include "safeweights/safetensors_writer.h"
#include "safeweights/source.h"
#include "safeweights/zip.h"

namespace {

namespace fs = std::filesystem;
using safeweights::Error;
using safeweights::ErrorKind;
using safeweights::FileBackend;
using safeweights::Result;
using safeweights::Status;
using safeweights::TensorType;
namespace dduf = safeweights::dduf;
namespace zip = safeweights::zip;
namespace st = safeweights::safetensors;

// ---- small helpers -------------------------------------------------------------------------------

std::span<const std::byte> bytes_of(std::string_view s) { return std::as_bytes(std::span<const char>(s.data(), s.size())); }

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const fs::path& path, std::string_view content) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

std::string read_source(const safeweights::ByteSource& src) {
  std::string out(static_cast<std::size_t>(src.size()), '\0');
  Status s = src.read_at(0, std::as_writable_bytes(std::span<char>(out.data(), out.size())));
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return out;
}

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/dduf_test.XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    if (made == nullptr) std::abort();
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(std::string_view name) const { return path_ / name; }

 private:
  fs::path path_;
};

// Every regular file under `dir`, as generic relative paths.
std::set<std::string> list_files(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.insert(e.path().lexically_relative(dir).generic_string());
  }
  return out;
}

// Everything under `dir` (files, folders, temporaries) by name.
std::set<std::string> list_all(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) out.insert(e.path().lexically_relative(dir).generic_string());
  return out;
}

// Names directly in `dir` that start with '.': staging folders and temporary files.
std::set<std::string> hidden_names(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.front() == '.') out.insert(name);
  }
  return out;
}

std::string describe(const Status& s) { return s.to_string(); }
template <typename T>
std::string describe(const Result<T>& r) {
  return r.is_ok() ? std::string("OK") : r.error().to_string();
}

#define EXPECT_OK(expr)                                    \
  do {                                                     \
    const auto& sw_value_ = (expr);                        \
    EXPECT_TRUE(sw_value_.is_ok()) << describe(sw_value_); \
  } while (0)
#define ASSERT_OK(expr)                                    \
  do {                                                     \
    const auto& sw_value_ = (expr);                        \
    ASSERT_TRUE(sw_value_.is_ok()) << describe(sw_value_); \
  } while (0)

// A failure of exactly `kind` whose message contains `text`.
template <typename R>
::testing::AssertionResult Fails(const R& r, ErrorKind kind, std::string_view text = {}) {
  if (r.is_ok()) return ::testing::AssertionFailure() << "succeeded; expected " << safeweights::error_kind_name(kind);
  const Error& e = r.error();
  if (e.kind() != kind) {
    return ::testing::AssertionFailure() << "kind " << e.kind_name() << ", expected " << safeweights::error_kind_name(kind) << ": " << e.to_string();
  }
  if (!text.empty() && e.message().find(text) == std::string::npos) {
    return ::testing::AssertionFailure() << "message `" << e.message() << "` lacks `" << text << "`";
  }
  return ::testing::AssertionSuccess();
}

// ---- an independent CRC-32 -------------------------------------------------------------------------

std::uint32_t ref_crc32(std::string_view data, std::uint32_t crc = 0) {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (unsigned char b : data) crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

// a * b modulo the CRC polynomial, bit-reflected (as zlib's multmodp).
std::uint32_t mult_mod_p(std::uint32_t a, std::uint32_t b) {
  std::uint32_t m = 1u << 31, p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = (b & 1) ? (b >> 1) ^ 0xEDB88320u : b >> 1;
  }
  return p;
}

// CRC-32 of n zero bytes in O(log n): the register 0xFFFFFFFF times x^(8n), then the final xor.
std::uint32_t crc32_of_zeros(std::uint64_t n) {
  std::array<std::uint32_t, 32> x2n{};  // x^(2^k) mod p
  std::uint32_t p = 1u << 30;           // x^1
  x2n[0] = p;
  for (int k = 1; k < 32; ++k) x2n[k] = p = mult_mod_p(p, p);
  std::uint32_t x = 1u << 31;  // x^0
  for (unsigned k = 3; n != 0; n >>= 1, ++k) {
    if (n & 1) x = mult_mod_p(x2n[k & 31], x);
  }
  return mult_mod_p(x, 0xFFFFFFFFu) ^ 0xFFFFFFFFu;
}

TEST(TestHelpers, IndependentCrc32) {
  EXPECT_EQ(ref_crc32("123456789"), 0xCBF43926u);  // the CRC-32/ISO-HDLC check value
  for (std::uint64_t n : {0, 1, 7, 1000, 65537}) EXPECT_EQ(crc32_of_zeros(n), ref_crc32(std::string(n, '\0'))) << n;
  // And the library agrees.
  std::string text = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(zip::crc32(0, bytes_of(text)), ref_crc32(text));
}

// ---- an independent ZIP writer ----------------------------------------------------------------------

void put(std::string& s, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
std::uint64_t get(std::string_view s, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<std::size_t>(i)]);
  return v;
}

struct ZipItem {
  std::string name;
  std::string data;
};
enum class ZipStyle {
  Hub,    // CPython zipfile, force_zip64=True (>= 3.11.4): what huggingface_hub's exporter writes
  Plain,  // CPython writestr: no ZIP64, real sizes, version 2.0
};
struct BuiltZip {
  std::string bytes;
  std::vector<std::uint64_t> header_offsets;
  std::vector<std::uint64_t> data_offsets;
};

BuiltZip build_zip(const std::vector<ZipItem>& items, ZipStyle style, std::string_view comment = {}) {
  BuiltZip out;
  std::string& z = out.bytes;
  const bool hub = style == ZipStyle::Hub;
  for (const auto& it : items) {
    out.header_offsets.push_back(z.size());
    bool ascii = std::all_of(it.name.begin(), it.name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
    put(z, 0x04034b50, 4);
    put(z, hub ? 45 : 20, 2);
    put(z, ascii ? 0 : 0x800, 2);
    put(z, 0, 2);
    put(z, 0, 2);
    put(z, 0x21, 2);
    put(z, ref_crc32(it.data), 4);
    put(z, hub ? 0xFFFFFFFF : it.data.size(), 4);
    put(z, hub ? 0xFFFFFFFF : it.data.size(), 4);
    put(z, it.name.size(), 2);
    put(z, hub ? 20 : 0, 2);
    z += it.name;
    if (hub) {
      put(z, 1, 2);
      put(z, 16, 2);
      put(z, it.data.size(), 8);
      put(z, it.data.size(), 8);
    }
    out.data_offsets.push_back(z.size());
    z += it.data;
  }
  const std::uint64_t cd_offset = z.size();
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& it = items[i];
    bool ascii = std::all_of(it.name.begin(), it.name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
    put(z, 0x02014b50, 4);
    put(z, hub ? 0x032D : 0x0314, 2);
    put(z, hub ? 45 : 20, 2);
    put(z, ascii ? 0 : 0x800, 2);
    put(z, 0, 2);
    put(z, 0, 2);
    put(z, 0x21, 2);
    put(z, ref_crc32(it.data), 4);
    put(z, it.data.size(), 4);
    put(z, it.data.size(), 4);
    put(z, it.name.size(), 2);
    put(z, 0, 2);
    put(z, 0, 2);
    put(z, 0, 2);
    put(z, 0, 2);
    put(z, (hub ? 0600u : 0644u) << 16, 4);
    put(z, out.header_offsets[i], 4);
    z += it.name;
  }
  const std::uint64_t cd_size = z.size() - cd_offset;
  put(z, 0x06054b50, 4);
  put(z, 0, 2);
  put(z, 0, 2);
  put(z, items.size(), 2);
  put(z, items.size(), 2);
  put(z, cd_size, 4);
  put(z, cd_offset, 4);
  put(z, comment.size(), 2);
  z += comment;
  return out;
}

// Walks the central directory of a (non-ZIP64-EOCD) archive: name -> position of its record.
std::map<std::string, std::size_t> central_records(std::string_view z) {
  std::map<std::string, std::size_t> out;
  std::size_t eocd = z.size() - 22;
  EXPECT_EQ(get(z, eocd, 4), 0x06054b50u);
  std::size_t pos = static_cast<std::size_t>(get(z, eocd + 16, 4));
  std::size_t count = static_cast<std::size_t>(get(z, eocd + 10, 2));
  for (std::size_t i = 0; i < count; ++i) {
    EXPECT_EQ(get(z, pos, 4), 0x02014b50u);
    std::size_t n = get(z, pos + 28, 2), m = get(z, pos + 30, 2), k = get(z, pos + 32, 2);
    out[std::string(z.substr(pos + 46, n))] = pos;
    pos += 46 + n + m + k;
  }
  return out;
}

// Rewrites an entry's CRC in its local header and its central record (after its bytes were changed on
// purpose, so that only the intended check fails).
void patch_crc(std::string& z, const std::string& name, std::uint32_t crc) {
  auto records = central_records(z);
  ASSERT_TRUE(records.count(name)) << name;
  std::size_t rec = records[name];
  std::size_t local = static_cast<std::size_t>(get(z, rec + 42, 4));
  for (std::size_t at : {rec + 16, local + 14}) {
    for (int i = 0; i < 4; ++i) z[at + static_cast<std::size_t>(i)] = static_cast<char>((crc >> (8 * i)) & 0xFF);
  }
}

// ---- a diffusers-like pipeline folder -------------------------------------------------------------

std::string tensor_bytes(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed * 17 + (i >> 7)) & 0xFF);
  return s;
}

struct Pipeline {
  // The files that belong in the archive: entry name -> bytes.
  std::map<std::string, std::string> packed;
  // Files in the folder that pack_folder must skip.
  std::vector<std::string> skipped;
};

void write_safetensors(const fs::path& path,
                       const std::vector<std::tuple<std::string, TensorType, std::vector<std::uint64_t>, std::string>>& tensors) {
  fs::create_directories(path.parent_path());
  std::vector<st::TensorData> data;
  for (const auto& [name, dtype, shape, bytes] : tensors) data.push_back({name, dtype, shape, bytes_of(bytes)});
  Status s = st::write_file(path.string(), data, st::MetadataEntries{{"format", "pt"}});
  ASSERT_TRUE(s.is_ok()) << s.to_string();
}

// Writes the folder; `reverse` creates the files in the opposite order (directory order differs).
Pipeline make_pipeline(const fs::path& dir, bool reverse = false) {
  Pipeline p;
  std::vector<std::pair<std::string, std::string>> files = {
      {"model_index.json",
       R"({"_class_name": "StableDiffusionPipeline", "_diffusers_version": "0.33.0", "scheduler": ["diffusers", "DDIMScheduler"],)"
       R"( "text_encoder": ["transformers", "CLIPTextModel"], "tokenizer": ["transformers", "CLIPTokenizer"], "vae": ["diffusers", "AutoencoderKL"]})"},
      {"vae/config.json", R"({"_class_name": "AutoencoderKL", "latent_channels": 4})"},
      {"text_encoder/config.json", R"({"architectures": ["CLIPTextModel"], "hidden_size": 32})"},
      {"tokenizer/tokenizer_config.json", R"({"model_max_length": 77})"},
      {"tokenizer/vocab.json", R"({"a": 0, "b": 1, "ab": 2})"},
      {"tokenizer/merges.txt", "#version: 0.2\na b\n"},
      {"tokenizer/spiece.model", std::string("\x0a\x0b\x00\x01sentencepiece\xff", 18)},
      {"tokenizer/.hidden.json", "{}"},  // Path('.hidden.json').suffix == '.json': the reference packs it
      {"scheduler/scheduler_config.json", R"({"_class_name": "DDIMScheduler", "num_train_timesteps": 1000})"},
      {"notes.txt", "packed at the root\n"},
  };
  std::vector<std::pair<std::string, std::string>> skipped = {
      {"README.md", "# not packed\n"},
      {"model.bin", "\x80\x02pickle"},
      {"vae/diffusion_pytorch_model.bin", "\x80\x02pickle"},
      {"text_encoder/sub/config.json", "{}"},  // three path parts
      {".json", "{}"},                         // no suffix (a dot file)
      {"vae/weights.SAFETENSORS", "upper case suffix"},
  };
  if (reverse) {
    std::reverse(files.begin(), files.end());
    std::reverse(skipped.begin(), skipped.end());
  }
  auto write_st = [&] {
    write_safetensors(dir / "vae/diffusion_pytorch_model.safetensors",
                      {{"decoder.conv_in.weight", TensorType::F32, {4, 3, 3, 3}, tensor_bytes(4 * 3 * 3 * 3 * 4, 1)},
                       {"decoder.conv_in.bias", TensorType::F32, {4}, tensor_bytes(16, 2)},
                       {"encoder.odd", TensorType::U8, {3, 5}, tensor_bytes(15, 3)}});
    write_safetensors(dir / "text_encoder/model.safetensors", {{"embeddings.weight", TensorType::BF16, {10, 8}, tensor_bytes(160, 4)},
                                                               {"final_layer_norm.weight", TensorType::F16, {8}, tensor_bytes(16, 5)}});
  };
  if (!reverse) write_st();
  for (const auto& [name, content] : files) {
    write_file(dir / name, content);
    p.packed[name] = content;
  }
  for (const auto& [name, content] : skipped) {
    write_file(dir / name, content);
    p.skipped.push_back(name);
  }
  if (reverse) write_st();
  p.packed["vae/diffusion_pytorch_model.safetensors"] = read_file(dir / "vae/diffusion_pytorch_model.safetensors");
  p.packed["text_encoder/model.safetensors"] = read_file(dir / "text_encoder/model.safetensors");
  return p;
}

// The reference's deterministic order for pack_folder: model_index.json, then sorted names.
std::vector<std::string> expected_order(const Pipeline& p) {
  std::vector<std::string> names = {"model_index.json"};
  for (const auto& [name, _] : p.packed) {
    if (name != "model_index.json") names.push_back(name);
  }
  return names;  // std::map iterates sorted
}

bool ends_with(std::string_view s, std::string_view suffix) { return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix; }

// =====================================================================================================
// huggingface_hub tests/test_dduf.py, TestUtils: entry names
// =====================================================================================================

TEST(EntryName, ValidExtensions) {
  for (const char* name : {"dummy.txt", "dummy.json", "dummy.safetensors", "dummy.model"}) {
    auto r = dduf::validate_entry_name(name);
    ASSERT_OK(r);
    EXPECT_EQ(*r, name);
  }
}

TEST(EntryName, InvalidExtensions) {
  for (const char* name : {"dummy", "dummy.bin", "dummy.dduf", "dummy.gguf", "config.JSON", "vae/", "model.pt"}) {
    auto r = dduf::validate_entry_name(name);
    EXPECT_TRUE(Fails(r, ErrorKind::DDUFInvalidEntryName, std::string("File type not allowed: ") + name)) << name;
  }
}

TEST(EntryName, NoWindowsPaths) {
  for (const char* name : {"encoder\\dummy.json", "C:\\dummy.json"}) {
    auto r = dduf::validate_entry_name(name);
    EXPECT_TRUE(Fails(r, ErrorKind::DDUFInvalidEntryName, std::string("Entry names must use UNIX separators ('/'). Got ") + name + ".")) << name;
  }
}

TEST(EntryName, LeadingSlashStripped) {
  auto r = dduf::validate_entry_name("/dummy.json");
  ASSERT_OK(r);
  EXPECT_EQ(*r, "dummy.json");
}

TEST(EntryName, OneLevelOfDirectory) {
  auto ok = dduf::validate_entry_name("bar/dummy.json");
  ASSERT_OK(ok);
  EXPECT_EQ(*ok, "bar/dummy.json");
  EXPECT_TRUE(Fails(dduf::validate_entry_name("foo/bar/dummy.json"), ErrorKind::DDUFInvalidEntryName,
                    "DDUF only supports 1 level of directory. Got foo/bar/dummy.json."));
  // `vae//x.json` has two separators: the depth rule rejects it (dduf.md §2.5).
  EXPECT_TRUE(Fails(dduf::validate_entry_name("vae//x.json"), ErrorKind::DDUFInvalidEntryName, "1 level of directory"));
  // `vae/a.b/c.json` passes the extension rule and fails the depth rule.
  EXPECT_TRUE(Fails(dduf::validate_entry_name("vae/a.b/c.json"), ErrorKind::DDUFInvalidEntryName, "1 level of directory"));
}

TEST(EntryName, ReferenceQuirks) {
  // "." + name.split(".")[-1]: a bare `json` is its own extension and passes.
  for (const char* name : {"json", "txt", "model", "safetensors", "vae/.json"}) {
    auto r = dduf::validate_entry_name(name);
    ASSERT_OK(r);
    EXPECT_EQ(*r, name);
  }
  // Rules apply in the reference's order: extension, then backslash, then depth.
  EXPECT_TRUE(Fails(dduf::validate_entry_name("a\\b/c/d.bin"), ErrorKind::DDUFInvalidEntryName, "File type not allowed"));
  EXPECT_TRUE(Fails(dduf::validate_entry_name("a\\b/c/d.json"), ErrorKind::DDUFInvalidEntryName, "UNIX separators"));
}

// =====================================================================================================
// TestUtils: structure
// =====================================================================================================

TEST(Structure, Valid) {
  EXPECT_OK(dduf::validate_structure(R"({"_some_key": "some_value", "encoder": {"library": "transformers"}})",
                                     {"model_index.json", "something.txt", "encoder/config.json", "encoder/model.safetensors"}));
}

TEST(Structure, NotADict) {
  EXPECT_TRUE(Fails(dduf::validate_structure(R"(["not a dict"])", {"model_index.json"}), ErrorKind::DDUFCorruptedFile, "Must be a dictionary."));
  EXPECT_TRUE(Fails(dduf::validate_structure(R"("a string")", {"model_index.json"}), ErrorKind::DDUFCorruptedFile, "Must be a dictionary."));
}

TEST(Structure, MissingFolder) {
  EXPECT_TRUE(Fails(dduf::validate_structure("{}", {"model_index.json", "encoder/config.json", "encoder/model.safetensors"}),
                    ErrorKind::DDUFCorruptedFile, "Missing required entry 'encoder' in 'model_index.json'."));
}

TEST(Structure, MissingConfigFile) {
  EXPECT_TRUE(Fails(dduf::validate_structure(R"({"encoder": {}})", {"model_index.json", "encoder/not_a_config.json", "encoder/model.safetensors"}),
                    ErrorKind::DDUFCorruptedFile, "Missing required file in folder 'encoder'."));
}

TEST(Structure, AnyOfTheFourConfigFiles) {
  for (const char* cfg : {"config.json", "tokenizer_config.json", "preprocessor_config.json", "scheduler_config.json"}) {
    EXPECT_OK(dduf::validate_structure(R"({"c": null})", {"model_index.json", std::string("c/") + cfg}));
  }
  // Components listed in the index but absent from the archive are fine; root files are unrestricted.
  EXPECT_OK(dduf::validate_structure(R"({"unet": ["diffusers", "UNet2DConditionModel"]})", {"model_index.json", "weights.safetensors"}));
  // Folder names are case-sensitive.
  EXPECT_TRUE(Fails(dduf::validate_structure(R"({"vae": []})", {"model_index.json", "VAE/config.json"}), ErrorKind::DDUFCorruptedFile,
                    "Missing required entry 'VAE'"));
}

TEST(Structure, InvalidJsonIsCorrupted) {
  // The reference leaves json.loads errors raw; we report DDUFCorruptedFile (dduf.md §8.1).
  EXPECT_TRUE(Fails(dduf::validate_structure("{\"a\": ", {"model_index.json"}), ErrorKind::DDUFCorruptedFile));
  EXPECT_TRUE(Fails(dduf::validate_structure("{\"\xff\": 1}", {"model_index.json"}), ErrorKind::DDUFCorruptedFile));
}

// =====================================================================================================
// TestExportEntries / TestExportFolder: the exporter
// =====================================================================================================

TEST(Exporter, EntriesInCallerOrder) {
  TempDir tmp;
  write_file(tmp / "index_on_disk.json", R"({"foo": "bar"})");
  const std::string weights = read_file(tmp / "index_on_disk.json") + "not really safetensors";
  write_file(tmp / "some_other_name.bin", weights);
  const fs::path out = tmp / "out.dduf";
  {
    auto ex = dduf::Exporter::create(out.string());
    ASSERT_OK(ex);
    ASSERT_OK(ex->add_file("model_index.json", (tmp / "index_on_disk.json").string()));
    ASSERT_OK(ex->add_file("model.safetensors", (tmp / "some_other_name.bin").string()));
    ASSERT_OK(ex->add_bytes("hello.txt", bytes_of("hello world")));
    std::string streamed = "streamed in three chunks";
    std::size_t pos = 0;
    ASSERT_OK(ex->add_stream("b_stream.txt", streamed.size(), [&](std::span<std::byte> chunk) -> Result<std::size_t> {
      std::size_t n = std::min<std::size_t>({chunk.size(), streamed.size() - pos, 9});
      std::memcpy(chunk.data(), streamed.data() + pos, n);
      pos += n;
      return n;
    }));
    ASSERT_OK(ex->finish());
  }
  auto reader = dduf::Reader::open(out.string());
  ASSERT_OK(reader);
  std::vector<std::string> names;
  for (const auto& e : reader->entries()) names.push_back(e.filename);
  EXPECT_EQ(names, (std::vector<std::string>{"model_index.json", "model.safetensors", "hello.txt", "b_stream.txt"}));
  for (const auto& e : reader->archive().entries()) EXPECT_EQ(e.method, 0) << e.name;
  const std::string raw = read_file(out);
  auto at = [&](const char* name) {
    const dduf::Entry* e = reader->find(name);
    EXPECT_NE(e, nullptr) << name;
    return e ? raw.substr(static_cast<std::size_t>(e->offset), static_cast<std::size_t>(e->length)) : std::string();
  };
  EXPECT_EQ(at("model_index.json"), R"({"foo": "bar"})");
  EXPECT_EQ(at("model.safetensors"), weights);
  EXPECT_EQ(at("hello.txt"), "hello world");
  EXPECT_EQ(at("b_stream.txt"), "streamed in three chunks");
  EXPECT_EQ(reader->model_index(), R"({"foo": "bar"})");
}

// After a failure: the target does not exist, and once the exporter is gone nothing at all remains.
class ExporterFailure : public ::testing::Test {
 protected:
  TempDir tmp;
  fs::path out() const { return tmp / "out.dduf"; }
  void expect_clean() {
    EXPECT_FALSE(fs::exists(out()));
    EXPECT_TRUE(list_all(tmp.path()).empty()) << "left behind: " << ::testing::PrintToString(list_all(tmp.path()));
  }
};

TEST_F(ExporterFailure, DuplicateEntry) {
  {
    auto ex = dduf::Exporter::create(out().string());
    ASSERT_OK(ex);
    ASSERT_OK(ex->add_bytes("model_index.json", bytes_of("{}")));
    EXPECT_TRUE(Fails(ex->add_bytes("model_index.json", bytes_of("{}")), ErrorKind::DDUFExport, "Can't add duplicate entry"));
    EXPECT_FALSE(fs::exists(out()));
  }
  expect_clean();
}

TEST_F(ExporterFailure, DuplicateAfterStripping) {
  // The reference checks duplicates on the raw name and strips later, writing `vae/config.json` twice
  // (dduf.md §2.4); we refuse the second one.
  {
    auto ex = dduf::Exporter::create(out().string());
    ASSERT_OK(ex);
    ASSERT_OK(ex->add_bytes("/vae/config.json", bytes_of("{}")));
    EXPECT_TRUE(Fails(ex->add_bytes("vae/config.json", bytes_of("{}")), ErrorKind::DDUFExport, "Can't add duplicate entry"));
  }
  expect_clean();
}

TEST_F(ExporterFailure, InvalidEntryName) {
  {
    auto ex = dduf::Exporter::create(out().string());
    ASSERT_OK(ex);
    // The content path does not exist: the name is checked before the content is read.
    EXPECT_TRUE(Fails(ex->add_file("config", (tmp / "does-not-exist.json").string()), ErrorKind::DDUFInvalidEntryName, "Invalid entry name"));
    EXPECT_TRUE(Fails(ex->add_bytes("vae/model.bin", bytes_of("x")), ErrorKind::DDUFInvalidEntryName, "Invalid entry name"));
    EXPECT_TRUE(Fails(ex->add_bytes("a/b/c.json", bytes_of("x")), ErrorKind::DDUFInvalidEntryName, "Invalid entry name"));
    EXPECT_FALSE(fs::exists(out()));
  }
  expect_clean();
}

TEST_F(ExporterFailure, ModelIndexRequired) {
  {
    auto ex = dduf::Exporter::create(out().string());
    ASSERT_OK(ex);
    ASSERT_OK(ex->add_bytes("model.safetensors", bytes_of("content")));
    EXPECT_TRUE(Fails(ex->finish(), ErrorKind::DDUFExport, "Missing required 'model_index.json'"));
    EXPECT_FALSE(fs::exists(out()));
  }
  expect_clean();
}

TEST_F(ExporterFailure, ModelIndexNotJson) {
  write_file(tmp / "src/bad.json", "{\"foo\": ");
  {
    auto ex = dduf::Exporter::create(out().string());
    ASSERT_OK(ex);
    EXPECT_TRUE(Fails(ex->add_bytes("model_index.json", bytes_of("not json")), ErrorKind::DDUFExport, "Failed to parse 'model_index.json'."));
    EXPECT_TRUE(
        Fails(ex->add_file("model_index.json", (tmp / "src/bad.json").string()), ErrorKind::DDUFExport, "Failed to parse 'model_index.json'."));
    std::string text = "[1, 2";
    std::size_t pos = 0;
    EXPECT_TRUE(Fails(ex->add_stream("model_index.json", text.size(),
                                     [&](std::span<std::byte> chunk) -> Result<std::size_t> {
                                       std::size_t n = std::min(chunk.size(), text.size() - pos);
                                       std::memcpy(chunk.data(), text.data() + pos, n);
                                       pos += n;
                                       return n;
                                     }),
                      ErrorKind::DDUFExport, "Failed to parse 'model_index.json'."));
    EXPECT_FALSE(fs::exists(out()));
  }
  fs::remove_all(tmp / "src");
  expect_clean();
}

TEST_F(ExporterFailure, StructureCheckedAtFinish) {
  for (const char* index : {R"(["not", "a", "dict"])", R"({"text_encoder": []})"}) {
    {
      auto ex = dduf::Exporter::create(out().string());
      ASSERT_OK(ex);
      ASSERT_OK(ex->add_bytes("model_index.json", bytes_of(index)));
      ASSERT_OK(ex->add_bytes("vae/config.json", bytes_of("{}")));
      EXPECT_TRUE(Fails(ex->finish(), ErrorKind::DDUFExport, "Invalid DDUF file structure.")) << index;
      EXPECT_FALSE(fs::exists(out()));
    }
    expect_clean();
  }
}

TEST_F(ExporterFailure, ProducerErrorOrShortStream) {
  {
    auto ex = dduf::Exporter::create(out().string());
    ASSERT_OK(ex);
    ASSERT_OK(ex->add_bytes("model_index.json", bytes_of("{}")));
    auto failing = [](std::span<std::byte>) -> Result<std::size_t> { return Error(ErrorKind::IoError, "disk on fire"); };
    EXPECT_TRUE(Fails(ex->add_stream("a.txt", 10, failing), ErrorKind::IoError, "disk on fire"));
  }
  expect_clean();
  {
    auto ex = dduf::Exporter::create(out().string());
    ASSERT_OK(ex);
    ASSERT_OK(ex->add_bytes("model_index.json", bytes_of("{}")));
    int calls = 0;
    auto short_stream = [&](std::span<std::byte> chunk) -> Result<std::size_t> {
      if (calls++ > 0) return std::size_t{0};
      std::memset(chunk.data(), 'x', 4);
      return std::size_t{4};
    };
    EXPECT_TRUE(Fails(ex->add_stream("a.txt", 10, short_stream), ErrorKind::DDUFExport));
  }
  expect_clean();
}

// An exporter that reported an error may be used on; whatever finish() then commits must be a valid DDUF.
::testing::AssertionResult CommitsOnlyValidArchives(Status finished, const fs::path& out) {
  if (!finished.is_ok()) {
    if (fs::exists(out)) return ::testing::AssertionFailure() << "finish() failed but " << out << " exists";
    return ::testing::AssertionSuccess();
  }
  auto reader = dduf::Reader::open(out.string());
  if (!reader.is_ok()) return ::testing::AssertionFailure() << "finish() succeeded but the archive does not open: " << reader.error().to_string();
  Status v = reader->verify();
  if (!v.is_ok()) return ::testing::AssertionFailure() << "finish() succeeded but the archive does not verify: " << v.to_string();
  return ::testing::AssertionSuccess();
}

TEST_F(ExporterFailure, ContinuingAfterAFailedStream) {
  auto ex = dduf::Exporter::create(out().string());
  ASSERT_OK(ex);
  ASSERT_OK(ex->add_bytes("model_index.json", bytes_of(R"({"vae": []})")));
  int calls = 0;
  // The producer fails after part of the entry has been written.
  auto failing = [&](std::span<std::byte> chunk) -> Result<std::size_t> {
    if (calls++ > 0) return Error(ErrorKind::IoError, "source went away");
    std::memset(chunk.data(), 'x', 10);
    return std::size_t{10};
  };
  EXPECT_TRUE(Fails(ex->add_stream("vae/partial.txt", 100, failing), ErrorKind::IoError));
  (void)ex->add_bytes("vae/config.json", bytes_of("{}"));
  EXPECT_TRUE(CommitsOnlyValidArchives(ex->finish(), out()));
}

TEST_F(ExporterFailure, RejectedStreamedModelIndex) {
  auto ex = dduf::Exporter::create(out().string());
  ASSERT_OK(ex);
  const std::string bad = "[1, ";
  std::size_t pos = 0;
  EXPECT_TRUE(Fails(ex->add_stream("model_index.json", bad.size(),
                                   [&](std::span<std::byte> chunk) -> Result<std::size_t> {
                                     std::size_t n = std::min(chunk.size(), bad.size() - pos);
                                     std::memcpy(chunk.data(), bad.data() + pos, n);
                                     pos += n;
                                     return n;
                                   }),
                    ErrorKind::DDUFExport, "Failed to parse 'model_index.json'."));
  // A corrected index afterwards: accepted or refused, but the rejected bytes must not be committed.
  (void)ex->add_bytes("model_index.json", bytes_of("{}"));
  EXPECT_TRUE(CommitsOnlyValidArchives(ex->finish(), out()));
}

TEST_F(ExporterFailure, RejectedModelIndexBytesThenAValidOne) {
  auto ex = dduf::Exporter::create(out().string());
  ASSERT_OK(ex);
  EXPECT_TRUE(Fails(ex->add_bytes("model_index.json", bytes_of("[1, ")), ErrorKind::DDUFExport));
  ASSERT_OK(ex->add_bytes("model_index.json", bytes_of("{}")));
  ASSERT_OK(ex->finish());
  EXPECT_TRUE(CommitsOnlyValidArchives(Status::ok(), out()));
}

TEST_F(ExporterFailure, ExistingTargetUntouched) {
  write_file(out(), "the previous file");
  {
    auto ex = dduf::Exporter::create(out().string());
    ASSERT_OK(ex);
    ASSERT_OK(ex->add_bytes("vae/config.json", bytes_of("{}")));
    EXPECT_TRUE(Fails(ex->finish(), ErrorKind::DDUFExport));
  }
  EXPECT_EQ(read_file(out()), "the previous file");
  EXPECT_EQ(list_all(tmp.path()), std::set<std::string>{"out.dduf"});
}

TEST_F(ExporterFailure, PackFolderChecksBeforeWriting) {
  // Every failure of pack_folder is found before the first byte: no output, no temporary.
  struct Case {
    std::map<std::string, std::string> files;
    ErrorKind kind;
    const char* text;
  };
  const std::vector<Case> cases = {
      {{{"vae/config.json", "{}"}}, ErrorKind::DDUFExport, "Missing required 'model_index.json'"},
      {{{"model_index.json", "{nope"}, {"vae/config.json", "{}"}}, ErrorKind::DDUFExport, "Failed to parse 'model_index.json'."},
      {{{"model_index.json", "{}"}, {"vae/config.json", "{}"}}, ErrorKind::DDUFExport, "Missing required entry 'vae'"},
      {{{"model_index.json", R"({"vae": 1})"}, {"vae/weights.safetensors", "x"}}, ErrorKind::DDUFExport, "Missing required file in folder 'vae'."},
      {{{"model_index.json", "[]"}}, ErrorKind::DDUFExport, "Must be a dictionary."},
      {{{"model_index.json", "{}"}, {"a\\b.json", "{}"}}, ErrorKind::DDUFInvalidEntryName, "UNIX separators"},
  };
  for (const auto& c : cases) {
    TempDir src;
    for (const auto& [name, content] : c.files) write_file(src / name, content);
    EXPECT_TRUE(Fails(dduf::pack_folder(src.path().string(), out().string()), c.kind, c.text)) << c.text;
    expect_clean();
  }
  EXPECT_TRUE(Fails(dduf::pack_folder((tmp / "no-such-folder").string(), out().string()), ErrorKind::FileNotFound));
  expect_clean();
}

// =====================================================================================================
// TestReadDDUFFile: the reader
// =====================================================================================================

TEST(Reader, PlainZipOffsetsAndLengths) {
  // The reference fixture: plain ZipFile.writestr (no ZIP64), entries model_index.json, model.safetensors,
  // hello.txt. Each entry's offset/length address the original bytes in the file.
  TempDir tmp;
  const std::vector<ZipItem> items = {
      {"model_index.json", R"({"foo": "bar"})"}, {"model.safetensors", "this is safetensors content"}, {"hello.txt", "hello world"}};
  BuiltZip z = build_zip(items, ZipStyle::Plain);
  write_file(tmp / "fixture.dduf", z.bytes);
  for (FileBackend backend : {FileBackend::Mmap, FileBackend::Pread}) {
    auto reader = dduf::Reader::open((tmp / "fixture.dduf").string(), backend);
    ASSERT_OK(reader);
    ASSERT_EQ(reader->entries().size(), 3u);
    EXPECT_FALSE(reader->archive().uses_zip64());
    for (std::size_t i = 0; i < items.size(); ++i) {
      const dduf::Entry& e = reader->entries()[i];
      EXPECT_EQ(e.filename, items[i].name);
      // The hub's _get_data_offset: header offset + 30 + name length + extra length (no extra here).
      EXPECT_EQ(e.offset, z.header_offsets[i] + 30 + items[i].name.size());
      EXPECT_EQ(e.offset, z.data_offsets[i]);
      EXPECT_EQ(e.length, items[i].data.size());
      EXPECT_EQ(z.bytes.substr(static_cast<std::size_t>(e.offset), static_cast<std::size_t>(e.length)), items[i].data);
      auto src = reader->open_entry(e.filename);
      ASSERT_OK(src);
      EXPECT_EQ(read_source(**src), items[i].data);
      EXPECT_EQ(reader->find(e.filename), &e);
    }
    EXPECT_EQ(reader->find("missing.txt"), nullptr);
    EXPECT_TRUE(Fails(reader->open_entry("missing.txt"), ErrorKind::InvalidArgument));
    EXPECT_EQ(reader->model_index(), R"({"foo": "bar"})");
    EXPECT_TRUE(reader->components().empty());
    EXPECT_OK(reader->verify({.crc = true, .contents = false}));
  }
}

TEST(Reader, HubLayoutOffsets) {
  // Data at local-header offset + 50 + name length; the first entry of a hub file is at 66.
  const std::vector<ZipItem> items = {{"model_index.json", R"({"vae": ["diffusers", "AutoencoderKL"]})"},
                                      {"vae/config.json", "{}"},
                                      {"vae/caf\xc3\xa9.txt", "non-ASCII name, UTF-8 flag"}};
  BuiltZip z = build_zip(items, ZipStyle::Hub);
  const auto raw = bytes_of(z.bytes);
  auto reader = dduf::Reader::open(safeweights::owned_memory_source(std::vector<std::byte>(raw.begin(), raw.end()), "mem.dduf"));
  ASSERT_OK(reader);
  ASSERT_EQ(reader->entries().size(), 3u);
  EXPECT_EQ(reader->entries()[0].offset, 66u);
  for (std::size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ(reader->entries()[i].offset, z.header_offsets[i] + 50 + items[i].name.size());
    EXPECT_EQ(reader->entries()[i].length, items[i].data.size());
  }
  EXPECT_EQ(reader->components(), std::vector<std::string>{"vae"});
  EXPECT_OK(reader->verify());
}

// CPython writes ZIP64 end records only for more than 65535 entries: with exactly 65535 the classic
// count is 0xFFFF and there is no ZIP64 record (dduf.md §2.7). CPython, Info-ZIP and the hub read it.
TEST(Reader, Exactly65535EntriesAsCPythonWritesThem) {
  std::vector<ZipItem> items = {{"model_index.json", "{}"}};
  char name[32];
  for (int i = 1; i < 65535; ++i) {
    std::snprintf(name, sizeof name, "f%05d.txt", i);
    items.push_back({name, ""});
  }
  BuiltZip z = build_zip(items, ZipStyle::Plain);
  ASSERT_EQ(get(z.bytes, z.bytes.size() - 22 + 10, 2), 0xFFFFu);
  const auto raw = bytes_of(z.bytes);
  auto reader = dduf::Reader::open(safeweights::owned_memory_source(std::vector<std::byte>(raw.begin(), raw.end()), "65535.dduf"));
  ASSERT_OK(reader);
  EXPECT_EQ(reader->entries().size(), 65535u);
  EXPECT_FALSE(reader->archive().uses_zip64());
}

TEST(Exporter, RoundTripOf65535And65536Entries) {
  TempDir tmp;
  for (int count : {65535, 65536}) {
    const fs::path out = tmp.path() / std::to_string(count) / "entries.dduf";
    fs::create_directories(out.parent_path());
    {
      auto ex = dduf::Exporter::create(out.string());
      ASSERT_OK(ex);
      ASSERT_OK(ex->add_bytes("model_index.json", bytes_of("{}")));
      char name[32];
      for (int i = 1; i < count; ++i) {
        std::snprintf(name, sizeof name, "f%05d.txt", i);
        ASSERT_OK(ex->add_bytes(name, {}));
      }
      ASSERT_OK(ex->finish());
    }
    auto reader = dduf::Reader::open(out.string());
    ASSERT_TRUE(reader.is_ok()) << describe(reader) << " (" << count << " entries)";
    EXPECT_EQ(reader->entries().size(), static_cast<std::size_t>(count));
    EXPECT_EQ(reader->archive().uses_zip64(), count > 65535);
  }
}

TEST(Reader, ModelIndexRequired) {
  TempDir tmp;
  write_file(tmp / "a.dduf", build_zip({{"model.safetensors", "content"}}, ZipStyle::Plain).bytes);
  EXPECT_TRUE(Fails(dduf::Reader::open((tmp / "a.dduf").string()), ErrorKind::DDUFCorruptedFile, "Missing required 'model_index.json' entry"));
}

TEST(Reader, ReferenceErrorOrder) {
  // Per entry in central-directory order: compression, then names; then model_index.json; then folders.
  TempDir tmp;
  write_file(tmp / "a.dduf", build_zip({{"vae/config.json", "{}"}, {"bad.bin", "x"}}, ZipStyle::Hub).bytes);
  EXPECT_TRUE(Fails(dduf::Reader::open((tmp / "a.dduf").string()), ErrorKind::DDUFInvalidEntryName, "Invalid entry name in DDUF file: bad.bin"));
  write_file(tmp / "b.dduf", build_zip({{"model_index.json", "[]"}, {"vae/x.json", "{}"}}, ZipStyle::Hub).bytes);
  EXPECT_TRUE(Fails(dduf::Reader::open((tmp / "b.dduf").string()), ErrorKind::DDUFCorruptedFile, "Must be a dictionary."));
  // Our stricter rules come only after the reference's: `..` with a ".." key and a config file.
  write_file(tmp / "c.dduf", build_zip({{"model_index.json", R"({"..": 1})"}, {"../config.json", "{}"}}, ZipStyle::Hub).bytes);
  EXPECT_TRUE(Fails(dduf::Reader::open((tmp / "c.dduf").string()), ErrorKind::DDUFInvalidEntryName));
  write_file(tmp / "d.dduf", build_zip({{"model_index.json", R"({})"}, {"../config.json", "{}"}}, ZipStyle::Hub).bytes);
  EXPECT_TRUE(Fails(dduf::Reader::open((tmp / "d.dduf").string()), ErrorKind::DDUFCorruptedFile, "Missing required entry '..'"));
}

TEST(Reader, ErrorsNameTheFile) {
  TempDir tmp;
  const fs::path p = tmp / "named.dduf";
  write_file(p, build_zip({{"model_index.json", "{}"}, {"vae/model.gguf", "GGUF"}}, ZipStyle::Hub).bytes);
  auto r = dduf::Reader::open(p.string());
  ASSERT_TRUE(Fails(r, ErrorKind::DDUFInvalidEntryName));
  EXPECT_EQ(r.error().context().file, p.string());
  EXPECT_EQ(r.error().context().entry, "vae/model.gguf");
  EXPECT_TRUE(Fails(dduf::Reader::open((tmp / "absent.dduf").string()), ErrorKind::FileNotFound));
}

// =====================================================================================================
// Round trips: pack_folder -> Reader -> unpack
// =====================================================================================================

class PackFolder : public ::testing::Test {
 protected:
  void SetUp() override { pipeline = make_pipeline(tmp / "src"); }
  fs::path src() const { return tmp / "src"; }
  Result<dduf::Reader> pack(const std::string& name, const dduf::PackOptions& options = {}) {
    Status s = dduf::pack_folder(src().string(), (tmp / name).string(), options);
    if (!s.is_ok()) return s;
    return dduf::Reader::open((tmp / name).string());
  }
  TempDir tmp;
  Pipeline pipeline;
};

// TestExportFolder::test_export_folder, plus the model_index.json that a real export needs.
TEST(PackFolderSelection, ReferenceFixture) {
  TempDir tmp;
  const fs::path src = tmp / "folder";
  for (const char* name : {"config.json", "model.safetensors", "model.bin", "encoder/config.json", "encoder/model.safetensors", "encoder/model.bin",
                           "encoder/subdir/config.json"}) {
    write_file(src / name, std::string("content of ") + name);
  }
  write_file(src / "model_index.json", R"({"encoder": ["transformers", "T5EncoderModel"]})");
  dduf::PackOptions options;
  options.reference_layout = true;
  ASSERT_OK(dduf::pack_folder(src.string(), (tmp / "dummy.dduf").string(), options));
  auto reader = dduf::Reader::open((tmp / "dummy.dduf").string());
  ASSERT_OK(reader);
  std::vector<std::string> names;
  for (const auto& e : reader->entries()) names.push_back(e.filename);
  EXPECT_EQ(names,
            (std::vector<std::string>{"model_index.json", "config.json", "encoder/config.json", "encoder/model.safetensors", "model.safetensors"}));
}

TEST_F(PackFolder, EntriesContentsAndOrder) {
  auto reader = pack("out.dduf");
  ASSERT_OK(reader);
  std::vector<std::string> names;
  for (const auto& e : reader->entries()) names.push_back(e.filename);
  EXPECT_EQ(names, expected_order(pipeline));
  for (const std::string& skipped : pipeline.skipped) EXPECT_EQ(reader->find(skipped), nullptr) << skipped;
  const std::string raw = read_file(tmp / "out.dduf");
  for (const auto& e : reader->entries()) {
    EXPECT_EQ(raw.substr(static_cast<std::size_t>(e.offset), static_cast<std::size_t>(e.length)), pipeline.packed[e.filename]) << e.filename;
  }
  for (const auto& e : reader->archive().entries()) {
    EXPECT_EQ(e.method, 0) << e.name;
    EXPECT_EQ(e.crc32, ref_crc32(pipeline.packed[std::string(e.name)])) << e.name;
  }
  EXPECT_EQ(reader->components(), (std::vector<std::string>{"scheduler", "text_encoder", "tokenizer", "vae"}));
  EXPECT_FALSE(reader->archive().uses_zip64());
  EXPECT_OK(reader->verify());
  EXPECT_OK(reader->verify({.crc = true, .contents = true, .threads = 1}));
}

// Data offsets from the local headers of the file itself (the hub reader's computation).
std::map<std::string, std::uint64_t> hub_offsets(const std::string& raw, const zip::Archive& archive) {
  std::map<std::string, std::uint64_t> out;
  for (const auto& e : archive.entries()) {
    std::size_t h = static_cast<std::size_t>(e.header_offset);
    EXPECT_EQ(get(raw, h, 4), 0x04034b50u);
    out[std::string(e.name)] = e.header_offset + 30 + get(raw, h + 26, 2) + get(raw, h + 28, 2);
  }
  return out;
}

TEST_F(PackFolder, SafetensorsAlignedOn4096ByDefault) {
  auto reader = pack("out.dduf");
  ASSERT_OK(reader);
  const std::string raw = read_file(tmp / "out.dduf");
  auto offsets = hub_offsets(raw, reader->archive());
  int aligned = 0;
  for (const auto& e : reader->entries()) {
    EXPECT_EQ(offsets[e.filename], e.offset) << e.filename;
    if (ends_with(e.filename, ".safetensors")) {
      EXPECT_EQ(e.offset % 4096, 0u) << e.filename;
      ++aligned;
    } else {
      // Only .safetensors entries get padding: others sit right after a hub-style local header.
      const zip::Entry* z = reader->archive().find(e.filename);
      EXPECT_EQ(e.offset, z->header_offset + 50 + e.filename.size()) << e.filename;
    }
  }
  EXPECT_EQ(aligned, 2);
}

TEST_F(PackFolder, CustomAlignment) {
  for (std::uint32_t n : {64u, 32768u}) {
    dduf::PackOptions options;
    options.alignment = n;
    auto reader = pack("out" + std::to_string(n) + ".dduf", options);
    ASSERT_OK(reader);
    for (const auto& e : reader->entries()) {
      if (ends_with(e.filename, ".safetensors")) {
        EXPECT_EQ(e.offset % n, 0u) << e.filename << " alignment " << n;
      }
    }
    EXPECT_OK(reader->verify());
  }
  dduf::PackOptions bad;
  bad.alignment = 3;
  EXPECT_FALSE(dduf::pack_folder(src().string(), (tmp / "bad.dduf").string(), bad).is_ok());
  EXPECT_FALSE(fs::exists(tmp / "bad.dduf"));
}

TEST_F(PackFolder, ReferenceLayoutIsTheHubExportersBytes) {
  dduf::PackOptions options;
  options.reference_layout = true;
  auto reader = pack("ref.dduf", options);
  ASSERT_OK(reader);
  bool some_unaligned = false;
  for (const auto& e : reader->entries()) {
    const zip::Entry* z = reader->archive().find(e.filename);
    EXPECT_EQ(e.offset, z->header_offset + 50 + e.filename.size()) << e.filename;
    if (ends_with(e.filename, ".safetensors") && e.offset % 4096 != 0) some_unaligned = true;
  }
  EXPECT_TRUE(some_unaligned);
  // Byte for byte what CPython's zipfile (force_zip64=True) writes for the same entries in this order.
  std::vector<ZipItem> items;
  for (const std::string& name : expected_order(pipeline)) items.push_back({name, pipeline.packed[name]});
  const std::string expected = build_zip(items, ZipStyle::Hub).bytes;
  EXPECT_TRUE(read_file(tmp / "ref.dduf") == expected) << "reference layout differs from the hub exporter's bytes";
  // Without alignment the layout is the same.
  dduf::PackOptions none;
  none.alignment = 0;
  ASSERT_OK(pack("none.dduf", none));
  EXPECT_TRUE(read_file(tmp / "none.dduf") == expected);
}

TEST_F(PackFolder, OpenSafetensorsIsZeroCopy) {
  auto reader = pack("out.dduf");
  ASSERT_OK(reader);
  const std::byte* base = reader->archive().source()->mapped();
  ASSERT_NE(base, nullptr);
  const std::uint64_t size = reader->archive().source()->size();
  auto expected = st::Reader::open((src() / "vae/diffusion_pytorch_model.safetensors").string(), FileBackend::Pread);
  ASSERT_OK(expected);
  const dduf::Entry* entry = reader->find("vae/diffusion_pytorch_model.safetensors");
  ASSERT_NE(entry, nullptr);
  auto st_reader = reader->open_safetensors(entry->filename);
  ASSERT_OK(st_reader);
  ASSERT_EQ(st_reader->header().tensors().size(), 3u);
  for (const auto& info : st_reader->header().tensors()) {
    auto t = st_reader->tensor(info.name);
    ASSERT_OK(t);
    const auto view = (*t)->view();
    const std::byte* p = view.data();
    ASSERT_NE(p, nullptr);
    // Inside the archive's one mapping, exactly where the entry's tensor lies: no copy.
    EXPECT_GE(p, base);
    EXPECT_LE(p + view.size(), base + size);
    EXPECT_EQ(static_cast<std::uint64_t>(p - base), entry->offset + (*t)->offset) << info.name;
    auto want = expected->tensor(info.name).value()->read_owned();
    ASSERT_OK(want);
    ASSERT_EQ(view.size(), want->size());
    EXPECT_TRUE(std::equal(view.begin(), view.end(), want->begin())) << info.name;
  }
  EXPECT_EQ(st_reader->header().metadata_value("format"), std::optional<std::string_view>("pt"));
  // Through pread, the same tensors, read on demand.
  auto pread = dduf::Reader::open((tmp / "out.dduf").string(), FileBackend::Pread);
  ASSERT_OK(pread);
  EXPECT_EQ(pread->archive().source()->mapped(), nullptr);
  auto st_pread = pread->open_safetensors("text_encoder/model.safetensors");
  ASSERT_OK(st_pread);
  auto bytes = st_pread->tensor("embeddings.weight").value()->read_owned();
  ASSERT_OK(bytes);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size()), tensor_bytes(160, 4));
  // Non-safetensors and missing entries.
  EXPECT_FALSE(reader->open_safetensors("vae/config.json").is_ok());
  EXPECT_TRUE(Fails(reader->open_safetensors("vae/absent.safetensors"), ErrorKind::InvalidArgument));
}

TEST_F(PackFolder, CorruptDataByteIsACrcMismatchNamingTheEntry) {
  ASSERT_OK(pack("out.dduf"));
  const std::string raw = read_file(tmp / "out.dduf");
  for (const char* name : {"vae/config.json", "text_encoder/model.safetensors", "tokenizer/merges.txt"}) {
    auto good = dduf::Reader::open((tmp / "out.dduf").string());
    ASSERT_OK(good);
    const dduf::Entry* e = good->find(name);
    ASSERT_NE(e, nullptr);
    std::string bad = raw;
    // The last byte of the entry: tensor data for the safetensors entry, so only the CRC can tell.
    bad[static_cast<std::size_t>(e->offset + e->length - 1)] ^= 0x01;
    const fs::path p = tmp / "corrupt.dduf";
    write_file(p, bad);
    for (FileBackend backend : {FileBackend::Mmap, FileBackend::Pread}) {
      auto reader = dduf::Reader::open(p.string(), backend);
      ASSERT_OK(reader);  // opening does not read entry data
      Status s = reader->verify();
      ASSERT_TRUE(Fails(s, ErrorKind::CrcMismatch)) << name;
      EXPECT_EQ(s.error().context().entry, name);
      EXPECT_EQ(s.error().context().file, p.string());
      const zip::Entry* z = reader->archive().find(name);
      EXPECT_TRUE(Fails(reader->archive().verify_crc(*z), ErrorKind::CrcMismatch));
      EXPECT_OK(reader->archive().verify_crc(*reader->archive().find("model_index.json")));
    }
  }
}

TEST_F(PackFolder, CorruptSafetensorsHeaderNamesTheEntry) {
  ASSERT_OK(pack("out.dduf"));
  std::string raw = read_file(tmp / "out.dduf");
  const std::string name = "vae/diffusion_pytorch_model.safetensors";
  std::uint64_t offset = 0, length = 0;
  {
    auto reader = dduf::Reader::open((tmp / "out.dduf").string());
    ASSERT_OK(reader);
    offset = reader->find(name)->offset;
    length = reader->find(name)->length;
  }
  // The u64 header length now runs past the entry (but stays under the 100 MB cap).
  const std::uint64_t n = 50'000'000;
  for (int i = 0; i < 8; ++i) raw[static_cast<std::size_t>(offset) + static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  const fs::path p = tmp / "bad_header.dduf";
  write_file(p, raw);
  {
    auto reader = dduf::Reader::open(p.string());
    ASSERT_OK(reader);
    // The CRC check runs first and sees the change.
    EXPECT_TRUE(Fails(reader->verify(), ErrorKind::CrcMismatch));
    // Contents only: the safetensors rule, with the entry named.
    Status s = reader->verify({.crc = false, .contents = true});
    ASSERT_TRUE(Fails(s, ErrorKind::InvalidHeaderLength));
    EXPECT_EQ(s.error().context().entry, name);
    EXPECT_EQ(s.error().context().file, p.string());
    EXPECT_TRUE(Fails(reader->open_safetensors(name), ErrorKind::InvalidHeaderLength));
  }
  // With the CRC fixed up, verify() itself reports the safetensors kind.
  patch_crc(raw, name, ref_crc32(std::string_view(raw).substr(static_cast<std::size_t>(offset), static_cast<std::size_t>(length))));
  write_file(p, raw);
  auto reader = dduf::Reader::open(p.string());
  ASSERT_OK(reader);
  Status s = reader->verify();
  ASSERT_TRUE(Fails(s, ErrorKind::InvalidHeaderLength));
  EXPECT_EQ(s.error().context().entry, name);
}

TEST_F(PackFolder, InvalidJsonEntryFailsVerify) {
  write_file(src() / "text_encoder/config.json", R"({"hidden_size": 32,})");  // trailing comma
  auto reader = pack("out.dduf");
  ASSERT_OK(reader);  // packing and opening do not parse component configs
  Status s = reader->verify();
  ASSERT_TRUE(Fails(s, ErrorKind::DDUFCorruptedFile));
  EXPECT_EQ(s.error().context().entry, "text_encoder/config.json");
  EXPECT_OK(reader->verify({.crc = true, .contents = false}));
}

TEST_F(PackFolder, UnpackReproducesTheFolder) {
  auto reader = pack("out.dduf");
  ASSERT_OK(reader);
  const fs::path dst = tmp / "unpacked";
  ASSERT_OK(dduf::unpack(*reader, dst.string()));
  std::set<std::string> expected;
  for (const auto& [name, _] : pipeline.packed) expected.insert(name);
  EXPECT_EQ(list_files(dst), expected);
  for (const auto& [name, content] : pipeline.packed) {
    EXPECT_TRUE(read_file(dst / name) == content) << name;
    EXPECT_TRUE(read_file(dst / name) == read_file(src() / name)) << name;
  }
  // Unpacking again over the existing folder is refused; with `replace` the folder is replaced as a
  // whole: changed files come back, files the archive does not hold are gone.
  write_file(dst / "vae/config.json", "stale");
  write_file(dst / "vae/stale.bin", "not in the archive");
  EXPECT_TRUE(Fails(dduf::unpack(*reader, dst.string(), 1), ErrorKind::InvalidArgument, "not empty"));
  EXPECT_EQ(read_file(dst / "vae/config.json"), "stale");
  ASSERT_OK(dduf::unpack(*reader, dst.string(), 1, /*replace=*/true));
  EXPECT_EQ(read_file(dst / "vae/config.json"), pipeline.packed["vae/config.json"]);
  EXPECT_EQ(list_files(dst), expected);
  EXPECT_TRUE(hidden_names(tmp.path()).empty()) << "no staging folder or temporary remains";
  // Packing the unpacked folder gives the same archive.
  ASSERT_OK(dduf::pack_folder(dst.string(), (tmp / "again.dduf").string()));
  EXPECT_TRUE(read_file(tmp / "again.dduf") == read_file(tmp / "out.dduf"));
}

TEST_F(PackFolder, Deterministic) {
  for (bool reference : {false, true}) {
    dduf::PackOptions options;
    options.reference_layout = reference;
    ASSERT_OK(pack("a.dduf", options));
    ASSERT_OK(pack("b.dduf", options));
    EXPECT_TRUE(read_file(tmp / "a.dduf") == read_file(tmp / "b.dduf")) << "reference_layout=" << reference;
    // The same content created in another order (another directory order) packs identically.
    TempDir other;
    make_pipeline(other.path(), /*reverse=*/true);
    ASSERT_OK(dduf::pack_folder(other.path().string(), (tmp / "c.dduf").string(), options));
    EXPECT_TRUE(read_file(tmp / "a.dduf") == read_file(tmp / "c.dduf")) << "reference_layout=" << reference;
  }
}

TEST_F(PackFolder, ProgressReachesTheTotal) {
  std::uint64_t last_done = 0, last_total = 0;
  bool monotonic = true;
  dduf::PackOptions options;
  options.progress = [&](std::uint64_t done, std::uint64_t total) {
    monotonic = monotonic && done >= last_done;
    last_done = done;
    last_total = total;
  };
  ASSERT_OK(pack("out.dduf", options));
  std::uint64_t total = 0;
  for (const auto& [_, content] : pipeline.packed) total += content.size();
  EXPECT_TRUE(monotonic);
  EXPECT_EQ(last_done, total);
  EXPECT_EQ(last_total, total);
}

// =====================================================================================================
// ZIP64: a sparse archive larger than 4 GiB
// =====================================================================================================

// SAFEWEIGHTS_DDUF_LARGE_TESTS=1 adds the slow checks; =0 also skips the 2.2 GB writer test.
std::string large_tests_setting() {
  const char* v = std::getenv("SAFEWEIGHTS_DDUF_LARGE_TESTS");
  return v ? v : "";
}
bool large_tests_enabled() { return large_tests_setting() == "1"; }

TEST(Zip64, SparseArchiveLargerThan4GiB) {
  TempDir tmp;
  const fs::path path = tmp / "big.dduf";
  const std::string index = R"({"vae": ["diffusers", "AutoencoderKL"]})";
  const std::string config = R"({"latent_channels": 4})";
  const std::string big_name = "blob.txt";
  const std::uint64_t big_size = 4'400'000'000ull;  // > 4 GiB: needs the ZIP64 sizes everywhere
  const std::uint32_t big_crc = crc32_of_zeros(big_size);

  auto local = [](std::string& z, const std::string& name, std::uint64_t size, std::uint32_t crc) {
    put(z, 0x04034b50, 4);
    put(z, 45, 2);
    put(z, 0, 2);
    put(z, 0, 2);
    put(z, 0, 2);
    put(z, 0x21, 2);
    put(z, crc, 4);
    put(z, 0xFFFFFFFF, 4);
    put(z, 0xFFFFFFFF, 4);
    put(z, name.size(), 2);
    put(z, 20, 2);
    z += name;
    put(z, 1, 2);
    put(z, 16, 2);
    put(z, size, 8);
    put(z, size, 8);
  };
  // Entry 0 and the header of entry 1.
  std::string head;
  local(head, "model_index.json", index.size(), ref_crc32(index));
  head += index;
  const std::uint64_t big_header = head.size();
  local(head, big_name, big_size, big_crc);
  const std::uint64_t big_data = head.size();
  // Entry 2 after the hole, then the central directory and the ZIP64 end records.
  const std::uint64_t cfg_header = big_data + big_size;
  std::string tail;
  local(tail, "vae/config.json", config.size(), ref_crc32(config));
  const std::uint64_t cfg_data = cfg_header + tail.size();
  tail += config;
  const std::uint64_t cd_offset = cfg_header + tail.size();
  std::string cd;
  auto central = [&](const std::string& name, std::uint64_t size, std::uint32_t crc, std::uint64_t offset) {
    const bool big = size > 0x7FFFFFFF, far = offset > 0x7FFFFFFF;
    std::string extra;
    if (big || far) {
      put(extra, 1, 2);
      put(extra, (big ? 16 : 0) + (far ? 8 : 0), 2);
      if (big) {
        put(extra, size, 8);
        put(extra, size, 8);
      }
      if (far) put(extra, offset, 8);
    }
    put(cd, 0x02014b50, 4);
    put(cd, 0x032D, 2);
    put(cd, 45, 2);
    put(cd, 0, 2);
    put(cd, 0, 2);
    put(cd, 0, 2);
    put(cd, 0x21, 2);
    put(cd, crc, 4);
    put(cd, big ? 0xFFFFFFFF : size, 4);
    put(cd, big ? 0xFFFFFFFF : size, 4);
    put(cd, name.size(), 2);
    put(cd, extra.size(), 2);
    put(cd, 0, 2);
    put(cd, 0, 2);
    put(cd, 0, 2);
    put(cd, 0600u << 16, 4);
    put(cd, far ? 0xFFFFFFFF : offset, 4);
    cd += name;
    cd += extra;
  };
  central("model_index.json", index.size(), ref_crc32(index), 0);
  central(big_name, big_size, big_crc, big_header);
  central("vae/config.json", config.size(), ref_crc32(config), cfg_header);
  tail += cd;
  const std::uint64_t z_pos = cd_offset + cd.size();
  put(tail, 0x06064b50, 4);
  put(tail, 44, 8);
  put(tail, 45, 2);
  put(tail, 45, 2);
  put(tail, 0, 4);
  put(tail, 0, 4);
  put(tail, 3, 8);
  put(tail, 3, 8);
  put(tail, cd.size(), 8);
  put(tail, cd_offset, 8);
  put(tail, 0x07064b50, 4);
  put(tail, 0, 4);
  put(tail, z_pos, 8);
  put(tail, 1, 4);
  put(tail, 0x06054b50, 4);
  put(tail, 0, 2);
  put(tail, 0, 2);
  put(tail, 3, 2);
  put(tail, 3, 2);
  put(tail, cd.size(), 4);
  put(tail, 0xFFFFFFFF, 4);  // the offset does not fit: saturated, as CPython writes min(value, 0xFFFFFFFF)
  put(tail, 0, 2);

  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  const ssize_t wrote = ::pwrite(fd, tail.data(), tail.size(), static_cast<off_t>(cfg_header));
  ::close(fd);
  if (wrote != static_cast<ssize_t>(tail.size())) GTEST_SKIP() << "filesystem cannot hold a sparse 4.4 GB file";
  ASSERT_EQ(fs::file_size(path), cd_offset + cd.size() + 56 + 20 + 22);

  for (FileBackend backend : {FileBackend::Mmap, FileBackend::Pread}) {
    auto reader = dduf::Reader::open(path.string(), backend);
    ASSERT_OK(reader);
    const zip::Archive& archive = reader->archive();
    EXPECT_TRUE(archive.uses_zip64());
    ASSERT_EQ(archive.entries().size(), 3u);
    const zip::Entry& big = archive.entries()[1];
    EXPECT_EQ(big.name, big_name);
    EXPECT_EQ(big.header_offset, big_header);
    EXPECT_EQ(big.data_offset, big_data);
    EXPECT_EQ(big.size, big_size);
    EXPECT_EQ(big.compressed_size, big_size);
    EXPECT_EQ(big.crc32, big_crc);
    const zip::Entry& cfg = archive.entries()[2];
    EXPECT_EQ(cfg.header_offset, cfg_header);
    EXPECT_EQ(cfg.data_offset, cfg_data);
    EXPECT_GT(cfg.data_offset, 0xFFFFFFFFull);
    const dduf::Entry* e = reader->find("vae/config.json");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->offset, cfg_data);
    EXPECT_EQ(e->length, config.size());
    auto src = reader->open_entry("vae/config.json");
    ASSERT_OK(src);
    EXPECT_EQ(read_source(**src), config);
    EXPECT_EQ(reader->find(big_name)->length, big_size);
    EXPECT_EQ(reader->components(), std::vector<std::string>{"vae"});
    EXPECT_OK(archive.verify_crc(cfg));
    EXPECT_OK(reader->verify({.crc = false, .contents = true}));
  }
  // The CRC over the 4.4 GB hole against the independent value. The first read of a hole makes the
  // kernel fill the page cache with zeroed pages (about 15 s on a small VM), so only on request.
  if (!large_tests_enabled()) return;
  auto reader = dduf::Reader::open(path.string());
  ASSERT_OK(reader);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_OK(reader->archive().verify_crc(reader->archive().entries()[1]));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("crc_seconds", std::to_string(seconds));
}

// The writer's ZIP64 paths (CPython's thresholds: sizes and offsets above 2^31 - 1) need more than
// 2 GiB of real data on disk (about 3 s); skipped where the temporary folder has less than 8 GiB free.
TEST(Zip64, WriterPastTheCPythonThreshold) {
  if (large_tests_setting() == "0") GTEST_SKIP() << "SAFEWEIGHTS_DDUF_LARGE_TESTS=0";
  TempDir tmp;
  struct statvfs vfs {};
  if (::statvfs(tmp.path().c_str(), &vfs) != 0 || static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize < (8ull << 30)) {
    GTEST_SKIP() << "less than 8 GiB free in " << tmp.path();
  }
  const fs::path path = tmp / "big.dduf";
  const std::uint64_t big_size = (1ull << 31) + 10;  // > 0x7FFFFFFF
  {
    auto ex = dduf::Exporter::create(path.string());
    ASSERT_OK(ex);
    ASSERT_OK(ex->add_bytes("model_index.json", bytes_of(R"({"vae": []})")));
    ASSERT_OK(ex->add_bytes("vae/config.json", bytes_of("{}")));
    ASSERT_OK(ex->add_stream("vae/big.txt", big_size, [](std::span<std::byte> chunk) -> Result<std::size_t> {
      std::memset(chunk.data(), 0, chunk.size());
      return chunk.size();
    }));
    ASSERT_OK(ex->add_bytes("vae/after.txt", bytes_of("after the big one")));
    ASSERT_OK(ex->finish());
  }
  // Independent parse of the end records and the central directory.
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  const std::uint64_t size = fs::file_size(path);
  std::string end(4096, '\0');
  const std::uint64_t end_at = size - end.size();
  ASSERT_EQ(::pread(fd, end.data(), end.size(), static_cast<off_t>(end_at)), static_cast<ssize_t>(end.size()));
  ::close(fd);
  const std::size_t eocd = end.size() - 22;
  ASSERT_EQ(get(end, eocd, 4), 0x06054b50u);
  ASSERT_EQ(get(end, eocd - 20, 4), 0x07064b50u);  // the locator right before the classic record
  const std::size_t z = eocd - 20 - 56;
  ASSERT_EQ(get(end, z, 4), 0x06064b50u);  // the ZIP64 end record right before the locator
  EXPECT_EQ(get(end, eocd - 20 + 8, 8), end_at + z);
  EXPECT_EQ(get(end, z + 4, 8), 44u);
  EXPECT_EQ(get(end, z + 32, 8), 4u);
  const std::uint64_t cd_size = get(end, z + 40, 8), cd_offset = get(end, z + 48, 8);
  EXPECT_GT(cd_offset, 0x7FFFFFFFu);
  // Classic fields hold min(value, saturated): the real offset, which still fits in 32 bits.
  EXPECT_EQ(get(end, eocd + 10, 2), 4u);
  EXPECT_EQ(get(end, eocd + 12, 4), cd_size);
  EXPECT_EQ(get(end, eocd + 16, 4), cd_offset);
  ASSERT_EQ(cd_offset + cd_size, end_at + z);
  std::string_view cd = std::string_view(end).substr(static_cast<std::size_t>(cd_offset - end_at), static_cast<std::size_t>(cd_size));
  std::map<std::string, std::string> extras;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> fields;  // (32-bit size, 32-bit offset)
  for (std::size_t pos = 0; pos < cd.size();) {
    ASSERT_EQ(get(cd, pos, 4), 0x02014b50u);
    std::size_t n = get(cd, pos + 28, 2), m = get(cd, pos + 30, 2);
    std::string name(cd.substr(pos + 46, n));
    extras[name] = std::string(cd.substr(pos + 46 + n, m));
    fields[name] = {get(cd, pos + 24, 4), get(cd, pos + 42, 4)};
    pos += 46 + n + m + get(cd, pos + 32, 2);
  }
  EXPECT_EQ(extras["model_index.json"], "");
  EXPECT_EQ(extras["vae/config.json"], "");
  std::string big_extra;
  put(big_extra, 1, 2);
  put(big_extra, 16, 2);
  put(big_extra, big_size, 8);
  put(big_extra, big_size, 8);
  EXPECT_EQ(extras["vae/big.txt"], big_extra);
  EXPECT_EQ(fields["vae/big.txt"].first, 0xFFFFFFFFu);
  ASSERT_EQ(extras["vae/after.txt"].size(), 12u);  // only the 8-byte offset
  EXPECT_EQ(get(extras["vae/after.txt"], 0, 2), 1u);
  EXPECT_EQ(get(extras["vae/after.txt"], 2, 2), 8u);
  EXPECT_EQ(fields["vae/after.txt"].second, 0xFFFFFFFFu);

  auto reader = dduf::Reader::open(path.string());
  ASSERT_OK(reader);
  EXPECT_TRUE(reader->archive().uses_zip64());
  EXPECT_EQ(reader->find("vae/big.txt")->length, big_size);
  EXPECT_EQ(get(extras["vae/after.txt"], 4, 8), reader->archive().find("vae/after.txt")->header_offset);
  auto after = reader->open_entry("vae/after.txt");
  ASSERT_OK(after);
  EXPECT_EQ(read_source(**after), "after the big one");
  EXPECT_EQ(reader->archive().find("vae/big.txt")->crc32, crc32_of_zeros(big_size));
  EXPECT_OK(reader->verify());
}

TEST(Zip64, TruncatedLargeArchiveIsRejected) {
  // A ZIP64 entry whose size runs past the end of the file.
  TempDir tmp;
  std::string z;
  const std::string index = "{}";
  std::vector<ZipItem> items = {{"model_index.json", index}};
  BuiltZip built = build_zip(items, ZipStyle::Hub);
  // Rewrite entry 0's sizes as 5 GB in both headers (local ZIP64 block, central ZIP64 block).
  z = built.bytes.substr(0, 30 + 16);
  put(z, 1, 2);
  put(z, 16, 2);
  put(z, 5'000'000'000ull, 8);
  put(z, 5'000'000'000ull, 8);
  z += index;
  const std::uint64_t cd_offset = z.size();
  put(z, 0x02014b50, 4);
  put(z, 0x032D, 2);
  put(z, 45, 2);
  put(z, 0, 2);
  put(z, 0, 2);
  put(z, 0, 2);
  put(z, 0x21, 2);
  put(z, ref_crc32(index), 4);
  put(z, 0xFFFFFFFF, 4);
  put(z, 0xFFFFFFFF, 4);
  put(z, 16, 2);
  put(z, 20, 2);
  put(z, 0, 2);
  put(z, 0, 2);
  put(z, 0, 2);
  put(z, 0600u << 16, 4);
  put(z, 0, 4);
  z += "model_index.json";
  put(z, 1, 2);
  put(z, 16, 2);
  put(z, 5'000'000'000ull, 8);
  put(z, 5'000'000'000ull, 8);
  const std::uint64_t cd_size = z.size() - cd_offset;
  put(z, 0x06054b50, 4);
  put(z, 0, 2);
  put(z, 0, 2);
  put(z, 1, 2);
  put(z, 1, 2);
  put(z, cd_size, 4);
  put(z, cd_offset, 4);
  put(z, 0, 2);
  write_file(tmp / "t.dduf", z);
  EXPECT_TRUE(Fails(dduf::Reader::open((tmp / "t.dduf").string()), ErrorKind::BadZipFile));
}

// =====================================================================================================
// ---------------------------------------------------------------------------------------------------
// Unpacking: all or nothing, CRCs checked, nothing written outside the folder, nothing left behind

constexpr std::size_t kBigEntry = 12u << 20;

// An archive with a root index, a component `vae` and `vae/big.txt` of kBigEntry bytes.
void write_archive(const fs::path& path) {
  auto ex = dduf::Exporter::create(path.string());
  ASSERT_OK(ex);
  ASSERT_OK(ex->add_bytes("model_index.json", bytes_of(R"({"vae": ["diffusers", "AutoencoderKL"]})")));
  ASSERT_OK(ex->add_bytes("vae/config.json", bytes_of("{}")));
  const std::string big = tensor_bytes(kBigEntry, 7);
  ASSERT_OK(ex->add_bytes("vae/big.txt", bytes_of(big)));
  ASSERT_OK(ex->finish());
}

// A file source that stops for good at the first read reaching past `stall_at`, after telling the test
// (one byte on `ready`): a signal then arrives at a known moment, in the middle of an entry.
class StallingSource final : public safeweights::ByteSource {
 public:
  StallingSource(safeweights::SourcePtr inner, std::uint64_t stall_at, int ready) : inner_(std::move(inner)), stall_at_(stall_at), ready_(ready) {}
  const std::string& name() const noexcept override { return inner_->name(); }
  std::uint64_t size() const noexcept override { return inner_->size(); }
  Status read_at(std::uint64_t offset, std::span<std::byte> dst) const override {
    if (offset + dst.size() > stall_at_) {
      if (::write(ready_, "r", 1) != 1) std::_Exit(5);
      for (;;) ::pause();
    }
    return inner_->read_at(offset, dst);
  }

 private:
  safeweights::SourcePtr inner_;
  std::uint64_t stall_at_;
  int ready_;
};

// Runs `unpack` of `archive` into `out` in a child process, sends `sig` once the child is 8 MiB into the
// big entry, and waits (bounded) for it to die of it.
void unpack_killed_by(int sig, bool named, const fs::path& archive, const fs::path& out) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  std::fflush(nullptr);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(ready[0]);
    if (named) ::setenv("SAFEWEIGHTS_NAMED_TEMPFILES", "1", 1);
    safeweights::install_cleanup_signal_handlers();
    auto file = safeweights::open_file(archive.string(), FileBackend::Pread);
    if (!file.is_ok()) std::_Exit(3);
    auto probe = dduf::Reader::open(*file);
    if (!probe.is_ok()) std::_Exit(3);
    const std::uint64_t stall_at = probe->find("vae/big.txt")->offset + (8u << 20) + 1;
    auto reader = dduf::Reader::open(std::make_shared<StallingSource>(*file, stall_at, ready[1]));
    if (!reader.is_ok()) std::_Exit(3);
    (void)dduf::unpack(*reader, out.string());
    std::_Exit(4);  // never reached: the source stalls
  }
  ::close(ready[1]);
  char c = 0;
  const bool started = ::read(ready[0], &c, 1) == 1;
  ::close(ready[0]);
  if (started) ::kill(pid, sig);
  int status = 0;
  ASSERT_EQ(swt::wait_for_child(pid, status), pid) << "the child did not end within 30 s";
  ASSERT_TRUE(started) << "the child failed before the stall: status " << status;
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "status " << status;
}

class UnpackSignal : public ::testing::TestWithParam<int> {};

// With nameless files, any signal at all — kill -9 included — leaves nothing: no folder, no staging
// folder, no temporary file.
TEST_P(UnpackSignal, NamelessLeavesNothing) {
  TempDir tmp;
  write_archive(tmp / "a.dduf");
  fs::create_directories(tmp / "parent");
  unpack_killed_by(GetParam(), false, tmp / "a.dduf", tmp / "parent" / "out");
  EXPECT_TRUE(fs::is_empty(tmp / "parent")) << *list_all(tmp / "parent").begin();
}

// The named fallback: a killed unpack leaves only a recognisable staging folder (no `out`), and the
// next unpack into the same folder removes it.
TEST_P(UnpackSignal, NamedFallbackLeftoverRemovedByNextRun) {
  TempDir tmp;
  write_archive(tmp / "a.dduf");
  fs::create_directories(tmp / "parent");
  unpack_killed_by(GetParam(), true, tmp / "a.dduf", tmp / "parent" / "out");
  EXPECT_FALSE(fs::exists(tmp / "parent" / "out"));
  for (const std::string& name : hidden_names(tmp / "parent")) EXPECT_EQ(name.rfind(".out.sw-unpack-", 0), 0u) << name;
  auto reader = dduf::Reader::open((tmp / "a.dduf").string());
  ASSERT_OK(reader);
  ASSERT_OK(dduf::unpack(*reader, (tmp / "parent" / "out").string()));
  EXPECT_TRUE(hidden_names(tmp / "parent").empty());
  EXPECT_EQ(read_file(tmp / "parent" / "out" / "vae" / "big.txt"), tensor_bytes(kBigEntry, 7));
}

INSTANTIATE_TEST_SUITE_P(Signals, UnpackSignal, ::testing::Values(SIGINT, SIGTERM, SIGKILL),
                         [](const ::testing::TestParamInfo<int>& info) { return std::string(::sigabbrev_np(info.param)); });

// A flipped byte: unpack fails with CrcMismatch naming the entry, and no folder appears.
TEST(Unpack, CrcMismatchLeavesNothing) {
  TempDir tmp;
  write_archive(tmp / "a.dduf");
  std::string bytes = read_file(tmp / "a.dduf");
  {
    auto reader = dduf::Reader::open((tmp / "a.dduf").string());
    ASSERT_OK(reader);
    bytes[reader->find("vae/big.txt")->offset + 12345] ^= 0x01;
  }
  write_file(tmp / "flipped.dduf", bytes);
  auto reader = dduf::Reader::open((tmp / "flipped.dduf").string());
  ASSERT_OK(reader);  // the CRC is not checked on open
  for (bool named : {false, true}) {
    if (named) ::setenv("SAFEWEIGHTS_NAMED_TEMPFILES", "1", 1);
    Status s = dduf::unpack(*reader, (tmp / "out").string());
    ::unsetenv("SAFEWEIGHTS_NAMED_TEMPFILES");
    ASSERT_TRUE(Fails(s, ErrorKind::CrcMismatch)) << named;
    EXPECT_EQ(s.error().context().entry, "vae/big.txt");
    EXPECT_FALSE(fs::exists(tmp / "out"));
    EXPECT_TRUE(hidden_names(tmp.path()).empty());
  }
}

// A symlink planted in the folder cannot redirect a write: the folder is refused as non-empty, and
// replacing it replaces the link, never what it points to.
TEST(Unpack, SymlinkInTargetIsNeverFollowed) {
  TempDir tmp;
  write_archive(tmp / "a.dduf");
  fs::create_directories(tmp / "outside");
  fs::create_directories(tmp / "out");
  fs::create_directory_symlink(tmp / "outside", tmp / "out" / "vae");
  auto reader = dduf::Reader::open((tmp / "a.dduf").string());
  ASSERT_OK(reader);
  EXPECT_TRUE(Fails(dduf::unpack(*reader, (tmp / "out").string()), ErrorKind::InvalidArgument, "not empty"));
  ASSERT_OK(dduf::unpack(*reader, (tmp / "out").string(), 0, /*replace=*/true));
  EXPECT_TRUE(fs::is_empty(tmp / "outside"));
  EXPECT_FALSE(fs::is_symlink(tmp / "out" / "vae"));
  EXPECT_EQ(list_files(tmp / "out"), (std::set<std::string>{"model_index.json", "vae/config.json", "vae/big.txt"}));
  // The folder to write being a symlink itself is refused: writes would land where it points.
  fs::create_directory_symlink(tmp / "outside", tmp / "link");
  EXPECT_TRUE(Fails(dduf::unpack(*reader, (tmp / "link").string()), ErrorKind::UnsafePath));
  EXPECT_TRUE(fs::is_empty(tmp / "outside"));
}

// An empty folder is filled; a trailing '/' names the same folder.
TEST(Unpack, IntoEmptyFolder) {
  TempDir tmp;
  write_archive(tmp / "a.dduf");
  fs::create_directories(tmp / "out");
  auto reader = dduf::Reader::open((tmp / "a.dduf").string());
  ASSERT_OK(reader);
  ASSERT_OK(dduf::unpack(*reader, (tmp / "out").string() + "/"));
  EXPECT_EQ(list_files(tmp / "out").size(), 3u);
  EXPECT_TRUE(hidden_names(tmp.path()).empty());
}

// A write that fails midway (the file size limit stands in for a full disk): an error, and neither the
// folder nor a staging folder remains. In a child process, whose limit cannot affect other tests.
TEST(Unpack, FailedWriteLeavesNothing) {
  TempDir tmp;
  write_archive(tmp / "a.dduf");
  for (bool named : {false, true}) {
    std::fflush(nullptr);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (named) ::setenv("SAFEWEIGHTS_NAMED_TEMPFILES", "1", 1);
      std::signal(SIGXFSZ, SIG_IGN);
      struct rlimit lim {
        4u << 20, 4u << 20
      };
      if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) std::_Exit(3);
      auto reader = dduf::Reader::open((tmp / "a.dduf").string());
      if (!reader.is_ok()) std::_Exit(3);
      Status s = dduf::unpack(*reader, (tmp / "out").string());
      std::_Exit(!s.is_ok() && s.error().kind() == ErrorKind::IoError ? 0 : 4);
    }
    int status = 0;
    ASSERT_EQ(swt::wait_for_child(pid, status), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status << ", named " << named;
    EXPECT_FALSE(fs::exists(tmp / "out"));
    EXPECT_TRUE(hidden_names(tmp.path()).empty()) << *hidden_names(tmp.path()).begin();
  }
}

// What validate accepts, unpack can write: the clashes and over-long names that would stop it are
// found on open (the corpus has one file per rule), and an exporter refuses to write a clash.
TEST(Unpack, ExporterRefusesFileFolderClash) {
  TempDir tmp;
  auto ex = dduf::Exporter::create((tmp / "a.dduf").string());
  ASSERT_OK(ex);
  ASSERT_OK(ex->add_bytes("model_index.json", bytes_of(R"({"x.json": ["diffusers", "X"]})")));
  ASSERT_OK(ex->add_bytes("x.json", bytes_of("{}")));
  ASSERT_OK(ex->add_bytes("x.json/config.json", bytes_of("{}")));
  EXPECT_TRUE(Fails(ex->finish(), ErrorKind::DDUFExport, "both a file and a folder"));
  EXPECT_FALSE(fs::exists(tmp / "a.dduf"));
  auto ex2 = dduf::Exporter::create((tmp / "b.dduf").string());
  ASSERT_OK(ex2);
  EXPECT_TRUE(Fails(ex2->add_bytes("vae/" + std::string(300, 'a') + ".json", bytes_of("{}")), ErrorKind::DDUFInvalidEntryName, "255"));
}

// The end record's comment length is checked against the file: a lie is named as such, not as
// trailing data (which is reported when bytes do follow the comment).
TEST(ZipEndRecord, CommentLengthPastEndIsNamed) {
  const std::string dir = DDUF_CORPUS_DIR;
  EXPECT_TRUE(Fails(dduf::Reader::open(dir + "/BadZipFile--eocd-comment-length-past-eof.dduf"), ErrorKind::BadZipFile,
                    "comment length (10) runs 10 bytes past the end of the file"));
  EXPECT_TRUE(Fails(dduf::Reader::open(dir + "/BadZipFile--trailing-garbage.dduf"), ErrorKind::BadZipFile, "trailing data"));
}

// The malformed-archive corpus (make_corpus.py): `<ExpectedKind>--<rule>.dduf`
// =====================================================================================================

struct CorpusFile {
  std::string file;  // file name
  std::string kind;  // "valid" or an ErrorKind name
  std::string rule;
};

std::vector<CorpusFile> corpus_files() {
  std::vector<CorpusFile> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(DDUF_CORPUS_DIR, ec)) {
    std::string name = e.path().filename().string();
    if (!ends_with(name, ".dduf")) continue;
    auto sep = name.find("--");
    if (sep == std::string::npos) {
      out.push_back({name, "", name});
      continue;
    }
    out.push_back({name, name.substr(0, sep), name.substr(sep + 2, name.size() - sep - 2 - 5)});
  }
  std::sort(out.begin(), out.end(), [](const CorpusFile& a, const CorpusFile& b) { return a.file < b.file; });
  return out;
}

TEST(Corpus, HasEveryRule) {
  std::set<std::string> present;
  for (const auto& f : corpus_files()) present.insert(f.file);
  for (const char* required : {"DDUFCorruptedFile--compressed-entry.dduf",
                               "DDUFInvalidEntryName--directory-entry.dduf",
                               "DDUFInvalidEntryName--gguf-extension.dduf",
                               "DDUFInvalidEntryName--bin-extension.dduf",
                               "DDUFInvalidEntryName--backslash.dduf",
                               "DDUFInvalidEntryName--two-level-nesting.dduf",
                               "DDUFCorruptedFile--missing-model-index.dduf",
                               "DDUFCorruptedFile--model-index-list.dduf",
                               "DDUFCorruptedFile--model-index-invalid-json.dduf",
                               "DDUFCorruptedFile--folder-not-in-index.dduf",
                               "DDUFCorruptedFile--folder-without-config.dduf",
                               "DDUFInvalidEntryName--dotdot-path-part.dduf",
                               "DDUFInvalidEntryName--empty-path-part.dduf",
                               "BadZipFile--duplicate-names.dduf",
                               "BadZipFile--prepended-junk.dduf",
                               "BadZipFile--trailing-garbage.dduf",
                               "BadZipFile--gap-between-entries.dduf",
                               "BadZipFile--overlapping-entries-same-header.dduf",
                               "BadZipFile--overlapping-entries-nested.dduf",
                               "BadZipFile--local-name-differs.dduf",
                               "BadZipFile--local-signature-destroyed.dduf",
                               "BadZipFile--size-past-eof.dduf",
                               "BadZipFile--size-into-central-directory.dduf",
                               "BadZipFile--eocd-count-too-small.dduf",
                               "BadZipFile--comment-with-eocd-signature.dduf",
                               "ZipUnsupported--encryption-bit.dduf",
                               "ZipUnsupported--data-descriptor-bit.dduf",
                               "ZipUnsupported--multi-disk-eocd.dduf",
                               "BadZipFile--nul-in-name.dduf",
                               "ZipUnsupported--version-needed-64.dduf",
                               "BadZipFile--zip64-extra-size-central.dduf",
                               "BadZipFile--zip64-eocd-disagrees.dduf",
                               "CrcMismatch--wrong-crc.dduf",
                               "InvalidHeaderLength--verify-safetensors-header-length.dduf",
                               "DDUFCorruptedFile--verify-invalid-json-entry.dduf",
                               "valid--hub-layout.dduf",
                               "valid--cpython-writestr-plain.dduf",
                               "valid--info-zip-stored-no-dirs.dduf",
                               "valid--archive-comment.dduf",
                               "DDUFCorruptedFile--root-file-and-folder-same-name.dduf",
                               "DDUFCorruptedFile--component-named-model-index.dduf",
                               "DDUFInvalidEntryName--name-part-too-long.dduf",
                               "BadZipFile--comment-with-local-header-signature.dduf",
                               "BadZipFile--eocd-comment-length-past-eof.dduf"}) {
    EXPECT_TRUE(present.count(required)) << "corpus lacks " << required << " (run tests/dduf/make_corpus.py)";
  }
}

// The ZIP rule (ErrorRule's code) each BadZipFile and ZipUnsupported file breaks, by the rule in its name.
const std::map<std::string, std::string, std::less<>>& zip_rules() {
  static const std::map<std::string, std::string, std::less<>> kRules = {
      {"comment-with-eocd-signature", "zip.end-record"},
      {"comment-with-local-header-signature", "zip.end-record"},
      {"duplicate-names", "zip.duplicate-name"},
      {"empty-file", "zip.end-record"},
      {"eocd-comment-length-past-eof", "zip.end-record"},
      {"eocd-count-too-large", "zip.central-directory"},
      {"eocd-count-too-small", "zip.central-directory"},
      {"eocd-disk-count-differs", "zip.end-record"},
      {"gap-after-central-directory", "zip.layout"},
      {"gap-before-central-directory", "zip.layout"},
      {"gap-between-entries", "zip.layout"},
      {"invalid-utf8-name", "zip.entry-name"},
      {"local-crc-differs", "zip.local-header"},
      {"local-flags-differ", "zip.local-header"},
      {"local-method-differs", "zip.local-header"},
      {"local-name-differs", "zip.local-header"},
      {"local-saturated-sizes-without-zip64", "zip.extra-field"},
      {"local-signature-destroyed", "zip.local-header"},
      {"non-ascii-name-without-utf8-flag", "zip.entry-name"},
      {"not-a-zip", "zip.end-record"},
      {"nul-in-name", "zip.entry-name"},
      {"overlapping-entries-nested", "zip.layout"},
      {"overlapping-entries-same-header", "zip.local-header"},  // the second entry finds the first one's name there
      {"prepended-junk", "zip.layout"},
      {"prepended-junk-offsets-adjusted", "zip.layout"},
      {"size-into-central-directory", "zip.layout"},
      {"size-past-eof", "zip.layout"},
      {"stored-sizes-differ", "zip.central-directory"},
      {"trailing-garbage", "zip.layout"},
      {"truncated", "zip.end-record"},
      {"zip64-eocd-disagrees", "zip.end-record"},
      {"zip64-extra-size-central", "zip.extra-field"},
      {"zip64-extra-size-local", "zip.extra-field"},
      {"zip64-locator-offset-wrong", "zip.end-record"},
      // ZipUnsupported
      {"data-descriptor-bit", "zip.flags"},
      {"encryption-bit", "zip.encryption"},
      {"multi-disk-entry", "zip.multi-disk"},
      {"multi-disk-eocd", "zip.multi-disk"},
      {"unicode-path-extra", "zip.extra-field"},
      {"version-needed-64", "zip.version"},
  };
  return kRules;
}

class CorpusTest : public ::testing::TestWithParam<CorpusFile> {};

TEST_P(CorpusTest, FailsWithTheKindInItsName) {
  const CorpusFile& c = GetParam();
  const std::string path = std::string(DDUF_CORPUS_DIR) + "/" + c.file;
  if (c.kind == "valid") {
    for (FileBackend backend : {FileBackend::Mmap, FileBackend::Pread}) {
      auto reader = dduf::Reader::open(path, backend);
      ASSERT_OK(reader);
      EXPECT_OK(reader->verify());
      for (const auto& e : reader->entries()) {
        if (ends_with(e.filename, ".safetensors")) {
          EXPECT_OK(reader->open_safetensors(e.filename));
        }
        auto src = reader->open_entry(e.filename);
        ASSERT_OK(src);
        EXPECT_EQ((*src)->size(), e.length);
      }
      // What validate accepts, unpack writes.
      TempDir out;
      EXPECT_OK(dduf::unpack(*reader, (out / "unpacked").string()));
      EXPECT_EQ(list_files(out / "unpacked").size(), reader->entries().size());
    }
    return;
  }
  auto kind = safeweights::error_kind_from_name(c.kind);
  ASSERT_TRUE(kind.has_value()) << "unknown kind in file name: " << c.file;
  // CRC and content failures show only in verify(); everything else must fail to open.
  const bool at_verify = *kind == ErrorKind::CrcMismatch || c.rule.rfind("verify-", 0) == 0;
  for (FileBackend backend : {FileBackend::Mmap, FileBackend::Pread}) {
    auto reader = dduf::Reader::open(path, backend);
    if (!at_verify) {
      ASSERT_TRUE(Fails(reader, *kind)) << c.file;
      EXPECT_EQ(reader.error().context().file, path);
      if (*kind == ErrorKind::BadZipFile || *kind == ErrorKind::ZipUnsupported) {  // every ZIP error says which rule it broke
        const auto rule = zip_rules().find(c.rule);
        ASSERT_NE(rule, zip_rules().end()) << c.file << ": add its rule to zip_rules()";
        EXPECT_EQ(error_rule_code(reader.error().rule()), rule->second) << c.file << ": " << reader.error().to_string();
      }
      continue;
    }
    ASSERT_OK(reader);
    Status s = reader->verify();
    ASSERT_TRUE(Fails(s, *kind)) << c.file;
    EXPECT_FALSE(s.error().context().entry.empty()) << "the error should name the entry: " << s.to_string();
    EXPECT_NE(reader->find(s.error().context().entry), nullptr) << s.to_string();
    if (*kind == ErrorKind::CrcMismatch) {
      EXPECT_OK(reader->verify({.crc = false, .contents = true}));  // only the CRC is wrong
    } else {
      EXPECT_OK(reader->verify({.crc = true, .contents = false}));  // the CRC matches the broken bytes
      EXPECT_TRUE(Fails(reader->verify({.crc = false, .contents = true}), *kind));
    }
  }
}

std::string corpus_test_name(const ::testing::TestParamInfo<CorpusFile>& info) {
  std::string out;
  for (char ch : info.param.file.substr(0, info.param.file.size() - 5)) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return out;
}

INSTANTIATE_TEST_SUITE_P(Files, CorpusTest, ::testing::ValuesIn(corpus_files()), corpus_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CorpusTest);

}  // namespace
