// Importance matrices: llama-imatrix's output, read as hostile input, in both of its formats: GGUF
// (tensors NAME.in_sum2 and NAME.counts, F32, and the keys imatrix.datasets, imatrix.chunk_count and
// imatrix.chunk_size) and the legacy .dat (int32 entry count; per entry an int32 name length, the
// name, int32 ncall, int32 value count, the float values; then optionally int32 chunk count, int32
// length and the dataset name). Each entry becomes what llama-quantize hands its quantizers: the sums
// divided by their counts (per expert in the GGUF form; by ncall in the legacy one), 1 where a GGUF
// count is 0. docs/GGUF.md, "Importance matrices".
//
// Thread safety: pure functions; the result is a plain value.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/source.h"

namespace safeweights::gguf {

struct ImportanceMatrix {
  std::map<std::string, std::vector<float>> entries;  // tensor name -> weights (experts x columns)
  std::vector<std::string> datasets;
  std::uint32_t chunk_count = 0;
  bool legacy = false;
};

// The largest legacy file read (it is read whole): 1 GiB, far above a 400B-parameter model's matrix.
inline constexpr std::uint64_t kMaxLegacyImatrixBytes = std::uint64_t{1} << 30;

// Either format, told apart by GGUF's magic. InvalidArgument naming the file, the rule and the place
// (the entry, the byte offset) for a malformed matrix; the GGUF reader's own errors for a broken GGUF.
Result<ImportanceMatrix> read_imatrix(const SourcePtr& source);
// The legacy format from its bytes (`name` for the errors).
Result<ImportanceMatrix> parse_legacy_imatrix(std::span<const std::byte> bytes, const std::string& name);

// llama-quantize's --include-weights / --exclude-weights (entries whose name contains one of the
// strings kept, or left out; at most one of the two lists), then its refusal of non-finite values.
Status filter_imatrix(ImportanceMatrix& m, std::span<const std::string> include, std::span<const std::string> exclude, const std::string& name);

}  // namespace safeweights::gguf
