// SliceSpec parsing, and plan_slice + read_slice against a brute-force model of numpy basic indexing
// (Python slice semantics: negative indices, clamping, negative steps, zero-size dims, Ellipsis, None),
// read from a mapped source, a pread file source and an unmapped custom source.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "safeweights/safetensors_writer.h"
#include "safeweights/slice.h"
#include "test_util.h"

namespace {

using namespace swt;
namespace st = safeweights::safetensors;
using K = safeweights::ErrorKind;
using safeweights::SliceItem;
using safeweights::SliceSpec;
using Kind = safeweights::SliceItem::Kind;
using i128 = __int128;
using safeweights::Result;

constexpr std::int64_t kMax = INT64_MAX;
constexpr std::int64_t kMin = INT64_MIN;

// ---- the model -------------------------------------------------------------------------------------

struct Model {
  std::optional<K> error;
  std::vector<std::uint64_t> shape;  // result shape
  std::vector<std::uint64_t> elems;  // flat element index in the source, in result C order
};

// Python's PySlice_AdjustIndices on one dimension; returns the selected indices.
std::vector<std::uint64_t> python_range(std::uint64_t len_u, std::optional<std::int64_t> start_o, std::optional<std::int64_t> stop_o,
                                        std::int64_t step64) {
  const i128 len = static_cast<i128>(len_u);
  const i128 step = step64;
  const i128 lower = step < 0 ? -1 : 0;
  const i128 upper = step < 0 ? len - 1 : len;
  auto adjust = [&](std::optional<std::int64_t> v, i128 dflt) -> i128 {
    if (!v) return dflt;
    i128 x = *v;
    if (x < 0) {
      x += len;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  const i128 start = adjust(start_o, step < 0 ? upper : lower);
  const i128 stop = adjust(stop_o, step < 0 ? lower : upper);
  std::vector<std::uint64_t> out;
  if (step > 0) {
    for (i128 i = start; i < stop; i += step) out.push_back(static_cast<std::uint64_t>(i));
  } else {
    for (i128 i = start; i > stop; i += step) out.push_back(static_cast<std::uint64_t>(i));
  }
  return out;
}

Model model(const std::vector<std::uint64_t>& shape, const std::vector<SliceItem>& items) {
  Model m;
  const std::size_t rank = shape.size();
  std::size_t consuming = 0, ellipses = 0;
  for (const auto& it : items) {
    if (it.kind == Kind::Index || it.kind == Kind::Range) ++consuming;
    if (it.kind == Kind::Ellipsis) ++ellipses;
  }
  if (ellipses > 1) {
    m.error = K::InvalidSliceSpec;
    return m;
  }
  if (consuming > rank) {
    m.error = K::TooManySlices;
    return m;
  }
  std::vector<SliceItem> ex;
  bool seen = false;
  for (const auto& it : items) {
    if (it.kind == Kind::Ellipsis) {
      for (std::size_t k = 0; k < rank - consuming; ++k) ex.push_back(SliceItem::range());
      seen = true;
    } else {
      ex.push_back(it);
    }
  }
  if (!seen)
    for (std::size_t k = 0; k < rank - consuming; ++k) ex.push_back(SliceItem::range());
  std::vector<std::vector<std::uint64_t>> picks;  // per source dim
  for (const auto& it : ex) {
    const std::size_t d = picks.size();
    switch (it.kind) {
      case Kind::NewAxis: m.shape.push_back(1); break;
      case Kind::Index: {
        const i128 len = static_cast<i128>(shape[d]);
        i128 i = it.index;
        if (i < 0) i += len;
        if (i < 0 || i >= len) {
          m.error = K::SliceOutOfRange;
          return m;
        }
        picks.push_back({static_cast<std::uint64_t>(i)});
        break;
      }
      case Kind::Range: {
        const std::int64_t step = it.step.value_or(1);
        if (step == 0) {
          m.error = K::InvalidSliceSpec;
          return m;
        }
        picks.push_back(python_range(shape[d], it.start, it.stop, step));
        m.shape.push_back(picks.back().size());
        break;
      }
      case Kind::Ellipsis: break;
    }
  }
  // Cartesian product in source-dim order (new axes have size 1 and do not change the order).
  std::vector<std::uint64_t> strides(rank, 1);
  for (std::size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  std::vector<std::size_t> idx(rank, 0);
  for (const auto& p : picks)
    if (p.empty()) return m;
  for (;;) {
    std::uint64_t flat = 0;
    for (std::size_t d = 0; d < rank; ++d) flat += picks[d][idx[d]] * strides[d];
    m.elems.push_back(flat);
    std::size_t d = rank;
    for (;;) {
      if (d == 0) return m;
      --d;
      if (++idx[d] < picks[d].size()) break;
      idx[d] = 0;
    }
  }
}

// ---- sources ---------------------------------------------------------------------------------------

// An unmapped in-memory source that records the byte ranges it was asked for.
class RecordingSource : public safeweights::ByteSource {
 public:
  explicit RecordingSource(std::vector<std::byte> bytes) : bytes_(std::move(bytes)) {}
  const std::string& name() const noexcept override { return name_; }
  std::uint64_t size() const noexcept override { return bytes_.size(); }
  safeweights::Status read_at(std::uint64_t offset, std::span<std::byte> dst) const override {
    if (offset > bytes_.size() || dst.size() > bytes_.size() - offset) return safeweights::Error(K::OutOfRange, "read past end");
    std::copy_n(bytes_.begin() + static_cast<std::ptrdiff_t>(offset), dst.size(), dst.begin());
    std::lock_guard<std::mutex> lock(mu_);
    if (!dst.empty()) {
      lo_ = std::min(lo_, offset);
      hi_ = std::max(hi_, offset + dst.size());
    }
    return {};
  }
  void reset() {
    lo_ = UINT64_MAX;
    hi_ = 0;
  }
  std::uint64_t lo() const { return lo_; }
  std::uint64_t hi() const { return hi_; }

 private:
  std::vector<std::byte> bytes_;
  std::string name_ = "<recording>";
  mutable std::mutex mu_;
  mutable std::uint64_t lo_ = UINT64_MAX, hi_ = 0;
};

// ---- helpers ---------------------------------------------------------------------------------------

bool same_item(const SliceItem& a, const SliceItem& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Index: return a.index == b.index;
    case Kind::Range: return a.start == b.start && a.stop == b.stop && a.step == b.step;
    default: return true;
  }
}
std::string show(const std::vector<SliceItem>& items) {
  SliceSpec s;
  s.items = items;
  return "[" + s.to_string() + "]";
}
::testing::AssertionResult SameItems(const std::vector<SliceItem>& a, const std::vector<SliceItem>& b) {
  bool eq = a.size() == b.size();
  for (std::size_t i = 0; eq && i < a.size(); ++i) eq = same_item(a[i], b[i]);
  if (eq) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << show(a) << " vs " << show(b);
}

Result<SliceSpec> parse_spec(std::string_view text) { return SliceSpec::parse(text); }

// ---- parsing ---------------------------------------------------------------------------------------

TEST(SliceParse, Accepted) {
  using I = SliceItem;
  const std::vector<std::pair<std::string, std::vector<SliceItem>>> cases = {
      {"", {}},
      {"1", {I::at(1)}},
      {"-1", {I::at(-1)}},
      {"0", {I::at(0)}},
      {":", {I::range()}},
      {"::", {I::range()}},
      {"1:", {I::range(1)}},
      {":3", {I::range({}, 3)}},
      {"::2", {I::range({}, {}, 2)}},
      {"::-1", {I::range({}, {}, -1)}},
      {"1:2:", {I::range(1, 2)}},
      {"-3:-1:1", {I::range(-3, -1, 1)}},
      {" 1 : 2 : 3 ", {I::range(1, 2, 3)}},
      {"\t1:2\t,\t3\t", {I::range(1, 2), I::at(3)}},
      {"...", {I::ellipsis()}},
      {"..., 0", {I::ellipsis(), I::at(0)}},
      {"0,...", {I::at(0), I::ellipsis()}},
      {"None", {I::new_axis()}},
      {"None, :, None", {I::new_axis(), I::range(), I::new_axis()}},
      {"1, 2:, ::-2, ..., None", {I::at(1), I::range(2), I::range({}, {}, -2), I::ellipsis(), I::new_axis()}},
      {"1:3, ::-2, 0", {I::range(1, 3), I::range({}, {}, -2), I::at(0)}},
      {"::0", {I::range({}, {}, 0)}},
      {"0:99999999999999999999", {I::range(0, kMax)}},
      {"-99999999999999999999:", {I::range(kMin)}},
      {"9223372036854775807", {I::at(kMax)}},
      {"-9223372036854775808", {I::at(kMin)}},
      {"::-9223372036854775808", {I::range({}, {}, kMin)}},
  };
  for (const auto& [text, items] : cases) {
    auto r = parse_spec(text);
    ASSERT_TRUE(IsOk(r)) << "'" << text << "'";
    EXPECT_TRUE(SameItems(r->items, items)) << "'" << text << "'";
    // to_string renders something parse() reads back to the same items.
    auto again = parse_spec(r->to_string());
    ASSERT_TRUE(IsOk(again)) << "'" << r->to_string() << "'";
    EXPECT_TRUE(SameItems(again->items, items)) << "'" << text << "' -> '" << r->to_string() << "'";
  }
}

TEST(SliceParse, Rejected) {
  for (const char* text : {"1:2:3:4", "a",  "1.5",  "1,,2", ",",     ",1",  "1 2", ":::", "--1",          "[0",  "[0]", "[]", "[1:2, 3]", "0]",
                           "(0)",     "..", "....", "none", "Nonee", "1:a", "1e3", "0x1", "\xe2\x80\xa6", "1;2", "-",   "1-", ":-",       "::-"}) {
    EXPECT_TRUE(IsKind(parse_spec(text), K::InvalidSliceSpec)) << "'" << text << "'";
  }
}

// An index beyond 64 bits is out of bounds for every axis; the message shows it as written, not as
// the saturated INT64_MIN / INT64_MAX.
TEST(SliceParse, IndexBeyond64BitsIsOutOfRangeAsWritten) {
  for (const char* text : {"-99999999999999999999", "99999999999999999999", "1, -9223372036854775809"}) {
    auto spec = parse_spec(text);
    ASSERT_TRUE(IsKind(spec, K::SliceOutOfRange)) << text;
    const std::string message = spec.error().to_string();
    EXPECT_EQ(message.find("9223372036854775808"), std::string::npos) << message;
    EXPECT_EQ(message.find("9223372036854775807"), std::string::npos) << message;
    const std::string written = std::string(text).substr(std::string(text).find_last_of(' ') + 1);
    EXPECT_NE(message.find(written), std::string::npos) << message;
  }
  EXPECT_TRUE(IsOk(parse_spec("-9223372036854775808")));
}

TEST(SliceParse, ZeroStepFailsAtPlanTime) {
  auto spec = parse_spec("::0");
  ASSERT_TRUE(IsOk(spec));
  const std::vector<std::uint64_t> shape = {4};
  EXPECT_TRUE(IsKind(safeweights::plan_slice(shape, TensorType::F32, *spec), K::InvalidSliceSpec));
  auto spec2 = parse_spec("1, 0:4:0");
  ASSERT_TRUE(IsOk(spec2));
  const std::vector<std::uint64_t> shape2 = {4, 4};
  EXPECT_TRUE(IsKind(safeweights::plan_slice(shape2, TensorType::F32, *spec2), K::InvalidSliceSpec));
}

TEST(SliceParse, TwoEllipsesRejected) {
  auto spec = parse_spec("..., 0, ...");
  const std::vector<std::uint64_t> shape = {2, 2, 2};
  if (spec.is_ok()) {
    EXPECT_TRUE(IsKind(safeweights::plan_slice(shape, TensorType::U8, *spec), K::InvalidSliceSpec));
  } else {
    EXPECT_EQ(spec.error().kind(), K::InvalidSliceSpec) << describe(spec.error());
  }
}

// ---- planning errors ---------------------------------------------------------------------------------

Result<safeweights::SlicePlan> plan(std::vector<std::uint64_t> shape, TensorType dt, std::string_view text, std::uint64_t base = 0) {
  auto spec = SliceSpec::parse(text);
  if (!spec.is_ok()) return std::move(spec).error();
  return safeweights::plan_slice(shape, dt, *spec, base);
}

TEST(SlicePlanErrors, TooManySlices) {
  EXPECT_TRUE(IsKind(plan({2, 2}, TensorType::F32, "0,0,0"), K::TooManySlices));
  EXPECT_TRUE(IsKind(plan({2, 2}, TensorType::F32, ":,:,:"), K::TooManySlices));
  EXPECT_TRUE(IsKind(plan({2, 2}, TensorType::F32, "..., 0, 0, 0"), K::TooManySlices));
  EXPECT_TRUE(IsKind(plan({}, TensorType::F32, "0"), K::TooManySlices));
  EXPECT_TRUE(IsKind(plan({}, TensorType::F32, ":"), K::TooManySlices));
  EXPECT_TRUE(IsOk(plan({2, 2}, TensorType::F32, "None, 0, 0, None")));
  EXPECT_TRUE(IsOk(plan({2, 2}, TensorType::F32, "0, 0, ...")));
  EXPECT_TRUE(IsOk(plan({}, TensorType::F32, "...")));
  EXPECT_TRUE(IsOk(plan({}, TensorType::F32, "None")));
}

TEST(SlicePlanErrors, SliceOutOfRange) {
  EXPECT_TRUE(IsKind(plan({5, 5}, TensorType::F32, "5"), K::SliceOutOfRange));
  EXPECT_TRUE(IsKind(plan({5, 5}, TensorType::F32, "-6"), K::SliceOutOfRange));
  EXPECT_TRUE(IsKind(plan({10, 5}, TensorType::F32, "2:, 20"), K::SliceOutOfRange));
  EXPECT_TRUE(IsKind(plan({10, 5}, TensorType::F32, ":, -6"), K::SliceOutOfRange));
  EXPECT_TRUE(IsKind(plan({0}, TensorType::F32, "0"), K::SliceOutOfRange));
  EXPECT_TRUE(IsKind(plan({0}, TensorType::F32, "-1"), K::SliceOutOfRange));
  EXPECT_TRUE(IsKind(plan({3}, TensorType::F32, "9223372036854775807"), K::SliceOutOfRange));
  EXPECT_TRUE(IsKind(plan({3}, TensorType::F32, "-9223372036854775808"), K::SliceOutOfRange));
  // Ranges clamp instead (numpy), unlike the reference's get_slice.
  auto p = plan({10, 5}, TensorType::F32, ":20, :20");
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(p->shape(), (std::vector<std::uint64_t>{10, 5}));
  auto z = plan({0, 3}, TensorType::F32, ":, 1:");
  ASSERT_TRUE(IsOk(z));
  EXPECT_EQ(z->shape(), (std::vector<std::uint64_t>{0, 2}));
  EXPECT_EQ(z->nbytes(), 0u);
  EXPECT_EQ(z->run_count(), 0u);
}

TEST(SlicePlanErrors, HugeDimsBesideZeroDimDoNotOverflow) {
  // A valid file may hold shape [0, 2^64-1] (reference §1.5 caveat). Planning must not overflow.
  for (const char* spec : {"", ":", ":, ::2", "..., ::-3", "None, :, 5:"}) {
    auto p = plan({0, ~std::uint64_t{0}}, TensorType::F64, spec);
    if (p.is_ok()) {
      EXPECT_EQ(p->num_elements(), 0u) << spec;
      EXPECT_EQ(p->nbytes(), 0u) << spec;
      EXPECT_EQ(p->run_count(), 0u) << spec;
    }
  }
  EXPECT_TRUE(IsKind(plan({0, ~std::uint64_t{0}}, TensorType::F64, "0"), K::SliceOutOfRange));
}

// ---- sub-byte dtypes -----------------------------------------------------------------------------------

std::string read_plan(const safeweights::SlicePlan& p, const safeweights::ByteSource& src) {
  std::vector<std::byte> out(p.nbytes());
  EXPECT_TRUE(IsOk(safeweights::read_slice(src, p, out)));
  return to_string(out);
}

TEST(SliceSubByte, F4ByteAlignedSlicesWork) {
  // F4 [4, 2]: one byte per row. Bytes 'a' 'b' 'c' 'd'.
  auto src = mem("abcd", "f4");
  {
    auto p = plan({4, 2}, TensorType::F4, "1");
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(p->shape(), (std::vector<std::uint64_t>{2}));
    EXPECT_EQ(p->nbytes(), 1u);
    EXPECT_EQ(read_plan(*p, *src), "b");
  }
  {
    auto p = plan({4, 2}, TensorType::F4, "::-1");
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(read_plan(*p, *src), "dcba");
  }
  {
    auto p = plan({4, 2}, TensorType::F4, "1:3");
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(p->shape(), (std::vector<std::uint64_t>{2, 2}));
    EXPECT_EQ(read_plan(*p, *src), "bc");
  }
  {
    // [2, 4]: rows "ab" and "cd"; the first half of each row is one byte.
    auto p = plan({2, 4}, TensorType::F4, ":, 0:2");
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(read_plan(*p, *src), "ac");
  }
  {
    auto p = plan({2, 4}, TensorType::F4, "..., 2:");
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(read_plan(*p, *src), "bd");
  }
  {
    auto p = plan({8}, TensorType::F4, "2:6");
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(p->nbytes(), 2u);
    EXPECT_EQ(read_plan(*p, *src), "bc");
  }
  {
    // F6: 4 elements are 3 bytes. [2, 4] -> rows of 3 bytes.
    auto s6 = mem("abcdef", "f6");
    auto p = plan({2, 4}, TensorType::F6_E2M3, "1");
    ASSERT_TRUE(IsOk(p));
    EXPECT_EQ(p->nbytes(), 3u);
    EXPECT_EQ(read_plan(*p, *s6), "def");
  }
}

TEST(SliceSubByte, MisalignedSlicesRejected) {
  EXPECT_TRUE(IsKind(plan({4}, TensorType::F4, "1:3"), K::MisalignedSlice));
  EXPECT_TRUE(IsKind(plan({4}, TensorType::F4, "::2"), K::MisalignedSlice));
  EXPECT_TRUE(IsKind(plan({4}, TensorType::F4, "::-1"), K::MisalignedSlice));
  EXPECT_TRUE(IsKind(plan({4}, TensorType::F4, "1"), K::MisalignedSlice));
  EXPECT_TRUE(IsKind(plan({2, 4}, TensorType::F4, ":, ::2"), K::MisalignedSlice));
  EXPECT_TRUE(IsKind(plan({2, 3}, TensorType::F4, "1"), K::MisalignedSlice));
  EXPECT_TRUE(IsKind(plan({2, 3}, TensorType::F4, "0"), K::MisalignedSlice));
  EXPECT_TRUE(IsKind(plan({2, 2}, TensorType::F6_E3M2, "1"), K::MisalignedSlice));
  EXPECT_TRUE(IsKind(plan({8}, TensorType::F6_E2M3, "1:5"), K::MisalignedSlice));
  // The whole of an odd-row tensor is one aligned run.
  EXPECT_TRUE(IsOk(plan({2, 3}, TensorType::F4, ":")));
  EXPECT_TRUE(IsOk(plan({2, 3}, TensorType::F4, "")));
  EXPECT_TRUE(IsOk(plan({8}, TensorType::F6_E2M3, "4:")));
}

// ---- random cases against the model ---------------------------------------------------------------------

struct RandomSpec {
  std::vector<SliceItem> items;
  std::string text;
};

std::string render_int(std::int64_t v) { return std::to_string(v); }

RandomSpec random_spec(std::mt19937_64& rng, const std::vector<std::uint64_t>& shape) {
  RandomSpec rs;
  const std::size_t rank = shape.size();
  const bool too_many = rng() % 25 == 0;
  const std::size_t k = too_many ? rank + 1 : static_cast<std::size_t>(rng() % (rank + 1));
  const bool ellipsis = rng() % 3 == 0;
  const std::size_t ell_pos = ellipsis ? static_cast<std::size_t>(rng() % (k + 1)) : k;
  auto random_bound = [&]() -> std::optional<std::int64_t> {
    switch (rng() % 12) {
      case 0:
      case 1:
      case 2: return std::nullopt;
      case 3: return kMax;
      case 4: return kMin;
      default: return static_cast<std::int64_t>(rng() % 21) - 10;
    }
  };
  std::vector<SliceItem> consuming;
  for (std::size_t j = 0; j < k; ++j) {
    const std::size_t dim = j < ell_pos ? j : rank - (k - j);
    if (!too_many && rng() % 10 < 3) {
      const auto len = static_cast<std::int64_t>(shape[dim]);
      std::int64_t idx;
      if (rng() % 12 == 0 || len == 0) {
        idx = (rng() % 2) ? len : -len - 1;  // out of range
      } else {
        idx = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(2 * len)) - len;
      }
      consuming.push_back(SliceItem::at(idx));
    } else {
      std::optional<std::int64_t> step;
      switch (rng() % 10) {
        case 0:
        case 1:
        case 2:
        case 3: break;
        case 4: step = (rng() % 2) ? kMax : kMin; break;
        default: {
          static const std::int64_t steps[] = {-3, -2, -1, 1, 2, 3};
          step = steps[rng() % 6];
        }
      }
      consuming.push_back(SliceItem::range(random_bound(), random_bound(), step));
    }
  }
  for (std::size_t j = 0; j <= k; ++j) {
    if (j == ell_pos && ellipsis) rs.items.push_back(SliceItem::ellipsis());
    if (rng() % 8 == 0) rs.items.push_back(SliceItem::new_axis());
    if (j < k) rs.items.push_back(consuming[j]);
  }
  // Text, with random spacing and optional colons.
  auto sp = [&]() { return std::string(rng() % 4 == 0 ? 1 : 0, ' '); };
  for (std::size_t i = 0; i < rs.items.size(); ++i) {
    if (i) rs.text += sp() + "," + sp();
    const auto& it = rs.items[i];
    switch (it.kind) {
      case Kind::Index: rs.text += render_int(it.index); break;
      case Kind::Ellipsis: rs.text += "..."; break;
      case Kind::NewAxis: rs.text += "None"; break;
      case Kind::Range:
        if (it.start) rs.text += render_int(*it.start);
        rs.text += sp() + ":" + sp();
        if (it.stop) rs.text += render_int(*it.stop);
        if (it.step) {
          rs.text += ":" + render_int(*it.step);
        } else if (rng() % 3 == 0) {
          rs.text += ":";
        }
        break;
    }
  }
  return rs;
}

class SliceRandom : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng(1);
    pool_.resize(kPool);
    for (auto& b : pool_) b = static_cast<std::byte>(rng() & 0xff);
    mapped_ = safeweights::memory_source(pool_, "<pool>");
    path_ = dir_.file("pool.bin");
    write_file_bytes(path_, to_string(pool_));
    auto f = safeweights::open_file(path_, safeweights::FileBackend::Pread);
    ASSERT_TRUE(IsOk(f));
    pread_ = *f;
    recording_ = std::make_shared<RecordingSource>(pool_);
  }
  static constexpr std::size_t kPool = 1 << 16;
  TempDir dir_;
  std::string path_;
  std::vector<std::byte> pool_;
  safeweights::SourcePtr mapped_, pread_;
  std::shared_ptr<RecordingSource> recording_;
};

