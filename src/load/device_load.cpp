// Loading a plan into device memory (safeweights/device.h): stagers read chunks into pinned buffers and
// queue copies; a registering thread page-locks chunks of mapped files in place and queues copies
// straight from them. Both take chunks from one queue, from opposite ends.
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unistd.h>
#include <vector>

#include "core/parallel.h"
#include "core/status_macros.h"
#include "load/chunk_reader.h"
#include "safeweights/cancel.h"
#include "safeweights/device.h"

namespace safeweights {
namespace {

constexpr std::uint64_t kMaxStaging = 1ull << 30;
constexpr std::uint64_t kRegisterRun = 256ull << 20;
constexpr std::uint64_t kBufferBytes = 4ull << 20;

// Whether chunk b starts where chunk a ends, in the same file and in the destination.
bool continues(const LoadChunk& a, const LoadChunk& b) {
  return a.tensor < 0 && b.tensor < 0 && a.source == b.source && a.offset + a.length == b.offset && a.dst + a.length == b.dst;
}

// The plan's chunks, handed out from the front (stagers) and from the back (the registering thread).
class ChunkQueue {
 public:
  explicit ChunkQueue(std::size_t count) : back_(count) {}
  std::optional<std::size_t> front() {
    std::lock_guard<std::mutex> lock(mu_);
    if (front_ >= back_ || stop_) return std::nullopt;
    return front_++;
  }
  // The chunks [first, last) at the back that continue one another in their file and in the
  // destination, at most max_bytes of them (at least one chunk).
  std::optional<std::pair<std::size_t, std::size_t>> back_run(std::span<const LoadChunk> chunks, std::uint64_t max_bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (front_ >= back_ || stop_) return std::nullopt;
    const std::size_t last = back_;
    std::size_t first = back_ - 1;
    std::uint64_t bytes = chunks[first].length;
    while (first > front_ && bytes + chunks[first - 1].length <= max_bytes && continues(chunks[first - 1], chunks[first])) {
      --first;
      bytes += chunks[first].length;
    }
    back_ = first;
    return std::make_pair(first, last);
  }
  // After a failure: nobody starts another chunk.
  void stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }

 private:
  std::mutex mu_;
  std::size_t front_ = 0, back_;
  bool stop_ = false;
};

// One staging buffer and the event that says when its last copy finished.
struct Slot {
  std::byte* buffer = nullptr;
  void* event = nullptr;
  bool in_flight = false;
};

// A thread's staging: its pinned buffers (taken from the device's cache, given back by finish()),
// used in turn. A range chunk goes through in pieces of one buffer; a shard chunk in one piece (the
// buffers are sized for the largest).
class Stager {
 public:
  Stager(Device& device, const load::ChunkReader& reader, std::byte* dst, std::size_t buffer_bytes, std::size_t slots, unsigned stream)
      : device_(device), reader_(reader), dst_(dst), buffer_bytes_(buffer_bytes), slots_(slots), stream_(stream) {}

  Status stage(const LoadChunk& chunk) {
    if (chunk.tensor >= 0) return stage_piece(chunk);
    for (std::uint64_t at = 0; at < chunk.length; at += buffer_bytes_) {
      LoadChunk piece = chunk;
      piece.offset += at;
      piece.dst += at;
      piece.length = std::min<std::uint64_t>(buffer_bytes_, chunk.length - at);
      SW_RETURN_IF_ERROR(stage_piece(piece));
    }
    return Status::ok();
  }

  // Waits for this stager's copies, then gives its buffers back: `status` or the first new error.
  Status finish(Status status) {
    for (Slot& s : slots_) {
      if (s.in_flight) {
        Status w = device_.wait(s.event);
        if (status.is_ok()) status = std::move(w);
      }
      if (s.event != nullptr) device_.destroy_event(s.event);
      if (s.buffer != nullptr) device_.return_staging(s.buffer, buffer_bytes_);
      s = Slot{};
    }
    return status;
  }

