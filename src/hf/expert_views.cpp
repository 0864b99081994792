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

constexpr std::uint64_t kMxfp4Codes = 16;  // its bytes of E2M1 codes
constexpr std::uint64_t kMxfp4Bytes = 17;  // its scale byte, then the codes

// "<NAME what>", appended piece by piece (GCC 12 warns, wrongly, of overlapping copies in "<" + s + ">").
std::string view_name(std::string_view tensor, std::string_view what) {
  std::string out = "<";
  out.append(printable(tensor)).append(" ").append(what).append(">");
  return out;
}

Error bad(const TensorEntry& e, const std::string& why) { return Error(ErrorKind::InvalidArgument, why).with_tensor(e.name); }

// A source whose bytes are rows of `row_bytes` of experts of `per_expert` rows each, made a batch at a
// time by `make_rows(e, j0, n, out)` (rows j0 ... j0 + n - 1 of expert e), so that neighbouring rows are
// read together: at most kBatchBytes of output (and what it takes to make them) held per read.
class RowSource : public ByteSource {
 public:
  RowSource(std::string name, std::uint64_t experts, std::uint64_t per_expert, std::uint64_t row_bytes)
      : name_(std::move(name)), per_expert_(per_expert), rows_(experts * per_expert), row_bytes_(row_bytes) {}
  const std::string& name() const noexcept override { return name_; }
  std::uint64_t size() const noexcept override { return rows_ * row_bytes_; }

  Status read_at(std::uint64_t offset, std::span<std::byte> dst) const override {
    SW_RETURN_IF_ERROR(check_range(offset, dst.size()));
    std::vector<std::byte> rows;
    for (std::uint64_t done = 0; done < dst.size();) {
      const std::uint64_t at = offset + done, row = at / row_bytes_, within = at % row_bytes_;
      const std::uint64_t wanted = (within + dst.size() - done + row_bytes_ - 1) / row_bytes_;
      const std::uint64_t n = std::min({wanted, std::max<std::uint64_t>(1, kBatchBytes / row_bytes_), per_expert_ - row % per_expert_});
      rows.resize(static_cast<std::size_t>(n * row_bytes_));
      SW_RETURN_IF_ERROR(make_rows(row / per_expert_, row % per_expert_, n, rows));
      const std::uint64_t take = std::min<std::uint64_t>(dst.size() - done, n * row_bytes_ - within);
      std::memcpy(dst.data() + done, rows.data() + within, static_cast<std::size_t>(take));
      done += take;
    }
    return Status::ok();
  }

 protected:
  virtual Status make_rows(std::uint64_t expert, std::uint64_t first, std::uint64_t n, std::span<std::byte> out) const = 0;

 private:
  static constexpr std::uint64_t kBatchBytes = 1u << 20;
  std::string name_;
  std::uint64_t per_expert_, rows_, row_bytes_;
};

// Row (e, j) of the transpose: column cols.begin + j * cols.step of expert e's R input rows. A batch
// reads, from each input row, the one run of columns its rows span.
class Transposed final : public RowSource {
 public:
  Transposed(const TensorEntry& in, Strided cols, std::uint64_t element_bytes)
      : RowSource(view_name(in.name, "transposed"), in.shape[0], cols.count, in.shape[1] * element_bytes),
        source_(in.source),
        offset_(in.offset),
        r_(in.shape[1]),
        c_(in.shape[2]),
        cols_(cols),
        es_(element_bytes) {}

 protected:
  Status make_rows(std::uint64_t e, std::uint64_t first, std::uint64_t n, std::span<std::byte> out) const override {
    const std::uint64_t column = cols_.begin + first * cols_.step, span = (n - 1) * cols_.step + 1;  // columns read per input row
    const std::byte* from = source_->mapped();
    std::vector<std::byte> runs;
    if (from == nullptr) {  // no mapping: one read per input row, all in one scatter
      runs.resize(static_cast<std::size_t>(r_ * span * es_));
      std::vector<ReadRequest> reads(static_cast<std::size_t>(r_));
      for (std::uint64_t r = 0; r < r_; ++r)
        reads[r] = {offset_ + ((e * r_ + r) * c_ + column) * es_, std::span(runs).subspan(static_cast<std::size_t>(r * span * es_), span * es_)};
      SW_RETURN_IF_ERROR(source_->read_scatter(reads));
    }
    for (std::uint64_t r = 0; r < r_; ++r) {
      const std::byte* row = from ? from + offset_ + ((e * r_ + r) * c_ + column) * es_ : runs.data() + r * span * es_;
      for (std::uint64_t j = 0; j < n; ++j) std::memcpy(out.data() + (j * r_ + r) * es_, row + j * cols_.step * es_, es_);
    }
    return Status::ok();
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
// code bytes, as K ggml blocks. A batch reads the input rows it spans with two reads.
class Mxfp4Repacked final : public RowSource {
 public:
  Mxfp4Repacked(const TensorEntry& blocks, const TensorEntry& scales, Strided rows)
      : RowSource(view_name(blocks.name, "repacked as MXFP4"), blocks.shape[0], rows.count, blocks.shape[2] * kMxfp4Bytes),
        blocks_(blocks),
        scales_(scales),
        r_(blocks.shape[1]),
        k_(blocks.shape[2]),
        rows_(rows) {}

 protected:
  Status make_rows(std::uint64_t e, std::uint64_t first, std::uint64_t n, std::span<std::byte> out) const override {
    const std::uint64_t input_row = e * r_ + rows_.begin + first * rows_.step, span = (n - 1) * rows_.step + 1;
    std::vector<std::byte> codes(static_cast<std::size_t>(span * k_ * kMxfp4Codes)), exponents(static_cast<std::size_t>(span * k_));
    SW_RETURN_IF_ERROR(blocks_.source->read_at(blocks_.offset + input_row * k_ * kMxfp4Codes, codes));
    SW_RETURN_IF_ERROR(scales_.source->read_at(scales_.offset + input_row * k_, exponents));
    for (std::uint64_t j = 0; j < n; ++j) {
      const std::uint64_t from = j * rows_.step * k_;  // the input row's first block, in the batch
      for (std::uint64_t k = 0; k < k_; ++k) {
        std::byte* block = out.data() + (j * k_ + k) * kMxfp4Bytes;
        block[0] = exponents[from + k];
        repack_codes(codes.data() + (from + k) * kMxfp4Codes, block + 1);
      }
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
