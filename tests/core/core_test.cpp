// The type model, error kinds and ByteSource implementations.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "safeweights/cancel.h"
#include "safeweights/text.h"
#include "safeweights/safetensors_writer.h"
#include "test_util.h"

namespace {

using namespace swt;
using K = safeweights::ErrorKind;
namespace st = safeweights::safetensors;

// ---- the type model and the safetensors spelling ----------------------------------------------------------

TEST(TensorTypeTable, SafetensorsCodesInReferenceOrderWithBits) {
  // Reference §1.4, in declaration order.
  const std::vector<std::pair<std::string, int>> ref = {
      {"BOOL", 8},    {"F4", 4},          {"F6_E2M3", 6},     {"F6_E3M2", 6}, {"U8", 8},   {"I8", 8},   {"F8_E5M2", 8}, {"F8_E4M3", 8},
      {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8}, {"I16", 16},    {"U16", 16}, {"F16", 16}, {"BF16", 16},   {"I32", 32},
      {"U32", 32},    {"F32", 32},        {"C64", 64},        {"F64", 64},    {"I64", 64}, {"U64", 64}};
  for (const auto& [code, bits] : ref) {
    const auto type = st::type_from_code(code);
    ASSERT_TRUE(type.has_value()) << code;
    EXPECT_TRUE(st::can_store(*type));
    EXPECT_EQ(st::type_code(*type), code);
    EXPECT_EQ(safeweights::type_name(*type), code);  // the canonical name of a plain type is its code
    EXPECT_EQ(safeweights::type_bits(*type), bits) << code;
    EXPECT_FALSE(safeweights::type_info(*type).is_block());
  }
  const auto table = safeweights::tensor_type_table();
  ASSERT_EQ(table.size(), static_cast<std::size_t>(safeweights::kTensorTypeCount));
  std::size_t storable = 0;
  for (std::size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(static_cast<std::size_t>(table[i].type), i);
    EXPECT_EQ(&safeweights::type_info(table[i].type), &table[i]);
    storable += st::can_store(table[i].type);
  }
  EXPECT_EQ(storable, ref.size());
}

TEST(TensorTypeTable, SafetensorsLookupIsExactAndNeverAcceptsAnotherFormatsNames) {
  for (const char* bad : {"f32", "Bf16", "F32 ", " F32", "", "F128", "C128", "E8M0", "float32", "F8_E4M3FN", "Q8_0", "Q4_K", "IQ2_XXS", "MXFP4",
                          "FloatStorage", "bfloat16"})
    EXPECT_FALSE(st::type_from_code(bad).has_value()) << bad;
  EXPECT_FALSE(st::can_store(TensorType::Q8_0));
  EXPECT_EQ(st::type_code(TensorType::Q4_K), "");
  // Every code with one byte changed, dropped or added (NUL included) is refused unless it spells
  // another code: the lookup compares whole codes, never a hash or a prefix.
  std::set<std::string> codes;
  for (const auto& info : safeweights::tensor_type_table()) {
    if (st::can_store(info.type)) codes.insert(std::string(st::type_code(info.type)));
  }
  auto expect_exact = [&](const std::string& s) {
    const auto type = st::type_from_code(s);
    if (codes.count(s)) {
      ASSERT_TRUE(type.has_value()) << s;
      EXPECT_EQ(st::type_code(*type), s);
    } else {
      EXPECT_FALSE(type.has_value()) << s;
    }
  };
  for (const std::string& code : codes) {
    for (std::size_t i = 0; i <= code.size(); ++i) {
      static constexpr char kBytes[] = "\0_0123456789ABCEFIMNUZbf\xff";
      for (const char c : std::string(kBytes, sizeof kBytes - 1)) {
        if (i < code.size()) expect_exact(code.substr(0, i) + c + code.substr(i + 1));  // changed
        expect_exact(code.substr(0, i) + c + code.substr(i));                           // added
      }
      if (i < code.size()) expect_exact(code.substr(0, i) + code.substr(i + 1));  // dropped
    }
  }
}

TEST(TensorTypeTable, BlockTypesFromGgml) {
  // shared/reference/gguf-and-pytorch.md A5: (block elements, bytes per block).
  const std::vector<std::tuple<TensorType, std::string, int, int>> ref = {
      {TensorType::Q4_0, "Q4_0", 32, 18},     {TensorType::Q4_1, "Q4_1", 32, 20},    {TensorType::Q5_0, "Q5_0", 32, 22},
      {TensorType::Q5_1, "Q5_1", 32, 24},     {TensorType::Q8_0, "Q8_0", 32, 34},    {TensorType::Q8_1, "Q8_1", 32, 36},
      {TensorType::Q2_K, "Q2_K", 256, 84},    {TensorType::Q3_K, "Q3_K", 256, 110},  {TensorType::Q4_K, "Q4_K", 256, 144},
      {TensorType::Q5_K, "Q5_K", 256, 176},   {TensorType::Q6_K, "Q6_K", 256, 210},  {TensorType::Q8_K, "Q8_K", 256, 292},
      {TensorType::IQ4_NL, "IQ4_NL", 32, 18}, {TensorType::TQ2_0, "TQ2_0", 256, 66}, {TensorType::MXFP4, "MXFP4", 32, 17}};
  for (const auto& [type, name, elements, bytes] : ref) {
    const auto& info = safeweights::type_info(type);
    EXPECT_EQ(info.name, name);
    EXPECT_TRUE(info.is_block());
    EXPECT_EQ(info.block_elements, elements) << name;
    EXPECT_EQ(info.block_bytes, bytes) << name;
    EXPECT_EQ(info.cls, safeweights::TypeClass::Quantized);
  }
}

TEST(TensorTypeTable, NbytesForPlainAndBlockTypes) {
  using safeweights::tensor_nbytes;
  using V = std::vector<std::uint64_t>;
  EXPECT_EQ(tensor_nbytes(TensorType::F32, V{2, 3}).value(), 24u);
  EXPECT_EQ(tensor_nbytes(TensorType::F32, V{}).value(), 4u);  // a scalar
  EXPECT_EQ(tensor_nbytes(TensorType::F4, V{2}).value(), 1u);
  EXPECT_EQ(tensor_nbytes(TensorType::F4, V{3}).error().kind(), K::MisalignedSlice);
  EXPECT_EQ(tensor_nbytes(TensorType::F6_E2M3, V{4}).value(), 3u);
  EXPECT_EQ(tensor_nbytes(TensorType::Q8_0, V{3, 64}).value(), 3u * 2 * 34);
  EXPECT_EQ(tensor_nbytes(TensorType::Q4_K, V{256}).value(), 144u);
  EXPECT_EQ(tensor_nbytes(TensorType::Q8_0, V{0, 32}).value(), 0u);
  // The innermost dimension must be a multiple of the block; a scalar has none.
  EXPECT_EQ(tensor_nbytes(TensorType::Q8_0, V{64, 33}).error().kind(), K::InvalidBlockShape);
  EXPECT_EQ(tensor_nbytes(TensorType::Q8_0, V{0, 5}).error().kind(), K::InvalidBlockShape);
  EXPECT_EQ(tensor_nbytes(TensorType::Q8_0, V{}).error().kind(), K::InvalidBlockShape);
  // Overflow is found from the left, as the reference computes it, for both kinds of type.
  const std::uint64_t big = std::uint64_t{1} << 40;
  EXPECT_EQ(tensor_nbytes(TensorType::F32, V{big, big, 0}).error().kind(), K::ValidationOverflow);
  EXPECT_EQ(tensor_nbytes(TensorType::Q8_0, V{big, big, 0}).error().kind(), K::ValidationOverflow);
  EXPECT_EQ(tensor_nbytes(TensorType::F64, V{std::uint64_t{1} << 61}).error().kind(), K::ValidationOverflow);
  EXPECT_EQ(tensor_nbytes(TensorType::Q8_0, V{2, std::uint64_t{1} << 63}).error().kind(), K::ValidationOverflow);
}

TEST(TensorTypeTable, SafetensorsWriterRefusesTypesItCannotSpell) {
  auto r = st::Layout::plan(std::vector<st::TensorDecl>{{"q", TensorType::Q8_0, {32}}}, {});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().kind(), K::InvalidArgument);
  EXPECT_NE(r.error().message().find("Q8_0"), std::string::npos);
}

