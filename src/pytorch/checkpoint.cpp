// Reading a checkpoint: find the container (torch's ZIP format or the legacy stream; tar-format files
// and TorchScript archives are named and refused), run its pickle through the machine, map each
// storage key to its bytes, then walk the object for tensors (dotted names) and check each one's
// bounds before exposing it as a TensorEntry.
#include <algorithm>
#include <bit>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/hash.h"
#include "core/little_endian.h"
#include "core/status_macros.h"
#include "core/utf8.h"
#include "pytorch/index.h"
#include "pytorch/pickle_vm.h"
#include "pytorch/strided_source.h"
#include "safeweights/cancel.h"
#include "safeweights/pytorch.h"
#include "safeweights/zip.h"

namespace safeweights::pytorch {
namespace {

constexpr std::uint64_t kMaxPickleBytes = 1ull << 30;  // data.pkl; real ones are ~100 bytes per tensor
constexpr std::size_t kMaxTensors = 1u << 20;
constexpr int kMaxDepth = 64;                        // nesting of containers holding tensors
constexpr std::uint64_t kMaxVisits = 1u << 20;       // containers walked (a shared one once per path): as many as tensors
constexpr std::uint64_t kMaxNameBytes = 1ull << 30;  // bytes of all names composed on the walk
constexpr std::string_view kLegacyMagic = "\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";
constexpr std::int64_t kLegacyProtocol = 1001;
// Where torch.load looks for the pickle of a ZIP checkpoint.
constexpr const char* kPklRule = "torch.load reads the pickle only as <root>/data.pkl, one folder deep, where <root> is the first member's folder";

Error bad(ErrorRule rule, const std::string& message) { return Error(ErrorKind::InvalidCheckpoint, message).with_rule(rule); }

// Where each storage key's bytes are.
struct StorageBytes {
  SourcePtr source;
  std::uint64_t position = 0;  // in the file, for ordering tensors by their bytes
};

struct Found {
  std::string name;
  const Value* tensor;
};

// --- the object walk ---

Result<std::string> key_text(const Value* key) {
  switch (key->kind) {
    case Kind::Str: return std::string(key->text);
    case Kind::Int: return std::to_string(key->integer);
    case Kind::Bool: return std::string(key->boolean ? "True" : "False");
    case Kind::None: return std::string("None");
    default: return bad(ErrorRule::PytorchObject, "a tensor is held under a key that is not a string or an integer");
  }
}

bool holds_tensors(const Value* v) { return v->kind == Kind::Tensor || v->kind == Kind::Dict || v->kind == Kind::List || v->kind == Kind::Tuple; }

// A dict key as Python compares it: equal keys (1, True and 1.0; two equal strings) give one text.
std::string key_identity(const Value* key) {
  switch (key->kind) {
    case Kind::Str: return "s" + std::string(key->text);
    case Kind::Int: return "i" + std::to_string(key->integer);
    case Kind::Bool: return key->boolean ? "i1" : "i0";
    case Kind::None: return "n";
    case Kind::Float:
      if (key->real >= -9.2e18 && key->real <= 9.2e18 && key->real == static_cast<double>(static_cast<std::int64_t>(key->real)))
        return "i" + std::to_string(static_cast<std::int64_t>(key->real));
      return "f" + std::to_string(std::bit_cast<std::uint64_t>(key->real));
    case Kind::BigInt: return "b" + std::string(key->text);
    default: return "o" + std::to_string(reinterpret_cast<std::uintptr_t>(key));  // compared by identity
  }
}

// A key repeated in one pickled dict (SETITEMS can repeat one): Python keeps the last value, so torch.load
// has one entry where the file states two. Refused, naming the key, where either value can hold a tensor.
Status check_repeated_keys(const Value* dict, const std::string& where) {
  std::unordered_map<std::string, std::size_t> seen;  // identity -> index of its first value
  for (std::size_t i = 0; i + 1 < dict->items.size(); i += 2) {
    auto [it, fresh] = seen.try_emplace(key_identity(dict->items[i]), i + 1);
    if (fresh || (!holds_tensors(dict->items[it->second]) && !holds_tensors(dict->items[i + 1]))) continue;
    auto text = key_text(dict->items[it->second - 1]);  // the key Python keeps: the first one
    const std::string key = text.is_ok() ? *text : std::string("(a key of another type)");
    return bad(ErrorRule::PytorchObject, "key `" + key + "` appears twice in one pickled dict" + (where.empty() ? "" : " (under `" + where + "`)") +
                                             "; torch.load would keep the last one");
  }
  return Status::ok();
}

// Walks the object for tensors, naming each by its path: the keys and list indices from the value
// read (the root) down, joined by dots, each as it is (an empty key is an empty part, as torch's key
// is the empty string); a root that is itself a tensor is named `tensor`. A container reached again
// through the memo (a shared subtree) is walked again under each name, so both names' tensors are
// listed; to keep that linear in the input, each container's items are scanned once and the places of
// the ones that can hold a tensor (tensors and containers) remembered, so a later visit costs only
// those. Visits are bounded (kMaxVisits), and so are the bytes of the names composed (kMaxNameBytes).
class Walker {
 public:
  Status walk(const Value* v, const std::string& name, int depth, bool root) {
    if (v->kind == Kind::Tensor) {
      if (found_.size() >= kMaxTensors)
        return Error(ErrorKind::ResourceLimit, "more than " + std::to_string(kMaxTensors) + " tensors").with_rule(ErrorRule::PytorchLimit);
      found_.push_back({root ? std::string("tensor") : name, v});
      return Status::ok();
    }
    const bool dict = v->kind == Kind::Dict;
    if (!dict && v->kind != Kind::List && v->kind != Kind::Tuple) return Status::ok();  // values without tensors
    if (depth >= kMaxDepth)
      return Error(ErrorKind::ResourceLimit, "containers nested more than " + std::to_string(kMaxDepth) + " deep").with_rule(ErrorRule::PytorchLimit);
    if (++visits_ > kMaxVisits)
      return Error(ErrorKind::ResourceLimit, "more than " + std::to_string(kMaxVisits) + " container visits (shared containers repeated)")
          .with_rule(ErrorRule::PytorchLimit);
    if (!on_path_.insert(v).second) return bad(ErrorRule::PytorchObject, "a container holds itself");
    SW_ASSIGN_OR_RETURN(const std::vector<std::size_t>* places, holders(v, name));
    for (const std::size_t i : *places) {
      std::string key;
      if (dict) {
        SW_ASSIGN_OR_RETURN(key, key_text(v->items[i - 1]));
      } else {
        key = std::to_string(i);
      }
      const std::uint64_t length = root ? key.size() : name.size() + 1 + key.size();
      if (length > kMaxNameBytes - name_bytes_)
        return Error(ErrorKind::ResourceLimit, "tensor names longer than " + std::to_string(kMaxNameBytes >> 20) + " MiB in all")
            .with_rule(ErrorRule::PytorchLimit);
      name_bytes_ += length;
      SW_RETURN_IF_ERROR(walk(v->items[i], root ? key : name + "." + key, depth + 1, false));
    }
    on_path_.erase(v);
    return Status::ok();
  }
  std::vector<Found>& found() { return found_; }

