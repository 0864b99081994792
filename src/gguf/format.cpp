// GGUF in the format registry: detection by magic bytes, then validate, inspect (the JSON shape of
// docs/GGUF.md), open and cat through the reader (safeweights/gguf.h).
#include "gguf/format.h"

#include <algorithm>
#include <utility>

#include "core/little_endian.h"
#include "core/status_macros.h"
#include "gguf/imatrix.h"
#include "gguf/layout.h"
#include "gguf/quant_mix.h"
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

// ---- llama-quantize's mixes ----

std::string file_type_names() {
  std::string names;
  for (const FileType& f : file_types()) names += (names.empty() ? "" : ", ") + std::string(f.name);
  return names;
}

// The matrix of --imatrix, filtered by --include-weights / --exclude-weights; none without the option.
Result<ImportanceMatrix> importance_of(const QuantizeMix& mix) {
  if (mix.imatrix.empty()) return ImportanceMatrix{};
  SW_ASSIGN_OR_RETURN(SourcePtr source, open_file(mix.imatrix, FileBackend::Pread));
  SW_ASSIGN_OR_RETURN(ImportanceMatrix m, read_imatrix(source));
  SW_RETURN_IF_ERROR(filter_imatrix(m, mix.include_weights, mix.exclude_weights, mix.imatrix));
  return m;
}

// The weights llama-quantize gives a tensor it quantizes: the entry of its name when its size is the
// columns times the experts; none when there is no entry (or a token embedding's does not fit).
Result<std::vector<float>> weights_for(const ImportanceMatrix& m, const MixTensor& t, const std::string& file, std::string& note) {
  auto it = m.entries.find(std::string(t.name));
  if (it == m.entries.end()) {
    note += ", no importance data";
    return std::vector<float>{};
  }
  const std::size_t n = t.shape.size();
  const std::uint64_t cols = n ? t.shape[n - 1] : 1, experts = n >= 3 ? t.shape[n - 3] : 1;
  if (n >= 4 && t.shape[n - 4] != 1) return Error(ErrorKind::NotSupported, "importance weights for a 4-D tensor").with_tensor(std::string(t.name));
  if (it->second.size() == cols * experts) return it->second;
  if (t.name == "token_embd.weight" || t.name == "per_layer_token_embd.weight") {
    note += ", importance data of another size left out";
    return std::vector<float>{};
  }
  return Error(ErrorKind::InvalidArgument, "importance matrix: " + std::to_string(it->second.size()) + " weights for a tensor of " +
                                               std::to_string(cols) + " columns and " + std::to_string(experts) + " expert(s)")
      .with_file(file)
      .with_tensor(std::string(t.name));
}

// What llama-quantize writes over the input's metadata: the quantization version and file type, the
// --override-kv entries, and with an importance matrix its file, dataset, entry and chunk counts (quantize.imatrix.*).
Metadata mix_metadata(const FileType& ft, const QuantizeMix& mix, const ImportanceMatrix& m) {
  Metadata md;
  md.set({"general.quantization_version", MetaValue::u32(2)});
  md.set({std::string(kFileTypeKey), MetaValue::u32(ft.ftype)});
  for (const MetaEntry& e : mix.override_kv) md.set(e);
  if (m.entries.empty()) return md;
  const auto capped = [](const std::string& s) { return s.substr(0, 127); };  // llama.cpp's override strings hold 127 bytes
  md.set({"quantize.imatrix.file", MetaValue::string(capped(mix.imatrix))});
  if (!m.datasets.empty()) md.set({"quantize.imatrix.dataset", MetaValue::string(capped(m.datasets[0]))});
  md.set({"quantize.imatrix.entries_count", MetaValue::u32(static_cast<std::uint32_t>(m.entries.size()))});
  if (static_cast<std::int32_t>(m.chunk_count) > 0) md.set({"quantize.imatrix.chunks_count", MetaValue::u32(m.chunk_count)});
  return md;
}

