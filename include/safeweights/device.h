// safeweights/device.h — loading tensors into device memory.
//
// A Device is a copy engine with memory of its own: a CUDA GPU ("cuda:N"), reached through the CUDA
// runtime loaded at run time with dlopen (libcudart is never linked, so the library, the CLI and the
// Python package build and run on machines without CUDA), or host memory ("host"), which runs the very
// same pipeline with copies done asynchronously by engine threads — a real backend, used by the tests
// and on machines without a GPU.
//
// load_to_device() moves a LoadPlan (safeweights/loader.h) into one device allocation, or into device
// memory the caller gives (a tensor framework's allocation), along one of three paths (DeviceStrategy),
// or the first two at once:
//  - Staging: reader threads read chunks (pread from the page cache, or O_DIRECT from the disk) into
//    a ring of pinned host buffers, two per thread, and queue asynchronous copies on several streams;
//    an event per buffer says when it may be refilled. The buffers are small (4 MiB) so that what a
//    thread just read is still in the CPU's caches when the copy engine reads it: the bytes cross
//    DRAM once on the way in, not three times.
//  - Register: chunks of a memory-mapped file are page-locked in place (cudaHostRegister, read-only),
//    so the copy engine reads the page cache directly with no CPU copy; registration costs CPU time
//    in the driver and does not run in parallel, so one thread does it.
// Hybrid runs both: stagers take chunks from the front of the plan, the registering thread from the
// back, until they meet.
//  - GpuDirect: the device reads file bytes into its memory itself, with no buffer of the loader's
//    (cuFile, NVIDIA's GPUDirect Storage library, loaded with dlopen like the runtime). With the
//    nvidia-fs driver the disk's DMA writes into GPU memory (FileReadPath::Dma); without it cuFile runs
//    in "compatibility mode", reading through pinned buffers of its own (FileReadPath::Emulated).
//    Chunks that are not file ranges (shard slices, memory, HTTP) are staged.
// DeviceStrategy::Auto picks what measured fastest (docs/PERFORMANCE.md): GpuDirect for files read
// from the disk when the device has a Dma path, Staging otherwise.
//
// Budgets: pinned staging memory (DeviceLoadOptions::staging_bytes) and device memory (the device's
// free memory, or DeviceLoadOptions::device_memory_limit). A load counts the pinned buffers it could
// hold at once (stagers x buffers each x buffer size, plus the registering thread's fallback buffer,
// plus the GpuDirect workers' stagers when some chunks must be staged) and fits them within the
// budget with fewer stagers, one buffer per stager, or smaller buffers (not below the largest shard
// chunk, which is read in one piece, nor below 4 KiB); when even that does not fit, and when the plan
// does not fit in device memory, the load fails with ResourceLimit before it allocates anything.
// cuFile's own bounce buffers (FileReadPath::Emulated) are the driver's, outside this budget. Every runtime call is checked (DeviceError naming the call and the
// runtime's message); a failed or interrupted load waits for its copies in flight, unregisters what it
// registered, and frees the device memory it allocated.
//
// Thread safety: a Device may be used by several threads and loads at once (each within its own
// budget). Pinned staging buffers are cached by the Device between loads (the first load pays for
// page-locking them); a load first frees the cached buffers it will not use, so the cache never holds
// more than the last loads' budgets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/loader.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

// How a device reads files into its memory: not at all, through host bounce buffers of the device
// library's own, or by DMA from the storage with no copy through host memory.
enum class FileReadPath : std::uint8_t { None, Emulated, Dma };

class Device {
 public:
  // "cuda" (device 0), "cuda:N", or "host". DeviceError when the CUDA runtime cannot be loaded
  // (searched as libcudart.so and its versioned names, or the path in SAFEWEIGHTS_CUDART) or the
  // device does not exist; InvalidArgument for another spelling.
  static Result<std::shared_ptr<Device>> open(std::string_view spec);
  virtual ~Device();

  const std::string& name() const noexcept { return name_; }
  // Whether device memory is host memory (the "host" device): its pointers may be read directly.
  virtual bool host_addressable() const noexcept = 0;

  // ---- the copy engine's primitives (what the loader is made of) ----
  virtual Result<void*> allocate(std::uint64_t bytes) = 0;
  virtual void release(void* memory) noexcept = 0;
  // Bytes of device memory free for a new allocation.
  virtual Result<std::uint64_t> free_memory() = 0;
  virtual Result<std::byte*> allocate_pinned(std::size_t bytes) = 0;
  virtual void release_pinned(std::byte* memory) noexcept = 0;
  // Number of streams: copies on one stream run in order; different streams overlap.
  virtual unsigned streams() const noexcept = 0;
  // Queues a copy of host memory (pinned or registered) to device memory on a stream.
  virtual Status copy_async(void* dst, const std::byte* src, std::size_t n, unsigned stream) = 0;
  // Events: a point in a stream the host can wait for.
  virtual Result<void*> create_event() = 0;
  virtual void destroy_event(void* event) noexcept = 0;
  virtual Status record(void* event, unsigned stream) = 0;
  virtual Status wait(void* event) = 0;
  // Waits for everything queued on every stream.
  virtual Status synchronize() = 0;
  // Page-locks host memory for direct reads by the copy engine (read-only). NotSupported where the
  // device cannot; then the loader stages instead.
  virtual Status register_host(const void* memory, std::size_t n) = 0;
  virtual Status unregister_host(const void* memory) = 0;
  // Synchronous copies, for checks and for callers without a framework.
  virtual Status copy_to_host(std::span<std::byte> dst, const void* src) = 0;
  virtual Status copy_from_host(void* dst, std::span<const std::byte> src) = 0;