 private:
  // The places in `v`'s items of the values that can hold a tensor, found on the first visit (which
  // also refuses a dict that repeats a key).
  Result<const std::vector<std::size_t>*> holders(const Value* v, const std::string& name) {
    auto [it, fresh] = holders_.try_emplace(v);
    if (fresh) {
      if (v->kind == Kind::Dict) SW_RETURN_IF_ERROR(check_repeated_keys(v, name));
      const std::size_t step = v->kind == Kind::Dict ? 2 : 1;
      for (std::size_t i = step - 1; i < v->items.size(); i += step)
        if (holds_tensors(v->items[i])) it->second.push_back(i);
    }
    return &it->second;
  }

  std::vector<Found> found_;
  std::unordered_set<const Value*> on_path_;
  std::unordered_map<const Value*, std::vector<std::size_t>> holders_;
  std::uint64_t visits_ = 0;
  std::uint64_t name_bytes_ = 0;
};

// What a value is, for messages.
std::string kind_text(Kind kind) {
  switch (kind) {
    case Kind::None: return "None";
    case Kind::Bool: return "a bool";
    case Kind::Int:
    case Kind::BigInt: return "an int";
    case Kind::Float: return "a float";
    case Kind::Str: return "a string";
    case Kind::Bytes: return "bytes";
    case Kind::Set: return "a set";
    default: return "a value that is not a container";
  }
}

// The value the tensors are read from, and the key it was found under.
Result<std::pair<const Value*, std::string>> select_root(const Value* root, const std::string& key) {
  auto lookup = [&](std::string_view k) -> const Value* {
    if (root->kind != Kind::Dict) return nullptr;
    for (std::size_t i = 0; i + 1 < root->items.size(); i += 2)
      if (root->items[i]->kind == Kind::Str && root->items[i]->text == k) return root->items[i + 1];
    return nullptr;
  };
  if (root->kind == Kind::Dict) SW_RETURN_IF_ERROR(check_repeated_keys(root, ""));
  if (!key.empty()) {
    const Value* v = lookup(key);
    if (!v) return Error(ErrorKind::TensorNotFound, "the checkpoint has no top-level key `" + key + "`");
    if (v->kind != Kind::Dict && v->kind != Kind::List && v->kind != Kind::Tuple && v->kind != Kind::Tensor)
      return Error(ErrorKind::InvalidArgument, "top-level key `" + key + "` holds " + kind_text(v->kind) + ", not a dict of tensors");
    return std::make_pair(v, key);
  }
  for (std::string_view k : {"state_dict", "model", "module"})
    if (const Value* v = lookup(k); v && v->kind == Kind::Dict) return std::make_pair(v, std::string(k));
  return std::make_pair(root, std::string());
}

// --- the TensorFile ---

// What a checkpoint and a sharded one (open_checkpoint_index) both are: entries found by name, the key
// they were read under, the groups sharing a storage.
class ListedCheckpoint : public Checkpoint {
 public:
  std::string_view format() const noexcept override { return "pytorch"; }
  const std::string& name() const noexcept override { return name_; }
  std::span<const TensorEntry> tensors() const noexcept override { return entries_; }
  const TensorEntry* find(std::string_view n) const noexcept override {
    auto it = index_.find(n);
    return it == index_.end() ? nullptr : &entries_[it->second];
  }
  const Metadata* metadata() const noexcept override { return &metadata_; }
  std::string_view root() const noexcept override { return key_; }
  const std::vector<std::vector<std::string_view>>& shared() const noexcept override { return shared_; }

