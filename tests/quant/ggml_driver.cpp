// Compares safeweights' quantize()/dequantize() with ggml's own code, byte for byte, on random and edge
// inputs, for every type both support, and quantize_rows() with importance weights against ggml's
// weighted quantizers. Built and run by ggml_differential.sh against the pinned llama.cpp (ggml-base
// only); prints one table row a type and exits 1 on any difference.
//
// ggml's side is what llama.cpp's quantizer calls: ggml_quantize_chunk() without an importance matrix
// (from_float_ref for Q8_1, the row functions for Q8_K, which it does not list), ggml_quantize_chunk()
// with one (many rows a call, one weight a column), and the type's to_float for dequantizing.
#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ggml.h"
#include "safeweights/quantize.h"

// Q8_K is not in ggml's traits table (it is an intermediate type): its row functions, by name.
extern "C" void quantize_row_q8_K_ref(const float* x, void* y, int64_t k);
extern "C" void dequantize_row_q8_K(const void* x, float* y, int64_t k);

namespace {

using safeweights::TensorType;

struct Pair {
  TensorType ours;
  ggml_type theirs;
};

const Pair kTypes[] = {
    {TensorType::F16, GGML_TYPE_F16},       {TensorType::BF16, GGML_TYPE_BF16},       {TensorType::Q4_0, GGML_TYPE_Q4_0},
    {TensorType::Q4_1, GGML_TYPE_Q4_1},     {TensorType::Q5_0, GGML_TYPE_Q5_0},       {TensorType::Q5_1, GGML_TYPE_Q5_1},
    {TensorType::Q8_0, GGML_TYPE_Q8_0},     {TensorType::Q8_1, GGML_TYPE_Q8_1},       {TensorType::Q2_K, GGML_TYPE_Q2_K},
    {TensorType::Q3_K, GGML_TYPE_Q3_K},     {TensorType::Q4_K, GGML_TYPE_Q4_K},       {TensorType::Q5_K, GGML_TYPE_Q5_K},
    {TensorType::Q6_K, GGML_TYPE_Q6_K},     {TensorType::Q8_K, GGML_TYPE_Q8_K},       {TensorType::IQ4_NL, GGML_TYPE_IQ4_NL},
    {TensorType::IQ4_XS, GGML_TYPE_IQ4_XS}, {TensorType::TQ1_0, GGML_TYPE_TQ1_0},     {TensorType::TQ2_0, GGML_TYPE_TQ2_0},
    {TensorType::MXFP4, GGML_TYPE_MXFP4},   {TensorType::IQ2_XXS, GGML_TYPE_IQ2_XXS}, {TensorType::IQ2_XS, GGML_TYPE_IQ2_XS},
    {TensorType::IQ2_S, GGML_TYPE_IQ2_S},   {TensorType::IQ3_XXS, GGML_TYPE_IQ3_XXS}, {TensorType::IQ3_S, GGML_TYPE_IQ3_S},
    {TensorType::IQ1_S, GGML_TYPE_IQ1_S},   {TensorType::IQ1_M, GGML_TYPE_IQ1_M},     {TensorType::Q1_0, GGML_TYPE_Q1_0},
    {TensorType::Q2_0, GGML_TYPE_Q2_0},     {TensorType::NVFP4, GGML_TYPE_NVFP4},
};

constexpr std::size_t kRow = 1024;  // a multiple of every block

// SAFEWEIGHTS_JUDGE_TYPES=IQ1_S,Q3_K (ggml's names) limits every table to those types, to check one
// type's change in seconds; unset, every type runs (CI).
bool selected(ggml_type type) {
  const char* list = std::getenv("SAFEWEIGHTS_JUDGE_TYPES");
  if (list == nullptr || *list == 0) return true;
  std::string wanted = std::string(",") + list + ",", name = std::string(",") + ggml_type_name(type) + ",";
  for (std::string* s : {&wanted, &name})
    for (char& c : *s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return wanted.find(name) != std::string::npos;
}

// Rows of inputs: random distributions at many magnitudes, and edge rows (zeros, one value, NaN, Inf,
// float32 extremes, subnormals, exact rounding ties).
std::vector<std::vector<float>> input_rows(std::mt19937& rng) {
  std::vector<std::vector<float>> rows;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const float scales[] = {1.0f, 1e-3f, 1e-6f, 1e-8f, 1e-30f, 1e-40f, 3.0f, 100.0f, 6e4f, 7e4f, 1e10f, 1e30f, 3e38f};
  for (float scale : scales) {
    for (int rep = 0; rep < 4; ++rep) {
      std::vector<float> row(kRow);
      for (auto& v : row) v = (rep % 2 ? uniform(rng) : normal(rng)) * scale;
      if (rep == 3)
        for (auto& v : row) v = std::fabs(v) + scale;  // all positive: the min is not 0
      rows.push_back(row);
    }
  }
  {  // heavy tails
    std::vector<float> row(kRow);
    for (auto& v : row) v = normal(rng) * std::exp(2.0f * normal(rng));
    rows.push_back(row);
  }
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f,
                            -1.0f,
                            nan,
                            -nan,
                            inf,
                            -inf,
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::denorm_min(),
                            1e-45f,
                            65504.0f,
                            65520.0f,
                            0x1p-24f,
                            0x1p-25f,
                            5.0f,
                            0.5f};
  for (float s : specials) {
    rows.push_back(std::vector<float>(kRow, s));  // a constant row
    std::vector<float> row(kRow);
    for (auto& v : row) v = normal(rng);
    for (std::size_t i = 0; i < kRow; i += 37) row[i] = s;  // sprinkled into random values
    rows.push_back(row);
    std::vector<float> lone(kRow, 0.0f);
    for (std::size_t i = 3; i < kRow; i += 97) lone[i] = s;  // alone among zeros
    rows.push_back(lone);
  }
  for (int steps : {7, 8, 15, 16, 31, 127, 255}) {  // values on a grid: rounding ties everywhere
    std::vector<float> row(kRow);
    std::uniform_int_distribution<int> k(-2 * steps, 2 * steps);
    for (auto& v : row) v = static_cast<float>(k(rng)) * 0.5f / static_cast<float>(steps);
    rows.push_back(row);
  }
  // Random float32 bit patterns: every exponent, infinities, and NaN as the default quiet NaN of either
  // sign (a NaN's payload is not compared: where two NaNs meet in one operation, which payload the
  // result carries depends on the compiler's operand order, so ggml builds differ among themselves).
  for (int rep = 0; rep < 32; ++rep) {
    std::vector<float> row(kRow);
    for (auto& v : row) {
      const auto bits = static_cast<std::uint32_t>(rng());
      v = std::isnan(std::bit_cast<float>(bits)) ? std::bit_cast<float>((bits & 0x80000000u) | 0x7fc00000u) : std::bit_cast<float>(bits);
    }
    rows.push_back(row);
  }
  return rows;
}

// Rows are compared without importance where we quantize the type and ggml does without an imatrix.
// The calling thread's CPU time in seconds.
double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

bool compare_unweighted(const Pair& p) { return safeweights::can_quantize(p.ours) && !safeweights::requires_importance(p.ours); }

// ggml's grid quantizers (IQ1, IQ2, IQ3) abort on some inputs (NaN reaches a grid lookup: "point not on
// grid"). Those rows are run in a child process; a row ggml aborts on is not compared (counted apart).
bool ggml_aborts_on(ggml_type t) {
  return t == GGML_TYPE_IQ2_XXS || t == GGML_TYPE_IQ2_XS || t == GGML_TYPE_IQ2_S || t == GGML_TYPE_IQ3_XXS || t == GGML_TYPE_IQ3_S ||
         t == GGML_TYPE_IQ1_S || t == GGML_TYPE_IQ1_M;
}

// ggml_quantize_chunk() on one row; false when ggml aborted.
bool ggml_quantize_row(ggml_type t, const float* src, std::uint8_t* dst, std::size_t n, const float* imatrix) {
  if (!ggml_aborts_on(t)) {
    ggml_quantize_chunk(t, src, dst, 0, 1, static_cast<int64_t>(n), imatrix);
    return true;
  }
  ggml_quantize_init(t);  // once, in this process: children inherit the tables
  const std::size_t bytes = ggml_row_size(t, static_cast<int64_t>(n));
  void* shared = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return false;
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
    ggml_quantize_chunk(t, src, shared, 0, 1, static_cast<int64_t>(n), imatrix);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (ok) std::memcpy(dst, shared, bytes);
  munmap(shared, bytes);
  return ok;
}

// false when ggml aborted on the row (grid types only); `direct` runs it in this process (normal data).
bool ggml_quantize(ggml_type t, const float* src, void* dst, std::size_t n, bool direct = false) {
  if (t == GGML_TYPE_Q8_K)
    quantize_row_q8_K_ref(src, dst, static_cast<int64_t>(n));
  else if (t == GGML_TYPE_Q8_1)
    ggml_get_type_traits(t)->from_float_ref(src, dst, static_cast<int64_t>(n));
  else if (direct)
    ggml_quantize_chunk(t, src, dst, 0, 1, static_cast<int64_t>(n), nullptr);
  else
    return ggml_quantize_row(t, src, static_cast<std::uint8_t*>(dst), n, nullptr);
  return true;
}

void ggml_dequantize(ggml_type t, const void* src, float* dst, std::size_t n) {
  if (t == GGML_TYPE_Q8_K)
    dequantize_row_q8_K(src, dst, static_cast<int64_t>(n));
  else if (t == GGML_TYPE_Q8_1) {  // ggml has no Q8_1 dequantizer: the value is q x d, as for Q8_0
    const auto* b = static_cast<const std::uint8_t*>(src);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint8_t* block = b + (i / 32) * 36;
      ggml_fp16_t d;
      std::memcpy(&d, block, 2);
      dst[i] = static_cast<float>(static_cast<std::int8_t>(block[4 + i % 32])) * ggml_fp16_to_fp32(d);
    }
  } else
    ggml_get_type_traits(t)->to_float(src, dst, static_cast<int64_t>(n));
}

