// The pickle machine: one loop over opcodes, each handled by a short method; the allowlist and the
// emulated callables. Nothing here calls code named by the pickle: a global is a value, and "calling"
// an allowlisted one builds another value.
#include "pytorch/pickle_vm.h"

#include <array>
#include <bit>
#include <cstring>
#include <map>
#include <new>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "core/hash.h"
#include "core/little_endian.h"
#include "core/status_macros.h"

namespace safeweights::pytorch {
namespace {

// torch's dtypes with a safetensors type, and the legacy storage class of each classic one.
struct DtypeName {
  std::string_view dtype;
  std::string_view storage;  // empty for the dtypes torch saves in UntypedStorage (_rebuild_tensor_v3)
  TensorType type;
};
constexpr std::array<DtypeName, 19> kDtypes = {{
    {"float64", "DoubleStorage", TensorType::F64},
    {"float32", "FloatStorage", TensorType::F32},
    {"float16", "HalfStorage", TensorType::F16},
    {"bfloat16", "BFloat16Storage", TensorType::BF16},
    {"int64", "LongStorage", TensorType::I64},
    {"int32", "IntStorage", TensorType::I32},
    {"int16", "ShortStorage", TensorType::I16},
    {"int8", "CharStorage", TensorType::I8},
    {"uint8", "ByteStorage", TensorType::U8},
    {"bool", "BoolStorage", TensorType::BOOL},
    {"complex64", "ComplexFloatStorage", TensorType::C64},
    {"float8_e5m2", "", TensorType::F8_E5M2},
    {"float8_e4m3fn", "", TensorType::F8_E4M3},
    {"float8_e5m2fnuz", "", TensorType::F8_E5M2FNUZ},
    {"float8_e4m3fnuz", "", TensorType::F8_E4M3FNUZ},
    {"float8_e8m0fnu", "", TensorType::F8_E8M0},
    {"uint16", "", TensorType::U16},
    {"uint32", "", TensorType::U32},
    {"uint64", "", TensorType::U64},
}};

// Names torch allowlists that have no safetensors form: recognised so the error says so.
constexpr std::array<std::string_view, 11> kUnsupportedTorch = {
    "ComplexDoubleStorage", "QInt8Storage", "QUInt8Storage", "QInt32Storage", "QUInt4x2Storage", "QUInt2x4Storage",
    "complex128",           "complex32",    "qint8",         "quint8",        "qint32"};
constexpr std::array<std::string_view, 8> kUnsupportedRebuild = {"_rebuild_qtensor",
                                                                 "_rebuild_sparse_tensor",
                                                                 "_rebuild_nested_tensor",
                                                                 "_rebuild_meta_tensor_no_storage",
                                                                 "_rebuild_wrapper_subclass",
                                                                 "_rebuild_device_tensor_from_numpy",
                                                                 "_rebuild_device_tensor_from_cpu_tensor",
                                                                 "_rebuild_xla_tensor"};

// Always refused, in the permissive mode too, where they would be inert: a file naming them is an
// attack, not an unusual checkpoint. Derived from the public lists of pickle scanners and exploits
// (docs/PYTORCH.md, "Always refused", says which and how; tests check every entry through the CLI).
// A module here is refused with everything under it (a global's first dotted part), which closes the
// submodule bypass of CVE-2025-10157 (`asyncio.unix_events`): the whole path is what counts.
constexpr auto kRefusedModules = std::to_array<std::string_view>({
    // process and code execution, the interpreter itself
    "__builtin__",
    "__builtins__",
    "builtins",
    "os",
    "posix",
    "nt",
    "posixpath",
    "ntpath",
    "sys",
    "subprocess",
    "_posixsubprocess",
    "commands",
    "pty",
    "pexpect",
    "pipes",
    "multiprocessing",
    "signal",
    "_signal",
    "threading",
    "_thread",
    "thread",
    "atexit",
    "gc",
    "site",
    "runpy",
    "code",
    "codeop",
    "types",
    "inspect",
    "_interpreters",
    "_xxsubinterpreters",
    "compileall",
    "py_compile",
    // imports
    "importlib",
    "_frozen_importlib",
    "_frozen_importlib_external",
    "_imp",
    "imp",
    "pkgutil",
    "zipimport",
    // getattr / call wrappers
    "operator",
    "_operator",
    "functools",
    // debuggers, profilers, test runners that exec strings
    "pdb",
    "bdb",
    "timeit",
    "cProfile",
    "profile",
    "trace",
    "doctest",
    "unittest",
    "test",
    "pydoc",
    "idlelib",
    "lib2to3",
    "_pyrepl",
    // nested pickles and native code
    "pickle",
    "_pickle",
    "cPickle",
    "marshal",
    "shelve",
    "dill",
    "cloudpickle",
    "joblib",
    "ctypes",
    "_ctypes",
    "mmap",
    // files and archives
    "io",
    "_io",
    "StringIO",
    "cStringIO",
    "shutil",
    "tempfile",
    "filecmp",
    "fileinput",
    "glob",
    "linecache",
    "difflib",
    "tarfile",
    "zipfile",
    "sqlite3",
    "_sqlite3",
    "logging",
    "syslog",
    "platform",
    "distutils",
    // network
    "socket",
    "ssl",
    "select",
    "selectors",
    "socketserver",
    "SocketServer",
    "asyncio",
    "aiohttp",
    "http",
    "httplib",
    "urllib",
    "urllib2",
    "requests",
    "smtplib",
    "imaplib",
    "ftplib",
    "poplib",
    "telnetlib",
    "nntplib",
    "xmlrpc",
    "webbrowser",
    // package installers, environments, and modules that run commands under other names
    "pip",
    "ensurepip",
    "venv",
    "uuid",
    "_osx_support",
    "_aix_support",
});
// Dotted paths refused with everything under them, for packages whose other parts checkpoints do name.
constexpr auto kRefusedPaths = std::to_array<std::string_view>({
    "torch.hub",
    "torch.jit",
    "torch.serialization",
    "torch.load",
    "torch.compile",
    "torch._dynamo",
    "torch._inductor",
    "torch.multiprocessing",
    "torch.fx.experimental.symbolic_shapes",
    "torch.storage._load_from_bytes",
    "torch.utils._config_module",
    "torch.utils.bottleneck",
    "torch.utils.collect_env",
    "torch.utils.data.datapipes.utils.decoder",
    "torch.distributed.elastic.rendezvous.api",
    "numpy.f2py",
    "numpy.distutils",
    "numpy.testing",
});

struct Resolved {
  Callable callable = Callable::Unknown;
  std::optional<TensorType> dtype;
  bool untyped = false;
};

template <std::size_t N>
bool contains(const std::array<std::string_view, N>& list, std::string_view name) {
  for (std::string_view item : list)
    if (item == name) return true;
  return false;
}

// The entry of the lists above that refuses `module`.`name`, if any: the module's first part, a dotted
// path that is the global or holds it, or a part of a dotted name (protocol 4 resolves `name` as an
// attribute path, so `torch` + `os.system` reaches os.system).
std::optional<std::string_view> refused_entry(std::string_view module, std::string_view name) {
  auto listed_module = [](std::string_view part) -> std::optional<std::string_view> {
    for (std::string_view m : kRefusedModules)
      if (m == part) return m;
    return std::nullopt;
  };
  if (auto m = listed_module(module.substr(0, module.find('.')))) return m;
  for (std::string_view path : kRefusedPaths) {
    // `module.name` equal to the path or under it, without composing the text.
    const bool in_module = module.starts_with(path) && (module.size() == path.size() || module[path.size()] == '.');
    const bool across = path.starts_with(module) && path.size() > module.size() && path[module.size()] == '.' &&
                        name.starts_with(path.substr(module.size() + 1)) &&
                        (name.size() == path.size() - module.size() - 1 || name[path.size() - module.size() - 1] == '.');
    if (in_module || across) return path;
  }
  for (std::size_t at = 0; name.find('.') != std::string_view::npos && at <= name.size();) {
    const std::size_t dot = std::min(name.find('.', at), name.size());
    if (auto m = listed_module(name.substr(at, dot - at))) return m;
    at = dot + 1;
  }
  return std::nullopt;
}

std::optional<Resolved> resolve_torch(std::string_view name) {
  for (const DtypeName& d : kDtypes) {
    if (name == d.dtype) return Resolved{Callable::Dtype, d.type, false};
    if (!d.storage.empty() && name == d.storage) return Resolved{Callable::StorageType, d.type, false};
  }
  if (name == "UntypedStorage") return Resolved{Callable::StorageType, std::nullopt, true};
  if (name == "Tensor") return Resolved{Callable::TensorClass, std::nullopt, false};
  if (name == "Size") return Resolved{Callable::Size, std::nullopt, false};
  if (name == "device") return Resolved{Callable::InertValue, std::nullopt, false};
  if (contains(kUnsupportedTorch, name)) return Resolved{Callable::Unsupported, std::nullopt, false};
  return std::nullopt;
}

// The allowlist: (module, name) with Python 2 module spellings already mapped.
std::optional<Resolved> resolve(std::string_view module, std::string_view name) {
  if (module == "collections" && (name == "OrderedDict" || name == "Counter")) return Resolved{Callable::OrderedDict, std::nullopt, false};
  if (module == "torch") return resolve_torch(name);
  if (module == "torch._utils") {
    if (name == "_rebuild_tensor") return Resolved{Callable::RebuildTensor, std::nullopt, false};
    if (name == "_rebuild_tensor_v2") return Resolved{Callable::RebuildTensorV2, std::nullopt, false};
    if (name == "_rebuild_tensor_v3") return Resolved{Callable::RebuildTensorV3, std::nullopt, false};
    if (name == "_rebuild_parameter") return Resolved{Callable::RebuildParameter, std::nullopt, false};
    if (name == "_rebuild_parameter_with_state") return Resolved{Callable::RebuildParameterWithState, std::nullopt, false};
    if (contains(kUnsupportedRebuild, name)) return Resolved{Callable::Unsupported, std::nullopt, false};
  }
  // Storages of the dtypes without a typed storage class: torch 2.x names the class where it is defined.
  if (module == "torch.storage" && name == "UntypedStorage") return Resolved{Callable::StorageType, std::nullopt, true};
  if (module == "torch._tensor" && name == "_rebuild_from_type_v2") return Resolved{Callable::RebuildFromTypeV2, std::nullopt, false};
  if (module == "torch.nn.parameter" && name == "Parameter") return Resolved{Callable::TensorClass, std::nullopt, false};
  if (module == "torch.serialization" && name == "_get_layout") return Resolved{Callable::InertValue, std::nullopt, false};
  if (module == "_codecs" && name == "encode") return Resolved{Callable::CodecsEncode, std::nullopt, false};
  if (module == "builtins") {
    if (name == "set" || name == "frozenset") return Resolved{Callable::SetType, std::nullopt, false};
    if (name == "bytes" || name == "bytearray") return Resolved{Callable::BytesType, std::nullopt, false};
    if (name == "complex") return Resolved{Callable::InertValue, std::nullopt, false};
  }
  return std::nullopt;
}

std::string_view py3_module(std::string_view module) {
  if (module == "__builtin__") return "builtins";
  if (module == "copy_reg") return "copyreg";
  return module;
}

// Opcode names for messages.
std::string opcode_name(std::uint8_t op) {
  switch (op) {
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 'P': return "PERSID";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'S': return "STRING";
    case 'V': return "UNICODE";
    case 'F': return "FLOAT";
    case 'g': return "GET";
    case 'p': return "PUT";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    case 0x96: return "BYTEARRAY8";
    default: break;
  }
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", op);
  return buf;
}

constexpr std::uint64_t kMaxName = 4096;  // a module or global name

}  // namespace

std::string_view TextArena::keep(std::string_view s) {
  if (s.empty()) return {};
  if (s.size() > left_) {
    if (s.size() > kBlock / 4) {  // an allocation of its own; the current block stays in use
      char* own = blocks_.emplace_back(std::make_unique_for_overwrite<char[]>(s.size())).get();
      std::memcpy(own, s.data(), s.size());
      return {own, s.size()};
    }
    at_ = blocks_.emplace_back(std::make_unique_for_overwrite<char[]>(kBlock)).get();
    left_ = kBlock;
  }
  std::memcpy(at_, s.data(), s.size());
  const std::string_view kept(at_, s.size());
  at_ += s.size();
  left_ -= s.size();
  return kept;
}

std::optional<TensorType> torch_dtype(std::string_view name) noexcept {
  for (const DtypeName& d : kDtypes)
    if (d.dtype == name) return d.type;
  return std::nullopt;
}

class Machine {
 public:
  Machine(std::span<const std::byte> bytes, const PickleOptions& options, Pickle& out)
      : bytes_(bytes), opt_(options), lim_(options.limits), out_(out) {}

