// safeweights/error.h — the one error type shared by every format and layer.
//
// Every fallible library call returns a Status (success or one Error) or a Result<T> (a value or one
// Error). An Error carries a stable kind (ErrorKind; its name never changes once released, so tools and
// tests may match on it), a human message, and where it happened: the file, the archive entry, the
// tensor and the byte offset, each when known. The safetensors kinds use the reference implementation's
// variant names so that error kinds agree with it on every input it rejects; kinds for our stricter rules
// are ours.
//
// Thread safety: Error, Status and Result are plain values. Const methods may be called concurrently;
// anything else needs external synchronisation, as with any standard value type.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "safeweights/export.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

// X-macro: (Name, value, one-line meaning). The value is the kind's number in every release (it is what
// ErrorKind holds and what bindings may store): append only, with the next number; never renumber or rename.
#define SAFEWEIGHTS_ERROR_KINDS(X)                                                                                                  \
  /* generic */                                                                                                                     \
  X(IoError, 0, "an operating-system I/O call failed")                                                                              \
  X(FileNotFound, 1, "the file does not exist or cannot be opened")                                                                 \
  X(InvalidArgument, 2, "the caller passed an invalid argument")                                                                    \
  X(OutOfRange, 3, "a read outside the bounds of the input")                                                                        \
  X(UnknownFormat, 4, "the input is not in a format this tool recognises")                                                          \
  X(ResourceLimit, 5, "the input asks for more memory or work than the configured limit")                                           \
  /* safetensors: the reference implementation's variant names */                                                                   \
  X(HeaderTooSmall, 6, "file shorter than the 8-byte header length")                                                                \
  X(HeaderTooLarge, 7, "header length above 100,000,000 bytes")                                                                     \
  X(InvalidHeaderLength, 8, "header length runs past the end of the file")                                                          \
  X(InvalidHeader, 9, "header is not valid UTF-8")                                                                                  \
  X(InvalidHeaderDeserialization, 10, "header is not valid JSON of the safetensors schema")                                         \
  X(InvalidOffset, 11, "data_offsets not contiguous from 0 (hole, overlap or reversed range)")                                      \
  X(TensorInvalidInfo, 12, "byte length does not match shape and dtype")                                                            \
  X(MetadataIncompleteBuffer, 13, "data section does not end exactly at the end of the file")                                       \
  X(ValidationOverflow, 14, "shape x dtype size overflows 64 bits")                                                                 \
  X(MisalignedSlice, 15, "sub-byte data does not start or end on a byte boundary")                                                  \
  X(TensorNotFound, 16, "no tensor of that name")                                                                                   \
  X(InvalidTensorView, 17, "data length does not match shape and dtype")                                                            \
  /* safetensors: our stricter rules (checked after every reference rule) */                                                        \
  X(DuplicateKey, 18, "a JSON object repeats a key")                                                                                \
  X(NonCanonicalEntry, 19, "tensor entry or dtype in a non-standard JSON form (array or object)")                                   \
  X(UnknownField, 20, "tensor entry has a field other than dtype, shape and data_offsets (strict mode)")                            \
  X(ReservedTensorName, 21, "a tensor may not be named __metadata__")                                                               \
  /* slicing */                                                                                                                     \
  X(InvalidSliceSpec, 22, "slice syntax error or zero step")                                                                        \
  X(TooManySlices, 23, "more indices than tensor dimensions")                                                                       \
  X(SliceOutOfRange, 24, "integer index outside its dimension")                                                                     \
  /* sharded checkpoints */                                                                                                         \
  X(InvalidIndex, 25, "a *.safetensors.index.json file is malformed")                                                               \
  X(ShardMismatch, 26, "index and shard files disagree about a tensor")                                                             \
  /* ZIP archives */                                                                                                                \
  X(BadZipFile, 27, "the ZIP structure is malformed, inconsistent or ambiguous")                                                    \
  X(ZipUnsupported, 28, "a ZIP feature not accepted here (encryption, multi-disk, DDUF data descriptors)")                          \
  X(CrcMismatch, 29, "an entry's bytes do not match its CRC-32")                                                                    \
  /* DDUF: the reference's error classes */                                                                                         \
  X(DDUFCorruptedFile, 30, "the archive breaks a DDUF rule (compression, model_index.json, folders)")                               \
  X(DDUFInvalidEntryName, 31, "an entry name breaks the DDUF naming rules")                                                         \
  X(DDUFExport, 32, "a DDUF cannot be written from these entries")                                                                  \
  /* remote files (HTTP) */                                                                                                         \
  X(HttpError, 33, "an HTTP server refused a request or answered outside the protocol")                                             \
  X(RemoteChanged, 34, "a remote file changed between requests (ETag, Last-Modified or size)")                                      \
  /* the type model */                                                                                                              \
  X(InvalidBlockShape, 35, "a block-quantized tensor's innermost dimension is not a multiple of its block")                         \
  /* ZIP writing (appended after the HTTP kinds: kinds are never renumbered) */                                                     \
  X(ZipWrite, 36, "a ZIP archive cannot be written as asked (an entry's source ended early)")                                       \
  /* formats */                                                                                                                     \
  X(NotSupported, 37, "a recognised format or feature that this version cannot read yet")                                           \
  /* interruption and deadlines */                                                                                                  \
  X(Interrupted, 38, "the operation was cancelled (Ctrl-C, SIGTERM, or the caller asked)")                                          \
  X(Timeout, 39, "a remote read missed its deadline or stayed below the minimum transfer rate")                                     \
  /* writes that would leave their target */                                                                                        \
  X(UnsafePath, 40, "a write would leave its target folder, follow a symlink or replace what it must not")                          \
  /* PyTorch checkpoints */                                                                                                         \
  X(InvalidPickle, 41, "a pickle stream is malformed or exceeds a limit")                                                           \
  X(UnsafePickle, 42, "a pickle names a global, callable or opcode outside the allowlist")                                          \
  X(InvalidCheckpoint, 43, "a PyTorch checkpoint's container, storages or tensors are inconsistent")                                \
  /* GGUF */                                                                                                                        \
  X(InvalidGguf, 44, "a GGUF file breaks a rule of the format")                                                                     \
  /* Loading to devices */                                                                                                          \
  X(DeviceError, 45, "a GPU runtime call failed, or the device or its runtime is unavailable")                                      \
  /* Writing */                                                                                                                     \
  X(Unrepresentable, 46, "the output format cannot hold a name, rank or text the tensors or metadata have")                         \
  /* Hugging Face model folders */                                                                                                  \
  X(InvalidModelFolder, 47, "a model folder's config or tokenizer files are malformed, out of range, or disagree with its weights") \
  /* the environment, not the input or the call */                                                                                  \
  X(EnvironmentFault, 48, "the environment cannot serve the request: missing or unusable credentials or configuration")