TEST_F(SliceRandom, MatchesPythonSemantics) {
  ASSERT_NE(mapped_->mapped(), nullptr);
  ASSERT_EQ(pread_->mapped(), nullptr);
  std::mt19937_64 rng(test_seed(0x511ce));
  const TensorType dtypes[] = {TensorType::U8,  TensorType::I8,  TensorType::BOOL, TensorType::F16, TensorType::BF16, TensorType::I16,
                               TensorType::F32, TensorType::I32, TensorType::U32,  TensorType::F64, TensorType::I64,  TensorType::C64};
  int ok_cases = 0, error_cases = 0, empty_results = 0, negative_steps = 0;
  for (int iter = 0; iter < 800; ++iter) {
    const TensorType dt = dtypes[rng() % std::size(dtypes)];
    const std::uint64_t es = safeweights::type_bits(dt) / 8;
    std::vector<std::uint64_t> shape(rng() % 5);
    std::uint64_t total = 1;
    for (auto& d : shape) {
      d = rng() % 8 == 0 ? 0 : 1 + rng() % 7;
      total *= d;
    }
    const RandomSpec rs = random_spec(rng, shape);
    SCOPED_TRACE("case " + std::to_string(iter) + ": dtype " + std::string(safeweights::type_name(dt)) + " shape [" +
                 [&] {
                   std::string s;
                   for (auto d : shape) s += std::to_string(d) + ",";
                   return s;
                 }() +
                 "] spec '" + rs.text + "'");
    for (const auto& it : rs.items)
      if (it.kind == Kind::Range && it.step && *it.step < 0) ++negative_steps;

    auto parsed = SliceSpec::parse(rs.text);
    ASSERT_TRUE(IsOk(parsed));
    ASSERT_TRUE(SameItems(parsed->items, rs.items));
    auto reparsed = SliceSpec::parse(parsed->to_string());
    ASSERT_TRUE(IsOk(reparsed)) << parsed->to_string();
    EXPECT_TRUE(SameItems(reparsed->items, rs.items)) << parsed->to_string();

    const Model m = model(shape, rs.items);
    const std::uint64_t base = rng() % (kPool - total * es + 1);
    auto p = safeweights::plan_slice(shape, dt, *parsed, base);
    if (m.error) {
      ++error_cases;
      EXPECT_TRUE(IsKind(p, *m.error));
      continue;
    }
    ASSERT_TRUE(IsOk(p));
    ++ok_cases;
    EXPECT_EQ(p->shape(), m.shape);
    EXPECT_EQ(p->num_elements(), m.elems.size());
    EXPECT_EQ(p->nbytes(), m.elems.size() * es);
    if (m.elems.empty()) ++empty_results;

    std::string expected;
    for (auto e : m.elems) expected += to_string(std::span(pool_).subspan(base + e * es, es));

    // The runs, walked directly.
    std::string walked;
    std::uint64_t runs = 0;
    bool runs_ok = true;
    p->for_each_run([&](std::uint64_t off, std::uint64_t len) {
      ++runs;
      runs_ok = runs_ok && len == p->run_bytes() && off >= base && off + len <= base + total * es;
      if (runs_ok) walked += to_string(std::span(pool_).subspan(off, len));
      return true;
    });
    EXPECT_TRUE(runs_ok) << "a run lies outside the tensor or has the wrong length";
    EXPECT_EQ(runs, p->run_count());
    EXPECT_EQ(walked, expected);
    EXPECT_EQ(p->run_count() * p->run_bytes(), p->nbytes());

    // read_slice from each kind of source.
    EXPECT_EQ(read_plan(*p, *mapped_), expected) << "mapped";
    EXPECT_EQ(read_plan(*p, *pread_), expected) << "pread";
    recording_->reset();
    EXPECT_EQ(read_plan(*p, *recording_), expected) << "unmapped";
    if (!expected.empty()) {
      EXPECT_GE(recording_->lo(), base) << "read before the tensor";
      EXPECT_LE(recording_->hi(), base + total * es) << "read past the tensor";
    }
  }
  EXPECT_GT(ok_cases, 400);
  EXPECT_GT(error_cases, 20);
  EXPECT_GT(empty_results, 20);
  EXPECT_GT(negative_steps, 100);
}

