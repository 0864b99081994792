// Atomic writes (AtomicFile, write_file, the safetensors sink): permissions, replacement, failure leaves the old
// target and no temporary files, and streaming in any order produces the bytes of serialize().
#include <gtest/gtest.h>

#include <csignal>
#include <functional>
#include <cstring>
#include <random>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/input_files.h"
#include "safeweights/atomic_file.h"
#include "safeweights/cancel.h"
#include "safeweights/gguf.h"
#include "safeweights/safetensors_writer.h"
#include "safeweights/sharded.h"
#include "test_util.h"

namespace {

using namespace swt;
namespace st = safeweights::safetensors;
using K = safeweights::ErrorKind;
using safeweights::AtomicFile;
using st::MetadataEntries;
using st::TensorData;
using st::TensorDecl;

struct UmaskGuard {
  explicit UmaskGuard(mode_t m) : old(::umask(m)) {}
  ~UmaskGuard() { ::umask(old); }
  mode_t old;
};

mode_t mode_of(const std::string& path) {
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0) return static_cast<mode_t>(-1);
  return sb.st_mode & 07777;
}

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>(rng() & 0xff);
  return v;
}

struct Model {
  std::vector<TensorDecl> decls;
  std::vector<std::vector<std::byte>> bytes;
  std::vector<TensorData> data() const {
    std::vector<TensorData> v;
    for (std::size_t i = 0; i < decls.size(); ++i) v.push_back({decls[i].name, decls[i].dtype, decls[i].shape, bytes[i]});
    return v;
  }
};

Model small_model() {
  Model m;
  m.decls = {{"w", TensorType::F32, {4, 8}},
             {"b", TensorType::F16, {8}},
             {"e", TensorType::I8, {0, 3}},
             {"s", TensorType::U8, {5}},
             {"h", TensorType::F4, {2, 4}}};
  unsigned seed = 1;
  for (const auto& d : m.decls) {
    std::uint64_t n = 1;
    for (auto x : d.shape) n *= x;
    m.bytes.push_back(pattern(byte_size(d.dtype, n).value(), seed++));
  }
  return m;
}

std::string serialize_model(const Model& m, const std::optional<MetadataEntries>& md = {}) {
  auto tv = m.data();
  auto r = st::serialize(tv, md);
  EXPECT_TRUE(IsOk(r));
  return r.is_ok() ? to_string(*r) : std::string();
}

// ---- permissions -----------------------------------------------------------------------------------

TEST(AtomicWrite, NewFileModeFollowsUmask022) {
  UmaskGuard g(022);
  TempDir dir;
  Model m = small_model();
  auto tv = m.data();
  const std::string p = dir.file("a.safetensors");
  ASSERT_TRUE(IsOk(st::write_file(p, tv)));
  EXPECT_EQ(mode_of(p), 0644u) << std::oct << mode_of(p);
}

TEST(AtomicWrite, NewFileModeFollowsUmask077) {
  UmaskGuard g(077);
  TempDir dir;
  Model m = small_model();
  auto tv = m.data();
  const std::string p = dir.file("a.safetensors");
  ASSERT_TRUE(IsOk(st::write_file(p, tv)));
  EXPECT_EQ(mode_of(p), 0600u) << std::oct << mode_of(p);
}

TEST(AtomicWrite, NewFileModeFollowsUmask002) {
  UmaskGuard g(002);
  TempDir dir;
  Model m = small_model();
  auto tv = m.data();
  const std::string p = dir.file("a.safetensors");
  ASSERT_TRUE(IsOk(st::write_file(p, tv)));
  EXPECT_EQ(mode_of(p), 0664u) << std::oct << mode_of(p);
}

TEST(AtomicWrite, SinkAndAtomicFileModesFollowUmask) {
  UmaskGuard g(027);
  TempDir dir;
  Model m = small_model();
  {
    auto w = st::create(dir.file("s.safetensors"), m.decls);
    ASSERT_TRUE(IsOk(w));
    for (std::size_t i = 0; i < m.decls.size(); ++i) ASSERT_TRUE(IsOk((*w)->write(m.decls[i].name, m.bytes[i])));
    ASSERT_TRUE(IsOk((*w)->finish()));
  }
  EXPECT_EQ(mode_of(dir.file("s.safetensors")), 0640u) << std::oct << mode_of(dir.file("s.safetensors"));
  {
    auto f = AtomicFile::create(dir.file("raw.bin"));
    ASSERT_TRUE(IsOk(f));
    ASSERT_TRUE(IsOk(f->append(to_bytes("hello"))));
    ASSERT_TRUE(IsOk(f->commit()));
  }
  EXPECT_EQ(mode_of(dir.file("raw.bin")), 0640u);
  EXPECT_EQ(read_file_bytes(dir.file("raw.bin")), "hello");
}

TEST(AtomicWrite, ReplacingKeepsExistingMode) {
  UmaskGuard g(022);
  TempDir dir;
  const std::string p = dir.file("a.safetensors");
  write_file_bytes(p, "old contents");
  ASSERT_EQ(::chmod(p.c_str(), 0604), 0);
  Model m = small_model();
  auto tv = m.data();
  ASSERT_TRUE(IsOk(st::write_file(p, tv)));
  EXPECT_EQ(mode_of(p), 0604u) << std::oct << mode_of(p);
  EXPECT_EQ(read_file_bytes(p), serialize_model(m));
  // And a restrictive umask does not narrow an existing file's mode.
  UmaskGuard g2(077);
  ASSERT_EQ(::chmod(p.c_str(), 0664), 0);
  ASSERT_TRUE(IsOk(st::write_file(p, tv)));
  EXPECT_EQ(mode_of(p), 0664u) << std::oct << mode_of(p);
  EXPECT_EQ(dir.list(), std::vector<std::string>{"a.safetensors"});
}

