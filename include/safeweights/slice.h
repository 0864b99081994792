// safeweights/slice.h — numpy basic indexing turned into byte runs, for any format.
//
// A SliceSpec is what goes between the brackets of `a[...]` in numpy: integers (negative ones count
// from the end), start:stop:step ranges (any part may be omitted; negative steps walk backwards;
// out-of-range bounds are clamped as Python does), one `...`, and `None` / `newaxis`. plan_slice()
// applies a spec to a tensor's shape and element size and returns a SlicePlan: the result's shape and
// the list of byte runs, in the result's C order, that hold its elements. read_slice() fetches exactly
// those runs from any ByteSource (memcpy from a mapping; grouped positional reads otherwise), so only
// the bytes the slice needs are read. All arithmetic is checked; sub-byte dtypes (F4, F6) may be
// sliced only where every run starts and ends on a byte boundary.
//
// Thread safety: SliceSpec and SlicePlan are immutable values; safe to share.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/tensor_type.h"
#include "safeweights/error.h"
#include "safeweights/source.h"

namespace safeweights {

struct SliceItem {
  enum class Kind : std::uint8_t { Index, Range, Ellipsis, NewAxis };
  Kind kind = Kind::Range;
  std::int64_t index = 0;               // Kind::Index
  std::optional<std::int64_t> start;    // Kind::Range; values beyond int64 are saturated when parsed
  std::optional<std::int64_t> stop;
  std::optional<std::int64_t> step;     // nullopt means 1; 0 is rejected by plan_slice

  static SliceItem at(std::int64_t i) { return {Kind::Index, i, {}, {}, {}}; }
  static SliceItem range(std::optional<std::int64_t> start = {}, std::optional<std::int64_t> stop = {},
                         std::optional<std::int64_t> step = {}) {
    return {Kind::Range, 0, start, stop, step};
  }
  static SliceItem ellipsis() { return {Kind::Ellipsis, 0, {}, {}, {}}; }
  static SliceItem new_axis() { return {Kind::NewAxis, 0, {}, {}, {}}; }
};

struct SliceSpec {
  std::vector<SliceItem> items;  // empty: the whole tensor

  // Parses numpy syntax: "1:3, ::-2, 0", "..., -1", "None, :", "" (everything). InvalidSliceSpec on
  // a syntax error.
  static Result<SliceSpec> parse(std::string_view text);
  // Renders the spec back in the same syntax ("1:3, ::-2, 0").
  std::string to_string() const;
};

class SlicePlan {
 public:
  const std::vector<std::uint64_t>& shape() const noexcept { return shape_; }
  std::uint64_t num_elements() const noexcept { return elements_; }
  std::uint64_t nbytes() const noexcept { return nbytes_; }
  // Number of runs and the size of each (all runs have the same length).
  std::uint64_t run_count() const noexcept { return runs_; }
  std::uint64_t run_bytes() const noexcept { return run_bytes_; }

  // Calls visit(offset, length) for every run in result order; offsets are absolute in the source
  // (base_offset added). Stops early and returns false when visit returns false.
  template <typename Visit>
  bool for_each_run(Visit&& visit) const;

 private:
  friend Result<SlicePlan> plan_slice(std::span<const std::uint64_t>, TensorType, const SliceSpec&,
                                      std::uint64_t);
  struct Loop {
    std::uint64_t count;
    std::int64_t step_bytes;  // signed: negative steps walk backwards
  };
  std::vector<std::uint64_t> shape_;
  std::vector<Loop> loops_;  // outermost first; only dims with count > 1 remain
  std::uint64_t first_offset_ = 0;
  std::uint64_t elements_ = 0;
  std::uint64_t nbytes_ = 0;
  std::uint64_t runs_ = 0;
  std::uint64_t run_bytes_ = 0;
};

// Applies `spec` to a tensor of `shape` and `dtype` whose first byte is at `base_offset` in its source.
Result<SlicePlan> plan_slice(std::span<const std::uint64_t> shape, TensorType dtype, const SliceSpec& spec,
                             std::uint64_t base_offset = 0);

// Reads the plan's bytes from `source` into dst (dst.size() == plan.nbytes()), in result order.
Status read_slice(const ByteSource& source, const SlicePlan& plan, std::span<std::byte> dst);

template <typename Visit>
bool SlicePlan::for_each_run(Visit&& visit) const {
  if (runs_ == 0) return true;
  const std::size_t depth = loops_.size();
  if (depth == 0) return visit(first_offset_, run_bytes_);
  std::vector<std::uint64_t> counter(depth, 0);
  std::uint64_t offset = first_offset_;
  for (;;) {
    if (!visit(offset, run_bytes_)) return false;
    std::size_t d = depth;
    for (;;) {
      --d;
      const Loop& loop = loops_[d];
      if (++counter[d] < loop.count) {
        offset += static_cast<std::uint64_t>(loop.step_bytes);  // wraps back for negative steps
        break;
      }
      // Rewind this dimension to its first index and carry into the next outer one.
      offset -= static_cast<std::uint64_t>(loop.step_bytes) * (loop.count - 1);
      counter[d] = 0;
      if (d == 0) return true;
    }
  }
}

}  // namespace safeweights
