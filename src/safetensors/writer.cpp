// The byte-exact writer: Layout decides every byte of the header; write_file fills in the data from
// memory, create()'s sink (a PlannedFileSink) one tensor or chunk at a time.
#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <unordered_set>

#include "core/little_endian.h"
#include "core/status_macros.h"
#include "core/utf8.h"
#include "json/json_writer.h"
#include "model/planned_sink.h"
#include "safeweights/safetensors_writer.h"
#include "safetensors/writer.h"

namespace safeweights::safetensors {
namespace {

// The header is JSON: names and metadata must be UTF-8 (the reader refuses anything else with
// InvalidHeader). `what` names the text: "tensor name", "metadata key `k`".
Status check_text(std::string_view text, const std::string& what) {
  if (!is_valid_utf8(text)) return Error(ErrorKind::Unrepresentable, what + " is not valid UTF-8: a safetensors header is JSON text");
  return Status::ok();
}

}  // namespace

namespace {

// Each tensor's byte size, after the checks a name and a type must pass, in declaration order.
Result<std::vector<std::uint64_t>> checked_sizes(std::span<const TensorDecl> tensors) {
  std::vector<std::uint64_t> sizes(tensors.size());
  std::unordered_set<std::string_view> names;
  names.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorDecl& t = tensors[i];
    if (t.name == "__metadata__") {
      return Error(ErrorKind::ReservedTensorName, "a tensor may not be named `__metadata__`: the file could not be read back").with_tensor(t.name);
    }
    if (Status s = check_text(t.name, "the tensor name"); !s.is_ok()) return error_of(s).with_tensor(t.name);
    if (!names.insert(t.name).second) {
      return Error(ErrorKind::DuplicateKey, "tensor name given more than once").with_tensor(t.name);
    }
    if (!can_store(t.dtype)) {
      return Error(ErrorKind::InvalidArgument, "safetensors cannot store " + std::string(type_name(t.dtype)) + " tensors").with_tensor(t.name);
    }
    auto nbytes = tensor_nbytes(t.dtype, t.shape);
    if (!nbytes.is_ok()) return error_of(nbytes).with_tensor(t.name);
    sizes[i] = nbytes.value();
  }
  return sizes;
}

// The reference's order of the data: dtype descending in its enum order, then name bytewise ascending.
std::vector<std::size_t> reference_order(std::span<const TensorDecl> tensors) {
  std::vector<std::size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (tensors[a].dtype != tensors[b].dtype) return writer_sort_rank(tensors[a].dtype) > writer_sort_rank(tensors[b].dtype);
    return tensors[a].name < tensors[b].name;
  });
  return order;
}

// `"__metadata__":{...}` with the keys sorted, as the reference writes it; a key given twice refused.
Status append_metadata(std::string& json, const MetadataEntries& metadata) {
  std::vector<const std::pair<std::string, std::string>*> entries;
  for (const auto& kv : metadata) {
    SW_RETURN_IF_ERROR(check_text(kv.first, "the metadata key `" + kv.first + "`"));
    SW_RETURN_IF_ERROR(check_text(kv.second, "the value of metadata key `" + kv.first + "`"));
    entries.push_back(&kv);
  }
  std::sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
  for (std::size_t i = 1; i < entries.size(); ++i) {
    if (entries[i]->first == entries[i - 1]->first) {
      return Error(ErrorKind::DuplicateKey, "metadata key `" + entries[i]->first + "` given more than once");
    }
  }
  json += "\"__metadata__\":{";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i) json += ',';
    append_json_string(json, entries[i]->first);
    json += ':';
    append_json_string(json, entries[i]->second);
  }
  json += '}';
  return Status::ok();
}

// One tensor's header entry: `"NAME":{"dtype":...,"shape":[...],"data_offsets":[begin,end]}`.
void append_entry(std::string& json, const TensorDecl& t, std::uint64_t begin, std::uint64_t end) {
  append_json_string(json, t.name);
  json += ":{\"dtype\":\"";
  json += type_code(t.dtype);
  json += "\",\"shape\":[";
  for (std::size_t d = 0; d < t.shape.size(); ++d) {
    if (d) json += ',';
    json::append_uint(json, t.shape[d]);
  }
  json += "],\"data_offsets\":[";
  json::append_uint(json, begin);
  json += ',';
  json::append_uint(json, end);
  json += "]}";
}

}  // namespace