// ---- importance-weighted quantizing ------------------------------------------------------------------

// The types llama-quantize hands an importance matrix to, and some whose quantizers ignore it (F16,
// BF16, Q8_0, Q1_0, Q2_0, NVFP4: quantize_rows() must ignore it too).
const Pair kWeightedTypes[] = {
    {TensorType::F16, GGML_TYPE_F16},   {TensorType::BF16, GGML_TYPE_BF16}, {TensorType::Q8_0, GGML_TYPE_Q8_0},   {TensorType::Q4_0, GGML_TYPE_Q4_0},
    {TensorType::Q4_1, GGML_TYPE_Q4_1}, {TensorType::Q5_0, GGML_TYPE_Q5_0}, {TensorType::Q5_1, GGML_TYPE_Q5_1},   {TensorType::Q2_K, GGML_TYPE_Q2_K},
    {TensorType::Q3_K, GGML_TYPE_Q3_K}, {TensorType::Q4_K, GGML_TYPE_Q4_K}, {TensorType::Q5_K, GGML_TYPE_Q5_K},   {TensorType::Q6_K, GGML_TYPE_Q6_K},
    {TensorType::Q1_0, GGML_TYPE_Q1_0}, {TensorType::Q2_0, GGML_TYPE_Q2_0}, {TensorType::NVFP4, GGML_TYPE_NVFP4},
};

