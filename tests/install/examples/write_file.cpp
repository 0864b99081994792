// Writes a safetensors file: declare every tensor first, then hand over each one's bytes (in any order,
// whole or in chunks), then finish(), which commits the file atomically.
#include <safeweights/safetensors_writer.h>

#include <cstdint>
#include <cstdio>
#include <span>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: write_file OUT.safetensors\n"), 2;
  const std::vector<float> embed = {0, 1, 2, 3, 4, 5};
  const std::vector<std::int64_t> ids = {7, -1, 42};
  auto sink = safeweights::safetensors::create(argv[1], {{"embed", safeweights::TensorType::F32, {2, 3}}, {"ids", safeweights::TensorType::I64, {3}}},
                                               safeweights::MetadataEntries{{"format", "pt"}});
  if (!sink.is_ok()) return std::fprintf(stderr, "%s\n", sink.error().to_string().c_str()), 1;
  safeweights::TensorSink& out = **sink;
  safeweights::Status status = out.write("ids", std::as_bytes(std::span(ids)));
  if (status.is_ok()) status = out.write("embed", std::as_bytes(std::span(embed)));
  if (status.is_ok()) status = out.finish();  // nothing is left behind unless this succeeds
  if (!status.is_ok()) return std::fprintf(stderr, "%s\n", status.to_string().c_str()), 1;
  std::printf("wrote %s\n", argv[1]);
  return 0;
}
