// bench_io — whole-file throughput of the safetensors reader and writer against physical references.
//
// Usage: bench_io [--dir DIR] [--passes N] [--layers L] [--no-prewarm] [--remove-input]
//
// Creates DIR/safeweights_bench_io.safetensors (the Llama-like 700-tensor layout of synthetic.h,
// 2.12 GB with the default 58 layers; reused when it is already there with the right size), reads
// it once so the page cache is warm, then runs N passes (default 7). Each pass measures, in order:
//   load_host (mmap)   open_tensors(path) (Mmap) + LoadPlan::make + load_host(): open, parse, plan, read
//                      all data into owned memory with the library's one loader (loader.h)
//   load_host (pread)  the same with FileBackend::Pread
//   load_host (1 thr)  the mmap one with LoaderOptions::threads = 1
//   read() fresh       open() + read() loop of the whole file into a buffer mmap'ed just before and
//                      never touched: the physical reference for load_host, which also fills fresh pages
//   read() touched     the same into a buffer already written once (page-cache copy ceiling; info)
//   pread() 2 threads  two threads each pread() half of the file into a fresh buffer: the reference
//                      at the parallelism load_host uses by default on this 2-core machine (info)
//   mmap + touch       Reader::open(path, Mmap) + one byte read from every 4 KiB page via TensorEntry::view
//   write_file         safetensors::write_file of all tensors (from memory) to DIR, no fsync
//   cp                 `cp FILE DIR/...` of the same file (physical reference for write_file)
// The order of the measurements rotates from pass to pass, sync() runs before each and outputs are
// deleted right after theirs, all outside the timed regions.
//
// Prewarm (default on): on this VM, memory that has stayed free for a few seconds is slow to use again
// (the host takes it back; a buffered write of 333 MB took 0.09 s right after another file of that
// size was deleted, and 0.4-1.8 s when the memory had been free for 3 s). Left alone, that decided
// the results: `cp` always ran right after write_file deleted its output, reused its page-cache
// memory, and looked 3-7x faster. So before each measurement, untimed, the harness writes and deletes
// a scratch file 1.25x the input's size and touches and frees an anonymous buffer of that size. Every
// measurement still faults in pages of its own (destination buffers and page-cache pages are new to
// the process and to the file); none pays for memory the host took back. --no-prewarm: cold. Every figure printed is the median over
// the passes; GB/s uses 1 GB = 1e9 bytes.
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "safeweights/format.h"
#include "safeweights/loader.h"
#include "safeweights/safetensors.h"
#include "safeweights/safetensors_writer.h"
#include "synthetic.h"

extern char** environ;

namespace {

using namespace safeweights;
using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_io: %s\n", what.c_str());
  std::exit(1);
}

void check(const Status& s, const char* what) {
  if (!s.is_ok()) die(std::string(what) + ": " + s.error().to_string());
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::uint64_t file_size_of(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

std::byte* fresh_buffer(std::uint64_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) die("mmap of a buffer failed");
  return static_cast<std::byte*>(p);
}

void read_whole_file(const std::string& path, std::byte* dst, std::uint64_t size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) die("open " + path);
  std::uint64_t done = 0;
  while (done < size) {
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(size - done, 1u << 30));
    const ssize_t got = ::read(fd, dst + done, want);
    if (got <= 0) die("read " + path);
    done += static_cast<std::uint64_t>(got);
  }
  ::close(fd);
}

// Two threads, each positional-reading one half (chunks of at most 1 GiB).
void pread_two_threads(const std::string& path, std::byte* dst, std::uint64_t size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) die("open " + path);
  auto part = [&](std::uint64_t begin, std::uint64_t end) {
    while (begin < end) {
      const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(end - begin, 1u << 30));
      const ssize_t got = ::pread(fd, dst + begin, want, static_cast<off_t>(begin));
      if (got <= 0) die("pread " + path);
      begin += static_cast<std::uint64_t>(got);
    }
  };
  const std::uint64_t half = size / 2 / 4096 * 4096;
  std::thread other(part, half, size);
  part(0, half);
  other.join();
  ::close(fd);
}

