// bench_fresh_parse — what the first Header::parse of a process costs, next to later (warm) ones.
//
//   bench_fresh_parse write DIR      writes DIR/fresh_moe20000.safetensors and DIR/fresh_llama700.safetensors:
//                                    the synthetic headers of synthetic.h, data left sparse (never read)
//   bench_fresh_parse parse FILE [K] opens FILE (mmap), times the process's first Header::parse and
//                                    counts the minor page faults it takes, then K more parses (warm:
//                                    memory the first one freed is reused); prints
//                                    "first_ms=… first_minflt=… warm_median_ms=…"
//
// A warm loop (bench_header) measures the parser with every buffer already faulted in; a user who runs
// a command once pays for the fresh pages too. scripts/bench-fresh.sh runs this in new processes.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "safeweights/safetensors.h"
#include "safeweights/source.h"
#include "synthetic.h"

namespace {

using Clock = std::chrono::steady_clock;

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

bool write_sparse(const std::string& path, const std::vector<bench::SynthTensor>& tensors) {
  const std::string prefix = bench::header_prefix(tensors);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return false;
  const bool ok = ::write(fd, prefix.data(), prefix.size()) == static_cast<ssize_t>(prefix.size()) &&
                  ::ftruncate(fd, static_cast<off_t>(prefix.size() + bench::data_size(tensors))) == 0;
  return ::close(fd) == 0 && ok;
}

int write_files(const std::string& dir) {
  if (!write_sparse(dir + "/fresh_moe20000.safetensors", bench::moe_like(20000)) ||
      !write_sparse(dir + "/fresh_llama700.safetensors", bench::llama_like())) {
    std::perror("bench_fresh_parse: write");
    return 1;
  }
  return 0;
}

double parse_ms(const safeweights::ByteSource& source) {
  const auto t0 = Clock::now();
  auto header = safeweights::safetensors::Header::parse(source);
  const auto t1 = Clock::now();
  if (!header.is_ok()) {
    std::fprintf(stderr, "bench_fresh_parse: %s\n", header.error().to_string().c_str());
    std::exit(1);
  }
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

int parse_file(const std::string& path, int warm_rounds) {
  auto source = safeweights::open_file(path, safeweights::FileBackend::Mmap);
  if (!source.is_ok()) {
    std::fprintf(stderr, "bench_fresh_parse: %s\n", source.error().to_string().c_str());
    return 1;
  }
  const long faults_before = minor_faults();
  const double first = parse_ms(**source);
  const long first_faults = minor_faults() - faults_before;
  std::vector<double> warm;
  for (int i = 0; i < warm_rounds; ++i) warm.push_back(parse_ms(**source));
  std::sort(warm.begin(), warm.end());
  std::printf("first_ms=%.3f first_minflt=%ld warm_median_ms=%.3f\n", first, first_faults, warm.empty() ? 0.0 : warm[warm.size() / 2]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 2 ? argv[1] : "";
  if (mode == "write") return write_files(argv[2]);
  if (mode == "parse") return parse_file(argv[2], argc > 3 ? std::atoi(argv[3]) : 0);
  std::fprintf(stderr, "usage: bench_fresh_parse write DIR | parse FILE [WARM_ROUNDS]\n");
  return 2;
}
