// A CUDA GPU as a Device (safeweights/device.h), through the CUDA runtime loaded with dlopen. The few
// entry points used are declared here with the runtime's stable C ABI (error codes and handles as
// ints and pointers), so no CUDA header or library is needed to build.
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "core/status_macros.h"
#include "load/cuda_device.h"

namespace safeweights::load {
namespace {

using cudaError = int;
using Stream = void*;
using Event = void*;
constexpr int kHostToDevice = 1;
constexpr int kDeviceToHost = 2;
constexpr unsigned kStreamNonBlocking = 0x01;
constexpr unsigned kEventDisableTiming = 0x02;
constexpr unsigned kHostRegisterReadOnly = 0x08;

// The runtime's entry points, resolved once per process.
struct CudaApi {
  void* handle = nullptr;
  std::string error;  // why it could not be loaded
  cudaError (*GetDeviceCount)(int*) = nullptr;
  cudaError (*SetDevice)(int) = nullptr;
  cudaError (*GetDevice)(int*) = nullptr;
  cudaError (*Malloc)(void**, std::size_t) = nullptr;
  cudaError (*Free)(void*) = nullptr;
  cudaError (*HostAlloc)(void**, std::size_t, unsigned) = nullptr;
  cudaError (*FreeHost)(void*) = nullptr;
  cudaError (*StreamCreateWithFlags)(Stream*, unsigned) = nullptr;
  cudaError (*StreamDestroy)(Stream) = nullptr;
  cudaError (*StreamSynchronize)(Stream) = nullptr;
  cudaError (*MemcpyAsync)(void*, const void*, std::size_t, int, Stream) = nullptr;
  cudaError (*Memcpy)(void*, const void*, std::size_t, int) = nullptr;
  cudaError (*EventCreateWithFlags)(Event*, unsigned) = nullptr;
  cudaError (*EventDestroy)(Event) = nullptr;
  cudaError (*EventRecord)(Event, Stream) = nullptr;
  cudaError (*EventSynchronize)(Event) = nullptr;
  cudaError (*HostRegister)(void*, std::size_t, unsigned) = nullptr;
  cudaError (*HostUnregister)(void*) = nullptr;
  cudaError (*MemGetInfo)(std::size_t*, std::size_t*) = nullptr;
  const char* (*GetErrorString)(cudaError) = nullptr;
  const char* (*GetErrorName)(cudaError) = nullptr;
};

// Names to try, most specific first. A runtime the process already loaded (torch's) is preferred, so
// that both use one runtime.
std::vector<std::string> runtime_candidates() {
  std::vector<std::string> names;
  if (const char* path = std::getenv("SAFEWEIGHTS_CUDART"); path && *path) names.emplace_back(path);
  for (const char* n : {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"}) names.emplace_back(n);
  for (const char* dir : {"/usr/local/cuda/lib64/", "/usr/local/cuda/targets/x86_64-linux/lib/"})
    for (const char* n : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"}) names.push_back(std::string(dir) + n);
  return names;
}

void* open_runtime() {
  const auto names = runtime_candidates();
  for (const std::string& n : names)
    if (void* h = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) return h;
  for (const std::string& n : names)
    if (void* h = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  return nullptr;
}

template <typename F>
bool resolve(CudaApi& api, F& fn, const char* symbol) {
  fn = reinterpret_cast<F>(::dlsym(api.handle, symbol));
  if (fn == nullptr) api.error = std::string("the CUDA runtime has no ") + symbol;
  return fn != nullptr;
}

const CudaApi& cuda_api() {
  static const CudaApi api = [] {
    CudaApi a;
    a.handle = open_runtime();
    if (a.handle == nullptr) {
      a.error = "the CUDA runtime (libcudart) could not be loaded; set SAFEWEIGHTS_CUDART to its path";
      return a;
    }
    const bool ok = resolve(a, a.GetDeviceCount, "cudaGetDeviceCount") && resolve(a, a.SetDevice, "cudaSetDevice") &&
                    resolve(a, a.GetDevice, "cudaGetDevice") &&
                    resolve(a, a.Malloc, "cudaMalloc") && resolve(a, a.Free, "cudaFree") &&
                    resolve(a, a.HostAlloc, "cudaHostAlloc") && resolve(a, a.FreeHost, "cudaFreeHost") &&
                    resolve(a, a.StreamCreateWithFlags, "cudaStreamCreateWithFlags") &&
                    resolve(a, a.StreamDestroy, "cudaStreamDestroy") && resolve(a, a.StreamSynchronize, "cudaStreamSynchronize") &&
                    resolve(a, a.MemcpyAsync, "cudaMemcpyAsync") && resolve(a, a.Memcpy, "cudaMemcpy") &&
                    resolve(a, a.EventCreateWithFlags, "cudaEventCreateWithFlags") &&
                    resolve(a, a.EventDestroy, "cudaEventDestroy") && resolve(a, a.EventRecord, "cudaEventRecord") &&
                    resolve(a, a.EventSynchronize, "cudaEventSynchronize") && resolve(a, a.HostRegister, "cudaHostRegister") &&
                    resolve(a, a.HostUnregister, "cudaHostUnregister") && resolve(a, a.MemGetInfo, "cudaMemGetInfo") &&
                    resolve(a, a.GetErrorString, "cudaGetErrorString") && resolve(a, a.GetErrorName, "cudaGetErrorName");
    if (!ok) a.handle = nullptr;
    return a;
  }();
  return api;
}

class CudaDevice final : public Device {
 public:
  CudaDevice(int index, std::vector<Stream> streams)
      : Device("cuda:" + std::to_string(index)), index_(index), streams_(std::move(streams)) {}
  ~CudaDevice() override {
    drop_staging();
    if (bind().is_ok())
      for (Stream s : streams_) api().StreamDestroy(s);
  }
  bool host_addressable() const noexcept override { return false; }

  Result<void*> allocate(std::uint64_t bytes) override {
    SW_RETURN_IF_ERROR(bind());
    void* p = nullptr;
    if (bytes == 0) return p;
    if (cudaError e = api().Malloc(&p, static_cast<std::size_t>(bytes)))
      return failure("cudaMalloc of " + std::to_string(bytes) + " bytes", e, ErrorKind::ResourceLimit);
    return p;
  }
  void release(void* memory) noexcept override {
    if (memory != nullptr && bind().is_ok()) api().Free(memory);
  }
  Result<std::uint64_t> free_memory() override {
    SW_RETURN_IF_ERROR(bind());
    std::size_t free = 0, total = 0;
    if (cudaError e = api().MemGetInfo(&free, &total)) return failure("cudaMemGetInfo", e);
    return static_cast<std::uint64_t>(free);
  }
  Result<std::byte*> allocate_pinned(std::size_t bytes) override {
    SW_RETURN_IF_ERROR(bind());
    void* p = nullptr;
    if (cudaError e = api().HostAlloc(&p, bytes, 0))
      return failure("cudaHostAlloc of " + std::to_string(bytes) + " bytes", e, ErrorKind::ResourceLimit);
    return static_cast<std::byte*>(p);
  }
  void release_pinned(std::byte* memory) noexcept override {
    if (memory != nullptr) api().FreeHost(memory);
  }
  unsigned streams() const noexcept override { return static_cast<unsigned>(streams_.size()); }
  Status copy_async(void* dst, const std::byte* src, std::size_t n, unsigned stream) override {
    SW_RETURN_IF_ERROR(bind());
    if (cudaError e = api().MemcpyAsync(dst, src, n, kHostToDevice, streams_.at(stream))) return failure("cudaMemcpyAsync", e);
    return Status::ok();
  }
  Result<void*> create_event() override {
    SW_RETURN_IF_ERROR(bind());
    Event ev = nullptr;
    if (cudaError e = api().EventCreateWithFlags(&ev, kEventDisableTiming)) return failure("cudaEventCreateWithFlags", e);
    return ev;
  }
  void destroy_event(void* event) noexcept override {
    if (event != nullptr) api().EventDestroy(event);
  }
  Status record(void* event, unsigned stream) override {
    SW_RETURN_IF_ERROR(bind());
    if (cudaError e = api().EventRecord(event, streams_.at(stream))) return failure("cudaEventRecord", e);
    return Status::ok();
  }
  Status wait(void* event) override {
    if (cudaError e = api().EventSynchronize(event)) return failure("cudaEventSynchronize", e);
    return Status::ok();
  }
  Status synchronize() override {
    SW_RETURN_IF_ERROR(bind());
    for (Stream s : streams_)
      if (cudaError e = api().StreamSynchronize(s)) return failure("cudaStreamSynchronize", e);
    return Status::ok();
  }
  Status register_host(const void* memory, std::size_t n) override {
    SW_RETURN_IF_ERROR(bind());
    if (cudaError e = api().HostRegister(const_cast<void*>(memory), n, kHostRegisterReadOnly))
      return failure("cudaHostRegister", e, ErrorKind::NotSupported);
    return Status::ok();
  }
  Status unregister_host(const void* memory) override {
    SW_RETURN_IF_ERROR(bind());
    if (cudaError e = api().HostUnregister(const_cast<void*>(memory))) return failure("cudaHostUnregister", e);
    return Status::ok();
  }
  Status copy_to_host(std::span<std::byte> dst, const void* src) override {
    SW_RETURN_IF_ERROR(bind());
    if (cudaError e = api().Memcpy(dst.data(), src, dst.size(), kDeviceToHost)) return failure("cudaMemcpy to the host", e);
    return Status::ok();
  }
  Status copy_from_host(void* dst, std::span<const std::byte> src) override {
    SW_RETURN_IF_ERROR(bind());
    if (cudaError e = api().Memcpy(dst, src.data(), src.size(), kHostToDevice)) return failure("cudaMemcpy to the device", e);
    return Status::ok();
  }

 private:
  static const CudaApi& api() { return cuda_api(); }
  // The runtime's current device is per thread: make it ours on whichever thread calls. Asked each
  // time (a framework on the same thread may have switched it since), and set only when it differs.
  Status bind() const {
    int current = -1;
    if (api().GetDevice(&current) == 0 && current == index_) return Status::ok();
    if (cudaError e = api().SetDevice(index_)) return failure("cudaSetDevice(" + std::to_string(index_) + ")", e);
    return Status::ok();
  }
  Error failure(const std::string& call, cudaError e, ErrorKind kind = ErrorKind::DeviceError) const {
    return cuda_error(call, e, kind).with_file(name());
  }

  int index_;
  std::vector<Stream> streams_;
};

}  // namespace

Error cuda_error(const std::string& call, int code, ErrorKind kind) {
  const CudaApi& api = cuda_api();
  std::string text = call + " failed";
  if (api.handle != nullptr)
    text += ": " + std::string(api.GetErrorName(code)) + " (" + api.GetErrorString(code) + ")";
  else
    text += " (error " + std::to_string(code) + ")";
  // Out-of-memory is a resource limit whatever the call (cudaErrorMemoryAllocation is 2).
  return Error(code == 2 ? ErrorKind::ResourceLimit : kind, text);
}

Result<std::shared_ptr<Device>> open_cuda_device(int index, unsigned streams) {
  const CudaApi& api = cuda_api();
  if (api.handle == nullptr) return Error(ErrorKind::DeviceError, api.error);
  int count = 0;
  if (cudaError e = api.GetDeviceCount(&count)) return cuda_error("cudaGetDeviceCount", e, ErrorKind::DeviceError);
  if (index < 0 || index >= count)
    return Error(ErrorKind::DeviceError, "no CUDA device " + std::to_string(index) + " (" + std::to_string(count) + " present)");
  if (cudaError e = api.SetDevice(index)) return cuda_error("cudaSetDevice", e, ErrorKind::DeviceError);
  std::vector<Stream> made;
  for (unsigned i = 0; i < streams; ++i) {
    Stream s = nullptr;
    if (cudaError e = api.StreamCreateWithFlags(&s, kStreamNonBlocking)) {
      for (Stream m : made) api.StreamDestroy(m);
      return cuda_error("cudaStreamCreateWithFlags", e, ErrorKind::DeviceError);
    }
    made.push_back(s);
  }
  return std::shared_ptr<Device>(std::make_shared<CudaDevice>(index, std::move(made)));
}

}  // namespace safeweights::load