struct Importance {
  const char* name;
  std::vector<float> weights;  // empty: none (ggml gets a null imatrix)
};

// Importance vectors as llama-imatrix writes them (positive, mean squared activations: any magnitude)
// and the corners: zeros among them, all zero, one column alone, extreme magnitudes, and none.
std::vector<Importance> importance_vectors(std::mt19937& rng) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<Importance> out;
  auto make = [&](const char* name, auto&& value) {
    std::vector<float> w(kRow);
    for (std::size_t i = 0; i < kRow; ++i) w[i] = value(i);
    out.push_back({name, std::move(w)});
  };
  make("uniform", [&](std::size_t) { return 1.0f - unit(rng); });  // (0, 1]
  make("spread", [&](std::size_t) { return std::exp(4.0f * normal(rng)); });
  make("zeros", [&](std::size_t) { return unit(rng) < 0.3f ? 0.0f : 1.0f - unit(rng); });
  make("all-zero", [&](std::size_t) { return 0.0f; });
  make("one-hot", [&](std::size_t i) { return i % 97 == 5 ? 1.0f : 0.0f; });
  make("tiny", [&](std::size_t) { return (1.0f - unit(rng)) * 1e-38f; });  // subnormal products
  make("huge", [&](std::size_t) { return (1.0f - unit(rng)) * 1e30f; });   // overflowing products
  out.push_back({"none", {}});
  return out;
}

