// safeweights bench [--json] [--passes N] FILE
//
// Measures, in one run and against a physical reference taken in the same run: open + validate time,
// full load into owned memory, and a plain read() of the same file into memory. Both land in the same
// memory (one buffer of the data's size, allocated and touched once before timing: a load needs no
// more), so the ratio compares I/O paths, not page-fault costs of fresh allocations. The page cache is warm (a warm-up pass runs
// first); see docs/PERFORMANCE.md for cold-cache measurements.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
#include <memory>
#include <thread>

#include "cli_common.h"
#include "safeweights/safetensors.h"

namespace safeweights::cli {
namespace {

struct BenchOptions {
  std::string file;
  bool json = false;
  int passes = 7;
  unsigned threads = 0;
};

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// read() of the fd into dst until it is full; false on an error or an early end.
bool read_full(int fd, std::span<std::byte> dst) {
  std::size_t done = 0;
  while (done < dst.size()) {
    ssize_t n = ::read(fd, dst.data() + done, dst.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// The physical reference: open, read() the whole file (the header into `head`, the data into `data`,
// the same memory the load fills), close.
bool plain_read(const std::string& path, std::span<std::byte> head, std::span<std::byte> data) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = read_full(fd, head) && read_full(fd, data);
  ::close(fd);
  return ok;
}

// Whether the loaded data equals the file's bytes after the header, compared a bounded piece at a time.
bool same_as_file(const std::string& path, std::uint64_t data_start, std::span<const std::byte> loaded) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::vector<std::byte> piece(std::min<std::size_t>(loaded.size(), 16u << 20));
  bool same = ::lseek(fd, static_cast<off_t>(data_start), SEEK_SET) >= 0;
  for (std::size_t at = 0; same && at < loaded.size(); at += piece.size()) {
    const std::size_t n = std::min(piece.size(), loaded.size() - at);
    same = read_full(fd, {piece.data(), n}) && std::memcmp(piece.data(), loaded.data() + at, n) == 0;
  }
  ::close(fd);
  return same;
}

int run(const BenchOptions& opt) {
  auto first = safetensors::Reader::open(opt.file);
  if (!first.is_ok()) {
    print_error(first.error());
    return kExitInvalid;
  }
  const std::uint64_t file_bytes = first->header().file_size();
  const std::uint64_t data_bytes = first->header().data_size();
  const std::size_t tensors = first->header().tensors().size();
  first = Error(ErrorKind::InvalidArgument, "released");  // unmap before timing

  // One destination of the data's size, allocated and touched once outside the timed regions; both
  // the load and the plain read fill it. The header (at most 100 MB) has its own small buffer.
  auto load_buf = allocate_uninitialized(data_bytes, "the loaded data");
  if (!load_buf.is_ok()) {
    print_error(load_buf.error().with_file(opt.file));
    return kExitInvalid;
  }
  std::vector<std::byte> head(static_cast<std::size_t>(file_bytes - data_bytes));
  const std::span<std::byte> data(load_buf->get(), static_cast<std::size_t>(data_bytes));
  std::memset(data.data(), 1, data.size());

  safetensors::LoadOptions load_options;
  load_options.threads = opt.threads;
  std::vector<double> open_s, load_s, read_s;
  for (int pass = -1; pass < opt.passes; ++pass) {  // pass -1 warms the page cache
    auto t0 = Clock::now();
    {
      auto r = safetensors::Reader::open(opt.file);
      if (!r.is_ok()) {
        print_error(r.error());
        return kExitInvalid;
      }
    }
    double open_t = seconds_since(t0);

    t0 = Clock::now();
    {
      auto r = safetensors::Reader::open(opt.file);
      if (!r.is_ok()) {
        print_error(r.error());
        return kExitInvalid;
      }
      Status s = r->load_into(data, load_options);
      if (!s.is_ok()) {
        print_error(s.error());
        return kExitInvalid;
      }
    }
    double load_t = seconds_since(t0);

    t0 = Clock::now();
    if (!plain_read(opt.file, head, data)) {
      std::fprintf(stderr, "safeweights: %s: plain read() failed\n", opt.file.c_str());
      return kExitInvalid;
    }
    double read_t = seconds_since(t0);
    if (pass >= 0) {
      open_s.push_back(open_t);
      load_s.push_back(load_t);
      read_s.push_back(read_t);
    }
  }
  // The load must give the file's bytes, or the comparison means nothing.
  auto r = safetensors::Reader::open(opt.file);
  Status loaded = r.is_ok() ? r->load_into(data, load_options) : r.status();
  if (!loaded.is_ok()) {
    print_error(loaded.error());
    return kExitInvalid;
  }
  if (!same_as_file(opt.file, file_bytes - data_bytes, data)) {
    std::fprintf(stderr, "safeweights: %s: loaded bytes differ from read() bytes\n", opt.file.c_str());
    return kExitInvalid;
  }

  const double open_ms = median(open_s) * 1e3;
  const double load_gbps = static_cast<double>(file_bytes) / median(load_s) / 1e9;
  const double read_gbps = static_cast<double>(file_bytes) / median(read_s) / 1e9;
  const double ratio = load_gbps / read_gbps;
  const unsigned threads = opt.threads ? opt.threads : std::min(8u, std::max(1u, std::thread::hardware_concurrency()));
  if (opt.json) {
    std::printf(
        "{\"file\":%s,\"bytes\":%llu,\"tensors\":%zu,\"passes\":%d,\"threads\":%u,\"open_ms\":%.4f,\"load_ms\":%.3f,"
        "\"load_gbps\":%.3f,\"read_ms\":%.3f,\"read_gbps\":%.3f,\"ratio\":%.3f,\"cache\":\"warm\"}\n",
        json_quote(opt.file).c_str(), static_cast<unsigned long long>(file_bytes), tensors, opt.passes, threads,
        open_ms, median(load_s) * 1e3, load_gbps, median(read_s) * 1e3, read_gbps, ratio);
  } else {
    std::printf("file:            %s (%s, %zu tensors)\n", opt.file.c_str(), human_bytes(file_bytes).c_str(), tensors);
    std::printf("passes:          %d (medians; page cache warm; GB = 1e9 bytes)\n", opt.passes);
    std::printf("open+validate:   %.3f ms\n", open_ms);
    std::printf("load (owned):    %.1f ms  %.2f GB/s  (%u threads)\n", median(load_s) * 1e3, load_gbps, threads);
    std::printf("plain read():    %.1f ms  %.2f GB/s\n", median(read_s) * 1e3, read_gbps);
    std::printf("ratio load/read: %.2fx\n", ratio);
  }
  return kExitOk;
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Time open+validate and a full load against a plain read() of the same file");
  cmd->add_option("FILE", opt->file, "a safetensors file")->required();
  cmd->add_flag("--json", opt->json, "one JSON object: {file, bytes, open_ms, load_gbps, read_gbps, ratio, ...}");
  cmd->add_option("--passes", opt->passes, "timed passes (the median is reported)")->check(CLI::Range(1, 1000));
  cmd->add_option("--threads", opt->threads, "load threads (default: one per core, at most 8)")->check(CLI::Range(0, 64));
  cmd->callback([opt, &exit_code] { exit_code = run(*opt); });
}

}  // namespace safeweights::cli
