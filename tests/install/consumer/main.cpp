// A program outside the project that uses only the installed public headers: finds a file's format
// through the registry, opens it format-neutrally and prints its tensors (name, type, shape, and the
// sum of the bytes read back through the library).
#include <safeweights/format.h>

#include <cstddef>
#include <cstdint>
#include <iostream>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: consumer FILE\n";
    return 2;
  }
  auto format = safeweights::detect_format(argv[1]);
  auto file = format.is_ok() ? (*format)->open(argv[1], {}, {}) : safeweights::Result<std::unique_ptr<safeweights::TensorFile>>(format.error());
  if (!file.is_ok()) {
    std::cerr << file.error().to_string() << "\n";
    return 1;
  }
  const auto tensors = (*file)->tensors();
  std::cout << "tensors: " << tensors.size() << "\n";
  for (const safeweights::TensorEntry& t : tensors) {
    std::vector<std::byte> bytes(t.nbytes);
    if (auto s = t.read(bytes); !s.is_ok()) {
      std::cerr << s.to_string() << "\n";
      return 1;
    }
    std::uint64_t sum = 0;
    for (std::byte b : bytes) sum += static_cast<std::uint8_t>(b);
    std::cout << t.name << " " << safeweights::type_name(t.type) << " [";
    for (std::size_t i = 0; i < t.shape.size(); ++i) std::cout << (i ? "," : "") << t.shape[i];
    std::cout << "] bytesum=" << sum << "\n";
  }
  return 0;
}