  std::string name_;
  std::string key_;
  Metadata metadata_ = Metadata::from_string_map({{"format", "pt"}});
  std::vector<TensorEntry> entries_;
  std::unordered_map<std::string_view, std::size_t, SeededHash> index_;
  std::vector<std::vector<std::string_view>> shared_;

 protected:
  std::size_t index_of(const TensorEntry& e) const noexcept { return static_cast<std::size_t>(&e - entries_.data()); }
};

class CheckpointFile final : public ListedCheckpoint {
 public:
  std::string_view container() const noexcept override { return container_; }
  bool covers_storage(const TensorEntry& e) const noexcept override { return extra_[index_of(e)].covers; }
  std::string_view storage_of(const TensorEntry& e) const noexcept override { return extra_[index_of(e)].storage; }

  struct Extra {
    std::string storage;
    bool covers = false;
    std::uint64_t position = 0;  // sort key: the tensor's first byte in the file
  };

  // Builds entries from the tensors found, in file order of their bytes.
  Status build(std::vector<Found>& found, const std::unordered_map<std::string, StorageBytes>& bytes, bool swap);

  std::string container_;
  std::unique_ptr<Pickle> pickle_;
  SourcePtr file_;
  std::vector<Extra> extra_;
  std::deque<std::string> names_;
  std::deque<std::vector<std::uint64_t>> shapes_;
  std::vector<SourcePtr> sources_;  // storages and strided views: what entries' sources point to

