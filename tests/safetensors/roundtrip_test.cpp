// Property test: random tensors (all 22 dtypes, rank 0-4, dims 0-7, hostile names) and random metadata
// -> serialize -> parse, from memory and from a written file with both backends. Everything must
// round-trip, in the reference writer's order, and mmap views must be zero-copy.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/loader.h"
#include "safeweights/safetensors_writer.h"
#include "test_util.h"

namespace {

using namespace swt;
namespace st = safeweights::safetensors;
using K = safeweights::ErrorKind;
using Metadata = std::optional<safeweights::MetadataEntries>;
using st::MetadataEntries;
using st::TensorData;

struct Owned {
  std::string name;
  TensorType dtype;
  std::vector<std::uint64_t> shape;
  std::vector<std::byte> bytes;
};

struct Case {
  std::vector<Owned> tensors;
  Metadata md;
  std::vector<TensorData> data() const {
    std::vector<TensorData> v;
    for (const auto& t : tensors) v.push_back({t.name, t.dtype, t.shape, t.bytes});
    return v;
  }
  const Owned* find(std::string_view name) const {
    for (const auto& t : tensors)
      if (t.name == name) return &t;
    return nullptr;
  }
};

// Pieces names are made of: ASCII, JSON-special characters, every control byte, DEL, and multi-byte
// UTF-8 (2, 3 and 4 bytes, U+2028, BOM, a character whose escape is a surrogate pair).
const std::vector<std::string>& name_pieces() {
  static const std::vector<std::string> pieces = [] {
    std::vector<std::string> p = {"a",
                                  "b",
                                  "z",
                                  "A",
                                  "Z",
                                  "0",
                                  "9",
                                  ".",
                                  "_",
                                  "-",
                                  " ",
                                  "\"",
                                  "\\",
                                  "/",
                                  "\x7f",
                                  "\xc3\xa9",
                                  "\xc3\x9f",
                                  "\xe4\xb8\xad",
                                  "\xe2\x80\xa8",
                                  "\xef\xbb\xbf",
                                  "\xf0\x9f\x98\x80",
                                  "\xf4\x8f\xbf\xbf",
                                  "layer",
                                  "weight",
                                  "__",
                                  "{",
                                  "}",
                                  ":",
                                  ",",
                                  "[",
                                  "]"};
    for (int c = 0; c < 0x20; ++c) p.push_back(std::string(1, static_cast<char>(c)));
    return p;
  }();
  return pieces;
}

std::string random_string(std::mt19937_64& rng, int max_pieces) {
  const auto& pieces = name_pieces();
  std::string s;
  const int n = static_cast<int>(rng() % static_cast<std::uint64_t>(max_pieces + 1));
  for (int i = 0; i < n; ++i) s += pieces[rng() % pieces.size()];
  return s;
}

Case random_case(std::mt19937_64& rng) {
  Case c;
  const int n = static_cast<int>(rng() % 9);
  std::set<std::string> used;
  for (int i = 0; i < n; ++i) {
    Owned t;
    do {
      t.name = random_string(rng, 6);
    } while (used.count(t.name) || t.name == "__metadata__");
    used.insert(t.name);
    t.dtype = all_dtypes()[rng() % all_dtypes().size()];
    std::optional<std::uint64_t> size;
    do {
      const int rank = static_cast<int>(rng() % 5);
      t.shape.assign(static_cast<std::size_t>(rank), 0);
      std::uint64_t count = 1;
      for (auto& d : t.shape) {
        // Zero dims are less likely than others so that most tensors have data.
        d = (rng() % 10 == 0) ? 0 : 1 + rng() % 7;
        count *= d;
      }
      size = byte_size(t.dtype, count);
    } while (!size);
    t.bytes.resize(*size);
    for (auto& b : t.bytes) b = static_cast<std::byte>(rng() & 0xff);
    c.tensors.push_back(std::move(t));
  }
  switch (rng() % 6) {
    case 0:
    case 1: break;  // no metadata
    case 2: c.md = MetadataEntries{}; break;
    default: {
      MetadataEntries md;
      std::set<std::string> keys;
      const int m = 1 + static_cast<int>(rng() % 5);
      for (int i = 0; i < m; ++i) {
        std::string k = random_string(rng, 4);
        if (!keys.insert(k).second) continue;
        md.emplace_back(k, random_string(rng, 8));
      }
      c.md = std::move(md);
    }
  }
  return c;
}

// The reference writer's order: dtype descending, then name bytewise.
std::vector<const Owned*> write_order(const Case& c) {
  std::vector<const Owned*> v;
  for (const auto& t : c.tensors) v.push_back(&t);
  std::sort(v.begin(), v.end(), [](const Owned* a, const Owned* b) {
    if (a->dtype != b->dtype) return static_cast<int>(a->dtype) > static_cast<int>(b->dtype);
    return a->name < b->name;  // std::char_traits<char> compares as unsigned char
  });
  return v;
}

// Checks a parsed header against the case; `bytes` is the whole file.
void check_header(const Case& c, const st::Header& h, const std::string& bytes, const std::string& where) {
  SCOPED_TRACE(where);
  EXPECT_EQ(h.file_size(), bytes.size());
  EXPECT_EQ(h.header_size() % 8, 0u);
  EXPECT_EQ(bytes.substr(0, 8), le64(h.header_size()));
  const auto order = write_order(c);
  ASSERT_EQ(h.tensors().size(), order.size());
  std::uint64_t off = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Owned& t = *order[i];
    const auto& info = h.tensors()[i];
    EXPECT_EQ(info.name, t.name) << "position " << i << ": " << hexdump(std::string(info.name)) << " vs " << hexdump(t.name);
    EXPECT_EQ(info.dtype, t.dtype);
    EXPECT_EQ(std::vector<std::uint64_t>(info.shape.begin(), info.shape.end()), t.shape);
    EXPECT_EQ(info.begin, off);
    EXPECT_EQ(info.nbytes(), t.bytes.size());
    off = info.end;
    EXPECT_EQ(bytes.substr(h.data_start() + info.begin, info.nbytes()), to_string(t.bytes)) << hexdump(t.name);
    const auto bits = safeweights::type_bits(t.dtype);
    if (bits >= 8) {
      EXPECT_EQ((h.data_start() + info.begin) % (bits / 8), 0u) << "alignment of " << hexdump(t.name);
    }
    const auto* found = h.find(t.name);
    ASSERT_NE(found, nullptr) << hexdump(t.name);
    EXPECT_EQ(found, &info);
  }
  EXPECT_EQ(h.data_size(), off);
  EXPECT_EQ(h.has_metadata(), c.md.has_value());
  if (c.md) {
    auto sorted = *c.md;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(h.metadata().entries(), sorted);
    for (const auto& [k, v] : *c.md) EXPECT_EQ(h.metadata_value(k), std::optional<std::string_view>(v));
  } else {
    EXPECT_TRUE(h.metadata().empty());
  }
}