  // Reading files straight into device memory (GPUDirect Storage). The defaults say None and refuse.
  virtual FileReadPath file_read_path() noexcept { return FileReadPath::None; }
  // A handle for read_file on the open descriptor fd (which stays the caller's); close it with
  // close_file before closing fd. NotSupported where the path is None or the file system refuses.
  virtual Result<void*> open_file(int fd);
  virtual void close_file(void* handle) noexcept;
  // Reads n bytes at `offset` of the file into device memory at dst, synchronously, in full: a file
  // that ends first is an IoError.
  virtual Status read_file(void* handle, std::uint64_t offset, void* dst, std::size_t n);

  // Pinned staging buffers of `size` bytes, reused across loads; give them back with return_staging.
  Result<std::byte*> take_staging(std::size_t size);
  void return_staging(std::byte* buffer, std::size_t size) noexcept;
  // Frees the cached buffers that are not of `size`, and those of `size` beyond `keep`: a load calls it
  // before it starts, so that the cache and the load's buffers together stay within its budget.
  void trim_staging(std::size_t size, std::size_t keep) noexcept;

 protected:
  explicit Device(std::string name) : name_(std::move(name)) {}
  // Frees the cached staging buffers; the derived destructor calls it (release_pinned is virtual).
  void drop_staging() noexcept;

 private:
  std::string name_;
  std::mutex staging_mu_;
  std::vector<std::pair<std::byte*, std::size_t>> staging_;  // cached, not in use
};

enum class DeviceStrategy : std::uint8_t { Auto, Staging, Register, Hybrid, GpuDirect };

struct DeviceLoadOptions {
  DeviceStrategy strategy = DeviceStrategy::Auto;
  std::uint64_t buffer_bytes = 0;         // one staging buffer or one GpuDirect read (0: 4 MiB); at least
                                          // the largest shard chunk; smaller when staging_bytes requires
  std::uint64_t staging_bytes = 0;        // pinned staging in all, a hard limit (ResourceLimit when even
                                          // one buffer does not fit); 0: two buffers per thread, at most 1 GiB,
                                          // or the smallest ring that holds the largest shard chunk if more
  std::uint64_t device_memory_limit = 0;  // 0: the device's free memory
  std::uint64_t register_bytes = 0;       // registration: contiguous chunks page-locked at once (0: 256 MiB)
};

// What a load did.
struct DeviceLoadStats {
  DeviceStrategy strategy = DeviceStrategy::Staging;  // what ran (Auto resolved)
  std::uint64_t staged_bytes = 0;                     // through pinned buffers
  std::uint64_t registered_bytes = 0;                 // copied from registered pages
  std::uint64_t file_read_bytes = 0;                  // read by the device itself (GpuDirect)
  bool direct = false;                                // some sources were opened with O_DIRECT
  std::uint64_t direct_bytes = 0;                     // read with O_DIRECT into staging buffers (the rest of a direct
                                                      // source's bytes: pread, where offsets or buffers were unaligned)
  double register_seconds = 0;                        // spent page-locking (cudaHostRegister)
  double unregister_seconds = 0;                      // spent unlocking at the end
};

// Device memory holding a plan's destination; freed with the last reference.
struct DeviceLoad {
  std::shared_ptr<void> memory;
  std::uint64_t size = 0;
  DeviceLoadStats stats;
  void* data() const noexcept { return memory.get(); }
};

// Loads the plan into device memory at dst (dst_size == plan.size(); InvalidArgument otherwise).
Result<DeviceLoadStats> load_to_device(const LoadPlan& plan, Device& device, void* dst, std::uint64_t dst_size,
                                       const DeviceLoadOptions& options = {});
// The same into one new device allocation.
Result<DeviceLoad> load_to_device(const LoadPlan& plan, const std::shared_ptr<Device>& device, const DeviceLoadOptions& options = {});

std::string_view strategy_name(DeviceStrategy strategy) noexcept;
// The strategy named by strategy_name; InvalidArgument for another name.
Result<DeviceStrategy> parse_strategy(std::string_view name);
std::string_view file_read_path_name(FileReadPath path) noexcept;

SAFEWEIGHTS_API_END
}  // namespace safeweights