// ---- error kinds ---------------------------------------------------------------------------------------

TEST(ErrorKinds, NamesRoundTrip) {
  std::set<std::string> seen;
  // Every kind the library knows, up to the first number it has no name for: a kind appended to
  // error.h is counted here whether or not it was added to the list below.
  for (int i = 0; safeweights::error_kind_name(static_cast<K>(i)) != "Unknown"; ++i) {
    ASSERT_LT(i, 1000) << "error_kind_name never says Unknown";
    const auto k = static_cast<K>(i);
    const std::string name(safeweights::error_kind_name(k));
    EXPECT_FALSE(name.empty());
    EXPECT_TRUE(seen.insert(name).second) << name;
    EXPECT_EQ(safeweights::error_kind_from_name(name), k);
    EXPECT_FALSE(safeweights::error_kind_description(k).empty());
  }
  EXPECT_EQ(safeweights::error_kind_name(K::InvalidHeaderDeserialization), "InvalidHeaderDeserialization");
  EXPECT_EQ(safeweights::error_kind_name(K::MetadataIncompleteBuffer), "MetadataIncompleteBuffer");
  // Values are part of the ABI: every released kind keeps its number (this list only grows).
  const std::vector<std::pair<std::string, int>> released = {{"IoError", 0},
                                                             {"FileNotFound", 1},
                                                             {"InvalidArgument", 2},
                                                             {"OutOfRange", 3},
                                                             {"UnknownFormat", 4},
                                                             {"ResourceLimit", 5},
                                                             {"HeaderTooSmall", 6},
                                                             {"HeaderTooLarge", 7},
                                                             {"InvalidHeaderLength", 8},
                                                             {"InvalidHeader", 9},
                                                             {"InvalidHeaderDeserialization", 10},
                                                             {"InvalidOffset", 11},
                                                             {"TensorInvalidInfo", 12},
                                                             {"MetadataIncompleteBuffer", 13},
                                                             {"ValidationOverflow", 14},
                                                             {"MisalignedSlice", 15},
                                                             {"TensorNotFound", 16},
                                                             {"InvalidTensorView", 17},
                                                             {"DuplicateKey", 18},
                                                             {"NonCanonicalEntry", 19},
                                                             {"UnknownField", 20},
                                                             {"ReservedTensorName", 21},
                                                             {"InvalidSliceSpec", 22},
                                                             {"TooManySlices", 23},
                                                             {"SliceOutOfRange", 24},
                                                             {"InvalidIndex", 25},
                                                             {"ShardMismatch", 26},
                                                             {"BadZipFile", 27},
                                                             {"ZipUnsupported", 28},
                                                             {"CrcMismatch", 29},
                                                             {"DDUFCorruptedFile", 30},
                                                             {"DDUFInvalidEntryName", 31},
                                                             {"DDUFExport", 32},
                                                             {"HttpError", 33},
                                                             {"RemoteChanged", 34},
                                                             {"InvalidBlockShape", 35},
                                                             {"ZipWrite", 36},
                                                             {"NotSupported", 37},
                                                             {"Interrupted", 38},
                                                             {"Timeout", 39},
                                                             {"UnsafePath", 40},
                                                             {"InvalidPickle", 41},
                                                             {"UnsafePickle", 42},
                                                             {"InvalidCheckpoint", 43},
                                                             {"InvalidGguf", 44},
                                                             {"DeviceError", 45},
                                                             {"Unrepresentable", 46},
                                                             {"InvalidModelFolder", 47},
                                                             {"EnvironmentFault", 48}};
  for (const auto& [name, value] : released) {
    auto kind = safeweights::error_kind_from_name(name);
    ASSERT_TRUE(kind.has_value()) << name;
    EXPECT_EQ(static_cast<int>(*kind), value) << name;
  }
  EXPECT_EQ(released.size(), seen.size()) << "a new kind: add it to the list above with its number";
  EXPECT_FALSE(safeweights::error_kind_from_name("invalidoffset").has_value());
  EXPECT_FALSE(safeweights::error_kind_from_name("").has_value());
}

