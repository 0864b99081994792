// A CUDA GPU as a Device (safeweights/device.h), through the CUDA runtime loaded with dlopen. The few
// entry points used are declared here with the runtime's stable C ABI (error codes and handles as
// ints and pointers), so no CUDA header or library is needed to build.
#include <dlfcn.h>

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "core/status_macros.h"
#include "io/posix_util.h"
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
                    resolve(a, a.GetDevice, "cudaGetDevice") && resolve(a, a.Malloc, "cudaMalloc") && resolve(a, a.Free, "cudaFree") &&
                    resolve(a, a.HostAlloc, "cudaHostAlloc") && resolve(a, a.FreeHost, "cudaFreeHost") &&
                    resolve(a, a.StreamCreateWithFlags, "cudaStreamCreateWithFlags") && resolve(a, a.StreamDestroy, "cudaStreamDestroy") &&
                    resolve(a, a.StreamSynchronize, "cudaStreamSynchronize") && resolve(a, a.MemcpyAsync, "cudaMemcpyAsync") &&
                    resolve(a, a.Memcpy, "cudaMemcpy") && resolve(a, a.EventCreateWithFlags, "cudaEventCreateWithFlags") &&
                    resolve(a, a.EventDestroy, "cudaEventDestroy") && resolve(a, a.EventRecord, "cudaEventRecord") &&
                    resolve(a, a.EventSynchronize, "cudaEventSynchronize") && resolve(a, a.HostRegister, "cudaHostRegister") &&
                    resolve(a, a.HostUnregister, "cudaHostUnregister") && resolve(a, a.MemGetInfo, "cudaMemGetInfo") &&
                    resolve(a, a.GetErrorString, "cudaGetErrorString") && resolve(a, a.GetErrorName, "cudaGetErrorName");
    if (!ok) a.handle = nullptr;
    return a;
  }();
  return api;
}

// ---- cuFile (GPUDirect Storage), loaded on first use. Its C ABI: an error is a pair of ints returned
// by value, a file is described by {handle type, fd, file-system table}, and the driver properties
// start with the nvidia-fs driver's version (0 when the driver is absent).
struct CuFileError {
  int err;     // CUfileOpError; 0 is success
  int cu_err;  // the CUDA driver's error, when err says so
};
struct CuFileDescr {
  int type;  // 1: a Linux file descriptor
  union {
    int fd;
    void* handle;
  } handle;
  const void* fs_ops;
};
struct CuFileDriverProps {
  struct {
    unsigned major_version, minor_version;
    std::size_t poll_thresh_size, max_direct_io_size;
    unsigned dstatusflags, dcontrolflags;
  } nvfs;
  unsigned fflags, max_device_cache_size, per_buffer_cache_size, max_device_pinned_mem_size, max_batch_io_size, max_batch_io_timeout_msecs;
};
constexpr int kCuFileHandleFd = 1;

struct CuFileApi {
  void* handle = nullptr;
  CuFileError (*DriverOpen)() = nullptr;
  CuFileError (*DriverGetProperties)(CuFileDriverProps*) = nullptr;
  CuFileError (*HandleRegister)(void**, CuFileDescr*) = nullptr;
  void (*HandleDeregister)(void*) = nullptr;
  long (*Read)(void*, void*, std::size_t, long, long) = nullptr;  // ssize_t (fh, buf, size, file_offset, buf_offset)
};

