// Running independent tasks on a few threads. Internal.
//
// Loops run on the process-wide ThreadPool (core/thread_pool.h): no thread is started per call. The
// calling thread always works on its own loop and borrows only idle workers, so a loop started from
// inside another loop's task (a chunked load whose reads are themselves parallel, as over HTTP)
// completes without waiting for a free worker, and nesting never multiplies threads. A loop that asks
// for more threads than the pool has grows the pool once (core/thread_pool.h, "Size").
//
// Thread safety: parallel_for may be called from any thread, pool workers included.
#pragma once

#include <cstddef>
#include <functional>

#include "safeweights/error.h"

namespace safeweights {

// The parallelism `threads == 0` stands for: one per core, at most 8.
unsigned default_threads();

// Runs task(i) for every i in [0, count) on up to `threads` threads at once (0: default_threads()),
// the caller's included, each thread claiming the next index in turn. After a failure no new index is
// started. Returns the failure with the lowest index, so the result does not depend on scheduling.
Status parallel_for(std::size_t count, unsigned threads, const std::function<Status(std::size_t)>& task);

}  // namespace safeweights
