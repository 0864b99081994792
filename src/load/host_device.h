// The "host" device (safeweights/device.h): device memory is host memory, and each stream is an engine
// thread that runs its queued copies and event signals in order, so the staging pipeline runs for real
// (asynchronously, with buffer reuse gated by events) on machines without a GPU. Its pinned and device
// memory is page-aligned, as CUDA's is, so O_DIRECT reads into staging buffers run here too. Internal; the options
// let tests inject failures.
//
// Thread safety: as Device.
#pragma once

#include <cstdint>
#include <memory>

#include "safeweights/device.h"

namespace safeweights::load {

struct HostDeviceOptions {
  unsigned streams = 4;
  std::uint64_t memory = 0;        // device memory reported free (0: the memory budget)
  bool can_register = true;        // register_host succeeds (a no-op) or reports NotSupported
  std::uint64_t fail_copy_at = 0;  // the n-th copy_async (1-based) fails with DeviceError; 0: never
  // read_file: pread into the device's memory, reported as this path (None: refused, as on a GPU
  // without cuFile); the n-th read_file (1-based) fails with DeviceError; 0: never.
  FileReadPath file_read = FileReadPath::None;
  std::uint64_t fail_read_at = 0;
};

std::shared_ptr<Device> make_host_device(const HostDeviceOptions& options = {});

// Bytes of device / pinned memory the host device has handed out and not yet taken back (all host
// devices of the process together): lets tests check that a failed load frees what it took.
std::uint64_t host_device_bytes_in_use() noexcept;
std::uint64_t host_pinned_bytes_in_use() noexcept;
// The most pinned bytes in use at once since the last reset_host_pinned_peak() (which sets it to
// what is in use now): lets tests check that a load keeps within its staging budget.
std::uint64_t host_pinned_peak() noexcept;
void reset_host_pinned_peak() noexcept;

}  // namespace safeweights::load