// Every row of the corpus at once, through both: ggml_quantize_chunk(type, src, dst, 0, nrows, n_per_row,
// imatrix) and quantize_rows(), over rows of `row` values (the corpus cut anew where row is not its
// 1,024). Returns the rows that differ (and prints the first).
std::size_t compare_weighted(const Pair& p, const std::vector<float>& corpus, std::size_t row, const Importance& imp) {
  const std::size_t nrows = corpus.size() / row;
  const std::span<const float> matrix(corpus.data(), nrows * row);
  const std::span<const float> weights = imp.weights.empty() ? std::span<const float>() : std::span<const float>(imp.weights).first(row);
  const std::size_t row_bytes = ggml_row_size(p.theirs, static_cast<int64_t>(row));
  std::vector<std::uint8_t> ours(row_bytes * nrows), theirs(row_bytes * nrows);
  ggml_quantize_chunk(p.theirs, matrix.data(), theirs.data(), 0, static_cast<int64_t>(nrows), static_cast<int64_t>(row),
                      weights.empty() ? nullptr : weights.data());
  const auto status = safeweights::quantize_rows(p.ours, matrix, std::as_writable_bytes(std::span(ours)), row, weights);
  if (!status.is_ok()) {
    std::printf("  %s quantize_rows (%s importance): %s\n", ggml_type_name(p.theirs), imp.name, status.to_string().c_str());
    return nrows;
  }
  std::size_t differ = 0;
  for (std::size_t r = 0; r < nrows; ++r) {
    const std::uint8_t* a = ours.data() + r * row_bytes;
    const std::uint8_t* b = theirs.data() + r * row_bytes;
    if (std::memcmp(a, b, row_bytes) == 0) continue;
    if (differ++ == 0) {
      std::size_t i = 0;
      while (a[i] == b[i]) ++i;
      std::printf("  %s quantize_rows (%s importance, rows of %zu): row %zu, first differing byte %zu (ours %02x, ggml %02x)\n",
                  ggml_type_name(p.theirs), imp.name, row, r, i, a[i], b[i]);
    }
  }
  return differ;
}

int weighted_table(const std::vector<std::vector<float>>& rows, std::mt19937& rng) {
  std::vector<float> matrix;
  for (const auto& row : rows) matrix.insert(matrix.end(), row.begin(), row.end());
  const auto importances = importance_vectors(rng);
  std::printf(
      "\n%-8s %12s %10s   (quantize_rows with importance: %zu rows of 1,024, for 32-element types also cut in rows of 416, x %zu importance "
      "vectors)\n",
      "type", "rows", "differ", rows.size(), importances.size());
  int failures = 0;
  for (const Pair& p : kWeightedTypes) {
    if (!selected(p.theirs)) continue;
    std::size_t compared = 0, differ = 0;
    // Rows of 1,024, and for the 32-element types rows of 13 blocks too (the weighted legacy paths search
    // blocks eight at a time: a row's last blocks go alone).
    const std::size_t block = static_cast<std::size_t>(ggml_blck_size(p.theirs));
    for (std::size_t row : {kRow, std::size_t{13 * 32}}) {
      if (row % block != 0) continue;
      for (const Importance& imp : importances) {
        differ += compare_weighted(p, matrix, row, imp);
        compared += matrix.size() / row;
      }
    }
    std::printf("%-8s %12zu %10zu\n", ggml_type_name(p.theirs), compared, differ);
    failures += static_cast<int>(differ);
  }
  return failures;
}