TEST(ErrorRules, CodesRoundTripAndKeepTheirNumbers) {
  // Every released rule keeps its code and number (this list only grows).
  const std::vector<std::pair<std::string, int>> released = {{"gguf.magic", 1},
                                                             {"gguf.version", 2},
                                                             {"gguf.truncated", 3},
                                                             {"gguf.length", 4},
                                                             {"gguf.count", 5},
                                                             {"gguf.value-type", 6},
                                                             {"gguf.bool", 7},
                                                             {"gguf.key", 8},
                                                             {"gguf.alignment", 9},
                                                             {"gguf.dimensions", 10},
                                                             {"gguf.tensor-type", 11},
                                                             {"gguf.tensor-name", 12},
                                                             {"gguf.tensor-offset", 13},
                                                             {"gguf.split", 14},
                                                             {"pytorch.pickle-truncated", 15},
                                                             {"pytorch.pickle-protocol", 16},
                                                             {"pytorch.pickle-opcode", 17},
                                                             {"pytorch.pickle-stack", 18},
                                                             {"pytorch.pickle-arguments", 19},
                                                             {"pytorch.opcode-refused", 20},
                                                             {"pytorch.global-refused", 21},
                                                             {"pytorch.call-refused", 22},
                                                             {"pytorch.limit", 23},
                                                             {"pytorch.container", 24},
                                                             {"pytorch.storage", 25},
                                                             {"pytorch.tensor-bounds", 26},
                                                             {"pytorch.object", 27},
                                                             {"pytorch.archive-kind", 28},
                                                             {"pytorch.tensor-kind", 29},
                                                             {"zip.end-record", 30},
                                                             {"zip.central-directory", 31},
                                                             {"zip.extra-field", 32},
                                                             {"zip.entry-name", 33},
                                                             {"zip.duplicate-name", 34},
                                                             {"zip.local-header", 35},
                                                             {"zip.layout", 36},
                                                             {"zip.data-descriptor", 37},
                                                             {"zip.encryption", 38},
                                                             {"zip.multi-disk", 39},
                                                             {"zip.version", 40},
                                                             {"zip.compression", 41},
                                                             {"zip.flags", 42},
                                                             {"zip.limit", 43}};
  std::set<std::string> seen;
  for (const auto& [code, value] : released) {
    auto rule = safeweights::error_rule_from_code(code);
    ASSERT_TRUE(rule.has_value()) << code;
    EXPECT_EQ(static_cast<int>(*rule), value) << code;
    EXPECT_EQ(safeweights::error_rule_code(*rule), code);
    EXPECT_FALSE(safeweights::error_rule_description(*rule).empty()) << code;
    EXPECT_TRUE(seen.insert(code).second) << code;
  }
  EXPECT_EQ(safeweights::error_rule_code(safeweights::ErrorRule::Unspecified), "");
  EXPECT_FALSE(safeweights::error_rule_from_code("").has_value());
  EXPECT_EQ(safeweights::error_rule_code(static_cast<safeweights::ErrorRule>(released.size() + 1)), "");
  // A rule set closer to the failure is kept, as the context is; --json prints it.
  safeweights::Error e(K::InvalidGguf, "bad");
  e.with_rule(safeweights::ErrorRule::GgufTruncated).with_rule(safeweights::ErrorRule::GgufKey);
  EXPECT_EQ(e.rule(), safeweights::ErrorRule::GgufTruncated);
  EXPECT_NE(safeweights::error_json(e).find("\"rule\":\"gguf.truncated\""), std::string::npos) << safeweights::error_json(e);
  EXPECT_EQ(safeweights::error_json(safeweights::Error(K::InvalidOffset, "x")).find("rule"), std::string::npos);
}

