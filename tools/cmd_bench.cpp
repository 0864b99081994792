// safeweights bench [--json] [--passes N] [--threads N] [--device DEV] [--cold] FILE
//
// Times a full load of a tensor file (any format) against physical references taken in the same run:
//  - host (default): the loader into host memory, against the same bytes read by plain pread threads
//    (the parallel limit) and by one thread's read() of the whole file. All three fill the same
//    buffer, allocated and touched once before timing, so the ratios compare I/O paths.
//  - --device cuda:N (or host): the load into device memory, against a pinned host -> device copy of
//    the same size; after the timed passes the device bytes are copied back and compared with a CPU
//    load of the file ("verified").
// The page cache is warm (a warm-up pass runs first) unless --cold, which evicts the file's pages
// before every pass (posix_fadvise DONTNEED: no privileges needed; a page another process has
// mapped stays cached).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "safeweights/device.h"
#include "safeweights/format.h"
#include "safeweights/http.h"
#include "safeweights/resolver.h"
#include "safeweights/loader.h"

namespace safeweights::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double gbps(std::uint64_t bytes, double seconds) { return static_cast<double>(bytes) / seconds / 1e9; }

// Drops the file's pages from the page cache (for --cold).
void evict(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fdatasync(fd);
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
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

// One thread, read() of the whole file into `dst` (the file's size), in 16 MiB calls.
bool plain_read(const std::string& path, std::span<std::byte> dst) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = true;
  for (std::size_t at = 0; ok && at < dst.size(); at += 16u << 20)
    ok = read_full(fd, dst.subspan(at, std::min<std::size_t>(16u << 20, dst.size() - at)));
  ::close(fd);
  return ok;
}

