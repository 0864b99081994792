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
#include "safeweights/gguf.h"
#include "safeweights/tensor_file.h"
#include "safeweights/tensor_type.h"

namespace safeweights {

// A tensor to write: which input tensor, under which name, and whether its rows are reordered the way
// llama.cpp's converter permutes attention Q/K weights for rotary embeddings (0: as stored; n: with n
// heads).
struct ConvertTensor {
  std::string source;
  std::string name;
  std::uint32_t permute_heads = 0;
};

struct ConvertOptions {
  std::optional<TensorType> type;            // none: every tensor keeps its type
  unsigned threads = 0;                      // 0: every core
  std::vector<ConvertTensor> tensors;        // empty: every input tensor, same name, file order
  std::vector<gguf::KeyValue> gguf_kv;       // metadata of a GGUF output (beyond what convert() adds)
  bool durable = false;                      // fsync before the rename
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
};

Result<ConvertReport> convert(const TensorFile& input, const std::string& output_path, const ConvertOptions& options = {});

}  // namespace safeweights
