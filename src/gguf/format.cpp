// GGUF in the format registry: detection by magic bytes, then validate, inspect (the JSON shape of
// docs/GGUF.md), open and cat through the reader (safeweights/gguf.h).
#include "gguf/format.h"

#include <algorithm>
#include <utility>

#include "core/little_endian.h"
#include "core/status_macros.h"
#include "gguf/layout.h"
#include "gguf/writer.h"
#include "safeweights/gguf.h"
#include "safeweights/quantize.h"
#include "safeweights/text.h"

namespace safeweights::gguf {
namespace {

// The human form shows this many items of an array, then the count of the rest.
constexpr std::size_t kShownItems = 8;

std::string inspect_json(const GgufFile& f) {
  JsonWriter w;
  w.object().key("format").string("gguf").key("version").uint(f.version()).key("alignment").uint(f.alignment());
  w.key("data_offset").uint(f.data_offset()).key("kv").array();
  std::string value;
  for (const KeyValue& e : f.kv()) {
    w.object().key("key").string(e.key).key("type").string(value_type_name(e.value.type));
    if (e.value.type == ValueType::ARRAY) w.key("elem_type").string(value_type_name(e.value.elem_type));
    value.clear();
    append_value_json(value, e.value);
    w.key("value").raw(value).end();
  }
  w.end();
  const bool split = f.split_count() > 1;
  if (split) {  // the files of a split model; each tensor then names its file, offsets relative to its data section
    w.key("splits").array();
    for (std::size_t k = 0; k < f.split_count(); ++k) {
      w.object().key("file").string(f.split(k).name()).key("data_offset").uint(f.split(k).data_offset());
      w.key("tensors").uint(f.split(k).tensors().size()).end();
    }
    w.end();
  }
  w.key("tensors").array();
  for (std::size_t i = 0; i < f.tensors().size(); ++i) {
    const TensorEntry& t = f.tensors()[i];
    const TensorRecord& info = f.infos()[i];
    w.object().key("name").string(t.name).key("type").string(ggml_type_name(info.ggml_type)).key("ne").uints(info.ne);
    w.key("shape").uints(t.shape).key("offset").uint(info.offset).key("nbytes").uint(t.nbytes);
    if (split) w.key("split").uint(f.split_of(i));
    w.end();
  }
  w.end().end();
  return std::move(w.text()) + "\n";
}

std::string value_text(const Value& v) {
  if (v.type == ValueType::STRING) return printable(v.str);
  if (v.type != ValueType::ARRAY) {
    std::string out;
    append_value_json(out, v);
    return out;
  }
  std::string out = std::string(value_type_name(v.elem_type)) + "[" + std::to_string(v.items.size()) + "] [";
  for (std::size_t i = 0; i < v.items.size() && i < kShownItems; ++i) {
    out += i ? ", " : "";
    if (v.items[i].type == ValueType::STRING) {
      std::string quoted;
      append_value_json(quoted, v.items[i]);
      out += printable(quoted);
    } else {
      out += value_text(v.items[i]);
    }
  }
  if (v.items.size() > kShownItems) out += ", ... " + std::to_string(v.items.size() - kShownItems) + " more";
  return out + "]";
}

std::string inspect_text(const GgufFile& f, const std::string& path) {
  std::uint64_t bytes = 0;
  for (const TensorEntry& t : f.tensors()) bytes += t.nbytes;
  std::string out;
  append_format(out, "file:        %s\nformat:      gguf (version %u)\nalignment:   %u\ndata offset: %llu\ntensors:     %zu (%s)\n\n",
                printable(path).c_str(), f.version(), f.alignment(), static_cast<unsigned long long>(f.data_offset()), f.tensors().size(),
                human_bytes(bytes).c_str());
  if (f.split_count() > 1) {
    out.insert(out.size() - 1, "splits:      " + std::to_string(f.split_count()) + " files\n");
    for (std::size_t k = 0; k < f.split_count(); ++k)
      out.insert(out.size() - 1, "  " + printable(f.split(k).name()) + " (" + std::to_string(f.split(k).tensors().size()) + " tensors)\n");
  }
  for (const KeyValue& e : f.kv())
    append_format(out, "%-40s %-8s %s\n", printable(e.key).c_str(), std::string(value_type_name(e.value.type)).c_str(), value_text(e.value).c_str());
  if (!f.kv().empty()) out += "\n";
  for (std::size_t i = 0; i < f.tensors().size(); ++i) {
    const TensorEntry& t = f.tensors()[i];
    append_format(out, "%-8s %-24s %s\n", std::string(ggml_type_name(f.infos()[i].ggml_type)).c_str(), shape_string(t.shape).c_str(),
                  printable(t.name).c_str());
  }
  return out;
}

// llama.cpp's fallback when a row of `cols` elements is not a whole number of `t`'s blocks
// (llama-quant.cpp): the 2-3 bit K-quants go to IQ4_NL (Q4_0 when no IQ4_NL quantizer is built), Q4_K
// to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0; when that does not fit either, or for the 32-element types, F16.
TensorType llama_fallback(TensorType t, std::uint64_t cols) {
  TensorType next = TensorType::F16;
  switch (t) {
    case TensorType::Q2_K:
    case TensorType::Q3_K: next = can_quantize(TensorType::IQ4_NL) ? TensorType::IQ4_NL : TensorType::Q4_0; break;
    case TensorType::Q4_K: next = TensorType::Q5_0; break;
    case TensorType::Q5_K: next = TensorType::Q5_1; break;
    case TensorType::Q6_K: next = TensorType::Q8_0; break;
    default: break;
  }
  return cols % type_info(next).block_elements == 0 ? next : TensorType::F16;
}

Status no_members(const std::string& path, std::span<const std::string> members) {
  if (members.empty()) return Status::ok();
  return Error(ErrorKind::InvalidArgument, "a GGUF file has no members (ENTRY is for DDUF archives)").with_file(path);
}

class GgufFormat final : public Format {
 public:
  std::string_view name() const noexcept override { return "gguf"; }
  int detect(std::span<const std::byte> head, std::uint64_t, std::string_view path) const override {
    const std::string_view magic(reinterpret_cast<const char*>(head.data()), std::min<std::size_t>(head.size(), 4));
    if (magic == kMagic) {
      const bool known_version = head.size() >= 8 && le::u32(head.data() + 4) >= 2 && le::u32(head.data() + 4) <= 3;
      return known_version ? 4 : 3;
    }
    if (magic == "FUGG") return 3;  // big-endian: the reader says so
    return path.size() >= 5 && path.substr(path.size() - 5) == ".gguf" ? 1 : 0;
  }
  Result<std::string> validate(const std::string& path, const FormatOptions& options) const override {
    SW_ASSIGN_OR_RETURN(auto file, gguf::open(path, options));
    std::uint64_t bytes = 0;
    for (const TensorEntry& t : file->tensors()) bytes += t.nbytes;
    return std::to_string(file->tensors().size()) + " tensors, " + human_bytes(bytes) + " of data, " + std::to_string(file->kv().size()) +
           " keys (GGUF v" + std::to_string(file->version()) +
           (file->split_count() > 1 ? ", " + std::to_string(file->split_count()) + " split files" : "") + ")";
  }
  Result<std::string> inspect(const std::string& path, std::span<const std::string> members, const FormatOptions& options, bool json) const override {
    SW_RETURN_IF_ERROR(no_members(path, members));
    SW_ASSIGN_OR_RETURN(auto file, gguf::open(path, options));
    return json ? inspect_json(*file) : inspect_text(*file, path);
  }
  Result<std::unique_ptr<TensorFile>> open(const std::string& path, std::span<const std::string> members,
                                           const FormatOptions& options) const override {
    SW_RETURN_IF_ERROR(no_members(path, members));
    SW_ASSIGN_OR_RETURN(auto file, gguf::open(path, options));
    return std::unique_ptr<TensorFile>(std::move(file));
  }

