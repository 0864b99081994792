// The process-wide thread pool and parallel_for on top of it (internal headers).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/parallel.h"
#include "core/thread_pool.h"
#include "safeweights/cancel.h"

namespace {

// Bounded waits for workers to reach a point: generous, because CI runs this under the sanitizers on a
// loaded 2-core machine; a pass never waits for it.
constexpr int kWaitMs = 60'000;

using safeweights::Error;
using safeweights::ErrorKind;
using safeweights::parallel_for;
using safeweights::Status;
using safeweights::ThreadPool;

// try_submit, retried while the queue is full: helpers queued by earlier loops leave it only when a
// worker gets the CPU, which on a loaded machine can take a while.
bool submit_when_room(ThreadPool& pool, std::function<void()> task) {
  for (int i = 0; i < kWaitMs; ++i) {
    if (pool.try_submit(task)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

TEST(ParallelFor, RunsEveryIndexOnce) {
  for (unsigned threads : {0u, 1u, 2u, 5u, 64u}) {
    std::vector<std::atomic<int>> hits(1000);
    Status s = parallel_for(hits.size(), threads, [&](std::size_t i) {
      hits[i].fetch_add(1);
      return Status::ok();
    });
    ASSERT_TRUE(s.is_ok());
    for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "threads " << threads;
  }
  EXPECT_TRUE(parallel_for(0, 4, [](std::size_t) { return Status(Error(ErrorKind::IoError, "never")); }).is_ok());
}

TEST(ParallelFor, ReturnsTheLowestFailingIndex) {
  for (int round = 0; round < 50; ++round) {
    Status s = parallel_for(200, 4, [](std::size_t i) -> Status {
      if (i == 37 || i == 38 || i == 150) return Error(ErrorKind::IoError, "index " + std::to_string(i));
      return Status::ok();
    });
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(s.error().message(), "index 37");
  }
}

TEST(ParallelFor, StartsNoIndexAfterAFailure) {
  // Index 0 fails at once; every thread stops after the index it holds. The others take 1 ms each so
  // that the bound holds even when the failing thread is preempted for a while (CI runs this under
  // ASan on a loaded machine, where 10 us tasks let a few ms of preemption start hundreds).
  // A loop that did not stop would start all 10,000.
  std::atomic<std::size_t> started{0};
  Status s = parallel_for(10000, 4, [&](std::size_t i) -> Status {
    started.fetch_add(1);
    if (i == 0) return Error(ErrorKind::IoError, "first");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return Status::ok();
  });
  ASSERT_FALSE(s.is_ok());
  EXPECT_LT(started.load(), 1000u);
}

TEST(ParallelFor, RespectsTheThreadsCap) {
  for (unsigned cap : {1u, 2u, 3u}) {
    std::atomic<int> running{0}, most{0};
    ASSERT_TRUE(parallel_for(64, cap, [&](std::size_t) {
                  const int now = running.fetch_add(1) + 1;
                  for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {}
                  std::this_thread::sleep_for(std::chrono::milliseconds(1));
                  running.fetch_sub(1);
                  return Status::ok();
                }).is_ok());
    EXPECT_LE(most.load(), static_cast<int>(cap));
  }
}

TEST(ParallelFor, UsesSeveralThreadsWhenAsked) {
  std::mutex mu;
  std::set<std::thread::id> ids;
  ASSERT_TRUE(parallel_for(32, 4, [&](std::size_t) {
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
                std::lock_guard lock(mu);
                ids.insert(std::this_thread::get_id());
                return Status::ok();
              }).is_ok());
  EXPECT_GT(ids.size(), 1u);
  EXPECT_LE(ids.size(), 4u);
}

TEST(ParallelFor, NestedLoopsComplete) {
  // Every outer task runs an inner loop as wide as the pool: with a pool of fixed size, an inner loop
  // that waited for free workers would deadlock.
  const unsigned wide = ThreadPool::shared().size() * 2;
  std::atomic<std::size_t> inner_runs{0};
  Status s = parallel_for(wide, wide, [&](std::size_t) {
    return parallel_for(50, wide, [&](std::size_t) {
      inner_runs.fetch_add(1);
      return parallel_for(3, 3, [](std::size_t) { return Status::ok(); });
    });
  });
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(inner_runs.load(), wide * 50u);
}

TEST(ParallelFor, NestedFailureReachesTheOuterCaller) {
  Status s = parallel_for(8, 8, [&](std::size_t outer) {
    return parallel_for(8, 8, [&](std::size_t inner) -> Status {
      if (outer == 3 && inner == 5) return Error(ErrorKind::IoError, "inner failure");
      return Status::ok();
    });
  });
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.error().message(), "inner failure");
}

TEST(ParallelFor, ManyConcurrentCallers) {
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int c = 0; c < 16; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 20; ++round) {
        std::atomic<std::size_t> sum{0};
        Status s = parallel_for(100, 4, [&](std::size_t i) {
          sum.fetch_add(i);
          return Status::ok();
        });
        if (!s.is_ok() || sum.load() != 4950u) failures.fetch_add(1);
        (void)c;
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ParallelFor, CreatesNoThreadsPerCall) {
  const unsigned pool = ThreadPool::shared().size();
  std::mutex mu;
  std::set<std::thread::id> ids;
  for (int call = 0; call < 100; ++call) {
    ASSERT_TRUE(parallel_for(16, 8, [&](std::size_t) {
                  std::lock_guard lock(mu);
                  ids.insert(std::this_thread::get_id());
                  return Status::ok();
                }).is_ok());
  }
  // The workers and this thread, however many calls: a thread per call would give hundreds.
  EXPECT_LE(ids.size(), pool + 1);
}

TEST(ThreadPool, SizeAndWorkerFlag) {
  ThreadPool& pool = ThreadPool::shared();
  EXPECT_EQ(&pool, &ThreadPool::shared());
  EXPECT_GE(pool.size(), 1u);
  EXPECT_LE(pool.size(), ThreadPool::kMaxWorkers);
  EXPECT_FALSE(ThreadPool::on_worker_thread());
  std::atomic<bool> flag_in_worker{false};
  std::atomic<bool> done{false};
  ASSERT_TRUE(submit_when_room(pool, [&] {
    flag_in_worker = ThreadPool::on_worker_thread();
    done = true;
  }));
  for (int i = 0; i < kWaitMs && !done.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(done.load());
  EXPECT_TRUE(flag_in_worker.load());
}

// Every worker parked on one gate. The state is owned by the tasks too, so no task outlives what it
// touches, and release() waits until every parked task has left the gate.
class ParkedPool {
 public:
  explicit ParkedPool(ThreadPool& pool) : pool_(pool), state_(std::make_shared<State>()), hold_(state_->gate) {}
  ~ParkedPool() { release(); }

  // Submits one parking task per worker and waits until all of them are parked.
  bool park() {
    for (unsigned w = 0; w < pool_.size(); ++w) {
      if (!submit_when_room(pool_, [state = state_] {
            state->parked.fetch_add(1);
            std::lock_guard wait(state->gate);
            state->left.fetch_add(1);
          })) {
        return false;
      }
    }
    return wait_for([&] { return state_->parked.load() == pool_.size(); });
  }
  void release() {
    if (!hold_.owns_lock()) return;
    hold_.unlock();
    wait_for([&] { return state_->left.load() == state_->parked.load(); });
  }
  unsigned parked() const { return state_->parked.load(); }

  template <typename Done>
  static bool wait_for(Done done) {
    for (int i = 0; i < kWaitMs && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return done();
  }

 private:
  struct State {
    std::mutex gate;
    std::atomic<unsigned> parked{0}, left{0};
  };
  ThreadPool& pool_;
  std::shared_ptr<State> state_;
  std::unique_lock<std::mutex> hold_;
};

TEST(ThreadPool, TheQueueIsBounded) {
  ThreadPool& pool = ThreadPool::shared();
  // Park every worker, then fill the queue: submissions past its bound are refused, not queued.
  ParkedPool parked(pool);
  ASSERT_TRUE(parked.park()) << parked.parked() << " of " << pool.size() << " workers parked";
  auto ran = std::make_shared<std::atomic<unsigned>>(0);
  std::size_t accepted = 0;
  while (pool.try_submit([ran] { ran->fetch_add(1); })) ++accepted;
  EXPECT_EQ(accepted, ThreadPool::kQueuePerWorker * pool.size());
  // A loop still completes, on its caller alone, while no worker is free.
  std::atomic<int> count{0};
  EXPECT_TRUE(parallel_for(10, 4, [&](std::size_t) {
                count.fetch_add(1);
                return Status::ok();
              }).is_ok());
  EXPECT_EQ(count.load(), 10);
  parked.release();
  EXPECT_TRUE(ParkedPool::wait_for([&] { return ran->load() == accepted; }));
}

TEST(ThreadPool, UsableAfterFork) {
  ASSERT_TRUE(parallel_for(16, 4, [](std::size_t) { return Status::ok(); }).is_ok());  // parent's pool exists
  // Fork while every worker is parked on a lock of ours: a worker caught inside the allocator at fork
  // time would leave its lock held in the child. glibc's malloc guards against that; the sanitizers'
  // allocator does not, so without this the ASan build hangs now and then.
  ThreadPool& pool = ThreadPool::shared();
  ParkedPool parked(pool);
  ASSERT_TRUE(parked.park()) << parked.parked() << " of " << pool.size() << " workers parked";
  std::fflush(nullptr);  // the child must not print the parent's buffered output again
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::atomic<int> count{0};
    Status s = parallel_for(100, 4, [&](std::size_t) {
      count.fetch_add(1);
      return Status::ok();
    });
    // _Exit: the child leaves without running the parent's static destructors or gtest's teardown.
    std::_Exit(s.is_ok() && count.load() == 100 ? 0 : 1);
  }
  parked.release();
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace

// ---- cancellation across the pool ------------------------------------------------------------------

namespace {

// Spins until check_cancelled() fails, for at most 20 s (a loop that never stops fails the test
// instead of hanging it).
Status wait_until_cancelled() {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < give_up) {
    Status s = safeweights::check_cancelled();
    if (!s.is_ok()) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Error(ErrorKind::IoError, "never cancelled");
}

std::atomic<std::thread::id> g_poll_thread;
std::atomic<bool> g_poll_says_stop{false};
bool stop_on_poll_thread() noexcept { return std::this_thread::get_id() == g_poll_thread.load() && g_poll_says_stop.load(); }

}  // namespace

// One task interrupted: the tasks still running on workers see it at their next check.
TEST(ParallelFor, AnInterruptedTaskStopsItsSiblings) {
  std::atomic<int> started{0}, stopped{0};
  const Status s = parallel_for(4, 4, [&](std::size_t i) -> Status {
    if (i == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the others start
      return Error(ErrorKind::Interrupted, "interrupted");
    }
    ++started;
    Status w = wait_until_cancelled();
    if (w.error().kind() == ErrorKind::Interrupted) ++stopped;
    return w;
  });
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.error().kind(), ErrorKind::Interrupted);
  EXPECT_EQ(stopped.load(), started.load());  // none ran into the 20 s limit
}

// The poll hook answers only on the caller's thread (as Python's does): a caller that has finished its
// own share and waits for the workers still asks it, and the workers stop.
TEST(ParallelFor, TheWaitingCallerPassesAnInterruptionToTheWorkers) {
  g_poll_thread = std::this_thread::get_id();
  g_poll_says_stop = false;
  safeweights::set_cancel_poll(&stop_on_poll_thread);
  std::atomic<int> ended_by_flag{0};
  const Status s = parallel_for(3, 3, [&](std::size_t) -> Status {
    if (std::this_thread::get_id() == g_poll_thread.load() && !g_poll_says_stop.exchange(true)) {
      return Status::ok();  // the caller's first task ends at once; from now on the hook says stop
    }
    Status w = wait_until_cancelled();
    if (w.error().kind() == ErrorKind::Interrupted) ++ended_by_flag;
    return w;
  });
  safeweights::set_cancel_poll(nullptr);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.error().kind(), ErrorKind::Interrupted);
  EXPECT_GE(ended_by_flag.load(), 1);
}
