// Group loads (safeweights/group.h): ranks are threads of this process joined by a transport over
// shared memory with a deadline on every call (ThreadGroup below, a real GroupTransport). Every rank's
// destination is compared with the single-process load of its plan, and the bytes the ranks read with
// the bytes the group needs.
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include "load/host_device.h"
#include "safeweights/group.h"
#include "safeweights/loader.h"
#include "core/status_macros.h"
#include "load_util.h"
#include "test_util.h"

namespace {

using namespace safeweights;
using load_test::open_any;
using load_test::Spec;
using load_test::write_tensors;
using swt::IsKind;
using swt::IsOk;
using swt::TempDir;

// `size` ranks in one process: each collective is a rendezvous of every rank (deposit, barrier, take,
// barrier). A rank that does not arrive within the deadline breaks the group: that call and every
// later one fail with Timeout, as a process group's do.
class ThreadGroup {
 public:
  ThreadGroup(std::uint64_t size, std::chrono::milliseconds deadline) : size_(size), deadline_(deadline), slots_(size) {}

  class Member : public GroupTransport {
   public:
    Member(ThreadGroup& g, std::uint64_t rank) : g_(g), rank_(rank) {}
    std::uint64_t rank() const override { return rank_; }
    std::uint64_t size() const override { return g_.size_; }
    Status all_gather(std::span<const std::byte> mine, std::span<std::byte> all) override {
      return g_.round(rank_, mine.data(), [&](const std::vector<const void*>& slots) {
        for (std::size_t r = 0; r < slots.size(); ++r) std::memcpy(all.data() + r * mine.size(), slots[r], mine.size());
      });
    }
    Status broadcast(void* data, std::uint64_t length, std::uint64_t root) override {
      ++broadcasts;
      return g_.round(rank_, data, [&](const std::vector<const void*>& slots) {
        if (rank_ != root) std::memcpy(data, slots[root], static_cast<std::size_t>(length));
      });
    }
    int broadcasts = 0;

   private:
    ThreadGroup& g_;
    std::uint64_t rank_;
  };

 private:
  Status round(std::uint64_t rank, const void* mine, const std::function<void(const std::vector<const void*>&)>& take) {
    std::unique_lock<std::mutex> lock(mu_);
    slots_[rank] = mine;
    SW_RETURN_IF_ERROR(barrier(lock));
    lock.unlock();
    take(slots_);  // the slots stay valid until every rank passed the second barrier
    lock.lock();
    return barrier(lock);
  }

  Status barrier(std::unique_lock<std::mutex>& lock) {
    if (broken_) return Error(ErrorKind::Timeout, "the group is broken");
    const std::uint64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return Status::ok();
    }
    if (!cv_.wait_for(lock, deadline_, [&] { return generation_ != generation || broken_; }) || broken_) {
      broken_ = true;
      cv_.notify_all();
      return Error(ErrorKind::Timeout, "a rank did not arrive within the deadline");
    }
    return Status::ok();
  }

  std::uint64_t size_;
  std::chrono::milliseconds deadline_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<const void*> slots_;
  std::uint64_t arrived_ = 0, generation_ = 0;
  bool broken_ = false;
};

// Runs body(rank, transport) on `size` threads at once.
void run_ranks(std::uint64_t size, const std::function<void(std::uint64_t, ThreadGroup::Member&)>& body,
               std::chrono::milliseconds deadline = std::chrono::seconds(60)) {
  ThreadGroup group(size, deadline);
  std::vector<std::unique_ptr<ThreadGroup::Member>> members;
  for (std::uint64_t r = 0; r < size; ++r) members.push_back(std::make_unique<ThreadGroup::Member>(group, r));
  std::vector<std::thread> threads;
  for (std::uint64_t r = 0; r < size; ++r) threads.emplace_back([&, r] { body(r, *members[r]); });
  for (auto& t : threads) t.join();
}