 private:
  Status stage_piece(const LoadChunk& piece) {
    Slot& slot = slots_[turn_++ % slots_.size()];
    if (slot.buffer == nullptr) {
      SW_ASSIGN_OR_RETURN(slot.buffer, device_.take_staging(buffer_bytes_));
      SW_ASSIGN_OR_RETURN(slot.event, device_.create_event());
    }
    if (slot.in_flight) {
      SW_RETURN_IF_ERROR(device_.wait(slot.event));
      slot.in_flight = false;
    }
    const auto length = static_cast<std::size_t>(piece.length);
    SW_RETURN_IF_ERROR(reader_.read(piece, {slot.buffer, length}));
    SW_RETURN_IF_ERROR(device_.copy_async(dst_ + piece.dst, slot.buffer, length, stream_));
    SW_RETURN_IF_ERROR(device_.record(slot.event, stream_));
    slot.in_flight = true;
    return Status::ok();
  }

  Device& device_;
  const load::ChunkReader& reader_;
  std::byte* dst_;
  std::size_t buffer_bytes_;
  std::vector<Slot> slots_;
  unsigned stream_;
  std::size_t turn_ = 0;
};

class DeviceLoader {
 public:
  DeviceLoader(const LoadPlan& plan, Device& device, const DeviceLoadOptions& options)
      : plan_(plan), device_(device), options_(options), reader_(plan), queue_(plan.chunks().size()) {}

  ~DeviceLoader() {
    for (const auto& [source, file] : files_) device_.close_file(file.handle);
  }

  // Decides the strategy and fits the staging within its budget; allocates nothing.
  Status prepare() {
    if (plan_.chunks().empty()) return Status::ok();  // nothing to read, stage or open: run() returns at once
    threads_ = std::max(1u, load::loader_threads(plan_.options()));
    stats_.direct = reader_.direct();
    stats_.strategy = resolve_strategy();
    if (stats_.strategy == DeviceStrategy::GpuDirect) SW_RETURN_IF_ERROR(open_files());
    const bool registering = stats_.strategy == DeviceStrategy::Register || stats_.strategy == DeviceStrategy::Hybrid;
    SW_ASSIGN_OR_RETURN(staging_, fit_staging(threads_, registering, stats_.strategy == DeviceStrategy::GpuDirect));
    return Status::ok();
  }

  // Loads into dst, after prepare().
  Result<DeviceLoadStats> run(std::byte* dst) {
    dst_ = dst;
    if (plan_.chunks().empty()) return DeviceLoadStats{};
    const bool file_reads = stats_.strategy == DeviceStrategy::GpuDirect;
    const bool registering = stats_.strategy == DeviceStrategy::Register || stats_.strategy == DeviceStrategy::Hybrid;
    buffer_bytes_ = staging_.buffer_bytes;
    slots_per_stager_ = staging_.slots;
    // The cache keeps only what this load may use: with it, the pinned total stays within the budget.
    device_.trim_staging(buffer_bytes_, staging_.buffers);
    const unsigned workers = file_reads                                    ? (staged_chunks_ ? staging_.stagers : threads_)
                             : stats_.strategy == DeviceStrategy::Register ? 1
                                                                           : staging_.stagers + (registering ? 1 : 0);

    Status status = parallel_for(workers, workers, [&](std::size_t w) {
      Status s = file_reads              ? read_file_chunks(static_cast<unsigned>(w))
                 : registering && w == 0 ? register_chunks()
                                         : stage_chunks(static_cast<unsigned>(w));
      if (!s.is_ok()) queue_.stop();
      return s;
    });
    // Whatever happened, no copy may still read a buffer or a page once we return.
    Status synced = device_.synchronize();
    Status unregistered = unregister_all();
    SW_RETURN_IF_ERROR(status);
    SW_RETURN_IF_ERROR(synced);
    SW_RETURN_IF_ERROR(unregistered);
    stats_.registered_bytes = registered_bytes_.load();
    stats_.file_read_bytes = file_read_bytes_.load();
    stats_.register_seconds = register_seconds_;
    stats_.direct_bytes = reader_.direct_bytes();
    stats_.staged_bytes = plan_.read_bytes() - stats_.registered_bytes - stats_.file_read_bytes;
    return stats_;
  }

 private:
  struct DeviceFile {
    void* handle;
    std::uint64_t offset;  // of the source's first byte in the file
  };

