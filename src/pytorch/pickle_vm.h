// A pickle reader that calls nothing: it interprets the opcodes torch.save emits into an inert graph of
// values (None, bool, int, float, str, bytes, tuple, list, dict, set, references to globals, storage
// references from persistent ids, tensors). GLOBAL / STACK_GLOBAL resolve only against an allowlist;
// REDUCE, BUILD and NEWOBJ are emulated for allowlisted callables (OrderedDict, torch's tensor and
// parameter rebuild functions, a few inert value constructors) and refused for everything else, with
// an UnsafePickle error naming the global or opcode and the byte offset. INST, OBJ, EXT* and the text
// opcodes are refused. Hard limits bound the stack, the memo, strings, containers and the total number
// of values, so a hostile pickle cannot exhaust memory or time (InvalidPickle / ResourceLimit).
// Values, tensors, storages and text live in arenas of the Pickle that grow by blocks: one allocation
// per block rather than per value, and every kept byte of text (read or composed) counts against
// max_text. Internal to src/pytorch/.
//
// Thread safety: a Pickle is immutable once run() returns; a Machine is not shared.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/tensor_type.h"

namespace safeweights::pytorch {

struct PickleLimits {
  std::uint64_t max_stack = 1u << 20;    // values on the stack, all marks together
  std::uint64_t max_marks = 1u << 16;    // MARKs open at once
  std::uint64_t max_memo = 1u << 22;     // memo entries
  std::uint64_t max_objects = 1u << 22;  // values created
  std::uint64_t max_items = 1u << 25;    // container items, all containers together
  std::uint64_t max_string = 64u << 20;  // one str / bytes / long
  std::uint64_t max_text = 512u << 20;   // all strs / bytes / longs together
  std::uint32_t max_rank = 64;           // dimensions of a tensor
};

enum class Kind : std::uint8_t { None, Bool, Int, BigInt, Float, Str, Bytes, Tuple, List, Dict, Set, Global, Storage, Tensor, Opaque };

// What an allowlisted global is. Unknown: a placeholder kept by the permissive mode (never called).
enum class Callable : std::uint8_t {
  Unknown,
  OrderedDict,
  RebuildTensor,
  RebuildTensorV2,
  RebuildTensorV3,
  RebuildParameter,
  RebuildParameterWithState,
  RebuildFromTypeV2,
  TensorClass,   // torch.Tensor, torch.nn.parameter.Parameter
  StorageType,   // torch.FloatStorage, ..., torch.UntypedStorage
  Dtype,         // torch.float32, ...
  Size,          // torch.Size
  InertValue,    // torch.device, _get_layout, complex, ...: the result is an opaque value
  CodecsEncode,  // _codecs.encode(str, "latin1") -> bytes
  SetType,       // set, frozenset
  BytesType,     // bytes, bytearray
  Unsupported,   // known to torch but not convertible (quantized, sparse, ... tensors; complex128)
};

struct Value;

// Objects allocated in blocks that grow geometrically up to a fixed size: one allocation per block,
// not per object. They live (at stable addresses) as long as the arena.
template <class T>
class BlockArena {
 public:
  T& emplace() {
    if (used_ == block_) {
      block_ = block_ == 0 ? 16 : std::min<std::size_t>(block_ * 2, 4096);
      blocks_.push_back(std::make_unique<T[]>(block_));
      used_ = 0;
    }
    return blocks_.back()[used_++];
  }

 private:
  std::vector<std::unique_ptr<T[]>> blocks_;
  std::size_t block_ = 0;  // objects in the last block
  std::size_t used_ = 0;   // of the last block
};

// Bytes copied into blocks; each kept string is a stable view. Strings longer than a quarter block
// get an allocation of their own, so a block wastes at most a quarter of itself.
class TextArena {
 public:
  std::string_view keep(std::string_view s);

