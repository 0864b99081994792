// Comparing two tensors value by value (include/safeweights/convert.h, compare_tensors): both are read
// in pieces of whole blocks and decoded, integers (every width, and BOOL) to exact 128-bit integers,
// everything else to float64. Equality is decided exactly, pair by pair, in one place (Pair below); the
// statistics are folded into sums kept with a power-of-two scale, so values near the largest double
// neither overflow nor lose the small ones.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "convert/pieces.h"
#include "core/status_macros.h"
#include "safeweights/cancel.h"
#include "safeweights/convert.h"
#include "safeweights/quantize.h"

namespace safeweights {
namespace {

__extension__ using i128 = __int128;

constexpr std::uint64_t kPieceElements = 1u << 20;
constexpr double kTwo100 = 1267650600228229401496703205376.0;  // 2^100: a double below it converts to i128

// Elements of one piece: exact integers, or float64 (F64 as it is, the rest as dequantize() gives them).
struct Values {
  bool integer = false;
  std::vector<i128> ints;
  std::vector<double> floats;
};

template <typename T>
void decode_int(std::span<const std::byte> src, std::vector<i128>& dst, std::size_t n) {
  dst.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src.data() + i * sizeof(T), sizeof(T));
    dst[i] = static_cast<i128>(v);
  }
}

Status decode(TensorType type, std::span<const std::byte> src, std::size_t n, Values& out, std::vector<float>& scratch) {
  out.integer = true;
  switch (type) {
    case TensorType::BOOL:
    case TensorType::U8: decode_int<std::uint8_t>(src, out.ints, n); return Status::ok();
    case TensorType::I8: decode_int<std::int8_t>(src, out.ints, n); return Status::ok();
    case TensorType::U16: decode_int<std::uint16_t>(src, out.ints, n); return Status::ok();
    case TensorType::I16: decode_int<std::int16_t>(src, out.ints, n); return Status::ok();
    case TensorType::U32: decode_int<std::uint32_t>(src, out.ints, n); return Status::ok();
    case TensorType::I32: decode_int<std::int32_t>(src, out.ints, n); return Status::ok();
    case TensorType::U64: decode_int<std::uint64_t>(src, out.ints, n); return Status::ok();
    case TensorType::I64: decode_int<std::int64_t>(src, out.ints, n); return Status::ok();
    default: break;
  }
  out.integer = false;
  out.floats.resize(n);
  if (type == TensorType::F64) {
    std::memcpy(out.floats.data(), src.data(), n * sizeof(double));
    return Status::ok();
  }
  if (!can_dequantize(type)) return Error(ErrorKind::NotSupported, "comparing " + std::string(type_name(type)) + " values is not supported");
  scratch.resize(n);
  SW_RETURN_IF_ERROR(dequantize(type, src, scratch));
  for (std::size_t i = 0; i < n; ++i) out.floats[i] = scratch[i];
  return Status::ok();
}

// Elements [e0, e1) of a tensor.
class Decoder {
 public:
  explicit Decoder(const TensorEntry& e) : e_(e) {}
  Status read(std::uint64_t e0, std::uint64_t e1, Values& out) {
    SW_ASSIGN_OR_RETURN(std::span<const std::byte> src, convert_detail::read_elements(e_, e0, e1, bytes_));
    return decode(e_.type, src, static_cast<std::size_t>(e1 - e0), out, scratch_);
  }

 private:
  const TensorEntry& e_;
  std::vector<std::byte> bytes_;
  std::vector<float> scratch_;
};

// An integer and a float64, exactly: equal when the float is that integer; their difference rounded once
// (whole part exact in 128 bits, then the fraction). For |f| >= 2^100 the integer is far below f's ulp.
bool int_equals(i128 i, double f) { return std::abs(f) < kTwo100 && std::trunc(f) == f && static_cast<i128>(f) == i; }
double int_minus(i128 i, double f) {
  if (std::abs(f) >= kTwo100) return static_cast<double>(i) - f;
  const double whole = std::trunc(f);
  return static_cast<double>(i - static_cast<i128>(whole)) - (f - whole);
}

