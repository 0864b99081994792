// numpy basic indexing -> byte runs. Python semantics follow slice.indices(): clamped bounds,
// negative indices counted from the end, negative steps walking backwards.
#include "safeweights/slice.h"

#include <utility>

#include "core/status_macros.h"
#include "core/strings.h"

namespace safeweights {
namespace {

__extension__ using i128 = __int128;

Error spec_error(std::string message) { return Error(ErrorKind::InvalidSliceSpec, std::move(message)); }

// An integer in Python syntax (optional sign, digits, '_' separators). Values beyond int64 saturate
// (and set *saturated when given): for slice bounds that is exactly Python's clamping.
Result<std::int64_t> parse_int(std::string_view text, std::string_view item, bool* saturated = nullptr) {
  std::string_view s = trim(text);
  bool negative = false;
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) {
    negative = s.front() == '-';
    s = trim(s.substr(1));
  }
  if (s.empty()) return spec_error("expected an integer in `" + std::string(item) + "`");
  i128 value = 0;
  bool last_underscore = true;  // no leading '_'
  for (char c : s) {
    if (c == '_' && !last_underscore) {
      last_underscore = true;
      continue;
    }
    if (c < '0' || c > '9') return spec_error("expected an integer in `" + std::string(item) + "`");
    last_underscore = false;
    if (value < (i128{1} << 64)) value = value * 10 + (c - '0');
  }
  if (last_underscore) return spec_error("expected an integer in `" + std::string(item) + "`");
  if (negative) value = -value;
  if (saturated != nullptr) *saturated = value > INT64_MAX || value < INT64_MIN;
  if (value > INT64_MAX) return INT64_MAX;
  if (value < INT64_MIN) return INT64_MIN;
  return static_cast<std::int64_t>(value);
}

Result<SliceItem> parse_item(std::string_view raw) {
  std::string_view item = trim(raw);
  if (item == "...") return SliceItem::ellipsis();
  if (item == "None" || item == "newaxis" || item == "np.newaxis") return SliceItem::new_axis();
  if (item.find(':') == std::string_view::npos) {
    bool saturated = false;
    SW_ASSIGN_OR_RETURN(std::int64_t index, parse_int(item, item, &saturated));
    // No tensor has an axis that long; say so with the number as written, not a saturated one.
    if (saturated) {
      return Error(ErrorKind::SliceOutOfRange, "index " + std::string(item) + " is out of bounds (beyond 64 bits)");
    }
    return SliceItem::at(index);
  }
  std::optional<std::int64_t> parts[3];
  std::size_t count = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= item.size(); ++i) {
    if (i == item.size() || item[i] == ':') {
      if (count == 3) return spec_error("too many ':' in `" + std::string(item) + "`");
      std::string_view part = trim(item.substr(start, i - start));
      if (!part.empty()) {
        SW_ASSIGN_OR_RETURN(std::int64_t v, parse_int(part, item));
        parts[count] = v;
      }
      ++count;
      start = i + 1;
    }
  }
  return SliceItem::range(parts[0], parts[1], parts[2]);
}

struct Normalized {
  std::uint64_t start;  // first index
  std::int64_t step;    // signed step
  std::uint64_t count;  // number of indices
  bool keep;            // false for an integer index (the dimension is dropped)
};