// Rules: which rule of a format an error broke, for kinds that cover many rules (InvalidGguf, BadZipFile,
// InvalidPickle, ...). A kind says what sort of failure it is; a rule says exactly which check, with a
// stable code callers may match ("gguf.truncated"). X-macro: (Name, value, code, one-line meaning), the
// same promise as the kinds: append only, never renumber, rename or change a code. Formats whose kinds already name each rule
// (safetensors) leave the rule Unspecified.
#define SAFEWEIGHTS_ERROR_RULES(X)                                                                                                             \
  X(Unspecified, 0, "", "no rule code: the kind says what failed")                                                                             \
  /* GGUF: every InvalidGguf error has one (docs/GGUF.md, "Rules checked") */                                                                  \
  X(GgufMagic, 1, "gguf.magic", "the file does not start with the magic GGUF")                                                                 \
  X(GgufVersion, 2, "gguf.version", "the version is not one that GGUF defines")                                                                \
  X(GgufTruncated, 3, "gguf.truncated", "the header ends inside a value it declares")                                                          \
  X(GgufLength, 4, "gguf.length", "a string or an array is longer than ggml allows")                                                           \
  X(GgufCount, 5, "gguf.count", "a declared count cannot fit in the bytes that remain")                                                        \
  X(GgufValueType, 6, "gguf.value-type", "an unknown value type, or an array of arrays")                                                       \
  X(GgufBool, 7, "gguf.bool", "a BOOL value that is not 0 or 1")                                                                               \
  X(GgufKey, 8, "gguf.key", "an empty, repeated or non-UTF-8 key")                                                                             \
  X(GgufAlignment, 9, "gguf.alignment", "general.alignment is not a UINT32 power of two")                                                      \
  X(GgufDimensions, 10, "gguf.dimensions", "a tensor with more than 4 dimensions, or one negative as ggml's int64")                            \
  X(GgufTensorType, 11, "gguf.tensor-type", "a tensor type id that is unknown or was removed from GGUF")                                       \
  X(GgufTensorName, 12, "gguf.tensor-name", "a repeated or non-UTF-8 tensor name")                                                             \
  X(GgufTensorOffset, 13, "gguf.tensor-offset", "a tensor not where ggml puts it, or its bytes past the end")                                  \
  X(GgufSplit, 14, "gguf.split", "the files of a split model disagree, or a split key is wrong")                                               \
  /* PyTorch checkpoints: every InvalidPickle, UnsafePickle and InvalidCheckpoint error has one, and so do */                                  \
  /* the reader's ResourceLimit and NotSupported errors (docs/PYTORCH.md, "Error rules") */                                                    \
  X(PytorchPickleTruncated, 15, "pytorch.pickle-truncated", "the pickle ends inside an opcode, or a FRAME runs past it")                       \
  X(PytorchPickleProtocol, 16, "pytorch.pickle-protocol", "a pickle protocol above 5")                                                         \
  X(PytorchPickleOpcode, 17, "pytorch.pickle-opcode", "a byte that is no pickle opcode")                                                       \
  X(PytorchPickleStack, 18, "pytorch.pickle-stack", "an opcode finds the stack, the marks or the memo not as it needs them")                   \
  X(PytorchPickleArguments, 19, "pytorch.pickle-arguments", "an opcode or an allowed callable given arguments of the wrong form")              \
  X(PytorchOpcodeRefused, 20, "pytorch.opcode-refused", "an opcode outside the set torch checkpoints use")                                     \
  X(PytorchGlobalRefused, 21, "pytorch.global-refused", "a global outside the allowlist")                                                      \
  X(PytorchCallRefused, 22, "pytorch.call-refused", "a call, object build or container update the allowlist does not grant")                   \
  X(PytorchLimit, 23, "pytorch.limit", "the pickle or the object it builds exceeds a limit")                                                   \
  X(PytorchContainer, 24, "pytorch.container", "the ZIP members or the legacy stream are not laid out as torch.save writes them")              \
  X(PytorchStorage, 25, "pytorch.storage", "a storage's bytes are missing, or disagree with what the pickle declares")                         \
  X(PytorchTensorBounds, 26, "pytorch.tensor-bounds", "a tensor's offset, sizes and strides reach past its storage or overflow")               \
  X(PytorchObject, 27, "pytorch.object", "the object holding the tensors is malformed (a name, a key, a dtype, a cycle)")                      \
  X(PytorchArchiveKind, 28, "pytorch.archive-kind", "a TorchScript, tar-format or preview-release archive, not torch.save's")                  \
  X(PytorchTensorKind, 29, "pytorch.tensor-kind", "a tensor kind or dtype that safetensors cannot hold (quantized, complex, conj bit)")        \
  /* ZIP: every BadZipFile and ZipUnsupported error has one (docs/DDUF.md, "ZIP rules") */                                                     \
  X(ZipEndRecord, 30, "zip.end-record", "the end records are missing, ambiguous or disagree (comment, counts, ZIP64 locator)")                 \
  X(ZipCentralDirectory, 31, "zip.central-directory", "the central directory is truncated or does not hold the entries the end record counts") \
  X(ZipExtraField, 32, "zip.extra-field", "a malformed extra field, or a ZIP64 block that does not match the saturated fields")                \
  X(ZipEntryName, 33, "zip.entry-name", "an entry name that is empty, holds a control byte or is not valid flagged UTF-8")                     \
  X(ZipDuplicateName, 34, "zip.duplicate-name", "two entries with one name")                                                                   \
  X(ZipLocalHeader, 35, "zip.local-header", "a local header missing, misplaced or disagreeing with the central directory")                     \
  X(ZipLayout, 36, "zip.layout", "bytes no record accounts for (prepended, trailing, gaps) or entries that overlap")                           \
  X(ZipDataDescriptor, 37, "zip.data-descriptor", "a data descriptor missing, or disagreeing with the central directory")                      \
  X(ZipEncryption, 38, "zip.encryption", "an encrypted entry or central directory")                                                            \
  X(ZipMultiDisk, 39, "zip.multi-disk", "an archive spread over several disks")                                                                \
  X(ZipVersion, 40, "zip.version", "a record needs a newer ZIP version than this reader implements")                                           \
  X(ZipCompression, 41, "zip.compression", "a compressed entry (only stored entries are read)")                                                \
  X(ZipFlags, 42, "zip.flags", "general-purpose flags the policy refuses (a data descriptor in DDUF, unknown bits)")                           \
  X(ZipLimit, 43, "zip.limit", "more entries or a larger central directory than the reader's limits")