TEST_F(SliceRandom, ForEachRunStopsEarly) {
  auto p = plan({4, 4}, TensorType::F32, "::-1, ::2");
  ASSERT_TRUE(IsOk(p));
  ASSERT_GT(p->run_count(), 2u);
  int calls = 0;
  EXPECT_FALSE(p->for_each_run([&](std::uint64_t, std::uint64_t) { return ++calls < 2; }));
  EXPECT_EQ(calls, 2);
}

TEST_F(SliceRandom, ContiguousSliceIsOneRun) {
  auto p = plan({6, 5, 4}, TensorType::F32, "2:4", 100);
  ASSERT_TRUE(IsOk(p));
  EXPECT_EQ(p->run_count(), 1u);
  EXPECT_EQ(p->run_bytes(), 2u * 5 * 4 * 4);
  std::uint64_t first = 0;
  p->for_each_run([&](std::uint64_t off, std::uint64_t) {
    first = off;
    return true;
  });
  EXPECT_EQ(first, 100u + 2 * 5 * 4 * 4);
}

// ---- through the Reader -------------------------------------------------------------------------------

TEST(SliceReader, PlanOffsetsAreAbsoluteInTheFile) {
  TempDir dir;
  std::vector<std::byte> a(4 * 5 * 4), b(7);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::byte>(i);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::byte>(200 + i);
  std::vector<st::TensorData> tv = {{"a", TensorType::F32, {4, 5}, a}, {"b", TensorType::U8, {7}, b}};
  const std::string path = dir.file("m.safetensors");
  ASSERT_TRUE(IsOk(st::write_file(path, tv, st::MetadataEntries{{"k", "v"}})));
  for (auto backend : {safeweights::FileBackend::Mmap, safeweights::FileBackend::Pread}) {
    auto r = st::Reader::open(path, backend);
    ASSERT_TRUE(IsOk(r));
    const auto* ia = r->find("a");
    const auto* ib = r->find("b");
    ASSERT_NE(ia, nullptr);
    ASSERT_NE(ib, nullptr);
    {
      auto spec = SliceSpec::parse("::-2, 1:4");
      ASSERT_TRUE(IsOk(spec));
      auto p = ia->plan_slice(*spec);
      ASSERT_TRUE(IsOk(p));
      EXPECT_EQ(p->shape(), (std::vector<std::uint64_t>{2, 3}));
      std::vector<std::byte> out(p->nbytes());
      ASSERT_TRUE(IsOk(ia->read_slice(*p, out)));
      std::string expected;
      for (int row : {3, 1})
        for (int col = 1; col < 4; ++col) expected += to_string(std::span(a).subspan(static_cast<std::size_t>((row * 5 + col) * 4), 4));
      EXPECT_EQ(to_string(out), expected);
      p->for_each_run([&](std::uint64_t off, std::uint64_t len) {
        EXPECT_GE(off, ia->offset);
        EXPECT_LE(off + len, ia->offset + ia->nbytes);
        return true;
      });
    }
    {
      auto spec = SliceSpec::parse("-1");
      ASSERT_TRUE(IsOk(spec));
      auto p = ib->plan_slice(*spec);
      ASSERT_TRUE(IsOk(p));
      EXPECT_TRUE(p->shape().empty());
      std::vector<std::byte> out(1);
      ASSERT_TRUE(IsOk(ib->read_slice(*p, out)));
      EXPECT_EQ(out[0], std::byte{206});
    }
    {
      auto spec = SliceSpec::parse("0, 0, 0");
      ASSERT_TRUE(IsOk(spec));
      EXPECT_TRUE(IsKind(ia->plan_slice(*spec), K::TooManySlices));
    }
  }
}

}  // namespace