// The file an error is in (a split sibling, a shard) is in --json as in the text form.
TEST(ErrorKinds, JsonNamesTheFile) {
  safeweights::Error e(K::InvalidGguf, "bad");
  e.with_file("m-00002-of-00002.gguf").with_tensor("t").with_offset(7);
  EXPECT_EQ(safeweights::error_json(e), R"({"kind":"InvalidGguf","message":"bad","file":"m-00002-of-00002.gguf","tensor":"t","offset":7})");
  EXPECT_EQ(safeweights::error_json(safeweights::Error(K::InvalidOffset, "x")), R"({"kind":"InvalidOffset","message":"x"})");
}

TEST(ErrorKinds, ContextIsNotOverwritten) {
  safeweights::Error e(K::InvalidOffset, "bad");
  e.with_tensor("inner").with_file("inner.safetensors").with_offset(12);
  e.with_tensor("outer").with_file("outer.safetensors").with_offset(99).with_entry("entry");
  EXPECT_EQ(e.context().tensor, "inner");
  EXPECT_EQ(e.context().file, "inner.safetensors");
  EXPECT_EQ(e.context().offset, std::optional<std::uint64_t>(12));
  EXPECT_EQ(e.context().entry, "entry");
  const std::string s = e.to_string();
  EXPECT_NE(s.find("inner.safetensors"), std::string::npos) << s;
  EXPECT_NE(s.find("InvalidOffset"), std::string::npos) << s;
  EXPECT_NE(s.find("inner"), std::string::npos) << s;
  safeweights::Status ok;
  EXPECT_TRUE(ok.is_ok());
  EXPECT_EQ(ok.to_string(), "OK");
  safeweights::Status bad = e;
  safeweights::Status copy = bad;
  EXPECT_FALSE(copy.is_ok());
  EXPECT_EQ(copy.error().context().tensor, "inner");
}

