// safeweights/format.h — the format registry: detect a file's format by its content, then validate,
// inspect, open or cat it, without the caller knowing any format; and the formats that are written
// (chosen by name or by the output's extension) create their TensorSink and say what they make of a
// conversion's type (stored_type, retype_metadata: safeweights/convert.h).
//
// Each format lives in its own folder (src/<format>/) and is one line of the registry's list
// (src/model/registry.cpp). The command-line tool and the Python package ask the registry; they never
// dispatch on formats themselves. Detection reads the first bytes of the input (magic bytes, then
// structure); a file no format claims is handed to safetensors, whose reader says precisely what is
// wrong with it.
//
// Thread safety: formats and the registry are immutable; every function may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/metadata.h"
#include "safeweights/resolver.h"
#include "safeweights/source.h"
#include "safeweights/tensor_file.h"
#include "safeweights/tensor_type.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

// Meta's original download and Mistral's native layout (a folder of params.json and consolidated.*
// weights, converted): what params.json does not say. Unset: inferred where unambiguous (said in
// ConvertReport::notes), else refused naming the option to give.
struct OriginalOptions {
  std::string llama_version;                             // "1", "2", "3", "3.1" or "3.2"; empty: inferred
  std::optional<std::uint32_t> max_position_embeddings;  // the context length; none: the version's
  bool instruct = false;                                 // Llama 3: the instruct model's end of turn (<|eot_id|>; 3.1's eos list) as eos
};

struct FormatOptions {
  FileBackend backend = FileBackend::Mmap;
  // safetensors: also reject tensor entries with fields other than dtype, shape and data_offsets.
  bool strict = false;
  // Archives: validate checks every member's CRC-32 (reads every byte).
  bool crc = true;
  // How the file and the files beside it are opened. Null: open_tensors() uses a caching_resolver() of
  // its own for the call (detecting the format and reading the file share one source); a Format's open()
  // and detect_format() called directly use uncached_resolver(), which keeps nothing.
  std::shared_ptr<const Resolver> resolver;
  // PyTorch checkpoints: keep globals outside the allowlist as inert placeholders (training checkpoints
  // with extra state); modules such as os, subprocess and builtins are refused all the same.
  bool allow_unknown = false;
  // PyTorch checkpoints: read the tensors under this top-level key. Empty: under `state_dict`, `model`
  // or `module` (the first present whose value is a dict) when there is one, else the whole object.
  std::string checkpoint_key;
  // GGUF: the header (metadata and tensor infos) may not be larger: a ResourceLimit error beyond.
  std::uint64_t max_header_bytes = std::uint64_t{1} << 30;
  // An original download's unknowns (above).
  OriginalOptions original;
};