namespace {

// Block-quantized tensors: blocks run along the innermost dimension, so whole rows are the unit.
TEST(SliceBlockTypes, OuterDimensionsSliceInWholeRows) {
  using safeweights::SliceSpec;
  const std::vector<std::uint64_t> shape = {4, 64};  // Q8_0: 2 blocks of 34 bytes per row
  std::vector<std::byte> bytes(4 * 68);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 7 + 1);
  auto source = safeweights::memory_source(bytes);

  auto plan = safeweights::plan_slice(shape, TensorType::Q8_0, SliceSpec::parse("3:0:-2").value());
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_EQ(plan->shape(), (std::vector<std::uint64_t>{2, 64}));
  EXPECT_EQ(plan->num_elements(), 128u);
  ASSERT_EQ(plan->nbytes(), 2u * 68);
  std::vector<std::byte> out(plan->nbytes());
  ASSERT_TRUE(safeweights::read_slice(*source, *plan, out).is_ok());
  EXPECT_TRUE(std::equal(out.begin(), out.begin() + 68, bytes.begin() + 3 * 68));
  EXPECT_TRUE(std::equal(out.begin() + 68, out.end(), bytes.begin() + 1 * 68));

  auto row = safeweights::plan_slice(shape, TensorType::Q8_0, SliceSpec::parse("1, ...").value());
  ASSERT_TRUE(row.is_ok());
  EXPECT_EQ(row->shape(), (std::vector<std::uint64_t>{64}));
  EXPECT_EQ(row->nbytes(), 68u);

