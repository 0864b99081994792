// The cuda component switched off (SAFEWEIGHTS_WITH_CUDA=OFF): CMake compiles this file instead of
// cuda_device.cpp, so the library holds no CUDA runtime binding. Device::open still parses "cuda" and
// "cuda:N" (a malformed name is an InvalidArgument either way) and reaches this, which refuses it.
#include <string>

#include "load/cuda_device.h"

namespace safeweights::load {

Result<std::shared_ptr<Device>> open_cuda_device(int index, unsigned /*streams*/) {
  return Error(ErrorKind::NotSupported,
               "cuda:" + std::to_string(index) + ": safeweights was built without the CUDA loader (SAFEWEIGHTS_WITH_CUDA=OFF)");
}

}  // namespace safeweights::load
