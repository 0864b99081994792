// The computed expert sources (src/hf/expert_views.h): the transpose against indices worked out by
// hand, the MXFP4 repack against OCP's own decoding of the same codes (a lookup of E2M1 values times
// 2^(scale - 127), written here independently of ggml's block layout), reads at any offset, and every
// shape refused with InvalidArgument.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "hf/expert_views.h"
#include "safeweights/quantize.h"
#include "test_util.h"

using namespace safeweights;

namespace {

// An input tensor over `bytes` (kept alive by the caller's SourcePtr).
TensorEntry entry_of(const SourcePtr& source, TensorType type, const std::vector<std::uint64_t>& shape, std::string_view name = "t") {
  return TensorEntry{.name = name, .type = type, .shape = shape, .source = source.get(), .offset = 0, .nbytes = source->size()};
}

std::vector<std::byte> read_all(const ByteSource& s, std::uint64_t offset = 0) {
  std::vector<std::byte> out(static_cast<std::size_t>(s.size() - offset));
  EXPECT_TRUE(s.read_at(offset, out).is_ok());
  return out;
}

// Every read of `length` bytes at any offset gives those bytes of the whole (reads that start and end
// inside rows, and cross experts).
void expect_reads_agree(const ByteSource& s, const std::vector<std::byte>& whole, std::size_t length) {
  for (std::size_t at = 0; at + length <= whole.size(); ++at) {
    std::vector<std::byte> part(length);
    ASSERT_TRUE(s.read_at(at, part).is_ok());
    ASSERT_EQ(std::memcmp(part.data(), whole.data() + at, length), 0) << at;
  }
}

// [2, 3, 4] F32, element (e, r, c) = 100 e + 10 r + c.
std::vector<std::byte> indexed_experts() {
  std::vector<float> values;
  for (int e = 0; e < 2; ++e)
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 4; ++c) values.push_back(static_cast<float>(100 * e + 10 * r + c));
  std::vector<std::byte> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

TEST(ExpertViews, TransposeReadsAFileWithoutAMapping) {
  swt::TempDir dir;
  const auto bytes = indexed_experts();
  const std::string path = dir.file("experts.bin");
  swt::write_file_bytes(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  auto file = open_file(path, FileBackend::Pread);
  ASSERT_TRUE(file.is_ok());
  ASSERT_EQ((*file)->mapped(), nullptr);  // the scattered reads, not the mapping's copy
  const std::vector<std::uint64_t> shape = {2, 3, 4};
  auto s = hf::transposed_source(entry_of(*file, TensorType::F32, shape), {.begin = 0, .step = 1, .count = 4});
  ASSERT_TRUE(s.is_ok()) << s.error().to_string();
  const auto out = read_all(**s);
  std::vector<float> got(out.size() / 4);
  std::memcpy(got.data(), out.data(), out.size());
  // Output [2, 4, 3]: (e, c, r) = input (e, r, c).
  for (int e = 0; e < 2; ++e)
    for (int c = 0; c < 4; ++c)
      for (int r = 0; r < 3; ++r) EXPECT_EQ(got[(e * 4 + c) * 3 + r], static_cast<float>(100 * e + 10 * r + c));
  expect_reads_agree(**s, out, 13);
}

TEST(ExpertViews, TransposeTakesStridedColumnsOfEachExpert) {
  const SourcePtr in = owned_memory_source(indexed_experts());
  const std::vector<std::uint64_t> shape = {2, 3, 4};
  auto s = hf::transposed_source(entry_of(in, TensorType::F32, shape), {.begin = 1, .step = 2, .count = 2});
  ASSERT_TRUE(s.is_ok()) << s.error().to_string();
  ASSERT_EQ((*s)->size(), 2u * 2 * 3 * 4);
  const auto out = read_all(**s);
  std::vector<float> got(out.size() / 4);
  std::memcpy(got.data(), out.data(), out.size());
  // Output [2, 2, 3]: (e, j, r) = input (e, r, 1 + 2 j).
  const std::vector<float> want = {1, 11, 21, 3, 13, 23, 101, 111, 121, 103, 113, 123};
  EXPECT_EQ(got, want);
  expect_reads_agree(**s, out, 20);
  std::vector<std::byte> past(8);
  EXPECT_EQ((*s)->read_at(44, past).error().kind(), ErrorKind::OutOfRange);
}

TEST(ExpertViews, TransposeRefusesWhatItCannotTranspose) {
  const SourcePtr in = owned_memory_source(std::vector<std::byte>(2 * 3 * 4 * 4));
  const std::vector<std::uint64_t> flat = {24}, shape = {2, 3, 4};
  EXPECT_EQ(hf::transposed_source(entry_of(in, TensorType::F32, flat), {.count = 1}).error().kind(), ErrorKind::InvalidArgument);
  EXPECT_EQ(hf::transposed_source(entry_of(in, TensorType::F32, shape), {.begin = 1, .step = 2, .count = 3}).error().kind(),
            ErrorKind::InvalidArgument);
  EXPECT_EQ(hf::transposed_source(entry_of(in, TensorType::F32, shape), {.begin = 0, .step = 0, .count = 1}).error().kind(),
            ErrorKind::InvalidArgument);
  const std::vector<std::uint64_t> q = {2, 3, 32};
  EXPECT_EQ(hf::transposed_source(entry_of(in, TensorType::Q8_0, q), {.count = 1}).error().kind(), ErrorKind::InvalidArgument);
}

// OCP MXFP4's value of element i of a block: E2M1 code i (low nibble first) times 2^(scale - 127).
float ocp_value(const std::uint8_t* codes, std::uint8_t scale, int i) {
  static constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const unsigned code = (codes[i / 2] >> (i % 2 * 4)) & 0xF;
  const float magnitude = kE2M1[code & 7] * std::ldexp(1.0f, scale - 127);
  return code & 8 ? -magnitude : magnitude;
}

TEST(ExpertViews, Mxfp4RepackDecodesAsTheOcpBlocks) {
  // [1 expert, 4 rows, 2 blocks, 16] codes and [1, 4, 2] scales; rows 1 and 3 taken (step 2).
  std::vector<std::uint8_t> codes(4 * 2 * 16), scales = {120, 127, 130, 125, 126, 128, 131, 119};
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::uint8_t>(i * 37 + 11);
  const SourcePtr b = owned_memory_source(
      std::vector<std::byte>(reinterpret_cast<std::byte*>(codes.data()), reinterpret_cast<std::byte*>(codes.data()) + codes.size()));
  const SourcePtr s = owned_memory_source(
      std::vector<std::byte>(reinterpret_cast<std::byte*>(scales.data()), reinterpret_cast<std::byte*>(scales.data()) + scales.size()));
  const std::vector<std::uint64_t> bshape = {1, 4, 2, 16}, sshape = {1, 4, 2};
  auto r = hf::mxfp4_repacked_source(entry_of(b, TensorType::U8, bshape), entry_of(s, TensorType::U8, sshape), {.begin = 1, .step = 2, .count = 2});
  ASSERT_TRUE(r.is_ok()) << r.error().to_string();
  ASSERT_EQ((*r)->size(), 2u * 2 * 17);
  const auto out = read_all(**r);
  std::vector<float> got(2 * 64);
  ASSERT_TRUE(dequantize(TensorType::MXFP4, out, got).is_ok());
  for (int j = 0; j < 2; ++j) {
    const int row = 1 + 2 * j;
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(std::to_integer<int>(out[(j * 2 + k) * 17]), scales[row * 2 + k]);  // the scale byte first
      for (int i = 0; i < 32; ++i) {
        EXPECT_EQ(got[j * 64 + k * 32 + i], ocp_value(&codes[(row * 2 + k) * 16], scales[row * 2 + k], i)) << j << " " << k << " " << i;
      }
    }
  }
  expect_reads_agree(**r, out, 20);
  const auto tail = read_all(**r, 5);
  EXPECT_EQ(std::memcmp(tail.data(), out.data() + 5, tail.size()), 0);
}

TEST(ExpertViews, Mxfp4RepackRefusesPairsThatDoNotMatch) {
  const SourcePtr b = owned_memory_source(std::vector<std::byte>(4 * 2 * 16)), s = owned_memory_source(std::vector<std::byte>(8));
  const std::vector<std::uint64_t> bshape = {1, 4, 2, 16}, sshape = {1, 4, 2}, wrong = {1, 4, 3}, bad16 = {1, 4, 4, 8};
  const auto kind = [&](const TensorEntry& blocks, const TensorEntry& scales, hf::Strided rows) {
    return hf::mxfp4_repacked_source(blocks, scales, rows).error().kind();
  };
  EXPECT_EQ(kind(entry_of(b, TensorType::U8, bshape), entry_of(s, TensorType::U8, wrong), {.count = 1}), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind(entry_of(b, TensorType::U8, bad16), entry_of(s, TensorType::U8, sshape), {.count = 1}), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind(entry_of(b, TensorType::F32, bshape), entry_of(s, TensorType::U8, sshape), {.count = 1}), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind(entry_of(b, TensorType::U8, bshape), entry_of(s, TensorType::U8, sshape), {.begin = 3, .step = 1, .count = 2}),
            ErrorKind::InvalidArgument);
}

}  // namespace