TEST(AtomicWrite, ReplacementIsANewInode) {
  // Readers holding the old file (e.g. an mmap) keep seeing the old bytes.
  TempDir dir;
  const std::string p = dir.file("a.safetensors");
  Model m = small_model();
  auto tv = m.data();
  ASSERT_TRUE(IsOk(st::write_file(p, tv)));
  auto old_reader = st::Reader::open(p, safeweights::FileBackend::Mmap);
  ASSERT_TRUE(IsOk(old_reader));
  auto before = old_reader->tensor("w").value()->read_owned();
  ASSERT_TRUE(IsOk(before));
  Model m2 = small_model();
  m2.bytes[0] = pattern(m2.bytes[0].size(), 99);
  auto tv2 = m2.data();
  ASSERT_TRUE(IsOk(st::write_file(p, tv2)));
  auto still = old_reader->tensor("w").value()->read_owned();
  ASSERT_TRUE(IsOk(still));
  EXPECT_EQ(*still, *before);
  auto fresh = st::Reader::open(p);
  ASSERT_TRUE(IsOk(fresh));
  auto now = fresh->tensor("w").value()->read_owned();
  ASSERT_TRUE(IsOk(now));
  EXPECT_EQ(*now, m2.bytes[0]);
}

// ---- AtomicFile ------------------------------------------------------------------------------------

// The bytes written through an AtomicFile, committed, in either mode.
void check_commit_append_pwrite_truncate(const safeweights::AtomicFileOptions& options) {
  TempDir dir;
  const std::string p = dir.file("f.bin");
  auto f = AtomicFile::create(p, options);
  ASSERT_TRUE(IsOk(f));
  EXPECT_EQ(f->target(), p);
  EXPECT_FALSE(fs::exists(p));
  ASSERT_TRUE(IsOk(f->append(to_bytes("abc"))));
  ASSERT_TRUE(IsOk(f->append(to_bytes("def"))));
  EXPECT_EQ(f->append_position(), 6u);
  ASSERT_TRUE(IsOk(f->pwrite(1, to_bytes("XY"))));
  EXPECT_EQ(f->append_position(), 6u);
  ASSERT_TRUE(IsOk(f->truncate(8)));
  EXPECT_FALSE(fs::exists(p));
  ASSERT_TRUE(IsOk(f->commit()));
  EXPECT_EQ(read_file_bytes(p), std::string("aXYdef\0\0", 8));
  EXPECT_EQ(dir.list(), std::vector<std::string>{"f.bin"});
}

safeweights::AtomicFileOptions named_options() {
  safeweights::AtomicFileOptions o;
  o.named_temporary = true;
  return o;
}

TEST(AtomicFileTest, CommitAppendPwriteTruncate) { check_commit_append_pwrite_truncate({}); }
TEST(AtomicFileTest, CommitAppendPwriteTruncateNamedFallback) { check_commit_append_pwrite_truncate(named_options()); }

// Where O_TMPFILE works (every filesystem a test folder is on here), the uncommitted file has no name.
TEST(AtomicFileTest, UncommittedFileHasNoName) {
  TempDir dir;
  auto f = AtomicFile::create(dir.file("f.bin"));
  ASSERT_TRUE(IsOk(f));
  ASSERT_TRUE(IsOk(f->append(to_bytes("data"))));
  EXPECT_EQ(f->temp_path(), "");
  EXPECT_TRUE(dir.list().empty());
}

// The named fallback: the temporary file lives in the target's folder, under a hidden name.
TEST(AtomicFileTest, NamedFallbackLivesBesideTarget) {
  TempDir dir;
  const std::string p = dir.file("f.bin");
  auto f = AtomicFile::create(p, named_options());
  ASSERT_TRUE(IsOk(f));
  EXPECT_NE(f->temp_path(), p);
  EXPECT_EQ(fs::path(f->temp_path()).parent_path(), fs::path(p).parent_path());
  EXPECT_TRUE(fs::exists(f->temp_path()));
}

TEST(AtomicFileTest, ReplaceNamelessAndNamed) {
  for (bool named : {false, true}) {
    TempDir dir;
    const std::string p = dir.file("f.bin");
    write_file_bytes(p, "old");
    ::chmod(p.c_str(), 0640);
    safeweights::AtomicFileOptions o;
    o.named_temporary = named;
    auto f = AtomicFile::create(p, o);
    ASSERT_TRUE(IsOk(f));
    ASSERT_TRUE(IsOk(f->append(to_bytes("new"))));
    EXPECT_EQ(read_file_bytes(p), "old");
    ASSERT_TRUE(IsOk(f->commit()));
    EXPECT_EQ(read_file_bytes(p), "new");
    EXPECT_EQ(mode_of(p), 0640u);
    EXPECT_EQ(dir.list(), std::vector<std::string>{"f.bin"});
  }
}

// ---- existing targets that are not regular files -----------------------------------------------------
// (Device nodes, as root in a private mount namespace, are tests/io/special_targets_test.py's: these
// need no privilege.)

bool is_fifo(const std::string& path) {
  struct stat sb {};
  return ::lstat(path.c_str(), &sb) == 0 && S_ISFIFO(sb.st_mode);
}