// The IQ types' importance-weighted quantizers (IQ4_NL ... IQ1_M): every input row with three random
// importance vectors (uniform, heavy-tailed, with zeros), against ggml_quantize_chunk() with the same
// imatrix. Prints one table row a type; returns the number of rows that differ.
int compare_weighted_iq(const std::vector<std::vector<float>>& rows, std::mt19937& rng) {
  std::vector<std::vector<float>> weights;
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int kind = 0; kind < 3; ++kind) {
    std::vector<float> w(kRow);
    for (std::size_t i = 0; i < kRow; ++i) {
      if (kind == 0) w[i] = uniform(rng) + 0.01f;
      if (kind == 1) w[i] = std::exp(3.0f * normal(rng));
      if (kind == 2) w[i] = i % 5 == 0 ? 0.0f : uniform(rng);
    }
    weights.push_back(w);
  }
  std::printf("\n%-8s %12s %10s   (importance-weighted quantize)\n", "type", "rows", "differ");
  int failures = 0;
  for (const Pair& p : kTypes) {
    if (!safeweights::takes_importance(p.ours) || safeweights::type_info(p.ours).block_elements == 1) continue;
    const bool iq = p.theirs == GGML_TYPE_IQ4_NL || p.theirs == GGML_TYPE_IQ4_XS || p.theirs == GGML_TYPE_IQ2_XXS || p.theirs == GGML_TYPE_IQ2_XS ||
                    p.theirs == GGML_TYPE_IQ2_S || p.theirs == GGML_TYPE_IQ3_XXS || p.theirs == GGML_TYPE_IQ3_S || p.theirs == GGML_TYPE_IQ1_S ||
                    p.theirs == GGML_TYPE_IQ1_M;
    if (!iq || !selected(p.theirs)) continue;
    const std::size_t bytes = ggml_row_size(p.theirs, kRow);
    std::vector<std::uint8_t> ours(bytes), theirs(bytes);
    std::size_t n = 0, diff = 0, aborted = 0;
    for (const auto& row : rows)
      for (const auto& w : weights) {
        ++n;
        std::memset(theirs.data(), 0, bytes);
        if (!ggml_quantize_row(p.theirs, row.data(), theirs.data(), kRow, w.data())) {
          ++aborted;
          continue;
        }
        const auto status = safeweights::quantize_rows(p.ours, row, std::as_writable_bytes(std::span(ours)), kRow, w);
        if (!status.is_ok() || ours != theirs) {
          if (diff++ == 0) {
            std::size_t i = 0;
            while (i < bytes && ours[i] == theirs[i]) ++i;
            std::printf("  %s weighted: input row %zu, first differing byte %zu (ours %02x, ggml %02x)%s%s\n", ggml_type_name(p.theirs), n - 1, i,
                        i < bytes ? ours[i] : 0, i < bytes ? theirs[i] : 0, status.is_ok() ? "" : ": ",
                        status.is_ok() ? "" : status.error().message().c_str());
          }
        }
      }
    std::printf("%-8s %12zu %10zu\n", ggml_type_name(p.theirs), n - aborted, diff);
    if (aborted != 0) std::printf("  %s: %zu more rows not compared: ggml aborts on them\n", ggml_type_name(p.theirs), aborted);
    failures += static_cast<int>(diff);
  }
  return failures;
}

}  // namespace

