// Expert tensors whose llama.cpp layout is not a slice of the checkpoint's bytes, presented as byte
// sources computed on read (for WithGenerated, hf/generated.h): gpt-oss's experts as transformers holds
// them, [E, in, out] (a transpose of llama.cpp's [E, out, in], gate and up interleaved along `out`), and
// its MXFP4 checkpoints' `*_blocks` / `*_scales` pairs repacked into ggml's MXFP4 blocks, bit for bit
// (conversion/gpt_oss.py: repack_mxfp4). A read touches only the input rows the output range needs:
// nothing is held beyond one read. Internal to src/hf.
//
// Thread safety: the sources are immutable; read_at may be called from several threads at once.
#pragma once

#include <cstdint>

#include "safeweights/error.h"
#include "safeweights/source.h"
#include "safeweights/tensor_file.h"

namespace safeweights::hf {

// Which indices of a dimension are taken: begin, begin + step, ... (count of them).
struct Strided {
  std::uint64_t begin = 0, step = 1, count = 0;
};

// The transpose of the last two dimensions of `input` [E, R, C] (a plain type), taking the columns
// `cols`: [E, cols.count, R], element (e, j, r) = input (e, r, cols.begin + j * cols.step).
// InvalidArgument for another rank, a block or sub-byte type, or columns outside C.
Result<SourcePtr> transposed_source(const TensorEntry& input, Strided cols);

// ggml's MXFP4 blocks of the rows `rows` of an OCP MXFP4 pair: `blocks` [E, R, K, 16] U8 (two E2M1
// codes a byte, the first in the low nibble) and `scales` [E, R, K] U8 (E8M0 exponents), as
// [E, rows.count, K * 32] MXFP4: per block its scale byte, then element j in the low nibble of byte j
// and element j + 16 in its high nibble. InvalidArgument for shapes or types that do not pair so.
Result<SourcePtr> mxfp4_repacked_source(const TensorEntry& blocks, const TensorEntry& scales, Strided rows);

}  // namespace safeweights::hf
