// Converts a file to another format, chosen by the output's extension (.gguf, .safetensors or
// .safetensors.index.json), one tensor in memory at a time; the output appears only when every
// tensor is written.
#include <safeweights/convert.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) return std::fprintf(stderr, "usage: convert_file IN OUT\n"), 2;
  auto input = safeweights::open_tensors(argv[1]);
  if (!input.is_ok()) return std::fprintf(stderr, "%s\n", input.error().to_string().c_str()), 1;
  safeweights::ConvertOptions options;  // options.type = TensorType::F16 would change the type
  auto report = safeweights::convert(**input, argv[2], options);
  if (!report.is_ok()) return std::fprintf(stderr, "%s\n", report.error().to_string().c_str()), 1;
  for (const safeweights::ConvertedTensor& t : report->tensors)
    std::printf("%s: %s -> %s\n", t.name.c_str(), std::string(safeweights::type_name(t.from)).c_str(),
                std::string(safeweights::type_name(t.to)).c_str());
  return 0;
}