// ---- sources -------------------------------------------------------------------------------------------

TEST(Sources, MemorySource) {
  auto src = mem("hello world", "buf");
  EXPECT_EQ(src->name(), "buf");
  EXPECT_EQ(src->size(), 11u);
  ASSERT_NE(src->mapped(), nullptr);
  std::vector<std::byte> dst(5);
  ASSERT_TRUE(IsOk(src->read_at(6, dst)));
  EXPECT_EQ(to_string(dst), "world");
  EXPECT_TRUE(IsKind(src->read_at(7, dst), K::OutOfRange));
  EXPECT_TRUE(IsKind(src->read_at(~std::uint64_t{0} - 1, dst), K::OutOfRange));
  EXPECT_TRUE(IsOk(src->read_at(11, std::span<std::byte>())));
  EXPECT_EQ(to_string(src->view(0, 5)), "hello");
  EXPECT_EQ(src->view(7, 5).data(), nullptr);
  EXPECT_EQ(src->view(~std::uint64_t{0}, 2).data(), nullptr);
  EXPECT_TRUE(IsOk(src->check_range(0, 11)));
  EXPECT_TRUE(IsOk(src->check_range(11, 0)));
  EXPECT_TRUE(IsKind(src->check_range(1, 11), K::OutOfRange));
  EXPECT_TRUE(IsKind(src->check_range(~std::uint64_t{0}, 2), K::OutOfRange));
  EXPECT_TRUE(IsKind(src->check_range(2, ~std::uint64_t{0}), K::OutOfRange));
  const std::vector<safeweights::ByteRange> ranges = {{6, 5}, {0, 1}, {4, 2}};
  std::vector<std::byte> out(8);
  ASSERT_TRUE(IsOk(src->read_ranges(ranges, out)));
  EXPECT_EQ(to_string(out), "worldho ");
  const std::vector<safeweights::ByteRange> bad = {{6, 5}, {10, 3}};
  std::vector<std::byte> out2(8);
  EXPECT_FALSE(src->read_ranges(bad, out2).is_ok());
}