// A model of about 700 KiB: layers of several types and shapes, a bias, a scalar, an empty tensor.
std::vector<Spec> model_specs() {
  std::vector<Spec> specs;
  for (int i = 0; i < 12; ++i) {
    specs.push_back(
        {"layer" + std::to_string(i) + ".w", i % 3 == 0 ? TensorType::BF16 : TensorType::F32, {96, 40 + static_cast<std::uint64_t>(i) * 16}});
    specs.push_back({"layer" + std::to_string(i) + ".b", TensorType::F32, {static_cast<std::uint64_t>(7 + i)}});
  }
  specs.push_back({"embed", TensorType::F16, {1000, 64}});
  specs.push_back({"scalar", TensorType::F64, {}});
  specs.push_back({"empty", TensorType::F32, {0, 4}});
  return specs;
}

// Every placed tensor's bytes in `got` equal those of the single-process load `want` of the same plan.
void expect_same_tensors(const LoadPlan& plan, const HostLoad& want, std::span<const std::byte> got, std::uint64_t rank) {
  ASSERT_EQ(got.size(), plan.size());
  for (const PlacedTensor& t : plan.tensors()) {
    const auto w = want.bytes_of(t);
    if (w.empty()) continue;
    EXPECT_EQ(0, std::memcmp(w.data(), got.data() + t.offset, w.size())) << t.entry.name << " rank " << rank;
  }
}

struct RankResult {
  Status status;
  GroupLoadStats stats;
  std::uint64_t plan_read_bytes = 0;
};

// One rank's group load of `path` (opened by the rank itself) with `options`, checked against the
// single-process load of its plan.
RankResult load_and_check(const std::string& path, const LoaderOptions& options, ThreadGroup::Member& group, const GroupOptions& group_options = {}) {
  RankResult out;
  auto file = open_any(path);
  auto plan = LoadPlan::make(*file, options);
  EXPECT_TRUE(IsOk(plan.status()));
  if (!plan.is_ok()) return {plan.status(), {}, 0};
  std::vector<std::byte> dst(static_cast<std::size_t>(plan->size()));
  auto stats = load_into_group(*plan, dst, group, group_options);
  out.status = stats.status();
  out.plan_read_bytes = plan->read_bytes();
  if (!stats.is_ok()) return out;
  out.stats = *stats;
  auto want = load_host(*plan);
  EXPECT_TRUE(IsOk(want.status()));
  if (want.is_ok()) expect_same_tensors(*plan, *want, dst, group.rank());
  return out;
}