// Python's slice.indices(len) followed by the length computation, in 128-bit arithmetic so that any
// int64 bound against any u64 dimension is exact.
Normalized normalize_range(const SliceItem& item, std::uint64_t dim) {
  const i128 len = dim;
  const i128 step = item.step ? *item.step : 1;
  const i128 lower = step > 0 ? 0 : -1;
  const i128 upper = step > 0 ? len : len - 1;
  auto clamp = [&](std::optional<std::int64_t> v, i128 dflt) -> i128 {
    if (!v) return dflt;
    i128 x = *v;
    if (x < 0) {
      x += len;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  const i128 start = clamp(item.start, step > 0 ? lower : upper);
  const i128 stop = clamp(item.stop, step > 0 ? upper : lower);
  i128 count = 0;
  if (step > 0 && stop > start) count = (stop - start + step - 1) / step;
  if (step < 0 && start > stop) count = (start - stop + (-step) - 1) / (-step);
  Normalized n;
  n.start = count > 0 ? static_cast<std::uint64_t>(start) : 0;
  n.step = static_cast<std::int64_t>(step);
  n.count = static_cast<std::uint64_t>(count);
  n.keep = true;
  return n;
}

std::string render_int(std::optional<std::int64_t> v) { return v ? std::to_string(*v) : std::string(); }

}  // namespace

Result<SliceSpec> SliceSpec::parse(std::string_view text) {
  SliceSpec spec;
  std::string_view body = trim(text);
  // What goes between the brackets, never the brackets: `[0]` would read as a list index elsewhere.
  if (body.find_first_of("[]") != std::string_view::npos) {
    std::string message = "`";
    message += text;
    message += "`: write what goes between numpy's brackets, without them (`0, 1:3`)";
    return spec_error(std::move(message));
  }
  if (body.empty()) return spec;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= body.size(); ++i) {
    if (i == body.size() || body[i] == ',') {
      std::string_view part = body.substr(start, i - start);
      // A trailing comma is allowed, as in Python's `a[1,]`.
      if (i == body.size() && trim(part).empty() && !spec.items.empty()) break;
      if (trim(part).empty()) return spec_error("empty index in `" + std::string(text) + "`");
      SW_ASSIGN_OR_RETURN(SliceItem item, parse_item(part));
      spec.items.push_back(item);
      if (spec.items.size() > 4096) return spec_error("too many indices");
      start = i + 1;
    }
  }
  return spec;
}

std::string SliceSpec::to_string() const {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    const SliceItem& it = items[i];
    switch (it.kind) {
      case SliceItem::Kind::Index: out += std::to_string(it.index); break;
      case SliceItem::Kind::Ellipsis: out += "..."; break;
      case SliceItem::Kind::NewAxis: out += "None"; break;
      case SliceItem::Kind::Range:
        out += render_int(it.start);
        out += ':';
        out += render_int(it.stop);
        if (it.step) {
          out += ':';
          out += std::to_string(*it.step);
        }
        break;
    }
  }
  return out;
}

