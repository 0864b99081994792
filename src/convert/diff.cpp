// Comparing two tensors value by value (include/safeweights/convert.h, compare_tensors): both are read
// in pieces of whole blocks, decoded to float64 and folded into running sums.
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

constexpr std::uint64_t kPieceElements = 1u << 20;

template <typename T>
void decode_plain(std::span<const std::byte> src, std::span<double> dst) {
  for (std::size_t i = 0; i < dst.size(); ++i) {
    T v;
    std::memcpy(&v, src.data() + i * sizeof(T), sizeof(T));
    dst[i] = static_cast<double>(v);
  }
}

// Integers, BOOL and F64 directly; everything dequantize() knows through float32.
Status decode(TensorType type, std::span<const std::byte> src, std::span<double> dst, std::vector<float>& scratch) {
  switch (type) {
    case TensorType::BOOL:
    case TensorType::U8: decode_plain<std::uint8_t>(src, dst); return Status::ok();
    case TensorType::I8: decode_plain<std::int8_t>(src, dst); return Status::ok();
    case TensorType::U16: decode_plain<std::uint16_t>(src, dst); return Status::ok();
    case TensorType::I16: decode_plain<std::int16_t>(src, dst); return Status::ok();
    case TensorType::U32: decode_plain<std::uint32_t>(src, dst); return Status::ok();
    case TensorType::I32: decode_plain<std::int32_t>(src, dst); return Status::ok();
    case TensorType::U64: decode_plain<std::uint64_t>(src, dst); return Status::ok();
    case TensorType::I64: decode_plain<std::int64_t>(src, dst); return Status::ok();
    case TensorType::F64: decode_plain<double>(src, dst); return Status::ok();
    default: break;
  }
  if (!can_dequantize(type)) return Error(ErrorKind::NotSupported, "comparing " + std::string(type_name(type)) + " values is not supported");
  scratch.resize(dst.size());
  SW_RETURN_IF_ERROR(dequantize(type, src, scratch));
  for (std::size_t i = 0; i < dst.size(); ++i) dst[i] = scratch[i];
  return Status::ok();
}

// Elements [e0, e1) of a tensor as float64.
class Decoder {
 public:
  explicit Decoder(const TensorEntry& e) : e_(e) {}
  Status read(std::uint64_t e0, std::uint64_t e1, std::vector<double>& out) {
    SW_ASSIGN_OR_RETURN(std::span<const std::byte> src, convert_detail::read_elements(e_, e0, e1, bytes_));
    out.resize(static_cast<std::size_t>(e1 - e0));
    return decode(e_.type, src, out, scratch_);
  }

 private:
  const TensorEntry& e_;
  std::vector<std::byte> bytes_;
  std::vector<float> scratch_;
};

struct Sums {
  double max_abs = 0, sq = 0, dot = 0, aa = 0, bb = 0;
  std::uint64_t finite = 0, mismatches = 0;
  void add(double a, double b) {
    if (!std::isfinite(a) || !std::isfinite(b)) {
      if (!((std::isnan(a) && std::isnan(b)) || a == b)) ++mismatches;
      return;
    }
    const double d = a - b;
    max_abs = std::max(max_abs, std::abs(d));
    sq += d * d;
    dot += a * b;
    aa += a * a;
    bb += b * b;
    ++finite;
  }
};

}  // namespace

Result<TensorDiff> compare_tensors(const TensorEntry& a, const TensorEntry& b) {
  const std::uint64_t n = a.num_elements();
  if (n != b.num_elements())
    return Error(ErrorKind::InvalidArgument, "tensors of " + std::to_string(n) + " and " + std::to_string(b.num_elements()) + " elements")
        .with_tensor(a.name);
  const std::uint64_t grain = std::lcm<std::uint64_t>(type_info(a.type).block_elements, type_info(b.type).block_elements);
  const std::uint64_t piece = std::max(grain, kPieceElements / grain * grain);
  Decoder da(a), db(b);
  std::vector<double> va, vb;
  Sums sums;
  for (std::uint64_t e0 = 0; e0 < n; e0 += piece) {
    SW_RETURN_IF_ERROR(check_cancelled());
    const std::uint64_t e1 = std::min(n, e0 + piece);
    if (Status s = da.read(e0, e1, va); !s.is_ok()) return error_of(s).with_tensor(a.name);
    if (Status s = db.read(e0, e1, vb); !s.is_ok()) return error_of(s).with_tensor(b.name);
    for (std::size_t i = 0; i < va.size(); ++i) sums.add(va[i], vb[i]);
  }
  // Done with their pages: comparing mapped files then holds about one tensor of each in memory.
  a.source->hint({a.offset, a.nbytes}, AccessHint::DontNeed);
  b.source->hint({b.offset, b.nbytes}, AccessHint::DontNeed);
  TensorDiff d;
  d.elements = n;
  d.max_abs = sums.max_abs;
  d.rmse = sums.finite ? std::sqrt(sums.sq / static_cast<double>(sums.finite)) : 0;
  d.cosine = sums.aa == 0 && sums.bb == 0 ? 1 : (sums.aa == 0 || sums.bb == 0 ? 0 : sums.dot / (std::sqrt(sums.aa) * std::sqrt(sums.bb)));
  d.nonfinite_mismatches = sums.mismatches;
  return d;
}

}  // namespace safeweights
