// Reading a slice plan from a ByteSource: the I/O half of slice.h, kept out of core/ (which plans
// slices and reads nothing).
#include <algorithm>
#include <cstring>

#include "core/fault_guard.h"
#include "core/status_macros.h"
#include "safeweights/cancel.h"
#include "safeweights/slice.h"
#include "safeweights/source.h"

namespace safeweights {

namespace {

// Runs closer than this are fetched with one read of the bytes between them (fewer system calls or
// requests beat skipping a few bytes); windows are bounded so scratch memory stays small.
constexpr std::uint64_t kMergeGap = 4096;
constexpr std::uint64_t kWindowLimit = 8u << 20;
constexpr std::size_t kMaxPendingRuns = 1u << 16;

}  // namespace

namespace {

// Reads runs from an unmapped source into their destinations: nearby runs are grouped into windows,
// each read once and its runs scattered; windows are read in batches with one read_scatter (a remote
// source keeps several in flight), and a batch's scratch memory stays within kWindowLimit.
class Gather {
 public:
  explicit Gather(const ByteSource& source) : source_(source) {}

  Status add(std::uint64_t off, std::uint64_t len, std::byte* dest) {
    if (!current_.empty()) {
      const std::uint64_t new_lo = std::min(win_lo_, off), new_hi = std::max(win_hi_, off + len);
      const bool near = off + len + kMergeGap >= win_lo_ && off <= win_hi_ + kMergeGap;
      if (near && new_hi - new_lo <= kWindowLimit && current_.size() < kMaxPendingRuns) {
        win_lo_ = new_lo;
        win_hi_ = new_hi;
        current_.push_back({off, len, dest});
        return Status::ok();
      }
      SW_RETURN_IF_ERROR(close_window());
    }
    win_lo_ = off;
    win_hi_ = off + len;
    current_.push_back({off, len, dest});
    return Status::ok();
  }

  // Every run added so far is in its destination.
  Status finish() {
    SW_RETURN_IF_ERROR(close_window());
    return windows_.empty() ? Status::ok() : read_batch();
  }

 private:
  struct Pending {
    std::uint64_t offset, length;
    std::byte* dest;
  };
  struct Window {
    std::uint64_t lo, hi;
    std::size_t first, count;  // its runs: batch_runs_[first, first + count)
  };

  Status close_window() {
    if (current_.empty()) return Status::ok();
    const std::uint64_t need = current_.size() > 1 ? win_hi_ - win_lo_ : 0;
    if (batch_scratch_ + need > kWindowLimit || batch_runs_.size() + current_.size() > kMaxPendingRuns) {
      SW_RETURN_IF_ERROR(read_batch());
    }
    windows_.push_back({win_lo_, win_hi_, batch_runs_.size(), current_.size()});
    batch_runs_.insert(batch_runs_.end(), current_.begin(), current_.end());
    batch_scratch_ += need;
    current_.clear();
    return Status::ok();
  }

  Status read_batch() {
    scratch_.resize(static_cast<std::size_t>(batch_scratch_));
    requests_.clear();
    std::size_t pos = 0;
    for (const Window& w : windows_) {
      if (w.count == 1) {
        const Pending& r = batch_runs_[w.first];
        requests_.push_back({w.lo, {r.dest, static_cast<std::size_t>(r.length)}});
        continue;
      }
      requests_.push_back({w.lo, std::span<std::byte>(scratch_).subspan(pos, static_cast<std::size_t>(w.hi - w.lo))});
      pos += static_cast<std::size_t>(w.hi - w.lo);
    }
    SW_RETURN_IF_ERROR(source_.read_scatter(requests_));
    for (std::size_t k = 0; k < windows_.size(); ++k) {
      const Window& w = windows_[k];
      if (w.count == 1) continue;
      const std::byte* bytes = requests_[k].dst.data();
      for (std::size_t i = w.first; i < w.first + w.count; ++i) {
        const Pending& r = batch_runs_[i];
        std::memcpy(r.dest, bytes + (r.offset - w.lo), static_cast<std::size_t>(r.length));
      }
    }
    windows_.clear();
    batch_runs_.clear();
    batch_scratch_ = 0;
    return Status::ok();
  }

  const ByteSource& source_;
  std::vector<ReadRequest> requests_;
  std::uint64_t batch_scratch_ = 0;  // bytes of the batch's windows of more than one run
  std::vector<Window> windows_;
  std::vector<Pending> batch_runs_;
  std::vector<std::byte> scratch_;
  std::vector<Pending> current_;  // the window being grown
  std::uint64_t win_lo_ = 0, win_hi_ = 0;
};

// The runs of a plan copied straight from a mapping, a buffer at a time. Each fill is one guarded
// section (a file truncated under the mapping is an error, not SIGBUS), and nothing in it allocates.
class MappedRuns {
 public:
  MappedRuns(const ByteSource& source, const SlicePlan& plan) : source_(source), base_(source.mapped()), runs_(plan), run_bytes_(plan.run_bytes()) {}

