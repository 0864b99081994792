// Assembled tensors (convert/assemble.h): pieces checked against their inputs, then any element range
// of the output mapped back onto the pieces' bytes. All counts are elements until a run is emitted;
// every quantity is bounded by an input tensor's validated size, so only the output's own sums and
// products are checked for overflow.
#include "convert/assemble.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/status_macros.h"
#include "safeweights/text.h"

namespace safeweights::convert_detail {
namespace {

constexpr std::uint64_t kScatterRun = 4096;  // a run at least this long is read by itself
constexpr std::uint64_t kWindow = 1u << 20;  // at most this much read at once to pick closer runs from

std::string piece_label(std::size_t i, std::string_view source) { return "piece " + std::to_string(i) + " (`" + printable(source) + "`)"; }

std::uint64_t product(std::span<const std::uint64_t> dims) {
  return std::accumulate(dims.begin(), dims.end(), std::uint64_t{1}, std::multiplies<>());
}

// The view of `piece` on its input tensor `e`, and the piece's own shape.
Result<PieceView> view_of(const TensorEntry& e, const TensorPiece& piece, const std::string& label, std::vector<std::uint64_t>& shape) {
  shape.assign(e.shape.begin(), e.shape.end());
  PieceView v{.entry = &e, .inner = e.num_elements()};
  if (piece.begin == 0 && piece.end == 0 && piece.step == 1) return v;  // the whole tensor (a scalar too)
  if (piece.dim >= shape.size())
    return Error(ErrorKind::InvalidSliceSpec, label + ": no dimension " + std::to_string(piece.dim) + " in shape " + shape_string(shape));
  if (piece.step == 0) return Error(ErrorKind::InvalidSliceSpec, label + ": step 0");
  const std::uint64_t size = shape[piece.dim], end = piece.end == 0 ? size : piece.end;
  if (piece.begin >= end || end > size)
    return Error(ErrorKind::SliceOutOfRange, label + ": [" + std::to_string(piece.begin) + ", " + std::to_string(end) +
                                                 ") is not a non-empty range of dimension " + std::to_string(piece.dim) + " of shape " +
                                                 shape_string(shape));
  const std::uint64_t count = (end - piece.begin - 1) / piece.step + 1;
  shape[piece.dim] = count;
  if (count == size) return v;  // every index, in order
  const std::span<const std::uint64_t> dims = e.shape;
  return PieceView{.entry = &e,
                   .outer = product(dims.first(piece.dim)),
                   .size = size,
                   .begin = piece.begin,
                   .step = piece.step,
                   .count = count,
                   .inner = product(dims.subspan(piece.dim + 1))};
}

// A type stored in units of several elements (blocks, sub-byte types) is cut only between units: its
// pieces' rows are whole units, and a slice of the innermost dimension starts at one and takes every
// element.
Status check_units(ByteUnit unit, TensorType type, const TensorPiece& piece, std::span<const std::uint64_t> shape, const std::string& label) {
  if (unit.elements == 1) return Status::ok();
  const std::string what = std::string(type_name(type)) + "'s units of " + std::to_string(unit.elements) + " elements";
  if (shape.empty() || shape.back() % unit.elements != 0)
    return Error(ErrorKind::InvalidBlockShape, label + ": rows of shape " + shape_string(shape) + " are not whole " + what);
  const bool whole = piece.begin == 0 && piece.end == 0 && piece.step == 1;
  if (!whole && piece.dim + 1 == shape.size() && (piece.step != 1 || piece.begin % unit.elements != 0))
    return Error(ErrorKind::InvalidBlockShape, label + ": a slice of the innermost dimension must take every element from a start of " + what);
  return Status::ok();
}

}  // namespace

ByteUnit ByteUnit::of(TensorType type) {
  const TensorTypeInfo& info = type_info(type);
  if (info.is_block()) return {info.block_elements, info.block_bytes};
  const std::uint64_t elements = 8 / std::gcd<std::uint64_t>(info.bits, 8);
  return {elements, elements * info.bits / 8};
}

Result<std::unique_ptr<Assembly>> Assembly::make(const TensorFile& input, const ConvertTensor& t) {
  auto a = std::make_unique<Assembly>();
  std::vector<std::vector<std::uint64_t>> shapes(t.pieces.size());
  const auto bad = [&](ErrorKind kind, std::string message) { return Error(kind, std::move(message)).with_tensor(t.name); };
  if (t.pieces.empty()) return bad(ErrorKind::InvalidArgument, "no pieces to assemble");
  if (t.stack && t.join_dim != 0) return bad(ErrorKind::InvalidArgument, "stacked pieces take no join_dim");
  for (std::size_t i = 0; i < t.pieces.size(); ++i) {
    const TensorPiece& piece = t.pieces[i];
    const std::string label = piece_label(i, piece.source);
    const TensorEntry* e = input.find(piece.source);
    if (e == nullptr) return bad(ErrorKind::TensorNotFound, label + ": no such tensor in the input");
    if (i == 0) a->unit_ = ByteUnit::of(e->type);
    const TensorEntry* first = a->pieces_.empty() ? e : a->pieces_[0].entry;
    if (e->type != first->type)
      return bad(ErrorKind::InvalidArgument, label + " is " + std::string(type_name(e->type)) + ", " + piece_label(0, t.pieces[0].source) + " " +
                                                 std::string(type_name(first->type)));
    auto view = view_of(*e, piece, label, shapes[i]);
    if (!view.is_ok()) return error_of(view).with_tensor(t.name);
    if (Status s = check_units(a->unit_, e->type, piece, shapes[i], label); !s.is_ok()) return error_of(s).with_tensor(t.name);
    a->pieces_.push_back(*view);
  }
  // Every piece's shape, less the joined dimension, is piece 0's; the output's is that with the joined
  // dimension summed, or with the number of pieces put first.
  std::vector<std::uint64_t> expected = shapes[0];
  std::uint64_t outer = 1, joined = 0;
  if (!t.stack) {
    if (t.join_dim >= expected.size())
      return bad(ErrorKind::InvalidArgument, "join_dim " + std::to_string(t.join_dim) + " of pieces of shape " + shape_string(shapes[0]));
    expected[t.join_dim] = 0;
    outer = product(std::span(expected).first(t.join_dim));
  }
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    std::vector<std::uint64_t> s = shapes[i];
    if (!t.stack && s.size() == expected.size()) s[t.join_dim] = 0;
    if (s != expected)
      return bad(ErrorKind::InvalidArgument,
                 piece_label(i, t.pieces[i].source) + " has shape " + shape_string(shapes[i]) + ", " + piece_label(0, t.pieces[0].source) + " " +
                     shape_string(shapes[0]) +
                     (t.stack ? ": stacked pieces have one shape" : ": joined pieces differ only in dimension " + std::to_string(t.join_dim)));
    if (!t.stack && __builtin_add_overflow(joined, shapes[i][t.join_dim], &joined))
      return bad(ErrorKind::ValidationOverflow, "the joined dimension overflows 64 bits");
  }
  std::vector<std::uint64_t> shape = std::move(expected);
  if (t.stack)
    shape.insert(shape.begin(), t.pieces.size());
  else
    shape[t.join_dim] = joined;
  for (std::size_t i = 0; i < a->pieces_.size(); ++i) {
    a->start_.push_back(a->group_);
    a->block_.push_back(outer == 0 ? 0 : a->pieces_[i].elements() / outer);
    if (__builtin_add_overflow(a->group_, a->block_.back(), &a->group_))
      return bad(ErrorKind::ValidationOverflow, "the output's size overflows 64 bits");
  }
  if (Status s = a->set_shape(std::move(shape), t.name); !s.is_ok()) return error_of(s).with_tensor(t.name);
  if (a->pieces_.size() > 1) a->note_ = std::string(t.stack ? "stacked" : "joined") + " from " + std::to_string(a->pieces_.size());
  return a;
}