  for (const char* inner : {":, 0:32", ":, ::2", "..., 5", ":, ::-1"}) {
    auto r = safeweights::plan_slice(shape, TensorType::Q8_0, SliceSpec::parse(inner).value());
    ASSERT_FALSE(r.is_ok()) << inner;
    EXPECT_EQ(r.error().kind(), safeweights::ErrorKind::InvalidSliceSpec) << inner;
    EXPECT_NE(r.error().message().find("blocks of 32"), std::string::npos);
  }
}

// An unmapped source that counts scatter calls and the largest batch of bytes asked for at once.
class BatchCountingSource final : public safeweights::ByteSource {
 public:
  explicit BatchCountingSource(const std::vector<std::byte>& bytes) : bytes_(bytes) {}
  const std::string& name() const noexcept override { return name_; }
  std::uint64_t size() const noexcept override { return bytes_.size(); }
  safeweights::Status read_at(std::uint64_t offset, std::span<std::byte> dst) const override {
    if (auto s = check_range(offset, dst.size()); !s.is_ok()) return s;
    std::copy_n(bytes_.begin() + static_cast<std::ptrdiff_t>(offset), dst.size(), dst.begin());
    return {};
  }
  safeweights::Status read_scatter(std::span<const safeweights::ReadRequest> requests) const override {
    ++calls;
    std::uint64_t bytes = 0;
    for (const auto& r : requests) bytes += r.dst.size();
    largest = std::max(largest, bytes);
    return ByteSource::read_scatter(requests);
  }
  mutable int calls = 0;
  mutable std::uint64_t largest = 0;

