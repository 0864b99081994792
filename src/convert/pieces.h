// Reading a tensor in pieces of elements, shared by the converter and the comparer. Internal.
//
// Thread safety: pure functions; the buffer belongs to the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/status_macros.h"
#include "safeweights/tensor_file.h"

namespace safeweights::convert_detail {

// Bytes of `elements` consecutive elements of `type` (for a block type, a whole number of blocks).
inline Result<std::uint64_t> bytes_of(TensorType type, std::uint64_t elements) {
  const std::uint64_t shape[] = {elements};
  return tensor_nbytes(type, shape);
}

// Elements [e0, e1) of a tensor's bytes: a view of a mapping, or read into `buffer`.
inline Result<std::span<const std::byte>> read_elements(const TensorEntry& e, std::uint64_t e0, std::uint64_t e1, std::vector<std::byte>& buffer) {
  SW_ASSIGN_OR_RETURN(const std::uint64_t begin, bytes_of(e.type, e0));
  SW_ASSIGN_OR_RETURN(const std::uint64_t length, bytes_of(e.type, e1 - e0));
  if (auto v = e.source->view(e.offset + begin, length); v.data() != nullptr || length == 0) return v;
  buffer.resize(static_cast<std::size_t>(length));
  SW_RETURN_IF_ERROR(e.source->read_at(e.offset + begin, buffer));
  return std::span<const std::byte>(buffer);
}

}  // namespace safeweights::convert_detail