enum class ErrorRule : std::uint16_t {
#define SAFEWEIGHTS_X(name, value, code, doc) name = value,
  SAFEWEIGHTS_ERROR_RULES(SAFEWEIGHTS_X)
#undef SAFEWEIGHTS_X
};

// A rule's stable code ("gguf.truncated"; empty for Unspecified) and its one-line meaning.
std::string_view error_rule_code(ErrorRule rule) noexcept;
std::string_view error_rule_description(ErrorRule rule) noexcept;
// Inverse of error_rule_code; nullopt for an unknown code.
std::optional<ErrorRule> error_rule_from_code(std::string_view code) noexcept;

enum class ErrorKind : std::uint16_t {
#define SAFEWEIGHTS_X(name, value, doc) name = value,
  SAFEWEIGHTS_ERROR_KINDS(SAFEWEIGHTS_X)
#undef SAFEWEIGHTS_X
};

// Stable name of a kind ("InvalidOffset"), and its one-line meaning.
std::string_view error_kind_name(ErrorKind kind) noexcept;
std::string_view error_kind_description(ErrorKind kind) noexcept;
// Inverse of error_kind_name; nullopt for an unknown name.
std::optional<ErrorKind> error_kind_from_name(std::string_view name) noexcept;

// Where an error happened. Empty strings / nullopt mean "not known".
struct ErrorContext {
  std::string file;                     // path or URL of the outermost input
  std::string entry;                    // archive entry (DDUF), when inside one
  std::string tensor;                   // tensor name, when one is concerned
  std::optional<std::uint64_t> offset;  // byte offset in `file`, when known
};