 private:
  Status add(const Found& f, const StorageBytes& storage, bool swap);
};

bool is_row_major(const TensorInfo& t) {
  std::uint64_t expected = 1;
  for (std::size_t d = t.shape.size(); d-- > 0;) {
    if (t.shape[d] != 1 && t.stride[d] != expected) return false;
    expected *= t.shape[d];
  }
  return true;
}

Status CheckpointFile::add(const Found& f, const StorageBytes& storage, bool swap) {
  const TensorInfo& t = *f.tensor->tensor;
  const StorageInfo& s = *t.storage->storage;
  auto where = [&](Error e) { return std::move(e.with_tensor(f.name)); };
  SW_ASSIGN_OR_RETURN(const std::uint64_t nbytes, tensor_nbytes(t.dtype, t.shape));
  const std::uint32_t elsize = type_bits(t.dtype) / 8;
  // The last element's index: offset + sum((size - 1) * stride), checked.
  std::uint64_t last = t.offset;
  const std::uint64_t numel = num_elements(t.shape);
  for (std::size_t d = 0; numel > 0 && d < t.shape.size(); ++d) {
    std::uint64_t step = 0;
    if (__builtin_mul_overflow(t.shape[d] - 1, t.stride[d], &step) || __builtin_add_overflow(last, step, &last))
      return where(bad(ErrorRule::PytorchTensorBounds, "tensor strides overflow"));
  }
  std::uint64_t end_bytes = 0;  // one past the last byte addressed, in the view
  if (__builtin_add_overflow(last, numel > 0 ? 1 : 0, &end_bytes) || __builtin_mul_overflow(end_bytes, elsize, &end_bytes) ||
      end_bytes > s.view_nbytes)
    return where(
        bad(ErrorRule::PytorchTensorBounds, "tensor reaches past its storage `" + s.key + "` (" + std::to_string(s.view_nbytes) + " bytes)"));
  const std::uint64_t begin = s.view_offset + t.offset * elsize;
  const bool contiguous = is_row_major(t);
  names_.push_back(f.name);
  shapes_.push_back(t.shape);
  TensorEntry entry{names_.back(), t.dtype, shapes_.back(), nullptr, 0, nbytes};
  if (contiguous && !swap) {
    entry.source = storage.source.get();
    entry.offset = begin;
  } else {
    const bool complex = t.dtype == TensorType::C64;
    StridedLayout layout{begin, elsize, swap ? (complex ? elsize / 2 : elsize) : 0u, t.shape, t.stride};
    sources_.push_back(strided_source(storage.source, std::move(layout), nbytes, name_ + ":" + f.name));
    entry.source = sources_.back().get();
  }
  entries_.push_back(entry);
  extra_.push_back({s.key, contiguous && begin == 0 && nbytes == s.nbytes, storage.position + begin});
  return Status::ok();
}

Status CheckpointFile::build(std::vector<Found>& found, const std::unordered_map<std::string, StorageBytes>& bytes, bool swap) {
  entries_.reserve(found.size());
  extra_.reserve(found.size());
  for (const auto& [key, storage] : bytes) sources_.push_back(storage.source);  // entries point into them
  for (const Found& f : found) {
    if (!is_valid_utf8(f.name)) return bad(ErrorRule::PytorchObject, "a tensor name is not valid UTF-8");
    const StorageInfo& s = *f.tensor->tensor->storage->storage;
    auto it = bytes.find(s.key);
    if (it == bytes.end()) return bad(ErrorRule::PytorchStorage, "no bytes for storage `" + s.key + "`").with_tensor(f.name);
    SW_RETURN_IF_ERROR(add(f, it->second, swap));
  }
  // File order of the bytes (stable: ties keep the pickle's order).
  std::vector<std::size_t> order(entries_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return extra_[a].position < extra_[b].position; });
  std::vector<TensorEntry> entries;
  std::vector<Extra> extra;
  for (std::size_t i : order) {
    entries.push_back(entries_[i]);
    extra.push_back(std::move(extra_[i]));
  }
  entries_ = std::move(entries);
  extra_ = std::move(extra);
  std::unordered_map<std::string_view, std::size_t, SeededHash> group_of;
  std::vector<std::vector<std::string_view>> groups;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (!index_.emplace(entries_[i].name, i).second)
      return bad(ErrorRule::PytorchObject, "two tensors named `" + std::string(entries_[i].name) +
                                               "`: different keys that join to one dotted name (torch.load keeps both, under their own keys)");
    auto [g, fresh] = group_of.emplace(extra_[i].storage, groups.size());
    if (fresh) groups.emplace_back();
    groups[g->second].push_back(entries_[i].name);
  }
  for (auto& g : groups)
    if (g.size() > 1) shared_.push_back(std::move(g));
  return Status::ok();
}

// --- containers ---

bool at(std::span<const std::byte> head, std::size_t offset, std::string_view magic) {
  return head.size() >= offset + magic.size() && std::memcmp(head.data() + offset, magic.data(), magic.size()) == 0;
}

// Runs the pickle at `offset` of `source`: from the mapping, or from growing reads until it ends.
Result<std::unique_ptr<Pickle>> run_pickle_at(const ByteSource& source, std::uint64_t offset, PickleOptions options) {
  options.base_offset = offset;
  const std::uint64_t available = std::min(source.size() - offset, kMaxPickleBytes);
  if (const std::byte* m = source.mapped()) return Pickle::run(std::span(m + offset, static_cast<std::size_t>(available)), options);
  std::vector<std::byte> buffer;
  for (std::uint64_t want = std::min<std::uint64_t>(available, 1u << 20);; want = std::min(available, want * 4)) {
    buffer.resize(static_cast<std::size_t>(want));
    SW_RETURN_IF_ERROR(source.read_at(offset, buffer));
    bool truncated = false;
    auto pickle = Pickle::run(buffer, options, &truncated);
    if (pickle.is_ok() || !truncated || want == available) return pickle;
  }
}