TEST(AtomicFileTest, AFifoIsNeverReplaced) {
  for (bool named : {false, true}) {
    TempDir dir;
    const std::string fifo = dir.file("out.gguf");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    std::filesystem::create_symlink("out.gguf", dir.file("link.gguf"));
    for (const std::string& target : {fifo, dir.file("link.gguf")}) {
      safeweights::AtomicFileOptions o;
      o.named_temporary = named;
      auto f = AtomicFile::create(target, o);
      ASSERT_FALSE(f.is_ok()) << target;
      EXPECT_EQ(f.error().kind(), K::UnsafePath);
      EXPECT_EQ(f.error().message(), "the output is a FIFO, not a regular file: it is never replaced by one (name a regular file)");
      EXPECT_EQ(f.error().context().file, target);
    }
    // And through a writer: no FIFO replaced, nothing left beside it.
    auto m = small_model();
    auto written = st::write_file(fifo, m.data());
    ASSERT_FALSE(written.is_ok());
    EXPECT_EQ(written.error().kind(), K::UnsafePath);
    EXPECT_TRUE(is_fifo(fifo));
    EXPECT_EQ(dir.list(), (std::vector<std::string>{"link.gguf", "out.gguf"}));
  }
}

TEST(AtomicFileTest, AStreamingWriterWritesIntoAFifoInOrder) {
  TempDir dir;
  const std::string fifo = dir.file("out.bin");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::filesystem::create_symlink("out.bin", dir.file("link.bin"));
  for (const std::string& target : {fifo, dir.file("link.bin")}) {
    std::string received;
    std::thread reader([&] { received = read_file_bytes(fifo); });
    safeweights::AtomicFileOptions o;
    o.stream = true;
    o.preallocate = 1 << 20;  // nothing to reserve in a stream
    auto f = AtomicFile::create(target, o);
    if (!f.is_ok()) {  // the reader is not left waiting
      ::close(::open(fifo.c_str(), O_WRONLY));
      reader.join();
    }
    ASSERT_TRUE(IsOk(f));
    EXPECT_TRUE(f->streaming());
    ASSERT_TRUE(IsOk(f->append(to_bytes("abc"))));
    ASSERT_TRUE(IsOk(f->pwrite(3, to_bytes("de"))));  // at the end: in order
    auto back = f->pwrite(1, to_bytes("x"));
    ASSERT_FALSE(back.is_ok());
    EXPECT_EQ(back.error().kind(), K::InvalidArgument);
    EXPECT_EQ(back.error().message(), "the output is a stream, written in order: a write at byte 1 after 5 bytes");
    EXPECT_TRUE(IsOk(f->truncate(5)));
    EXPECT_EQ(f->truncate(9).error().kind(), K::InvalidArgument);
    ASSERT_TRUE(IsOk(f->commit()));
    reader.join();
    EXPECT_EQ(received, "abcde");
    EXPECT_TRUE(is_fifo(fifo));
    EXPECT_EQ(dir.list(), (std::vector<std::string>{"link.bin", "out.bin"}));
  }
}

TEST(AtomicFileTest, ALinkToARegularFileStaysALink) {
  for (bool named : {false, true}) {
    TempDir dir;
    std::filesystem::create_directory(dir.file("real"));
    write_file_bytes(dir.file("real/f.bin"), "old");
    std::filesystem::create_symlink("real/f.bin", dir.file("link.bin"));
    safeweights::AtomicFileOptions o;
    o.named_temporary = named;
    auto f = AtomicFile::create(dir.file("link.bin"), o);
    ASSERT_TRUE(IsOk(f));
    ASSERT_TRUE(IsOk(f->append(to_bytes("new"))));
    ASSERT_TRUE(IsOk(f->commit()));
    // The file the link names is replaced where it lies; the link still names it.
    EXPECT_TRUE(std::filesystem::is_symlink(dir.file("link.bin")));
    EXPECT_EQ(read_file_bytes(dir.file("real/f.bin")), "new");
    EXPECT_EQ(dir.list(), (std::vector<std::string>{"link.bin", "real"}));
    EXPECT_EQ(std::filesystem::directory_iterator(dir.file("real"))->path().filename(), "f.bin");
  }
}

// ---- no output replaces an input (io/input_files.h; the commands' routes are convert_test's and
// dduf_cli_writes') ------------------------------------------------------------------------------------

TEST(InputFiles, KnownByIdentityAndNeverByAUrl) {
  TempDir dir;
  write_file_bytes(dir.file("in.bin"), "x");
  write_file_bytes(dir.file("other.bin"), "y");
  std::filesystem::create_directory(dir.file("sub"));
  safeweights::InputFiles inputs;
  inputs.add(dir.file("sub/../in.bin"));
  inputs.add("https://example.com" + dir.file("other.bin"));  // remote: never a local file
  inputs.add(dir.file("missing.bin"));
  EXPECT_EQ(inputs.names(), std::vector<std::string>{dir.file("sub/../in.bin")});
  auto same = inputs.check_output(dir.file("./in.bin"));
  ASSERT_FALSE(same.is_ok());
  EXPECT_EQ(same.error().kind(), K::InvalidArgument);
  EXPECT_EQ(same.error().context().file, dir.file("./in.bin"));
  EXPECT_TRUE(IsOk(inputs.check_output(dir.file("other.bin"))));
  EXPECT_TRUE(IsOk(inputs.check_output(dir.file("new.bin"))));
  // A folder replaced whole must not hold one, however deep.
  EXPECT_EQ(inputs.check_outside(dir.path()).error().kind(), K::InvalidArgument);
  EXPECT_TRUE(IsOk(inputs.check_outside(dir.file("sub"))));
}