TEST(Sources, SubrangeSource) {
  auto parent = mem("0123456789", "parent");
  auto sub = safeweights::subrange_source(parent, 2, 5, "parent!sub");
  ASSERT_TRUE(IsOk(sub));
  EXPECT_EQ((*sub)->size(), 5u);
  EXPECT_EQ((*sub)->name(), "parent!sub");
  ASSERT_NE((*sub)->mapped(), nullptr);
  EXPECT_EQ((*sub)->mapped(), parent->mapped() + 2);
  std::vector<std::byte> dst(5);
  ASSERT_TRUE(IsOk((*sub)->read_at(0, dst)));
  EXPECT_EQ(to_string(dst), "23456");
  std::vector<std::byte> one(1);
  EXPECT_TRUE(IsKind((*sub)->read_at(5, one), K::OutOfRange));
  EXPECT_TRUE(IsKind(safeweights::subrange_source(parent, 6, 5, "x"), K::OutOfRange));
  EXPECT_TRUE(IsKind(safeweights::subrange_source(parent, ~std::uint64_t{0}, 2, "x"), K::OutOfRange));
  // A safetensors file inside a larger buffer.
  const std::string file = st_file("{\"t\":" + entry("U8", "2", 0, 2) + "}", 2, 'z');
  auto outer = mem("PREFIX" + file + "SUFFIX", "outer");
  auto inner = safeweights::subrange_source(outer, 6, file.size(), "outer!model.safetensors");
  ASSERT_TRUE(IsOk(inner));
  auto r = st::Reader::open(*inner);
  ASSERT_TRUE(IsOk(r));
  auto v = r->tensor("t").value()->read_owned();
  ASSERT_TRUE(IsOk(v));
  EXPECT_EQ(to_string(*v), "zz");
  auto bad = safeweights::subrange_source(outer, 6, file.size() + 1, "outer!bad");
  ASSERT_TRUE(IsOk(bad));
  auto rb = st::Reader::open(*bad);
  ASSERT_TRUE(IsKind(rb, K::MetadataIncompleteBuffer));
  EXPECT_EQ(rb.error().context().file, "outer!bad");
}

TEST(Sources, OpenFileBothBackends) {
  TempDir dir;
  const std::string p = dir.file("f.bin");
  write_file_bytes(p, "abcdefgh");
  for (auto backend : {safeweights::FileBackend::Mmap, safeweights::FileBackend::Pread}) {
    auto s = safeweights::open_file(p, backend);
    ASSERT_TRUE(IsOk(s));
    EXPECT_EQ((*s)->size(), 8u);
    EXPECT_EQ((*s)->name(), p);
    EXPECT_EQ((*s)->mapped() != nullptr, backend == safeweights::FileBackend::Mmap);
    std::vector<std::byte> dst(3);
    ASSERT_TRUE(IsOk((*s)->read_at(5, dst)));
    EXPECT_EQ(to_string(dst), "fgh");
    EXPECT_TRUE(IsKind((*s)->read_at(6, dst), K::OutOfRange));
    (*s)->hint({0, 8}, safeweights::AccessHint::WillNeed);
  }
  // An empty file is a valid (empty) source.
  write_file_bytes(dir.file("empty"), "");
  for (auto backend : {safeweights::FileBackend::Mmap, safeweights::FileBackend::Pread}) {
    auto s = safeweights::open_file(dir.file("empty"), backend);
    ASSERT_TRUE(IsOk(s));
    EXPECT_EQ((*s)->size(), 0u);
    auto r = st::Reader::open(dir.file("empty"), backend);
    EXPECT_TRUE(IsKind(r, K::HeaderTooSmall));
  }
}