// The parallel limit: `threads` plain threads pread the file in 16 MiB pieces into dst (the file's
// size), each taking the next piece in turn.
bool parallel_pread(const std::string& path, std::span<std::byte> dst, unsigned threads) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  constexpr std::size_t kPiece = 16u << 20;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> ok{true};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (std::size_t at; (at = next.fetch_add(kPiece)) < dst.size();) {
        const std::size_t n = std::min(kPiece, dst.size() - at);
        for (std::size_t done = 0; done < n;) {
          const ssize_t r = ::pread(fd, dst.data() + at + done, n - done, static_cast<off_t>(at + done));
          if (r < 0 && errno == EINTR) continue;
          if (r <= 0) {
            ok = false;
            return;
          }
          done += static_cast<std::size_t>(r);
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  ::close(fd);
  return ok;
}

struct Opened {
  std::unique_ptr<TensorFile> file;
  LoadPlan plan;
};

Result<Opened> open_and_plan(const BenchArgs& opt) {
  const FormatOptions options = input_options();
  auto format = detect_format(opt.file, options);
  if (!format.is_ok()) return std::move(format).status();
  auto file = (*format)->open(opt.file, {}, options);
  if (!file.is_ok()) return std::move(file).status();
  LoaderOptions lo;
  lo.threads = opt.threads;
  lo.chunk_bytes = opt.chunk_mib << 20;
  lo.read = opt.read == "pread" ? ReadMode::Pread : opt.read == "direct" ? ReadMode::Direct : ReadMode::Auto;
  auto plan = LoadPlan::make(**file, lo);
  if (!plan.is_ok()) return std::move(plan).status();
  return Opened{std::move(*file), std::move(*plan)};
}

std::uint64_t file_size(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const off_t end = ::lseek(fd, 0, SEEK_END);
  ::close(fd);
  return end < 0 ? 0 : static_cast<std::uint64_t>(end);
}

// --passes, which the command line keeps within 1..1000.
std::uint64_t passes(const BenchArgs& opt) { return static_cast<std::uint64_t>(opt.passes); }

unsigned effective_threads(const BenchArgs& opt) { return opt.threads ? opt.threads : std::max(1u, std::thread::hardware_concurrency()); }

// ---- host -------------------------------------------------------------------------------------------

int run_host(const BenchArgs& opt) {
  auto first = open_and_plan(opt);
  if (!first.is_ok()) return exit_status(first.status());
  const std::uint64_t size = file_size(opt.file);
  const std::uint64_t plan_size = first->plan.size();
  const std::size_t tensors = first->plan.tensors().size();
  first = Error(ErrorKind::InvalidArgument, "released");  // unmap before timing

  // One destination large enough for every path, allocated and touched once outside the timed regions.
  auto buffer = allocate_uninitialized(std::max(size, plan_size) + 4096, "the benchmark buffer");
  if (!buffer.is_ok()) return exit_status(std::move(buffer.error().with_file(redact_secrets(opt.file))));
  std::byte* aligned = buffer->get() + (4096 - reinterpret_cast<std::uintptr_t>(buffer->get()) % 4096) % 4096;
  std::memset(aligned, 1, static_cast<std::size_t>(std::max(size, plan_size)));
  const std::span<std::byte> whole(aligned, static_cast<std::size_t>(size));
  const unsigned threads = effective_threads(opt);

  std::vector<double> open_s, load_s, pread_s, read_s;
  for (int pass = opt.cold ? 0 : -1; pass < opt.passes; ++pass) {  // pass -1 warms the page cache
    if (opt.cold) evict(opt.file);
    auto t0 = Clock::now();
    auto opened = open_and_plan(opt);
    const double open_t = seconds_since(t0);
    t0 = Clock::now();
    Status s = opened.is_ok() ? load_into(opened->plan, {aligned, static_cast<std::size_t>(plan_size)}) : opened.status();
    const double load_t = seconds_since(t0);
    if (!s.is_ok()) return exit_status(s);
    opened = Error(ErrorKind::InvalidArgument, "released");

    if (opt.cold) evict(opt.file);
    t0 = Clock::now();
    const bool pread_ok = parallel_pread(opt.file, whole, threads);
    const double pread_t = seconds_since(t0);
    if (opt.cold) evict(opt.file);
    t0 = Clock::now();
    const bool read_ok = plain_read(opt.file, whole);
    const double read_t = seconds_since(t0);
    if (!pread_ok || !read_ok) return exit_status(Error(ErrorKind::IoError, "the reference reads failed").with_file(redact_secrets(opt.file)));
    if (pass >= 0) {
      open_s.push_back(open_t);
      load_s.push_back(load_t);
      pread_s.push_back(pread_t);
      read_s.push_back(read_t);
    }
  }
  const double load_gbps = gbps(size, median(load_s)), pread_gbps = gbps(size, median(pread_s)), read_gbps = gbps(size, median(read_s));
  const char* cache = opt.cold ? "cold" : "warm";
  if (opt.json) {
    JsonWriter w;
    w.object().key("file").string(redact_secrets(opt.file)).key("bytes").uint(size).key("tensors").uint(tensors).key("passes").uint(passes(opt));
    w.key("threads").uint(threads).key("cache").string(cache).key("open_ms").fixed(median(open_s) * 1e3, 4);
    w.key("load_ms").fixed(median(load_s) * 1e3, 3).key("load_gbps").fixed(load_gbps, 3).key("pread_gbps").fixed(pread_gbps, 3);
    w.key("read_ms").fixed(median(read_s) * 1e3, 3).key("read_gbps").fixed(read_gbps, 3);
    w.key("ratio").fixed(load_gbps / read_gbps, 3).key("ratio_pread").fixed(load_gbps / pread_gbps, 3).end();
    std::printf("%s\n", w.text().c_str());
  } else {
    std::printf("file:              %s (%s, %zu tensors)\n", printable(redact_secrets(opt.file)).c_str(), human_bytes(size).c_str(), tensors);
    std::printf("passes:            %d (medians; page cache %s; GB = 1e9 bytes; %u threads)\n", opt.passes, cache, threads);
    std::printf("open+validate+plan: %.3f ms\n", median(open_s) * 1e3);
    std::printf("load:              %.1f ms  %.2f GB/s\n", median(load_s) * 1e3, load_gbps);
    std::printf("parallel pread:    %.1f ms  %.2f GB/s  (the limit)\n", median(pread_s) * 1e3, pread_gbps);
    std::printf("one-thread read(): %.1f ms  %.2f GB/s\n", median(read_s) * 1e3, read_gbps);
    std::printf("ratios:            %.2fx parallel pread, %.2fx read()\n", load_gbps / pread_gbps, load_gbps / read_gbps);
  }
  return kExitOk;
}

// ---- device -----------------------------------------------------------------------------------------

// The physical reference: `bytes` copied from one pinned buffer (at most 1 GiB, reused) to device memory.
Result<double> pinned_copy_seconds(Device& device, void* dst, std::uint64_t bytes) {
  const std::size_t piece = static_cast<std::size_t>(std::min<std::uint64_t>(bytes, 1ull << 30));
  auto pinned = device.allocate_pinned(std::max<std::size_t>(piece, 1));
  if (!pinned.is_ok()) return std::move(pinned).status();
  std::memset(*pinned, 7, piece);
  std::vector<double> times;
  Status status;
  for (int pass = 0; pass < 3 && status.is_ok(); ++pass) {
    const auto t0 = Clock::now();
    for (std::uint64_t at = 0; at < bytes && status.is_ok(); at += piece)
      status = device.copy_async(static_cast<std::byte*>(dst) + at, *pinned, static_cast<std::size_t>(std::min<std::uint64_t>(piece, bytes - at)), 0);
    if (status.is_ok()) status = device.synchronize();
    times.push_back(seconds_since(t0));
  }
  device.release_pinned(*pinned);
  if (!status.is_ok()) return status.error();
  return median(times);
}

// The device bytes of every tensor equal a CPU load of the same plan.
Result<bool> verify(Device& device, const LoadPlan& plan, const void* loaded) {
  auto host = load_host(plan);
  if (!host.is_ok()) return std::move(host).status();
  std::vector<std::byte> piece(std::min<std::uint64_t>(plan.size(), 64u << 20));
  for (std::uint64_t at = 0; at < plan.size(); at += piece.size()) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(piece.size(), plan.size() - at));
    Status s = device.copy_to_host({piece.data(), n}, static_cast<const std::byte*>(loaded) + at);
    if (!s.is_ok()) return s.error();
    // Only tensor bytes count (alignment padding is never written).
    for (const PlacedTensor& t : plan.tensors()) {
      const std::uint64_t begin = std::max(t.offset, at), end = std::min(t.offset + t.nbytes, at + n);
      if (begin < end && std::memcmp(piece.data() + (begin - at), host->buffer.get() + begin, static_cast<std::size_t>(end - begin)) != 0)
        return false;
    }
  }
  return true;
}