 private:
  static constexpr std::size_t kBlock = 16u << 10;
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* at_ = nullptr;
  std::size_t left_ = 0;
};

// A storage named by a persistent id: `key` names its bytes (data/<key> in a ZIP, the key list of the
// legacy stream). The bytes a tensor may address are [view_offset, view_offset + view_nbytes) of the
// root storage's `nbytes` (the view is the whole storage except for legacy storage views).
struct StorageInfo {
  std::string key;
  bool typed = true;   // false for UntypedStorage (the tensor's dtype comes from _rebuild_tensor_v3)
  TensorType dtype{};  // typed storages
  std::uint64_t nbytes = 0;
  std::uint64_t view_offset = 0;
  std::uint64_t view_nbytes = 0;
};

// A tensor as a rebuild function describes it: offset and strides in elements of dtype.
struct TensorInfo {
  const Value* storage = nullptr;  // Kind::Storage
  TensorType dtype{};
  std::uint64_t offset = 0;
  std::vector<std::uint64_t> shape;
  std::vector<std::uint64_t> stride;
};

struct Value {
  Kind kind = Kind::None;
  bool boolean = false;
  std::int64_t integer = 0;
  double real = 0;
  // Str / Bytes: the bytes (str as UTF-8); BigInt: little-endian two's complement; Global: module.name;
  // Opaque: the global it came from. Points into the Pickle's text arena.
  std::string_view text;
  // Tuple / List / Set: the items; Dict: key, value, key, value, ... in insertion order.
  std::vector<Value*> items;
  Callable callable = Callable::Unknown;  // Global
  TensorType dtype{};                     // Global of kind Dtype or typed StorageType
  StorageInfo* storage = nullptr;         // Storage; also a Global of kind StorageType (typed or not)
  TensorInfo* tensor = nullptr;           // Tensor (both owned by the Pickle's arenas)
};

// Where persistent ids come from: torch's ZIP format (5-tuples) or the legacy stream (6-tuples, with
// storage views).
enum class PidForm { Zip, Legacy };

struct PickleOptions {
  PickleLimits limits;
  bool allow_unknown = false;  // keep unknown globals as inert placeholders instead of refusing them
  PidForm pids = PidForm::Zip;
  std::uint64_t base_offset = 0;  // of the pickle's first byte in its file (for error contexts)
  std::string name = "data.pkl";  // what to call the pickle in messages
};

// The result of running a pickle: the root value and every value it reaches (owned here).
class Pickle {
 public:
  // InvalidPickle (malformed, with the offset), UnsafePickle (a global or opcode outside the
  // allowlist), ResourceLimit (a limit), InvalidCheckpoint (storages that contradict each other),
  // NotSupported (allowlisted by torch but not convertible: quantized or sparse tensors, ...).
  // `truncated`, when given, says whether an error came from reaching the end of `bytes` (a caller
  // reading a stream in pieces then retries with more).
  static Result<std::unique_ptr<Pickle>> run(std::span<const std::byte> bytes, const PickleOptions& options, bool* truncated = nullptr);

  const Value* root() const noexcept { return root_; }
  // Bytes consumed: the offset just past STOP.
  std::uint64_t end() const noexcept { return end_; }
  // Storages by key, in first-seen order.
  const std::vector<const Value*>& storages() const noexcept { return storages_; }
  // Whether any unknown global was kept (permissive mode).
  bool has_unknown() const noexcept { return has_unknown_; }
  // Legacy storage view keys, in first-seen order (each bound to one view of a root storage key).
  const std::vector<std::string_view>& view_keys() const noexcept { return view_keys_; }

 private:
  friend class Machine;
  BlockArena<Value> values_;
  BlockArena<TensorInfo> tensors_;
  BlockArena<StorageInfo> storage_infos_;
  TextArena text_;
  const Value* root_ = nullptr;
  std::uint64_t end_ = 0;
  std::vector<const Value*> storages_;
  std::vector<std::string_view> view_keys_;
  bool has_unknown_ = false;
};

// The globals refused even in the permissive mode (docs/PYTORCH.md, "Always refused"): modules with
// everything under them, and dotted paths (a module or a global) with everything under them.
std::span<const std::string_view> refused_modules() noexcept;
std::span<const std::string_view> refused_paths() noexcept;

// The dtype of a torch dtype name ("float32", "bfloat16"); nullopt for names with no safetensors type.
std::optional<TensorType> torch_dtype(std::string_view name) noexcept;

}  // namespace safeweights::pytorch