  // Fills dst with the next dst.size() bytes of the slice (the caller asks for no more than is left).
  Status fill(std::span<std::byte> dst) {
    const bool copied = guarded([&] {
      // Locals, not members, in the loop: stores through std::byte* may alias members, which would
      // be reloaded after every memcpy.
      const std::byte* const base = base_;
      const std::uint64_t run = run_bytes_;
      std::uint64_t at = at_, left = left_in_run_;
      std::byte* out = dst.data();
      std::byte* const end = out + dst.size();
      while (out != end) {
        if (left == 0) {
          if (!runs_.next(at)) break;
          left = run;
        }
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, static_cast<std::uint64_t>(end - out)));
        std::memcpy(out, base + at, n);
        out += n;
        at += n;
        left -= n;
      }
      at_ = at;  // after a fault these keep where the fill began, which the error names
      left_in_run_ = left;
    });
    return copied ? Status::ok() : Status(mapping_shrank(source_.name(), at_));
  }

 private:
  const ByteSource& source_;
  const std::byte* base_;
  SlicePlan::RunCursor runs_;
  const std::uint64_t run_bytes_;
  std::uint64_t at_ = 0;           // where the current run continues
  std::uint64_t left_in_run_ = 0;  // its bytes not yet copied
};

// Checks the plan's whole footprint against the source once: every run lies between the lowest and
// the highest run.
Status check_footprint(const ByteSource& source, const SlicePlan& plan) {
  std::uint64_t lo = UINT64_MAX, hi = 0;
  plan.for_each_run([&](std::uint64_t off, std::uint64_t len) {
    lo = std::min(lo, off);
    hi = std::max(hi, off + len);
    return true;
  });
  return source.check_range(lo, hi - lo);
}

}  // namespace

Status read_slice(const ByteSource& source, const SlicePlan& plan, std::span<std::byte> dst) {
  if (dst.size() != plan.nbytes()) {
    return Error(ErrorKind::InvalidArgument,
                 "read_slice: destination has " + std::to_string(dst.size()) + " bytes, the slice needs " + std::to_string(plan.nbytes()));
  }
  if (plan.nbytes() == 0) return Status::ok();
  SW_RETURN_IF_ERROR(check_footprint(source, plan));
  if (source.mapped() != nullptr) return MappedRuns(source, plan).fill(dst);
  Gather gather(source);
  std::byte* out = dst.data();
  Status status;
  plan.for_each_run([&](std::uint64_t off, std::uint64_t len) {
    status = gather.add(off, len, out);
    out += len;
    return status.is_ok();
  });
  SW_RETURN_IF_ERROR(status);
  return gather.finish();
}

Status copy_slice(const ByteSource& source, const SlicePlan& plan, std::uint64_t chunk, const ByteSink& sink) {
  if (plan.nbytes() == 0) return Status::ok();
  SW_RETURN_IF_ERROR(check_footprint(source, plan));
  SW_ASSIGN_OR_RETURN(std::vector<std::byte> buffer, allocate_bytes(std::min(std::max<std::uint64_t>(chunk, 1), plan.nbytes()), "a slice buffer"));
  if (source.mapped() != nullptr) {
    MappedRuns runs(source, plan);
    for (std::uint64_t done = 0; done < plan.nbytes();) {
      const std::span<std::byte> part(buffer.data(), static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), plan.nbytes() - done)));
      SW_RETURN_IF_ERROR(runs.fill(part));
      SW_RETURN_IF_ERROR(sink(part));
      SW_RETURN_IF_ERROR(check_cancelled());
      done += part.size();
    }
    return Status::ok();
  }
  Gather gather(source);
  std::size_t used = 0;
  // The buffer is full (or the slice done): read what is pending, hand it over, start again.
  auto hand_over = [&]() -> Status {
    SW_RETURN_IF_ERROR(gather.finish());
    SW_RETURN_IF_ERROR(sink(std::span<const std::byte>(buffer.data(), used)));
    used = 0;
    return check_cancelled();
  };
  Status status;
  plan.for_each_run([&](std::uint64_t off, std::uint64_t len) {
    while (len > 0) {  // a run longer than the buffer goes in pieces
      const std::uint64_t take = std::min<std::uint64_t>(len, buffer.size() - used);
      status = gather.add(off, take, buffer.data() + used);
      if (status.is_ok() && (used += static_cast<std::size_t>(take)) == buffer.size()) status = hand_over();
      if (!status.is_ok()) return false;
      off += take;
      len -= take;
    }
    return true;
  });
  SW_RETURN_IF_ERROR(status);
  return used > 0 ? hand_over() : Status::ok();
}

}  // namespace safeweights
