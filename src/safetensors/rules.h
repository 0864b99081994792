// Rules shared by the safetensors reader and writer. Internal.
#pragma once

#include <cstdint>
#include <span>

#include "safeweights/atomic_file.h"
#include "safeweights/dtype.h"
#include "safeweights/safetensors_writer.h"
#include "safeweights/error.h"

namespace safeweights::safetensors {

// Byte size of a tensor, computed as the reference does: the element count is the product of the
// shape from the left with checked multiplication (so [2^40, 2^40, 0] overflows although it is empty),
// then times the dtype's bits, checked; the bit total must be a whole number of bytes.
// ValidationOverflow or MisalignedSlice otherwise.
Result<std::uint64_t> tensor_nbytes(Dtype dtype, std::span<const std::uint64_t> shape);

// Writes a complete file into a temporary file beside `path` without renaming it into place, so a
// caller writing several files (shards) can commit them all only once every one has been written.
Result<AtomicFile> write_uncommitted(const std::string& path, std::span<const TensorData> tensors,
                                     const Metadata& metadata, const WriteOptions& options);

}  // namespace safeweights::safetensors
