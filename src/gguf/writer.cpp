// The GGUF v3 writer: the header (and so every offset) is fixed at creation, then tensor bytes land at
// their offsets through AtomicFile; padding is the zeros of a file sized up front.

#include <algorithm>
#include <unordered_set>

#include "core/little_endian.h"
#include "core/status_macros.h"
#include "gguf/layout.h"
#include "gguf/writer.h"
#include "model/multi_file_sink.h"
#include "model/planned_sink.h"
#include "safeweights/gguf.h"
#include "safeweights/text.h"

namespace safeweights::gguf {
namespace {

Error bad(std::string message) { return Error(ErrorKind::InvalidArgument, std::move(message)); }

void put_string(std::string& out, std::string_view s) {
  le::append(out, s.size(), 8);
  out.append(s);
}

Status check_value(const Value& v, bool in_array) {
  if (value_width(v.type) < 0) return bad("unknown value type " + std::to_string(static_cast<std::uint32_t>(v.type)));
  if (v.type == ValueType::BOOL && v.bits > 1) return bad("a BOOL value must be 0 or 1");
  if (v.type != ValueType::ARRAY) return Status::ok();
  if (in_array || v.elem_type == ValueType::ARRAY) return bad("GGUF arrays of arrays are not written (ggml refuses them)");
  for (const Value& item : v.items) {
    if (item.type != v.elem_type)
      return bad("an array of " + std::string(value_type_name(v.elem_type)) + " holds a " + std::string(value_type_name(item.type)));
    SW_RETURN_IF_ERROR(check_value(item, true));
  }
  return Status::ok();
}

void put_value(std::string& out, const Value& v) {
  const int width = value_width(v.type);
  if (width > 0) {
    le::append(out, v.bits, width);
  } else if (v.type == ValueType::STRING) {
    put_string(out, v.str);
  } else {
    le::append(out, *value_type_id(v.elem_type), 4);
    le::append(out, v.items.size(), 8);
    for (const Value& item : v.items) put_value(out, item);
  }
}

void put_kv(std::string& out, std::string_view key, const Value& v) {
  put_string(out, key);
  le::append(out, *value_type_id(v.type), 4);
  put_value(out, v);
}

// A power of two the writer may pad to (layout.h's kMaxWriteAlignment says why there is a cap).
Status check_alignment(std::uint32_t a) {
  if (a == 0 || (a & (a - 1)) != 0) return bad("the alignment must be a power of two");
  if (a > kMaxWriteAlignment)
    return Error(ErrorKind::ResourceLimit, "alignment " + std::to_string(a) + " is over the writer's cap of " + std::to_string(kMaxWriteAlignment) +
                                               " bytes (1 MiB): the output would be mostly padding");
  return Status::ok();
}

// general.alignment, when given, must agree with the option; when absent and not the default, it is
// written first (as a reader needs it before the tensor infos anyway).
Status check_kv(std::span<const KeyValue> kv, std::uint32_t alignment, bool& write_alignment) {
  std::unordered_set<std::string_view> keys;
  write_alignment = alignment != kDefaultAlignment;
  for (const KeyValue& e : kv) {
    if (e.key.empty() || e.key.size() > kMaxKeyBytes)
      return Error(ErrorKind::Unrepresentable, "a GGUF key is 1 to 65535 bytes long, not " + std::to_string(e.key.size()) + " (key `" +
                                                   e.key.substr(0, 64) + (e.key.size() > 64 ? "...`)" : "`)"));
    if (ggml_name(e.key).size() != e.key.size())
      return Error(ErrorKind::Unrepresentable, "key `" + printable(e.key) + "` holds a NUL byte, where ggml would end it");
    if (!keys.insert(e.key).second) return bad("duplicate key `" + e.key + "`");
    if (Status s = check_value(e.value, false); !s.is_ok()) return bad("key `" + e.key + "`: " + s.error().message());
    if (e.key == kAlignmentKey) {
      if (e.value.type != ValueType::UINT32 || e.value.bits != alignment)
        return bad("general.alignment must be a UINT32 equal to the writer's alignment (" + std::to_string(alignment) + ")");
      write_alignment = false;
    }
  }
  return Status::ok();
}

// The header of a GGUF file and where each tensor's bytes go (absolute offsets), or the first refusal.
struct PlannedFile {
  std::string header;  // padded to the data section's start
  std::vector<PlannedFileSink::Slot> slots;
  std::uint64_t size = 0;
};

Result<PlannedFile> plan_file(std::span<const KeyValue> kv, const std::vector<TensorDecl>& tensors, std::uint32_t a) {
  SW_RETURN_IF_ERROR(check_alignment(a));
  bool write_alignment = false;
  SW_RETURN_IF_ERROR(check_kv(kv, a, write_alignment));

  PlannedFile plan;
  std::string& header = plan.header;
  header = kMagic;
  le::append(header, kWriteVersion, 4);
  le::append(header, tensors.size(), 8);
  le::append(header, kv.size() + (write_alignment ? 1 : 0), 8);
  if (write_alignment) put_kv(header, kAlignmentKey, Value::u32(a));
  for (const KeyValue& e : kv) put_kv(header, e.key, e.value);

  plan.slots.resize(tensors.size());
  std::uint64_t data_size = 0;
  std::unordered_set<std::string_view> names;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorDecl& t = tensors[i];
    PlannedFileSink::Slot& slot = plan.slots[i];
    const auto tensor_fail = [&](Error e) { return Result<PlannedFile>(e.with_tensor(t.name)); };
    if (t.name.size() > kMaxTensorName) return tensor_fail(Error(ErrorKind::Unrepresentable, "a GGUF tensor name has at most 63 bytes"));
    if (!names.insert(t.name).second) return tensor_fail(bad("duplicate tensor name"));
    if (ggml_name(t.name).size() != t.name.size())
      return tensor_fail(Error(ErrorKind::Unrepresentable, "a GGUF tensor name cannot hold a NUL byte: ggml ends the name there"));
    if (t.shape.size() > kMaxDims) return tensor_fail(Error(ErrorKind::Unrepresentable, "a GGUF tensor has at most 4 dimensions"));
    const std::optional<std::uint32_t> id = ggml_id(t.dtype);
    if (!id) return tensor_fail(bad("GGUF cannot hold " + std::string(type_name(t.dtype)) + " tensors"));
    for (std::uint64_t d : t.shape)
      if (d > static_cast<std::uint64_t>(INT64_MAX)) return tensor_fail(Error(ErrorKind::Unrepresentable, "a GGUF dimension is at most 2^63 - 1"));
    auto nbytes = ggml_nbytes(t.dtype, t.shape);
    if (!nbytes.is_ok()) return tensor_fail(std::move(nbytes).error());
    std::uint64_t padded = 0;
    if (!align_up(*nbytes, a, padded) || __builtin_add_overflow(data_size, padded, &slot.offset))
      return tensor_fail(Error(ErrorKind::ValidationOverflow, "the data section's size overflows 64 bits"));
    std::swap(slot.offset, data_size);  // offset = the running sum before this tensor
    slot.nbytes = *nbytes;
    put_string(header, t.name);
    le::append(header, t.shape.size(), 4);
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) le::append(header, *d, 8);
    le::append(header, *id, 4);
    le::append(header, slot.offset, 8);
  }
  std::uint64_t data_offset = 0;
  if (!align_up(header.size(), a, data_offset) || __builtin_add_overflow(data_offset, data_size, &plan.size))
    return Error(ErrorKind::ValidationOverflow, "the file's size overflows 64 bits");
  header.resize(static_cast<std::size_t>(data_offset), '\0');
  for (PlannedFileSink::Slot& slot : plan.slots) slot.offset += data_offset;
  return plan;
}

