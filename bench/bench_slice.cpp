// bench_slice — reads from a mapped file through the library's copy paths: slices and small tensor
// reads, the operations whose per-call overhead a guard against a shrinking file could raise.
//
// Usage: bench_slice [--dir DIR] [--passes N]
//
// Writes DIR/safeweights_bench_slice.safetensors (one F32 [4096, 4096] tensor, 64 MiB, and 4,096 F32
// [64] tensors), reads it once so the page cache is warm, then reports the median over N passes
// (default 9) of:
//   rows        read_slice "0:2048" (one contiguous run of 32 MiB)
//   columns     read_slice ":, 0:64" (4,096 runs of 256 bytes)
//   strided     read_slice "::4, ::4" (1M runs of 4 bytes: the per-run cost)
//   small reads read() of each of the 4,096 small tensors (per-call cost of read_at)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "safeweights/safetensors.h"
#include "safeweights/safetensors_writer.h"

namespace {

using namespace safeweights;
using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
double time_ms(F&& f) {
  auto t0 = Clock::now();
  f();
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void check(const Status& s) {
  if (!s.is_ok()) {
    std::fprintf(stderr, "bench_slice: %s\n", s.error().to_string().c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp";
  int passes = 9;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--dir") == 0) dir = argv[i + 1];
    if (std::strcmp(argv[i], "--passes") == 0) passes = std::max(1, std::atoi(argv[i + 1]));
  }
  const std::string path = dir + "/safeweights_bench_slice.safetensors";
  std::vector<std::byte> big(std::size_t{4096} * 4096 * 4, std::byte{1});
  std::vector<std::byte> small(64 * 4, std::byte{2});
  std::vector<safetensors::TensorData> tensors;
  tensors.push_back({"big", TensorType::F32, {4096, 4096}, big});
  for (int i = 0; i < 4096; ++i) tensors.push_back({std::string("s").append(std::to_string(i)), TensorType::F32, {64}, small});
  check(safetensors::write_file(path, tensors));

  auto reader = safetensors::Reader::open(path);
  check(reader.status());
  const TensorEntry& info = *reader->tensor("big").value();
  std::vector<std::byte> out(big.size());
  check(info.read(out));  // warm

  struct Case {
    const char* name;
    const char* spec;
  };
  const Case cases[] = {{"rows", "0:2048"}, {"columns", ":, 0:64"}, {"strided", "::4, ::4"}};
  for (const Case& c : cases) {
    auto spec = SliceSpec::parse(c.spec);
    check(spec.status());
    auto plan = info.plan_slice(*spec);
    check(plan.status());
    std::vector<double> ms;
    for (int p = 0; p < passes; ++p) {
      ms.push_back(time_ms([&] { check(info.read_slice(*plan, std::span(out).first(plan->nbytes()))); }));
    }
    std::printf("%-12s %8.3f ms  (%llu runs)\n", c.name, median(ms), static_cast<unsigned long long>(plan->run_count()));
  }
  std::vector<const TensorEntry*> infos;
  for (int i = 0; i < 4096; ++i) infos.push_back(reader->tensor(std::string("s").append(std::to_string(i))).value());
  std::vector<double> ms;
  for (int p = 0; p < passes; ++p) {
    ms.push_back(time_ms([&] {
      for (const TensorEntry* t : infos) check(t->read(std::span(out).first(t->nbytes)));
    }));
  }
  std::printf("%-12s %8.3f ms  (4096 reads of 256 bytes)\n", "small reads", median(ms));
  std::remove(path.c_str());
  return 0;
}