// read_scatter on every local source kind: runs in any order, adjacent runs (one preadv), empty runs,
// large runs (the mapped source's pread path), and a bad run that fails the whole call up front.
TEST(Sources, ReadScatterEverySourceKind) {
  TempDir dir;
  std::string content(1u << 20, '\0');
  for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  const std::string path = dir.file("scatter.bin");
  write_file_bytes(path, content);
  std::vector<std::pair<std::string, safeweights::SourcePtr>> sources;
  for (auto backend : {safeweights::FileBackend::Mmap, safeweights::FileBackend::Pread, safeweights::FileBackend::MmapPrivate}) {
    auto s = safeweights::open_file(path, backend);
    ASSERT_TRUE(IsOk(s));
    sources.emplace_back("file backend " + std::to_string(static_cast<int>(backend)), *s);
  }
  sources.emplace_back("memory", mem(content, "mem"));
  for (std::size_t k = 0, n = sources.size(); k < n; ++k) {
    auto whole = safeweights::subrange_source(sources[k].second, 0, content.size(), "sub");
    ASSERT_TRUE(IsOk(whole));
    sources.emplace_back("subrange of " + sources[k].first, *whole);
  }
  const std::vector<std::pair<std::uint64_t, std::size_t>> runs = {
      {900000, 10}, {0, 4096}, {4096, 300000}, {304096, 5}, {17, 0}, {content.size() - 1, 1}, {500000, 400000}, {3, 4}};
  for (const auto& [label, src] : sources) {
    std::vector<std::vector<std::byte>> bufs;
    for (const auto& r : runs) bufs.emplace_back(r.second);
    std::vector<safeweights::ReadRequest> requests;
    for (std::size_t i = 0; i < runs.size(); ++i) requests.push_back({runs[i].first, bufs[i]});
    ASSERT_TRUE(IsOk(src->read_scatter(requests))) << label;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      EXPECT_EQ(to_string(bufs[i]), content.substr(runs[i].first, runs[i].second)) << label << " run " << i;
    }
    std::vector<std::byte> a(4), b(4);
    const std::vector<safeweights::ReadRequest> bad = {{0, a}, {content.size() - 3, b}};
    EXPECT_TRUE(IsKind(src->read_scatter(bad), K::OutOfRange)) << label;
    const std::vector<safeweights::ReadRequest> wrap = {{~std::uint64_t{0} - 1, b}};
    EXPECT_TRUE(IsKind(src->read_scatter(wrap), K::OutOfRange)) << label;
    EXPECT_TRUE(IsOk(src->read_scatter({}))) << label;
    // read_ranges is read_scatter into consecutive parts of one buffer.
    const std::vector<safeweights::ByteRange> ranges = {{10, 5}, {0, 3}, {10, 5}};
    std::vector<std::byte> out(13);
    ASSERT_TRUE(IsOk(src->read_ranges(ranges, out))) << label;
    EXPECT_EQ(to_string(out), content.substr(10, 5) + content.substr(0, 3) + content.substr(10, 5)) << label;
    std::vector<std::byte> too_small(12), too_large(14);
    EXPECT_TRUE(IsKind(src->read_ranges(ranges, too_small), K::InvalidArgument)) << label;
    EXPECT_TRUE(IsKind(src->read_ranges(ranges, too_large), K::InvalidArgument)) << label;
  }
  // A sub-range source refuses runs outside itself even when the parent has those bytes.
  auto middle = safeweights::subrange_source(sources[0].second, 100, 50, "mid");
  ASSERT_TRUE(IsOk(middle));
  std::vector<std::byte> c(10);
  const std::vector<safeweights::ReadRequest> outside = {{45, c}};
  EXPECT_TRUE(IsKind((*middle)->read_scatter(outside), K::OutOfRange));
  const std::vector<safeweights::ReadRequest> inside = {{40, c}};
  ASSERT_TRUE(IsOk((*middle)->read_scatter(inside)));
  EXPECT_EQ(to_string(c), content.substr(140, 10));
}

