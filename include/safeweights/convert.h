// safeweights/convert.h — conversion between tensor-file formats, with optional type change.
//
// convert() is a pipeline: a TensorFile (any format, open_tensors()) -> a plan (which tensors, renamed
// and permuted; a type policy; one copy per shared storage) -> the TensorSink of the output's format
// (Format::create, chosen by name or by the output's extension), one tensor in memory at a time,
// atomically. The file's metadata goes along, typed and format-neutral (safeweights/metadata.h), with a
// plan's own metadata set over it. A plan provider (hf::plan for a transformers Llama folder) returns a
// ConvertPlan; convert() knows no format.
//
// A target type (F32, F16, BF16, or a ggml block type) is applied as every output does it (integer,
// BOOL and F64 tensors keep their type; 1-D tensors and scalars become F32, as llama.cpp keeps them),
// then as the output's format stores it (Format::stored_type: GGUF falls back, as llama.cpp does, to
// the nearest type that fits a tensor whose rows are not a whole number of blocks; a format that cannot
// hold the type refuses it, naming the tensor), and the format updates the metadata carried
// (Format::retype_metadata: GGUF's general.file_type). Every decision is reported per tensor.
// Quantized inputs are dequantized with ggml's reference dequantizers (safeweights/quantize.h).
//
// Thread safety: convert() may run concurrently on different outputs; it uses the shared thread pool.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/folder.h"
#include "safeweights/format.h"
#include "safeweights/metadata.h"
#include "safeweights/tensor_file.h"
#include "safeweights/tensor_type.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

struct ConvertOptions {
  std::optional<TensorType> type;  // none: every tensor keeps its type
  // A llama-quantize file type and its knobs (safeweights/format.h), asked of the output's format
  // (Format::plan_mix) after `type`'s policy: the tensors it quantizes take its types, the rest keep
  // theirs. With importance weights, each quantized tensor's rows go through quantize_rows().
  std::optional<QuantizeMix> mix;
  unsigned threads = 0;  // 0: one per core
  ConvertPlan plan;
  bool carry_metadata = true;  // the input's metadata into the output (docs/GGUF.md, "Conversion")
  // One copy per shared storage (TensorFile::storage_of): a name that is the same tensor as a kept one
  // (the smallest name covering the whole storage, with the same type and shape) is left out and
  // recorded in the string map as "name": "kept name". Only with an empty plan.tensors.
  bool dedup = false;
  std::string to;      // the output format's registry name; empty: the output's extension decides
  WriteOptions write;  // durability, GGUF alignment, split files
  // Local files that no output file may be (by device and inode, links followed: another path, `..`,
  // a symbolic or hard link to one): InvalidArgument naming both, before anything is written.
  // convert() adds the input's own name; convert_path() every file its readers opened.
  std::vector<std::string> inputs;
  std::function<void(std::size_t tensors_done, std::uint64_t bytes_done)> progress;
  // Decide everything, write nothing (llama-quantize's --dry-run): the report says what each tensor
  // would become, bytes_written what a real run would write, and `files` is empty; no file is created
  // or replaced, and no tensor is read but what a plan reads to decide. NotSupported for a folder of
  // .bin weights to a folder (convert_path), which is several conversions.
  bool dry_run = false;
  // llama-quantize's --keep-split: the output cut into files where the input's tensors come from
  // another file (a split GGUF's layout, its tensors in order; write.split.starts), named as the split
  // writer names them. An input in one file is written as one file. InvalidArgument with split limits.
  bool keep_split = false;
};

// The names `--type` (and Python's `type=`) take as "every tensor this type", lower case: the float
// types and llama.cpp's usual quantizations. Any other name of llama-quantize's file types
// (safeweights/gguf.h is_llama_file_type) asks for its mix (ConvertOptions::mix); one of these asks
// for it when a mix option is given too.
std::span<const std::string_view> plain_type_names() noexcept;

// What happened to one tensor.
struct ConvertedTensor {
  std::string name;
  TensorType from;
  TensorType to;
  // How the tensor was assembled ("joined from 8", "stacked from 64"), then why `to` differs from the
  // requested type ("1-D", "rows of 100 are not a multiple of 256"), joined by "; "; or empty.
  std::string note;
};

struct ConvertReport {
  std::vector<ConvertedTensor> tensors;
  std::uint64_t bytes_written = 0;
  std::vector<std::string> files;  // the files written, in order
  // What the conversion inferred rather than read (an original download's Llama version, context
  // length), for the user to check: the CLI prints each on stderr.
  std::vector<std::string> notes;
};

Result<ConvertReport> convert(const TensorFile& input, const std::string& output_path, const ConvertOptions& options = {});

