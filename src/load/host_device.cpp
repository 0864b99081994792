// The "host" device: engine threads copy host memory to host memory (host_device.h).
#include "load/host_device.h"

#include "io/posix_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace safeweights::load {
namespace {

std::atomic<std::uint64_t> g_device_bytes{0};
std::atomic<std::uint64_t> g_pinned_bytes{0};
std::atomic<std::uint64_t> g_pinned_peak{0};

// Memory handed out page-aligned, as cudaMallocHost and cudaMalloc give it (so that O_DIRECT reads into
// staging buffers run here as on a GPU), with its size and the allocation's start just in front, so
// that release() knows what to count back and what to free.
constexpr std::size_t kAlign = 4096;
struct Header {
  std::byte* base;
  std::uint64_t bytes;
};

Result<std::byte*> take(std::uint64_t bytes, std::atomic<std::uint64_t>& counter, std::string_view what) {
  auto memory = allocate_uninitialized(bytes + kAlign + sizeof(Header), what);
  if (!memory.is_ok()) return std::move(memory).status();
  std::byte* base = memory->release();
  const auto first = reinterpret_cast<std::uintptr_t>(base) + sizeof(Header);
  std::byte* p = base + ((first + kAlign - 1) / kAlign * kAlign - reinterpret_cast<std::uintptr_t>(base));
  const Header header{base, bytes};
  std::memcpy(p - sizeof(Header), &header, sizeof header);
  counter += bytes;
  return p;
}

void give_back(void* p, std::atomic<std::uint64_t>& counter) noexcept {
  if (p == nullptr) return;
  Header header;
  std::memcpy(&header, static_cast<std::byte*>(p) - sizeof(Header), sizeof header);
  counter -= header.bytes;
  delete[] header.base;
}

struct HostEvent {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t recorded = 0;  // signals queued
  std::uint64_t reached = 0;   // signals run
};

// One stream: a thread running queued operations in order.
class EngineStream {
 public:
  EngineStream() : thread_([this] { run(); }) {}
  ~EngineStream() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void push(std::function<void()> op) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(op));
    }
    cv_.notify_all();
  }
  void drain() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      std::function<void()> op = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      op();
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

class HostDevice final : public Device {
 public:
  explicit HostDevice(const HostDeviceOptions& options) : Device("host"), options_(options) {
    for (unsigned i = 0; i < std::max(1u, options.streams); ++i) streams_.push_back(std::make_unique<EngineStream>());
  }
  ~HostDevice() override {
    streams_.clear();  // joins the engine threads after their queues ran
    drop_staging();
  }
  bool host_addressable() const noexcept override { return true; }

  Result<void*> allocate(std::uint64_t bytes) override {
    auto p = take(bytes, g_device_bytes, "host device memory");
    if (!p.is_ok()) return std::move(p).status();
    return static_cast<void*>(*p);
  }
  void release(void* memory) noexcept override { give_back(memory, g_device_bytes); }
  Result<std::uint64_t> free_memory() override { return options_.memory ? options_.memory : memory_budget(); }
  Result<std::byte*> allocate_pinned(std::size_t bytes) override {
    auto p = take(bytes, g_pinned_bytes, "staging memory");
    if (p.is_ok()) {
      const std::uint64_t now = g_pinned_bytes.load();
      std::uint64_t peak = g_pinned_peak.load();
      while (now > peak && !g_pinned_peak.compare_exchange_weak(peak, now)) {}
    }
    return p;
  }
  void release_pinned(std::byte* memory) noexcept override { give_back(memory, g_pinned_bytes); }
  unsigned streams() const noexcept override { return static_cast<unsigned>(streams_.size()); }

  Status copy_async(void* dst, const std::byte* src, std::size_t n, unsigned stream) override {
    if (options_.fail_copy_at != 0 && ++copies_ == options_.fail_copy_at) return Error(ErrorKind::DeviceError, "copy_async: injected failure");
    streams_.at(stream)->push([dst, src, n] { std::memcpy(dst, src, n); });
    return Status::ok();
  }
  Result<void*> create_event() override { return static_cast<void*>(new HostEvent); }
  void destroy_event(void* event) noexcept override { delete static_cast<HostEvent*>(event); }
  Status record(void* event, unsigned stream) override {
    auto* e = static_cast<HostEvent*>(event);
    std::uint64_t target;
    {
      std::lock_guard<std::mutex> lock(e->mu);
      target = ++e->recorded;
    }
    streams_.at(stream)->push([e, target] {
      std::lock_guard<std::mutex> lock(e->mu);
      e->reached = std::max(e->reached, target);
      e->cv.notify_all();
    });
    return Status::ok();
  }
  Status wait(void* event) override {
    auto* e = static_cast<HostEvent*>(event);
    std::unique_lock<std::mutex> lock(e->mu);
    const std::uint64_t target = e->recorded;
    e->cv.wait(lock, [&] { return e->reached >= target; });
    return Status::ok();
  }
  Status synchronize() override {
    for (auto& s : streams_) s->drain();
    return Status::ok();
  }
  Status register_host(const void*, std::size_t) override {
    if (!options_.can_register) return Error(ErrorKind::NotSupported, "register_host: not supported by this device");
    return Status::ok();
  }
  Status unregister_host(const void*) override { return Status::ok(); }
  Status copy_to_host(std::span<std::byte> dst, const void* src) override {
    if (!dst.empty()) std::memcpy(dst.data(), src, dst.size());
    return Status::ok();
  }
  Status copy_from_host(void* dst, std::span<const std::byte> src) override {
    if (!src.empty()) std::memcpy(dst, src.data(), src.size());
    return Status::ok();
  }

  FileReadPath file_read_path() noexcept override { return options_.file_read; }
  // A descriptor of its own on the same file, without O_DIRECT: like cuFile, the device takes any
  // offset, length and destination, whatever the caller's descriptor demands.
  Result<void*> open_file(int fd) override {
    if (options_.file_read == FileReadPath::None) return Device::open_file(fd);
    const int own = ::open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_RDONLY | O_CLOEXEC);
    if (own < 0) return Error(ErrorKind::NotSupported, "read_file: cannot reopen the file: " + errno_text(errno));
    return static_cast<void*>(new int(own));
  }
  void close_file(void* handle) noexcept override {
    ::close(*static_cast<int*>(handle));
    delete static_cast<int*>(handle);
  }
  Status read_file(void* handle, std::uint64_t offset, void* dst, std::size_t n) override {
    if (options_.fail_read_at != 0 && ++reads_ == options_.fail_read_at) return Error(ErrorKind::DeviceError, "read_file: injected failure");
    return pread_exact(*static_cast<int*>(handle), offset, {static_cast<std::byte*>(dst), n}, "");  // the loader names the file
  }

 private:
  HostDeviceOptions options_;
  std::vector<std::unique_ptr<EngineStream>> streams_;
  std::atomic<std::uint64_t> copies_{0};
  std::atomic<std::uint64_t> reads_{0};
};

}  // namespace

std::shared_ptr<Device> make_host_device(const HostDeviceOptions& options) { return std::make_shared<HostDevice>(options); }
std::uint64_t host_device_bytes_in_use() noexcept { return g_device_bytes.load(); }
std::uint64_t host_pinned_bytes_in_use() noexcept { return g_pinned_bytes.load(); }
std::uint64_t host_pinned_peak() noexcept { return g_pinned_peak.load(); }
void reset_host_pinned_peak() noexcept { g_pinned_peak = g_pinned_bytes.load(); }

}  // namespace safeweights::load
