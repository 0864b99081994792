// fuzz_legacy_view — legacy (non-ZIP) torch.save checkpoints built from the input, aimed at storage views.
//
// The input drives a FuzzedDataProvider that writes a well-formed legacy stream: up to 8 tensors, each
// a _rebuild_tensor_v2 over a persistent id whose storage key, view key (or none), offset, size, element
// count and storage type (FloatStorage or ShortStorage) come from small sets so that keys collide; then
// a storage key list (keys of the object, of views, or unknown; repeated or missing) and each listed
// storage's element count and bytes. A model of torch's legacy loader reads the same stream: one table
// for storage and view keys, each bound on first sight; the key list read into whatever each key is
// bound to; set_() bounds. What must hold:
// - open_checkpoint through a mapped and an unmapped source reaches the same verdict (and kind);
// - where torch's loader fails, or would give a tensor bytes the file never wrote, we refuse;
// - where we read the file, every tensor has torch's name, dtype, shape and bytes.
// Seeds: fuzz/corpus/fuzz_legacy_view/ (fuzz/make_seeds.py).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "safeweights/pytorch.h"

using namespace safeweights;

namespace {

// --- writing the stream ---

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void put_str(std::string& out, const std::string& s) {
  out.push_back('X');
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out += s;
}
void put_int(std::string& out, std::uint32_t v) {  // BININT (non-negative here)
  out.push_back('J');
  put_u32(out, v);
}

struct Pid {
  int type;  // 0: FloatStorage (4 bytes), 1: ShortStorage (2 bytes)
  std::string key;
  std::uint32_t numel;
  std::optional<std::string> view_key;
  std::uint32_t view_offset = 0, view_size = 0;
};
struct Tensor {
  std::string name;
  Pid pid;
  std::uint32_t offset;
  std::vector<std::uint32_t> size, stride;
};
struct Listed {
  std::string key;
  std::uint32_t count;  // the element count written before the bytes
  std::string bytes;
};

constexpr const char* kTypes[2] = {"FloatStorage", "ShortStorage"};
constexpr std::uint32_t kElsize[2] = {4, 2};

std::string stream(const std::vector<Tensor>& tensors, const std::vector<Listed>& listed) {
  std::string out = std::string("\x80\x02\x8a\x0a", 4) + std::string("\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 10) + ".";
  out += std::string("\x80\x02M\xe9\x03.", 6);
  out += std::string("\x80\x02}.", 4);
  out += "\x80\x02}(";
  for (const Tensor& t : tensors) {
    put_str(out, t.name);
    out += "ctorch._utils\n_rebuild_tensor_v2\n(";
    out += "(";
    put_str(out, "storage");
    out += std::string("ctorch\n") + kTypes[t.pid.type] + "\n";
    put_str(out, t.pid.key);
    put_str(out, "cpu");
    put_int(out, t.pid.numel);
    if (t.pid.view_key) {
      out += "(";
      put_str(out, *t.pid.view_key);
      put_int(out, t.pid.view_offset);
      put_int(out, t.pid.view_size);
      out += "t";
    } else {
      out += "N";
    }
    out += "tQ";
    put_int(out, t.offset);
    out += "(";
    for (std::uint32_t s : t.size) put_int(out, s);
    out += "t(";
    for (std::uint32_t s : t.stride) put_int(out, s);
    out +=
        "t\x89"
        "ccollections\nOrderedDict\n)RtR";
  }
  out += "u.";
  out += "\x80\x02](";
  for (const Listed& l : listed) put_str(out, l.key);
  out += "e.";
  for (const Listed& l : listed) {
    const std::uint64_t count = l.count;
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((count >> (8 * i)) & 0xFF));
    out += l.bytes;
  }
  return out;
}

// --- torch's legacy loader, as a model ---

// A storage as torch holds it: bytes [offset, offset + nbytes) of a root's buffer, read as `type`.
struct Bound {
  int root;  // index into Model::roots; -1: a fresh storage no key names (never filled)
  std::uint64_t offset, nbytes;
  int type;
};

struct Model {
  std::vector<std::vector<int>> roots;  // per root storage: each byte, or -1 while the file has not written it
  std::map<std::string, Bound> table;   // storage and view keys together, each bound on first sight
  bool failed = false;

