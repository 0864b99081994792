// A tensor's row-major contents as a ByteSource of their own: the elements of a strided view of a
// storage (any sizes and non-negative strides, in elements), gathered in row-major order and, for
// big-endian storages, byte-swapped. Every reader of a TensorEntry (cat, copy_tensors, slices) reads a
// non-contiguous tensor through this with no change. Internal to src/pytorch/.
//
// Thread safety: immutable; read_at may be called concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "safeweights/source.h"

namespace safeweights::pytorch {

struct StridedLayout {
  std::uint64_t base = 0;       // byte offset of element 0 in the storage source
  std::uint32_t elsize = 1;     // bytes per element
  std::uint32_t swap_unit = 0;  // 0: no swap; else reverse the bytes of each unit (elsize, or half for complex)
  std::vector<std::uint64_t> shape;
  std::vector<std::uint64_t> stride;  // elements; same length as shape
};

// Precondition: every element addressed lies inside `storage` (the caller checked the bounds).
SourcePtr strided_source(SourcePtr storage, StridedLayout layout, std::uint64_t nbytes, std::string name);

}  // namespace safeweights::pytorch
