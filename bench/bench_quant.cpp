// bench_quant — Google Benchmark: quantize() and dequantize() of one 4096-element row (what the
// converter calls per row, from many threads), per type, single-threaded, and quantize_rows() with
// importance weights (llama-quantize with an imatrix) for the types that take them. Throughput is GB/s
// of float32 (input to quantize, output of dequantize). ggml's own speed on the same machine, same run:
// tests/quant/ggml_differential.sh prints it beside ours.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "safeweights/quantize.h"

namespace {

using safeweights::TensorType;

constexpr std::size_t kRow = 4096;

std::vector<float> row_of_normals() {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(kRow);
  for (auto& v : row) v = normal(rng);
  return row;
}

std::size_t row_bytes(TensorType type) {
  const std::uint64_t shape[1] = {kRow};
  return safeweights::tensor_nbytes(type, shape).value();
}

void BM_Quantize(benchmark::State& state, TensorType type) {
  const auto row = row_of_normals();
  std::vector<std::byte> out(row_bytes(type));
  for (auto _ : state) {
    if (!safeweights::quantize(type, row, out).is_ok()) state.SkipWithError("quantize failed");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kRow * sizeof(float)));
}

void BM_QuantizeWeighted(benchmark::State& state, TensorType type) {
  const auto row = row_of_normals();
  std::mt19937 rng(3);
  std::lognormal_distribution<float> spread(0.0f, 1.0f);
  std::vector<float> importance(kRow);
  for (auto& v : importance) v = spread(rng);
  std::vector<std::byte> out(row_bytes(type));
  (void)safeweights::quantize_rows(type, row, out, kRow, importance);  // the IQ grids' search structures are built at first use
  for (auto _ : state) {
    if (!safeweights::quantize_rows(type, row, out, kRow, importance).is_ok()) state.SkipWithError("quantize_rows failed");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kRow * sizeof(float)));
}

void BM_Dequantize(benchmark::State& state, TensorType type) {
  const auto row = row_of_normals();
  std::vector<std::byte> packed(row_bytes(type));
  std::vector<float> out(kRow);
  if (safeweights::can_quantize(type)) {
    (void)safeweights::quantize(type, row, packed);
  } else {
    std::mt19937 rng(2);
    for (auto& b : packed) b = static_cast<std::byte>(rng());
  }
  for (auto _ : state) {
    if (!safeweights::dequantize(type, packed, out).is_ok()) state.SkipWithError("dequantize failed");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kRow * sizeof(float)));
}

const TensorType kTypes[] = {TensorType::F16,     TensorType::BF16,   TensorType::Q8_0,  TensorType::Q4_0,    TensorType::Q4_1,
                             TensorType::Q5_0,    TensorType::Q5_1,   TensorType::Q2_K,  TensorType::Q3_K,    TensorType::Q4_K,
                             TensorType::Q5_K,    TensorType::Q6_K,   TensorType::Q8_K,  TensorType::IQ4_NL,  TensorType::IQ4_XS,
                             TensorType::TQ1_0,   TensorType::TQ2_0,  TensorType::MXFP4, TensorType::IQ3_XXS, TensorType::IQ3_S,
                             TensorType::IQ2_XXS, TensorType::IQ2_XS, TensorType::IQ2_S, TensorType::IQ1_S,   TensorType::IQ1_M};

const bool registered = [] {
  for (TensorType type : kTypes) {
    const std::string name(safeweights::type_name(type));
    if (safeweights::can_quantize(type)) benchmark::RegisterBenchmark(("quantize/" + name).c_str(), BM_Quantize, type);
    if ((safeweights::can_quantize(type) || safeweights::requires_importance(type)) && safeweights::takes_importance(type))
      benchmark::RegisterBenchmark(("quantize_weighted/" + name).c_str(), BM_QuantizeWeighted, type);
    benchmark::RegisterBenchmark(("dequantize/" + name).c_str(), BM_Dequantize, type);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