void check_reader(const Case& c, const st::Reader& r, bool expect_mapped, const std::string& bytes) {
  SCOPED_TRACE(expect_mapped ? "mmap" : "pread");
  check_header(c, r.header(), bytes, "reader");
  const std::byte* base = r.source().mapped();
  EXPECT_EQ(base != nullptr, expect_mapped);
  EXPECT_EQ(r.source().size(), bytes.size());
  for (const auto& t : c.tensors) {
    auto v = r.tensor(t.name);
    ASSERT_TRUE(IsOk(v)) << hexdump(t.name);
    const safeweights::TensorEntry& e = **v;
    EXPECT_EQ(e.name, t.name);
    EXPECT_EQ(e.source, &r.source());
    EXPECT_EQ(e.offset, r.header().data_start() + r.header().find(t.name)->begin);
    EXPECT_EQ(e.nbytes, t.bytes.size());
    const auto view = e.view();
    if (expect_mapped) {
      if (!t.bytes.empty()) {
        // Zero-copy: the view points into the mapping.
        EXPECT_EQ(view.data(), base + e.offset);
        EXPECT_EQ(view.size(), t.bytes.size());
        EXPECT_EQ(to_string(view), to_string(t.bytes));
      }
    } else if (!t.bytes.empty()) {
      EXPECT_EQ(view.data(), nullptr);
    }
    std::vector<std::byte> buf(t.bytes.size());
    ASSERT_TRUE(IsOk(e.read(buf)));
    EXPECT_EQ(buf, t.bytes);
    auto owned = e.read_owned();
    ASSERT_TRUE(IsOk(owned));
    EXPECT_EQ(*owned, t.bytes);
  }
  EXPECT_TRUE(IsKind(r.tensor("\xff no such tensor"), K::TensorNotFound));
}