TEST(AtomicFileTest, DestructorRemovesTemporary) {
  for (bool named : {false, true}) {
    TempDir dir;
    const std::string p = dir.file("f.bin");
    write_file_bytes(p, "original");
    std::string temp;
    {
      safeweights::AtomicFileOptions o;
      o.named_temporary = named;
      auto f = AtomicFile::create(p, o);
      ASSERT_TRUE(IsOk(f));
      temp = f->temp_path();
      ASSERT_TRUE(IsOk(f->append(to_bytes("new bytes that never land"))));
      EXPECT_EQ(fs::exists(temp), named);
    }
    EXPECT_FALSE(fs::exists(temp));
    EXPECT_EQ(read_file_bytes(p), "original");
    EXPECT_EQ(dir.list(), std::vector<std::string>{"f.bin"});
  }
}

TEST(AtomicFileTest, AbandonRemovesTemporaryNow) {
  TempDir dir;
  const std::string p = dir.file("f.bin");
  auto f = AtomicFile::create(p, named_options());
  ASSERT_TRUE(IsOk(f));
  ASSERT_TRUE(IsOk(f->append(to_bytes("x"))));
  const std::string temp = f->temp_path();
  f->abandon();
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_FALSE(fs::exists(p));
  EXPECT_TRUE(dir.list().empty());
}

// A cancellation requested during the write (Ctrl-C in Python's save_file) stops commit(): the target
// keeps its old bytes and nothing new appears.
TEST(AtomicFileTest, CommitAfterCancelIsInterrupted) {
  TempDir dir;
  const std::string p = dir.file("f.bin");
  write_file_bytes(p, "old");
  auto f = AtomicFile::create(p);
  ASSERT_TRUE(IsOk(f));
  ASSERT_TRUE(IsOk(f->append(to_bytes("new"))));
  safeweights::request_cancel();
  auto s = f->commit();
  safeweights::clear_cancel();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.error().kind(), K::Interrupted);
  f->abandon();
  EXPECT_EQ(read_file_bytes(p), "old");
  EXPECT_EQ(dir.list(), std::vector<std::string>{"f.bin"});
}

// copy_from writes a source's range at an offset: from a file (in the kernel), from a file's subrange
// (its file offset added), from memory (through a buffer), each landing where it was asked.
std::string to_string(std::span<const std::byte> b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }

void expect_copies_from(const std::string& target, const std::vector<safeweights::SourcePtr>& sources, const std::string& expected_tail) {
  auto f = AtomicFile::create(target);
  ASSERT_TRUE(IsOk(f));
  ASSERT_TRUE(IsOk(f->append(to_bytes("HEAD"))));
  std::uint64_t at = 4;
  for (const auto& src : sources) {
    // Skip the first 7 bytes of each source: offsets on both sides must be honoured.
    ASSERT_TRUE(IsOk(f->copy_from(at, *src, 7, src->size() - 7))) << src->name();
    at += src->size() - 7;
  }
  ASSERT_TRUE(IsOk(f->commit()));
  EXPECT_EQ(read_file_bytes(target), "HEAD" + expected_tail);
}

TEST(AtomicFileTest, CopyFromFilesSubrangesAndMemory) {
  TempDir dir;
  // Over 64 MiB would take several kernel calls; 3 MiB + 5 takes one, with an odd length.
  const std::string data = to_string(pattern((3u << 20) + 5, 4));
  write_file_bytes(dir.file("in.bin"), data);
  std::vector<safeweights::SourcePtr> sources;
  for (auto backend : {safeweights::FileBackend::Mmap, safeweights::FileBackend::Pread}) {
    auto src = safeweights::open_file(dir.file("in.bin"), backend);
    ASSERT_TRUE(IsOk(src));
    sources.push_back(*src);
  }
  auto sub = safeweights::subrange_source(sources[1], 100, 1000, "sub");
  ASSERT_TRUE(IsOk(sub));
  sources.push_back(*sub);
  const auto bytes = std::as_bytes(std::span(data));
  sources.push_back(safeweights::memory_source(bytes));
  const std::string tail = data.substr(7);
  expect_copies_from(dir.file("out.bin"), sources, tail + tail + data.substr(107, 993) + tail);
}

TEST(AtomicFileTest, CopyFromRefusesARangeOutsideTheSourceAndBlamesATruncatedOne) {
  TempDir dir;
  write_file_bytes(dir.file("in.bin"), to_string(pattern(1 << 20, 5)));
  auto src = safeweights::open_file(dir.file("in.bin"), safeweights::FileBackend::Pread);
  ASSERT_TRUE(IsOk(src));
  auto f = AtomicFile::create(dir.file("out.bin"));
  ASSERT_TRUE(IsOk(f));
  auto outside = f->copy_from(0, **src, 1, 1 << 20);
  ASSERT_FALSE(outside.is_ok());
  EXPECT_EQ(outside.error().kind(), K::OutOfRange);
  ASSERT_EQ(::truncate(dir.file("in.bin").c_str(), 1000), 0);
  auto truncated = f->copy_from(0, **src, 0, 1 << 20);
  ASSERT_FALSE(truncated.is_ok());
  EXPECT_EQ(truncated.error().kind(), K::IoError) << describe(truncated.error());
  EXPECT_EQ(truncated.error().context().file, dir.file("in.bin")) << describe(truncated.error());
  f->abandon();
  EXPECT_EQ(dir.list(), std::vector<std::string>{"in.bin"});
}