Result<std::unique_ptr<PlannedFileSink>> create_file(const std::string& path, std::span<const KeyValue> kv, std::vector<TensorDecl> tensors,
                                                     const WriteOptions& options) {
  auto plan = plan_file(kv, tensors, options.alignment);
  if (!plan.is_ok()) return error_of(plan).with_file(path);
  return PlannedFileSink::create(path, std::move(tensors), std::move(plan->slots), std::as_bytes(std::span(plan->header)), plan->size,
                                 options.durable);
}

// ---- split models ----------------------------------------------------------------------------------

// The first tensor of each file, as llama.cpp's gguf-split cuts: padded tensor bytes only.
Result<std::vector<std::size_t>> plan_splits(const std::vector<TensorDecl>& tensors, const SplitLimits& split, std::uint32_t alignment) {
  std::vector<std::uint64_t> padded(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    auto nbytes = ggml_nbytes(tensors[i].dtype, tensors[i].shape);
    if (!nbytes.is_ok()) return error_of(nbytes).with_tensor(tensors[i].name);
    if (!align_up(*nbytes, alignment, padded[i]))
      return Error(ErrorKind::ValidationOverflow, "the data section's size overflows 64 bits").with_tensor(tensors[i].name);
  }
  SW_ASSIGN_OR_RETURN(auto starts, plan_parts(tensors, padded, split));
  if (starts.size() > kMaxSplits) return bad("the model would need " + std::to_string(starts.size()) + " files; split.count allows at most 65535");
  return starts;
}