class GroupSizes : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(GroupSizes, EveryRankEqualsTheSingleLoadAndTheGroupReadsEachByteOnce) {
  const std::uint64_t n = GetParam();
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  write_tensors(path, model_specs());
  // Many chunks, in pieces of a few chunks (the exchange overlaps the reading); one chunk, one piece.
  // Plain variables, not a structured binding: clang 14 refuses to capture a binding in the lambda.
  for (const auto& sizes : {std::pair<std::uint64_t, std::uint64_t>{16 << 10, 40 << 10}, {0, 0}}) {
    const std::uint64_t chunk = sizes.first, piece = sizes.second;
    std::vector<RankResult> results(n);
    run_ranks(n, [&](std::uint64_t rank, ThreadGroup::Member& group) {
      LoaderOptions options;
      options.chunk_bytes = chunk;
      options.threads = 2;
      results[rank] = load_and_check(path, options, group, {.piece_bytes = piece});
      // One broadcast per rank, or more with pieces; none alone.
      const int least = n == 1 ? 0 : static_cast<int>(n);
      EXPECT_TRUE(piece == 0 || n == 1 ? group.broadcasts == least : group.broadcasts > least) << group.broadcasts;
    });
    std::uint64_t sum = 0, received = 0;
    for (const RankResult& r : results) {
      ASSERT_TRUE(IsOk(r.status));
      sum += r.stats.read_bytes;
      received += r.stats.received_bytes;
      // Byte-balanced: each rank reads its share, give or take the cuts' alignment (at most 4 KiB).
      EXPECT_LE(r.stats.read_bytes, r.plan_read_bytes / n + 4096) << "chunk " << chunk;
      EXPECT_GE(r.stats.read_bytes + 4096, r.plan_read_bytes / n) << "chunk " << chunk;
      EXPECT_GE(r.stats.exchange_seconds, 0.0);
    }
    EXPECT_EQ(sum, results[0].plan_read_bytes) << "the group reads every byte of the plan once";
    if (n > 1) {
      EXPECT_EQ(received, (n - 1) * results[0].stats.shared_bytes) << "every rank receives what the others read";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, GroupSizes, ::testing::Values(1, 2, 3, 4));

TEST(GroupLoad, TensorParallelRanksReadTheReplicatedBytesOnceAndTheirOwnPartsThemselves) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  write_tensors(path, model_specs());
  auto probe = open_any(path);
  // Along dimension 1 with 2 ranks, every layer's parts have the same shape on both ranks: the plans
  // differ only in which columns they read, and must still not be taken for one plan.
  for (unsigned dim = 0; dim < 2; ++dim) {
    for (std::uint64_t n : {2, 3}) {
      // The bytes needed once: the tensors read whole (as a plan of those alone reads them), and each
      // rank's shard part.
      std::vector<TensorEntry> whole;
      for (const TensorEntry& e : probe->tensors())
        if (!(e.shape.size() > dim && e.shape[dim] >= n)) whole.push_back(e);
      const std::uint64_t replicated = LoadPlan::make(whole).value().read_bytes();
      std::vector<RankResult> results(n);
      run_ranks(n, [&](std::uint64_t rank, ThreadGroup::Member& group) {
        LoaderOptions options;
        options.shard = TensorShard{dim, rank, n};
        options.chunk_bytes = 16 << 10;
        results[rank] = load_and_check(path, options, group);
      });
      std::uint64_t sum = 0, needed = 0;
      for (const RankResult& r : results) {
        ASSERT_TRUE(IsOk(r.status));
        sum += r.stats.read_bytes;
        needed += r.plan_read_bytes - replicated;  // this rank's own part
      }
      EXPECT_EQ(sum, needed + replicated) << "dim " << dim << " world " << n;
    }
  }
}

TEST(GroupLoad, ReplicasOfOneShardShareAllOfItsBytes) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  write_tensors(path, model_specs());
  std::vector<RankResult> results(2);
  run_ranks(2, [&](std::uint64_t rank, ThreadGroup::Member& group) {
    LoaderOptions options;
    options.shard = TensorShard{1, 1, 4};  // both data-parallel ranks hold tensor-parallel rank 1 of 4
    results[rank] = load_and_check(path, options, group);
  });
  for (const RankResult& r : results) ASSERT_TRUE(IsOk(r.status)) << r.status.to_string();
  EXPECT_EQ(results[0].stats.shared_bytes, results[1].stats.shared_bytes);
  EXPECT_GT(results[0].stats.shared_bytes, 0u);
  EXPECT_EQ(results[0].stats.read_bytes + results[1].stats.read_bytes, results[0].plan_read_bytes);
}

TEST(GroupLoad, ToTheDeviceEqualsTheHostLoad) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  write_tensors(path, model_specs());
  run_ranks(3, [&](std::uint64_t rank, ThreadGroup::Member& group) {
    auto file = open_any(path);
    LoaderOptions options;
    options.shard = TensorShard{0, rank, 3};
    options.chunk_bytes = 32 << 10;
    auto plan = LoadPlan::make(*file, options);
    ASSERT_TRUE(IsOk(plan.status()));
    auto device = load::make_host_device();
    auto memory = device->allocate(plan->size());
    ASSERT_TRUE(IsOk(memory.status()));
    auto stats = load_to_device_group(*plan, *device, *memory, plan->size(), group, {.buffer_bytes = 8192});
    ASSERT_TRUE(IsOk(stats.status()));
    EXPECT_EQ(stats->device.staged_bytes, stats->read_bytes);
    auto want = load_host(*plan);
    ASSERT_TRUE(IsOk(want.status()));
    expect_same_tensors(*plan, *want, {static_cast<const std::byte*>(*memory), static_cast<std::size_t>(plan->size())}, rank);
    device->release(*memory);
  });
}