  Status run();

 private:
  // --- errors ---
  Error fail(ErrorKind kind, ErrorRule rule, const std::string& message) const {
    return Error(kind, message + " at byte " + std::to_string(op_at_) + " of " + opt_.name).with_offset(opt_.base_offset + op_at_).with_rule(rule);
  }
  Error malformed(ErrorRule rule, const std::string& message) const { return fail(ErrorKind::InvalidPickle, rule, message); }
  Error unsafe(ErrorRule rule, const std::string& message) const { return fail(ErrorKind::UnsafePickle, rule, message); }
  Error limit(const std::string& what) const {
    return fail(ErrorKind::ResourceLimit, ErrorRule::PytorchLimit, "pickle exceeds the limit on " + what);
  }

  // --- reading ---
  Result<const std::byte*> take(std::uint64_t n) {
    if (n > bytes_.size() - pos_) {
      truncated_ = true;
      return malformed(ErrorRule::PytorchPickleTruncated, "truncated pickle (" + std::to_string(n) + " bytes wanted)");
    }
    const std::byte* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  Result<std::uint64_t> take_uint(int n) {
    SW_ASSIGN_OR_RETURN(const std::byte* p, take(static_cast<std::uint64_t>(n)));
    return le::load(p, n);
  }
  Result<std::string_view> take_string(std::uint64_t n);
  Result<std::string_view> take_line();
  // A copy in the pickle's text arena, counted against the limit on all text.
  Result<std::string_view> keep(std::string_view text);

  // --- values ---
  Result<Value*> make(Kind kind);
  Result<Value*> make_shared_constant(Value*& slot, Kind kind);
  Status push(Value* v) {
    if (stack_.size() >= lim_.max_stack) return limit("stack depth");
    stack_.push_back(v);
    return Status::ok();
  }
  Result<Value*> pop() {
    if (stack_.size() <= frame_start()) return malformed(ErrorRule::PytorchPickleStack, "pop from an empty stack");
    Value* v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Result<Value*> top() {
    if (stack_.size() <= frame_start()) return malformed(ErrorRule::PytorchPickleStack, "empty stack");
    return stack_.back();
  }
  std::size_t frame_start() const { return marks_.empty() ? 0 : marks_.back(); }
  // The values above the innermost MARK (a view of the stack, valid until it changes).
  Result<std::span<Value* const>> above_mark() const {
    if (marks_.empty()) return malformed(ErrorRule::PytorchPickleStack, "no MARK to pop to");
    return std::span<Value* const>(stack_).subspan(marks_.back());
  }
  void drop_mark() {
    stack_.resize(marks_.back());
    marks_.pop_back();
  }
  // A container built from the values above the MARK, which are popped with it.
  Status op_from_mark(Kind kind) {
    SW_ASSIGN_OR_RETURN(std::span<Value* const> items, above_mark());
    if (kind == Kind::Dict && items.size() % 2 != 0) return malformed(ErrorRule::PytorchPickleStack, "DICT with an odd number of items");
    SW_RETURN_IF_ERROR(count_items(items.size()));
    SW_ASSIGN_OR_RETURN(Value * v, make(kind));
    v->items.assign(items.begin(), items.end());
    drop_mark();
    return push(v);
  }
  Status count_items(std::uint64_t n) {
    if (n > lim_.max_items - items_) return limit("container items");
    items_ += n;
    return Status::ok();
  }
  Result<Value*> make_int(std::int64_t v) {
    // Small ints (sizes, strides, offsets) are one shared value each: nothing ever changes an int.
    if (v >= 0 && v < static_cast<std::int64_t>(small_ints_.size())) {
      Value*& slot = small_ints_[static_cast<std::size_t>(v)];
      if (slot) return slot;
      SW_ASSIGN_OR_RETURN(slot, make(Kind::Int));
      slot->integer = v;
      return slot;
    }
    SW_ASSIGN_OR_RETURN(Value * value, make(Kind::Int));
    value->integer = v;
    return value;
  }

  // --- opcodes ---
  Status step(std::uint8_t op);
  Status op_proto();
  Status op_frame();
  Status op_mark();
  Status op_pop();
  Status op_pop_mark();
  Status op_dup();
  Status op_none();
  Status op_bool(bool value);
  Status op_binint(int width);
  Status op_long_sized(int length_bytes);
  Status op_long(std::uint64_t n);
  Status op_binfloat();
  Status op_empty(Kind kind);
  Status op_binput(int index_bytes);
  Status op_binget(int index_bytes);
  Status op_global_line();
  Status op_stack_global();
  Status op_string(Kind kind, int length_bytes);
  Status op_tuple(std::size_t n);
  Status op_extend(Kind target, bool many);
  Status op_memo_put(std::uint64_t index);
  Status op_memo_get(std::uint64_t index);
  Status op_global(std::string_view module, std::string_view name);
  Status op_reduce();
  Status op_build();
  Status op_newobj(bool ex);
  Status op_persid();
  Status legacy_view(std::string_view key, const Value* view, std::uint64_t count, std::uint64_t elsize, StorageInfo& info);

  // --- emulated callables ---
  Result<Value*> call(const Value& callable, const Value& args);
  Result<Value*> rebuild_tensor(Callable which, const std::vector<Value*>& args);
  Result<Value*> tensor_from_type(const std::vector<Value*>& args);
  Result<Value*> latin1_bytes(const std::vector<Value*>& args);
  Result<std::vector<std::uint64_t>> dims(const Value* v, const char* what);
  // A placeholder for what `global` gives; its text is the global's (shared, not copied).
  Result<Value*> opaque(const Value& global) {
    SW_ASSIGN_OR_RETURN(Value * v, make(Kind::Opaque));
    v->text = global.text;
    return v;
  }

  std::span<const std::byte> bytes_;
  const PickleOptions& opt_;
  const PickleLimits& lim_;
  Pickle& out_;
  std::uint64_t pos_ = 0;
  std::uint64_t op_at_ = 0;  // offset of the opcode being run
  std::vector<Value*> stack_;
  std::vector<std::size_t> marks_;
  // The memo: indices 0, 1, 2, ... as picklers write them in a vector; any other index in a map.
  std::vector<Value*> memo_dense_;
  std::unordered_map<std::uint64_t, Value*> memo_sparse_;
  std::map<std::tuple<std::string_view, std::uint64_t, std::uint64_t>, Value*> storages_;  // by key and view
  std::unordered_map<std::string_view, const Value*, SeededHash> by_key_;                  // the first reference to each key
  // Legacy view keys, bound by their first declaration (legacy_view()).
  struct LegacyView {
    std::string_view root;
    bool typed;
    TensorType dtype;
    std::uint64_t offset, size;  // elements
  };
  std::unordered_map<std::string_view, LegacyView, SeededHash> legacy_views_;
  std::array<Value*, 256> small_ints_{};
  Value* none_ = nullptr;
  Value* bools_[2] = {nullptr, nullptr};
  std::string scratch_;  // composing a global's dotted name or a latin-1 string, reused
  std::uint64_t objects_ = 0;
  std::uint64_t items_ = 0;
  std::uint64_t text_ = 0;
  bool stopped_ = false;

 public:
  bool truncated_ = false;  // the error was running out of bytes
};

Result<Value*> Machine::make(Kind kind) {
  if (objects_ >= lim_.max_objects) return limit("values");
  ++objects_;
  Value& v = out_.values_.emplace();
  v.kind = kind;
  return &v;
}

// None, True and False: one value each (nothing changes them).
Result<Value*> Machine::make_shared_constant(Value*& slot, Kind kind) {
  if (!slot) {
    SW_ASSIGN_OR_RETURN(slot, make(kind));
  }
  return slot;
}

Result<std::string_view> Machine::take_string(std::uint64_t n) {
  if (n > lim_.max_string) return limit("string length (" + std::to_string(n) + " bytes)");
  SW_ASSIGN_OR_RETURN(const std::byte* p, take(n));
  return std::string_view(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
}

Result<std::string_view> Machine::keep(std::string_view text) {
  if (text.size() > lim_.max_text - text_) return limit("total string bytes");
  text_ += text.size();
  return out_.text_.keep(text);
}

Result<std::string_view> Machine::take_line() {
  for (std::uint64_t i = pos_; i < bytes_.size() && i - pos_ <= kMaxName; ++i) {
    if (bytes_[i] == std::byte{'\n'}) {
      std::string_view line(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<std::size_t>(i - pos_));
      pos_ = i + 1;
      return line;
    }
  }
  return malformed(ErrorRule::PytorchPickleArguments, "unterminated or overlong GLOBAL name");
}

Status Machine::run() {
  while (!stopped_) {
    op_at_ = pos_;
    SW_ASSIGN_OR_RETURN(std::uint64_t op, take_uint(1));
    SW_RETURN_IF_ERROR(step(static_cast<std::uint8_t>(op)));
  }
  if (!marks_.empty() || stack_.size() != 1)
    return malformed(ErrorRule::PytorchPickleStack,
                     "STOP with " + std::to_string(stack_.size()) + " values and " + std::to_string(marks_.size()) + " marks (one value expected)");
  out_.root_ = stack_.back();
  out_.end_ = pos_;
  return Status::ok();
}

// One opcode. Every case is one call: what an opcode does is in the op_ function it names.
Status Machine::step(std::uint8_t op) {
  switch (op) {
    case 0x80: return op_proto();
    case 0x95: return op_frame();
    case '.': stopped_ = true; return Status::ok();  // STOP
    case '(': return op_mark();
    case '0': return op_pop();
    case '1': return op_pop_mark();
    case '2': return op_dup();
    case 'N': return op_none();
    case 0x88: return op_bool(true);                                          // NEWTRUE
    case 0x89: return op_bool(false);                                         // NEWFALSE
    case 'J': return op_binint(4);                                            // BININT: signed 32-bit
    case 'K': return op_binint(1);                                            // BININT1
    case 'M': return op_binint(2);                                            // BININT2
    case 0x8a: return op_long_sized(1);                                       // LONG1
    case 0x8b: return op_long_sized(4);                                       // LONG4
    case 'G': return op_binfloat();                                           // BINFLOAT
    case 'X': return op_string(Kind::Str, 4);                                 // BINUNICODE
    case 0x8c: return op_string(Kind::Str, 1);                                // SHORT_BINUNICODE
    case 0x8d: return op_string(Kind::Str, 8);                                // BINUNICODE8
    case 'B': return op_string(Kind::Bytes, 4);                               // BINBYTES
    case 'C': return op_string(Kind::Bytes, 1);                               // SHORT_BINBYTES
    case 0x8e: return op_string(Kind::Bytes, 8);                              // BINBYTES8
    case 'T': return op_string(Kind::Str, 4);                                 // BINSTRING (Python 2 str)
    case 'U': return op_string(Kind::Str, 1);                                 // SHORT_BINSTRING
    case ')': return op_tuple(0);                                             // EMPTY_TUPLE
    case 0x85: return op_tuple(1);                                            // TUPLE1
    case 0x86: return op_tuple(2);                                            // TUPLE2
    case 0x87: return op_tuple(3);                                            // TUPLE3
    case 't': return op_from_mark(Kind::Tuple);                               // TUPLE
    case ']': return op_empty(Kind::List);                                    // EMPTY_LIST
    case '}': return op_empty(Kind::Dict);                                    // EMPTY_DICT
    case 0x8f: return op_empty(Kind::Set);                                    // EMPTY_SET
    case 'l': return op_from_mark(Kind::List);                                // LIST
    case 0x91: return op_from_mark(Kind::Set);                                // FROZENSET
    case 'd': return op_from_mark(Kind::Dict);                                // DICT
    case 'a': return op_extend(Kind::List, false);                            // APPEND
    case 'e': return op_extend(Kind::List, true);                             // APPENDS
    case 0x90: return op_extend(Kind::Set, true);                             // ADDITEMS
    case 's': return op_extend(Kind::Dict, false);                            // SETITEM
    case 'u': return op_extend(Kind::Dict, true);                             // SETITEMS
    case 'q': return op_binput(1);                                            // BINPUT
    case 'r': return op_binput(4);                                            // LONG_BINPUT
    case 0x94: return op_memo_put(memo_dense_.size() + memo_sparse_.size());  // MEMOIZE
    case 'h': return op_binget(1);                                            // BINGET
    case 'j': return op_binget(4);                                            // LONG_BINGET
    case 'c': return op_global_line();                                        // GLOBAL
    case 0x93: return op_stack_global();                                      // STACK_GLOBAL
    case 'R': return op_reduce();
    case 'b': return op_build();
    case 0x81: return op_newobj(false);
    case 0x92: return op_newobj(true);
    case 'Q': return op_persid();
    case 'i':
    case 'o': return unsafe(ErrorRule::PytorchOpcodeRefused, "opcode " + opcode_name(op) + " (calls a class with arguments) is refused");
    case 0x82:
    case 0x83:
    case 0x84:
    case 'P':
    case 'I':
    case 'L':
    case 'S':
    case 'V':
    case 'F':
    case 'g':
    case 'p':
    case 0x96:
    case 0x97:
    case 0x98: return unsafe(ErrorRule::PytorchOpcodeRefused, "opcode " + opcode_name(op) + " is not in the set torch checkpoints use");
    default: return malformed(ErrorRule::PytorchPickleOpcode, "unknown opcode " + opcode_name(op));
  }
}

Status Machine::op_proto() {
  SW_ASSIGN_OR_RETURN(std::uint64_t proto, take_uint(1));
  if (proto > 5) return malformed(ErrorRule::PytorchPickleProtocol, "unsupported pickle protocol " + std::to_string(proto));
  return Status::ok();
}

// FRAME: a length hint, checked against what is left.
Status Machine::op_frame() {
  SW_ASSIGN_OR_RETURN(std::uint64_t n, take_uint(8));
  if (n > bytes_.size() - pos_) return malformed(ErrorRule::PytorchPickleTruncated, "FRAME longer than the pickle");
  return Status::ok();
}

Status Machine::op_mark() {
  if (marks_.size() >= lim_.max_marks) return limit("open MARKs");
  marks_.push_back(stack_.size());
  return Status::ok();
}

// POP: a value, or the MARK when its frame is empty.
Status Machine::op_pop() {
  if (stack_.size() <= frame_start()) return op_pop_mark();
  stack_.pop_back();
  return Status::ok();
}

Status Machine::op_pop_mark() {
  SW_RETURN_IF_ERROR(above_mark().status());
  drop_mark();
  return Status::ok();
}

Status Machine::op_dup() {
  SW_ASSIGN_OR_RETURN(Value * v, top());
  return push(v);
}

Status Machine::op_none() {
  SW_ASSIGN_OR_RETURN(Value * v, make_shared_constant(none_, Kind::None));
  return push(v);
}

Status Machine::op_bool(bool value) {
  SW_ASSIGN_OR_RETURN(Value * v, make_shared_constant(bools_[value ? 1 : 0], Kind::Bool));
  v->boolean = value;
  return push(v);
}

// BININT (4 bytes) is signed; BININT1 and BININT2 are unsigned.
Status Machine::op_binint(int width) {
  SW_ASSIGN_OR_RETURN(std::uint64_t u, take_uint(width));
  const std::int64_t value = width == 4 ? static_cast<std::int32_t>(static_cast<std::uint32_t>(u)) : static_cast<std::int64_t>(u);
  SW_ASSIGN_OR_RETURN(Value * v, make_int(value));
  return push(v);
}

Status Machine::op_long_sized(int length_bytes) {
  SW_ASSIGN_OR_RETURN(std::uint64_t n, take_uint(length_bytes));
  return op_long(n);
}

// BINFLOAT: a big-endian IEEE double.
Status Machine::op_binfloat() {
  SW_ASSIGN_OR_RETURN(const std::byte* p, take(8));
  std::uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u = (u << 8) | std::to_integer<std::uint64_t>(p[i]);
  SW_ASSIGN_OR_RETURN(Value * v, make(Kind::Float));
  v->real = std::bit_cast<double>(u);
  return push(v);
}

Status Machine::op_empty(Kind kind) {
  SW_ASSIGN_OR_RETURN(Value * v, make(kind));
  return push(v);
}

Status Machine::op_binput(int index_bytes) {
  SW_ASSIGN_OR_RETURN(std::uint64_t i, take_uint(index_bytes));
  return op_memo_put(i);
}

Status Machine::op_binget(int index_bytes) {
  SW_ASSIGN_OR_RETURN(std::uint64_t i, take_uint(index_bytes));
  return op_memo_get(i);
}

// GLOBAL: module and name as two lines of the pickle.
Status Machine::op_global_line() {
  SW_ASSIGN_OR_RETURN(std::string_view module, take_line());
  SW_ASSIGN_OR_RETURN(std::string_view name, take_line());
  return op_global(module, name);
}

// STACK_GLOBAL: module and name from two strs, whatever produced them.
Status Machine::op_stack_global() {
  SW_ASSIGN_OR_RETURN(Value * name, pop());
  SW_ASSIGN_OR_RETURN(Value * module, pop());
  if (module->kind != Kind::Str || name->kind != Kind::Str) return malformed(ErrorRule::PytorchPickleArguments, "STACK_GLOBAL of non-strings");
  if (module->text.size() > kMaxName || name->text.size() > kMaxName)
    return malformed(ErrorRule::PytorchPickleArguments, "overlong STACK_GLOBAL name");
  return op_global(module->text, name->text);
}

Status Machine::op_long(std::uint64_t n) {
  SW_ASSIGN_OR_RETURN(std::string_view digits, take_string(n));
  const bool negative = n > 0 && (static_cast<unsigned char>(digits.back()) & 0x80) != 0;
  // Fits an int64 when the bytes past the 8th are sign extension and the 8th byte's sign agrees.
  bool fits = true;
  for (std::size_t i = 8; i < digits.size(); ++i) fits = fits && static_cast<unsigned char>(digits[i]) == (negative ? 0xFF : 0x00);
  if (digits.size() >= 8) fits = fits && ((static_cast<unsigned char>(digits[7]) & 0x80) != 0) == negative;
  if (!fits) {
    SW_ASSIGN_OR_RETURN(Value * v, make(Kind::BigInt));
    SW_ASSIGN_OR_RETURN(v->text, keep(digits));
    return push(v);
  }
  std::uint64_t u = negative ? ~0ull : 0;
  for (std::size_t i = 0; i < std::min<std::size_t>(8, digits.size()); ++i) {
    u &= ~(0xFFull << (8 * i));
    u |= static_cast<std::uint64_t>(static_cast<unsigned char>(digits[i])) << (8 * i);
  }
  SW_ASSIGN_OR_RETURN(Value * v, make_int(static_cast<std::int64_t>(u)));
  return push(v);
}

Status Machine::op_string(Kind kind, int length_bytes) {
  SW_ASSIGN_OR_RETURN(std::uint64_t n, take_uint(length_bytes));
  SW_ASSIGN_OR_RETURN(std::string_view text, take_string(n));
  SW_ASSIGN_OR_RETURN(Value * v, make(kind));
  SW_ASSIGN_OR_RETURN(v->text, keep(text));
  return push(v);
}

Status Machine::op_tuple(std::size_t n) {
  if (stack_.size() - frame_start() < n) return malformed(ErrorRule::PytorchPickleStack, "TUPLE" + std::to_string(n) + " on a stack of fewer values");
  SW_RETURN_IF_ERROR(count_items(n));
  SW_ASSIGN_OR_RETURN(Value * v, make(Kind::Tuple));
  v->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
  stack_.resize(stack_.size() - n);
  return push(v);
}

// APPEND / APPENDS / ADDITEMS / SETITEM / SETITEMS: the items on top of the stack (one, a key and a
// value, or all above the MARK) go into the container below them, straight from the stack.
Status Machine::op_extend(Kind target, bool many) {
  const bool dict = target == Kind::Dict;
  std::size_t from = 0;       // first item's place on the stack
  std::size_t enclosing = 0;  // where the container's frame starts
  if (many) {
    SW_ASSIGN_OR_RETURN(std::span<Value* const> items, above_mark());
    if (dict && items.size() % 2 != 0) return malformed(ErrorRule::PytorchPickleStack, "SETITEMS with an odd number of items");
    from = marks_.back();
    enclosing = marks_.size() >= 2 ? marks_[marks_.size() - 2] : 0;
  } else {
    const std::size_t n = dict ? 2 : 1;
    if (stack_.size() - frame_start() < n) return malformed(ErrorRule::PytorchPickleStack, "pop from an empty stack");
    from = stack_.size() - n;
    enclosing = frame_start();
  }
  if (from <= enclosing) return malformed(ErrorRule::PytorchPickleStack, "empty stack");
  Value* container = stack_[from - 1];
  if (container->kind != Kind::Opaque) {  // a placeholder's state is dropped
    if (container->kind != target) {
      if (dict) return unsafe(ErrorRule::PytorchCallRefused, "SETITEM on a value that is not a dict");
      return unsafe(ErrorRule::PytorchCallRefused,
                    std::string(target == Kind::Set ? "ADDITEMS" : "APPEND") + " to a value that is not a " + (target == Kind::Set ? "set" : "list"));
    }
    SW_RETURN_IF_ERROR(count_items(stack_.size() - from));
    container->items.insert(container->items.end(), stack_.begin() + static_cast<std::ptrdiff_t>(from), stack_.end());
  }
  if (many) {
    drop_mark();
  } else {
    stack_.resize(from);
  }
  return Status::ok();
}

Status Machine::op_memo_put(std::uint64_t index) {
  SW_ASSIGN_OR_RETURN(Value * v, top());
  if (index < memo_dense_.size()) {
    memo_dense_[static_cast<std::size_t>(index)] = v;
    return Status::ok();
  }
  auto sparse = memo_sparse_.find(index);
  if (sparse != memo_sparse_.end()) {
    sparse->second = v;
    return Status::ok();
  }
  if (memo_dense_.size() + memo_sparse_.size() >= lim_.max_memo) return limit("memo entries");
  if (index == memo_dense_.size()) {
    memo_dense_.push_back(v);
  } else {
    memo_sparse_.emplace(index, v);
  }
  return Status::ok();
}

Status Machine::op_memo_get(std::uint64_t index) {
  if (index < memo_dense_.size()) return push(memo_dense_[static_cast<std::size_t>(index)]);
  auto it = memo_sparse_.find(index);
  if (it == memo_sparse_.end()) return malformed(ErrorRule::PytorchPickleStack, "memo index " + std::to_string(index) + " was never stored");
  return push(it->second);
}

Status Machine::op_global(std::string_view module_in, std::string_view name) {
  const std::string_view module = py3_module(module_in);
  scratch_.assign(module).append(".").append(name);
  std::optional<Resolved> resolved = resolve(module, name);
  if (!resolved) {
    // Only where permissive mode would read the file does the message offer it: a refused name stays refused.
    if (const std::optional<std::string_view> entry = refused_entry(module_in, name))
      return unsafe(ErrorRule::PytorchGlobalRefused, "global `" + scratch_ + "` is not in the allowlist (`" + std::string(*entry) +
                                                         "` is never read, even with --allow-unknown: a checkpoint has no reason to name it)");
    if (!opt_.allow_unknown)
      return unsafe(
          ErrorRule::PytorchGlobalRefused,
          "global `" + scratch_ +
              "` is not in the allowlist (--allow-unknown, FormatOptions::allow_unknown, reads it as an inert placeholder: nothing is called)");
    out_.has_unknown_ = true;
    resolved = Resolved{};
  }
  SW_ASSIGN_OR_RETURN(Value * v, make(Kind::Global));
  SW_ASSIGN_OR_RETURN(v->text, keep(scratch_));
  v->callable = resolved->callable;
  if (resolved->dtype) v->dtype = *resolved->dtype;
  if (resolved->callable == Callable::StorageType) {
    v->storage = &out_.storage_infos_.emplace();
    v->storage->typed = !resolved->untyped;
    if (resolved->dtype) v->storage->dtype = *resolved->dtype;
  }
  return push(v);
}

Status Machine::op_reduce() {
  SW_ASSIGN_OR_RETURN(Value * args, pop());
  SW_ASSIGN_OR_RETURN(Value * callable, pop());
  if (callable->kind != Kind::Global) return unsafe(ErrorRule::PytorchCallRefused, "REDUCE on a value that is not a global");
  if (args->kind != Kind::Tuple) return malformed(ErrorRule::PytorchPickleArguments, "REDUCE arguments are not a tuple");
  SW_ASSIGN_OR_RETURN(Value * result, call(*callable, *args));
  return push(result);
}

Status Machine::op_build() {
  SW_ASSIGN_OR_RETURN(Value * state, pop());
  SW_ASSIGN_OR_RETURN(Value * target, top());
  (void)state;
  // An OrderedDict's attributes (state_dict()'s `_metadata`) and a placeholder's state carry no
  // tensor bytes: accepted and dropped.
  if (target->kind == Kind::Dict || target->kind == Kind::Opaque) return Status::ok();
  return unsafe(ErrorRule::PytorchCallRefused, "BUILD on a value of this kind is refused (only dicts and placeholders take state)");
}

Status Machine::op_newobj(bool ex) {
  if (ex) SW_RETURN_IF_ERROR(pop().status());  // kwargs
  SW_ASSIGN_OR_RETURN(Value * args, pop());
  SW_ASSIGN_OR_RETURN(Value * cls, pop());
  (void)args;
  const std::string op = ex ? "NEWOBJ_EX" : "NEWOBJ";
  if (cls->kind != Kind::Global) return unsafe(ErrorRule::PytorchCallRefused, op + " on a value that is not a global");
  if (cls->callable != Callable::Unknown) return unsafe(ErrorRule::PytorchCallRefused, op + " of `" + std::string(cls->text) + "` is refused");
  SW_ASSIGN_OR_RETURN(Value * v, opaque(*cls));
  return push(v);
}

// The one place that decides what a legacy storage reference resolves to (docs/PYTORCH.md, "Legacy
// storage views"). torch's legacy loader keeps root keys and view keys in one table and binds each key
// the first time it sees it: a later reference to a bound view key gets the first binding whatever
// root, offset and size it states, and a view key equal to a root key gets that key's storage. So a
// file can state one thing and have torch run another; torch.save never writes such a file (a view
// key is the address of a distinct storage). We read what a reference states only where torch reads
// the same: a view key bound once, or again with the same root, dtype, offset and size (then it is the
// same storage, as in torch); anything else is refused here, naming both declarations.
Status Machine::legacy_view(std::string_view key, const Value* view, std::uint64_t count, std::uint64_t elsize, StorageInfo& info) {
  auto refuse = [&](const std::string& message) { return fail(ErrorKind::InvalidCheckpoint, ErrorRule::PytorchStorage, message); };
  auto describe = [](const LegacyView& v) {
    return "`" + std::string(v.root) + "` elements [" + std::to_string(v.offset) + ", " + std::to_string(v.offset + v.size) + ")";
  };
  if (auto seen = legacy_views_.find(key); seen != legacy_views_.end())
    return refuse("legacy storage key `" + std::string(key) + "` was declared as a view of " + describe(seen->second) +
                  "; torch.load would read this storage as that view (ambiguous legacy view key)");
  if (view->kind == Kind::None) return Status::ok();
  if (view->kind != Kind::Tuple || view->items.size() != 3 || view->items[0]->kind != Kind::Str || view->items[1]->kind != Kind::Int ||
      view->items[2]->kind != Kind::Int || view->items[1]->integer < 0 || view->items[2]->integer < 0)
    return malformed(ErrorRule::PytorchPickleArguments, "storage view metadata is not (key, offset, size)");
  const LegacyView stated{key, info.typed, info.dtype, static_cast<std::uint64_t>(view->items[1]->integer),
                          static_cast<std::uint64_t>(view->items[2]->integer)};
  const std::string_view view_key = view->items[0]->text;
  if (stated.offset > count || stated.size > count - stated.offset)
    return refuse("storage view `" + std::string(view_key) + "` outside its storage `" + std::string(key) + "`");
  if (view_key == key || by_key_.contains(view_key))
    return refuse("legacy storage view key `" + std::string(view_key) + "` is also a storage key; torch.load would give storage `" +
                  std::string(view_key) + "` for it, not " + describe(stated) + " (ambiguous legacy view key)");
  auto [bound, fresh] = legacy_views_.try_emplace(view_key, stated);
  if (fresh) out_.view_keys_.push_back(view_key);
  const LegacyView& first = bound->second;
  if (!fresh && (first.root != stated.root || first.typed != stated.typed || first.dtype != stated.dtype || first.offset != stated.offset ||
                 first.size != stated.size))
    return refuse("legacy storage view `" + std::string(view_key) + "` is declared as " + describe(stated) + " and before as " + describe(first) +
                  "; torch.load would read both as the first (ambiguous legacy view key)");
  info.view_offset = stated.offset * elsize;
  info.view_nbytes = stated.size * elsize;
  return Status::ok();
}

Status Machine::op_persid() {
  SW_ASSIGN_OR_RETURN(Value * pid, pop());
  const std::size_t arity = opt_.pids == PidForm::Zip ? 5 : 6;
  if (pid->kind != Kind::Tuple || pid->items.size() != arity || pid->items[0]->kind != Kind::Str || pid->items[0]->text != "storage")
    return malformed(ErrorRule::PytorchPickleArguments, "persistent id is not a ('storage', ...) tuple of " + std::to_string(arity));
  const Value* type = pid->items[1];
  const Value* key = pid->items[2];
  const Value* numel = pid->items[4];
  if (type->kind != Kind::Global || type->callable != Callable::StorageType) {
    if (type->kind == Kind::Global && type->callable == Callable::Unsupported)
      return fail(ErrorKind::NotSupported, ErrorRule::PytorchTensorKind, "storage type `" + std::string(type->text) + "` has no safetensors dtype");
    return malformed(ErrorRule::PytorchPickleArguments, "persistent id names no storage type");
  }
  if (key->kind != Kind::Str || key->text.empty() || pid->items[3]->kind != Kind::Str || numel->kind != Kind::Int || numel->integer < 0)
    return malformed(ErrorRule::PytorchPickleArguments, "persistent id with a bad key, location or element count");
  const std::uint64_t elsize = type->storage->typed ? type_bits(type->storage->dtype) / 8 : 1;
  const auto count = static_cast<std::uint64_t>(numel->integer);
  if (count > UINT64_MAX / elsize) return malformed(ErrorRule::PytorchStorage, "storage size overflows");
  // The key's text lives in the arena, so the maps below can hold views of it.
  const std::string_view key_text = key->text;
  StorageInfo info{{}, type->storage->typed, type->storage->dtype, count * elsize, 0, count * elsize};
  if (arity == 6) SW_RETURN_IF_ERROR(legacy_view(key_text, pid->items[5], count, elsize, info));
  // Every reference to one key must agree on its type and size.
  if (auto first = by_key_.find(key_text); first != by_key_.end()) {
    const StorageInfo& o = *first->second->storage;
    if (o.typed != info.typed || o.dtype != info.dtype || o.nbytes != info.nbytes)
      return fail(ErrorKind::InvalidCheckpoint, ErrorRule::PytorchStorage,
                  "storage `" + std::string(key_text) + "` is referenced with different types or sizes");
  }
  auto [it, inserted] = storages_.try_emplace({key_text, info.view_offset, info.view_nbytes}, nullptr);
  if (!inserted) return push(it->second);
  SW_ASSIGN_OR_RETURN(Value * v, make(Kind::Storage));
  by_key_.try_emplace(key_text, v);
  info.key = key_text;
  v->storage = &out_.storage_infos_.emplace();
  *v->storage = std::move(info);
  it->second = v;
  out_.storages_.push_back(v);
  return push(v);
}

Result<Value*> Machine::call(const Value& callable, const Value& args) {
  const std::vector<Value*>& a = args.items;
  switch (callable.callable) {
    case Callable::OrderedDict: {
      if (!a.empty()) return unsafe(ErrorRule::PytorchCallRefused, "`" + std::string(callable.text) + "` with arguments is refused");
      return make(Kind::Dict);
    }
    case Callable::RebuildTensor:
    case Callable::RebuildTensorV2:
    case Callable::RebuildTensorV3: return rebuild_tensor(callable.callable, a);
    case Callable::RebuildParameter:
    case Callable::RebuildParameterWithState:
      // (data, requires_grad, backward_hooks[, state]): the parameter is its data.
      if (a.size() != (callable.callable == Callable::RebuildParameter ? 3u : 4u) || (a[0]->kind != Kind::Tensor && a[0]->kind != Kind::Opaque))
        return malformed(ErrorRule::PytorchPickleArguments, "bad arguments to `" + std::string(callable.text) + "`");
      return a[0];
    case Callable::RebuildFromTypeV2: return tensor_from_type(a);
    case Callable::Size: {
      if (a.size() != 1 || a[0]->kind != Kind::Tuple) return malformed(ErrorRule::PytorchPickleArguments, "bad arguments to torch.Size");
      return a[0];
    }
    case Callable::InertValue: return opaque(callable);
    case Callable::CodecsEncode: return latin1_bytes(a);
    case Callable::SetType: {
      if (a.size() > 1 || (a.size() == 1 && a[0]->kind != Kind::List && a[0]->kind != Kind::Tuple))
        return malformed(ErrorRule::PytorchPickleArguments, "bad arguments to `" + std::string(callable.text) + "`");
      SW_ASSIGN_OR_RETURN(Value * v, make(Kind::Set));
      if (!a.empty()) {
        SW_RETURN_IF_ERROR(count_items(a[0]->items.size()));
        v->items = a[0]->items;
      }
      return v;
    }
    case Callable::BytesType: {
      if (a.empty()) return make(Kind::Bytes);
      if (a.size() != 1 || a[0]->kind != Kind::Bytes)
        return malformed(ErrorRule::PytorchPickleArguments, "bad arguments to `" + std::string(callable.text) + "`");
      return a[0];
    }
    case Callable::Unsupported:
      return fail(ErrorKind::NotSupported, ErrorRule::PytorchTensorKind,
                  "`" + std::string(callable.text) + "` (a tensor torch can store but safetensors cannot) is not supported");
    case Callable::Unknown: return opaque(callable);
    case Callable::TensorClass:
    case Callable::StorageType:
    case Callable::Dtype: break;
  }
  return unsafe(ErrorRule::PytorchCallRefused, "REDUCE of `" + std::string(callable.text) + "` is refused");
}

Result<std::vector<std::uint64_t>> Machine::dims(const Value* v, const char* what) {
  if (v->kind != Kind::Tuple) return malformed(ErrorRule::PytorchPickleArguments, std::string("tensor ") + what + " is not a tuple");
  if (v->items.size() > lim_.max_rank) return limit("tensor rank");
  std::vector<std::uint64_t> out;
  out.reserve(v->items.size());
  for (const Value* item : v->items) {
    if (item->kind != Kind::Int || item->integer < 0)
      return malformed(ErrorRule::PytorchPickleArguments, std::string("tensor ") + what + " holds a negative or non-integer value");
    out.push_back(static_cast<std::uint64_t>(item->integer));
  }
  return out;
}

// _rebuild_tensor(storage, offset, size, stride), _v2(..., requires_grad, hooks[, metadata]),
// _v3(..., requires_grad, hooks, dtype[, metadata]).
Result<Value*> Machine::rebuild_tensor(Callable which, const std::vector<Value*>& a) {
  const std::size_t min_args = which == Callable::RebuildTensor ? 4 : which == Callable::RebuildTensorV2 ? 6 : 7;
  const std::size_t max_args = which == Callable::RebuildTensor ? 4 : min_args + 1;
  if (a.size() < min_args || a.size() > max_args)
    return malformed(ErrorRule::PytorchPickleArguments, "tensor rebuild with " + std::to_string(a.size()) + " arguments");
  if (a[0]->kind != Kind::Storage || a[1]->kind != Kind::Int || a[1]->integer < 0)
    return malformed(ErrorRule::PytorchPickleArguments, "tensor rebuild without a storage or with a bad offset");
  TensorInfo* info = &out_.tensors_.emplace();
  info->storage = a[0];
  info->offset = static_cast<std::uint64_t>(a[1]->integer);
  SW_ASSIGN_OR_RETURN(info->shape, dims(a[2], "size"));
  SW_ASSIGN_OR_RETURN(info->stride, dims(a[3], "stride"));
  if (info->shape.size() != info->stride.size()) return malformed(ErrorRule::PytorchPickleArguments, "tensor size and stride differ in length");
  const StorageInfo& storage = *a[0]->storage;
  if (which == Callable::RebuildTensorV3) {
    if (a[6]->kind != Kind::Global || a[6]->callable != Callable::Dtype) {
      if (a[6]->kind == Kind::Global && a[6]->callable == Callable::Unsupported)
        return fail(ErrorKind::NotSupported, ErrorRule::PytorchTensorKind, "dtype `" + std::string(a[6]->text) + "` has no safetensors dtype");
      return malformed(ErrorRule::PytorchPickleArguments, "_rebuild_tensor_v3 without a dtype");
    }
    info->dtype = a[6]->dtype;
    if (storage.typed && storage.dtype != info->dtype)
      return fail(ErrorKind::InvalidCheckpoint, ErrorRule::PytorchStorage, "tensor dtype differs from its typed storage's");
  } else {
    if (!storage.typed) return malformed(ErrorRule::PytorchPickleArguments, "an untyped storage needs _rebuild_tensor_v3");
    info->dtype = storage.dtype;
  }
  const std::size_t meta = which == Callable::RebuildTensorV2 ? 6 : 7;
  if (a.size() > meta && a[meta]->kind == Kind::Dict) {
    const auto& kv = a[meta]->items;
    for (std::size_t i = 0; i + 1 < kv.size(); i += 2)
      if (kv[i]->kind == Kind::Str && (kv[i]->text == "conj" || kv[i]->text == "neg") && kv[i + 1]->kind == Kind::Bool && kv[i + 1]->boolean)
        return fail(ErrorKind::NotSupported, ErrorRule::PytorchTensorKind,
                    "a tensor with its `" + std::string(kv[i]->text) + "` bit set is not supported");
  }
  SW_ASSIGN_OR_RETURN(Value * v, make(Kind::Tensor));
  v->tensor = info;
  return v;
}

// _rebuild_from_type_v2(func, type, args, state): a plain Tensor or Parameter rebuilt by `func`.
Result<Value*> Machine::tensor_from_type(const std::vector<Value*>& a) {
  if (a.size() != 4 || a[0]->kind != Kind::Global || a[1]->kind != Kind::Global || a[2]->kind != Kind::Tuple)
    return malformed(ErrorRule::PytorchPickleArguments, "bad arguments to _rebuild_from_type_v2");
  if (a[1]->callable != Callable::TensorClass) {
    if (a[1]->callable == Callable::Unknown) return opaque(*a[1]);
    return unsafe(ErrorRule::PytorchCallRefused, "_rebuild_from_type_v2 of `" + std::string(a[1]->text) + "` is refused");
  }
  switch (a[0]->callable) {
    case Callable::RebuildTensor:
    case Callable::RebuildTensorV2:
    case Callable::RebuildTensorV3:
    case Callable::RebuildParameter:
    case Callable::RebuildParameterWithState: return call(*a[0], *a[2]);
    default: return unsafe(ErrorRule::PytorchCallRefused, "_rebuild_from_type_v2 with `" + std::string(a[0]->text) + "` is refused");
  }
}

// _codecs.encode(text, "latin1"): how protocol 2 spells bytes. Code points above 255 are malformed.
Result<Value*> Machine::latin1_bytes(const std::vector<Value*>& a) {
  if (a.size() != 2 || a[0]->kind != Kind::Str || a[1]->kind != Kind::Str || (a[1]->text != "latin1" && a[1]->text != "latin-1"))
    return unsafe(ErrorRule::PytorchCallRefused, "_codecs.encode other than (str, \"latin1\") is refused");
  std::string& out = scratch_;
  out.clear();
  const std::string_view s = a[0]->text;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      i += 1;
    } else if ((c & 0xE0) == 0xC0 && c <= 0xC3 && i + 1 < s.size()) {
      out.push_back(static_cast<char>(((c & 0x03) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3F)));
      i += 2;
    } else {
      return malformed(ErrorRule::PytorchPickleArguments, "_codecs.encode of a character outside latin-1");
    }
  }
  SW_ASSIGN_OR_RETURN(Value * v, make(Kind::Bytes));
  SW_ASSIGN_OR_RETURN(v->text, keep(out));
  return v;
}

std::span<const std::string_view> refused_modules() noexcept { return kRefusedModules; }
std::span<const std::string_view> refused_paths() noexcept { return kRefusedPaths; }

Result<std::unique_ptr<Pickle>> Pickle::run(std::span<const std::byte> bytes, const PickleOptions& options, bool* truncated) {
  auto pickle = std::make_unique<Pickle>();
  try {
    Machine machine(bytes, options, *pickle);
    Status s = machine.run();
    if (truncated) *truncated = machine.truncated_;
    if (!s.is_ok()) return std::move(s).error();
  } catch (const std::bad_alloc&) {
    return Error(ErrorKind::ResourceLimit, "out of memory while reading " + options.name).with_offset(options.base_offset);
  }
  return pickle;
}

}  // namespace safeweights::pytorch