// The bytes `cat` writes: a tensor (which can also be sliced) or an archive member.
struct CatTarget {
  std::shared_ptr<const TensorFile> file;  // set when a tensor was named
  const TensorEntry* tensor = nullptr;     // the tensor, when one was named
  SourcePtr source;                        // holds the bytes
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

// How a format stores a tensor that a conversion asks to become another type (Format::stored_type).
struct StoredType {
  TensorType type;
  std::string note;  // why `type` differs from the type asked for ("rows of 100 are not a multiple of 256"), or empty
};

// A quantization mix: a file type of llama-quantize's (Q4_K_M, IQ3_M, ...) and its knobs, which the
// output's format turns into a type per tensor (Format::plan_mix; GGUF's is llama.cpp's
// llama_tensor_get_type, docs/GGUF.md "Quantization mixes"). ConvertOptions::mix asks for one.
struct QuantizeMix {
  std::string file_type;                           // llama-quantize's name or number, case-insensitive
  std::optional<TensorType> output_tensor_type;    // --output-tensor-type
  std::optional<TensorType> token_embedding_type;  // --token-embedding-type
  // --tensor-type PATTERN=TYPE, in order: the first pattern found in a name (a regular expression,
  // lower-cased as llama-quantize does) gives its type.
  std::vector<std::pair<std::string, TensorType>> tensor_types;
  bool pure = false;                                          // every quantized tensor the file type's base type
  bool leave_output_tensor = false;                           // output.weight keeps its type
  bool allow_requantize = false;                              // a quantized input tensor may be quantized again
  std::string imatrix;                                        // llama-imatrix's output (GGUF or legacy .dat); empty: none
  std::vector<std::string> include_weights, exclude_weights;  // imatrix entries kept / left out, by substring
  // --override-kv (safeweights/gguf.h parse_kv_override): set over the output's metadata in order, after
  // general.file_type and before the importance matrix's keys, and read by the type rules as the model's
  // metadata, as llama-quantize does.
  std::vector<MetaEntry> override_kv;
  // --prune-layers: the blocks (blk.N.) left out, the others renumbered in order from the first pruned
  // one, and {arch}.block_count the count kept, as llama-quantize does; the type rules still read the
  // input's layer count. Sorted, without repeats (parse_prune_layers in safeweights/gguf.h).
  std::vector<int> prune_layers{};
};

// A tensor as a mix sees it: its name, its type before the mix (the input's, or the plan's) and shape.
struct MixTensor {
  std::string_view name;
  TensorType type;
  std::span<const std::uint64_t> shape;
};

// What a mix makes of one tensor: its type, why (empty when it keeps its type), and the importance
// weights its rows are quantized with (one row of weights per expert, outermost first; empty: none).
struct MixChoice {
  TensorType type;
  std::string note;
  std::vector<float> importance;
  std::string rename{};  // the tensor's name in the output when the mix renumbers its block; empty: its own
  bool pruned = false;   // left out of the output (QuantizeMix::prune_layers)
};

struct MixPlan {
  std::vector<MixChoice> tensors;  // one per MixTensor, in their order
  Metadata metadata;               // set over the output's metadata last (general.file_type, ...)
};

// How much of an input's first bytes detection looks at.
inline constexpr std::size_t kDetectBytes = 4096;

class Format {
 public:
  virtual ~Format() = default;

  // The stable name, as `validate --json` and `inspect --json` print it: "safetensors", "dduf", ...
  virtual std::string_view name() const noexcept = 0;
  // Whether its files are archives of named members (the `members` of inspect() and open(), the CLI's
  // ENTRY): DDUF's. What a caller that treats an archive's errors apart asks, never the format's name.
  virtual bool has_members() const noexcept { return false; }
  // How sure this format is that the input is its own, from its first bytes (at most kDetectBytes),
  // its size and its name; the highest score wins: 0 not at all, 1 by the name alone, 2 by
  // structure, 3 by magic bytes, 4 by magic bytes and structure (a torch.save ZIP beats any ZIP).
  virtual int detect(std::span<const std::byte> head, std::uint64_t size, std::string_view path) const = 0;

  // Checks every rule of the format; a one-line summary for a valid file ("12 tensors, 1.2 GiB of data").
  virtual Result<std::string> validate(const std::string& path, const FormatOptions& options) const = 0;
  // Describes the file: one JSON object (one shape per format, documented in docs/CLI.md) or text for people.
  virtual Result<std::string> inspect(const std::string& path, std::span<const std::string> members, const FormatOptions& options,
                                      bool json) const = 0;
  // The file's tensors, format-neutral. `members` names what to open inside an archive.
  virtual Result<std::unique_ptr<TensorFile>> open(const std::string& path, std::span<const std::string> members,
                                                   const FormatOptions& options) const = 0;
  // What `cat PATH NAMES...` writes. By default the one tensor named by names[0] of open(path).
  virtual Result<CatTarget> locate(const std::string& path, std::span<const std::string> names, const FormatOptions& options) const;

