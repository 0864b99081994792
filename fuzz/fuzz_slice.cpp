// fuzz_slice — numpy-style slicing of an in-memory tensor.
//
// Input: byte 0 picks the dtype, byte 1 the rank (0-4) and a base offset (0-31), the next `rank` bytes
// the dimensions (0-12 each); the rest is slice text for SliceSpec::parse. The result of plan_slice +
// read_slice is compared with an independent, element-by-element model of numpy basic indexing
// (Python slice semantics, negative indices, one ellipsis, newaxis). Sources are sized exactly, so
// any read outside the tensor is either an error the check rejects or an ASan report.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "fuzz_common.h"
#include "safeweights/tensor_type.h"
#include "safeweights/safetensors.h"
#include "safeweights/slice.h"
#include "safeweights/source.h"

using namespace safeweights;

namespace {

using i128 = __int128;

// One axis of the expected result.
struct OutAxis {
  std::optional<std::size_t> src_dim;  // nullopt for a newaxis
  i128 start = 0;
  i128 step = 1;
  std::uint64_t count = 1;
};

struct Model {
  std::vector<OutAxis> axes;
  std::vector<std::pair<std::size_t, i128>> fixed;  // (source dim, index) for integer indices
  std::optional<ErrorKind> error;                   // the kind numpy's rules imply
  bool any_error = false;                           // an error whose kind is not pinned down
};

i128 clamp_index(i128 v, i128 lo, i128 hi) { return std::min(std::max(v, lo), hi); }

// Python's slice.indices() followed by len(range(...)).
void python_range(const SliceItem& item, i128 n, i128 step, i128* start_out, std::uint64_t* count_out) {
  i128 start, stop;
  if (step > 0) {
    start = item.start ? i128(*item.start) : 0;
    stop = item.stop ? i128(*item.stop) : n;
    if (start < 0) start += n;
    if (stop < 0) stop += n;
    start = clamp_index(start, 0, n);
    stop = clamp_index(stop, 0, n);
    *count_out = stop > start ? std::uint64_t((stop - start + step - 1) / step) : 0;
  } else {
    start = item.start ? i128(*item.start) : n - 1;
    stop = item.stop ? i128(*item.stop) : -1;
    if (item.start && start < 0) start += n;
    if (item.stop && stop < 0) stop += n;
    start = clamp_index(start, -1, n - 1);
    stop = clamp_index(stop, -1, n - 1);
    *count_out = start > stop ? std::uint64_t((start - stop + (-step) - 1) / (-step)) : 0;
  }
  *start_out = start;
}

Model model_slice(const std::vector<std::uint64_t>& shape, const SliceSpec& spec) {
  Model m;
  std::size_t consuming = 0, ellipses = 0;
  for (const SliceItem& it : spec.items) {
    if (it.kind == SliceItem::Kind::Index || it.kind == SliceItem::Kind::Range) ++consuming;
    if (it.kind == SliceItem::Kind::Ellipsis) ++ellipses;
  }
  bool zero_step = false;
  for (const SliceItem& it : spec.items) {
    if (it.kind == SliceItem::Kind::Range && it.step && *it.step == 0) zero_step = true;
  }
  // Two ellipses or a zero step are errors, but which check comes first is the library's choice.
  if (ellipses > 1 || zero_step) {
    m.any_error = true;
    return m;
  }
  if (consuming > shape.size()) {
    m.error = ErrorKind::TooManySlices;
    return m;
  }
  std::vector<SliceItem> items = spec.items;
  const std::size_t fill = shape.size() - consuming;
  auto ell = std::find_if(items.begin(), items.end(), [](const SliceItem& it) { return it.kind == SliceItem::Kind::Ellipsis; });
  if (ell != items.end()) {
    const std::size_t at = static_cast<std::size_t>(ell - items.begin());
    items.erase(ell);
    items.insert(items.begin() + static_cast<std::ptrdiff_t>(at), fill, SliceItem::range());
  } else {
    items.insert(items.end(), fill, SliceItem::range());
  }
  std::size_t dim = 0;
  for (const SliceItem& it : items) {
    switch (it.kind) {
      case SliceItem::Kind::NewAxis: m.axes.push_back(OutAxis{}); break;
      case SliceItem::Kind::Index: {
        const i128 n = shape[dim];
        i128 i = it.index;
        if (i < 0) i += n;
        if (i < 0 || i >= n) {
          m.error = ErrorKind::SliceOutOfRange;
          return m;
        }
        m.fixed.emplace_back(dim, i);
        ++dim;
        break;
      }
      case SliceItem::Kind::Range: {
        OutAxis axis;
        axis.src_dim = dim;
        axis.step = it.step ? i128(*it.step) : 1;
        python_range(it, i128(shape[dim]), axis.step, &axis.start, &axis.count);
        m.axes.push_back(axis);
        ++dim;
        break;
      }
      case SliceItem::Kind::Ellipsis: break;
    }
  }
  FUZZ_CHECK(dim == shape.size());
  return m;
}

std::uint64_t get_bits(std::span<const std::byte> bytes, std::uint64_t bit, unsigned width) {
  std::uint64_t v = 0;
  for (unsigned k = 0; k < width; ++k) {
    const std::uint64_t b = bit + k;
    const unsigned on = (std::to_integer<unsigned>(bytes[b / 8]) >> (b % 8)) & 1u;
    v |= std::uint64_t(on) << k;
  }
  return v;
}

bool same_items(const SliceSpec& a, const SliceSpec& b) {
  if (a.items.size() != b.items.size()) return false;
  for (std::size_t i = 0; i < a.items.size(); ++i) {
    const SliceItem& x = a.items[i];
    const SliceItem& y = b.items[i];
    if (x.kind != y.kind) return false;
    if (x.kind == SliceItem::Kind::Index && x.index != y.index) return false;
    if (x.kind == SliceItem::Kind::Range && (x.start != y.start || x.stop != y.stop || x.step != y.step)) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const TensorType dtype = fuzz::storable_types()[data[0] % fuzz::storable_types().size()];
  const unsigned bits = type_bits(dtype);
  const std::size_t rank = data[1] % 5;
  const std::uint64_t base = (data[1] >> 3) & 31u;
  if (size < 2 + rank) return 0;
  std::vector<std::uint64_t> shape(rank);
  std::uint64_t elements = 1;
  for (std::size_t d = 0; d < rank; ++d) {
    shape[d] = data[2 + d] % 13;
    elements *= shape[d];
  }
  const std::string_view text(reinterpret_cast<const char*>(data + 2 + rank), size - 2 - rank);

  auto spec = SliceSpec::parse(text);
  if (!spec.is_ok()) {
    // Syntax errors, and integers that do not fit 64 bits (out of range of any dimension).
    FUZZ_CHECK(spec.error().kind() == ErrorKind::InvalidSliceSpec || spec.error().kind() == ErrorKind::SliceOutOfRange);
    return 0;
  }
  // Rendering and parsing again gives the same spec.
  const std::string rendered = spec->to_string();
  auto reparsed = SliceSpec::parse(rendered);
  FUZZ_CHECK_OK(reparsed.status());
  FUZZ_CHECK(same_items(*spec, *reparsed));

  // The tensor: `base` bytes of padding, then ceil(elements * bits / 8) bytes of a fixed pattern.
  const std::uint64_t tensor_bytes = (elements * bits + 7) / 8;
  std::vector<std::byte> file(base + tensor_bytes);
  for (std::size_t i = 0; i < file.size(); ++i) {
    file[i] = static_cast<std::byte>((i * 167u + 13u) ^ (i >> 7));
  }
  const std::span<const std::byte> tensor = std::span<const std::byte>(file).subspan(base);

  const Model model = model_slice(shape, *spec);
  auto plan = plan_slice(shape, dtype, *spec, base);
  if (model.any_error || model.error) {
    FUZZ_CHECK(!plan.is_ok());
    if (model.error) FUZZ_CHECK(plan.error().kind() == *model.error);
    return 0;
  }
  if (!plan.is_ok()) {
    // Only sub-byte types may refuse a valid index, and only for alignment.
    FUZZ_CHECK(bits % 8 != 0);
    FUZZ_CHECK(plan.error().kind() == ErrorKind::MisalignedSlice);
    return 0;
  }

  // Shape, element count, byte count.
  std::vector<std::uint64_t> expect_shape;
  for (const OutAxis& a : model.axes) expect_shape.push_back(a.count);
  FUZZ_CHECK(plan->shape() == expect_shape);
  unsigned __int128 product = 1;
  for (std::uint64_t d : plan->shape()) product *= d;
  FUZZ_CHECK(product == plan->num_elements());
  FUZZ_CHECK(product * bits % 8 == 0);
  FUZZ_CHECK(plan->nbytes() == product * bits / 8);
  FUZZ_CHECK(static_cast<unsigned __int128>(plan->run_count()) * plan->run_bytes() == plan->nbytes());

  // Every run lies inside the tensor.
  std::uint64_t visited = 0;
  plan->for_each_run([&](std::uint64_t offset, std::uint64_t length) {
    FUZZ_CHECK(offset >= base && offset - base <= tensor_bytes && length <= tensor_bytes - (offset - base));
    visited += length;
    return true;
  });
  FUZZ_CHECK(visited == plan->nbytes());

  // Reading gives the modelled elements, from a mapped and from an unmapped source.
  SourcePtr mapped = memory_source(file, "<fuzz>");
  fuzz::UnmappedSource unmapped(file);
  std::vector<std::byte> out(plan->nbytes()), out2(plan->nbytes());
  FUZZ_CHECK_OK(read_slice(*mapped, *plan, out));
  FUZZ_CHECK_OK(read_slice(unmapped, *plan, out2));
  FUZZ_CHECK(out == out2);

  // Row-major strides of the source, in elements.
  std::vector<i128> stride(rank, 1);
  for (std::size_t d = rank; d-- > 1;) stride[d - 1] = stride[d] * i128(shape[d]);
  i128 fixed_part = 0;
  for (const auto& [d, i] : model.fixed) fixed_part += i * stride[d];
  const std::size_t out_rank = model.axes.size();
  std::vector<std::uint64_t> coord(out_rank, 0);
  for (std::uint64_t j = 0; j < plan->num_elements(); ++j) {
    i128 src = fixed_part;
    for (std::size_t a = 0; a < out_rank; ++a) {
      const OutAxis& axis = model.axes[a];
      if (axis.src_dim) src += (axis.start + axis.step * i128(coord[a])) * stride[*axis.src_dim];
    }
    FUZZ_CHECK(src >= 0 && src < i128(elements));
    FUZZ_CHECK(get_bits(out, j * bits, bits) == get_bits(tensor, std::uint64_t(src) * bits, bits));
    for (std::size_t a = out_rank; a-- > 0;) {
      if (++coord[a] < model.axes[a].count) break;
      coord[a] = 0;
    }
  }
  return 0;
}
