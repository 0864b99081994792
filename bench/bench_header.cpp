// bench_header — Header::parse (parse + every validation rule) of synthetic headers, in memory.
//
// The "file" is a private anonymous mapping as large as the file the header declares (2.12 GB for the
// 700-tensor Llama-like header), reserved with MAP_NORESERVE: only the header pages are ever written
// or read, so no data has to exist. That matches the Rust reference's `deserialize` benchmark, which
// also parses a file already in memory.
//
//   BM_parse_mapped/700, /20000   parse from a mapped source (zero-copy header access)
//   BM_parse_unmapped/...         parse from a source without mapped(): the header is read by read_at
//   BM_parse_scaling/N            MoE-like headers of 5k..40k tensors, with a linear-complexity fit
//   BM_json_floor/700, /20000     simdjson's DOM parse of the same JSON, nothing else: how much of
//                                 Header::parse is JSON parsing on this machine, in the same run
//
// per_tensor is the time divided by the tensor count; header_MB is the JSON size.
#include <benchmark/benchmark.h>
#include <simdjson.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "safeweights/safetensors.h"
#include "safeweights/source.h"
#include "synthetic.h"

namespace {

using namespace safeweights;

// A synthetic file: the header bytes at the front of a reservation as large as the declared file.
struct SynthFile {
  std::string prefix;
  std::uint64_t file_size = 0;
  std::size_t tensors = 0;
  std::byte* base = nullptr;
  SourcePtr mapped;

  explicit SynthFile(const std::vector<bench::SynthTensor>& list) {
    prefix = bench::header_prefix(list);
    file_size = prefix.size() + bench::data_size(list);
    tensors = list.size();
    void* p = mmap(nullptr, file_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("mmap");
      std::exit(1);
    }
    base = static_cast<std::byte*>(p);
    std::memcpy(base, prefix.data(), prefix.size());
    mapped = memory_source({base, static_cast<std::size_t>(file_size)}, "<synthetic>");
  }
  ~SynthFile() { munmap(base, file_size); }
};

// A source that is not mapped: size() is the whole declared file, read_at serves the header bytes.
class HeaderOnlySource final : public ByteSource {
 public:
  HeaderOnlySource(const std::string& prefix, std::uint64_t size) : prefix_(prefix), size_(size) {}
  const std::string& name() const noexcept override { return name_; }
  std::uint64_t size() const noexcept override { return size_; }
  Status read_at(std::uint64_t offset, std::span<std::byte> dst) const override {
    if (offset > prefix_.size() || dst.size() > prefix_.size() - offset) {
      return Error(ErrorKind::IoError, "benchmark source holds only the header");
    }
    std::memcpy(dst.data(), prefix_.data() + offset, dst.size());
    return Status::ok();
  }

 private:
  std::string name_ = "<header-only>";
  const std::string& prefix_;
  std::uint64_t size_;
};

const SynthFile& synth(int tensors) {
  static std::map<int, std::unique_ptr<SynthFile>> cache;
  auto& slot = cache[tensors];
  if (!slot) {
    slot = std::make_unique<SynthFile>(tensors == 700 ? bench::llama_like() : bench::moe_like(tensors));
    // Fail loudly rather than benchmark an error path.
    auto header = safetensors::Header::parse(*slot->mapped);
    if (!header.is_ok()) {
      std::fprintf(stderr, "synthetic header with %d tensors does not parse: %s\n", tensors, header.error().to_string().c_str());
      std::exit(1);
    }
    if (header->tensors().size() != slot->tensors) {
      std::fprintf(stderr, "synthetic header: %zu tensors parsed, %zu written\n", header->tensors().size(), slot->tensors);
      std::exit(1);
    }
  }
  return *slot;
}

void add_counters(benchmark::State& state, const SynthFile& f) {
  state.counters["tensors"] = static_cast<double>(f.tensors);
  state.counters["header_MB"] = static_cast<double>(f.prefix.size()) / 1e6;
  state.counters["declared_GB"] = static_cast<double>(f.file_size) / 1e9;
  // Seconds per tensor (printed with an SI prefix: "220ns").
  state.counters["per_tensor"] =
      benchmark::Counter(static_cast<double>(f.tensors), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * f.prefix.size()));
}

void BM_parse_mapped(benchmark::State& state) {
  const SynthFile& f = synth(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto header = safetensors::Header::parse(*f.mapped);
    benchmark::DoNotOptimize(header);
  }
  add_counters(state, f);
}

void BM_parse_unmapped(benchmark::State& state) {
  const SynthFile& f = synth(static_cast<int>(state.range(0)));
  HeaderOnlySource source(f.prefix, f.file_size);
  for (auto _ : state) {
    auto header = safetensors::Header::parse(source);
    benchmark::DoNotOptimize(header);
  }
  add_counters(state, f);
}

void BM_parse_scaling(benchmark::State& state) {
  const SynthFile& f = synth(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto header = safetensors::Header::parse(*f.mapped);
    benchmark::DoNotOptimize(header);
  }
  add_counters(state, f);
  state.SetComplexityN(state.range(0));
}

void BM_json_floor(benchmark::State& state) {
  const SynthFile& f = synth(static_cast<int>(state.range(0)));
  const simdjson::padded_string json(f.prefix.data() + 8, f.prefix.size() - 8);
  simdjson::dom::parser parser;
  for (auto _ : state) {
    simdjson::dom::element root;
    if (parser.parse(json).get(root)) state.SkipWithError("simdjson rejected the synthetic header");
    benchmark::DoNotOptimize(root);
  }
  add_counters(state, f);
}

}  // namespace

BENCHMARK(BM_parse_mapped)->Arg(700)->Arg(20000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_parse_unmapped)->Arg(700)->Arg(20000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_json_floor)->Arg(700)->Arg(20000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_parse_scaling)->Arg(5000)->Arg(10000)->Arg(20000)->Arg(40000)->Complexity(benchmark::oN)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
