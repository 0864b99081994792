// Cancellation across the thread pool. Internal.
//
// The poll hook of cancel.h answers only on the thread that started an operation (Python runs signal
// handlers on its main thread alone), and a parallel loop's other tasks run on pool workers. So each
// parallel_for has a flag of its own: the loop sets it when one of its tasks is interrupted or when its
// caller, waiting for the workers, is told to stop; while a worker runs a task of the loop, a CancelLink
// makes check_cancelled() on that worker see the flag, and the flags of the loops the caller itself
// works for (nested loops).
//
// Thread safety: a CancelLink belongs to the thread that made it (a scope on its stack); the flag may
// be set from any thread.
#pragma once

#include <atomic>

namespace safeweights {

class CancelLink {
 public:
  // Makes `flag` (and `parent`'s chain) visible to check_cancelled() on this thread until destroyed.
  CancelLink(const std::atomic<bool>& flag, const CancelLink* parent) noexcept;
  ~CancelLink();
  CancelLink(const CancelLink&) = delete;
  CancelLink& operator=(const CancelLink&) = delete;

  // The innermost link of the calling thread, or null: what a loop started here passes to its workers.
  static const CancelLink* current() noexcept;

  const std::atomic<bool>& flag() const noexcept { return flag_; }
  const CancelLink* parent() const noexcept { return parent_; }

 private:
  const std::atomic<bool>& flag_;
  const CancelLink* parent_;
  const CancelLink* saved_;
};

}  // namespace safeweights