  struct Staging {
    std::size_t buffer_bytes;
    std::size_t slots;    // buffers per stager
    unsigned stagers;     // threads with a ring of buffers (0: only the registering thread's fallback)
    std::size_t buffers;  // the most this load holds at once
  };

  // The staging ring within the pinned budget: the pinned bytes this load may hold at once are
  // (stagers x slots + the registering thread's fallback) x buffer_bytes. Prefers two buffers per
  // stager (one filling while the other's copy runs) and as many stagers as threads; then fewer
  // stagers, one buffer each, and smaller buffers. ResourceLimit when the smallest ring does not fit.
  Result<Staging> fit_staging(unsigned threads, bool registering, bool file_reads) {
    // Staging buffers small enough to stay in the CPU's caches until the copy engine reads them
    // (measured: 4 MiB beats 1-2 MiB, which pay per-copy costs, and 8-64 MiB, which go through DRAM
    // twice); large enough for the largest shard chunk, which is read in one piece.
    // The same size serves O_DIRECT reads from the disk best too (measured: 4 MiB pieces from 16
    // threads beat 16 and 64 MiB ones, and dd's 16 MiB sequential reads).
    std::uint64_t smallest = load::kDirectAlign;
    for (const LoadChunk& c : plan_.chunks()) {
      if (c.tensor >= 0) smallest = std::max(smallest, c.length);
      // GpuDirect stages what the device does not read from a file: shard slices, other sources.
      if (file_reads && (c.tensor >= 0 || !files_.contains(c.source))) staged_chunks_ = true;
    }
    std::uint64_t buffer = std::max(smallest, options_.buffer_bytes ? options_.buffer_bytes : kBufferBytes);
    const bool stagers_needed = !file_reads ? stats_.strategy != DeviceStrategy::Register : staged_chunks_;
    const std::uint64_t fallback = registering ? 1 : 0;
    const std::uint64_t least = (stagers_needed ? 1 : 0) + fallback;  // buffers of the smallest ring
    // Without a budget from the caller, the default never refuses a load: a shard chunk larger than
    // the default's share still gets the smallest ring that holds it.
    const std::uint64_t budget =
        options_.staging_bytes ? options_.staging_bytes : std::max(std::min<std::uint64_t>(kMaxStaging, 2ull * threads * buffer), least * smallest);
    if (least == 0) return Staging{static_cast<std::size_t>(buffer), 2, threads, 0};  // nothing is staged
    if (budget / buffer < least) buffer = budget / least / load::kDirectAlign * load::kDirectAlign;
    if (buffer < smallest)
      return Error(ErrorKind::ResourceLimit, "loading to the device needs " + std::to_string(least * smallest) + " bytes of pinned staging memory (" +
                                                 std::to_string(least) + " buffer(s) of " + std::to_string(smallest) +
                                                 " bytes, the largest shard chunk or 4 KiB); the staging budget is " + std::to_string(budget) +
                                                 " bytes")
          .with_file(device_.name());
    const std::uint64_t free = budget / buffer - fallback;  // buffers left for stagers
    const auto size = static_cast<std::size_t>(buffer);
    if (!stagers_needed) return Staging{size, 1, 0, 1};
    if (free < 2) return Staging{size, 1, 1, static_cast<std::size_t>(1 + fallback)};
    const auto stagers = static_cast<unsigned>(std::min<std::uint64_t>(threads, free / 2));
    return Staging{size, 2, stagers, static_cast<std::size_t>(2 * stagers + fallback)};
  }

  DeviceStrategy resolve_strategy() {
    DeviceStrategy s = options_.strategy;
    if (s != DeviceStrategy::Auto) return s;
    // Measured on the H100 machine (docs/PERFORMANCE.md): staging from the page cache beats page
    // registration, whose cost is serial in the driver, and beats cuFile's compatibility mode (its
    // own bounce buffers); cold reads stage through O_DIRECT. Files read from the disk go to the
    // device by DMA where the storage can do it (nvidia-fs): the bytes never cross host memory.
    if (reader_.direct() && device_.file_read_path() == FileReadPath::Dma) return DeviceStrategy::GpuDirect;
    return DeviceStrategy::Staging;
  }

