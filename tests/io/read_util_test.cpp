// read_small / read_small_file / copy_range (internal io/read_util.h) and the string helpers.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/strings.h"
#include "core/status_macros.h"
#include "io/read_util.h"
#include "test_util.h"

namespace {

using safeweights::ErrorKind;
using safeweights::Status;

TEST(ReadSmall, ReadsUpToTheCapAndNamesTheFile) {
  swt::TempDir dir;
  swt::write_file_bytes(dir.file("a.json"), "{\"x\": 1}");
  auto text = safeweights::read_small_file(dir.file("a.json"), 8);
  ASSERT_TRUE(text.is_ok());
  EXPECT_EQ(*text, "{\"x\": 1}");
  auto big = safeweights::read_small_file(dir.file("a.json"), 7);
  ASSERT_FALSE(big.is_ok());
  EXPECT_EQ(big.error().kind(), ErrorKind::ResourceLimit);
  EXPECT_EQ(big.error().context().file, dir.file("a.json"));
  auto missing = safeweights::read_small_file(dir.file("none.json"), 100);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.error().kind(), ErrorKind::FileNotFound);
  EXPECT_EQ(missing.error().context().file, dir.file("none.json"));
  auto folder = safeweights::read_small_file(dir.path(), 100);
  ASSERT_FALSE(folder.is_ok());
  EXPECT_EQ(folder.error().kind(), ErrorKind::IoError);
  swt::write_file_bytes(dir.file("empty"), "");
  auto empty = safeweights::read_small_file(dir.file("empty"), 0);
  ASSERT_TRUE(empty.is_ok());
  EXPECT_TRUE(empty->empty());
}

// A source that is not mapped, so copy_range takes its chunked path.
class Unmapped final : public safeweights::ByteSource {
 public:
  explicit Unmapped(std::string bytes) : bytes_(std::move(bytes)) {}
  const std::string& name() const noexcept override { return name_; }
  std::uint64_t size() const noexcept override { return bytes_.size(); }
  Status read_at(std::uint64_t offset, std::span<std::byte> dst) const override {
    SW_RETURN_IF_ERROR(check_range(offset, dst.size()));
    std::memcpy(dst.data(), bytes_.data() + offset, dst.size());
    return Status::ok();
  }

 private:
  std::string name_ = "unmapped";
  std::string bytes_;
};

TEST(CopyRange, MappedInOnePieceUnmappedInChunks) {
  const std::string content = "0123456789abcdefghij";
  Unmapped unmapped(content);
  auto mapped = swt::mem(content, "mapped");
  for (const safeweights::ByteSource* src : {static_cast<const safeweights::ByteSource*>(&unmapped), mapped.get()}) {
    std::string out;
    int pieces = 0;
    ASSERT_TRUE(safeweights::copy_range(*src, 3, 15, 4, [&](std::span<const std::byte> part) {
                  out.append(reinterpret_cast<const char*>(part.data()), part.size());
                  ++pieces;
                  return Status::ok();
                }).is_ok());
    EXPECT_EQ(out, content.substr(3, 15));
    EXPECT_EQ(pieces, src->mapped() ? 1 : 4);
    EXPECT_FALSE(safeweights::copy_range(*src, 10, 11, 4, [](std::span<const std::byte>) { return Status::ok(); }).is_ok());
    // The sink's error stops the copy.
    int calls = 0;
    Status s = safeweights::copy_range(*src, 0, 20, 4, [&](std::span<const std::byte>) -> Status {
      ++calls;
      return safeweights::Error(ErrorKind::IoError, "disk full");
    });
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(calls, 1);
  }
}

TEST(Strings, TrimAndFolderOf) {
  EXPECT_EQ(safeweights::trim(" \t a b \t"), "a b");
  EXPECT_EQ(safeweights::trim("  "), "");
  EXPECT_EQ(safeweights::trim(""), "");
  EXPECT_EQ(safeweights::trim("\r\nx\r\n"), "\r\nx\r\n");
  EXPECT_EQ(safeweights::trim("\r\nx \r\n", " \t\r\n"), "x");
  EXPECT_EQ(safeweights::folder_of("a.json"), ".");
  EXPECT_EQ(safeweights::folder_of("/a.json"), "/");
  EXPECT_EQ(safeweights::folder_of("x/y/a.json"), "x/y");
}

}  // namespace
