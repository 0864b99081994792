// safeweights/cancel.h — cooperative cancellation of long operations (Ctrl-C, SIGTERM, a caller's stop).
//
// Long library calls (remote reads, copies, writers, CRC passes, pack and unpack) call check_cancelled()
// between pieces of work and return ErrorKind::Interrupted when it fails, unwinding through their normal
// error paths: writers discard their uncommitted output, loads free what they took. Nothing is ever
// killed from outside, so nothing is left half-done.
//
// Two ways to ask for cancellation:
//  - request_cancel(): a process-wide flag, async-signal-safe. The CLI's SIGINT/SIGTERM handlers call it.
//    It stays set until clear_cancel().
//  - a poll hook (set_cancel_poll): asked, at most every kPollInterval per thread, whether the current
//    operation should stop. The Python extension installs one that, on the interpreter's main thread,
//    takes the GIL and runs the pending signal handlers, so Ctrl-C raises KeyboardInterrupt while the
//    library works with the GIL released.
//
// Thread safety: every function may be called from any thread; request_cancel() also from a signal handler.
#pragma once

#include <chrono>

#include "safeweights/error.h"
#include "safeweights/export.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

// The longest a check_cancelled() caller goes without asking the poll hook.
inline constexpr std::chrono::milliseconds kPollInterval{50};

void request_cancel() noexcept;
void clear_cancel() noexcept;
bool cancel_requested() noexcept;

// Returns true when the operation on the calling thread should stop. Must not throw. nullptr removes it.
using CancelPoll = bool (*)() noexcept;
void set_cancel_poll(CancelPoll poll) noexcept;

// Interrupted when request_cancel() was called, a parallel loop the calling thread works for has
// failed (its other tasks stop early), or the poll hook says stop; OK otherwise. Costs a few relaxed
// atomic loads (the flag, and one per enclosing parallel loop), plus a clock read when a poll hook is
// installed.
Status check_cancelled();

SAFEWEIGHTS_API_END
}  // namespace safeweights