Result<MixPlan> plan_llama_mix(const QuantizeMix& mix, std::span<const MixTensor> tensors, const Metadata& metadata) {
  const FileType* ft = find_file_type(mix.file_type);
  if (!ft)
    return Error(ErrorKind::InvalidArgument, "unknown llama-quantize file type " + mix.file_type + " (" + file_type_names() + ", or their numbers)");
  Metadata overridden = metadata;  // llama-quantize's loader reads the model through the overrides
  for (const MetaEntry& e : mix.override_kv) overridden.set(e);
  SW_ASSIGN_OR_RETURN(const ModelFacts model, model_facts(overridden));
  SW_ASSIGN_OR_RETURN(const ImportanceMatrix imatrix, importance_of(mix));
  const bool has_imatrix = !imatrix.entries.empty();
  // --prune-layers: the rules see the tensors kept, by their new names (the matrix is still read by
  // the old ones, as llama-quantize maps them back).
  const PrunedNames names = prune_layers(tensors, mix.prune_layers);
  std::vector<MixTensor> kept;
  std::vector<std::size_t> kept_index;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (names.names[i].empty()) continue;
    kept.push_back({names.names[i], tensors[i].type, tensors[i].shape});
    kept_index.push_back(i);
  }
  SW_ASSIGN_OR_RETURN(std::vector<TypeChoice> choices, choose_types(*ft, mix, model, kept, has_imatrix));
  MixPlan plan;
  plan.metadata = mix_metadata(*ft, mix, imatrix);
  if (!mix.prune_layers.empty()) plan.metadata.set({model.arch + ".block_count", MetaValue::u32(names.block_count)});
  plan.tensors.resize(tensors.size(), MixChoice{TensorType::F32, {}, {}, {}, true});
  for (std::size_t k = 0; k < kept.size(); ++k) {
    const std::size_t i = kept_index[k];
    const MixTensor& t = tensors[i];
    TypeChoice& c = choices[k];
    const std::string name(t.name), to(type_name(c.type));
    if (c.quantizable && c.requires_imatrix && !has_imatrix)
      return Error(ErrorKind::InvalidArgument, std::string(ft->name) + " needs an importance matrix (--imatrix) for " + to).with_tensor(name);
    MixChoice out{c.type, {}, {}, names.names[i] != t.name ? names.names[i] : std::string(), false};
    if (c.type != t.type) {
      out.note = std::move(c.note);
      if (type_info(t.type).cls == TypeClass::Quantized && !mix.allow_requantize)
        return Error(ErrorKind::InvalidArgument, "requantizing from " + std::string(type_name(t.type)) + " is refused without --allow-requantize")
            .with_tensor(name);
      if (has_imatrix) {
        SW_ASSIGN_OR_RETURN(out.importance, weights_for(imatrix, t, mix.imatrix, out.note));
      }
      if (out.importance.empty() && c.requires_imatrix)
        return Error(ErrorKind::InvalidArgument, "no importance data for a tensor quantized to " + to + " (llama-quantize refuses it)")
            .with_tensor(name);
    }
    plan.tensors[i] = std::move(out);
  }
  return plan;
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
    auto fallback = row_fallback(requested, shape.back());
    return {fallback.is_ok() ? *fallback : TensorType::F16,
            "rows of " + std::to_string(shape.back()) + " are not a multiple of " + std::to_string(block)};
  }
  // general.file_type (llama.cpp's llama_ftype) follows the type the tensors were converted to.
  void retype_metadata(Metadata& carried, TensorType requested) const override {
    const std::optional<std::uint32_t> ftype = llama_file_type(requested);
    if (ftype && carried.find(kFileTypeKey)) carried.set({std::string(kFileTypeKey), MetaValue::u32(*ftype)});
  }
  Result<MixPlan> plan_mix(const QuantizeMix& mix, std::span<const MixTensor> tensors, const Metadata& metadata) const override {
    return plan_llama_mix(mix, tensors, metadata);
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