class Error {
 public:
  Error(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) {}

  ErrorKind kind() const noexcept { return kind_; }
  std::string_view kind_name() const noexcept { return error_kind_name(kind_); }
  // The rule broken, when the kind covers several (ErrorRule::Unspecified otherwise).
  ErrorRule rule() const noexcept { return rule_; }
  const std::string& message() const noexcept { return message_; }
  const ErrorContext& context() const noexcept { return context_; }

  // Context setters return *this so that errors can be annotated while propagating. A setter never
  // overwrites a field already set closer to the failure. On an rvalue they return an rvalue, so an
  // annotated error is moved, not copied, into the Status or Result it is returned as (see error_of).
  Error& with_file(std::string_view file) &;
  Error& with_entry(std::string_view entry) &;
  Error& with_tensor(std::string_view tensor) &;
  Error& with_offset(std::uint64_t offset) &;
  Error&& with_file(std::string_view file) && { return std::move(with_file(file)); }
  Error&& with_entry(std::string_view entry) && { return std::move(with_entry(entry)); }
  Error&& with_tensor(std::string_view tensor) && { return std::move(with_tensor(tensor)); }
  Error&& with_offset(std::uint64_t offset) && { return std::move(with_offset(offset)); }
  Error& with_rule(ErrorRule rule) &;
  Error&& with_rule(ErrorRule rule) && { return std::move(with_rule(rule)); }

  // "model.safetensors: InvalidOffset: ... (tensor `w`, byte 1234)".
  std::string to_string() const;

 private:
  ErrorKind kind_;
  ErrorRule rule_ = ErrorRule::Unspecified;
  std::string message_;
  ErrorContext context_;
};

// Success, or one Error. One pointer in size; success allocates nothing.
class [[nodiscard]] Status {
 public:
  Status() noexcept = default;
  Status(Error error) : error_(std::make_unique<Error>(std::move(error))) {}  // NOLINT: implicit on purpose
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;
  Status(const Status& other) : error_(other.error_ ? std::make_unique<Error>(*other.error_) : nullptr) {}
  Status& operator=(const Status& other) {
    if (this != &other) error_ = other.error_ ? std::make_unique<Error>(*other.error_) : nullptr;
    return *this;
  }

  static Status ok() noexcept { return Status(); }
  bool is_ok() const noexcept { return error_ == nullptr; }
  explicit operator bool() const noexcept { return is_ok(); }

  // Precondition: !is_ok().
  const Error& error() const& { return *error_; }
  Error& error() & { return *error_; }
  Error&& error() && { return std::move(*error_); }

  std::string to_string() const { return is_ok() ? std::string("OK") : error_->to_string(); }

 private:
  std::unique_ptr<Error> error_;
};

// A value of type T, or one Error.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}      // NOLINT: implicit on purpose
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT: implicit on purpose
  // Precondition: !status.is_ok().
  Result(Status status) : v_(std::in_place_index<1>, std::move(status).error()) {}  // NOLINT

  bool is_ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return is_ok(); }

  // Preconditions: is_ok() for value(), !is_ok() for error().
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return std::get<0>(v_); }
  const T& operator*() const& { return std::get<0>(v_); }

  const Error& error() const& { return std::get<1>(v_); }
  Error& error() & { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

  Status status() const& { return is_ok() ? Status() : Status(std::get<1>(v_)); }
  Status status() && { return is_ok() ? Status() : Status(std::get<1>(std::move(v_))); }

 private:
  std::variant<T, Error> v_;
};

// The error of a failed Status or Result, moved out of it: the one way to return a failure with the
// context known here added, e.g. `if (!r.is_ok()) return error_of(r).with_file(path);`.
// Precondition: !failed.is_ok(). `failed` is left in a moved-from state.
inline Error error_of(Status& failed) { return std::move(failed).error(); }
template <typename T>
Error error_of(Result<T>& failed) {
  return std::move(failed).error();
}

SAFEWEIGHTS_API_END
}  // namespace safeweights
