// Hostile inputs against memory and descriptors: files that shrink under a mapping (an error, never
// SIGBUS), headers that declare more than memory holds (streamed or a ResourceLimit, never
// std::bad_alloc), many shards under a low descriptor limit. Truncation is real (ftruncate between
// open and read); CLI cases run the real binary in a child with real resource limits.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "safeweights/safetensors.h"
#include "safeweights/safetensors_writer.h"
#include "safeweights/slice.h"
#include "safeweights/source.h"
#include "safeweights/zip.h"
#include "test_util.h"

// kAddressSanitizer (test_util.h): ASan's SIGBUS handler reports and exits instead of the process dying
// of the signal, and its shadow memory cannot live under a small RLIMIT_AS.

namespace {

namespace fs = std::filesystem;
using safeweights::ErrorKind;
using safeweights::FileBackend;
using safeweights::SourcePtr;
using safeweights::Status;
using namespace swt;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/sw_hostile_mem_XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A safetensors file with one U8 tensor `t` of `shape`, written by hand: the header, then a hole of
// the data's size (sparse: no disk or memory is used for it). Returns the header's end (data start).
std::uint64_t sparse_safetensors(const std::string& path, const std::vector<std::uint64_t>& shape) {
  std::uint64_t n = 1;
  std::string dims;
  for (auto d : shape) {
    n *= d;
    dims += (dims.empty() ? "" : ",") + std::to_string(d);
  }
  std::string json = "{\"t\":{\"dtype\":\"U8\",\"shape\":[" + dims + "],\"data_offsets\":[0," + std::to_string(n) + "]}}";
  while (json.size() % 8) json += ' ';
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  bytes += json;
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_EQ(::truncate(path.c_str(), static_cast<off_t>(bytes.size() + n)), 0);
  return bytes.size();
}

// A real file of `n` bytes of a pattern (so a read that silently returned zeros would show).
void patterned_file(const std::string& path, std::size_t n) {
  std::string bytes(n, '\0');
  for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>(i * 7 + 1);
  std::ofstream(path, std::ios::binary) << bytes;
}

// What a child process did: its exit code, or the signal that ended it.
struct Outcome {
  int exit_code = -1;
  int signal = 0;
  std::string err;  // its standard error
};

// Runs the CLI with `args` in a child: stdout to `out_fd` (or /dev/null when -1), stderr captured,
// and resource `limit` (RLIMIT_*) lowered to `value` when given.
pid_t spawn_cli(const std::vector<std::string>& args, int out_fd, const std::string& err_path, int limit = -1, rlim_t value = 0,
                const char* env = nullptr) {
  // SAFEWEIGHTS_TEST_CLI runs another build's binary (to see these tests fail on an older one).
  const char* cli = std::getenv("SAFEWEIGHTS_TEST_CLI");
  std::vector<std::string> all = {cli != nullptr ? cli : SAFEWEIGHTS_CLI};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {  // only async-signal-safe calls until exec
    int out = out_fd >= 0 ? out_fd : ::open("/dev/null", O_WRONLY);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (limit >= 0) {
      struct rlimit rl = {value, value};
      ::setrlimit(limit, &rl);
    }
    if (env != nullptr) ::putenv(const_cast<char*>(env));
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

Outcome wait_for(pid_t pid, const std::string& err_path) {
  int status = 0;
  Outcome o;
  if (::waitpid(pid, &status, 0) != pid) return o;
  if (WIFEXITED(status)) o.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
  std::ifstream in(err_path);
  o.err.assign(std::istreambuf_iterator<char>(in), {});
  return o;
}

Outcome run_cli(const std::vector<std::string>& args, const std::string& err_path, int limit = -1, rlim_t value = 0, const char* env = nullptr) {
  return wait_for(spawn_cli(args, -1, err_path, limit, value, env), err_path);
}

// ---- a file that shrinks under its mapping -----------------------------------------------------------

constexpr std::size_t kFileBytes = 1u << 20;
constexpr std::uint64_t kPastTheEnd = 64u << 10;  // a page well past the new end (4 KiB)

// A mapped 1 MiB file of a pattern, and a way to shrink it to one page.
class MappingShrinks : public ::testing::Test {
 protected:
  void SetUp() override {
    patterned_file(path, kFileBytes);
    auto opened = safeweights::open_file(path, FileBackend::Mmap);
    ASSERT_TRUE(IsOk(opened));
    source = *opened;
  }

  TempDir dir;
  const std::string path = dir.file("f.bin");
  SourcePtr source;
};

TEST_F(MappingShrinks, SmallReadIsAnIoErrorNamingTheFile) {
  std::vector<std::byte> dst(4096);
  ASSERT_TRUE(IsOk(source->read_at(kPastTheEnd, dst)));
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  Status s = source->read_at(kPastTheEnd, dst);
  ASSERT_TRUE(IsKind(s, ErrorKind::IoError));
  EXPECT_NE(s.error().message().find("shrank"), std::string::npos) << describe(s.error());
  EXPECT_EQ(s.error().context().file, path);
  // The bytes still inside the file read as before.
  EXPECT_TRUE(IsOk(source->read_at(0, std::span(dst).first(4096))));
  EXPECT_EQ(dst[1], std::byte{8});
}

TEST_F(MappingShrinks, ScatteredSmallRunsAreAnIoError) {
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  std::vector<std::byte> a(16), b(16);
  std::vector<safeweights::ReadRequest> requests = {{0, a}, {kPastTheEnd, b}};
  Status s = source->read_scatter(requests);
  ASSERT_TRUE(IsKind(s, ErrorKind::IoError));
  EXPECT_EQ(s.error().context().file, path);
  EXPECT_EQ(s.error().context().offset, kPastTheEnd);
}

TEST(MappingShrinksFormats, SliceOfATruncatedFileIsAnIoError) {
  TempDir dir;
  const std::string path = dir.file("t.safetensors");
  const std::uint64_t data_start = sparse_safetensors(path, {256, 4096});
  auto reader = safeweights::safetensors::Reader::open(path, FileBackend::Mmap);
  ASSERT_TRUE(IsOk(reader));
  const safeweights::TensorEntry& t = *reader->tensor("t").value();
  auto spec = safeweights::SliceSpec::parse("::2, 1:4000");
  ASSERT_TRUE(IsOk(spec));
  auto plan = t.plan_slice(*spec);
  ASSERT_TRUE(IsOk(plan));
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(data_start)), 0);
  std::vector<std::byte> dst(static_cast<std::size_t>(plan->nbytes()));
  Status s = t.read_slice(*plan, dst);
  ASSERT_TRUE(IsKind(s, ErrorKind::IoError));
  EXPECT_EQ(s.error().context().file, path);
  // A copy of the whole tensor (small reads from the mapping, large ones with pread) fails the same way.
  std::vector<std::byte> all(static_cast<std::size_t>(t.nbytes));
  EXPECT_TRUE(IsKind(t.read(all), ErrorKind::IoError));
}

// write(2) from a mapped page that no longer exists fails with EFAULT ("Bad address"): the error must
// blame the input that shrank, not the output.
TEST_F(MappingShrinks, AFailedWriteFromTheMappingBlamesTheInput) {
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  const std::string out_path = dir.file("out.bin");
  int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(out, 0);
  Status s = safeweights::copy_range(*source, 0, kFileBytes, 1u << 20, [&](std::span<const std::byte> part) -> Status {
    for (std::size_t done = 0; done < part.size();) {
      ssize_t n = ::write(out, part.data() + done, part.size() - done);
      if (n <= 0) {
        return safeweights::Error(ErrorKind::IoError, std::string("write failed: ") + std::strerror(errno)).with_file(out_path);
      }
      done += static_cast<std::size_t>(n);
    }
    return Status::ok();
  });
  ::close(out);
  ASSERT_TRUE(IsKind(s, ErrorKind::IoError));
  EXPECT_EQ(s.error().context().file, path) << describe(s.error());
  EXPECT_NE(s.error().message().find("shrank"), std::string::npos) << describe(s.error());
}

// A one-entry archive ("e.bin", kFileBytes) at `path`, opened through a mapping.
safeweights::Result<safeweights::zip::Archive> mapped_archive(const std::string& path) {
  {
    auto writer = safeweights::zip::Writer::create(path);
    if (!writer.is_ok()) return writer.error();
    std::vector<std::byte> data(kFileBytes, std::byte{5});
    if (Status s = writer->add_bytes("e.bin", data); !s.is_ok()) return s.error();
    if (Status s = writer->finish(); !s.is_ok()) return s.error();
  }
  auto source = safeweights::open_file(path, FileBackend::Mmap);
  if (!source.is_ok()) return source.error();
  return safeweights::zip::Archive::open(*source);
}

TEST(MappingShrinksFormats, CrcOverTheMappingIsAnIoError) {
  TempDir dir;
  const std::string path = dir.file("a.zip");
  auto archive = mapped_archive(path);
  ASSERT_TRUE(IsOk(archive));
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  Status s = archive->verify_all_crcs(1);
  ASSERT_TRUE(IsKind(s, ErrorKind::IoError));
  EXPECT_EQ(s.error().context().file, path);
  EXPECT_EQ(s.error().context().entry, "e.bin");
}

// The copy unpack makes (CRC and write in one pass) reads the mapping too.
TEST(MappingShrinksFormats, CheckedEntryCopyOfATruncatedArchiveIsAnIoError) {
  TempDir dir;
  const std::string path = dir.file("a.zip");
  auto archive = mapped_archive(path);
  ASSERT_TRUE(IsOk(archive));
  const auto* entry = archive->find("e.bin");
  ASSERT_NE(entry, nullptr);
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  std::uint64_t written = 0;
  Status s = archive->copy_entry_checked(*entry, 1u << 20, [&](std::span<const std::byte> part) -> Status {
    written += part.size();
    return Status::ok();
  });
  ASSERT_TRUE(IsKind(s, ErrorKind::IoError)) << describe(s.error());
  EXPECT_EQ(s.error().context().file, path);
  EXPECT_EQ(s.error().context().entry, "e.bin") << describe(s.error());
  EXPECT_LT(written, kFileBytes);
}

// Views handed out keep numpy.memmap's semantics: touching a vanished page outside the library is
// SIGBUS, as without the guard (the guard's handler passes such faults on).
TEST_F(MappingShrinks, ViewsOutsideTheLibraryStillFault) {
  std::vector<std::byte> dst(16);
  ASSERT_TRUE(IsOk(source->read_at(0, dst)));  // the guard's handler is installed by now
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    volatile std::byte b = source->mapped()[kPastTheEnd];
    (void)b;
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  if (kAddressSanitizer) {  // ASan's own SIGBUS handler (installed before ours) reports and exits
    EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return;
  }
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGBUS);
}