  // ---- writing: a format that writes files overrides all three ----
  // The file-name extensions of its files (".gguf"); empty for a format that is not written.
  virtual std::span<const std::string_view> extensions() const noexcept { return {}; }
  // The extensions that claim a file for this format by its name (format_claimed_by_name): by default
  // extensions(); a format that is only read names its own (".dduf").
  virtual std::span<const std::string_view> claimed_extensions() const noexcept { return extensions(); }
  // OK when its files can hold tensors of `type`; else its own refusal, naming the type.
  virtual Status can_hold(TensorType type) const;
  // The TensorSink that writes `path`: the declared tensors, and `metadata` (nullptr: none) mapped
  // through the format's own table (safeweights/metadata.h). NotSupported for a format not written.
  virtual Result<std::unique_ptr<TensorSink>> create(const std::string& path, std::vector<TensorDecl> tensors, const Metadata* metadata,
                                                     const WriteOptions& options) const;

  // ---- conversion (safeweights/convert.h): what this format makes of a type asked for ----
  // The type a tensor of `shape` (row-major, two dimensions or more) is stored as when a conversion
  // asks for `requested` and the tensor does not already have it. By default `requested` itself, which
  // can_hold() then accepts or refuses, naming the tensor. GGUF: llama.cpp's fallbacks for rows that
  // are not a whole number of `requested`'s blocks.
  virtual StoredType stored_type(TensorType requested, std::span<const std::uint64_t> shape) const;
  // The input's metadata, carried into this format's output by a conversion that asks for
  // `requested`, updated where it states the tensors' type. By default left as it is. GGUF: an
  // existing general.file_type becomes llama.cpp's file type of `requested` (when it has one).
  virtual void retype_metadata(Metadata& carried, TensorType requested) const;
  // The types a quantization mix gives `tensors` (in their order), read against `metadata` (the
  // model's: architecture, layer and head counts), with the metadata the output then states. By
  // default NotSupported (a format without mixes). GGUF: llama-quantize's choice (src/gguf/quant_mix.h).
  virtual Result<MixPlan> plan_mix(const QuantizeMix& mix, std::span<const MixTensor> tensors, const Metadata& metadata) const;
};

// The CatTarget of one tensor of an opened file (TensorNotFound when absent).
Result<CatTarget> cat_tensor(std::shared_ptr<const TensorFile> file, std::string_view name);

// Every registered format, in detection order.
std::span<const Format* const> formats() noexcept;
// nullptr for an unknown name.
const Format* find_format(std::string_view name) noexcept;
// The format of the file at `path` (a path or URL). FileNotFound / IoError when it cannot be read.
Result<const Format*> detect_format(const std::string& path, const FormatOptions& options = {});

// The format a file's name claims by its extension (the longest of every format's
// claimed_extensions() that ends it): .safetensors, .safetensors.index.json, .gguf, .dduf, .pt / .pth /
// .ckpt (pytorch); nullptr when the name claims none (`.bin`, used by many formats, claims none). For a
// URL the query and fragment are left out. Detection stays by content: `validate`
// compares the two and fails when they disagree, unless asked to go by content alone.
const Format* format_claimed_by_name(std::string_view path) noexcept;

// The format an output is written in: the one named `to` (InvalidArgument when no format of that
// name writes files), else the one whose extension `path` ends with (InvalidArgument naming the path and
// the extensions otherwise).
Result<const Format*> output_format(const std::string& path, std::string_view to = {});

// Opens a file of any registered format (for a DDUF archive, its .safetensors member `entry`), or a
// Hugging Face model folder (model.safetensors.index.json, model.safetensors, pytorch_model.bin.index.json
// or pytorch_model.bin: the first present), as one TensorFile: what convert(), diff and the loaders read.
// FileNotFound for a folder with none of them.
Result<std::unique_ptr<TensorFile>> open_tensors(const std::string& path, const std::string& entry = {}, const FormatOptions& options = {});

// The resolver of `options`, or uncached_resolver() when it has none.
const Resolver& resolver_of(const FormatOptions& options);

SAFEWEIGHTS_API_END
}  // namespace safeweights
