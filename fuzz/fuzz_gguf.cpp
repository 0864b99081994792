// fuzz_gguf — arbitrary bytes as a GGUF file.
//
// gguf::open must either fail cleanly or return tensors whose invariants hold: each lies inside the
// input, after the header, at an offset that is the running sum of the previous tensors' sizes padded
// to the alignment (so no two overlap), with the size tensor_nbytes gives its type and shape, and names
// are unique and findable. Opening through a mapped and an unmapped source must reach the same verdict
// with the same kind and message, and the metadata must render (every value type).
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "fuzz_common.h"
#include "safeweights/gguf.h"

using namespace safeweights;

namespace {

void check_file(const gguf::GgufFile& f, std::size_t size) {
  const std::uint64_t a = f.alignment();
  FUZZ_CHECK(a != 0 && (a & (a - 1)) == 0);
  FUZZ_CHECK(f.data_offset() % a == 0);
  std::set<std::string_view> names;
  std::uint64_t expected = 0;
  for (std::size_t i = 0; i < f.tensors().size(); ++i) {
    const TensorEntry& t = f.tensors()[i];
    FUZZ_CHECK(names.insert(t.name).second);
    FUZZ_CHECK(f.find(t.name) == &t);
    FUZZ_CHECK(t.name.size() <= gguf::kMaxTensorName);
    auto nbytes = tensor_nbytes(t.type, t.shape);
    FUZZ_CHECK_OK(nbytes);
    FUZZ_CHECK(*nbytes == t.nbytes);
    FUZZ_CHECK(f.infos()[i].offset == expected);
    FUZZ_CHECK(t.offset == f.data_offset() + expected);
    FUZZ_CHECK(t.offset <= size && t.nbytes <= size - t.offset);
    FUZZ_CHECK(f.infos()[i].ne.size() == t.shape.size());
    expected += (t.nbytes + a - 1) / a * a;
  }
  FUZZ_CHECK(f.metadata() != nullptr && f.metadata()->size() == f.kv().size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto input = fuzz::as_bytes(data, size);
  SourcePtr mapped = memory_source(input, "<fuzz>");
  SourcePtr unmapped = std::make_shared<fuzz::UnmappedSource>(input);
  auto a = gguf::open(mapped);
  auto b = gguf::open(unmapped);
  FUZZ_CHECK(a.is_ok() == b.is_ok());
  if (!a.is_ok()) {
    FUZZ_CHECK(a.error().kind() == b.error().kind() && a.error().message() == b.error().message());
    return 0;
  }
  check_file(**a, size);
  check_file(**b, size);
  FUZZ_CHECK((*a)->tensors().size() == (*b)->tensors().size());
  return 0;
}
