// The loaders (safeweights/loader.h, safeweights/device.h): placement, host loads in every read mode,
// tensor-parallel shards, and the device pipeline run on the host device (engine threads), including
// its failure paths. Every load is compared with per-tensor reads of the same file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <numeric>

#include "load/host_device.h"
#include "safeweights/cancel.h"
#include "safeweights/device.h"
#include "safeweights/format.h"
#include "safeweights/loader.h"
#include "safeweights/safetensors_writer.h"
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

std::vector<std::byte> read_tensor(const TensorEntry& e) {
  std::vector<std::byte> out(static_cast<std::size_t>(e.nbytes));
  EXPECT_TRUE(IsOk(e.read(out)));
  return out;
}

// Every placed tensor's bytes in `loaded` equal the tensor read on its own.
void expect_loaded(const LoadPlan& plan, std::span<const std::byte> loaded) {
  ASSERT_EQ(loaded.size(), plan.size());
  for (const PlacedTensor& t : plan.tensors()) {
    ASSERT_FALSE(t.sharded);
    const auto expected = read_tensor(t.entry);
    ASSERT_LE(t.offset + t.nbytes, loaded.size()) << t.entry.name;
    if (expected.empty()) continue;  // memcmp of nothing: an empty vector's data() may be null
    EXPECT_EQ(0, std::memcmp(expected.data(), loaded.data() + t.offset, expected.size())) << t.entry.name;
  }
}

std::vector<Spec> mixed_specs(int count) {
  std::vector<Spec> specs;
  const TensorType types[] = {TensorType::F32, TensorType::BF16, TensorType::I64, TensorType::U8, TensorType::F16};
  for (int i = 0; i < count; ++i)
    specs.push_back({std::string("t").append(std::to_string(i)),
                     types[i % 5],
                     {static_cast<std::uint64_t>(1 + i % 7), static_cast<std::uint64_t>(3 + i * 37 % 1000)}});
  specs.push_back({"empty", TensorType::F32, {0, 4}});
  specs.push_back({"scalar", TensorType::F64, {}});
  return specs;
}

TEST(LoadPlan, AWholeFileKeepsItsLayoutAndAlignment) {
  TempDir dir;
  write_tensors(dir.file("a.safetensors"), mixed_specs(40));
  auto file = open_any(dir.file("a.safetensors"));
  auto plan = LoadPlan::make(*file);
  ASSERT_TRUE(IsOk(plan.status()));
  for (const PlacedTensor& t : plan->tensors()) {
    if (t.nbytes == 0) continue;
    EXPECT_EQ(t.offset % 4096, t.entry.offset % 4096) << t.entry.name;  // the file's layout, page for page
  }
  // Dense: one chunk (the default chunk is larger than the file), with at most a page of header.
  EXPECT_EQ(plan->chunks().size(), 1u);
  std::uint64_t tensor_bytes = 0;
  for (const TensorEntry& e : file->tensors()) tensor_bytes += e.nbytes;
  EXPECT_LE(plan->read_bytes(), tensor_bytes + 4096);
  EXPECT_EQ(plan->size() % 64, 0u);
}

TEST(LoadPlan, ASparseSubsetIsPackedAtSixtyFourBytes) {
  TempDir dir;
  write_tensors(dir.file("a.safetensors"), {{"big", TensorType::U8, {1 << 20}}, {"small", TensorType::F32, {3}}, {"b", TensorType::F32, {5}}});
  auto file = open_any(dir.file("a.safetensors"));
  std::vector<TensorEntry> subset = {*file->find("small"), *file->find("b")};
  auto plan = LoadPlan::make(subset);
  ASSERT_TRUE(IsOk(plan.status()));
  EXPECT_LT(plan->read_bytes(), 1024u);  // the 1 MiB tensor between them is not read
  for (const PlacedTensor& t : plan->tensors()) EXPECT_EQ(t.offset % 64, 0u);
  auto loaded = load_host(*plan);
  ASSERT_TRUE(IsOk(loaded.status()));
  expect_loaded(*plan, {loaded->buffer.get(), static_cast<std::size_t>(loaded->size)});
}