  // A device file handle for each local-file source of the plan's ranges. A device that cannot read
  // files at all fails the load (GpuDirect was asked for); a file it refuses is staged.
  Status open_files() {
    if (device_.file_read_path() == FileReadPath::None) {
      auto refused = device_.open_file(-1);  // the device says why
      return refused.status();
    }
    for (const LoadChunk& c : plan_.chunks()) {
      if (c.tensor >= 0 || files_.contains(c.source)) continue;
      const auto region = reader_.file_of(c.source);
      if (!region) continue;
      auto handle = device_.open_file(region->fd);
      if (handle.is_ok()) {
        files_.emplace(c.source, DeviceFile{*handle, region->offset});
      } else if (handle.error().kind() != ErrorKind::NotSupported) {
        return error_of(handle).with_file(c.source->name());
      }
    }
    return Status::ok();
  }

  // GpuDirect: file ranges are read by the device straight into their place, in pieces; other chunks
  // (shard slices, memory, HTTP, refused files) go through this worker's stager.
  Status read_file_chunks(unsigned worker) {
    // Measured on the H100 machine with cuFile's compatibility mode: 4 MiB reads from 16 threads move
    // 50 GB/s from the page cache, 16 and 64 MiB ones 41-43.
    const std::uint64_t piece = options_.buffer_bytes ? options_.buffer_bytes : kBufferBytes;
    Stager stager(device_, reader_, dst_, buffer_bytes_, slots_per_stager_, worker % device_.streams());
    Status status = [&]() -> Status {
      while (const auto index = queue_.front()) {
        SW_RETURN_IF_ERROR(check_cancelled());
        const LoadChunk& c = plan_.chunks()[*index];
        const auto file = c.tensor < 0 ? files_.find(c.source) : files_.end();
        if (file == files_.end()) {
          SW_RETURN_IF_ERROR(stager.stage(c));
          continue;
        }
        for (std::uint64_t at = 0; at < c.length; at += piece) {
          const std::uint64_t n = std::min(piece, c.length - at);
          Status s = device_.read_file(file->second.handle, file->second.offset + c.offset + at, dst_ + c.dst + at, static_cast<std::size_t>(n));
          if (!s.is_ok()) return error_of(s).with_file(c.source->name()).with_offset(c.offset + at);
          file_read_bytes_ += n;
        }
      }
      return Status::ok();
    }();
    return stager.finish(std::move(status));
  }

  Status stage_chunks(unsigned worker) {
    Stager stager(device_, reader_, dst_, buffer_bytes_, slots_per_stager_, worker % device_.streams());
    Status status = [&]() -> Status {
      while (const auto index = queue_.front()) {
        SW_RETURN_IF_ERROR(check_cancelled());
        SW_RETURN_IF_ERROR(stager.stage(plan_.chunks()[*index]));
      }
      return Status::ok();
    }();
    return stager.finish(std::move(status));
  }

  // Page-locks runs of whole-page chunks of mapped files and copies from them; a run that cannot be
  // registered (not mapped, not page-aligned, read with O_DIRECT, or refused by the device) goes
  // through one staging buffer of this thread's own.
  Status register_chunks() {
    const unsigned stream = device_.streams() - 1;
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::uint64_t run_bytes = options_.register_bytes ? options_.register_bytes : kRegisterRun;
    const auto chunks = plan_.chunks();
    Stager fallback(device_, reader_, dst_, buffer_bytes_, 1, stream);
    Status status = [&]() -> Status {
      bool refused = false;
      for (;;) {
        const auto run = queue_.back_run(chunks, run_bytes);
        if (!run) return Status::ok();
        SW_RETURN_IF_ERROR(check_cancelled());
        const LoadChunk& first = chunks[run->first];
        const LoadChunk& last = chunks[run->second - 1];
        const std::uint64_t length = last.offset + last.length - first.offset;
        const std::byte* base = first.tensor < 0 && !reader_.direct() ? first.source->mapped() : nullptr;
        const auto file = first.source->file_region();
        if (!refused && base != nullptr && ((file ? file->offset : 0) + first.offset) % page == 0) {
          const std::byte* start = base + first.offset;
          // The last page may pass the end of the source: it is still mapped (the mapping covers the
          // whole file, rounded up to a page).
          const std::uint64_t span = (length + page - 1) / page * page;
          const auto t0 = std::chrono::steady_clock::now();
          Status r = device_.register_host(start, static_cast<std::size_t>(span));
          register_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (r.is_ok()) {
            remember(start);
            SW_RETURN_IF_ERROR(device_.copy_async(dst_ + first.dst, start, static_cast<std::size_t>(length), stream));
            registered_bytes_ += length;
            continue;
          }
          if (r.error().kind() != ErrorKind::NotSupported) return r;
          refused = true;  // stage the rest
        }
        for (std::size_t i = run->first; i < run->second; ++i) SW_RETURN_IF_ERROR(fallback.stage(chunks[i]));
      }
    }();
    return fallback.finish(std::move(status));
  }