std::unique_ptr<Assembly> Assembly::whole(const TensorEntry& entry) {
  auto a = std::make_unique<Assembly>();
  a->unit_ = ByteUnit::of(entry.type);
  a->pieces_.push_back({.entry = &entry, .inner = entry.num_elements()});
  a->group_ = entry.num_elements();
  a->block_ = {a->group_};
  a->start_ = {0};
  a->name_ = std::string(entry.name);
  a->shape_.assign(entry.shape.begin(), entry.shape.end());
  a->entry_ = entry;
  a->entry_.name = a->name_;
  a->entry_.shape = a->shape_;
  return a;
}

Status Assembly::set_shape(std::vector<std::uint64_t> shape, std::string name) {
  name_ = std::move(name);
  shape_ = std::move(shape);
  const TensorType type = pieces_[0].entry->type;
  SW_ASSIGN_OR_RETURN(const std::uint64_t nbytes, tensor_nbytes(type, shape_));
  entry_ = TensorEntry{.name = name_, .type = type, .shape = shape_, .source = nullptr, .offset = 0, .nbytes = nbytes};
  return Status::ok();
}

bool Assembly::whole_pieces() const noexcept {
  if (pieces_.size() > 1 && group_ != entry_.num_elements()) return false;  // the join is inside each outer index
  return std::ranges::all_of(pieces_, [](const PieceView& p) { return p.count == 1 || (p.outer == 1 && p.step == 1); });
}

void Assembly::runs(std::uint64_t e0, std::uint64_t e1, std::vector<ByteRuns>& out) const {
  if (e0 >= e1) return;
  std::uint64_t group = e0 / group_, at = e0 % group_;
  // The last piece that starts at or before `at` (pieces with no elements start where the next does).
  std::size_t p = static_cast<std::size_t>(std::upper_bound(start_.begin(), start_.end(), at) - start_.begin()) - 1;
  for (std::uint64_t e = e0; e < e1;) {
    const std::uint64_t within = at - start_[p], n = std::min(e1 - e, block_[p] - within);
    if (n != 0) piece_runs(pieces_[p], group * block_[p] + within, n, out);
    e += n;
    at += n;
    if (at == start_[p] + block_[p] && ++p == pieces_.size()) {
      p = 0;
      at = 0;
      ++group;
    }
  }
}