  Bound persistent_load(const Pid& pid) {
    const std::uint64_t nbytes = std::uint64_t{pid.numel} * kElsize[pid.type];
    auto it = table.find(pid.key);
    Bound storage;
    if (it == table.end()) {
      roots.emplace_back(nbytes, -1);
      storage = {static_cast<int>(roots.size() - 1), 0, nbytes, pid.type};
      table.emplace(pid.key, storage);
    } else {
      storage = it->second;
      if (storage.type != pid.type) {  // same bytes as another type, or a new storage nothing fills
        if (storage.nbytes == nbytes)
          storage.type = pid.type;
        else
          storage = {-1, 0, nbytes, pid.type};
      }
    }
    if (!pid.view_key) return storage;
    if (auto v = table.find(*pid.view_key); v != table.end()) return v->second;
    // storage._untyped_storage[a:b], clamped as Python slices are
    const std::uint64_t el = kElsize[pid.type];
    const std::uint64_t begin = std::min<std::uint64_t>(std::uint64_t{pid.view_offset} * el, storage.nbytes);
    const std::uint64_t end = std::min<std::uint64_t>(begin + std::uint64_t{pid.view_size} * el, storage.nbytes);
    const Bound view{storage.root, storage.offset + begin, end - begin, pid.type};
    table.emplace(*pid.view_key, view);
    return view;
  }

  // The key list: each key's count checked against what it is bound to, then its bytes read into it.
  void read_storages(const std::vector<Listed>& listed) {
    for (const Listed& l : listed) {
      auto it = table.find(l.key);
      if (it == table.end() || std::uint64_t{l.count} * kElsize[it->second.type] != it->second.nbytes) {
        failed = true;
        return;
      }
      const Bound& b = it->second;
      if (l.bytes.size() != b.nbytes) {  // torch would read another length and lose its place in the stream
        failed = true;
        return;
      }
      if (b.root < 0) continue;
      for (std::uint64_t i = 0; i < b.nbytes; ++i) roots[b.root][b.offset + i] = static_cast<unsigned char>(l.bytes[i]);
    }
  }

