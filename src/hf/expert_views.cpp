// Transposed and MXFP4-repacked expert sources (hf/expert_views.h). Both are computed a whole output row
// at a time (a row of the transpose: R elements; of the repack: K blocks) and copied where the read
// asks. Every size is checked when the source is made, against the input entries' validated sizes, so
// that a read's arithmetic stays below them.
#include "hf/expert_views.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "core/status_macros.h"
#include "safeweights/text.h"

namespace safeweights::hf {
namespace {

constexpr std::uint64_t kMxfp4Elements = 32;  // a block's elements
constexpr std::uint64_t kMxfp4Codes = 16;     // its bytes of E2M1 codes
constexpr std::uint64_t kMxfp4Bytes = 17;     // its scale byte, then the codes

Error bad(const TensorEntry& e, const std::string& why) { return Error(ErrorKind::InvalidArgument, why).with_tensor(e.name); }

// A source whose bytes are rows of `row_bytes`, each made by `make_row(row, out)`.
class RowSource : public ByteSource {
 public:
  RowSource(std::string name, std::uint64_t rows, std::uint64_t row_bytes) : name_(std::move(name)), rows_(rows), row_bytes_(row_bytes) {}
  const std::string& name() const noexcept override { return name_; }
  std::uint64_t size() const noexcept override { return rows_ * row_bytes_; }

  Status read_at(std::uint64_t offset, std::span<std::byte> dst) const override {
    SW_RETURN_IF_ERROR(check_range(offset, dst.size()));
    std::vector<std::byte> row(static_cast<std::size_t>(row_bytes_));
    for (std::uint64_t done = 0; done < dst.size();) {
      const std::uint64_t at = offset + done, r = at / row_bytes_, within = at % row_bytes_;
      const std::uint64_t n = std::min<std::uint64_t>(dst.size() - done, row_bytes_ - within);
      SW_RETURN_IF_ERROR(make_row(r, row));
      std::memcpy(dst.data() + done, row.data() + within, static_cast<std::size_t>(n));
      done += n;
    }
    return Status::ok();
  }

 protected:
  virtual Status make_row(std::uint64_t row, std::span<std::byte> out) const = 0;

 private:
  std::string name_;
  std::uint64_t rows_, row_bytes_;
};

// Row (e, j) of the transpose: column cols.begin + j * cols.step of expert e's R input rows, read as
// one strided run per input row.
class Transposed final : public RowSource {
 public:
  Transposed(const TensorEntry& in, Strided cols, std::uint64_t element_bytes)
      : RowSource("<" + printable(in.name) + " transposed>", in.shape[0] * cols.count, in.shape[1] * element_bytes),
        source_(in.source),
        offset_(in.offset),
        r_(in.shape[1]),
        c_(in.shape[2]),
        cols_(cols),
        es_(element_bytes) {}

 protected:
  Status make_row(std::uint64_t row, std::span<std::byte> out) const override {
    const std::uint64_t e = row / cols_.count, column = cols_.begin + row % cols_.count * cols_.step;
    if (const std::byte* mapped = source_->mapped()) {  // no read per element from a mapping
      for (std::uint64_t r = 0; r < r_; ++r) std::memcpy(out.data() + r * es_, mapped + offset_ + ((e * r_ + r) * c_ + column) * es_, es_);
      return Status::ok();
    }
    std::vector<ReadRequest> reads(static_cast<std::size_t>(r_));
    for (std::uint64_t r = 0; r < r_; ++r) {
      reads[r] = {offset_ + ((e * r_ + r) * c_ + column) * es_, out.subspan(static_cast<std::size_t>(r * es_), static_cast<std::size_t>(es_))};
    }
    return source_->read_scatter(reads);
  }

