// fuzz_imatrix — arbitrary bytes as an importance matrix (llama-imatrix's GGUF or legacy .dat format).
//
// read_imatrix must either fail cleanly or return entries that are non-empty float vectors, each no
// larger than the input could describe (a legacy value is 4 bytes of the input; a GGUF sum too); the
// filters then keep a subset and refuse non-finite values, never crashing.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "gguf/imatrix.h"

using namespace safeweights;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto m = gguf::read_imatrix(memory_source(bytes, "fuzz.imatrix"));
  if (!m.is_ok()) return 0;
  std::uint64_t values = 0;
  for (const auto& [name, v] : m->entries) {
    FUZZ_CHECK(!v.empty());
    values += v.size();
  }
  FUZZ_CHECK(values * 4 <= size);
  const std::string keep[] = {"a"};
  const std::size_t before = m->entries.size();
  const Status filtered = gguf::filter_imatrix(*m, keep, {}, "fuzz.imatrix");
  FUZZ_CHECK(m->entries.size() <= before);
  if (filtered.is_ok())
    for (const auto& [name, v] : m->entries)
      for (float x : v) FUZZ_CHECK(std::isfinite(x));
  return 0;
}