void Assembly::piece_runs(const PieceView& v, std::uint64_t first, std::uint64_t n, std::vector<ByteRuns>& out) const {
  const auto emit = [&](std::uint64_t element, std::uint64_t length, std::uint64_t stride, std::uint64_t count) {
    const ByteRuns r{v.entry->source, v.entry->offset + unit_.bytes_of(element), unit_.bytes_of(length), unit_.bytes_of(stride), count};
    if (!out.empty()) {
      ByteRuns& last = out.back();
      if (count == 1 && last.count == 1 && last.source == r.source && last.offset + last.length == r.offset) {
        last.length += r.length;
        return;
      }
    }
    out.push_back(r);
  };
  const std::uint64_t plane = v.count * v.inner;  // the piece's elements per outer index
  while (n > 0) {
    const std::uint64_t q = first / plane, rem = first % plane, k = rem / v.inner, i = rem % v.inner;
    const std::uint64_t element = (q * v.size + v.begin + k * v.step) * v.inner + i;
    std::uint64_t taken = 0;
    if (v.step == 1 || v.count == 1) {
      taken = std::min(n, plane - rem);  // consecutive indices: one run to the end of this outer index
      emit(element, taken, taken, 1);
    } else if (i != 0 || n < v.inner) {
      taken = std::min(n, v.inner - i);  // part of one index
      emit(element, taken, taken, 1);
    } else {
      const std::uint64_t count = std::min(n / v.inner, v.count - k);  // whole indices, `step` apart
      taken = count * v.inner;
      emit(element, v.inner, v.step * v.inner, count);
    }
    first += taken;
    n -= taken;
  }
}

namespace {

// Copies the runs of `r` out of `from` (r.span() bytes starting at r.offset).
void pick(const ByteRuns& r, const std::byte* from, std::byte* dst) {
  if (r.stride == r.length) {
    std::memcpy(dst, from, r.bytes());
    return;
  }
  for (std::uint64_t j = 0; j < r.count; ++j) std::memcpy(dst + j * r.length, from + j * r.stride, r.length);
}

// Runs that are short and close: windows of whole runs, each read at once and picked from.
Status read_windowed(const ByteRuns& r, std::byte* dst, std::vector<std::byte>& window) {
  const std::uint64_t per = std::max<std::uint64_t>(1, (kWindow - std::min(kWindow, r.length)) / r.stride + 1);
  for (std::uint64_t j = 0; j < r.count; j += per) {
    const ByteRuns part{r.source, r.offset + j * r.stride, r.length, r.stride, std::min(per, r.count - j)};
    window.resize(static_cast<std::size_t>(part.span()));
    SW_RETURN_IF_ERROR(r.source->read_at(part.offset, window));
    pick(part, window.data(), dst + j * r.length);
  }
  return Status::ok();
}

}  // namespace

Status gather(std::span<const ByteRuns> runs, std::span<std::byte> dst, std::vector<std::byte>& window) {
  struct Request {
    const ByteSource* source;
    ReadRequest read;
  };
  struct Touched {
    const ByteSource* source;
    std::uint64_t begin, end;
  };
  std::vector<Request> requests;
  std::vector<Touched> touched;
  std::uint64_t at = 0;
  for (const ByteRuns& r : runs) {
    std::byte* to = dst.data() + at;
    at += r.bytes();
    if (const auto v = r.source->view(r.offset, r.span()); v.data() != nullptr) {
      pick(r, v.data(), to);
      auto t = std::ranges::find(touched, r.source, &Touched::source);
      if (t == touched.end()) t = touched.insert(t, {r.source, r.offset, r.offset});
      t->begin = std::min(t->begin, r.offset);
      t->end = std::max(t->end, r.offset + r.span());
    } else if (r.count == 1 || r.stride == r.length) {
      requests.push_back({r.source, {r.offset, std::span(to, r.bytes())}});
    } else if (r.length >= kScatterRun) {
      for (std::uint64_t j = 0; j < r.count; ++j) requests.push_back({r.source, {r.offset + j * r.stride, std::span(to + j * r.length, r.length)}});
    } else {
      SW_RETURN_IF_ERROR(read_windowed(r, to, window));
    }
  }
  // Done with these pages of a mapping: the process keeps a few pieces' rows, never a tensor.
  for (const Touched& t : touched) t.source->hint({t.begin, t.end - t.begin}, AccessHint::DontNeed);
  // One scatter read per source: a file reads adjacent runs with one call, HTTP merges nearby ones.
  std::ranges::stable_sort(requests, std::less<>(), &Request::source);
  std::vector<ReadRequest> batch;
  for (std::size_t i = 0; i < requests.size();) {
    batch.clear();
    const ByteSource* source = requests[i].source;
    for (; i < requests.size() && requests[i].source == source; ++i) batch.push_back(requests[i].read);
    SW_RETURN_IF_ERROR(source->read_scatter(batch));
  }
  return Status::ok();
}

}  // namespace safeweights::convert_detail
