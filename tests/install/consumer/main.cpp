// A program outside the project that uses only the installed public headers: opens a safetensors file
// and prints its tensors (name, dtype, shape, sum of bytes read back through the library).
#include <safeweights/safetensors.h>

#include <cstddef>
#include <cstdint>
#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: consumer FILE.safetensors\n";
    return 2;
  }
  auto reader = safeweights::safetensors::Reader::open(argv[1]);
  if (!reader.is_ok()) {
    std::cerr << reader.error().to_string() << "\n";
    return 1;
  }
  const auto tensors = reader->header().tensors();
  std::cout << "tensors: " << tensors.size() << "\n";
  for (const auto& info : tensors) {
    auto bytes = reader->read_owned(info.name);
    if (!bytes.is_ok()) {
      std::cerr << bytes.error().to_string() << "\n";
      return 1;
    }
    std::uint64_t sum = 0;
    for (std::byte b : *bytes) sum += static_cast<std::uint8_t>(b);
    std::cout << info.name << " " << safeweights::dtype_name(info.dtype) << " [";
    for (std::size_t i = 0; i < info.shape.size(); ++i) std::cout << (i ? "," : "") << info.shape[i];
    std::cout << "] bytesum=" << sum << "\n";
  }
  return 0;
}
