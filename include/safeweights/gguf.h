// safeweights/gguf.h — GGUF files (llama.cpp / ggml): a strict reader and a streaming writer.
//
// The reader takes versions 2 and 3, little-endian only (a byte-swapped file is refused by name). It
// copies the header (key/value metadata and tensor infos) once, checks every rule ggml's gguf.cpp
// applies plus a few it misses (docs/GGUF.md lists them), bounding every length by the bytes that
// remain before anything is allocated, and exposes the tensors as a TensorFile whose entries point into
// the file's ByteSource: views are zero-copy on a mapping, and over HTTP only the header is fetched.
//
// A split model (llama.cpp's gguf-split: files `PREFIX-00001-of-00003.gguf` ... holding the keys
// split.no, split.count and split.tensors.count) opens as one GgufFile from any of its files: every file
// is found beside the one named and checked (docs/GGUF.md, "Split files"); metadata comes from file 1.
// create() with WriteOptions::split writes such a set, all files or none.
//
// The writer is a TensorSink: metadata and tensor declarations first (the whole header and every
// offset are fixed then), then each tensor's bytes, in any order; version 3 with the layout ggml and
// gguf-py write (tensors in declaration order, each padded to the alignment, the last one too), so the
// bytes are deterministic. It writes through AtomicFile: the target appears only on finish().
//
// Thread safety: a GgufFile is immutable once opened; every const method may be called concurrently.
// A sink from create() has a single owner (TensorSink's rules, tensor_file.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/format.h"
#include "safeweights/metadata.h"
#include "safeweights/resolver.h"
#include "safeweights/source.h"
#include "safeweights/tensor_file.h"
#include "safeweights/tensor_type.h"

namespace safeweights::gguf {
SAFEWEIGHTS_API_BEGIN

// GGUF's metadata values are the neutral typed values (safeweights/metadata.h); the file's value type
// ids are read and written through GGUF's own table (src/gguf/layout.h), never as MetaType's numbers.
using ValueType = MetaType;
using Value = MetaValue;
using KeyValue = MetaEntry;
inline std::string_view value_type_name(ValueType type) noexcept { return meta_type_name(type); }

// The ggml spelling table: ggml type id <-> TensorType. Removed ids (4, 5, 31-33, 36-38) and unknown
// ones have no type.
std::optional<TensorType> type_from_ggml(std::uint32_t id) noexcept;
std::optional<std::uint32_t> ggml_id(TensorType type) noexcept;
// ggml's name of an id, also for the removed ones ("Q4_2"); empty for an unknown id.
std::string_view ggml_type_name(std::uint32_t id) noexcept;

inline constexpr std::uint32_t kDefaultAlignment = 32;
inline constexpr std::size_t kMaxDims = 4;
inline constexpr std::size_t kMaxTensorName = 63;  // bytes: ggml keeps names NUL-terminated in char[64]

// A tensor as the file declares it, beside its format-neutral TensorEntry (same index).
struct TensorRecord {
  std::uint32_t ggml_type = 0;
  std::span<const std::uint64_t> ne;  // GGUF order: ne[0] the innermost dimension
  std::uint64_t offset = 0;           // relative to the data section
};

class GgufFile : public TensorFile {
 public:
  virtual std::uint32_t version() const noexcept = 0;
  virtual std::uint32_t alignment() const noexcept = 0;
  // Where the data section starts in the file.
  virtual std::uint64_t data_offset() const noexcept = 0;
  // Every key/value pair, in file order.
  virtual std::span<const KeyValue> kv() const noexcept = 0;
  // nullptr when absent.
  virtual const Value* find_kv(std::string_view key) const noexcept = 0;
  // Per tensor, in tensors() order.
  virtual std::span<const TensorRecord> infos() const noexcept = 0;
  // File 1's source for a split model (each TensorEntry names its own source).
  virtual const SourcePtr& source() const noexcept = 0;