TEST(AtomicFileTest, CopyFromStopsOnCancellation) {
  TempDir dir;
  write_file_bytes(dir.file("in.bin"), to_string(pattern(4096, 6)));
  auto src = safeweights::open_file(dir.file("in.bin"));
  ASSERT_TRUE(IsOk(src));
  auto f = AtomicFile::create(dir.file("out.bin"));
  ASSERT_TRUE(IsOk(f));
  safeweights::request_cancel();
  auto s = f->copy_from(0, **src, 0, 4096);
  safeweights::clear_cancel();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.error().kind(), K::Interrupted);
}

// From a file on another filesystem (the kernel refuses or copies itself; either way the bytes land),
// and onto a full one (IoError, nothing left behind).
TEST(AtomicFileTest, CopyFromAcrossFilesystemsAndOntoAFullOne) {
  if (::geteuid() != 0) GTEST_SKIP() << "not root";
  TempDir dir;
  const std::string mnt = dir.file("mnt");
  ASSERT_TRUE(fs::create_directory(mnt));
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=256k") != 0) GTEST_SKIP() << "cannot mount tmpfs: " << std::strerror(errno);
  struct Unmount {
    std::string m;
    ~Unmount() { ::umount2(m.c_str(), MNT_DETACH); }
  } unmount{mnt};
  const std::string small = to_string(pattern(100000, 7));
  write_file_bytes(mnt + "/in.bin", small);
  auto on_tmpfs = safeweights::open_file(mnt + "/in.bin");
  ASSERT_TRUE(IsOk(on_tmpfs));
  expect_copies_from(dir.file("out.bin"), {*on_tmpfs}, small.substr(7));

  write_file_bytes(dir.file("big.bin"), to_string(pattern(1 << 20, 8)));
  auto big = safeweights::open_file(dir.file("big.bin"));
  ASSERT_TRUE(IsOk(big));
  auto f = AtomicFile::create(mnt + "/full.bin");
  ASSERT_TRUE(IsOk(f));
  auto s = f->copy_from(0, **big, 0, 1 << 20);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.error().kind(), K::IoError) << describe(s.error());
  f->abandon();
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(mnt)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"in.bin"});
}

// A multi-file output is committed as a group: a cancellation pending when the shards are done
// commits none of them, and no index appears.
TEST(AtomicFileTest, CancelledShardedWriteCommitsNothing) {
  TempDir dir;
  Model m = small_model();
  auto tv = m.data();
  safeweights::safetensors::ShardOptions opt;
  opt.max_shard_bytes = 64;
  safeweights::request_cancel();
  auto res = safeweights::safetensors::write_sharded(dir.path(), tv, opt);
  safeweights::clear_cancel();
  ASSERT_FALSE(res.is_ok());
  EXPECT_EQ(res.error().kind(), K::Interrupted);
  EXPECT_TRUE(dir.list().empty());
}

// A group whose last file cannot take its name (a folder appeared there after it was created): the
// files committed before it are removed again and the rest discarded, in both kinds of temporary file.
void check_group_commit_failure_removes_the_group(const safeweights::AtomicFileOptions& options) {
  TempDir dir;
  std::vector<safeweights::AtomicFile> files;
  for (const char* name : {"a.bin", "b.bin", "c.bin"}) {
    auto f = safeweights::AtomicFile::create(dir.file(name), options);
    ASSERT_TRUE(f.is_ok()) << name;
    ASSERT_TRUE(f->append(std::as_bytes(std::span<const char>(name, 5))).is_ok());
    files.push_back(std::move(f).value());
  }
  ASSERT_EQ(::mkdir(dir.file("c.bin").c_str(), 0755), 0);
  std::vector<safeweights::AtomicFile*> group;
  for (auto& f : files) group.push_back(&f);
  EXPECT_TRUE(IsKind(safeweights::AtomicFile::commit_all(group), K::IoError));
  EXPECT_EQ(dir.list(), std::vector<std::string>{"c.bin"});
}
TEST(AtomicFileTest, FailedGroupCommitRemovesTheGroup) { check_group_commit_failure_removes_the_group({}); }
TEST(AtomicFileTest, FailedGroupCommitRemovesTheGroupNamedFallback) { check_group_commit_failure_removes_the_group(named_options()); }

// A real signal at a known moment: a child process writes 1 MiB through an AtomicFile, tells us, and
// waits; we send `sig` and wait (bounded) for it to die of it. Nothing may remain but the old target.
void check_signal_leaves_nothing(int sig, bool named) {
  TempDir dir;
  const std::string p = dir.file("out.bin");
  write_file_bytes(p, "old");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(ready[0]);
    safeweights::install_cleanup_signal_handlers();
    safeweights::AtomicFileOptions o;
    o.named_temporary = named;
    auto f = AtomicFile::create(p, o);
    if (!f.is_ok() || !f->append(pattern(1 << 20, 3)).is_ok()) ::_exit(3);
    if (::write(ready[1], "r", 1) != 1) ::_exit(4);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1) << "child failed before writing";
  ::close(ready[0]);
  if (named) {
    EXPECT_EQ(dir.list().size(), 2u) << "the named fallback shows its temporary file";
  }
  ASSERT_EQ(::kill(pid, sig), 0);
  int status = 0;
  ASSERT_EQ(wait_for_child(pid, status), pid) << "child did not die within 30 s";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "status " << status;
  EXPECT_EQ(dir.list(), std::vector<std::string>{"out.bin"});
  EXPECT_EQ(read_file_bytes(p), "old");
}

