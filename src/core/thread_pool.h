// The library's one set of worker threads. Internal.
//
// Every parallel loop in the library (parallel_for) runs on this pool instead of starting threads of its
// own: threads are created once, on first use, and reused for the life of the process. The pool is
// also what keeps nested loops cheap: a loop started from inside a pool task borrows only workers that
// are idle, and the thread that started a loop always works on it itself, so a loop completes even when
// no worker is free (no deadlock) and nesting never multiplies threads (no oversubscription).
//
// Size: one worker per core, but never fewer than kMinWorkers nor more than kMaxWorkers. The floor is
// there because pool tasks also wait on I/O (HTTP requests, pread on network filesystems), where
// threads block rather than compute; it keeps HttpOptions::parallel's default of 8 requests in flight
// on small machines. An idle worker costs a blocked thread, nothing more. A loop that asks for more
// threads than the pool has (a remote load with more requests in flight than cores, `--connections 16`)
// grows it to that many, up to kMaxWorkers, once: the added workers stay for the next such loop.
//
// Lifetime: the pool is never destroyed. At exit idle workers are blocked on a condition variable
// that is never destroyed either, so there is no join that could hang and no worker that could touch
// a destroyed static. After fork() the child forgets the parent's pool (its threads do not exist in the
// child) and builds a new one on first use.
//
// Thread safety: every function may be called from any thread, pool workers included.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>

namespace safeweights {

class ThreadPool {
 public:
  static constexpr unsigned kMinWorkers = 8;
  static constexpr unsigned kMaxWorkers = 64;
  // Queued tasks at most, per worker: helpers beyond this are not needed, a loop's caller does the work.
  static constexpr std::size_t kQueuePerWorker = 4;

  // The process-wide pool; its threads are started by the first call.
  static ThreadPool& shared();

  // Whether the calling thread is a worker of the process-wide pool.
  static bool on_worker_thread() noexcept;

  unsigned size() const noexcept { return workers_.load(std::memory_order_relaxed); }

  // Starts workers until there are `n` (at most kMaxWorkers; fewer when the system refuses threads).
  void grow_to(unsigned n);

  // Queues `task` to run on some worker. False (task dropped) when the queue is full: callers must
  // be able to do the work themselves, which parallel_for always can.
  bool try_submit(std::function<void()> task);

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

 private:
  ThreadPool() = default;
  ~ThreadPool() = delete;  // never destroyed; see Lifetime above
  static ThreadPool* create();
  void work() noexcept;

  std::atomic<unsigned> workers_{0};  // threads actually started (0 if the system refused every one)
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
};

}  // namespace safeweights
