// safetensors in the format registry: detection, validate/inspect output, and open (a Reader or a
// ShardedReader, which are TensorFiles).
#include "safetensors/format.h"

#include <cstdio>
#include <map>
#include <memory>
#include <vector>
#include <utility>

#include "core/little_endian.h"
#include "core/status_macros.h"
#include "safeweights/safetensors.h"
#include "safeweights/safetensors_writer.h"
#include "safeweights/sharded.h"
#include "safeweights/text.h"
#include "safetensors/writer.h"

namespace safeweights::safetensors {
namespace {

ReadOptions read_options(const FormatOptions& options) {
  ReadOptions out;
  out.reject_unknown_fields = options.strict;
  return out;
}

Result<Reader> open_reader(const std::string& path, const FormatOptions& options) {
  SW_ASSIGN_OR_RETURN(SourcePtr source, resolver_of(options).open(path, options.backend));
  return Reader::open(std::move(source), read_options(options));
}

Result<ShardedReader> open_sharded(const std::string& path, const FormatOptions& options) {
  return ShardedReader::open(path, resolver_of(options), options.backend, read_options(options));
}

// Opens a tensor's object and writes its fields; the caller may add more and ends it.
void tensor_json(JsonWriter& w, const TensorInfo& t) {
  w.object().key("name").string(t.name).key("dtype").string(type_name(t.dtype)).key("shape").uints(t.shape);
  w.key("data_offsets").array().uint(t.begin).uint(t.end).end();
}

// {"k":"v",...}: a string-to-string map in its order.
template <typename Map>
void string_map_json(JsonWriter& w, const Map& map) {
  w.object();
  for (const auto& [k, v] : map) w.key(k).string(v);
  w.end();
}

struct Totals {
  std::uint64_t tensors = 0, params = 0, bytes = 0;
};

// The tensor table and the totals by dtype; `shards` (one per row) adds a SHARD column.
std::string tensor_table(const std::vector<const TensorInfo*>& rows, const std::vector<std::string>* shards) {
  std::string out;
  std::size_t name_w = 4, shape_w = 5, shard_w = 5;
  std::vector<std::string> names;  // as shown: a hostile name cannot drive the terminal
  names.reserve(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    names.push_back(printable(rows[i]->name));
    name_w = std::max(name_w, names.back().size());
    shape_w = std::max(shape_w, shape_string(rows[i]->shape).size());
    if (shards) shard_w = std::max(shard_w, (*shards)[i].size());
  }
  name_w = std::min<std::size_t>(name_w, 80);
  if (shards) append_format(out, "%-*s  ", static_cast<int>(shard_w), "SHARD");
  append_format(out, "%-*s  %-11s  %-*s  %10s\n", static_cast<int>(name_w), "NAME", "DTYPE", static_cast<int>(shape_w), "SHAPE", "SIZE");
  std::map<TensorType, Totals> by_dtype;
  Totals all;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const TensorInfo* t = rows[i];
    if (shards) append_format(out, "%-*s  ", static_cast<int>(shard_w), (*shards)[i].c_str());
    append_format(out, "%-*s  %-11s  %-*s  %10s\n", static_cast<int>(name_w), names[i].c_str(), std::string(type_name(t->dtype)).c_str(),
                  static_cast<int>(shape_w), shape_string(t->shape).c_str(), human_bytes(t->nbytes()).c_str());
    for (Totals* tot : {&by_dtype[t->dtype], &all}) {
      ++tot->tensors;
      tot->params += t->num_elements();
      tot->bytes += t->nbytes();
    }
  }
  out += "\nTotals by dtype:\n";
  for (const auto& [dtype, tot] : by_dtype) {
    append_format(out, "  %-11s %8llu tensors  %16llu params  %10s\n", std::string(type_name(dtype)).c_str(),
                  static_cast<unsigned long long>(tot.tensors), static_cast<unsigned long long>(tot.params), human_bytes(tot.bytes).c_str());
  }
  append_format(out, "  %-11s %8llu tensors  %16llu params  %10s\n", "all", static_cast<unsigned long long>(all.tensors),
                static_cast<unsigned long long>(all.params), human_bytes(all.bytes).c_str());
  return out;
}

std::string base_name(const std::string& name) { return name.substr(name.find_last_of('/') + 1); }

std::string inspect_index(const ShardedReader& reader, const std::string& path, bool json) {
  std::string out;
  if (json) {
    JsonWriter w;
    w.object().key("format").string("safetensors-index").key("shards").array();
    for (const auto& shard : reader.shard_files()) w.string(shard);
    w.end().key("metadata");
    string_map_json(w, reader.index_metadata());
    w.key("tensors").array();
    for (const auto& name : reader.names()) {
      auto loc = reader.locate(name);
      tensor_json(w, *loc->info);
      w.key("shard").string(base_name(loc->shard->name())).end();
    }
    w.end().end();
    return std::move(w.text()) + "\n";
  }
  append_format(out, "file:        %s\nformat:      safetensors-index\nshards:      %zu\ntensors:     %zu\n", printable(path).c_str(),
                reader.shards().size(), reader.names().size());
  for (const auto& [k, v] : reader.index_metadata()) append_format(out, "index metadata: %s: %s\n", printable(k).c_str(), printable(v).c_str());
  out += "\n";
  std::vector<const TensorInfo*> rows;
  std::vector<std::string> shards;
  for (const auto& name : reader.names()) {
    auto loc = reader.locate(name);
    rows.push_back(loc->info);
    shards.push_back(printable(base_name(loc->shard->name())));
  }
  return out + tensor_table(rows, &shards);
}

// A safetensors file begins with an 8-byte little-endian length N, then N bytes of JSON object.
bool looks_like_safetensors(std::span<const std::byte> head, std::uint64_t size) {
  if (head.size() < 9) return false;
  const std::uint64_t n = le::u64(head.data());
  return n >= 2 && n <= kMaxHeaderSize && n <= size - 8 && head[8] == std::byte{'{'};
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

constexpr std::string_view kIndexSuffix = ".safetensors.index.json";
constexpr std::uint64_t kDefaultShardBytes = 5'000'000'000;  // transformers' max_shard_size "5GB"

Status can_hold_type(TensorType type) {
  if (can_store(type) && !type_info(type).is_block()) return Status::ok();
  return Error(ErrorKind::InvalidArgument,
               "safetensors cannot hold " + std::string(type_name(type)) + " (write a .gguf, or --type f32, f16 or bf16)");
}

class SafetensorsFormat final : public Format {
 public:
  std::string_view name() const noexcept override { return "safetensors"; }
  int detect(std::span<const std::byte> head, std::uint64_t size, std::string_view path) const override {
    if (looks_like_safetensors(head, size)) return 2;
    return ends_with(path, ".safetensors") ? 1 : 0;
  }
  Result<std::string> validate(const std::string& path, const FormatOptions& options) const override {
    SW_ASSIGN_OR_RETURN(Reader reader, open_reader(path, options));
    const Header& h = reader.header();
    return std::to_string(h.tensors().size()) + " tensors, " + human_bytes(h.data_size()) + " of data";
  }
  Result<std::string> inspect(const std::string& path, std::span<const std::string> members, const FormatOptions& options, bool json) const override {
    SW_RETURN_IF_ERROR(no_members(path, members));
    SW_ASSIGN_OR_RETURN(Reader reader, open_reader(path, options));
    return inspect_file(reader, path, json);
  }
  Result<std::unique_ptr<TensorFile>> open(const std::string& path, std::span<const std::string> members,
                                           const FormatOptions& options) const override {
    SW_RETURN_IF_ERROR(no_members(path, members));
    SW_ASSIGN_OR_RETURN(Reader reader, open_reader(path, options));
    return std::unique_ptr<TensorFile>(std::make_unique<Reader>(std::move(reader)));
  }

  std::span<const std::string_view> extensions() const noexcept override {
    static constexpr std::string_view kExtensions[] = {".safetensors"};
    return kExtensions;
  }
  Status can_hold(TensorType type) const override { return can_hold_type(type); }
  // The metadata's string map (metadata.h) is the file's __metadata__.
  Result<std::unique_ptr<TensorSink>> create(const std::string& path, std::vector<TensorDecl> tensors, const Metadata* metadata,
                                             const WriteOptions& options) const override {
    return safetensors::create(path, std::move(tensors), metadata ? metadata->to_string_map() : std::nullopt, options);
  }

 private:
  static Status no_members(const std::string& path, std::span<const std::string> members) {
    if (members.empty()) return Status::ok();
    return Error(ErrorKind::InvalidArgument, "a safetensors file has no members (ENTRY is for DDUF archives)").with_file(path);
  }
};

// A sharded checkpoint is written as transformers saves one: PREFIX.safetensors.index.json and its
// shards PREFIX-0000K-of-0000N.safetensors beside it, cut at WriteOptions::split (transformers' 5 GB when
// no limit is given), each with the format key transformers requires and the metadata's string map
// (without the index's own sizes). The index is written even for one shard: it was asked for.
class IndexFormat final : public Format {
 public:
  std::string_view name() const noexcept override { return "safetensors-index"; }
  // A JSON object in a file named *.json.
  int detect(std::span<const std::byte> head, std::uint64_t, std::string_view path) const override {
    if (!ends_with(path, ".json")) return 0;
    for (std::byte b : head) {
      const char c = static_cast<char>(b);
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
      return c == '{' ? 2 : 0;
    }
    return 0;
  }
  Result<std::string> validate(const std::string& path, const FormatOptions& options) const override {
    SW_ASSIGN_OR_RETURN(ShardedReader reader, open_sharded(path, options));
    return std::to_string(reader.names().size()) + " tensors in " + std::to_string(reader.shards().size()) + " shards";
  }
  Result<std::string> inspect(const std::string& path, std::span<const std::string>, const FormatOptions& options, bool json) const override {
    SW_ASSIGN_OR_RETURN(ShardedReader reader, open_sharded(path, options));
    return inspect_index(reader, path, json);
  }
  Result<std::unique_ptr<TensorFile>> open(const std::string& path, std::span<const std::string>, const FormatOptions& options) const override {
    SW_ASSIGN_OR_RETURN(ShardedReader reader, open_sharded(path, options));
    return std::unique_ptr<TensorFile>(std::make_unique<ShardedReader>(std::move(reader)));
  }

  std::span<const std::string_view> extensions() const noexcept override {
    static constexpr std::string_view kExtensions[] = {kIndexSuffix};
    return kExtensions;
  }
  Status can_hold(TensorType type) const override { return can_hold_type(type); }
  Result<std::unique_ptr<TensorSink>> create(const std::string& path, std::vector<TensorDecl> tensors, const Metadata* metadata,
                                             const WriteOptions& options) const override {
    if (!ends_with(path, kIndexSuffix)) {
      return Error(ErrorKind::InvalidArgument, "a sharded checkpoint's index is named PREFIX" + std::string(kIndexSuffix)).with_file(path);
    }
    const std::size_t slash = path.rfind('/');
    ShardedTarget target;
    target.folder = slash == std::string::npos ? std::string() : path.substr(0, slash);
    target.prefix = path.substr(slash == std::string::npos ? 0 : slash + 1);
    target.prefix.resize(target.prefix.size() - kIndexSuffix.size());
    if (target.prefix.empty())
      return Error(ErrorKind::InvalidArgument, "the index's name needs a prefix before " + std::string(kIndexSuffix)).with_file(path);
    MetadataEntries shard_metadata{{"format", "pt"}};
    if (metadata) {
      for (auto& entry : metadata->to_string_map().value_or(MetadataEntries{})) {
        if (entry.first == "total_size" || entry.first == "total_parameters") continue;  // the index's, computed anew
        std::erase_if(shard_metadata, [&](const auto& kv) { return kv.first == entry.first; });
        shard_metadata.push_back(std::move(entry));
      }
    }
    SplitLimits limits = options.split;
    if (limits.max_bytes == 0 && limits.max_tensors == 0) limits.max_bytes = kDefaultShardBytes;
    return create_sharded(target, std::move(tensors), shard_metadata, limits, options.durable);
  }
};

}  // namespace

std::string inspect_file(const Reader& reader, const std::string& display, bool json) {
  const auto& h = reader.header();
  std::string out;
  if (json) {
    JsonWriter w;
    w.object().key("format").string("safetensors").key("header_size").uint(h.header_size()).key("metadata");
    if (!h.has_metadata()) {
      w.null();
    } else {
      string_map_json(w, h.metadata());
    }
    w.key("tensors").array();
    for (const auto& t : h.tensors()) {
      tensor_json(w, t);
      w.end();
    }
    w.end().end();
    return std::move(w.text()) + "\n";
  }
  append_format(out, "file:        %s\nformat:      safetensors\nheader:      %llu bytes\ntensors:     %zu\ndata:        %s\n",
                printable(display).c_str(), static_cast<unsigned long long>(h.header_size()), h.tensors().size(), human_bytes(h.data_size()).c_str());
  if (h.has_metadata()) {
    out += "metadata:\n";
    for (const auto& [k, v] : h.metadata()) append_format(out, "  %s: %s\n", printable(k).c_str(), printable(v).c_str());
  } else {
    out += "metadata:    (none)\n";
  }
  out += "\n";
  std::vector<const TensorInfo*> rows;
  rows.reserve(h.tensors().size());
  for (const auto& t : h.tensors()) rows.push_back(&t);
  return out + tensor_table(rows, nullptr);
}

const Format& safetensors_format() {
  static const SafetensorsFormat format;
  return format;
}

const Format& index_format() {
  static const IndexFormat format;
  return format;
}

}  // namespace safeweights::safetensors