TEST(AtomicFileSignal, SigintNameless) { check_signal_leaves_nothing(SIGINT, false); }
TEST(AtomicFileSignal, SigtermNameless) { check_signal_leaves_nothing(SIGTERM, false); }
TEST(AtomicFileSignal, SigkillNameless) { check_signal_leaves_nothing(SIGKILL, false); }
TEST(AtomicFileSignal, SigintNamedFallback) { check_signal_leaves_nothing(SIGINT, true); }
TEST(AtomicFileSignal, SigtermNamedFallback) { check_signal_leaves_nothing(SIGTERM, true); }

TEST(AtomicFileTest, MovedFromDoesNotRemoveTemporary) {
  TempDir dir;
  const std::string p = dir.file("f.bin");
  auto f = AtomicFile::create(p);
  ASSERT_TRUE(IsOk(f));
  AtomicFile a = std::move(*f);
  {
    AtomicFile b = std::move(a);  // the moved-from `a` must not own the temp file any more
    ASSERT_TRUE(IsOk(b.append(to_bytes("moved"))));
    ASSERT_TRUE(IsOk(b.commit()));
  }
  EXPECT_EQ(read_file_bytes(p), "moved");
  EXPECT_EQ(dir.list(), std::vector<std::string>{"f.bin"});
}

TEST(AtomicFileTest, DurableCommit) {
  TempDir dir;
  const std::string p = dir.file("d.bin");
  safeweights::AtomicFileOptions opt;
  opt.durable = true;
  opt.preallocate = 4096;
  auto f = AtomicFile::create(p, opt);
  ASSERT_TRUE(IsOk(f));
  ASSERT_TRUE(IsOk(f->append(to_bytes("durable"))));
  ASSERT_TRUE(IsOk(f->truncate(7)));
  ASSERT_TRUE(IsOk(f->commit()));
  EXPECT_EQ(read_file_bytes(p), "durable");
}

TEST(AtomicFileTest, CreateInMissingFolderFails) {
  TempDir dir;
  auto f = AtomicFile::create(dir.file("missing/f.bin"));
  EXPECT_FALSE(f.is_ok());
}

// ---- failures leave the target untouched ------------------------------------------------------------

TEST(AtomicWrite, UnfinishedSinkLeavesNothing) {
  TempDir dir;
  Model m = small_model();
  const std::string p = dir.file("m.safetensors");
  {
    auto w = st::create(p, m.decls);
    ASSERT_TRUE(IsOk(w));
    ASSERT_TRUE(IsOk((*w)->write("w", m.bytes[0])));
  }
  EXPECT_TRUE(dir.list().empty());
}

TEST(AtomicWrite, UnfinishedSinkKeepsOldTarget) {
  TempDir dir;
  Model m = small_model();
  const std::string p = dir.file("m.safetensors");
  write_file_bytes(p, "precious old bytes");
  {
    auto w = st::create(p, m.decls, MetadataEntries{{"a", "b"}});
    ASSERT_TRUE(IsOk(w));
    for (std::size_t i = 0; i + 1 < m.decls.size(); ++i) ASSERT_TRUE(IsOk((*w)->write(m.decls[i].name, m.bytes[i])));
  }
  EXPECT_EQ(read_file_bytes(p), "precious old bytes");
  EXPECT_EQ(dir.list(), std::vector<std::string>{"m.safetensors"});
}

TEST(AtomicWrite, FinishWithMissingTensorFails) {
  TempDir dir;
  Model m = small_model();
  const std::string p = dir.file("m.safetensors");
  write_file_bytes(p, "precious old bytes");
  {
    auto w = st::create(p, m.decls);
    ASSERT_TRUE(IsOk(w));
    for (std::size_t i = 1; i < m.decls.size(); ++i) ASSERT_TRUE(IsOk((*w)->write(m.decls[i].name, m.bytes[i])));
    EXPECT_TRUE(IsKind((*w)->finish(), K::InvalidArgument));
    EXPECT_EQ(read_file_bytes(p), "precious old bytes");
  }
  EXPECT_EQ(read_file_bytes(p), "precious old bytes");
  EXPECT_EQ(dir.list(), std::vector<std::string>{"m.safetensors"});
}

TEST(AtomicWrite, FinishWithPartialChunkFails) {
  TempDir dir;
  Model m = small_model();
  const std::string p = dir.file("m.safetensors");
  {
    auto w = st::create(p, m.decls);
    ASSERT_TRUE(IsOk(w));
    for (std::size_t i = 1; i < m.decls.size(); ++i) ASSERT_TRUE(IsOk((*w)->write(m.decls[i].name, m.bytes[i])));
    ASSERT_TRUE(IsOk((*w)->write_chunk("w", std::span(m.bytes[0]).first(m.bytes[0].size() - 1))));
    EXPECT_TRUE(IsKind((*w)->finish(), K::InvalidArgument));
  }
  EXPECT_TRUE(dir.list().empty());
}

TEST(AtomicWrite, InvalidInputCreatesNothing) {
  TempDir dir;
  Model m = small_model();
  m.decls.push_back(m.decls[0]);
  m.bytes.push_back(m.bytes[0]);
  auto tv = m.data();
  write_file_bytes(dir.file("m.safetensors"), "old");
  EXPECT_TRUE(IsKind(st::write_file(dir.file("m.safetensors"), tv), K::DuplicateKey));
  EXPECT_TRUE(IsKind(st::create(dir.file("m.safetensors"), m.decls), K::DuplicateKey));
  EXPECT_EQ(read_file_bytes(dir.file("m.safetensors")), "old");
  EXPECT_EQ(dir.list(), std::vector<std::string>{"m.safetensors"});
}

