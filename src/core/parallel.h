// Running independent tasks on a few threads. Internal.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

#include "safeweights/error.h"

namespace safeweights {

// Runs task(i) for every i in [0, count) on up to `threads` threads (0: one per core, at most 8),
// each thread claiming the next index in turn. After a failure no new index is started. Returns the
// failure with the lowest index, so the result does not depend on scheduling.
inline Status parallel_for(std::size_t count, unsigned threads, const std::function<Status(std::size_t)>& task) {
  if (threads == 0) threads = std::min(8u, std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, std::max<std::size_t>(count, 1)));
  std::vector<Status> results(count);
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  auto worker = [&] {
    for (std::size_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < count;) {
      results[i] = task(i);
      if (!results[i].is_ok()) failed.store(true, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  for (auto& s : results) {
    if (!s.is_ok()) return std::move(s);
  }
  return Status::ok();
}

}  // namespace safeweights
