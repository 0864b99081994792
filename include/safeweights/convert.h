// safeweights/convert.h — conversion between tensor-file formats, with optional type change.
//
// convert() reads every tensor (or the listed ones, renamed) of an opened TensorFile and writes them to
// a new file whose format follows the output's extension (.safetensors, .gguf), one tensor in memory at a
// time, atomically. A target type (F32, F16, BF16, or a ggml block type) follows llama.cpp's policy:
// 1-D tensors stay F32, a tensor whose rows are not a whole number of blocks falls back to the nearest
// type that fits, and every such decision is reported per tensor. Quantized inputs are dequantized with
// ggml's reference dequantizers (safeweights/quantize.h).
//
// Thread safety: convert() may run concurrently on different outputs; it uses the shared thread pool.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/format.h"
#include "safeweights/gguf.h"
#include "safeweights/tensor_file.h"
#include "safeweights/tensor_type.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

// A tensor to write: which input tensor, under which name, and whether its rows are reordered the way
// llama.cpp's converter permutes attention Q/K weights for rotary embeddings (0: as stored; n: with n
// heads).
struct ConvertTensor {
  std::string source;
  std::string name;
  std::uint32_t permute_heads = 0;
};

struct ConvertOptions {
  std::optional<TensorType> type;       // none: every tensor keeps its type
  unsigned threads = 0;                 // 0: every core
  std::vector<ConvertTensor> tensors;   // empty: every input tensor, same name, file order
  std::vector<gguf::KeyValue> gguf_kv;  // metadata of a GGUF output (beyond what convert() adds)
  bool carry_metadata = true;           // the input's metadata into the output (docs/GGUF.md, "Conversion")
  bool durable = false;                 // fsync before the rename
  gguf::SplitOptions split;             // a .gguf output written as llama.cpp's split files OUT-00001-of-0000N.gguf
  std::function<void(std::size_t tensors_done, std::uint64_t bytes_done)> progress;
};

// What happened to one tensor.
struct ConvertedTensor {
  std::string name;
  TensorType from;
  TensorType to;
  std::string note;  // why `to` differs from the requested type ("1-D", "rows of 100 are not a multiple of 256"), or empty
};

struct ConvertReport {
  std::vector<ConvertedTensor> tensors;
  std::uint64_t bytes_written = 0;
  std::vector<std::string> files;  // a split output's files, in order (empty for a single file)
};

Result<ConvertReport> convert(const TensorFile& input, const std::string& output_path, const ConvertOptions& options = {});

// llama.cpp's general.file_type (its llama_ftype) for a target type, the K-quants as their _S mixes;
// nullopt for a type llama.cpp has no file type for.
std::optional<std::uint32_t> llama_file_type(TensorType type) noexcept;

// How two tensors of the same element count differ, value by value, after each is decoded to float64
// (block and half types through dequantize(), so as ggml's dequantizers compute them; integers, BOOL
// and F64 exactly). Positions where either value is NaN or infinite count as equal when both are the
// same (both NaN, or the same infinity) and as a non-finite mismatch otherwise; they are left out of
// the sums. cosine is 1 when both tensors are all zeros, 0 when one of them is.
struct TensorDiff {
  std::uint64_t elements = 0;
  double max_abs = 0;  // max |a - b|
  double rmse = 0;     // sqrt(mean((a - b)^2)) over the finite positions
  double cosine = 1;   // a.b / (|a| |b|)
  std::uint64_t nonfinite_mismatches = 0;
  bool identical() const noexcept { return max_abs == 0 && nonfinite_mismatches == 0; }
};

// Streams both tensors in pieces (bounded memory whatever their size). InvalidArgument when the element
// counts differ; NotSupported for a type that cannot be decoded.
Result<TensorDiff> compare_tensors(const TensorEntry& a, const TensorEntry& b);

SAFEWEIGHTS_API_END
}  // namespace safeweights