// A write that fails half-way through (RLIMIT_FSIZE makes write() fail with EFBIG; no root needed).
TEST(AtomicWrite, FailingWriteKeepsOldTargetAndRemovesTemp) {
  TempDir dir;
  const std::string p = dir.file("big.safetensors");
  write_file_bytes(p, "old");
  Model m;
  m.decls = {{"w", TensorType::U8, {1 << 20}}};
  m.bytes = {pattern(1 << 20, 5)};
  auto tv = m.data();
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  if (old.rlim_max != RLIM_INFINITY && old.rlim_max < (1 << 16)) GTEST_SKIP() << "RLIMIT_FSIZE already tiny";
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit lim = old;
  lim.rlim_cur = 1 << 16;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &lim), 0);
  auto s = st::write_file(p, tv);
  auto w = st::create(p, m.decls);
  safeweights::Status ws;
  if (w.is_ok()) {
    ws = (*w)->write("w", m.bytes[0]);
    if (ws.is_ok()) ws = (*w)->finish();
  }
  const bool w_failed = !w.is_ok() || !ws.is_ok();
  { auto drop = std::move(w); }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(s.is_ok()) << "write_file beyond RLIMIT_FSIZE succeeded";
  EXPECT_EQ(s.error().kind(), K::IoError) << describe(s.error());
  EXPECT_EQ(s.error().context().file.empty(), false) << describe(s.error());
  EXPECT_TRUE(w_failed) << "the sink beyond RLIMIT_FSIZE succeeded";
  EXPECT_EQ(read_file_bytes(p), "old");
  EXPECT_EQ(dir.list(), std::vector<std::string>{"big.safetensors"});
}

// A genuinely full disk: a 64 KiB tmpfs. Needs root and a kernel that lets us mount.
TEST(AtomicWrite, FullDiskKeepsOldTarget) {
  if (::geteuid() != 0) GTEST_SKIP() << "not root";
  TempDir dir;
  const std::string mnt = dir.file("mnt");
  ASSERT_TRUE(fs::create_directory(mnt));
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k") != 0) GTEST_SKIP() << "cannot mount tmpfs: " << std::strerror(errno);
  struct Unmount {
    std::string m;
    ~Unmount() { ::umount2(m.c_str(), MNT_DETACH); }
  } unmount{mnt};
  const std::string p = mnt + "/m.safetensors";
  write_file_bytes(p, "old");
  Model m;
  m.decls = {{"w", TensorType::U8, {256 * 1024}}};
  m.bytes = {pattern(256 * 1024, 9)};
  auto tv = m.data();
  auto s = st::write_file(p, tv);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.error().kind(), K::IoError) << describe(s.error());
  EXPECT_EQ(read_file_bytes(p), "old");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(mnt)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"m.safetensors"});
  // With preallocation the failure comes before any data is written; the result is the same.
  safeweights::AtomicFileOptions opt;
  opt.preallocate = 1 << 20;
  auto f = AtomicFile::create(mnt + "/x.bin", opt);
  if (f.is_ok()) {
    auto a = f->append(std::span(m.bytes[0]));
    EXPECT_FALSE(a.is_ok());
  }
}

// ---- the safetensors sink (st::create) ------------------------------------------------------------------------------------

TEST(SafetensorsSink, OutOfOrderChunksAreByteIdenticalToSerialize) {
  std::mt19937 rng(test_seed(1234));
  for (int round = 0; round < 20; ++round) {
    TempDir dir;
    Model m = small_model();
    const std::optional<MetadataEntries> md = round % 2 ? std::optional(MetadataEntries{{"format", "pt"}, {"a", "1"}}) : std::nullopt;
    const std::string p = dir.file("m.safetensors");
    auto w = st::create(p, m.decls, md);
    ASSERT_TRUE(IsOk(w));
    EXPECT_EQ(st::Layout::plan(m.decls, md)->file_size(), serialize_model(m, md).size());
    std::vector<std::size_t> order(m.decls.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t i : order) {
      const auto& b = m.bytes[i];
      if (rng() % 2 == 0) {
        ASSERT_TRUE(IsOk((*w)->write(m.decls[i].name, b)));
        continue;
      }
      std::size_t off = 0;
      while (off < b.size()) {
        const std::size_t n = std::min<std::size_t>(b.size() - off, 1 + rng() % 7);
        ASSERT_TRUE(IsOk((*w)->write_chunk(m.decls[i].name, std::span(b).subspan(off, n))));
        off += n;
      }
      if (b.empty() && rng() % 2) {
        ASSERT_TRUE(IsOk((*w)->write_chunk(m.decls[i].name, {})));
      }
    }
    ASSERT_TRUE(IsOk((*w)->finish()));
    EXPECT_EQ(read_file_bytes(p), serialize_model(m, md)) << "round " << round;
    EXPECT_EQ(dir.list(), std::vector<std::string>{"m.safetensors"});
  }
}

TEST(SafetensorsSink, ZeroSizedTensorsNeedNoWrite) {
  TempDir dir;
  Model m;
  m.decls = {{"e", TensorType::F32, {0}}, {"x", TensorType::U8, {2}}};
  m.bytes = {{}, pattern(2, 3)};
  auto w = st::create(dir.file("m.safetensors"), m.decls);
  ASSERT_TRUE(IsOk(w));
  ASSERT_TRUE(IsOk((*w)->write("x", m.bytes[1])));
  ASSERT_TRUE(IsOk((*w)->finish()));
  EXPECT_EQ(read_file_bytes(dir.file("m.safetensors")), serialize_model(m));
}