TEST(LoadPlan, AMisalignedTensorIsPackedSoThatItsElementsAreAligned) {
  // One F32 tensor at data offset 2 (after a 2-byte U8 tensor): legal in safetensors, unaligned.
  TempDir dir;
  std::string json = "{\"a\":" + swt::entry("U8", "2", 0, 2) + ",\"b\":" + swt::entry("F32", "3", 2, 14) + "}";
  while ((8 + json.size()) % 8 != 0) json += ' ';
  std::string bytes = swt::st_file(json, 0);
  for (int i = 0; i < 14; ++i) bytes.push_back(static_cast<char>(i * 7 + 1));
  swt::write_file_bytes(dir.file("m.safetensors"), bytes);
  auto file = open_any(dir.file("m.safetensors"));
  auto plan = LoadPlan::make(*file);
  ASSERT_TRUE(IsOk(plan.status()));
  for (const PlacedTensor& t : plan->tensors()) EXPECT_EQ(t.offset % 64, 0u) << t.entry.name;
  auto loaded = load_host(*plan);
  ASSERT_TRUE(IsOk(loaded.status()));
  expect_loaded(*plan, {loaded->buffer.get(), static_cast<std::size_t>(loaded->size)});
}

class HostLoadModes : public ::testing::TestWithParam<ReadMode> {};

TEST_P(HostLoadModes, EqualPerTensorReadsWithSmallChunksAndShards) {
  TempDir dir;
  write_tensors(dir.file("s1.safetensors"), mixed_specs(30), 1);
  write_tensors(dir.file("s2.safetensors"), {{"w", TensorType::F32, {300, 1000}}, {"v", TensorType::BF16, {77}}}, 2);
  auto f1 = open_any(dir.file("s1.safetensors"));
  auto f2 = open_any(dir.file("s2.safetensors"));
  std::vector<TensorEntry> entries(f1->tensors().begin(), f1->tensors().end());
  entries.insert(entries.end(), f2->tensors().begin(), f2->tensors().end());
  LoaderOptions options;
  options.read = GetParam();
  options.chunk_bytes = 8192;  // many chunks, boundaries inside tensors
  options.threads = 3;
  auto plan = LoadPlan::make(entries, options);
  ASSERT_TRUE(IsOk(plan.status()));
  EXPECT_GT(plan->chunks().size(), 100u);
  auto loaded = load_host(*plan);
  ASSERT_TRUE(IsOk(loaded.status()));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(loaded->buffer.get()) % 4096, 0u);
  expect_loaded(*plan, {loaded->buffer.get(), static_cast<std::size_t>(loaded->size)});
}

INSTANTIATE_TEST_SUITE_P(Modes, HostLoadModes, ::testing::Values(ReadMode::Auto, ReadMode::Pread, ReadMode::Direct));

TEST(HostLoad, LoadIntoChecksTheDestinationSize) {
  TempDir dir;
  write_tensors(dir.file("a.safetensors"), mixed_specs(3));
  auto file = open_any(dir.file("a.safetensors"));
  auto plan = LoadPlan::make(*file);
  ASSERT_TRUE(IsOk(plan.status()));
  std::vector<std::byte> small(static_cast<std::size_t>(plan->size() - 1));
  EXPECT_TRUE(IsKind(load_into(*plan, small), ErrorKind::InvalidArgument));
}

TEST(HostLoad, AMemoryLimitBelowThePlanFailsBeforeAllocating) {
  TempDir dir;
  write_tensors(dir.file("a.safetensors"), {{"w", TensorType::F32, {300, 1000}}});
  auto file = open_any(dir.file("a.safetensors"));
  LoaderOptions options;
  options.memory_limit = 4096;
  auto plan = LoadPlan::make(*file, options);
  ASSERT_TRUE(IsOk(plan.status()));
  auto loaded = load_host(*plan);
  ASSERT_TRUE(IsKind(loaded.status(), ErrorKind::ResourceLimit));
  EXPECT_NE(loaded.error().message().find(std::to_string(plan->size()) + " bytes of host memory"), std::string::npos) << loaded.error().message();
  EXPECT_NE(loaded.error().message().find("memory limit is 4096 bytes"), std::string::npos) << loaded.error().message();
  options.memory_limit = plan->size();  // exactly enough
  auto fits = LoadPlan::make(*file, options);
  ASSERT_TRUE(IsOk(fits.status()));
  auto ok = load_host(*fits);
  ASSERT_TRUE(IsOk(ok.status()));
  expect_loaded(*fits, {ok->buffer.get(), static_cast<std::size_t>(ok->size)});
}

TEST(HostLoad, AFileTruncatedBeforeTheLoadIsAnIoError) {
  TempDir dir;
  write_tensors(dir.file("a.safetensors"), {{"w", TensorType::F32, {1000, 100}}});
  auto file = open_any(dir.file("a.safetensors"));
  LoaderOptions options;
  options.read = ReadMode::Pread;
  auto plan = LoadPlan::make(*file, options);
  ASSERT_TRUE(IsOk(plan.status()));
  ASSERT_EQ(::truncate(dir.file("a.safetensors").c_str(), 1000), 0);
  auto loaded = load_host(*plan);
  EXPECT_TRUE(IsKind(loaded.status(), ErrorKind::IoError));
}