Result<std::unique_ptr<Pickle>> read_pickle_entry(const zip::Archive& archive, const zip::Entry& entry, PickleOptions options) {
  if (entry.size > kMaxPickleBytes)
    return Error(ErrorKind::ResourceLimit, std::string(entry.name) + " is larger than 1 GiB").with_rule(ErrorRule::PytorchLimit);
  options.name = entry.name;
  SW_ASSIGN_OR_RETURN(SourcePtr source, archive.open_entry(entry));
  options.base_offset = entry.data_offset;
  std::vector<std::byte> owned;
  std::span<const std::byte> bytes = source->view(0, entry.size);
  if (bytes.data() == nullptr && entry.size > 0) {
    owned.resize(static_cast<std::size_t>(entry.size));
    SW_RETURN_IF_ERROR(source->read_at(0, owned));
    bytes = owned;
  }
  return Pickle::run(bytes, options);
}

Result<std::string> small_record(const zip::Archive& archive, const zip::Entry& entry) {
  if (entry.size > 64) return bad(ErrorRule::PytorchContainer, std::string(entry.name) + " is too long");
  std::string text(static_cast<std::size_t>(entry.size), '\0');
  SW_ASSIGN_OR_RETURN(SourcePtr source, archive.open_entry(entry));
  SW_RETURN_IF_ERROR(source->read_at(0, std::as_writable_bytes(std::span(text))));
  return text;
}

Error torchscript() {
  return Error(ErrorKind::NotSupported, "a TorchScript archive (torch.jit.save), not a torch.save checkpoint")
      .with_rule(ErrorRule::PytorchArchiveKind);
}

// A member only TorchScript archives have, by its name under the root folder. Not ".data/": torch.save
// itself writes ".data/serialization_id" since torch 2.x.
bool torchscript_member(std::string_view rest) { return rest == "constants.pkl" || rest.starts_with("code/"); }

// The first local header's member name, from the file's first bytes.
std::string_view first_member(std::span<const std::byte> head) {
  constexpr std::size_t kNameAt = 30;
  if (head.size() < kNameAt) return {};
  const std::size_t length = le::u16(head.data() + 26);
  if (head.size() < kNameAt + length) return {};
  return {reinterpret_cast<const char*>(head.data() + kNameAt), length};
}

Status read_zip(CheckpointFile& out, const SourcePtr& file, const PickleOptions& options, std::unordered_map<std::string, StorageBytes>& bytes,
                bool& swap, std::string_view first_local) {
  auto opened = zip::Archive::open(file, zip::ArchivePolicy::Container);
  if (!opened.is_ok()) {
    // torch.jit.save compresses its code/ members, which the Container policy refuses: name the
    // archive by its first member (data/0 before data.pkl: storages first, as torch.save never does)
    // rather than by the first compressed entry. Any other failure (truncated, corrupt) keeps its own error.
    const std::size_t slash = first_local.find('/');
    if (opened.error().kind() == ErrorKind::ZipUnsupported && slash != std::string_view::npos && slash > 0) {
      const std::string_view rest = first_local.substr(slash + 1);
      if (torchscript_member(rest) || rest.starts_with("data/")) return torchscript();
    }
    return std::move(opened).error();
  }
  zip::Archive archive = std::move(opened).value();
  if (archive.entries().empty()) return bad(ErrorRule::PytorchContainer, "empty ZIP archive");
  const std::string first(archive.entries().front().name);
  const std::size_t slash = first.find('/');
  if (slash == std::string::npos || slash == 0)
    return bad(ErrorRule::PytorchContainer, "archive member `" + first + "` is not under a root folder (" + kPklRule + ")");
  const std::string root = first.substr(0, slash + 1);
  for (const zip::Entry& e : archive.entries()) {
    if (e.name.compare(0, root.size(), root) == 0 && torchscript_member(std::string_view(e.name).substr(root.size()))) return torchscript();
  }
  // data.pkl first (where torch.load looks for it, whatever the member order), then the members
  // torch.load would never look at.
  const zip::Entry* pkl = archive.find(root + "data.pkl");
  if (!pkl) {
    for (const zip::Entry& e : archive.entries())
      if (e.name == "data.pkl" || e.name.ends_with("/data.pkl"))
        return bad(ErrorRule::PytorchContainer, "`" + std::string(e.name) + "` is not " + root + "data.pkl (" + kPklRule + ")");
    return bad(ErrorRule::PytorchContainer, "no " + root + "data.pkl in the archive");
  }
  for (const zip::Entry& e : archive.entries()) {
    if (e.name.compare(0, root.size(), root) != 0)
      return bad(ErrorRule::PytorchContainer, "archive member `" + std::string(e.name) + "` is outside the root folder `" + root + "`");
  }
  if (const zip::Entry* order = archive.find(root + "byteorder")) {
    SW_ASSIGN_OR_RETURN(std::string text, small_record(archive, *order));
    if (text != "little" && text != "big") return bad(ErrorRule::PytorchContainer, "byteorder record says `" + text + "`");
    swap = text == "big";
  }
  SW_ASSIGN_OR_RETURN(out.pickle_, read_pickle_entry(archive, *pkl, options));
  for (const Value* s : out.pickle_->storages()) {
    const StorageInfo& info = *s->storage;
    if (bytes.contains(info.key)) continue;
    const zip::Entry* e = archive.find(root + "data/" + info.key);
    if (!e) return bad(ErrorRule::PytorchStorage, "storage `" + info.key + "` has no record " + root + "data/" + info.key);
    if (e->size != info.nbytes)
      return bad(ErrorRule::PytorchStorage, "record " + std::string(e->name) + " holds " + std::to_string(e->size) + " bytes; its storage declares " +
                                                std::to_string(info.nbytes));
    SW_ASSIGN_OR_RETURN(SourcePtr source, archive.open_entry(*e));
    bytes[info.key] = {std::move(source), e->data_offset};
  }
  out.container_ = "zip";
  return Status::ok();
}