TEST(SafetensorsSink, MisuseIsInvalidArgument) {
  TempDir dir;
  Model m = small_model();
  auto w = st::create(dir.file("m.safetensors"), m.decls);
  ASSERT_TRUE(IsOk(w));
  // Unknown name.
  EXPECT_TRUE(IsKind((*w)->write("nope", m.bytes[0]), K::InvalidArgument));
  EXPECT_TRUE(IsKind((*w)->write_chunk("nope", m.bytes[0]), K::InvalidArgument));
  // Wrong size (too short, too long).
  EXPECT_TRUE(IsKind((*w)->write("w", std::span(m.bytes[0]).first(4)), K::InvalidArgument));
  auto longer = m.bytes[0];
  longer.push_back(std::byte{0});
  EXPECT_TRUE(IsKind((*w)->write("w", longer), K::InvalidArgument));
  // Chunks that overrun the tensor.
  ASSERT_TRUE(IsOk((*w)->write_chunk("s", std::span(m.bytes[3]).first(3))));
  EXPECT_TRUE(IsKind((*w)->write_chunk("s", std::span(m.bytes[3]).first(3)), K::InvalidArgument));
  ASSERT_TRUE(IsOk((*w)->write_chunk("s", std::span(m.bytes[3]).subspan(3))));
  // Written twice (whole, and a chunk after completion).
  ASSERT_TRUE(IsOk((*w)->write("w", m.bytes[0])));
  EXPECT_TRUE(IsKind((*w)->write("w", m.bytes[0]), K::InvalidArgument));
  EXPECT_TRUE(IsKind((*w)->write_chunk("w", std::span(m.bytes[0]).first(1)), K::InvalidArgument));
  EXPECT_TRUE(IsKind((*w)->write_chunk("s", std::span(m.bytes[3]).first(1)), K::InvalidArgument));
  // A whole write after a partial chunk.
  ASSERT_TRUE(IsOk((*w)->write_chunk("b", std::span(m.bytes[1]).first(2))));
  EXPECT_TRUE(IsKind((*w)->write("b", m.bytes[1]), K::InvalidArgument));
  ASSERT_TRUE(IsOk((*w)->write_chunk("b", std::span(m.bytes[1]).subspan(2))));
  ASSERT_TRUE(IsOk((*w)->write("h", m.bytes[4])));
  // The errors above did not corrupt anything.
  ASSERT_TRUE(IsOk((*w)->finish()));
  EXPECT_EQ(read_file_bytes(dir.file("m.safetensors")), serialize_model(m));
}

TEST(SafetensorsSink, CreateRefusesWhatLayoutRefuses) {
  TempDir dir;
  EXPECT_TRUE(IsKind(st::create(dir.file("a"), {{"__metadata__", TensorType::F32, {1}}}), K::ReservedTensorName));
  EXPECT_TRUE(IsKind(st::create(dir.file("a"), {{"x", TensorType::F4, {3}}}), K::MisalignedSlice));
  EXPECT_TRUE(IsKind(st::create(dir.file("a"), {{"x", TensorType::F32, {1}}}, MetadataEntries{{"k", "1"}, {"k", "2"}}), K::DuplicateKey));
  EXPECT_TRUE(dir.list().empty());
}

// Every format's sink is the same planned-file sink: the same refusals, with the same messages, naming
// the output and the tensor; an incomplete tensor at finish leaves nothing behind.
TEST(PlannedSinks, RefuseMisuseAlikeInEveryFormat) {
  using Create = std::function<safeweights::Result<std::unique_ptr<safeweights::TensorSink>>(const std::string&, std::vector<TensorDecl>)>;
  const std::vector<std::pair<std::string, Create>> formats = {
      {"m.safetensors", [](const std::string& p, std::vector<TensorDecl> d) { return st::create(p, std::move(d)); }},
      {"m.gguf", [](const std::string& p, std::vector<TensorDecl> d) { return safeweights::gguf::create(p, {}, std::move(d)); }},
  };
  for (const auto& [name, create] : formats) {
    SCOPED_TRACE(name);
    TempDir dir;
    const std::string p = dir.file(name);
    auto w = create(p, {{"a", safeweights::TensorType::F32, {4}}, {"b", safeweights::TensorType::I8, {3}}});
    ASSERT_TRUE(IsOk(w));
    safeweights::TensorSink& sink = **w;
    const std::vector<std::byte> a(16, std::byte{1}), b(3, std::byte{2});
    auto expect_misuse = [&](const safeweights::Status& s, const std::string& message, const std::string& tensor) {
      ASSERT_TRUE(IsKind(s, K::InvalidArgument));
      EXPECT_EQ(s.error().message(), message);
      EXPECT_EQ(s.error().context().file, p);
      EXPECT_EQ(s.error().context().tensor, tensor);
    };
    expect_misuse(sink.write("nope", a), "tensor was not declared when the writer was created", "nope");
    expect_misuse(sink.write("a", std::span(a).first(4)), "tensor needs 16 bytes, got 4", "a");
    ASSERT_TRUE(IsOk(sink.write("a", a)));
    expect_misuse(sink.write("a", a), "tensor already written", "a");
    expect_misuse(sink.write_chunk("a", std::span(a).first(1)), "more bytes than the tensor holds (16)", "a");
    ASSERT_TRUE(IsOk(sink.write_chunk("b", std::span(b).first(1))));
    expect_misuse(sink.finish(), "tensor incomplete: 1 of 3 bytes written", "b");
    EXPECT_TRUE(dir.list().empty());
    expect_misuse(sink.finish(), "writer already finished", "");
  }
}

}  // namespace