Result<Layout> Layout::plan(std::span<const TensorDecl> tensors, const std::optional<MetadataEntries>& metadata) {
  Layout layout;
  SW_ASSIGN_OR_RETURN(std::vector<std::uint64_t> sizes, checked_sizes(tensors));
  const std::vector<std::size_t> order = reference_order(tensors);

  std::string json = "{";
  bool first = true;
  if (metadata) {
    SW_RETURN_IF_ERROR(append_metadata(json, *metadata));
    first = false;
  }

  layout.placements_.reserve(tensors.size());
  layout.by_decl_.resize(tensors.size());
  std::uint64_t offset = 0;
  for (std::size_t i : order) {
    const TensorDecl& t = tensors[i];
    std::uint64_t end = 0;
    if (__builtin_add_overflow(offset, sizes[i], &end)) {
      return Error(ErrorKind::ValidationOverflow, "total data size overflows").with_tensor(t.name);
    }
    if (!first) json += ',';
    first = false;
    append_entry(json, t, offset, end);
    layout.by_decl_[i] = layout.placements_.size();
    layout.placements_.push_back({i, offset, end});
    offset = end;
    if (json.size() > kMaxHeaderSize) break;  // reported below; stop growing the string
  }
  json += '}';

  const std::size_t padded = (json.size() + 7) / 8 * 8;
  if (padded > kMaxHeaderSize) {
    return Error(ErrorKind::HeaderTooLarge, "header too large: " + std::to_string(padded) + " bytes, the limit is " + std::to_string(kMaxHeaderSize));
  }
  json.resize(padded, ' ');
  std::uint64_t file_size = 0;
  if (__builtin_add_overflow(offset, std::uint64_t{8} + padded, &file_size)) {
    return Error(ErrorKind::ValidationOverflow, "file size overflows 64 bits");
  }
  layout.data_size_ = offset;
  le::append(layout.prefix_, padded, 8);
  layout.prefix_ += json;
  return layout;
}

Error data_mismatch(const TensorData& tensor, std::uint64_t nbytes) {
  return Error(ErrorKind::InvalidTensorView,
               "data length " + std::to_string(tensor.data.size()) + " does not match shape and dtype (" + std::to_string(nbytes) + " bytes)")
      .with_tensor(tensor.name);
}

Result<Layout> plan_data(std::span<const TensorData> tensors, const std::optional<MetadataEntries>& metadata) {
  SW_ASSIGN_OR_RETURN(Layout layout, Layout::plan(std::vector<TensorDecl>(tensors.begin(), tensors.end()), metadata));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Layout::Placement& p = layout.placement_of(i);
    if (tensors[i].data.size() != p.end - p.begin) return data_mismatch(tensors[i], p.end - p.begin);
  }
  return layout;
}

void serialize_into(const Layout& layout, std::span<const TensorData> tensors, std::span<std::byte> dst) {
  std::memcpy(dst.data(), layout.prefix().data(), layout.prefix().size());
  for (const auto& p : layout.placements()) {
    const auto& data = tensors[p.decl].data;
    if (!data.empty()) std::memcpy(dst.data() + layout.prefix().size() + p.begin, data.data(), data.size());
  }
}

Result<std::vector<std::byte>> serialize(std::span<const TensorData> tensors, const std::optional<MetadataEntries>& metadata) {
  SW_ASSIGN_OR_RETURN(Layout layout, plan_data(tensors, metadata));
  std::vector<std::byte> out(static_cast<std::size_t>(layout.file_size()));
  serialize_into(layout, tensors, out);
  return out;
}

namespace {

// One file always: split outputs are GGUF's split files or a sharded checkpoint's index.
Status check_options(const std::string& path, const WriteOptions& options) {
  if (options.split.enabled()) {
    return Error(ErrorKind::InvalidArgument, "a .safetensors file is one file: write a .safetensors.index.json (shards) or a .gguf (split files)")
        .with_file(path);
  }
  return Status::ok();
}

}  // namespace

Status write_file(const std::string& path, std::span<const TensorData> tensors, const std::optional<MetadataEntries>& metadata,
                  const WriteOptions& options) {
  SW_RETURN_IF_ERROR(check_options(path, options));
  auto layout = plan_data(tensors, metadata);
  if (!layout.is_ok()) return error_of(layout).with_file(path);
  SW_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::create(path, {layout->file_size(), options.durable}));
  SW_RETURN_IF_ERROR(file.append(std::as_bytes(std::span<const char>(layout->prefix().data(), layout->prefix().size()))));
  // In file order, straight from the caller's buffers, so the file grows sequentially.
  for (const auto& p : layout->placements()) SW_RETURN_IF_ERROR(file.append(tensors[p.decl].data));
  SW_RETURN_IF_ERROR(file.truncate(layout->file_size()));
  return file.commit();
}

Result<std::unique_ptr<PlannedFileSink>> create_file(const std::string& path, std::vector<TensorDecl> tensors,
                                                     const std::optional<MetadataEntries>& metadata, bool durable) {
  auto layout = Layout::plan(tensors, metadata);
  if (!layout.is_ok()) return error_of(layout).with_file(path);
  const std::string& prefix = layout->prefix();
  std::vector<PlannedFileSink::Slot> slots(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& p = layout->placement_of(i);
    slots[i] = {prefix.size() + p.begin, p.end - p.begin};
  }
  return PlannedFileSink::create(path, std::move(tensors), std::move(slots), std::as_bytes(std::span(prefix)), layout->file_size(), durable);
}

Result<std::unique_ptr<TensorSink>> create(const std::string& path, std::vector<TensorDecl> tensors, const std::optional<MetadataEntries>& metadata,
                                           const WriteOptions& options) {
  SW_RETURN_IF_ERROR(check_options(path, options));
  SW_ASSIGN_OR_RETURN(auto sink, create_file(path, std::move(tensors), metadata, options.durable));
  return std::unique_ptr<TensorSink>(std::move(sink));
}

}  // namespace safeweights::safetensors