namespace {

// The spec against a shape: one selection per source dimension (`...` expanded, the dimensions the spec
// does not reach selected in full), and the new axes (size 1) the result has before each dimension.
struct Selection {
  std::vector<Normalized> dims;
  std::vector<int> new_axes_before;  // shape.size() + 1 entries: before dimension i, and after the last
};

Result<Selection> select_dimensions(std::span<const std::uint64_t> shape, const SliceSpec& spec) {
  std::size_t consuming = 0;
  std::size_t ellipses = 0;
  for (const SliceItem& it : spec.items) {
    if (it.kind == SliceItem::Kind::Ellipsis)
      ++ellipses;
    else if (it.kind != SliceItem::Kind::NewAxis)
      ++consuming;
    if (it.kind == SliceItem::Kind::Range && it.step && *it.step == 0) return spec_error("slice step cannot be zero");
  }
  if (ellipses > 1) return spec_error("an index can only have a single ellipsis ('...')");
  if (consuming > shape.size()) {
    return Error(ErrorKind::TooManySlices,
                 "too many indices: " + std::to_string(consuming) + " for a tensor of rank " + std::to_string(shape.size()));
  }

  Selection sel;
  sel.new_axes_before.assign(shape.size() + 1, 0);
  sel.dims.reserve(shape.size());
  std::size_t dim = 0;
  for (const SliceItem& it : spec.items) {
    switch (it.kind) {
      case SliceItem::Kind::NewAxis: ++sel.new_axes_before[dim]; break;
      case SliceItem::Kind::Ellipsis:
        for (std::size_t k = 0; k < shape.size() - consuming; ++k, ++dim) sel.dims.push_back(normalize_range(SliceItem::range(), shape[dim]));
        break;
      case SliceItem::Kind::Index: {
        i128 i = it.index;
        if (i < 0) i += shape[dim];
        if (i < 0 || i >= static_cast<i128>(shape[dim])) {
          return Error(ErrorKind::SliceOutOfRange, "index " + std::to_string(it.index) + " is out of bounds for axis " + std::to_string(dim) +
                                                       " with size " + std::to_string(shape[dim]));
        }
        sel.dims.push_back({static_cast<std::uint64_t>(i), 1, 1, false});
        ++dim;
        break;
      }
      case SliceItem::Kind::Range:
        sel.dims.push_back(normalize_range(it, shape[dim]));
        ++dim;
        break;
    }
  }
  for (; dim < shape.size(); ++dim) sel.dims.push_back(normalize_range(SliceItem::range(), shape[dim]));
  return sel;
}

// The result's shape (new axes included) into `shape`; its element count, 0 when a dimension selects
// nothing (then the other counts may overflow: an empty result has no bytes to address).
Result<std::uint64_t> result_shape(const Selection& sel, std::vector<std::uint64_t>& shape) {
  const std::size_t rank = sel.dims.size();
  std::uint64_t elements = 1;
  bool empty = false;
  for (std::size_t d = 0; d <= rank; ++d) {
    for (int k = 0; k < sel.new_axes_before[d]; ++k) shape.push_back(1);
    if (d == rank) break;
    if (sel.dims[d].keep) shape.push_back(sel.dims[d].count);
    if (sel.dims[d].count == 0)
      empty = true;
    else if (!empty && __builtin_mul_overflow(elements, sel.dims[d].count, &elements)) {
      return Error(ErrorKind::ValidationOverflow, "slice element count overflows");
    }
  }
  return empty ? 0 : elements;
}

// The tensor seen in storage units: elements of a plain type, or blocks of a block-quantized one, which
// run along the innermost dimension and cannot be split (so that dimension must be selected whole, and
// its selection is then counted in blocks).
struct Units {
  std::vector<std::uint64_t> extent;  // units along each source dimension
  std::uint64_t bits = 0;             // of one unit
  std::uint64_t selected_bits = 0;    // of the whole selection
};

Result<Units> storage_units(std::span<const std::uint64_t> shape, TensorType dtype, std::vector<Normalized>& dims, std::uint64_t elements) {
  const TensorTypeInfo& type = type_info(dtype);
  Units units{std::vector<std::uint64_t>(shape.begin(), shape.end()), type.bits, 0};
  std::uint64_t unit_count = elements;
  if (type.is_block()) {
    const bool whole_rows = !shape.empty() && dims.back().keep && dims.back().start == 0 && dims.back().step == 1 &&
                            dims.back().count == shape.back() && shape.back() % type.block_elements == 0;
    if (!whole_rows) {
      return Error(ErrorKind::InvalidSliceSpec, std::string(type.name) +
                                                    " tensors can be sliced along their outer dimensions only: the innermost holds blocks of " +
                                                    std::to_string(type.block_elements) + " elements");
    }
    units.extent.back() = shape.back() / type.block_elements;
    dims.back().count = units.extent.back();
    units.bits = std::uint64_t{type.block_bytes} * 8;
    unit_count = elements / type.block_elements;
  }
  if (__builtin_mul_overflow(unit_count, units.bits, &units.selected_bits)) {
    return Error(ErrorKind::ValidationOverflow, "slice byte size overflows");
  }
  return units;
}

// Where the selected bytes lie: runs of `run_bytes` from `first_byte`, stepped through by `loops` (the
// dimensions outside a run that select more than one index, outermost first).
struct Runs {
  std::vector<std::pair<std::uint64_t, std::int64_t>> loops;  // (count, step in bytes)
  std::uint64_t first_byte = 0;
  std::uint64_t run_bytes = 0;
};

Error misaligned(TensorType dtype) {
  return Error(ErrorKind::MisalignedSlice, "slice of a " + std::string(type_name(dtype)) + " tensor does not fall on byte boundaries");
}

Result<Runs> byte_runs(const Units& units, const std::vector<Normalized>& dims, TensorType dtype) {
  const std::vector<std::uint64_t>& extent = units.extent;
  // Strides in bits, innermost first. The source is non-empty here, so every stride is bounded by
  // the source tensor's size (checked once more below).
  std::vector<std::uint64_t> stride(extent.size());
  std::uint64_t s = units.bits;
  for (std::size_t d = extent.size(); d-- > 0;) {
    stride[d] = s;
    if (__builtin_mul_overflow(s, extent[d], &s)) return Error(ErrorKind::ValidationOverflow, "tensor size overflows");
  }
  if (s > static_cast<std::uint64_t>(INT64_MAX)) return Error(ErrorKind::ValidationOverflow, "tensor too large to slice");

  // The innermost dimensions selected in full (step 1, every index) form one contiguous run together
  // with the innermost partially-selected dimension when its step is 1.
  std::size_t inner = extent.size();  // dims [inner, rank) are contiguous within a run
  while (inner > 0 && dims[inner - 1].keep && dims[inner - 1].step == 1 && dims[inner - 1].start == 0 && dims[inner - 1].count == extent[inner - 1]) {
    --inner;
  }
  std::uint64_t run_bits = inner < extent.size() ? stride[inner] * extent[inner] : units.bits;
  if (inner < extent.size() && inner == 0) run_bits = s;
  std::size_t loop_end = inner;  // dims [0, loop_end) are iterated
  if (inner > 0 && dims[inner - 1].step == 1) {
    run_bits = stride[inner - 1] * dims[inner - 1].count;
    loop_end = inner - 1;
  }

  std::uint64_t first_bit = 0;
  for (std::size_t d = 0; d < extent.size(); ++d) first_bit += dims[d].start * stride[d];

  Runs runs;
  for (std::size_t d = 0; d < loop_end; ++d) {
    if (dims[d].count <= 1) continue;
    const std::int64_t step_bits = dims[d].step * static_cast<std::int64_t>(stride[d]);
    if (step_bits % 8 != 0) return misaligned(dtype);
    runs.loops.emplace_back(dims[d].count, step_bits / 8);
  }
  if (first_bit % 8 != 0 || run_bits % 8 != 0) return misaligned(dtype);
  runs.first_byte = first_bit / 8;
  runs.run_bytes = run_bits / 8;
  return runs;
}

}  // namespace

Result<SlicePlan> plan_slice(std::span<const std::uint64_t> shape, TensorType dtype, const SliceSpec& spec, std::uint64_t base_offset) {
  SW_ASSIGN_OR_RETURN(Selection sel, select_dimensions(shape, spec));
  SlicePlan plan;
  SW_ASSIGN_OR_RETURN(plan.elements_, result_shape(sel, plan.shape_));
  if (plan.elements_ == 0) return plan;  // no bytes, no runs; strides of an empty source are never needed
  SW_ASSIGN_OR_RETURN(Units units, storage_units(shape, dtype, sel.dims, plan.elements_));
  SW_ASSIGN_OR_RETURN(Runs runs, byte_runs(units, sel.dims, dtype));
  for (const auto& [count, step_bytes] : runs.loops) plan.loops_.push_back({count, step_bytes});
  plan.run_bytes_ = runs.run_bytes;
  plan.nbytes_ = units.selected_bits / 8;
  plan.runs_ = plan.nbytes_ / plan.run_bytes_;
  if (__builtin_add_overflow(base_offset, runs.first_byte, &plan.first_offset_)) {
    return Error(ErrorKind::ValidationOverflow, "slice offset overflows");
  }
  return plan;
}

}  // namespace safeweights
