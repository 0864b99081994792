// fuzz_gguf — arbitrary bytes as a GGUF file.
//
// gguf::open must either fail cleanly or return tensors whose invariants hold: each lies inside the
// input, after the header, at an offset that is the running sum of the previous tensors' sizes padded
// to the alignment (so no two overlap), with the size tensor_nbytes gives its type and shape (0 for a
// tensor with no elements, whatever its other dimensions), an element count that ggml's order (ne[0]
// first) keeps within 2^63 - 1, and names are unique and findable. Names and keys are what ggml sees:
// no NUL, and valid UTF-8. Opening through a mapped and an unmapped source must reach the same verdict
// with the same kind and message, and the metadata must render (every value type).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "fuzz_common.h"
#include "safeweights/gguf.h"

using namespace safeweights;

namespace {

// Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), written out here as an
// oracle independent of the library's.
bool utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const std::size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    std::uint32_t cp = n == 1 ? b : b & (0x7F >> n);
    for (std::size_t k = 1; k < n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c >> 6) != 0x2) return false;
      cp = cp << 6 | (c & 0x3F);
    }
    constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

// A name or key as ggml sees it (whole: no NUL) and as the spec allows it (UTF-8).
bool ggml_name(std::string_view s) { return s.find('\0') == std::string_view::npos && utf8(s); }

// ggml's element count, ne[0] first, never passes 2^63 - 1.
bool ggml_count_fits(std::span<const std::uint64_t> ne) {
  std::uint64_t n = 1;
  for (std::uint64_t d : ne) {
    if (d != 0 && n > static_cast<std::uint64_t>(INT64_MAX) / d) return false;
    n *= d;
  }
  return true;
}

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
    FUZZ_CHECK(ggml_name(t.name));
    FUZZ_CHECK(ggml_count_fits(f.infos()[i].ne));
    if (std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end()) {
      FUZZ_CHECK(t.nbytes == 0);
    } else {
      auto nbytes = tensor_nbytes(t.type, t.shape);
      FUZZ_CHECK_OK(nbytes);
      FUZZ_CHECK(*nbytes == t.nbytes);
    }
    FUZZ_CHECK(f.infos()[i].offset == expected);
    FUZZ_CHECK(t.offset == f.data_offset() + expected);
    FUZZ_CHECK(t.offset <= size && t.nbytes <= size - t.offset);
    FUZZ_CHECK(f.infos()[i].ne.size() == t.shape.size());
    expected += (t.nbytes + a - 1) / a * a;
  }
  FUZZ_CHECK(f.metadata() != nullptr && f.metadata()->size() == f.kv().size());
  for (const gguf::KeyValue& e : f.kv()) FUZZ_CHECK(!e.key.empty() && ggml_name(e.key));
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
