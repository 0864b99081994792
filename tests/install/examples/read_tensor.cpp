// Opens any supported file (safetensors, a sharded index, DDUF, GGUF, a PyTorch checkpoint) or a model
// folder, finds a tensor by name and reads its bytes.
#include <safeweights/format.h>
#include <safeweights/text.h>

#include <cstdio>
#include <string>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 3) return std::fprintf(stderr, "usage: read_tensor FILE TENSOR\n"), 2;
  auto file = safeweights::open_tensors(argv[1]);
  if (!file.is_ok()) return std::fprintf(stderr, "%s\n", file.error().to_string().c_str()), 1;
  auto tensor = (*file)->tensor(argv[2]);
  if (!tensor.is_ok()) return std::fprintf(stderr, "%s\n", tensor.error().to_string().c_str()), 1;
  const safeweights::TensorEntry& t = **tensor;
  std::vector<std::byte> bytes(t.nbytes);  // or t.view(): no copy when the file is mapped
  if (auto s = t.read(bytes); !s.is_ok()) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;
  std::printf("%s (%s): %s %s, %zu bytes:", argv[2], std::string((*file)->format()).c_str(), std::string(safeweights::type_name(t.type)).c_str(),
              safeweights::shape_string(t.shape).c_str(), bytes.size());
  for (std::size_t i = 0; t.type == safeweights::TensorType::F32 && i < bytes.size() / 4; ++i) {
    float v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    std::printf(" %g", v);
  }
  std::printf("\n");
  return 0;
}
