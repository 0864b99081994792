// The process-wide worker pool, and parallel_for on top of it.
#include "core/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <system_error>
#include <thread>

#include "core/cancel_link.h"
#include "core/parallel.h"
#include "core/status_macros.h"
#include "safeweights/cancel.h"

namespace safeweights {
namespace {

std::atomic<ThreadPool*> g_pool{nullptr};
// Held only while the pool is created, and across fork() so that the child never inherits it locked.
std::mutex g_create_mu;
thread_local bool t_is_worker = false;

void before_fork() { g_create_mu.lock(); }
void after_fork_in_parent() { g_create_mu.unlock(); }
void after_fork_in_child() {
  // The parent's workers do not exist here. Its pool (and whatever lock a worker held in it) is left
  // alone, leaked; the next loop builds a pool of this process's own.
  g_pool.store(nullptr, std::memory_order_relaxed);
  g_create_mu.unlock();
}

unsigned pool_size() {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp(cores, ThreadPool::kMinWorkers, ThreadPool::kMaxWorkers);
}

}  // namespace

ThreadPool* ThreadPool::create() {
  auto* pool = new ThreadPool();
  pool->grow_to(pool_size());
  return pool;
}

void ThreadPool::grow_to(unsigned n) {
  n = std::min(n, kMaxWorkers);
  std::lock_guard lock(mu_);
  while (workers_.load(std::memory_order_relaxed) < n) {
    try {
      std::thread(&ThreadPool::work, this).detach();  // never joined: the pool outlives them
      workers_.fetch_add(1, std::memory_order_relaxed);
    } catch (const std::system_error&) {
      break;  // a thread limit: fewer workers, loops still complete on their callers
    }
  }
}

ThreadPool& ThreadPool::shared() {
  ThreadPool* pool = g_pool.load(std::memory_order_acquire);
  if (pool != nullptr) return *pool;
  std::lock_guard lock(g_create_mu);
  pool = g_pool.load(std::memory_order_acquire);
  if (pool == nullptr) {
    static const bool fork_handlers = pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child) == 0;
    (void)fork_handlers;
    pool = create();
    g_pool.store(pool, std::memory_order_release);
  }
  return *pool;
}

bool ThreadPool::on_worker_thread() noexcept { return t_is_worker; }

bool ThreadPool::try_submit(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    const unsigned workers = workers_.load(std::memory_order_relaxed);
    if (workers == 0 || queue_.size() >= kQueuePerWorker * workers) return false;
    queue_.push_back(std::move(task));
  }
  ready_.notify_one();
  return true;
}

void ThreadPool::work() noexcept {
  t_is_worker = true;
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      ready_.wait(lock, [&] { return !queue_.empty(); });
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

namespace {

// One parallel_for call, shared with the helpers it queued. Helpers may start after the call has
// returned (their queue slot came too late); `closed` turns them away before they touch `task`.
struct Loop {
  const std::function<Status(std::size_t)>* task = nullptr;
  std::size_t count = 0;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  // Set when the loop is interrupted: tasks still running on workers see it through check_cancelled().
  std::atomic<bool> cancelled{false};
  const CancelLink* caller_link = nullptr;  // the loops the caller works for, if it is a worker itself

  std::mutex mu;
  std::condition_variable idle;
  bool closed = false;  // the caller has finished its share; no helper may join any more
  unsigned active = 0;  // helpers inside run()
  std::size_t failed_index = SIZE_MAX;
  Status failure;  // the failure with the lowest index so far

  void record(std::size_t i, Status s) {
    if (s.error().kind() == ErrorKind::Interrupted) cancelled.store(true, std::memory_order_relaxed);
    failed.store(true, std::memory_order_relaxed);
    std::lock_guard lock(mu);
    if (i < failed_index) {
      failed_index = i;
      failure = std::move(s);
    }
  }

  void run() {
    for (std::size_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < count;) {
      Status s = (*task)(i);
      if (!s.is_ok()) record(i, std::move(s));
    }
  }

  void help() {
    {
      std::lock_guard lock(mu);
      if (closed) return;
      ++active;
    }
    {
      CancelLink link(cancelled, caller_link);
      run();
    }
    {
      std::lock_guard lock(mu);
      --active;
    }
    idle.notify_all();
  }

  // Called by the loop's caller once its own share is done (or it unwinds): waits out the helpers
  // already inside, turns away those still queued. While it waits it keeps asking check_cancelled()
  // (the poll hook answers only on this thread), and passes an interruption on to the helpers.
  void close() {
    std::unique_lock lock(mu);
    closed = true;
    while (!idle.wait_for(lock, kPollInterval, [&] { return active == 0; })) {
      if (cancelled.load(std::memory_order_relaxed)) continue;
      lock.unlock();
      Status s = check_cancelled();
      if (!s.is_ok()) record(count, std::move(s));  // index `count`: after every task's own failure
      lock.lock();
    }
  }
};

struct CloseOnExit {
  Loop& loop;
  ~CloseOnExit() { loop.close(); }
};

}  // namespace

unsigned default_threads() { return std::min(8u, std::max(1u, std::thread::hardware_concurrency())); }

Status parallel_for(std::size_t count, unsigned threads, const std::function<Status(std::size_t)>& task) {
  if (threads == 0) threads = default_threads();
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, count));
  if (threads <= 1) {
    for (std::size_t i = 0; i < count; ++i) SW_RETURN_IF_ERROR(task(i));
    return Status::ok();
  }
  auto loop = std::make_shared<Loop>();
  loop->task = &task;
  loop->count = count;
  loop->caller_link = CancelLink::current();
  ThreadPool& pool = ThreadPool::shared();
  if (threads - 1 > pool.size()) pool.grow_to(threads - 1);
  for (unsigned h = 1; h < threads; ++h) {
    if (!pool.try_submit([loop] { loop->help(); })) break;
  }
  {
    CloseOnExit guard{*loop};
    CancelLink link(loop->cancelled, loop->caller_link);
    loop->run();
  }
  if (loop->failed_index != SIZE_MAX) return std::move(loop->failure);
  return Status::ok();
}

}  // namespace safeweights