// One position of both tensors: whether the values are equal (exactly), whether either is not finite,
// and, for finite pairs, both values and their difference as float64 (the difference rounded once, or
// +-inf when two floats near the largest double have opposite signs).
struct Pair {
  bool equal = true, finite = true;
  double a = 0, b = 0, d = 0;
};

template <bool AInt, bool BInt>
Pair pair_at(const Values& va, const Values& vb, std::size_t i) {
  Pair p;
  if constexpr (AInt && BInt) {
    const i128 x = va.ints[i], y = vb.ints[i];
    p.equal = x == y;
    p.a = static_cast<double>(x);
    p.b = static_cast<double>(y);
    p.d = static_cast<double>(x - y);
  } else if constexpr (AInt || BInt) {
    const i128 x = AInt ? va.ints[i] : vb.ints[i];
    const double f = AInt ? vb.floats[i] : va.floats[i];
    if (!std::isfinite(f)) {
      p.equal = p.finite = false;
      return p;
    }
    p.equal = int_equals(x, f);
    const double xd = static_cast<double>(x), d = int_minus(x, f);
    p.a = AInt ? xd : f;
    p.b = AInt ? f : xd;
    p.d = AInt ? d : -d;
  } else {
    const double x = va.floats[i], y = vb.floats[i];
    if (!std::isfinite(x) || !std::isfinite(y)) {
      p.finite = false;
      p.equal = (std::isnan(x) && std::isnan(y)) || x == y;
      return p;
    }
    p.equal = x == y;
    p.a = x;
    p.b = y;
    p.d = x - y;
  }
  return p;
}

// A sum kept as m * 2^e, so that the sums of squares of values near the largest double stay finite.
struct ScaledSum {
  double m = 0;
  int e = 0;
  void add(double part, int part_e) {
    if (part == 0) return;
    if (m == 0) {
      m = part;
      e = part_e;
    } else if (part_e > e) {
      m = std::ldexp(m, e - part_e) + part;
      e = part_e;
    } else {
      m += std::ldexp(part, part_e - e);
    }
  }
};

// The power of two k with max * 2^-k in (1/2, 1] (bounded below so that 2^-k stays a double).
int scale_of(double max) { return max == 0 ? 0 : std::max(std::ilogb(max) + 1, -1000); }

class Sums {
 public:
  template <bool AInt, bool BInt>
  void add_piece(const Values& va, const Values& vb, std::size_t n) {
    a_.clear();
    b_.clear();
    d_.clear();
    bool overflow = false;
    for (std::size_t i = 0; i < n; ++i) {
      const Pair p = pair_at<AInt, BInt>(va, vb, i);
      if (!p.equal) ++differing;
      if (!p.finite) {
        if (!p.equal) ++nonfinite;
        continue;
      }
      a_.push_back(p.a);
      b_.push_back(p.b);
      d_.push_back(p.d);
      overflow = overflow || std::isinf(p.d);
    }
    finite += a_.size();
    // A difference past the largest double: this piece's differences are kept halved (exactly, for
    // normal values), with one more power of two in their scale.
    const int half = overflow ? 1 : 0;
    if (overflow)
      for (std::size_t i = 0; i < d_.size(); ++i) d_[i] = a_[i] * 0.5 - b_[i] * 0.5;
    double max_a = 0, max_b = 0, max_d = 0;
    for (std::size_t i = 0; i < a_.size(); ++i) {
      max_a = std::max(max_a, std::abs(a_[i]));
      max_b = std::max(max_b, std::abs(b_[i]));
      max_d = std::max(max_d, std::abs(d_[i]));
    }
    const int ka = scale_of(max_a), kb = scale_of(max_b), kd = scale_of(max_d);
    const double sa = std::ldexp(1.0, -ka), sb = std::ldexp(1.0, -kb), sd = std::ldexp(1.0, -kd);
    double aa = 0, bb = 0, dot = 0, sq = 0;
    for (std::size_t i = 0; i < a_.size(); ++i) {
      const double x = a_[i] * sa, y = b_[i] * sb, z = d_[i] * sd;
      aa += x * x;
      bb += y * y;
      dot += x * y;
      sq += z * z;
    }
    aa_.add(aa, 2 * ka);
    bb_.add(bb, 2 * kb);
    dot_.add(dot, ka + kb);
    sq_.add(sq, 2 * (kd + half));
    if (half > max_e_) {  // the first halved piece: the maximum so far in halves too
      max_m_ = std::max(std::ldexp(max_m_, -1), max_d);
      max_e_ = 1;
    } else {
      max_m_ = std::max(max_m_, std::ldexp(max_d, half - max_e_));
    }
  }

