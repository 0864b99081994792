#include "safeweights/cancel.h"

#include <atomic>

#include "core/cancel_link.h"

namespace safeweights {
namespace {

// Lock-free atomics only: request_cancel() runs inside signal handlers.
std::atomic<bool> g_cancel{false};
std::atomic<CancelPoll> g_poll{nullptr};
static_assert(std::atomic<bool>::is_always_lock_free);

Status interrupted() { return Error(ErrorKind::Interrupted, "interrupted"); }

// The flags of the parallel loops the calling thread works for, innermost first.
thread_local const CancelLink* t_link = nullptr;

bool linked_cancelled() noexcept {
  for (const CancelLink* l = t_link; l != nullptr; l = l->parent()) {
    if (l->flag().load(std::memory_order_relaxed)) return true;
  }
  return false;
}

}  // namespace

CancelLink::CancelLink(const std::atomic<bool>& flag, const CancelLink* parent) noexcept : flag_(flag), parent_(parent), saved_(t_link) {
  t_link = this;
}
CancelLink::~CancelLink() { t_link = saved_; }
const CancelLink* CancelLink::current() noexcept { return t_link; }

void request_cancel() noexcept { g_cancel.store(true, std::memory_order_relaxed); }
void clear_cancel() noexcept { g_cancel.store(false, std::memory_order_relaxed); }
bool cancel_requested() noexcept { return g_cancel.load(std::memory_order_relaxed); }
void set_cancel_poll(CancelPoll poll) noexcept { g_poll.store(poll, std::memory_order_release); }

Status check_cancelled() {
  if (cancel_requested() || linked_cancelled()) return interrupted();
  const CancelPoll poll = g_poll.load(std::memory_order_acquire);
  if (poll == nullptr) return Status();
  // Rate-limited per thread: a poll may take a lock (the GIL), and copy loops call this per chunk.
  thread_local std::chrono::steady_clock::time_point next_poll{};
  const auto now = std::chrono::steady_clock::now();
  if (now < next_poll) return Status();
  next_poll = now + kPollInterval;
  return poll() ? interrupted() : Status();
}

}  // namespace safeweights