// The legacy stream: magic, protocol, sys_info, the object, the storage keys, then each storage as an
// int64 element count and its bytes, in key-list order.
Status read_legacy(CheckpointFile& out, const SourcePtr& file, PickleOptions options, std::unordered_map<std::string, StorageBytes>& bytes) {
  std::uint64_t at = 0;
  auto next = [&](const char* what, PidForm pids) -> Result<std::unique_ptr<Pickle>> {
    options.name = std::string("the legacy stream's ") + what;
    options.pids = pids;
    SW_ASSIGN_OR_RETURN(auto pickle, run_pickle_at(*file, at, options));
    at += pickle->end();
    return pickle;
  };
  SW_ASSIGN_OR_RETURN(auto magic, next("magic number", PidForm::Zip));
  if (magic->root()->kind != Kind::BigInt || magic->root()->text != kLegacyMagic) return bad(ErrorRule::PytorchContainer, "bad legacy magic number");
  SW_ASSIGN_OR_RETURN(auto protocol, next("protocol version", PidForm::Zip));
  if (protocol->root()->kind != Kind::Int || protocol->root()->integer != kLegacyProtocol)
    return bad(ErrorRule::PytorchContainer, "legacy protocol version is not 1001");
  SW_ASSIGN_OR_RETURN(auto sys_info, next("sys_info", PidForm::Zip));
  if (sys_info->root()->kind != Kind::Dict) return bad(ErrorRule::PytorchContainer, "legacy sys_info is not a dict");
  SW_ASSIGN_OR_RETURN(out.pickle_, next("object", PidForm::Legacy));
  SW_ASSIGN_OR_RETURN(auto keys, next("storage keys", PidForm::Zip));
  if (keys->root()->kind != Kind::List) return bad(ErrorRule::PytorchContainer, "legacy storage key list is not a list");
  std::unordered_map<std::string_view, const StorageInfo*, SeededHash> declared;
  for (const Value* s : out.pickle_->storages()) declared.emplace(s->storage->key, s->storage);
  for (const Value* key : keys->root()->items) {
    if (key->kind != Kind::Str) return bad(ErrorRule::PytorchContainer, "legacy storage key is not a string");
    const std::string name(key->text);
    auto it = declared.find(name);
    if (it == declared.end()) {
      const auto& views = out.pickle_->view_keys();
      if (std::find(views.begin(), views.end(), name) != views.end())
        return bad(ErrorRule::PytorchStorage, "the legacy storage key list names `" + name +
                                                  "`, a storage view: torch.load would read those bytes into part of the storage it views");
      return bad(ErrorRule::PytorchStorage, "legacy storage `" + name + "` is not used by the object");
    }
    if (bytes.contains(name)) return bad(ErrorRule::PytorchStorage, "legacy storage `" + name + "` listed twice");
    const StorageInfo& info = *it->second;
    const std::uint64_t elsize = info.typed ? type_bits(info.dtype) / 8 : 1;
    std::byte count_bytes[8];
    if (Status s = file->read_at(at, count_bytes); !s.is_ok())
      return bad(ErrorRule::PytorchStorage, "legacy storage `" + name + "` is truncated").with_offset(at);
    const std::uint64_t count = le::u64(count_bytes);
    // torch writes the count as a signed 64-bit integer: past INT64_MAX it is negative, never a size.
    if (count > static_cast<std::uint64_t>(INT64_MAX))
      return bad(ErrorRule::PytorchStorage,
                 "legacy storage `" + name + "` declares a negative element count (" + std::to_string(static_cast<std::int64_t>(count)) + ")")
          .with_offset(at);
    if (count != info.nbytes / elsize)
      return bad(ErrorRule::PytorchStorage, "legacy storage `" + name + "` holds " + std::to_string(count) + " elements; the object declares " +
                                                std::to_string(info.nbytes / elsize))
          .with_offset(at);
    auto source = subrange_source(file, at + 8, info.nbytes, file->name() + "!" + name);
    if (!source.is_ok()) return bad(ErrorRule::PytorchStorage, "legacy storage `" + name + "` reaches past the end of the file").with_offset(at);
    bytes[name] = {std::move(source).value(), at + 8};
    at += 8 + info.nbytes;
  }
  out.container_ = "legacy";
  return Status::ok();
}