TEST(HostLoad, ACancelledLoadIsInterrupted) {
  TempDir dir;
  write_tensors(dir.file("a.safetensors"), {{"w", TensorType::F32, {1000, 100}}});
  auto file = open_any(dir.file("a.safetensors"));
  auto plan = LoadPlan::make(*file);
  ASSERT_TRUE(IsOk(plan.status()));
  request_cancel();
  auto loaded = load_host(*plan);
  clear_cancel();
  EXPECT_TRUE(IsKind(loaded.status(), ErrorKind::Interrupted));
}

// ---- tensor-parallel shards ------------------------------------------------------------------------

// Rows [first, last) along `dim` of a row-major tensor, computed from the whole tensor's bytes.
std::vector<std::byte> slice_along(std::span<const std::byte> whole, const std::vector<std::uint64_t>& shape, std::uint64_t elem, unsigned dim,
                                   std::uint64_t first, std::uint64_t last) {
  std::uint64_t outer = 1, inner = elem;
  for (unsigned d = 0; d < dim; ++d) outer *= shape[d];
  for (std::size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<std::byte> out;
  for (std::uint64_t o = 0; o < outer; ++o) {
    const std::byte* row = whole.data() + (o * shape[dim] + first) * inner;
    out.insert(out.end(), row, row + (last - first) * inner);
  }
  return out;
}

TEST(ShardedLoad, EachRankReadsItsArraySplitPartAlongAnyDimension) {
  TempDir dir;
  std::vector<Spec> specs = {
      {"w3", TensorType::F32, {5, 7, 9}}, {"w2", TensorType::BF16, {10, 6}}, {"bias", TensorType::F32, {2}}, {"scalar", TensorType::I64, {}}};
  write_tensors(dir.file("tp.safetensors"), specs);
  auto file = open_any(dir.file("tp.safetensors"));
  for (unsigned dim = 0; dim < 3; ++dim) {
    for (std::uint64_t world : {1u, 2u, 3u}) {
      std::map<std::string, std::vector<std::byte>> joined;
      std::map<std::string, std::vector<std::uint64_t>> offsets;
      for (std::uint64_t rank = 0; rank < world; ++rank) {
        LoaderOptions options;
        options.shard = TensorShard{dim, rank, world};
        options.chunk_bytes = 4096;
        auto plan = LoadPlan::make(*file, options);
        ASSERT_TRUE(IsOk(plan.status()));
        auto loaded = load_host(*plan);
        ASSERT_TRUE(IsOk(loaded.status()));
        for (const PlacedTensor& t : plan->tensors()) {
          const auto whole = read_tensor(t.entry);
          const std::vector<std::uint64_t> shape(t.entry.shape.begin(), t.entry.shape.end());
          const bool split = world > 1 && shape.size() > dim && shape[dim] >= world;
          EXPECT_EQ(t.sharded, split) << t.entry.name << " dim " << dim << " world " << world;
          const auto got = loaded->bytes_of(t);
          if (!split) {
            EXPECT_EQ(std::vector<std::byte>(got.begin(), got.end()), whole) << t.entry.name;
            continue;
          }
          const std::uint64_t elem = type_bits(t.entry.type) / 8;
          const std::uint64_t n = shape[dim], base = n / world, extra = n % world;
          const std::uint64_t first = rank * base + std::min(rank, extra), last = first + base + (rank < extra ? 1 : 0);
          EXPECT_EQ(t.shape[dim], last - first);
          EXPECT_EQ(std::vector<std::byte>(got.begin(), got.end()), slice_along(whole, shape, elem, dim, first, last))
              << t.entry.name << " dim " << dim << " rank " << rank << "/" << world;
          joined[std::string(t.entry.name)].insert(joined[std::string(t.entry.name)].end(), got.begin(), got.end());
        }
      }
      // Along dimension 0 the parts, concatenated, are the whole tensor.
      if (dim == 0 && world > 1) {
        for (const auto& [name, bytes] : joined) EXPECT_EQ(bytes, read_tensor(*file->find(name))) << name;
      }
    }
  }
}

TEST(ShardedLoad, ARankOutsideTheWorldIsRefused) {
  TempDir dir;
  write_tensors(dir.file("a.safetensors"), {{"w", TensorType::F32, {4, 4}}});
  auto file = open_any(dir.file("a.safetensors"));
  LoaderOptions options;
  options.shard = TensorShard{0, 2, 2};
  EXPECT_TRUE(IsKind(LoadPlan::make(*file, options).status(), ErrorKind::InvalidArgument));
  options.shard = TensorShard{0, 0, 0};
  EXPECT_TRUE(IsKind(LoadPlan::make(*file, options).status(), ErrorKind::InvalidArgument));
}

// ---- the device pipeline on the host device ------------------------------------------------------------

// A file of one 300x1000 F32 tensor and its plan, read in chunks of `chunk` bytes.
struct OneTensor {
  TempDir dir;
  std::unique_ptr<TensorFile> file;
  std::optional<LoadPlan> plan;
  explicit OneTensor(std::uint64_t chunk, ReadMode read = ReadMode::Auto) {
    write_tensors(dir.file("a.safetensors"), {{"w", TensorType::F32, {300, 1000}}});
    file = open_any(dir.file("a.safetensors"));
    LoaderOptions options;
    options.chunk_bytes = chunk;
    options.read = read;
    auto made = LoadPlan::make(*file, options);
    EXPECT_TRUE(IsOk(made.status()));
    if (made.is_ok()) plan = std::move(*made);
  }
  std::string path() const { return dir.file("a.safetensors"); }
};

class DevicePipeline : public ::testing::TestWithParam<DeviceStrategy> {};

TEST_P(DevicePipeline, EqualsTheHostLoadWithATightStagingRing) {
  TempDir dir;
  write_tensors(dir.file("a.safetensors"), mixed_specs(60));
  write_tensors(dir.file("b.safetensors"), {{"w", TensorType::F32, {500, 1000}}}, 3);
  auto fa = open_any(dir.file("a.safetensors"));
  auto fb = open_any(dir.file("b.safetensors"));
  std::vector<TensorEntry> entries(fa->tensors().begin(), fa->tensors().end());
  entries.insert(entries.end(), fb->tensors().begin(), fb->tensors().end());
  LoaderOptions options;
  options.chunk_bytes = 16384;
  options.threads = 4;
  auto plan = LoadPlan::make(entries, options);
  ASSERT_TRUE(IsOk(plan.status()));
  // Buffers smaller than a chunk (pieces), a ring of one buffer, of a few, and the defaults.
  for (std::uint64_t staging : {8192ull, 65536ull, 0ull}) {
    auto device = load::make_host_device({.streams = 3});
    DeviceLoadOptions dopt;
    dopt.strategy = GetParam();
    dopt.staging_bytes = staging;
    dopt.buffer_bytes = staging ? 8192 : 0;
    dopt.register_bytes = 32768;
    auto loaded = load_to_device(*plan, device, dopt);
    ASSERT_TRUE(IsOk(loaded.status())) << "staging " << staging;
    EXPECT_EQ(loaded->stats.staged_bytes + loaded->stats.registered_bytes, plan->read_bytes());
    if (GetParam() == DeviceStrategy::Staging) {
      EXPECT_EQ(loaded->stats.registered_bytes, 0u);
    }
    if (GetParam() == DeviceStrategy::Register) {
      EXPECT_GT(loaded->stats.registered_bytes, 0u);
    }
    expect_loaded(*plan, {static_cast<const std::byte*>(loaded->data()), static_cast<std::size_t>(loaded->size)});
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, DevicePipeline,
                         ::testing::Values(DeviceStrategy::Auto, DeviceStrategy::Staging, DeviceStrategy::Register, DeviceStrategy::Hybrid));

TEST(DevicePipelineShards, EachRankOnTheDeviceEqualsItsHostLoad) {
  TempDir dir;
  write_tensors(dir.file("tp.safetensors"), {{"w", TensorType::F32, {64, 96, 5}}, {"b", TensorType::F32, {7}}});
  auto file = open_any(dir.file("tp.safetensors"));
  for (unsigned dim = 0; dim < 3; ++dim) {
    for (std::uint64_t rank = 0; rank < 2; ++rank) {
      LoaderOptions options;
      options.shard = TensorShard{dim, rank, 2};
      options.chunk_bytes = 4096;
      auto plan = LoadPlan::make(*file, options);
      ASSERT_TRUE(IsOk(plan.status()));
      auto host = load_host(*plan);
      ASSERT_TRUE(IsOk(host.status()));
      auto device = load_to_device(*plan, load::make_host_device(), {.buffer_bytes = 1024});
      ASSERT_TRUE(IsOk(device.status()));
      for (const PlacedTensor& t : plan->tensors()) {
        const auto want = host->bytes_of(t);
        if (want.empty()) continue;
        EXPECT_EQ(0, std::memcmp(want.data(), static_cast<const std::byte*>(device->data()) + t.offset, want.size()))
            << t.entry.name << " dim " << dim << " rank " << rank;
      }
    }
  }
}

TEST(DevicePipelineFailures, ADeviceThatCannotRegisterGetsEverythingStaged) {
  OneTensor one(65536);
  ASSERT_TRUE(one.plan);
  const auto& plan = one.plan;
  auto device = load::make_host_device({.can_register = false});
  auto loaded = load_to_device(*plan, device, {.strategy = DeviceStrategy::Register});
  ASSERT_TRUE(IsOk(loaded.status()));
  EXPECT_EQ(loaded->stats.registered_bytes, 0u);
  expect_loaded(*plan, {static_cast<const std::byte*>(loaded->data()), static_cast<std::size_t>(loaded->size)});
}

// ---- the pinned staging budget ----

// A plan of whole-file ranges and tensor-parallel slices (which stagers read in one piece), so that
// every strategy stages something, GpuDirect included.
struct MixedPlan {
  TempDir dir;
  std::unique_ptr<TensorFile> file;
  std::optional<LoadPlan> plan;
  MixedPlan() {
    write_tensors(dir.file("m.safetensors"), {{"w", TensorType::F32, {64, 96}}, {"v", TensorType::F32, {300, 100}}});
    file = open_any(dir.file("m.safetensors"));
    LoaderOptions options;
    options.shard = TensorShard{1, 0, 2};  // slices along dimension 1: 64 rows of 48 floats each
    options.chunk_bytes = 4096;            // shard chunks of 21 rows (4032 bytes)
    options.threads = 6;
    auto made = LoadPlan::make(*file, options);
    EXPECT_TRUE(IsOk(made.status()));
    if (made.is_ok()) plan = std::move(*made);
  }
};

TEST(PinnedBudget, EveryStrategyStaysWithinTheStagingBudget) {
  MixedPlan mixed;
  OneTensor one(16384);
  ASSERT_TRUE(mixed.plan && one.plan);
  for (const LoadPlan* plan : {&*one.plan, &*mixed.plan}) {
    const auto host = load_host(*plan);
    ASSERT_TRUE(IsOk(host.status()));
    for (DeviceStrategy strategy : {DeviceStrategy::Staging, DeviceStrategy::Register, DeviceStrategy::Hybrid, DeviceStrategy::GpuDirect}) {
      // Budgets below one buffer per stager plus the fallback, of exactly that, of a few, and the default.
      for (std::uint64_t staging : {8192ull, 12288ull, 40960ull, 0ull}) {
        auto device = load::make_host_device({.file_read = FileReadPath::Emulated});
        // A warm cache of buffers of another size, which the load must not keep beside its own.
        ASSERT_TRUE(IsOk(load_to_device(*plan, device, {.strategy = strategy, .buffer_bytes = 20480}).status()));
        load::reset_host_pinned_peak();
        const std::uint64_t before = load::host_pinned_bytes_in_use();
        const DeviceLoadOptions dopt{.strategy = strategy, .buffer_bytes = 16384, .staging_bytes = staging};
        auto loaded = load_to_device(*plan, device, dopt);
        ASSERT_TRUE(IsOk(loaded.status())) << strategy_name(strategy) << " staging " << staging;
        const std::uint64_t budget = staging ? staging : 2ull * 6 * 16384;
        EXPECT_LE(load::host_pinned_peak(), std::max(before, budget)) << strategy_name(strategy) << " staging " << staging;
        EXPECT_LE(load::host_pinned_bytes_in_use(), budget) << strategy_name(strategy) << " staging " << staging;
        for (const PlacedTensor& t : plan->tensors()) {
          const auto want = host->bytes_of(t);
          EXPECT_EQ(0, std::memcmp(want.data(), static_cast<const std::byte*>(loaded->data()) + t.offset, want.size()))
              << t.entry.name << " " << strategy_name(strategy) << " staging " << staging;
        }
      }
    }
  }
}

TEST(PinnedBudget, AStagingBudgetBelowOneBufferFailsBeforeAllocating) {
  MixedPlan mixed;
  ASSERT_TRUE(mixed.plan);
  const std::uint64_t device_before = load::host_device_bytes_in_use();
  const std::uint64_t pinned_before = load::host_pinned_bytes_in_use();
  auto device = load::make_host_device({.file_read = FileReadPath::Emulated});
  for (DeviceStrategy strategy : {DeviceStrategy::Staging, DeviceStrategy::Register, DeviceStrategy::Hybrid, DeviceStrategy::GpuDirect}) {
    // Below 4 KiB: not even one buffer. 4 KiB: one buffer, too small for Hybrid's stager and fallback.
    for (std::uint64_t staging : {2048ull, 4096ull}) {
      load::reset_host_pinned_peak();
      auto loaded = load_to_device(*mixed.plan, device, {.strategy = strategy, .staging_bytes = staging});
      if (staging == 4096 && strategy != DeviceStrategy::Hybrid) {
        ASSERT_TRUE(IsOk(loaded.status())) << strategy_name(strategy);
        EXPECT_LE(load::host_pinned_peak(), pinned_before + staging);
        continue;
      }
      ASSERT_TRUE(IsKind(loaded.status(), ErrorKind::ResourceLimit)) << strategy_name(strategy) << " staging " << staging;
      EXPECT_NE(loaded.error().message().find("pinned staging memory"), std::string::npos) << loaded.error().message();
      EXPECT_EQ(load::host_device_bytes_in_use(), device_before);
      EXPECT_LE(load::host_pinned_peak(), pinned_before + 4096);  // only what an earlier iteration cached
    }
  }
}

// An empty plan has nothing to stage, open or read: it loads under any budget and strategy, as it did
// before the budget was checked up front.
TEST(PinnedBudget, AnEmptyPlanNeedsNoStaging) {
  auto plan = LoadPlan::make(std::span<const TensorEntry>{});
  ASSERT_TRUE(IsOk(plan.status()));
  auto device = load::make_host_device({.file_read = FileReadPath::Emulated});
  for (DeviceStrategy strategy : {DeviceStrategy::Staging, DeviceStrategy::Register, DeviceStrategy::Hybrid, DeviceStrategy::GpuDirect}) {
    auto loaded = load_to_device(*plan, device, {.strategy = strategy, .staging_bytes = 1024});
    EXPECT_TRUE(IsOk(loaded.status())) << strategy_name(strategy) << ": " << loaded.status().to_string();
  }
}

TEST(DevicePipeline, DirectReadsGoIntoTheStagingBuffersWithODirect) {
  OneTensor one(65536, ReadMode::Direct);
  ASSERT_TRUE(one.plan);
  const int probe = ::open(one.path().c_str(), O_RDONLY | O_DIRECT);
  if (probe < 0) GTEST_SKIP() << "the test folder's file system refuses O_DIRECT";
  ::close(probe);
  // The host device's pinned buffers are page-aligned like CUDA's, so whole blocks are read directly
  // (an unaligned buffer would send every byte through pread); only the file's last partial block is not.
  for (std::uint64_t buffer : {16384ull, 0ull}) {
    auto loaded = load_to_device(*one.plan, load::make_host_device(), {.strategy = DeviceStrategy::Staging, .buffer_bytes = buffer});
    ASSERT_TRUE(IsOk(loaded.status()));
    EXPECT_TRUE(loaded->stats.direct);
    EXPECT_GT(loaded->stats.direct_bytes + 4096, one.plan->read_bytes()) << "buffer " << buffer;
    EXPECT_LE(loaded->stats.direct_bytes, one.plan->read_bytes());
    expect_loaded(*one.plan, {static_cast<const std::byte*>(loaded->data()), static_cast<std::size_t>(loaded->size)});
  }
}

TEST(DevicePipelineFailures, AFailedCopyFreesEverythingTheLoadTook) {
  OneTensor one(16384);
  ASSERT_TRUE(one.plan);
  const auto& plan = one.plan;
  const std::uint64_t device_before = load::host_device_bytes_in_use();
  const std::uint64_t pinned_before = load::host_pinned_bytes_in_use();
  for (DeviceStrategy strategy : {DeviceStrategy::Staging, DeviceStrategy::Hybrid}) {
    {
      auto device = load::make_host_device({.fail_copy_at = 5});
      auto loaded = load_to_device(*plan, device, {.strategy = strategy, .register_bytes = 16384});
      EXPECT_TRUE(IsKind(loaded.status(), ErrorKind::DeviceError));
      EXPECT_EQ(load::host_device_bytes_in_use(), device_before);  // the allocation went with the failure
    }
    EXPECT_EQ(load::host_pinned_bytes_in_use(), pinned_before);  // the cached staging went with the device
  }
}

TEST(DevicePipelineFailures, APlanLargerThanTheDeviceFailsBeforeAllocating) {
  OneTensor one(0);
  ASSERT_TRUE(one.plan);
  const auto& plan = one.plan;
  const std::uint64_t before = load::host_device_bytes_in_use();
  auto device = load::make_host_device({.memory = 1 << 20});
  auto loaded = load_to_device(*plan, device);
  EXPECT_TRUE(IsKind(loaded.status(), ErrorKind::ResourceLimit));
  EXPECT_EQ(load::host_device_bytes_in_use(), before);
  auto limited = load_to_device(*plan, load::make_host_device(), {.device_memory_limit = 4096});
  EXPECT_TRUE(IsKind(limited.status(), ErrorKind::ResourceLimit));
}

TEST(DevicePipelineFailures, ATruncatedFileIsAnIoErrorAndNothingLeaks) {
  OneTensor one(16384, ReadMode::Pread);
  ASSERT_TRUE(one.plan);
  const auto& plan = one.plan;
  ASSERT_EQ(::truncate(one.path().c_str(), 500000), 0);
  const std::uint64_t before = load::host_device_bytes_in_use();
  auto loaded = load_to_device(*plan, load::make_host_device(), {.strategy = DeviceStrategy::Staging});
  EXPECT_TRUE(IsKind(loaded.status(), ErrorKind::IoError));
  EXPECT_EQ(load::host_device_bytes_in_use(), before);
}

TEST(DevicePipelineFailures, ACallerBufferOfTheWrongSizeIsRefused) {
  TempDir dir;
  write_tensors(dir.file("a.safetensors"), {{"w", TensorType::F32, {3}}});
  auto file = open_any(dir.file("a.safetensors"));
  auto plan = LoadPlan::make(*file);
  ASSERT_TRUE(IsOk(plan.status()));
  auto device = load::make_host_device();
  std::vector<std::byte> dst(static_cast<std::size_t>(plan->size() + 64));
  EXPECT_TRUE(IsKind(load_to_device(*plan, *device, dst.data(), dst.size()).status(), ErrorKind::InvalidArgument));
  auto ok = load_to_device(*plan, *device, dst.data(), plan->size());
  ASSERT_TRUE(IsOk(ok.status()));
  expect_loaded(*plan, {dst.data(), static_cast<std::size_t>(plan->size())});
}

TEST(Devices, SpellingsAndAMissingRuntime) {
  EXPECT_TRUE(IsKind(Device::open("gpu").status(), ErrorKind::InvalidArgument));
  EXPECT_TRUE(IsKind(Device::open("cuda:").status(), ErrorKind::InvalidArgument));
  EXPECT_TRUE(IsKind(Device::open("cuda:-1").status(), ErrorKind::InvalidArgument));
  EXPECT_TRUE(IsKind(Device::open("cuda:1x").status(), ErrorKind::InvalidArgument));
  auto host = Device::open("host");
  ASSERT_TRUE(IsOk(host.status()));
  EXPECT_EQ((*host)->name(), "host");
  // Without a GPU runtime (CI) "cuda" is a DeviceError that says what is missing; with one, a device
  // number beyond the count is.
  auto cuda = Device::open("cuda");
  if (!cuda.is_ok()) {
    EXPECT_TRUE(IsKind(cuda.status(), ErrorKind::DeviceError));
  } else {
    EXPECT_TRUE(IsKind(Device::open("cuda:999").status(), ErrorKind::DeviceError));
  }
}

// ---- GpuDirect: the device reads files into its memory itself (cuFile on a GPU; pread on the host
// device, which stands in for it here) ----

TEST(GpuDirect, FileRangesAreReadByTheDeviceAndSliceChunksAreStaged) {
  TempDir dir;
  write_tensors(dir.file("a.safetensors"), mixed_specs(40));
  auto file = open_any(dir.file("a.safetensors"));
  for (const FileReadPath path : {FileReadPath::Emulated, FileReadPath::Dma}) {
    LoaderOptions options;
    options.chunk_bytes = 16384;
    options.threads = 3;
    auto plan = LoadPlan::make(*file, options);
    ASSERT_TRUE(IsOk(plan.status()));
    // Pieces smaller than a chunk, and the default piece.
    for (std::uint64_t piece : {4096ull, 0ull}) {
      auto loaded =
          load_to_device(*plan, load::make_host_device({.file_read = path}), {.strategy = DeviceStrategy::GpuDirect, .buffer_bytes = piece});
      ASSERT_TRUE(IsOk(loaded.status()));
      EXPECT_EQ(loaded->stats.strategy, DeviceStrategy::GpuDirect);
      EXPECT_EQ(loaded->stats.file_read_bytes, plan->read_bytes());
      EXPECT_EQ(loaded->stats.staged_bytes, 0u);
      expect_loaded(*plan, {static_cast<const std::byte*>(loaded->data()), static_cast<std::size_t>(loaded->size)});
    }
  }
  // A shard along dimension 1 is read as slices, which the device cannot read from a file: staged.
  write_tensors(dir.file("tp.safetensors"), {{"w", TensorType::F32, {64, 96}}, {"b", TensorType::F32, {4096}}});
  auto tp = open_any(dir.file("tp.safetensors"));
  LoaderOptions options;
  options.shard = TensorShard{1, 1, 2};
  auto plan = LoadPlan::make(*tp, options);
  ASSERT_TRUE(IsOk(plan.status()));
  auto host = load_host(*plan);
  ASSERT_TRUE(IsOk(host.status()));
  auto loaded = load_to_device(*plan, load::make_host_device({.file_read = FileReadPath::Emulated}), {.strategy = DeviceStrategy::GpuDirect});
  ASSERT_TRUE(IsOk(loaded.status()));
  EXPECT_GT(loaded->stats.staged_bytes, 0u);
  EXPECT_EQ(loaded->stats.staged_bytes + loaded->stats.file_read_bytes, plan->read_bytes());
  for (const PlacedTensor& t : plan->tensors()) {
    const auto want = host->bytes_of(t);
    ASSERT_FALSE(want.empty());
    EXPECT_EQ(0, std::memcmp(want.data(), static_cast<const std::byte*>(loaded->data()) + t.offset, want.size())) << t.entry.name;
  }
}

TEST(GpuDirect, AutoChoosesItOnlyForFilesReadFromTheDiskByDma) {
  OneTensor direct(65536, ReadMode::Direct);
  OneTensor cached(65536, ReadMode::Pread);
  ASSERT_TRUE(direct.plan && cached.plan);
  for (const FileReadPath path : {FileReadPath::None, FileReadPath::Emulated, FileReadPath::Dma}) {
    for (const LoadPlan* plan : {&*direct.plan, &*cached.plan}) {
      auto loaded = load_to_device(*plan, load::make_host_device({.file_read = path}));
      ASSERT_TRUE(IsOk(loaded.status()));
      // O_DIRECT may be refused by the file system under the test's folder: then the file is read
      // through the page cache, and staged.
      const bool expect_direct = loaded->stats.direct && path == FileReadPath::Dma;
      EXPECT_EQ(loaded->stats.strategy, expect_direct ? DeviceStrategy::GpuDirect : DeviceStrategy::Staging)
          << file_read_path_name(path) << (plan == &*direct.plan ? " direct" : " pread");
      EXPECT_EQ(loaded->stats.file_read_bytes, expect_direct ? plan->read_bytes() : 0u);
      expect_loaded(*plan, {static_cast<const std::byte*>(loaded->data()), static_cast<std::size_t>(loaded->size)});
    }
  }
}

TEST(GpuDirect, ADeviceThatCannotReadFilesRefusesItAndKeepsNothing) {
  OneTensor one(65536);
  ASSERT_TRUE(one.plan);
  const std::uint64_t before = load::host_device_bytes_in_use();
  auto loaded = load_to_device(*one.plan, load::make_host_device(), {.strategy = DeviceStrategy::GpuDirect});
  EXPECT_TRUE(IsKind(loaded.status(), ErrorKind::NotSupported));
  EXPECT_EQ(load::host_device_bytes_in_use(), before);
}

TEST(GpuDirect, AFailedOrShortReadNamesTheFileAndFreesEverything) {
  OneTensor one(16384, ReadMode::Pread);
  ASSERT_TRUE(one.plan);
  const std::uint64_t device_before = load::host_device_bytes_in_use();
  const std::uint64_t pinned_before = load::host_pinned_bytes_in_use();
  {
    auto loaded = load_to_device(*one.plan, load::make_host_device({.file_read = FileReadPath::Dma, .fail_read_at = 3}),
                                 {.strategy = DeviceStrategy::GpuDirect});
    ASSERT_TRUE(IsKind(loaded.status(), ErrorKind::DeviceError));
    EXPECT_EQ(loaded.error().context().file, one.path());
    EXPECT_EQ(load::host_device_bytes_in_use(), device_before);
  }
  ASSERT_EQ(::truncate(one.path().c_str(), 500000), 0);
  {
    auto loaded = load_to_device(*one.plan, load::make_host_device({.file_read = FileReadPath::Emulated}), {.strategy = DeviceStrategy::GpuDirect});
    EXPECT_TRUE(IsKind(loaded.status(), ErrorKind::IoError));
    EXPECT_EQ(load::host_device_bytes_in_use(), device_before);
  }
  EXPECT_EQ(load::host_pinned_bytes_in_use(), pinned_before);
}

TEST(Devices, StrategyNamesRoundTrip) {
  for (DeviceStrategy s :
       {DeviceStrategy::Auto, DeviceStrategy::Staging, DeviceStrategy::Register, DeviceStrategy::Hybrid, DeviceStrategy::GpuDirect}) {
    auto parsed = parse_strategy(strategy_name(s));
    ASSERT_TRUE(IsOk(parsed.status()));
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_TRUE(IsKind(parse_strategy("cufile").status(), ErrorKind::InvalidArgument));
}

}  // namespace