TEST(GroupLoad, ARankThatCannotPlanMakesEveryRankFail) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  write_tensors(path, model_specs());
  std::vector<Status> statuses(3);
  run_ranks(3, [&](std::uint64_t rank, ThreadGroup::Member& group) {
    if (rank == 1) {
      statuses[rank] = fail_group(group, Error(ErrorKind::FileNotFound, "no such file: m.safetensors"));
      return;
    }
    auto file = open_any(path);
    auto plan = LoadPlan::make(*file);
    ASSERT_TRUE(IsOk(plan.status()));
    std::vector<std::byte> dst(static_cast<std::size_t>(plan->size()));
    statuses[rank] = load_into_group(*plan, dst, group).status();
  });
  for (const Status& s : statuses) {
    ASSERT_TRUE(IsKind(s, ErrorKind::FileNotFound)) << s.to_string();
    EXPECT_NE(s.error().message().find("no such file"), std::string::npos) << s.to_string();
  }
  EXPECT_NE(statuses[0].error().message().find("rank 1 of 3 could not plan its load"), std::string::npos) << statuses[0].to_string();
}

TEST(GroupLoad, ARankWhoseReadsFailMakesEveryRankFailNamingIt) {
  TempDir dir;
  for (int r = 0; r < 3; ++r) write_tensors(dir.file("m" + std::to_string(r) + ".safetensors"), model_specs());  // node-local copies
  std::vector<Status> statuses(3);
  run_ranks(3, [&](std::uint64_t rank, ThreadGroup::Member& group) {
    const std::string path = dir.file("m" + std::to_string(rank) + ".safetensors");
    auto file = open_any(path);
    LoaderOptions options;
    options.read = ReadMode::Pread;
    auto plan = LoadPlan::make(*file, options);
    ASSERT_TRUE(IsOk(plan.status()));
    if (rank == 2) {
      ASSERT_EQ(::truncate(path.c_str(), 1000), 0);  // its copy shrinks after it was opened
    }
    std::vector<std::byte> dst(static_cast<std::size_t>(plan->size()));
    statuses[rank] = load_into_group(*plan, dst, group).status();
  });
  for (const Status& s : statuses) ASSERT_TRUE(IsKind(s, ErrorKind::IoError)) << s.to_string();
  EXPECT_NE(statuses[0].error().message().find("rank 2 of 3 failed to read its part of the load"), std::string::npos) << statuses[0].to_string();
  EXPECT_EQ(statuses[2].error().message().find("rank 2"), std::string::npos) << "the failed rank reports its own error";
}

TEST(GroupLoad, ARankThatNeverArrivesFailsTheOthersAtTheTransportsDeadline) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  write_tensors(path, model_specs());
  std::vector<Status> statuses(2);
  run_ranks(
      2,
      [&](std::uint64_t rank, ThreadGroup::Member& group) {
        if (rank == 1) return;  // gone: it takes part in nothing
        auto file = open_any(path);
        auto plan = LoadPlan::make(*file);
        ASSERT_TRUE(IsOk(plan.status()));
        std::vector<std::byte> dst(static_cast<std::size_t>(plan->size()));
        statuses[rank] = load_into_group(*plan, dst, group).status();
      },
      std::chrono::milliseconds(200));
  EXPECT_TRUE(IsKind(statuses[0], ErrorKind::Timeout)) << statuses[0].to_string();
}