int run_device(const BenchArgs& opt) {
  auto device = Device::open(opt.device);
  if (!device.is_ok()) return exit_status(device.status());
  auto opened = open_and_plan(opt);
  if (!opened.is_ok()) return exit_status(opened.status());
  const LoadPlan& plan = opened->plan;
  const std::uint64_t bytes = plan.read_bytes();
  DeviceLoadOptions dopt;
  dopt.strategy = parse_strategy(opt.strategy).value();  // the command line checked the name
  dopt.register_bytes = opt.register_mib << 20;
  dopt.buffer_bytes = opt.buffer_mib << 20;
  auto memory = (*device)->allocate(std::max<std::uint64_t>(plan.size(), 1));
  if (!memory.is_ok()) return exit_status(memory.status());
  std::shared_ptr<void> hold(*memory, [d = *device](void* p) { d->release(p); });

  std::vector<double> load_s;
  DeviceLoadStats stats;
  for (int pass = opt.cold ? 0 : -1; pass < opt.passes; ++pass) {  // pass -1 warms the page cache and the staging ring
    if (opt.cold) evict(opt.file);
    const auto t0 = Clock::now();
    auto s = load_to_device(plan, **device, *memory, plan.size(), dopt);
    const double t = seconds_since(t0);
    if (!s.is_ok()) return exit_status(s.status());
    stats = *s;
    if (pass >= 0) load_s.push_back(t);
  }
  auto h2d = pinned_copy_seconds(**device, *memory, bytes);
  if (!h2d.is_ok()) return exit_status(h2d.status());
  // The reference overwrote the device memory: load once more, then compare.
  auto last = load_to_device(plan, **device, *memory, plan.size(), dopt);
  auto verified = last.is_ok() ? verify(**device, plan, *memory) : Result<bool>(last.status());
  if (!verified.is_ok()) return exit_status(verified.status());
  const double load_gbps = gbps(bytes, median(load_s)), h2d_gbps = gbps(bytes, *h2d);
  const unsigned threads = effective_threads(opt);
  const char* cache = opt.cold ? "cold" : "warm";
  const std::string strategy(strategy_name(stats.strategy));
  if (opt.json) {
    JsonWriter w;
    w.object()
        .key("file")
        .string(redact_secrets(opt.file))
        .key("bytes")
        .uint(bytes)
        .key("tensors")
        .uint(plan.tensors().size())
        .key("device")
        .string((*device)->name());
    w.key("passes").uint(passes(opt)).key("threads").uint(threads).key("cache").string(cache).key("strategy").string(strategy);
    w.key("direct").boolean(stats.direct).key("registered_bytes").uint(stats.registered_bytes).key("file_read_bytes").uint(stats.file_read_bytes);
    w.key("file_read_path").string(file_read_path_name((*device)->file_read_path()));
    w.key("load_ms").fixed(median(load_s) * 1e3, 3).key("load_gbps").fixed(load_gbps, 3).key("h2d_pinned_gbps").fixed(h2d_gbps, 3);
    w.key("ratio").fixed(load_gbps / h2d_gbps, 3).key("verified").boolean(*verified);
    w.key("register_s").fixed(stats.register_seconds, 4).key("unregister_s").fixed(stats.unregister_seconds, 4).end();
    std::printf("%s\n", w.text().c_str());
  } else {
    std::printf("file:            %s (%s, %zu tensors)\n", printable(redact_secrets(opt.file)).c_str(), human_bytes(bytes).c_str(),
                plan.tensors().size());
    std::printf("device:          %s (%s; %u threads; page cache %s%s)\n", printable((*device)->name()).c_str(), strategy.c_str(), threads, cache,
                stats.direct ? ", O_DIRECT" : "");
    std::printf("load:            %.1f ms  %.2f GB/s  (median of %d)\n", median(load_s) * 1e3, load_gbps, opt.passes);
    std::printf("pinned H2D copy: %.2f GB/s  (the limit)\n", h2d_gbps);
    std::printf("ratio:           %.2fx\n", load_gbps / h2d_gbps);
    std::printf("verified:        %s\n", *verified ? "yes (device bytes equal a CPU load)" : "NO: device bytes differ");
  }
  return *verified ? kExitOk : kExitInvalid;
}

