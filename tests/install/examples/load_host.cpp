// Loads every tensor of a file into one host buffer with the library's loader: the plan places each
// tensor, then large parallel reads fill the buffer (safeweights/device.h does the same into GPU memory).
#include <safeweights/format.h>
#include <safeweights/loader.h>
#include <safeweights/text.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: load_host FILE\n"), 2;
  auto file = safeweights::open_tensors(argv[1]);
  if (!file.is_ok()) return std::fprintf(stderr, "%s\n", file.error().to_string().c_str()), 1;
  auto plan = safeweights::LoadPlan::make(**file);
  if (!plan.is_ok()) return std::fprintf(stderr, "%s\n", plan.error().to_string().c_str()), 1;
  auto loaded = safeweights::load_host(*plan);
  if (!loaded.is_ok()) return std::fprintf(stderr, "%s\n", loaded.error().to_string().c_str()), 1;
  for (const safeweights::PlacedTensor& t : plan->tensors()) {
    unsigned sum = 0;
    for (std::byte b : loaded->bytes_of(t)) sum += static_cast<unsigned>(b);
    std::printf("%s %s %s: %llu bytes, byte sum %u\n", std::string(t.entry.name).c_str(), std::string(safeweights::type_name(t.entry.type)).c_str(),
                safeweights::shape_string(t.shape).c_str(), static_cast<unsigned long long>(t.nbytes), sum);
  }
  return 0;
}