 private:
  const std::vector<std::byte>& bytes_;
  std::string name_ = "<batches>";
};

// Every other column of a 16 MiB matrix: windows of at most 8 MiB, read in batches whose scratch stays
// within 8 MiB, and the same bytes as from the mapped source.
TEST(ReadSlice, UnmappedWindowsAreReadInBoundedBatches) {
  const std::uint64_t n = 4096;
  std::vector<std::byte> bytes(n * n);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>((i * 131) >> 3);
  const std::vector<std::uint64_t> shape = {n, n};
  for (const char* text : {":, ::2", "::3, 5:900", "7", "::-1, ::-4095"}) {
    auto spec = SliceSpec::parse(text);
    ASSERT_TRUE(spec.is_ok()) << text;
    auto plan = safeweights::plan_slice(shape, TensorType::U8, *spec);
    ASSERT_TRUE(plan.is_ok()) << text;
    auto mapped = safeweights::memory_source(bytes);
    std::vector<std::byte> want(static_cast<std::size_t>(plan->nbytes())), got(want.size());
    ASSERT_TRUE(safeweights::read_slice(*mapped, *plan, want).is_ok());
    BatchCountingSource unmapped(bytes);
    ASSERT_TRUE(safeweights::read_slice(unmapped, *plan, got).is_ok()) << text;
    EXPECT_TRUE(want == got) << text;
    EXPECT_LE(unmapped.largest, std::uint64_t{8} << 20) << text;
  }
}

}  // namespace