  void remember(const std::byte* registered) {
    std::lock_guard<std::mutex> lock(registered_mu_);
    registered_.push_back(registered);
  }

  Status unregister_all() {
    const auto t0 = std::chrono::steady_clock::now();
    Status status;
    for (const std::byte* p : registered_) {
      Status s = device_.unregister_host(p);
      if (status.is_ok()) status = std::move(s);
    }
    registered_.clear();
    stats_.unregister_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return status;
  }

  const LoadPlan& plan_;
  Device& device_;
  std::byte* dst_ = nullptr;
  const DeviceLoadOptions& options_;
  const load::ChunkReader reader_;
  ChunkQueue queue_;
  std::size_t buffer_bytes_ = kBufferBytes;
  std::size_t slots_per_stager_ = 2;
  bool staged_chunks_ = false;  // GpuDirect: some chunks go through stagers
  unsigned threads_ = 1;
  Staging staging_{};
  DeviceLoadStats stats_;
  std::atomic<std::uint64_t> registered_bytes_{0};
  std::atomic<std::uint64_t> file_read_bytes_{0};
  std::unordered_map<const ByteSource*, DeviceFile> files_;  // GpuDirect: opened before the workers start
  double register_seconds_ = 0;                              // only the registering thread adds to it
  std::mutex registered_mu_;
  std::vector<const std::byte*> registered_;
};

// Fails before anything is taken when the device cannot hold the plan.
Status check_device_memory(const LoadPlan& plan, Device& device, const DeviceLoadOptions& options) {
  SW_ASSIGN_OR_RETURN(const std::uint64_t free, device.free_memory());
  const std::uint64_t limit = options.device_memory_limit ? std::min(options.device_memory_limit, free) : free;
  if (plan.size() > limit)
    return Error(ErrorKind::ResourceLimit,
                 "loading needs " + std::to_string(plan.size()) + " bytes of device memory; " + std::to_string(limit) + " are available")
        .with_file(device.name());
  return Status::ok();
}

}  // namespace

Result<DeviceLoadStats> load_to_device(const LoadPlan& plan, Device& device, void* dst, std::uint64_t dst_size, const DeviceLoadOptions& options) {
  if (dst_size != plan.size())
    return Error(ErrorKind::InvalidArgument,
                 "device destination has " + std::to_string(dst_size) + " bytes, the plan needs " + std::to_string(plan.size()));
  DeviceLoader loader(plan, device, options);
  SW_RETURN_IF_ERROR(loader.prepare());
  return loader.run(static_cast<std::byte*>(dst));
}

Result<DeviceLoad> load_to_device(const LoadPlan& plan, const std::shared_ptr<Device>& device, const DeviceLoadOptions& options) {
  SW_RETURN_IF_ERROR(check_device_memory(plan, *device, options));
  // Both budgets are checked before the device memory is taken.
  DeviceLoader loader(plan, *device, options);
  SW_RETURN_IF_ERROR(loader.prepare());
  SW_ASSIGN_OR_RETURN(void* raw, device->allocate(plan.size()));
  // Freed with the last reference, and at once if the load fails.
  std::shared_ptr<void> memory(raw, [device](void* p) { device->release(p); });
  DeviceLoad out{memory, plan.size(), {}};
  SW_ASSIGN_OR_RETURN(out.stats, loader.run(static_cast<std::byte*>(raw)));
  return out;
}

}  // namespace safeweights