// Makes `bytes` of free memory quick to use again: writes and deletes a scratch file of that size in
// `dir` (page-cache memory) and touches and frees an anonymous buffer of that size.
void prewarm_free_memory(const std::string& scratch, const std::byte* data, std::uint64_t data_size, std::uint64_t bytes) {
  const int fd = ::open(scratch.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) die("create " + scratch);
  for (std::uint64_t off = 0; off < bytes;) {
    const std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>({bytes - off, data_size, 64u << 20}));
    const ssize_t put = ::pwrite(fd, data, len, static_cast<off_t>(off));
    if (put <= 0) die("write " + scratch);
    off += static_cast<std::uint64_t>(put);
  }
  ::close(fd);
  ::unlink(scratch.c_str());
  std::byte* p = fresh_buffer(bytes);
  for (std::uint64_t i = 0; i < bytes; i += 4096) p[i] = std::byte{1};
  munmap(p, bytes);
}

void run_cp(const std::string& from, const std::string& to) {
  const char* argv[] = {"cp", from.c_str(), to.c_str(), nullptr};
  pid_t pid;
  if (posix_spawnp(&pid, "cp", nullptr, nullptr, const_cast<char* const*>(argv), environ) != 0) die("spawn cp");
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) die("cp failed");
}

std::string first_line_with(const char* path, const char* key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      std::string v = colon == std::string::npos ? line : line.substr(colon + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  }
  return "?";
}

std::string fs_name(const std::string& dir) {
  struct statfs s {};
  if (statfs(dir.c_str(), &s) != 0) return "?";
  switch (static_cast<unsigned long>(s.f_type)) {
    case 0xEF53: return "ext4";
    case 0x01021994: return "tmpfs";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x794C7630: return "overlayfs";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "0x%lx", static_cast<unsigned long>(s.f_type));
      return buf;
    }
  }
}

// Deterministic, cheap, non-constant content.
void fill_pattern(std::byte* p, std::uint64_t n) {
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  std::uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(p + i, &x, 8);
  }
  for (; i < n; ++i) p[i] = static_cast<std::byte>(i);
}

