// Helpers of the load suite (load_test.cpp, group_test.cpp): files whose bytes show any misplaced byte.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "safeweights/format.h"
#include "safeweights/safetensors_writer.h"
#include "test_util.h"

namespace safeweights::load_test {

struct Spec {
  std::string name;
  TensorType type;
  std::vector<std::uint64_t> shape;
};

// Writes a safetensors file whose bytes are a function of the tensor and the position, so that any
// misplaced byte shows.
inline void write_tensors(const std::string& path, const std::vector<Spec>& specs, std::uint32_t seed = 1) {
  std::vector<std::vector<std::byte>> data;
  std::vector<safetensors::TensorData> tensors;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const auto n = tensor_nbytes(specs[i].type, specs[i].shape).value();
    std::vector<std::byte> bytes(static_cast<std::size_t>(n));
    std::uint32_t x = seed * 2654435761u + static_cast<std::uint32_t>(i) * 40503u;
    for (auto& b : bytes) {
      x = x * 1103515245u + 12345u;
      b = static_cast<std::byte>(x >> 24);
    }
    data.push_back(std::move(bytes));
  }
  for (std::size_t i = 0; i < specs.size(); ++i) tensors.push_back({specs[i].name, specs[i].type, specs[i].shape, data[i]});
  ASSERT_TRUE(swt::IsOk(safetensors::write_file(path, tensors)));
}

inline std::unique_ptr<TensorFile> open_any(const std::string& path) {
  auto format = detect_format(path);
  EXPECT_TRUE(swt::IsOk(format.status()));
  auto file = (*format)->open(path, {}, {});
  EXPECT_TRUE(swt::IsOk(file.status()));
  return std::move(*file);
}

}  // namespace safeweights::load_test