// `cat --slice` streams its output in pieces. Runs `cat --slice` on a 160 MiB file and truncates the file while the CLI is blocked writing its first
// piece to a pipe. `env`: one NAME=VALUE for the child, or null.
Outcome cat_slice_truncated_under_it(const TempDir& dir, const std::string& path, const char* env) {
  const std::uint64_t data_start = sparse_safetensors(path, {40960, 4096});
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const std::string err = dir.file("err.txt");
  pid_t pid = spawn_cli({"cat", path, "t", "--slice", "::2"}, fds[1], err, -1, 0, env);
  ::close(fds[1]);
  char byte;
  EXPECT_EQ(::read(fds[0], &byte, 1), 1);  // the first piece is read and being written
  EXPECT_EQ(::truncate(path.c_str(), static_cast<off_t>(data_start)), 0);
  std::vector<char> sink(1u << 20);
  while (::read(fds[0], sink.data(), sink.size()) > 0) {}
  ::close(fds[0]);
  return wait_for(pid, err);
}

// It must then fail with the input named, not die of SIGBUS (nor succeed with bytes it never had).
TEST(MappingShrinksCli, CatSliceOnAFileTruncatedUnderIt) {
  TempDir dir;
  const std::string path = dir.file("t.safetensors");
  Outcome o = cat_slice_truncated_under_it(dir, path, nullptr);
  EXPECT_EQ(o.signal, 0) << o.err;
  EXPECT_NE(o.exit_code, 0) << o.err;
  EXPECT_NE(o.err.find("IoError"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find(path), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("end of file"), std::string::npos) << o.err;
}

// With the guard turned off (source.h), the library installs no handler: the same read is SIGBUS for the
// process, as with any mapping.
TEST(MappingShrinksCli, WithoutTheGuardTheSameReadIsSigbus) {
  TempDir dir;
  const std::string path = dir.file("t.safetensors");
  Outcome o = cat_slice_truncated_under_it(dir, path, "SAFEWEIGHTS_NO_FAULT_GUARD=1");
  if (kAddressSanitizer) {  // ASan's own SIGBUS handler reports and exits
    EXPECT_NE(o.exit_code, 0) << o.err;
    return;
  }
  EXPECT_EQ(o.signal, SIGBUS) << "exit " << o.exit_code << ": " << o.err;
}

TEST_F(MappingShrinks, GuardSwitchTurnsReadsIntoFaults) {
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    safeweights::set_mapping_fault_guard(false);
    if (safeweights::mapping_fault_guard()) ::_exit(3);
    std::vector<std::byte> dst(16);
    Status s = source->read_at(kPastTheEnd, dst);  // faults: nothing catches it
    ::_exit(s.is_ok() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  if (kAddressSanitizer) {  // ASan's own SIGBUS handler reports and exits (1), like a caught read would
    EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return;
  }
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGBUS);
  EXPECT_TRUE(safeweights::mapping_fault_guard());  // the parent's switch is untouched
}

// ---- sizes declared by the input -----------------------------------------------------------------------

TEST(Allocation, BeyondTheBudgetIsResourceLimitNamingWhatWasAsked) {
  auto r = safeweights::allocate_bytes(std::uint64_t{1} << 62, "the test's buffer");
  ASSERT_TRUE(IsKind(r, ErrorKind::ResourceLimit));
  EXPECT_NE(r.error().message().find("the test's buffer"), std::string::npos);
  EXPECT_NE(r.error().message().find(std::to_string(std::uint64_t{1} << 62)), std::string::npos);
  auto u = safeweights::allocate_uninitialized(UINT64_MAX, "x");
  EXPECT_TRUE(IsKind(u, ErrorKind::ResourceLimit));
  EXPECT_TRUE(IsOk(safeweights::allocate_bytes(16, "x")));
}

// A 3 GiB tensor (sparse), sliced whole under a 2 GiB address-space limit: the slice streams in
// pieces instead of being materialised (it used to abort with std::bad_alloc, exit 134).
TEST(AllocationCli, CatSliceOfAHugeTensorStreams) {
  if (kAddressSanitizer) GTEST_SKIP() << "ASan's shadow memory needs more address space than RLIMIT_AS leaves";
  TempDir dir;
  const std::string path = dir.file("big.safetensors");
  sparse_safetensors(path, {std::uint64_t{3} << 30});
  const std::string err = dir.file("err.txt");
  Outcome o = run_cli({"cat", path, "t", "--slice", "::1", "--backend", "pread"}, err, RLIMIT_AS, rlim_t{2} << 30);
  EXPECT_EQ(o.signal, 0) << o.err;
  EXPECT_EQ(o.exit_code, 0) << o.err;
}

// bench on a file whose header declares 30 GiB: a ResourceLimit error naming what it wanted, never an
// abort; it allocates the data once (not the data and the file).
TEST(AllocationCli, BenchBeyondTheBudgetIsResourceLimit) {
  TempDir dir;
  const std::string path = dir.file("big.safetensors");
  sparse_safetensors(path, {std::uint64_t{30} << 30});
  const std::string err = dir.file("err.txt");
  Outcome o = run_cli({"bench", "--passes", "1", path}, err, -1, 0, "SAFEWEIGHTS_MEMORY_LIMIT=1073741824");
  EXPECT_EQ(o.signal, 0) << o.err;
  EXPECT_NE(o.exit_code, 0) << o.err;
  EXPECT_NE(o.err.find("ResourceLimit"), std::string::npos) << o.err;
  // It names what it wanted (the file's size, at least the 30 GiB tensor) and the budget.
  EXPECT_NE(o.err.find("cannot allocate " + std::to_string(std::uint64_t{30} << 30).substr(0, 5)), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("1073741824"), std::string::npos) << o.err;
}

// ---- descriptors -------------------------------------------------------------------------------------

// 3,000 shards validated and read under `ulimit -n 256` (it used to be INVALID: EMFILE).
TEST(DescriptorsCli, ManyShardsUnderALowDescriptorLimit) {
  TempDir dir;
  constexpr int kShards = 3000;
  std::string index = "{\"metadata\":{},\"weight_map\":{";
  for (int i = 0; i < kShards; ++i) {
    const std::string name = "w" + std::to_string(i);
    const std::string file = "s" + std::to_string(i) + ".safetensors";
    std::vector<std::byte> data(4, static_cast<std::byte>(i));
    std::vector<safeweights::safetensors::TensorData> t = {{name, safeweights::TensorType::U8, {4}, data}};
    auto bytes = safeweights::safetensors::serialize(t);
    ASSERT_TRUE(IsOk(bytes));
    std::ofstream(dir.file(file), std::ios::binary).write(reinterpret_cast<const char*>(bytes->data()), bytes->size());
    index += (i ? ",\"" : "\"") + name + "\":\"" + file + "\"";
  }
  index += "}}";
  const std::string index_path = dir.file("model.safetensors.index.json");
  std::ofstream(index_path) << index;
  const std::string err = dir.file("err.txt");
  for (const char* backend : {"mmap", "pread"}) {
    Outcome v = run_cli({"validate", index_path, "--backend", backend}, err, RLIMIT_NOFILE, 256);
    EXPECT_EQ(v.exit_code, 0) << backend << ": " << v.err;
  }
  const std::string out_path = dir.file("out.bin");
  Outcome c = run_cli({"cat", index_path, "w2999", "-o", out_path, "--backend", "pread"}, err, RLIMIT_NOFILE, 256);
  EXPECT_EQ(c.exit_code, 0) << c.err;
  std::ifstream in(out_path, std::ios::binary);
  std::string got((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(got, std::string(4, static_cast<char>(2999 & 0xff)));
}

}  // namespace