Status read_container(CheckpointFile& out, const SourcePtr& file, const PickleOptions& options, std::unordered_map<std::string, StorageBytes>& bytes,
                      bool& swap) {
  std::byte head_buf[512] = {};
  const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(sizeof head_buf, file->size()));
  SW_RETURN_IF_ERROR(file->read_at(0, std::span(head_buf, n)));
  const std::span<const std::byte> head(head_buf, n);
  if (at(head, 0, "PK\x03\x04")) return read_zip(out, file, options, bytes, swap, first_member(head));
  if (at(head, 0, std::string_view("\x80\x02\x8a\x0a", 4)) && at(head, 4, kLegacyMagic)) return read_legacy(out, file, options, bytes);
  if (at(head, 257, "ustar"))
    return Error(ErrorKind::NotSupported, "a tar-format PyTorch checkpoint (torch < 0.4), which is not supported")
        .with_rule(ErrorRule::PytorchArchiveKind);
  if (at(head, 0, "PYTORCH1"))
    return Error(ErrorKind::NotSupported, "a PyTorch preview-release (PYTORCH1) archive, which is not supported")
        .with_rule(ErrorRule::PytorchArchiveKind);
  return bad(ErrorRule::PytorchContainer, "not a PyTorch checkpoint (neither torch.save's ZIP format nor its legacy stream)");
}

}  // namespace

Result<std::unique_ptr<Checkpoint>> open_checkpoint(SourcePtr file, const FormatOptions& options) {
  auto out = std::make_unique<CheckpointFile>();
  out->name_ = file->name();
  out->file_ = file;
  auto fail = [&](Error e) { return std::move(e.with_file(out->name_)); };
  try {
    PickleOptions pickle_options;
    pickle_options.allow_unknown = options.allow_unknown;
    std::unordered_map<std::string, StorageBytes> bytes;
    bool swap = false;
    if (Status s = read_container(*out, file, pickle_options, bytes, swap); !s.is_ok()) return fail(std::move(s).error());
    auto root = select_root(out->pickle_->root(), options.checkpoint_key);
    if (!root.is_ok()) return fail(std::move(root).error());
    out->key_ = root->second;
    Walker walker;
    if (Status s = walker.walk(root->first, "", 0, true); !s.is_ok()) return fail(std::move(s).error());
    if (Status s = out->build(walker.found(), bytes, swap); !s.is_ok()) return fail(std::move(s).error());
  } catch (const std::bad_alloc&) {
    return fail(Error(ErrorKind::ResourceLimit, "out of memory while reading the checkpoint"));
  }
  return std::unique_ptr<Checkpoint>(std::move(out));
}

namespace {

// A sharded checkpoint: the shards' tensors as one namespace, each entry kept by its shard.
class IndexFile final : public ListedCheckpoint {
 public:
  std::string_view container() const noexcept override { return "index"; }
  bool covers_storage(const TensorEntry& e) const noexcept override { return shard_of(e).covers_storage(*shard_of(e).find(e.name)); }
  std::string_view storage_of(const TensorEntry& e) const noexcept override { return storage_[index_of(e)]; }