struct Row {
  std::string name;
  std::uint64_t bytes;
  std::vector<double> secs;
};

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp";
  int passes = 7;
  int layers = 58;
  bool remove_input = false;
  bool prewarm = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value after " + a);
      return argv[++i];
    };
    if (a == "--dir")
      dir = next();
    else if (a == "--passes")
      passes = std::atoi(next().c_str());
    else if (a == "--layers")
      layers = std::atoi(next().c_str());
    else if (a == "--remove-input")
      remove_input = true;
    else if (a == "--no-prewarm")
      prewarm = false;
    else if (a == "-h" || a == "--help") {
      std::printf("usage: bench_io [--dir DIR] [--passes N] [--layers L] [--no-prewarm] [--remove-input]\n");
      return 0;
    } else
      die("unknown argument " + a);
  }
  if (passes < 1 || layers < 1) die("--passes and --layers must be positive");

  const std::string input = dir + "/safeweights_bench_io.safetensors";
  const std::string out_write = dir + "/safeweights_bench_io.write.safetensors";
  const std::string out_cp = dir + "/safeweights_bench_io.cp.safetensors";
  const std::string scratch = dir + "/safeweights_bench_io.scratch";
  const std::vector<bench::SynthTensor> layout = bench::llama_like(layers);
  const std::uint64_t data_bytes = bench::data_size(layout);

  // Create the input (or reuse it when it parses and has the expected shape).
  bool reuse = false;
  if (auto r = safetensors::Reader::open(input); r.is_ok()) {
    reuse = r->header().tensors().size() == layout.size() && r->header().data_size() == data_bytes;
  }
  if (!reuse) {
    std::printf("creating %s (%zu tensors, %.2f GB of data)...\n", input.c_str(), layout.size(), data_bytes / 1e9);
    std::byte* data = fresh_buffer(data_bytes);
    fill_pattern(data, data_bytes);
    std::vector<safetensors::TensorData> tensors;
    std::uint64_t off = 0;
    for (const auto& t : layout) {
      tensors.push_back({t.name, t.dtype, t.shape, {data + off, static_cast<std::size_t>(t.nbytes())}});
      off += t.nbytes();
    }
    check(safetensors::write_file(input, tensors, safetensors::MetadataEntries{{"format", "pt"}}), "write input");
    munmap(data, data_bytes);
  } else {
    std::printf("reusing %s\n", input.c_str());
  }
  std::fflush(stdout);
  const std::uint64_t file_bytes = file_size_of(input);

  // Warm the page cache, and keep one loaded copy as the source for write_file.
  std::byte* touched = fresh_buffer(file_bytes);
  read_whole_file(input, touched, file_bytes);
  auto source_file = open_tensors(input);
  check(source_file.status(), "open input");
  auto source_plan = LoadPlan::make(**source_file);
  check(source_plan.status(), "plan input");
  auto source_loaded = load_host(*source_plan);
  check(source_loaded.status(), "load input");
  std::vector<safetensors::TensorData> to_write;
  for (const PlacedTensor& t : source_plan->tensors()) {
    to_write.push_back({std::string(t.entry.name), t.entry.type, t.shape, source_loaded->bytes_of(t)});
  }

  std::vector<Row> rows = {
      {"load_host (mmap backend, default threads)", data_bytes, {}},
      {"load_host (pread backend, default threads)", data_bytes, {}},
      {"load_host (mmap backend, 1 thread)", data_bytes, {}},
      {"read() loop into fresh buffer", file_bytes, {}},
      {"read() loop into touched buffer", file_bytes, {}},
      {"pread() 2 threads into fresh buffer", file_bytes, {}},
      {"mmap open + touch every page", data_bytes, {}},
      {"write_file (no fsync)", file_bytes, {}},
      {"cp (no fsync)", file_bytes, {}},
  };
  volatile std::uint64_t sink = 0;

  // Each measurement is self-contained: it allocates (fresh) what it needs and removes what it writes.
  auto load = [&](FileBackend backend, unsigned threads) {
    const auto t0 = Clock::now();
    FormatOptions open_options;
    open_options.backend = backend;
    auto file = open_tensors(input, {}, open_options);
    check(file.status(), "open");
    LoaderOptions load_options;
    load_options.threads = threads;
    auto plan = LoadPlan::make(**file, load_options);
    check(plan.status(), "plan");
    auto loaded = load_host(*plan);
    check(loaded.status(), "load_host");
    const double s = seconds_since(t0);
    sink = sink + std::to_integer<std::uint64_t>(loaded->buffer[loaded->size / 2]);
    return s;  // the buffer is freed after the clock stopped
  };
  auto into_fresh = [&](void (*reader)(const std::string&, std::byte*, std::uint64_t)) {
    std::byte* fresh = fresh_buffer(file_bytes);
    const auto t0 = Clock::now();
    reader(input, fresh, file_bytes);
    const double s = seconds_since(t0);
    munmap(fresh, file_bytes);
    return s;
  };
  std::vector<std::function<double()>> measure = {
      [&] { return load(FileBackend::Mmap, 0); },
      [&] { return load(FileBackend::Pread, 0); },
      [&] { return load(FileBackend::Mmap, 1); },
      [&] { return into_fresh(read_whole_file); },
      [&] {
        const auto t0 = Clock::now();
        read_whole_file(input, touched, file_bytes);
        return seconds_since(t0);
      },
      [&] { return into_fresh(pread_two_threads); },
      [&] {
        const auto t0 = Clock::now();
        auto reader = safetensors::Reader::open(input, FileBackend::Mmap);
        check(reader.status(), "open");
        std::uint64_t sum = 0;
        for (const TensorEntry& entry : reader->tensors()) {
          const auto view = entry.view();
          for (std::size_t i = 0; i < view.size(); i += 4096) sum += std::to_integer<std::uint64_t>(view[i]);
        }
        const double s = seconds_since(t0);
        sink = sink + sum;
        return s;
      },
      [&] {
        const auto t0 = Clock::now();
        check(safetensors::write_file(out_write, to_write, safetensors::MetadataEntries{{"format", "pt"}}), "write_file");
        const double s = seconds_since(t0);
        if (file_size_of(out_write) != file_bytes) die("write_file produced a file of a different size");
        std::remove(out_write.c_str());  // drops its dirty pages before the next measurement
        return s;
      },
      [&] {
        const auto t0 = Clock::now();
        run_cp(input, out_cp);
        const double s = seconds_since(t0);
        std::remove(out_cp.c_str());
        return s;
      },
  };
  if (measure.size() != rows.size()) die("internal: rows and measurements disagree");

  // The order rotates from pass to pass so that no measurement always follows the same one; sync()
  // before each (untimed) so that none pays for another's writeback.
  for (int pass = 0; pass < passes; ++pass) {
    for (std::size_t k = 0; k < measure.size(); ++k) {
      const std::size_t i = (k + static_cast<std::size_t>(pass)) % measure.size();
      sync();
      if (prewarm) prewarm_free_memory(scratch, touched, file_bytes, file_bytes + file_bytes / 4);
      rows[i].secs.push_back(measure[i]());
    }
    std::fprintf(stderr, "pass %d/%d done\n", pass + 1, passes);
  }
  munmap(touched, file_bytes);
  if (remove_input) std::remove(input.c_str());

  utsname u{};
  uname(&u);
  std::printf("\n## bench_io: %zu tensors, %.3f GB data, %.3f GB file, %d passes, page cache warm, prewarm %s\n\n", layout.size(), data_bytes / 1e9,
              file_bytes / 1e9, passes, prewarm ? "on" : "off");
  std::printf("machine: %u cores (nproc %ld), %s, MemTotal %s, kernel %s, %s on %s\n\n", std::thread::hardware_concurrency(),
              sysconf(_SC_NPROCESSORS_ONLN), first_line_with("/proc/cpuinfo", "model name").c_str(),
              first_line_with("/proc/meminfo", "MemTotal").c_str(), u.release, dir.c_str(), fs_name(dir).c_str());
  std::printf("| measurement | median ms | min ms | max ms | GB/s (median) |\n|---|---:|---:|---:|---:|\n");
  std::vector<double> med;
  for (const Row& r : rows) {
    const double m = median(r.secs);
    med.push_back(m);
    std::printf("| %s | %.1f | %.1f | %.1f | %.2f |\n", r.name.c_str(), m * 1e3, *std::min_element(r.secs.begin(), r.secs.end()) * 1e3,
                *std::max_element(r.secs.begin(), r.secs.end()) * 1e3, r.bytes / m / 1e9);
  }
  auto rate = [&](std::size_t i) { return rows[i].bytes / med[i]; };
  std::printf("\n| ratio (throughput, medians) | value |\n|---|---:|\n");
  std::printf("| load_host mmap / read() fresh (target >= 0.9) | %.2f |\n", rate(0) / rate(3));
  std::printf("| load_host pread / read() fresh | %.2f |\n", rate(1) / rate(3));
  std::printf("| load_host mmap 1 thread / read() fresh | %.2f |\n", rate(2) / rate(3));
  std::printf("| load_host mmap / read() touched | %.2f |\n", rate(0) / rate(4));
  std::printf("| load_host mmap / pread() 2 threads fresh | %.2f |\n", rate(0) / rate(5));
  std::printf("| write_file / cp | %.2f |\n", rate(7) / rate(8));
  std::printf("\n(sink %llu)\n", static_cast<unsigned long long>(sink));
  return 0;
}