// A model written as llama.cpp's gguf-split writes it: one planned file per part, committed all or none.
Result<std::unique_ptr<TensorSink>> create_split(const std::string& prefix, std::vector<KeyValue> kv, std::vector<TensorDecl> tensors,
                                                 const WriteOptions& options) {
  const auto fail = [&](Error e) { return Result<std::unique_ptr<TensorSink>>(std::move(e.with_file(prefix))); };
  for (const KeyValue& e : kv)
    if (e.key == kSplitNoKey || e.key == kSplitCountKey || e.key == kSplitTensorsCountKey)
      return fail(bad("the split writer writes `" + e.key + "` itself"));
  if (tensors.size() > static_cast<std::size_t>(INT32_MAX)) return fail(bad("split.tensors.count is an INT32: at most 2^31 - 1 tensors"));
  const std::uint32_t a = options.alignment;
  if (Status s = check_alignment(a); !s.is_ok()) return fail(std::move(s).error());
  {
    std::unordered_set<std::string_view> names;
    for (const TensorDecl& t : tensors)
      if (!names.insert(t.name).second) return fail(std::move(bad("duplicate tensor name").with_tensor(t.name)));
  }
  auto starts = plan_splits(tensors, options.split, a);
  if (!starts.is_ok()) return fail(std::move(starts).error());
  const auto count = static_cast<std::uint32_t>(starts->size());
  const std::size_t total = tensors.size();
  std::vector<std::unique_ptr<PlannedFileSink>> parts;
  for (std::uint32_t k = 0; k < count; ++k) {
    const std::size_t begin = (*starts)[k], end = k + 1 < count ? (*starts)[k + 1] : total;
    std::vector<KeyValue> part_kv = k == 0 ? std::move(kv) : std::vector<KeyValue>{};
    // llama.cpp's gguf-split order: split.count is set last (its value known only once every file is planned).
    part_kv.push_back({std::string(kSplitNoKey), Value::u16(static_cast<std::uint16_t>(k))});
    part_kv.push_back({std::string(kSplitTensorsCountKey), Value::i32(static_cast<std::int32_t>(total))});
    part_kv.push_back({std::string(kSplitCountKey), Value::u16(static_cast<std::uint16_t>(count))});
    std::vector<TensorDecl> part_tensors(std::make_move_iterator(tensors.begin() + static_cast<std::ptrdiff_t>(begin)),
                                         std::make_move_iterator(tensors.begin() + static_cast<std::ptrdiff_t>(end)));
    SW_ASSIGN_OR_RETURN(auto part, create_file(split_file_name(prefix, k + 1, count), part_kv, std::move(part_tensors), options));
    parts.push_back(std::move(part));
  }
  return std::unique_ptr<TensorSink>(std::make_unique<MultiFileSink>(prefix, std::move(parts)));
}

// The alignment written: the option's, else the UINT32 general.alignment of `kv`, else the default.
WriteOptions with_alignment(const WriteOptions& options, std::span<const KeyValue> kv) {
  WriteOptions o = options;
  if (o.alignment == 0) {
    auto it = std::ranges::find(kv, kAlignmentKey, &KeyValue::key);
    o.alignment = it != kv.end() && it->value.type == ValueType::UINT32 ? static_cast<std::uint32_t>(it->value.bits) : kDefaultAlignment;
  }
  return o;
}

// OUT.gguf is written as OUT-00001-of-0000N.gguf, ...
std::string split_prefix(const std::string& path) { return path.ends_with(".gguf") ? path.substr(0, path.size() - 5) : path; }

}  // namespace

Result<std::unique_ptr<TensorSink>> create(const std::string& path, std::vector<KeyValue> kv, std::vector<TensorDecl> tensors,
                                           const WriteOptions& options) {
  const WriteOptions o = with_alignment(options, kv);
  if (o.split.enabled()) return create_split(split_prefix(path), std::move(kv), std::move(tensors), o);
  return create_over(path, kv, std::move(tensors), o);
}

Result<std::unique_ptr<TensorSink>> create_over(const std::string& path, std::span<const KeyValue> kv, std::vector<TensorDecl> tensors,
                                                const WriteOptions& options) {
  const WriteOptions o = with_alignment(options, kv);
  if (o.split.enabled()) return create_split(split_prefix(path), std::vector<KeyValue>(kv.begin(), kv.end()), std::move(tensors), o);
  SW_ASSIGN_OR_RETURN(auto sink, create_file(path, kv, std::move(tensors), o));
  return std::unique_ptr<TensorSink>(std::move(sink));
}

}  // namespace safeweights::gguf