  std::vector<std::unique_ptr<Checkpoint>> shards_;
  std::vector<std::size_t> shard_;    // per entry: which shard holds it
  std::vector<std::string> storage_;  // per entry: "shard file:storage key", unique across shards

 private:
  const Checkpoint& shard_of(const TensorEntry& e) const noexcept { return *shards_[shard_[index_of(e)]]; }
};

}  // namespace

Result<HfIndex> read_bin_index(const std::string& path, const Resolver& resolver) {
  constexpr std::uint64_t kMaxIndex = 256u << 20;
  SW_ASSIGN_OR_RETURN(SourcePtr source, resolver.open(path, FileBackend::Pread));
  if (source->size() > kMaxIndex) return Error(ErrorKind::ResourceLimit, "index larger than 256 MiB").with_file(path);
  std::string text(static_cast<std::size_t>(source->size()), '\0');
  SW_RETURN_IF_ERROR(source->read_at(0, std::as_writable_bytes(std::span(text))));
  HfIndex index;
  if (Status s = parse_hf_index(text, index); !s.is_ok()) return error_of(s).with_file(path);
  return index;
}

Status check_shard_name(const std::string& shard) {
  if (shard.empty() || shard.find_first_of(std::string_view("/\\\0", 3)) != std::string::npos || shard == "." || shard == "..")
    return Error(ErrorKind::InvalidIndex, "shard `" + shard + "` is not a file name in the folder");
  return Status::ok();
}

Result<std::unique_ptr<Checkpoint>> open_checkpoint_index(const std::string& index_path, const FormatOptions& options) {
  const Resolver& resolver = resolver_of(options);
  SW_ASSIGN_OR_RETURN(HfIndex index, read_bin_index(index_path, resolver));
  auto out = std::make_unique<IndexFile>();
  out->name_ = index_path;
  std::map<std::string, std::set<std::string_view>> listed;  // shard file -> tensors the index puts there
  for (const auto& [tensor, file] : index.weight_map) listed[file].insert(tensor);
  for (const auto& [file, names] : listed) {
    if (Status s = check_shard_name(file); !s.is_ok()) return error_of(s).with_file(index_path);
    SW_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> shard, open_checkpoint(sibling_name(index_path, file), options));
    if (!shard->root().empty()) out->key_ = shard->root();
    for (const TensorEntry& e : shard->tensors()) {
      if (!names.contains(e.name))
        return Error(ErrorKind::InvalidIndex, "tensor `" + std::string(e.name) + "` of shard `" + file + "` is not listed for it in the index")
            .with_file(index_path);
      out->entries_.push_back(e);
      out->shard_.push_back(out->shards_.size());
      out->storage_.push_back(file + ":" + std::string(shard->storage_of(e)));
    }
    for (std::string_view n : names)
      if (!shard->find(n))
        return Error(ErrorKind::InvalidIndex, "the index lists `" + std::string(n) + "` in `" + file + "`, which does not hold it")
            .with_file(index_path);
    for (const auto& group : shard->shared()) out->shared_.push_back(group);
    out->shards_.push_back(std::move(shard));
  }
  for (std::size_t i = 0; i < out->entries_.size(); ++i) out->index_.emplace(out->entries_[i].name, i);
  return std::unique_ptr<Checkpoint>(std::move(out));
}

bool is_bin_index(std::span<const std::byte> head, std::string_view path) {
  if (!path.ends_with(kBinIndexSuffix)) return false;
  for (std::byte b : head) {
    const char c = static_cast<char>(b);
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return c == '{';
  }
  return false;
}

Result<std::unique_ptr<Checkpoint>> open_checkpoint_or_index(const std::string& path, const FormatOptions& options) {
  const Resolver& resolver = resolver_of(options);
  SW_ASSIGN_OR_RETURN(SourcePtr source, resolver.open(path, options.backend));
  if (path.ends_with(kBinIndexSuffix)) {  // the index, or a checkpoint under an index's name: by content
    std::byte head[64];
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(sizeof head, source->size()));
    SW_RETURN_IF_ERROR(source->read_at(0, std::span(head, n)));
    if (is_bin_index(std::span(head, n), path)) return open_checkpoint_index(path, options);
  }
  return open_checkpoint(std::move(source), options);
}

Result<std::unique_ptr<Checkpoint>> open_checkpoint(const std::string& path, const FormatOptions& options) {
  const Resolver& resolver = resolver_of(options);
  auto source = resolver.open(path, options.backend);
  if (!source.is_ok()) return std::move(source).error();
  return open_checkpoint(std::move(source).value(), options);
}

}  // namespace safeweights::pytorch