// More adjacent runs than one preadv takes (1024 vectors), on the pread backend.
TEST(Sources, ReadScatterManyAdjacentRuns) {
  TempDir dir;
  std::string content(3000 * 3, '\0');
  for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>('A' + i % 23);
  write_file_bytes(dir.file("runs.bin"), content);
  auto src = safeweights::open_file(dir.file("runs.bin"), safeweights::FileBackend::Pread);
  ASSERT_TRUE(IsOk(src));
  std::vector<std::byte> out(content.size());
  std::vector<safeweights::ReadRequest> requests;
  // Runs of 3 bytes in file order, written to memory in reverse order of runs.
  for (std::size_t r = 0; r < 3000; ++r) requests.push_back({r * 3, std::span<std::byte>(out).subspan((2999 - r) * 3, 3)});
  ASSERT_TRUE(IsOk((*src)->read_scatter(requests)));
  for (std::size_t r = 0; r < 3000; ++r) ASSERT_EQ(to_string(std::span<std::byte>(out).subspan((2999 - r) * 3, 3)), content.substr(r * 3, 3));
}

TEST(Sources, OpenFileErrors) {
  TempDir dir;
  for (auto backend : {safeweights::FileBackend::Mmap, safeweights::FileBackend::Pread}) {
    auto missing = safeweights::open_file(dir.file("missing"), backend);
    ASSERT_TRUE(IsKind(missing, K::FileNotFound));
    EXPECT_EQ(missing.error().context().file, dir.file("missing"));
    auto r = st::Reader::open(dir.file("missing"), backend);
    ASSERT_TRUE(IsKind(r, K::FileNotFound));
    EXPECT_EQ(r.error().context().file, dir.file("missing"));
    EXPECT_TRUE(IsKind(safeweights::open_file(dir.path(), backend), K::IoError));
  }
}

TEST(Sources, FifoIsRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (auto backend : {safeweights::FileBackend::Mmap, safeweights::FileBackend::Pread}) {
    auto fut = std::async(std::launch::async, [&] { return safeweights::open_file(fifo, backend); });
    if (fut.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
      // Unblock the open so that the test can finish, then fail.
      int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
      FAIL() << "open_file blocked on a FIFO";
    }
    auto r = fut.get();
    EXPECT_TRUE(IsKind(r, K::IoError));
  }
}

TEST(Sources, ConcurrentReads) {
  std::string data(1 << 16, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  TempDir dir;
  write_file_bytes(dir.file("d"), data);
  auto s = safeweights::open_file(dir.file("d"), safeweights::FileBackend::Pread);
  ASSERT_TRUE(IsOk(s));
  const safeweights::SourcePtr src = *s;
  std::vector<std::future<bool>> futs;
  for (int t = 0; t < 4; ++t) {
    futs.push_back(std::async(std::launch::async, [src, &data, t] {
      std::vector<std::byte> buf(1000);
      for (int i = 0; i < 200; ++i) {
        const std::uint64_t off = static_cast<std::uint64_t>((t * 977 + i * 131) % (data.size() - buf.size()));
        if (!src->read_at(off, buf).is_ok()) return false;
        if (to_string(buf) != data.substr(off, buf.size())) return false;
      }
      return true;
    }));
  }
  for (auto& f : futs) EXPECT_TRUE(f.get());
}

}  // namespace

// ---- cancellation ---------------------------------------------------------------------------------------

namespace {
std::atomic<int> g_polls{0};
bool stop_after_first_poll() noexcept { return g_polls.fetch_add(1) >= 1; }
}  // namespace

TEST(Cancel, FlagIsSeenUntilCleared) {
  EXPECT_TRUE(safeweights::check_cancelled().is_ok());
  safeweights::request_cancel();
  const auto s = safeweights::check_cancelled();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.error().kind(), K::Interrupted);
  safeweights::clear_cancel();
  EXPECT_TRUE(safeweights::check_cancelled().is_ok());
}

TEST(Cancel, PollHookIsAskedAtMostOncePerInterval) {
  g_polls = 0;
  safeweights::set_cancel_poll(&stop_after_first_poll);
  EXPECT_TRUE(safeweights::check_cancelled().is_ok());                                 // first poll says go on
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(safeweights::check_cancelled().is_ok());  // within the interval
  EXPECT_EQ(g_polls.load(), 1);
  std::this_thread::sleep_for(safeweights::kPollInterval + std::chrono::milliseconds(10));
  const auto s = safeweights::check_cancelled();
  safeweights::set_cancel_poll(nullptr);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.error().kind(), K::Interrupted);
}