void* open_cufile() {
  std::vector<std::string> names;
  if (const char* path = std::getenv("SAFEWEIGHTS_CUFILE"); path && *path) names.emplace_back(path);
  for (const char* n :
       {"libcufile.so.0", "libcufile.so", "/usr/local/cuda/lib64/libcufile.so.0", "/usr/local/cuda/targets/x86_64-linux/lib/libcufile.so.0"})
    names.emplace_back(n);
  for (const std::string& n : names)
    if (void* h = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  return nullptr;
}

// The library, loaded and resolved once per process, the first time a load asks.
const CuFileApi& cufile_library() {
  static const CuFileApi api = [] {
    CuFileApi a;
    a.handle = open_cufile();
    if (a.handle == nullptr) return a;
    a.DriverOpen = reinterpret_cast<decltype(a.DriverOpen)>(::dlsym(a.handle, "cuFileDriverOpen"));
    a.DriverGetProperties = reinterpret_cast<decltype(a.DriverGetProperties)>(::dlsym(a.handle, "cuFileDriverGetProperties"));
    a.HandleRegister = reinterpret_cast<decltype(a.HandleRegister)>(::dlsym(a.handle, "cuFileHandleRegister"));
    a.HandleDeregister = reinterpret_cast<decltype(a.HandleDeregister)>(::dlsym(a.handle, "cuFileHandleDeregister"));
    a.Read = reinterpret_cast<decltype(a.Read)>(::dlsym(a.handle, "cuFileRead"));
    if (!a.DriverOpen || !a.DriverGetProperties || !a.HandleRegister || !a.HandleDeregister || !a.Read) a.handle = nullptr;
    return a;
  }();
  return api;
}

// cuFile's driver, opened once per process when a file is first read this way: opening costs time
// and starts cuFile's threads, so a process that never reads files this way never pays. Its answer
// stays for the process.
struct CuFileDriver {
  CuFileError opened{-1, 0};
  bool nvfs = false;  // the nvidia-fs kernel driver answered: reads are DMA from the storage
};

const CuFileDriver& cufile_driver() {
  static const CuFileDriver driver = [] {
    CuFileDriver d;
    const CuFileApi& api = cufile_library();
    if (api.handle == nullptr) return d;
    d.opened = api.DriverOpen();
    CuFileDriverProps props{};
    d.nvfs = d.opened.err == 0 && api.DriverGetProperties(&props).err == 0 && props.nvfs.major_version > 0;
    return d;
  }();
  return driver;
}

// Where nvidia-fs is not loaded, cuFile can only run in its compatibility mode; telling so needs no
// driver open.
bool nvidia_fs_present() { return ::access("/proc/driver/nvidia-fs/version", F_OK) == 0; }

std::string cufile_failure(const std::string& call, CuFileError e) {
  std::string text = call + " failed: cuFile error " + std::to_string(e.err);
  if (e.cu_err != 0) text += " (CUDA driver error " + std::to_string(e.cu_err) + ")";
  return text;
}

class CudaDevice final : public Device {
 public:
  CudaDevice(int index, std::vector<Stream> streams) : Device("cuda:" + std::to_string(index)), index_(index), streams_(std::move(streams)) {}
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

  FileReadPath file_read_path() noexcept override {
    if (cufile_library().handle == nullptr) return FileReadPath::None;
    if (!nvidia_fs_present()) return FileReadPath::Emulated;
    const CuFileDriver& d = cufile_driver();
    return d.opened.err != 0 ? FileReadPath::None : d.nvfs ? FileReadPath::Dma : FileReadPath::Emulated;
  }
  Result<void*> open_file(int fd) override {
    const CuFileApi& cf = cufile_library();
    if (cf.handle == nullptr)
      return Error(ErrorKind::NotSupported, "cuFile (libcufile) could not be loaded; set SAFEWEIGHTS_CUFILE to its path").with_file(name());
    if (const CuFileDriver& d = cufile_driver(); d.opened.err != 0)
      return Error(ErrorKind::NotSupported, cufile_failure("cuFileDriverOpen", d.opened)).with_file(name());
    CuFileDescr descr{};
    descr.type = kCuFileHandleFd;
    descr.handle.fd = fd;
    void* handle = nullptr;
    if (CuFileError e = cf.HandleRegister(&handle, &descr); e.err != 0)
      return Error(ErrorKind::NotSupported, cufile_failure("cuFileHandleRegister", e)).with_file(name());
    return handle;
  }
  void close_file(void* handle) noexcept override {
    if (handle != nullptr) cufile_library().HandleDeregister(handle);
  }
  Status read_file(void* handle, std::uint64_t offset, void* dst, std::size_t n) override {
    SW_RETURN_IF_ERROR(bind());
    for (std::size_t done = 0; done < n;) {
      const long got = cufile_library().Read(handle, dst, n - done, static_cast<long>(offset + done), static_cast<long>(done));
      if (got > 0) {
        done += static_cast<std::size_t>(got);
        continue;
      }
      // The loader names the file.
      if (got == 0) return Error(ErrorKind::IoError, "the file ended " + std::to_string(n - done) + " bytes early (cuFileRead)");
      // -1 with errno for a system error; otherwise the negated cuFile error.
      const std::string why = got == -1 ? errno_text(errno) : "cuFile error " + std::to_string(-got);
      return Error(got == -1 ? ErrorKind::IoError : ErrorKind::DeviceError, "cuFileRead on " + name() + " failed: " + why);
    }
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