  TensorDiff result(std::uint64_t elements) const;

  std::uint64_t differing = 0, nonfinite = 0, finite = 0;

 private:
  std::vector<double> a_, b_, d_;
  ScaledSum aa_, bb_, dot_, sq_;
  double max_m_ = 0;  // max |a - b| = max_m_ * 2^max_e_
  int max_e_ = 0;
};

TensorDiff Sums::result(std::uint64_t elements) const {
  TensorDiff d;
  d.elements = elements;
  d.differing = differing;
  d.nonfinite_mismatches = nonfinite;
  // rmse = sqrt(sq_.m / finite) * 2^(sq_.e / 2); sq_.e is even (every part's exponent is).
  const double rmse_m = finite && sq_.m > 0 ? std::sqrt(sq_.m / static_cast<double>(finite)) : 0;
  d.scale_exp2 = std::isfinite(std::ldexp(max_m_, max_e_)) ? 0 : 1;
  d.max_abs = std::ldexp(max_m_, max_e_ - d.scale_exp2);
  d.rmse = std::ldexp(rmse_m, sq_.e / 2 - d.scale_exp2);
  if (aa_.m == 0 && bb_.m == 0) {
    d.cosine = 1;
  } else if (aa_.m == 0 || bb_.m == 0) {
    d.cosine = 0;
  } else {
    const double c = std::ldexp(dot_.m / std::sqrt(aa_.m) / std::sqrt(bb_.m), dot_.e - aa_.e / 2 - bb_.e / 2);
    d.cosine = std::clamp(c, -1.0, 1.0);  // rounding may carry |c| a few ulps past 1
  }
  return d;
}

}  // namespace

Result<TensorDiff> compare_tensors(const TensorEntry& a, const TensorEntry& b) {
  const std::uint64_t n = a.num_elements();
  if (n != b.num_elements())
    return Error(ErrorKind::InvalidArgument, "tensors of " + std::to_string(n) + " and " + std::to_string(b.num_elements()) + " elements")
        .with_tensor(a.name);
  const std::uint64_t grain = std::lcm<std::uint64_t>(type_info(a.type).block_elements, type_info(b.type).block_elements);
  const std::uint64_t piece = std::max(grain, kPieceElements / grain * grain);
  Decoder da(a), db(b);
  Values va, vb;
  Sums sums;
  for (std::uint64_t e0 = 0; e0 < n; e0 += piece) {
    SW_RETURN_IF_ERROR(check_cancelled());
    const std::uint64_t e1 = std::min(n, e0 + piece);
    if (Status s = da.read(e0, e1, va); !s.is_ok()) return error_of(s).with_tensor(a.name);
    if (Status s = db.read(e0, e1, vb); !s.is_ok()) return error_of(s).with_tensor(b.name);
    const auto count = static_cast<std::size_t>(e1 - e0);
    if (va.integer && vb.integer)
      sums.add_piece<true, true>(va, vb, count);
    else if (va.integer)
      sums.add_piece<true, false>(va, vb, count);
    else if (vb.integer)
      sums.add_piece<false, true>(va, vb, count);
    else
      sums.add_piece<false, false>(va, vb, count);
  }
  // Done with their pages: comparing mapped files then holds about one tensor of each in memory.
  a.source->hint({a.offset, a.nbytes}, AccessHint::DontNeed);
  b.source->hint({b.offset, b.nbytes}, AccessHint::DontNeed);
  return sums.result(n);
}

}  // namespace safeweights