// ---- remote ------------------------------------------------------------------------------------------

// A remote file (http(s)://, s3://, hf://): the load into host memory with --connections requests in
// flight, against the same load through one connection asking for each contiguous run of tensor bytes
// in one GET (what a plain download gets), in the same run. Every pass opens the file afresh (a new
// source: no block cache, new connections).
Result<Opened> open_remote(const BenchArgs& opt, const HttpOptions& http, unsigned threads) {
  FormatOptions options;
  options.resolver = caching_resolver(http);
  auto format = detect_format(opt.file, options);
  if (!format.is_ok()) return std::move(format).status();
  auto file = (*format)->open(opt.file, {}, options);
  if (!file.is_ok()) return std::move(file).status();
  LoaderOptions lo;
  lo.threads = threads;
  auto plan = LoadPlan::make(**file, lo);
  if (!plan.is_ok()) return std::move(plan).status();
  return Opened{std::move(*file), std::move(*plan)};
}

// Opens and loads; the seconds of each.
Result<std::pair<double, double>> timed_remote_load(const BenchArgs& opt, const HttpOptions& http, unsigned threads,
                                                    std::unique_ptr<std::byte[]>& buffer, std::uint64_t& plan_size, std::size_t& tensors) {
  auto t0 = Clock::now();
  auto opened = open_remote(opt, http, threads);
  const double open_t = seconds_since(t0);
  if (!opened.is_ok()) return std::move(opened).status();
  if (!buffer) {
    plan_size = opened->plan.size();
    tensors = opened->plan.tensors().size();
    auto b = allocate_uninitialized(plan_size + 1, "the benchmark buffer");
    if (!b.is_ok()) return std::move(b.error().with_file(redact_secrets(opt.file)));
    buffer = std::move(*b);
    std::memset(buffer.get(), 1, static_cast<std::size_t>(plan_size));
  }
  t0 = Clock::now();
  const Status s = load_into(opened->plan, {buffer.get(), static_cast<std::size_t>(plan_size)});
  const double load_t = seconds_since(t0);
  if (!s.is_ok()) return s.error();
  return std::make_pair(open_t, load_t);
}