// What the CLI's and Python's convert do, routed by what the input is and what the output names:
// - `input` a folder without config.json, whatever the output: refused before a weight is read, never
//   written as a plain dump: InvalidModelFolder naming the file to give instead to convert its tensors
//   as plain tensors (the weights file, or the shards' index); NotSupported for Meta's original layout
//   and Mistral's native one (params.json beside consolidated.NN.pth or consolidated*.safetensors). A
//   folder with config.json is routed below; the consolidated* files beside it are never read.
// - `input` a folder of transformers' PyTorch weights (is_bin_folder), no `options.to`, and `output`
//   that names a folder (an existing folder, a path ending in `/`, or a last component with no `.`):
//   convert_bin_folder(), a folder transformers loads as it is.
// - such a folder and an output that is neither a folder nor a file convert writes (`out.bin`,
//   `model-v1.5`), or an existing folder named like a file (`out.gguf`): InvalidArgument saying what to
//   write instead, and so is a folder name that a written format's extension ends (`out.gguf/`): a
//   folder is never created or written under a file's name.
// - otherwise (any input, the output's extension or `options.to` picking its format, a .bin folder
//   included): open_tensors(input, entry, read); `opened` sees the file first; the plan of the plan
//   provider that knows the input folder and writes the output's format, when one does (a Hugging Face
//   model folder written as GGUF: hf::plan, safeweights/hf_gguf.h); then convert().
// Every local file read on the way (an index's shards, GGUF split parts, a folder's weights, config and
// tokenizer files) joins `options.inputs`, so no output file replaces one (InvalidArgument).
Result<ConvertReport> convert_path(const std::string& input, const std::string& output, ConvertOptions options, const FormatOptions& read = {},
                                   const std::string& entry = {}, const std::function<void(const TensorFile&)>& opened = {});

// Whether `folder` holds transformers' PyTorch weights: pytorch_model.bin or pytorch_model.bin.index.json.
bool is_bin_folder(const Folder& folder);
// The same for a folder's name, local or remote (safeweights/folder.h), opened with uncached_resolver().
bool is_bin_folder(const std::string& folder);

// Converts such a folder into a folder transformers' from_pretrained loads as it is:
// - `pytorch_model.bin` to `model.safetensors`, or the shards named by `pytorch_model.bin.index.json`
//   (each must hold exactly the tensors the index lists for it) to one `.safetensors` per shard
//   (pytorch_model-0000i-of-0000N.bin -> model-0000i-of-0000N.safetensors) plus
//   `model.safetensors.index.json` (the input index's metadata with each value's JSON type kept,
//   total_size recomputed, keys sorted). Each file is convert() of one checkpoint (opened with `read`;
//   `opened` sees it first), so `options` gives the type, dedup, durability and progress; a tensor list,
//   another format or split files are refused.
// - every other top-level regular file copied as it is (config.json, generation_config.json, the
//   tokenizer's files, README, ...), except weights and pickles (.bin .pt .pth .ckpt .pkl .pickle
//   .safetensors .gguf .h5 .msgpack .ot .onnx .npy .npz .joblib .dduf, and *.index.json); hidden files
//   and folders are left out; a symbolic link or special file is refused by name (UnsafePath), a file
//   over 256 MiB or 1 GiB of them in all (ResourceLimit).
// `output_folder` must be new or an empty folder (InvalidArgument otherwise). Everything is written into
// a staging folder `.<name>.sw-convert-<pid>-<random>` beside it, renamed to `output_folder` last: the
// output appears whole or not at all (a kill or Ctrl-C can leave the staging folder, never a partial
// output; the next conversion into the same output removes those whose process is gone).
// The report's files are the paths written, in order.
Result<ConvertReport> convert_bin_folder(const std::string& input_folder, const std::string& output_folder, const FormatOptions& read = {},
                                         const ConvertOptions& options = {}, const std::function<void(const TensorFile&)>& opened = {});

// How two tensors of the same element count differ, value by value. Integers of every width and BOOL
// are compared as exact integers (I64/U64 values above 2^53 included), with each other and with
// floats; block and half types are decoded through dequantize() (so as ggml's dequantizers compute
// them) and F64 is taken as it is. `differing` counts the positions whose values are not equal.
// Positions where either value is NaN or infinite count as equal when both are the same (both NaN, or
// the same infinity) and as a non-finite mismatch otherwise; they are left out of the statistics. The
// statistics are computed in float64 with scaled sums, so values near the largest double do not
// overflow them: cosine is in [-1, 1], 1 when both tensors are all zeros, 0 when one of them is.
struct TensorDiff {
  std::uint64_t elements = 0;
  double max_abs = 0;  // max |a - b|, times 2^-scale_exp2
  double rmse = 0;     // sqrt(mean((a - b)^2)) over the finite positions, times 2^-scale_exp2
  double cosine = 1;   // a.b / (|a| |b|)
  std::uint64_t nonfinite_mismatches = 0;
  std::uint64_t differing = 0;  // positions whose values differ (the non-finite mismatches included)
  // 0, or 1 when max |a - b| exceeds the largest double (values of opposite signs near it): max_abs and
  // rmse are then stated in halves, and their true values are twice the fields.
  int scale_exp2 = 0;
  bool identical() const noexcept { return differing == 0; }
};

// Streams both tensors in pieces (bounded memory whatever their size). InvalidArgument when the element
// counts differ; NotSupported for a type that cannot be decoded.
Result<TensorDiff> compare_tensors(const TensorEntry& a, const TensorEntry& b);

SAFEWEIGHTS_API_END
}  // namespace safeweights