  std::span<const std::string_view> extensions() const noexcept override {
    static constexpr std::string_view kExtensions[] = {".gguf"};
    return kExtensions;
  }
  Status can_hold(TensorType type) const override {
    if (ggml_id(type)) return Status::ok();
    return Error(ErrorKind::NotSupported, "GGUF has no " + std::string(type_name(type)) + " type");
  }
  // As llama.cpp quantizes: a row that is not a whole number of the type's blocks takes its fallback.
  StoredType stored_type(TensorType requested, std::span<const std::uint64_t> shape) const override {
    const std::uint64_t block = type_info(requested).block_elements;
    if (shape.empty() || shape.back() % block == 0) return {requested, {}};
    return {llama_fallback(requested, shape.back()), "rows of " + std::to_string(shape.back()) + " are not a multiple of " + std::to_string(block)};
  }
  // general.file_type (llama.cpp's llama_ftype) follows the type the tensors were converted to.
  void retype_metadata(Metadata& carried, TensorType requested) const override {
    const std::optional<std::uint32_t> ftype = llama_file_type(requested);
    if (ftype && carried.find(kFileTypeKey)) carried.set({std::string(kFileTypeKey), MetaValue::u32(*ftype)});
  }
  // The metadata's entries as they are, but for what describes the files rather than the model:
  // general.alignment becomes the writer's alignment (written first, as the writer places it) and
  // llama.cpp's split.* keys are left to the split writer. Without those (a conversion's plan), the
  // entries are written as they are, not copied.
  Result<std::unique_ptr<TensorSink>> create(const std::string& path, std::vector<TensorDecl> tensors, const Metadata* metadata,
                                             const WriteOptions& options) const override {
    const std::span<const KeyValue> entries = metadata ? metadata->entries() : std::span<const KeyValue>{};
    const auto describes_files = [](const KeyValue& e) {
      return e.key == kAlignmentKey || e.key == kSplitNoKey || e.key == kSplitCountKey || e.key == kSplitTensorsCountKey;
    };
    if (std::ranges::none_of(entries, describes_files)) return create_over(path, entries, std::move(tensors), options);
    WriteOptions o = options;
    std::vector<KeyValue> kv;
    for (const KeyValue& e : entries) {
      if (e.key == kAlignmentKey && o.alignment == 0 && e.value.type == ValueType::UINT32) o.alignment = static_cast<std::uint32_t>(e.value.bits);
      if (!describes_files(e)) kv.push_back(e);
    }
    return gguf::create(path, std::move(kv), std::move(tensors), o);
  }
};

}  // namespace

const Format& gguf_format() {
  static const GgufFormat format;
  return format;
}

}  // namespace safeweights::gguf
