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
// SplitWriter writes such a set, all files or none.
//
// The writer is a TensorSink: metadata and tensor declarations first (the whole header and every
// offset are fixed then), then each tensor's bytes, in any order; version 3 with the layout ggml and
// gguf-py write (tensors in declaration order, each padded to the alignment, the last one too), so the
// bytes are deterministic. It writes through AtomicFile: the target appears only on finish().
//
// Thread safety: a GgufFile is immutable once opened; every const method may be called concurrently.
// A Writer has a single owner.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/format.h"
#include "safeweights/resolver.h"
#include "safeweights/source.h"
#include "safeweights/tensor_file.h"
#include "safeweights/tensor_type.h"

namespace safeweights::gguf {
SAFEWEIGHTS_API_BEGIN

// GGUF metadata value types, with their ids in the file.
enum class ValueType : std::uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

// "UINT8" ... "FLOAT64".
std::string_view value_type_name(ValueType type) noexcept;

// One metadata value. Scalars keep their exact bits; arrays hold scalars or strings (GGUF arrays of
// arrays are refused, as ggml refuses them).
struct Value {
  ValueType type = ValueType::UINT8;
  ValueType elem_type = ValueType::UINT8;  // ARRAY: the elements' type
  std::uint64_t bits = 0;                  // integers: zero- or sign-extended to 64 bits; floats: their bit pattern; BOOL: 0/1
  std::string str;                         // STRING
  std::vector<Value> items;                // ARRAY

  static Value u8(std::uint8_t v) { return scalar(ValueType::UINT8, v); }
  static Value i8(std::int8_t v) { return scalar(ValueType::INT8, static_cast<std::uint64_t>(static_cast<std::int64_t>(v))); }
  static Value u16(std::uint16_t v) { return scalar(ValueType::UINT16, v); }
  static Value i16(std::int16_t v) { return scalar(ValueType::INT16, static_cast<std::uint64_t>(static_cast<std::int64_t>(v))); }
  static Value u32(std::uint32_t v) { return scalar(ValueType::UINT32, v); }
  static Value i32(std::int32_t v) { return scalar(ValueType::INT32, static_cast<std::uint64_t>(static_cast<std::int64_t>(v))); }
  static Value u64(std::uint64_t v) { return scalar(ValueType::UINT64, v); }
  static Value i64(std::int64_t v) { return scalar(ValueType::INT64, static_cast<std::uint64_t>(v)); }
  static Value f32(float v);
  static Value f64(double v);
  static Value boolean(bool v) { return scalar(ValueType::BOOL, v ? 1 : 0); }
  static Value string(std::string v);
  // Every item must be of type `elem` (checked by the writer).
  static Value array(ValueType elem, std::vector<Value> items);

  // Numeric views (no range checks: ask `type` first).
  std::uint64_t as_u64() const noexcept { return bits; }
  std::int64_t as_i64() const noexcept { return static_cast<std::int64_t>(bits); }
  double as_f64() const noexcept;  // FLOAT32 and FLOAT64

  bool operator==(const Value&) const = default;

 private:
  static Value scalar(ValueType type, std::uint64_t bits) {
    Value v;
    v.type = type;
    v.bits = bits;
    return v;
  }
};

struct KeyValue {
  std::string key;
  Value value;
  bool operator==(const KeyValue&) const = default;
};

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

struct WriterOptions {
  std::uint32_t alignment = kDefaultAlignment;  // a power of two; written as general.alignment when not 32
  bool durable = false;                         // fsync on commit
};

// The GGUF v3 TensorSink: creates `path` with `kv` and the declared tensors (the header is written now;
// `tensors` declare the tensors in the order their bytes are laid out; shapes are row-major, the file's
// ne is the reverse), takes their bytes in any order, whole or in chunks (copy_chunk in the kernel from a
// local file), and commits the file atomically on finish(). InvalidArgument for a type GGUF cannot hold,
// a duplicate key or name, a name over 63 bytes, more than 4 dimensions, an array of arrays or mixed
// types, or a general.alignment key (use the option); the sink's own refusals (an undeclared name, a
// tensor written twice, wrong sizes, an incomplete tensor at finish) are InvalidArgument naming the path
// and the tensor. An unfinished sink leaves no file behind.
Result<std::unique_ptr<TensorSink>> create(const std::string& path, std::vector<KeyValue> kv, std::vector<TensorDecl> tensors,
                                           const WriterOptions& options = {});

// Where a split model is cut: before a tensor that would take the current file's tensor data (each
// tensor padded to the alignment; the header not counted, as llama.cpp's gguf-split counts) over
// max_bytes, or once the file holds max_tensors tensors. 0: no limit. A tensor larger than max_bytes
// gets a file of its own.
struct SplitOptions {
  std::uint64_t max_bytes = 0;
  std::uint64_t max_tensors = 0;
  bool enabled() const noexcept { return max_bytes != 0 || max_tensors != 0; }
};

// "2G", "500M", as llama.cpp's gguf-split --split-max-size reads them (decimal: M = 10^6, G = 10^9),
// also "K" (10^3) and a plain count of bytes. InvalidArgument otherwise, and for 0.
Result<std::uint64_t> parse_split_size(std::string_view text);

// Writes a model as llama.cpp's gguf-split does: files split_file_name(prefix, k, N) for k = 1..N, file
// 1 with `kv` then split.no, split.tensors.count and split.count (gguf-split's order), the others with the three split keys
// only (and general.alignment when not 32), tensors in declaration order. Every file is written to a
// temporary name; finish() renames them all into place only when every tensor of every file is
// written (if a rename fails, the files already renamed are removed). Without finish(), or on any
// error, no file is left. Same errors as create(); InvalidArgument for split.* keys in `kv` or more than
// 65,535 files. Every file stays open until finish() (that is what lets it commit all or none), so a
// split into N files needs N free descriptors: an IoError naming the file past the process's limit
// (RLIMIT_NOFILE) otherwise.
class SplitWriter final : public TensorSink {
 public:
  static Result<std::unique_ptr<SplitWriter>> create(const std::string& prefix, std::vector<KeyValue> kv, std::vector<TensorDecl> tensors,
                                                     const SplitOptions& split, const WriterOptions& options = {});
  ~SplitWriter() override;

  // The files, in order.
  const std::vector<std::string>& paths() const noexcept;

  Status write(std::string_view name, std::span<const std::byte> data) override;
  Status write_chunk(std::string_view name, std::span<const std::byte> chunk) override;
  // In the kernel when `source` is a local file (AtomicFile::copy_from).
  Status copy_chunk(std::string_view name, const ByteSource& source, std::uint64_t offset, std::uint64_t length) override;
  Status finish() override;

  struct Impl;

 private:
  explicit SplitWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

SAFEWEIGHTS_API_END
}  // namespace safeweights::gguf
