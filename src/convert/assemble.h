// Tensors a plan assembles from pieces of input tensors (ConvertTensor::pieces: joined along a
// dimension, stacked along a new one, each piece the whole of an input tensor or a strided slice of
// it along one dimension): their type and shape, checked, and any range of their elements, in output
// order, as the runs of input bytes that hold it, read without ever holding a whole piece. Internal
// to the converter.
//
// Thread safety: an Assembly is immutable once made; runs() and gather() may be called from several
// threads at once, each with buffers of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/tensor_file.h"

namespace safeweights::convert_detail {

// Elements of a type counted in whole bytes: `elements` elements take `bytes` bytes (a block of a
// block type; 2 elements of a 4-bit type; 1 element of a byte-sized one). Every run of an assembly is
// a whole number of these units.
struct ByteUnit {
  std::uint64_t elements = 1, bytes = 1;
  static ByteUnit of(TensorType type);
  // Precondition: n is a multiple of `elements`.
  std::uint64_t bytes_of(std::uint64_t n) const noexcept { return n / elements * bytes; }
};

// `count` runs of `length` bytes of `source`, the first at `offset`, each `stride` bytes after the one
// before, which land one after another in the output.
struct ByteRuns {
  const ByteSource* source = nullptr;
  std::uint64_t offset = 0, length = 0, stride = 0, count = 1;
  std::uint64_t bytes() const noexcept { return length * count; }
  std::uint64_t span() const noexcept { return (count - 1) * stride + length; }  // first byte to last
};

// One piece as a view of its input tensor's elements, seen as [outer, size, inner]: of the `size`
// indices of the middle dimension, `count` are taken, from `begin` by `step`. A whole tensor is
// outer 1, size 1, count 1, inner = its elements.
struct PieceView {
  const TensorEntry* entry = nullptr;
  std::uint64_t outer = 1, size = 1, begin = 0, step = 1, count = 1, inner = 1;
  std::uint64_t elements() const noexcept { return outer * count * inner; }
};

class Assembly {
 public:
  // The checked assembly of `tensor`'s pieces (TensorNotFound, InvalidArgument, InvalidSliceSpec,
  // SliceOutOfRange, InvalidBlockShape, ValidationOverflow: each message names the piece).
  static Result<std::unique_ptr<Assembly>> make(const TensorFile& input, const ConvertTensor& tensor);
  // One input tensor as it is (the converter's row permutation reads through this).
  static std::unique_ptr<Assembly> whole(const TensorEntry& entry);

  // The output as an entry with no source of its own: its name, type, shape and byte count.
  const TensorEntry& entry() const noexcept { return entry_; }
  std::span<const PieceView> pieces() const noexcept { return pieces_; }
  ByteUnit unit() const noexcept { return unit_; }
  // The output's groups (the product of the dimensions before a join; 1 for a stack or one piece): in
  // each, every piece gives its share of the group's elements.
  std::uint64_t groups() const noexcept { return group_ == 0 ? 0 : entry_.num_elements() / group_; }
  // "joined from 8", "stacked from 64", or empty for one piece.
  const std::string& note() const noexcept { return note_; }
  // Whether each piece is one run of its input, its place in the output a run too (joined along
  // the outermost non-unit dimension, or stacked, with no strided slice): then a kept type copies
  // piece by piece (TensorSink::copy_chunk: in the kernel between local files).
  bool whole_pieces() const noexcept;

  // Appends the runs that hold elements [e0, e1) of the output, in output order (adjacent runs of one
  // source merged). Precondition: e0 <= e1 <= the output's elements, both multiples of unit().elements.
  void runs(std::uint64_t e0, std::uint64_t e1, std::vector<ByteRuns>& out) const;

 private:
  void piece_runs(const PieceView& piece, std::uint64_t first, std::uint64_t n, std::vector<ByteRuns>& out) const;
  Status set_shape(std::vector<std::uint64_t> shape, std::string name);

  std::string name_;
  std::vector<std::uint64_t> shape_;
  TensorEntry entry_;
  ByteUnit unit_;
  std::vector<PieceView> pieces_;
  // The output in `outer` groups (the product of the dimensions before the join): in each, piece i
  // gives block_[i] elements, starting at start_[i] in the group.
  std::uint64_t group_ = 0;
  std::vector<std::uint64_t> block_, start_;
  std::string note_;
};

// Reads the runs into dst, which is exactly their bytes: copied from a mapping's view (whose pages
// are then released from the process), scattered reads for runs of 4 KiB or more, runs closer than
// that read through windows of at most 1 MiB in `window`.
Status gather(std::span<const ByteRuns> runs, std::span<std::byte> dst, std::vector<std::byte>& window);

}  // namespace safeweights::convert_detail