// Argument: --no-speed leaves out the speed table (the script runs the driver once per build of our
// lanes: the default, the 4-lane path and the plain one).
int main(int argc, char** argv) {
  const bool speed = !(argc > 1 && std::string(argv[1]) == "--no-speed");
  setenv("GGML_NO_BACKTRACE", "1", 1);  // an abort in a child (ggml_quantize_row) prints no gdb backtrace
  ggml_init_params params = {1024, nullptr, true};
  ggml_context* ctx = ggml_init(params);  // fills ggml's float16 table
  std::mt19937 rng(12345);
  const auto rows = input_rows(rng);
  std::printf("%-8s %12s %10s %14s %10s\n", "type", "quant rows", "differ", "dequant rows", "differ");
  int failures = 0;
  for (const Pair& p : kTypes) {
    if (!selected(p.theirs)) continue;
    const std::size_t bytes = ggml_row_size(p.theirs, kRow);
    std::vector<std::uint8_t> ours(bytes), theirs(bytes);
    std::vector<float> ours_f(kRow), theirs_f(kRow);
    std::size_t q_rows = 0, q_diff = 0, d_rows = 0, d_diff = 0, q_aborted = 0;
    auto dequant_both = [&](const std::vector<std::uint8_t>& block_bytes) {
      ggml_dequantize(p.theirs, block_bytes.data(), theirs_f.data(), kRow);
      const auto status = safeweights::dequantize(p.ours, std::as_bytes(std::span(block_bytes)), ours_f);
      ++d_rows;
      if (!status.is_ok() || std::memcmp(ours_f.data(), theirs_f.data(), kRow * sizeof(float)) != 0) {
        if (d_diff++ == 0) {
          for (std::size_t i = 0; i < kRow; ++i)
            if (std::bit_cast<std::uint32_t>(ours_f[i]) != std::bit_cast<std::uint32_t>(theirs_f[i])) {
              std::printf("  %s dequantize: element %zu ours %a ggml %a\n", ggml_type_name(p.theirs), i, ours_f[i], theirs_f[i]);
              break;
            }
        }
      }
    };
    if (compare_unweighted(p)) {
      for (const auto& row : rows) {
        std::memset(theirs.data(), 0, bytes);
        if (!ggml_quantize(p.theirs, row.data(), theirs.data(), kRow)) {
          ++q_aborted;
          continue;
        }
        const auto status = safeweights::quantize(p.ours, row, std::as_writable_bytes(std::span(ours)));
        ++q_rows;
        if (!status.is_ok() || ours != theirs) {
          if (q_diff++ == 0) {
            std::size_t i = 0;
            while (i < bytes && ours[i] == theirs[i]) ++i;
            std::printf("  %s quantize: input row %zu, first differing byte %zu (ours %02x, ggml %02x)\n", ggml_type_name(p.theirs), q_rows - 1, i,
                        i < bytes ? ours[i] : 0, i < bytes ? theirs[i] : 0);
          }
        }
        dequant_both(theirs);  // ggml's own blocks read back
      }
    }
    for (int rep = 0; rep < 64; ++rep) {  // arbitrary bytes
      std::vector<std::uint8_t> noise(bytes);
      for (auto& b : noise) b = static_cast<std::uint8_t>(rng());
      dequant_both(noise);
    }
    std::printf("%-8s %12zu %10zu %14zu %10zu\n", ggml_type_name(p.theirs), q_rows, q_diff, d_rows, d_diff);
    if (q_aborted != 0) std::printf("  %s: %zu more rows not compared: ggml aborts on them\n", ggml_type_name(p.theirs), q_aborted);
    failures += static_cast<int>(q_diff + d_diff);
  }
  failures += weighted_table(rows, rng);
  failures += compare_weighted_iq(rows, rng);
  if (!speed) {
    ggml_free(ctx);
    std::printf(failures ? "DIFFERENCES FOUND\n" : "all identical\n");
    return failures ? 1 : 0;
  }
  // For information only (never a pass/fail criterion): single-thread quantizing speed of both on
  // normal data, MB/s of float32 input, without and with importance weights. Timed in the thread's CPU
  // time, so that other work on a shared machine does not count.
  std::printf("\n%-8s %14s %14s %14s %14s   (quantize, MB/s of float32, one thread)\n", "type", "ggml", "safeweights", "ggml weighted",
              "ours weighted");
  std::vector<float> normal_row(kRow * 16);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : normal_row) v = normal(rng);
  std::vector<float> importance(kRow);
  for (auto& v : importance) v = std::exp(normal(rng));
  for (const Pair& p : kTypes) {
    const bool weighted_only = safeweights::requires_importance(p.ours);  // IQ2_XXS, IQ2_XS, IQ1
    if ((!compare_unweighted(p) && !weighted_only) || !selected(p.theirs)) continue;
    std::vector<std::uint8_t> out(ggml_row_size(p.theirs, normal_row.size()));
    auto rate = [&](auto&& fn) {
      double best = 1e30;
      for (int rep = 0; rep < 5; ++rep) {
        const double t0 = thread_seconds();
        fn();
        best = std::min(best, thread_seconds() - t0);
      }
      return static_cast<double>(normal_row.size() * sizeof(float)) / best / 1e6;
    };
    if (weighted_only) {
      std::printf("%-8s %14s %14s", ggml_type_name(p.theirs), "", "");
    } else {
      const double theirs = rate([&] { ggml_quantize(p.theirs, normal_row.data(), out.data(), normal_row.size(), true); });
      const double ours = rate([&] { (void)safeweights::quantize(p.ours, normal_row, std::as_writable_bytes(std::span(out))); });
      std::printf("%-8s %14.1f %14.1f", ggml_type_name(p.theirs), theirs, ours);
    }
    if (safeweights::takes_importance(p.ours)) {
      const auto nrows = static_cast<int64_t>(normal_row.size() / kRow);
      const double theirs_w = rate([&] { ggml_quantize_chunk(p.theirs, normal_row.data(), out.data(), 0, nrows, kRow, importance.data()); });
      const double ours_w =
          rate([&] { (void)safeweights::quantize_rows(p.ours, normal_row, std::as_writable_bytes(std::span(out)), kRow, importance); });
      std::printf(" %14.1f %14.1f", theirs_w, ours_w);
    }
    std::printf("\n");
  }
  ggml_free(ctx);
  std::printf(failures ? "DIFFERENCES FOUND\n" : "all identical\n");
  return failures ? 1 : 0;
}