TEST(GroupLoad, RanksLoadingDifferentTensorsAllFail) {
  TempDir dir;
  write_tensors(dir.file("a.safetensors"), model_specs());
  write_tensors(dir.file("b.safetensors"), {{"other", TensorType::F32, {10, 10}}});
  std::vector<Status> statuses(2);
  run_ranks(2, [&](std::uint64_t rank, ThreadGroup::Member& group) {
    auto file = open_any(dir.file(rank == 0 ? "a.safetensors" : "b.safetensors"));
    auto plan = LoadPlan::make(*file);
    ASSERT_TRUE(IsOk(plan.status()));
    std::vector<std::byte> dst(static_cast<std::size_t>(plan->size()));
    statuses[rank] = load_into_group(*plan, dst, group).status();
  });
  for (const Status& s : statuses) EXPECT_TRUE(IsKind(s, ErrorKind::InvalidArgument)) << s.to_string();
}

TEST(GroupPlan, PartsAreContiguousDisjointAndCoverTheSharedBytes) {
  TempDir dir;
  write_tensors(dir.file("m.safetensors"), model_specs());
  auto file = open_any(dir.file("m.safetensors"));
  LoaderOptions options;
  options.chunk_bytes = 8 << 10;
  auto plan = LoadPlan::make(*file, options).value();
  for (std::uint64_t n = 1; n <= 5; ++n) {
    std::uint64_t covered = 0;
    for (std::uint64_t rank = 0; rank < n; ++rank) {
      auto gp = GroupPlan::make(plan, plan.size(), rank, n);
      ASSERT_TRUE(IsOk(gp.status()));
      ASSERT_EQ(gp->parts().size(), n);
      EXPECT_EQ(gp->parts().front().begin, 0u);
      EXPECT_EQ(gp->parts().back().end, plan.size());
      for (std::size_t k = 1; k < n; ++k) EXPECT_EQ(gp->parts()[k].begin, gp->parts()[k - 1].end);
      const GroupPart& mine = gp->parts()[rank];
      EXPECT_EQ(gp->reads().read_bytes(), mine.read_bytes);
      for (const LoadChunk& c : gp->reads().chunks()) {
        EXPECT_GE(c.dst, mine.begin);
        EXPECT_LE(c.dst + c.length, mine.end);
      }
      covered += gp->reads().read_bytes();
    }
    EXPECT_EQ(covered, plan.read_bytes()) << n;
    // Pieces of 20 KiB of reading: they tile each part, in rounds of one piece per rank, and this
    // rank's steps are its pieces in that order.
    for (std::uint64_t rank = 0; rank < n; ++rank) {
      auto gp = GroupPlan::make(plan, plan.size(), rank, n, {.piece_bytes = 20 << 10});
      ASSERT_TRUE(IsOk(gp.status()));
      std::vector<std::uint64_t> at(n), read(n);
      std::vector<std::size_t> seen(n);
      std::uint64_t last_round = 0;
      std::size_t step = 0;
      for (const GroupPiece& p : gp->pieces()) {
        const auto k = static_cast<std::size_t>(p.rank);
        EXPECT_EQ(p.begin, seen[k] == 0 ? gp->parts()[k].begin : at[k]);
        EXPECT_GT(p.read_bytes, 0u);
        EXPECT_GE(seen[k], last_round);  // round-robin: a rank's piece j never precedes another's j - 1
        last_round = seen[k];
        at[k] = p.end;
        read[k] += p.read_bytes;
        ++seen[k];
        if (p.rank == rank) {
          ASSERT_LT(step, gp->steps().size());
          EXPECT_EQ(gp->steps()[step++].read_bytes(), p.read_bytes);
        }
      }
      for (std::size_t k = 0; k < n; ++k) {
        if (gp->parts()[k].read_bytes == 0) continue;
        EXPECT_EQ(at[k], gp->parts()[k].end);
        EXPECT_EQ(read[k], gp->parts()[k].read_bytes);
      }
      EXPECT_EQ(step, gp->steps().size());  // no bytes beyond the shared ones: no step of its own
    }
  }
  EXPECT_TRUE(IsKind(GroupPlan::make(plan, plan.size(), 2, 2).status(), ErrorKind::InvalidArgument));
}

}  // namespace