 private:
  const ByteSource* source_;
  std::uint64_t offset_, r_, c_;
  Strided cols_;
  std::uint64_t es_;
};

// ggml's order of one block's codes from OCP's: element i of OCP's block is nibble i % 2 (low first)
// of byte i / 2; ggml puts element j (j < 16) in the low nibble of byte j, element j + 16 in its high.
void repack_codes(const std::byte* ocp, std::byte* ggml) {
  const auto code = [&](std::uint64_t i) { return (std::to_integer<unsigned>(ocp[i / 2]) >> (i % 2 * 4)) & 0xFu; };
  for (std::uint64_t j = 0; j < kMxfp4Codes; ++j) ggml[j] = static_cast<std::byte>(code(j) | code(j + kMxfp4Codes) << 4);
}

// Row (e, j) of the repack: input row rows.begin + j * rows.step of expert e, its K scales and K x 16
// code bytes (two reads), as K ggml blocks.
class Mxfp4Repacked final : public RowSource {
 public:
  Mxfp4Repacked(const TensorEntry& blocks, const TensorEntry& scales, Strided rows)
      : RowSource("<" + printable(blocks.name) + " repacked as MXFP4>", blocks.shape[0] * rows.count, blocks.shape[2] * kMxfp4Bytes),
        blocks_(blocks),
        scales_(scales),
        r_(blocks.shape[1]),
        k_(blocks.shape[2]),
        rows_(rows) {}

 protected:
  Status make_row(std::uint64_t row, std::span<std::byte> out) const override {
    const std::uint64_t e = row / rows_.count, input_row = e * r_ + rows_.begin + row % rows_.count * rows_.step;
    std::vector<std::byte> codes(static_cast<std::size_t>(k_ * kMxfp4Codes)), exponents(static_cast<std::size_t>(k_));
    SW_RETURN_IF_ERROR(blocks_.source->read_at(blocks_.offset + input_row * k_ * kMxfp4Codes, codes));
    SW_RETURN_IF_ERROR(scales_.source->read_at(scales_.offset + input_row * k_, exponents));
    for (std::uint64_t k = 0; k < k_; ++k) {
      std::byte* block = out.data() + k * kMxfp4Bytes;
      block[0] = exponents[k];
      repack_codes(codes.data() + k * kMxfp4Codes, block + 1);
    }
    return Status::ok();
  }

 private:
  TensorEntry blocks_, scales_;
  std::uint64_t r_, k_;
  Strided rows_;
};

Status check_strided(const TensorEntry& e, Strided s, std::uint64_t size, const char* what) {
  if (s.count == 0 || s.step == 0 || s.begin >= size || (s.count - 1) > (size - 1 - s.begin) / s.step) {
    return bad(e, std::string(what) + " begin " + std::to_string(s.begin) + " step " + std::to_string(s.step) + " count " + std::to_string(s.count) +
                      " do not lie inside " + std::to_string(size));
  }
  return Status::ok();
}

}  // namespace

Result<SourcePtr> transposed_source(const TensorEntry& input, Strided cols) {
  const TensorTypeInfo& info = type_info(input.type);
  if (input.shape.size() != 3) return bad(input, "a transposed expert tensor must be [experts, rows, columns], not " + shape_string(input.shape));
  if (info.is_block() || info.bits % 8 != 0)
    return bad(input, "a transposed expert tensor must have whole-byte elements, not " + std::string(info.name));
  SW_RETURN_IF_ERROR(check_strided(input, cols, input.shape[2], "columns"));
  return SourcePtr(std::make_shared<Transposed>(input, cols, info.bits / 8));
}

Result<SourcePtr> mxfp4_repacked_source(const TensorEntry& blocks, const TensorEntry& scales, Strided rows) {
  const std::array<std::uint64_t, 4> pair = {scales.shape.size() == 3 ? scales.shape[0] : 0, scales.shape.size() == 3 ? scales.shape[1] : 0,
                                             scales.shape.size() == 3 ? scales.shape[2] : 0, kMxfp4Codes};
  if (blocks.type != TensorType::U8 || scales.type != TensorType::U8) return bad(blocks, "MXFP4 blocks and scales must be U8");
  if (!std::ranges::equal(blocks.shape, pair) || pair[2] == 0) {
    return bad(blocks, "MXFP4 blocks of shape " + shape_string(blocks.shape) + " do not pair with scales of shape " + shape_string(scales.shape) +
                           " (blocks [E, R, K, 16], scales [E, R, K])");
  }
  SW_RETURN_IF_ERROR(check_strided(blocks, rows, blocks.shape[1], "rows"));
  return SourcePtr(std::make_shared<Mxfp4Repacked>(blocks, scales, rows));
}

}  // namespace safeweights::hf
