// safeweights/slice.h — numpy basic indexing turned into byte runs, for any format.
//
// A SliceSpec is what goes between the brackets of `a[...]` in numpy: integers (negative ones count
// from the end), start:stop:step ranges (any part may be omitted; negative steps walk backwards;
// out-of-range bounds are clamped as Python does), one `...`, and `None` / `newaxis`. plan_slice()
// applies a spec to a tensor's shape and element size and returns a SlicePlan: the result's shape and
// the list of byte runs, in the result's C order, that hold its elements. read_slice() (source.h: the
// reading is io's) fetches exactly those runs from any ByteSource (memcpy from a mapping; grouped
// positional reads otherwise), so only the bytes the slice needs are read. All arithmetic is checked; sub-byte dtypes (F4, F6) may be
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

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/tensor_type.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

struct SliceItem {
  enum class Kind : std::uint8_t { Index, Range, Ellipsis, NewAxis };
  Kind kind = Kind::Range;
  std::int64_t index = 0;             // Kind::Index
  std::optional<std::int64_t> start;  // Kind::Range; values beyond int64 are saturated when parsed
  std::optional<std::int64_t> stop;
  std::optional<std::int64_t> step;  // nullopt means 1; 0 is rejected by plan_slice

  static SliceItem at(std::int64_t i) { return {Kind::Index, i, {}, {}, {}}; }
  static SliceItem range(std::optional<std::int64_t> start = {}, std::optional<std::int64_t> stop = {}, std::optional<std::int64_t> step = {}) {
    return {Kind::Range, 0, start, stop, step};
  }
  static SliceItem ellipsis() { return {Kind::Ellipsis, 0, {}, {}, {}}; }
  static SliceItem new_axis() { return {Kind::NewAxis, 0, {}, {}, {}}; }
};

struct SliceSpec {
  std::vector<SliceItem> items;  // empty: the whole tensor

  // Parses numpy syntax: "1:3, ::-2, 0", "..., -1", "None, :", "" (everything). InvalidSliceSpec on
  // a syntax error, brackets included ("[0]": only what goes between them); SliceOutOfRange for an
  // index beyond 64 bits (out of bounds for any axis).
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

  // The runs' offsets one at a time, in result order, with nothing allocated after construction (for
  // loops that must not allocate, such as a guarded copy from a mapping).
  class RunCursor {
   public:
    explicit RunCursor(const SlicePlan& plan) : plan_(&plan), counter_(plan.loops_.size(), 0), offset_(plan.first_offset_), left_(plan.runs_) {}
    // The next run's offset; false once every run was given.
    bool next(std::uint64_t& offset) noexcept {
      if (left_ == 0) return false;
      offset = offset_;
      if (--left_ > 0) advance();
      return true;
    }

   private:
    void advance() noexcept {
      for (std::size_t d = counter_.size(); d-- > 0;) {
        const Loop& loop = plan_->loops_[d];
        if (++counter_[d] < loop.count) {
          offset_ += static_cast<std::uint64_t>(loop.step_bytes);  // wraps back for negative steps
          return;
        }
        // Rewind this dimension to its first index and carry into the next outer one.
        offset_ -= static_cast<std::uint64_t>(loop.step_bytes) * (loop.count - 1);
        counter_[d] = 0;
      }
    }
    const SlicePlan* plan_;
    std::vector<std::uint64_t> counter_;
    std::uint64_t offset_;
    std::uint64_t left_;
  };

 private:
  friend Result<SlicePlan> plan_slice(std::span<const std::uint64_t>, TensorType, const SliceSpec&, std::uint64_t);
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
Result<SlicePlan> plan_slice(std::span<const std::uint64_t> shape, TensorType dtype, const SliceSpec& spec, std::uint64_t base_offset = 0);

template <typename Visit>
bool SlicePlan::for_each_run(Visit&& visit) const {
  RunCursor runs(*this);
  for (std::uint64_t offset; runs.next(offset);) {
    if (!visit(offset, run_bytes_)) return false;
  }
  return true;
}

SAFEWEIGHTS_API_END
}  // namespace safeweights
