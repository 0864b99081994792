// The CUDA device: the runtime loaded with dlopen (never linked). Internal; Device::open("cuda:N")
// is the way in.
#pragma once

#include <memory>
#include <string>

#include "safeweights/device.h"

namespace safeweights::load {

// DeviceError when the runtime cannot be loaded or the device does not exist.
Result<std::shared_ptr<Device>> open_cuda_device(int index, unsigned streams);

// The error for a failed runtime call, with the runtime's name and text for the code.
Error cuda_error(const std::string& call, int code, ErrorKind kind);

}  // namespace safeweights::load