int run_remote(const BenchArgs& opt) {
  const HttpOptions http = remote_options();
  HttpOptions one = http;
  one.parallel = 1;
  one.chunk_size = std::uint64_t{1} << 40;  // a contiguous run of tensors is one GET
  std::vector<double> open_s, load_s, one_s;
  std::uint64_t plan_size = 0;
  std::size_t tensors = 0;
  std::unique_ptr<std::byte[]> buffer;
  // Remote reads wait on the network, not the CPU: as many loader threads as requests may be in
  // flight, so every connection has a read to serve.
  const unsigned threads = opt.threads ? opt.threads : http.parallel;
  for (int pass = 0; pass < opt.passes; ++pass) {
    auto load = timed_remote_load(opt, http, threads, buffer, plan_size, tensors);
    if (!load.is_ok()) return exit_status(load.status());
    auto reference = timed_remote_load(opt, one, 1, buffer, plan_size, tensors);
    if (!reference.is_ok()) return exit_status(reference.status());
    open_s.push_back(load->first);
    load_s.push_back(load->second);
    one_s.push_back(reference->second);
  }
  const double load_gbps = gbps(plan_size, median(load_s)), one_gbps = gbps(plan_size, median(one_s));
  if (opt.json) {
    JsonWriter w;
    w.object()
        .key("file")
        .string(redact_secrets(opt.file))
        .key("tensor_bytes")
        .uint(plan_size)
        .key("tensors")
        .uint(tensors)
        .key("passes")
        .uint(passes(opt));
    w.key("connections").uint(http.parallel).key("part_bytes").uint(http.chunk_size).key("open_ms").fixed(median(open_s) * 1e3, 3);
    w.key("load_ms").fixed(median(load_s) * 1e3, 3).key("load_gbps").fixed(load_gbps, 4).key("one_connection_ms").fixed(median(one_s) * 1e3, 3);
    w.key("one_connection_gbps").fixed(one_gbps, 4).key("ratio").fixed(load_gbps / one_gbps, 3).end();
    std::printf("%s\n", w.text().c_str());
  } else {
    std::printf("file:              %s (%s of tensors, %zu tensors)\n", printable(redact_secrets(opt.file)).c_str(), human_bytes(plan_size).c_str(),
                tensors);
    std::printf("passes:            %d (medians; GB = 1e9 bytes; %u connections, %s parts)\n", opt.passes, http.parallel,
                human_bytes(http.chunk_size).c_str());
    std::printf("open+validate+plan: %.1f ms\n", median(open_s) * 1e3);
    std::printf("load:              %.1f ms  %.3f GB/s\n", median(load_s) * 1e3, load_gbps);
    std::printf("one connection:    %.1f ms  %.3f GB/s  (one GET per contiguous run of tensors)\n", median(one_s) * 1e3, one_gbps);
    std::printf("ratio:             %.2fx one connection\n", load_gbps / one_gbps);
  }
  return kExitOk;
}

}  // namespace

int run_bench(const BenchArgs& args) {
  if (is_url(args.file) && !args.device.empty())
    return exit_status(
        Error(ErrorKind::InvalidArgument, "--device loads of remote files are not benchmarked yet: bench the host load").with_file(args.file));
  if (is_url(args.file)) return run_remote(args);
  return args.device.empty() ? run_host(args) : run_device(args);
}

}  // namespace safeweights::cli