  // A split model: its files in order (file 0 holds the metadata), and the file holding a tensor
  // (index into tensors()). A single file is its own only split; TensorRecord offsets are relative to the
  // data section of the split that holds the tensor.
  virtual std::size_t split_count() const noexcept { return 1; }
  virtual const GgufFile& split(std::size_t) const noexcept { return *this; }
  virtual std::size_t split_of(std::size_t) const noexcept { return 0; }
};

// llama.cpp's split keys (value types UINT16, UINT16, INT32, as its gguf-split and gguf-py write them).
inline constexpr std::string_view kSplitNoKey = "split.no";
inline constexpr std::string_view kSplitCountKey = "split.count";
inline constexpr std::string_view kSplitTensorsCountKey = "split.tensors.count";
inline constexpr std::uint32_t kMaxSplits = 65535;  // split.count is a UINT16

// llama.cpp's split file name: "PREFIX-00002-of-00005.gguf" for number 2 (counting from 1) of 5.
std::string split_file_name(std::string_view prefix, std::uint32_t number, std::uint32_t count);
// The prefix, number (from 1) and count of a split file name (a path or URL); nullopt when `name` does
// not end in "-NNNNN-of-MMMMM.gguf" with 1 <= NNNNN <= MMMMM.
struct SplitName {
  std::string prefix;
  std::uint32_t number = 0, count = 0;
};
std::optional<SplitName> parse_split_file_name(std::string_view name);

// InvalidGguf for a broken rule (the message names the rule, the error the file, the key or tensor and
// the byte offset), InvalidBlockShape / ValidationOverflow from the type model, ResourceLimit,
// IoError / OutOfRange from the source. A file of a split model opens the whole model; its siblings are
// opened through options.resolver (plain files when null) by the names split_file_name() gives, and a
// missing one is FileNotFound naming it.
// FormatOptions used: backend, resolver, max_header_bytes.
Result<std::unique_ptr<GgufFile>> open(SourcePtr source, const FormatOptions& options = {});
Result<std::unique_ptr<GgufFile>> open(const std::string& path, const FormatOptions& options = {});

// llama.cpp's general.file_type (its llama_ftype) for a target type, the K-quants as their _S mixes;
// nullopt for a type llama.cpp has no file type for.
std::optional<std::uint32_t> llama_file_type(TensorType type) noexcept;

// Whether `name` is one of llama-quantize's file types (Q4_K_M, IQ3_M, Q8_0, ...; any case) or their
// numbers (15): what QuantizeMix::file_type takes (safeweights/format.h; docs/GGUF.md, "Quantization mixes").
bool is_llama_file_type(std::string_view name) noexcept;

// llama-quantize's --override-kv KEY=TYPE:VALUE as the entry it writes over the output's metadata:
// int:N (C's atol, written UINT32 |N| as llama.cpp does), float:X (atof, written FLOAT32), bool:true or
// bool:false, str:TEXT (at most 127 bytes). InvalidArgument naming the rule for a key of 128 bytes or
// more, no '=', another type or a bad bool or string (what QuantizeMix::override_kv takes).
Result<MetaEntry> parse_kv_override(std::string_view spec);

// A ggml type by its name in any case, as llama-quantize's --tensor-type and --output-tensor-type take
// it ("q8_0", "NVFP4"). InvalidArgument "`where` NAME: not a ggml type name" for any other.
Result<TensorType> parse_ggml_type(std::string_view where, std::string_view name);

// llama-quantize's --tensor-type PATTERN=TYPE entry as QuantizeMix::tensor_types holds it.
// InvalidArgument "`where` SPEC: expected PATTERN=TYPE" without a pattern or a type.
Result<std::pair<std::string, TensorType>> parse_tensor_type(std::string_view where, std::string_view spec);

// llama-quantize's --tensor-type-file: the PATTERN=TYPE entries of a text file, separated by any white
// space, in order. The read's error naming the file when it cannot be read (FileNotFound), ResourceLimit
// naming it for a file over 1 MiB (a list of patterns is small: a bigger one is refused, not read), and
// parse_tensor_type's errors for an entry ("--tensor-type-file PATH: SPEC: ...").
Result<std::vector<std::pair<std::string, TensorType>>> read_tensor_type_file(const std::string& path);

// llama-quantize's --prune-layers L0,L1,...: layer numbers separated by commas, each read as std::stoi
// reads it (spaces, a sign, digits, anything after them ignored), sorted, without repeats (what
// QuantizeMix::prune_layers takes). InvalidArgument naming an empty, negative or unreadable one.
Result<std::vector<int>> parse_prune_layers(std::string_view list);

// The GGUF v3 TensorSink: creates `path` with `kv` and the declared tensors (the header is written now;
// `tensors` declare the tensors in the order their bytes are laid out; shapes are row-major, the file's
// ne is the reverse), takes their bytes in any order, whole or in chunks (copy_chunk in the kernel from a
// local file), and commits the file atomically on finish(). The alignment is options.alignment, else the
// UINT32 general.alignment of `kv`, else 32; it is written as general.alignment (first) when not 32 and
// absent from `kv`. InvalidArgument for a type GGUF cannot hold, a duplicate key or name, a name over 63
// bytes, more than 4 dimensions, an array of arrays or mixed types, an alignment that is not a power of
// two or a general.alignment that differs from it; ResourceLimit for an alignment over 1 MiB (a reader
// takes up to 2^31, whose padding is in its file; a writer would multiply it); the sink's own refusals
// (an undeclared name, a tensor written twice, wrong sizes, an incomplete tensor at finish) are
// InvalidArgument naming the path and the tensor. An unfinished sink leaves no file behind.
//
// With options.split, the model is written as llama.cpp's gguf-split writes it: files
// split_file_name(prefix, k, N) for k = 1..N (prefix: `path` without ".gguf"), file 1 with `kv` then
// split.no, split.tensors.count and split.count (gguf-split's order), the others with the three split
// keys only (and general.alignment when not 32), tensors in declaration order. A file is cut before a
// tensor that would take its tensor data (each tensor padded to the alignment; the header not counted,
// as gguf-split counts) over split.max_bytes, or once it holds split.max_tensors tensors; a tensor
// larger than max_bytes gets a file of its own. finish() renames every file into place only when every
// tensor of every file is written (if a rename fails, the files already renamed are removed); without
// finish(), or on any error, no file is left. InvalidArgument also for split.* keys in `kv` or more than
// 65,535 files. Every file stays open until finish() (that is what lets it commit all or none), so N
// files need N free descriptors: an IoError naming the file past the process's limit (RLIMIT_NOFILE)
// otherwise. TensorSink::files() lists the files in order.
Result<std::unique_ptr<TensorSink>> create(const std::string& path, std::vector<KeyValue> kv, std::vector<TensorDecl> tensors,
                                           const WriteOptions& options = {});

// "2G", "500M", as llama.cpp's gguf-split --split-max-size reads them (decimal: M = 10^6, G = 10^9),
// also "K" (10^3) and a plain count of bytes. InvalidArgument otherwise, and for 0.
Result<std::uint64_t> parse_split_size(std::string_view text);

SAFEWEIGHTS_API_END
}  // namespace safeweights::gguf