TEST(RoundTrip, RandomTensorsAndMetadata) {
  std::mt19937_64 rng(test_seed(0x5afe5afe));
  TempDir dir;
  int with_control = 0, with_quote = 0, with_unicode = 0, with_empty_name = 0, sub_byte = 0, zero_sized = 0, scalars = 0;
  for (int iter = 0; iter < 300; ++iter) {
    SCOPED_TRACE("case " + std::to_string(iter));
    const Case c = random_case(rng);
    for (const auto& t : c.tensors) {
      with_control += std::any_of(t.name.begin(), t.name.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x20; });
      with_quote += t.name.find_first_of("\"\\") != std::string::npos;
      with_unicode += std::any_of(t.name.begin(), t.name.end(), [](char ch) { return static_cast<unsigned char>(ch) >= 0x80; });
      with_empty_name += t.name.empty();
      sub_byte += safeweights::type_bits(t.dtype) < 8;
      zero_sized += t.bytes.empty();
      scalars += t.shape.empty();
    }
    auto tv = c.data();
    auto ser = st::serialize(tv, c.md);
    ASSERT_TRUE(IsOk(ser));
    const std::string bytes = to_string(*ser);

    // Input order does not matter.
    auto rev = tv;
    std::reverse(rev.begin(), rev.end());
    auto ser2 = st::serialize(rev, c.md);
    ASSERT_TRUE(IsOk(ser2));
    EXPECT_EQ(to_string(*ser2), bytes);

    // From memory.
    auto src = safeweights::memory_source(*ser, "<roundtrip>");
    auto h = st::Header::parse(*src);
    ASSERT_TRUE(IsOk(h)) << hexdump(bytes, 2000);
    check_header(c, *h, bytes, "memory");
    // The strict options accept everything the writer writes.
    st::ReadOptions strict;
    strict.reject_unknown_fields = true;
    EXPECT_TRUE(IsOk(st::Header::parse(*src, strict)));

    // From a file, both backends.
    const std::string path = dir.file("case" + std::to_string(iter % 4) + ".safetensors");
    ASSERT_TRUE(IsOk(st::write_file(path, tv, c.md)));
    ASSERT_EQ(read_file_bytes(path), bytes);
    {
      auto r = st::Reader::open(path, safeweights::FileBackend::Mmap);
      ASSERT_TRUE(IsOk(r));
      check_reader(c, *r, true, bytes);
    }
    {
      auto r = st::Reader::open(path, safeweights::FileBackend::Pread);
      ASSERT_TRUE(IsOk(r));
      check_reader(c, *r, false, bytes);
    }
    if (HasFatalFailure()) return;
  }
  // The generator really produced the hostile cases it is meant to.
  EXPECT_GT(with_control, 20);
  EXPECT_GT(with_quote, 20);
  EXPECT_GT(with_unicode, 20);
  EXPECT_GT(with_empty_name, 0);
  EXPECT_GT(sub_byte, 20);
  EXPECT_GT(zero_sized, 10);
  EXPECT_GT(scalars, 20);
}

// The loader (loader.h) over a Reader's entries: every tensor's bytes as written, for every backend and
// thread count.
TEST(RoundTrip, LoadHostMatchesPerTensorReads) {
  std::mt19937_64 rng(test_seed(77));
  TempDir dir;
  for (int iter = 0; iter < 20; ++iter) {
    const Case c = random_case(rng);
    auto tv = c.data();
    const std::string path = dir.file("m.safetensors");
    ASSERT_TRUE(IsOk(st::write_file(path, tv, c.md)));
    for (auto backend : {safeweights::FileBackend::Mmap, safeweights::FileBackend::Pread}) {
      auto r = st::Reader::open(path, backend);
      ASSERT_TRUE(IsOk(r));
      std::vector<safeweights::TensorEntry> entries;
      for (const auto& info : r->header().tensors()) entries.push_back(r->entry(info));
      for (unsigned threads : {0u, 1u, 3u}) {
        safeweights::LoaderOptions lo;
        lo.threads = threads;
        auto plan = safeweights::LoadPlan::make(entries, lo);
        ASSERT_TRUE(IsOk(plan));
        auto all = safeweights::load_host(*plan);
        ASSERT_TRUE(IsOk(all));
        ASSERT_EQ(plan->tensors().size(), c.tensors.size());
        for (const safeweights::PlacedTensor& placed : plan->tensors()) {
          const auto* t = c.find(placed.entry.name);
          ASSERT_NE(t, nullptr) << placed.entry.name;
          EXPECT_EQ(to_string(all->bytes_of(placed)), to_string(t->bytes));
        }
      }
    }
  }
}

TEST(RoundTrip, ReaderOverMemorySourceIsZeroCopy) {
  std::vector<std::byte> w(24);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<std::byte>(i);
  std::vector<TensorData> tv = {{"w", TensorType::F32, {2, 3}, w}};
  auto ser = st::serialize(tv, {});
  ASSERT_TRUE(IsOk(ser));
  auto owned = std::make_shared<std::vector<std::byte>>(std::move(*ser));
  auto src = safeweights::memory_source(*owned, "buf", owned);
  auto r = st::Reader::open(src);
  ASSERT_TRUE(IsOk(r));
  auto v = r->tensor("w");
  ASSERT_TRUE(IsOk(v));
  EXPECT_EQ((*v)->view().data(), owned->data() + (*v)->offset);
  EXPECT_EQ(to_string((*v)->view()), to_string(w));
  EXPECT_EQ(r->name(), "buf");
  // The reader keeps the source (and its keepalive) alive.
  owned.reset();
  src.reset();
  auto again = r->tensor("w").value()->read_owned();
  ASSERT_TRUE(IsOk(again));
  EXPECT_EQ(*again, w);
}

}  // namespace