  // set_(storage, offset, size, stride): nullopt when torch fails or the bytes were never written.
  std::optional<std::vector<std::byte>> tensor_bytes(const Tensor& t, const Bound& s) {
    const std::uint64_t el = kElsize[s.type];
    std::uint64_t numel = 1, last = t.offset;
    for (std::size_t d = 0; d < t.size.size(); ++d) numel *= t.size[d];
    for (std::size_t d = 0; numel > 0 && d < t.size.size(); ++d) last += std::uint64_t{t.size[d] - 1} * t.stride[d];
    if (numel > 0 && (last + 1) * el > s.nbytes) {
      failed = true;
      return std::nullopt;
    }
    std::vector<std::byte> out;
    for (std::uint64_t i = 0; i < numel; ++i) {  // row-major: the last dimension fastest
      std::uint64_t rest = i, element = t.offset;
      for (std::size_t d = t.size.size(); d-- > 0;) {
        element += (rest % t.size[d]) * t.stride[d];
        rest /= t.size[d];
      }
      for (std::uint64_t b = 0; b < el; ++b) {
        if (s.root < 0) return std::nullopt;
        const int v = roots[s.root][s.offset + element * el + b];
        if (v < 0) return std::nullopt;
        out.push_back(static_cast<std::byte>(v));
      }
    }
    return out;
  }
};

// Storage keys from one small pool, view keys from another, crossing now and then (a view key that is a
// storage key, a storage key first bound as a view).
std::string pick_key(FuzzedDataProvider& fdp, bool view) {
  static const char* const kStorageKeys[] = {"0", "1", "2"};
  static const char* const kViewKeys[] = {"v", "w", "u"};
  const bool cross = fdp.ConsumeIntegralInRange<int>(0, 7) == 0;
  return (view != cross ? kViewKeys : kStorageKeys)[fdp.ConsumeIntegralInRange<int>(0, 2)];
}

std::vector<std::vector<std::byte>> read_all(const TensorFile& file) {
  std::vector<std::vector<std::byte>> out;
  for (const TensorEntry& e : file.tensors()) {
    std::vector<std::byte> bytes(e.nbytes);
    FUZZ_CHECK_OK(e.read(bytes));
    out.push_back(std::move(bytes));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider fdp(data, size);
  std::vector<Tensor> tensors(fdp.ConsumeIntegralInRange<std::size_t>(1, 8));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    Tensor& t = tensors[i];
    t.name = "t" + std::to_string(i);
    t.pid.type = fdp.ConsumeIntegralInRange<int>(0, 7) == 0 ? 1 : 0;
    t.pid.key = pick_key(fdp, false);
    t.pid.numel = fdp.ConsumeIntegralInRange<std::uint32_t>(0, 8);
    if (fdp.ConsumeBool()) {  // mostly inside the storage; now and then past it (torch clamps, we refuse)
      t.pid.view_key = pick_key(fdp, true);
      const std::uint32_t room = fdp.ConsumeIntegralInRange<int>(0, 7) == 0 ? 9 : t.pid.numel;
      t.pid.view_offset = fdp.ConsumeIntegralInRange<std::uint32_t>(0, room);
      t.pid.view_size = fdp.ConsumeIntegralInRange<std::uint32_t>(0, room - std::min(room, t.pid.view_offset) + (room == 9 ? 9 : 0));
    }
    t.offset = fdp.ConsumeIntegralInRange<std::uint32_t>(0, 4);
    const int rank = fdp.ConsumeIntegralInRange<int>(0, 2);
    for (int d = 0; d < rank; ++d) {
      t.size.push_back(fdp.ConsumeIntegralInRange<std::uint32_t>(0, 4));
      t.stride.push_back(fdp.ConsumeIntegralInRange<std::uint32_t>(0, 4));
    }
  }
  // The key list: by default the storage keys in first-seen order with their own counts; the input may
  // drop, repeat or replace entries and change counts.
  std::vector<Listed> listed;
  std::map<std::string, std::uint32_t> first_numel;
  for (const Tensor& t : tensors) {
    if (first_numel.emplace(t.pid.key, t.pid.numel).second) listed.push_back({t.pid.key, t.pid.numel, {}});
  }
  const int edits = fdp.ConsumeIntegralInRange<int>(0, 3);
  for (int e = 0; e < edits && !listed.empty(); ++e) {
    const std::size_t at = fdp.ConsumeIntegralInRange<std::size_t>(0, listed.size() - 1);
    switch (fdp.ConsumeIntegralInRange<int>(0, 3)) {
      case 0: listed.erase(listed.begin() + static_cast<std::ptrdiff_t>(at)); break;
      case 1: listed.push_back(listed[at]); break;
      case 2: listed[at].key = pick_key(fdp, fdp.ConsumeBool()); break;
      default: listed[at].count = fdp.ConsumeIntegralInRange<std::uint32_t>(0, 9); break;
    }
  }
  // Each record's bytes: what its count says, in the type its key was first declared with.
  std::map<std::string, int> first_type;  // in the order torch binds keys
  for (const Tensor& t : tensors) {
    first_type.emplace(t.pid.key, t.pid.type);
    if (t.pid.view_key) first_type.emplace(*t.pid.view_key, t.pid.type);
  }
  std::uint8_t fill = fdp.ConsumeIntegral<std::uint8_t>();
  for (Listed& l : listed) {
    auto type = first_type.find(l.key);
    const std::uint32_t n = l.count * kElsize[type == first_type.end() ? 0 : type->second];
    for (std::uint32_t b = 0; b < n; ++b) l.bytes.push_back(static_cast<char>(fill++));
  }
  const std::string file = stream(tensors, listed);

  // torch's reading.
  Model torch_model;
  std::vector<Bound> bound;
  for (const Tensor& t : tensors) bound.push_back(torch_model.persistent_load(t.pid));
  torch_model.read_storages(listed);
  std::vector<std::optional<std::vector<std::byte>>> expected;
  bool defined = !torch_model.failed;
  for (std::size_t i = 0; defined && i < tensors.size(); ++i) {
    expected.push_back(torch_model.tensor_bytes(tensors[i], bound[i]));
    defined = !torch_model.failed && expected.back().has_value();
  }

  // Ours, through both kinds of source.
  const auto input = std::as_bytes(std::span(file.data(), file.size()));
  auto a = pytorch::open_checkpoint(memory_source(input, "<fuzz>"));
  auto b = pytorch::open_checkpoint(std::make_shared<fuzz::UnmappedSource>(input));
  FUZZ_CHECK(a.is_ok() == b.is_ok());
  if (!a.is_ok()) {
    FUZZ_CHECK(a.error().kind() == b.error().kind());
    return 0;
  }
  FUZZ_CHECK(defined);  // we read only what torch reads, with every byte written by the file
  const TensorFile& ours = **a;
  FUZZ_CHECK(ours.tensors().size() == tensors.size());
  FUZZ_CHECK(read_all(ours) == read_all(**b));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorEntry* e = ours.find(tensors[i].name);
    FUZZ_CHECK(e != nullptr);
    FUZZ_CHECK(e->type == (bound[i].type == 0 ? TensorType::F32 : TensorType::I16));
    FUZZ_CHECK(e->shape.size() == tensors[i].size.size());
    for (std::size_t d = 0; d < e->shape.size(); ++d) FUZZ_CHECK(e->shape[d] == tensors[i].size[d]);
    std::vector<std::byte> got(e->nbytes);
    FUZZ_CHECK_OK(e->read(got));
    FUZZ_CHECK(got == *expected[i]);
  }
  return 0;
}
