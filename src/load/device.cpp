// Device: opening one by name, and the cache of pinned staging buffers (safeweights/device.h).
#include <algorithm>
#include <charconv>
#include <string>

#include "load/cuda_device.h"
#include "load/host_device.h"
#include "safeweights/device.h"

namespace safeweights {
namespace {
constexpr unsigned kCudaStreams = 8;
}

Device::~Device() = default;

Result<std::shared_ptr<Device>> Device::open(std::string_view spec) {
  if (spec == "host") return load::make_host_device();
  int index = 0;
  if (spec.starts_with("cuda:")) {
    const std::string_view digits = spec.substr(5);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || index < 0)
      return Error(ErrorKind::InvalidArgument, "device \"" + std::string(spec) + "\": expected cuda:N with N a device number");
  } else if (spec != "cuda") {
    return Error(ErrorKind::InvalidArgument, "device \"" + std::string(spec) + "\": expected cuda, cuda:N or host");
  }
  return load::open_cuda_device(index, kCudaStreams);
}

Result<std::byte*> Device::take_staging(std::size_t size) {
  {
    std::lock_guard<std::mutex> lock(staging_mu_);
    auto it = std::find_if(staging_.begin(), staging_.end(), [&](const auto& b) { return b.second == size; });
    if (it != staging_.end()) {
      std::byte* p = it->first;
      staging_.erase(it);
      return p;
    }
  }
  return allocate_pinned(size);
}

void Device::trim_staging(std::size_t size, std::size_t keep) noexcept {
  std::vector<std::pair<std::byte*, std::size_t>> dropped;
  {
    std::lock_guard<std::mutex> lock(staging_mu_);
    std::size_t kept = 0;
    auto it = std::stable_partition(staging_.begin(), staging_.end(), [&](const auto& b) { return b.second == size && kept++ < keep; });
    dropped.assign(it, staging_.end());
    staging_.erase(it, staging_.end());
  }
  for (const auto& [p, bytes] : dropped) release_pinned(p);  // outside the lock: unpinning is slow
}

void Device::return_staging(std::byte* buffer, std::size_t size) noexcept {
  std::lock_guard<std::mutex> lock(staging_mu_);
  staging_.emplace_back(buffer, size);
}

void Device::drop_staging() noexcept {
  std::lock_guard<std::mutex> lock(staging_mu_);
  for (const auto& [p, size] : staging_) release_pinned(p);
  staging_.clear();
}

Result<void*> Device::open_file(int) { return Error(ErrorKind::NotSupported, "this device cannot read files into its memory").with_file(name()); }

void Device::close_file(void*) noexcept {}

Status Device::read_file(void*, std::uint64_t, void*, std::size_t) {
  return Error(ErrorKind::NotSupported, "this device cannot read files into its memory").with_file(name());
}

namespace {
constexpr DeviceStrategy kStrategies[] = {DeviceStrategy::Auto, DeviceStrategy::Staging, DeviceStrategy::Register, DeviceStrategy::Hybrid,
                                          DeviceStrategy::GpuDirect};
}

std::string_view strategy_name(DeviceStrategy strategy) noexcept {
  switch (strategy) {
    case DeviceStrategy::Auto: return "auto";
    case DeviceStrategy::Staging: return "staging";
    case DeviceStrategy::Register: return "register";
    case DeviceStrategy::Hybrid: return "hybrid";
    case DeviceStrategy::GpuDirect: return "gpudirect";
  }
  return "?";
}

Result<DeviceStrategy> parse_strategy(std::string_view name) {
  for (DeviceStrategy s : kStrategies)
    if (strategy_name(s) == name) return s;
  return Error(ErrorKind::InvalidArgument, "device strategy \"" + std::string(name) + "\": expected auto, staging, register, hybrid or gpudirect");
}

std::string_view file_read_path_name(FileReadPath path) noexcept {
  switch (path) {
    case FileReadPath::None: return "none";
    case FileReadPath::Emulated: return "emulated";
    case FileReadPath::Dma: return "dma";
  }
  return "?";
}

}  // namespace safeweights
