// fuzz_checkpoint — arbitrary bytes as a PyTorch checkpoint file (ZIP or legacy stream).
//
// open_checkpoint must fail cleanly or return tensors whose bytes can all be read (strided views
// gathered, big-endian storages swapped) through a mapped and an unmapped source with the same
// result; the two sources reach the same verdict.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_common.h"
#include "safeweights/pytorch.h"

using namespace safeweights;

namespace {

std::vector<std::vector<std::byte>> read_all(const TensorFile& file) {
  std::vector<std::vector<std::byte>> out;
  for (const TensorEntry& e : file.tensors()) {
    if (e.nbytes > (1u << 24)) continue;  // bounded by the input's storages, but keep runs fast
    std::vector<std::byte> bytes(e.nbytes);
    FUZZ_CHECK_OK(e.read(bytes));
    out.push_back(std::move(bytes));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto input = fuzz::as_bytes(data, size);
  SourcePtr mapped = memory_source(input, "<fuzz>");
  SourcePtr unmapped = std::make_shared<fuzz::UnmappedSource>(input);
  auto a = pytorch::open_checkpoint(mapped);
  auto b = pytorch::open_checkpoint(unmapped);
  FUZZ_CHECK(a.is_ok() == b.is_ok());
  if (!a.is_ok()) {
    FUZZ_CHECK(a.error().kind() == b.error().kind());
    return 0;
  }
  FUZZ_CHECK((*a)->tensors().size() == (*b)->tensors().size());
  FUZZ_CHECK(read_all(**a) == read_all(**b));
  return 0;
}
