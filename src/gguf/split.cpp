// Split GGUF models (llama.cpp's gguf-split): the file names, the size option, and opening a set of
// files as one model, every file checked against the others.
#include "gguf/split.h"

#include <cstdio>

#include "core/status_macros.h"
#include "gguf/layout.h"
#include "core/name_table.h"
#include "safeweights/cancel.h"

namespace safeweights::gguf {
namespace {

constexpr std::string_view kSuffix = ".gguf";
constexpr std::size_t kDigits = 5;  // llama.cpp's "%05d"; split.count is at most 65535

Error invalid_split(const std::string& file, std::string message) {
  return Error(ErrorKind::InvalidGguf, std::move(message)).with_rule(ErrorRule::GgufSplit).with_file(file);
}

std::optional<std::uint32_t> five_digits(std::string_view s) {
  if (s.size() != kDigits) return std::nullopt;
  std::uint32_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint32_t>(c - '0');
  }
  return v;
}

// A split key's value: nullopt when absent; InvalidGguf when it is not of llama.cpp's type.
Result<std::optional<std::uint64_t>> split_key(const GgufFile& f, std::string_view key, ValueType type) {
  const Value* v = f.find_kv(key);
  if (!v) return std::optional<std::uint64_t>();
  if (v->type != type)
    return invalid_split(f.name(), std::string(key) + " must be " + std::string(value_type_name(type)) +
                                       " (as llama.cpp's gguf-split writes it), not " + std::string(value_type_name(v->type)));
  return std::optional<std::uint64_t>(v->bits);
}

struct SplitKeys {
  std::uint64_t no = 0, count = 0;
  std::int64_t tensors = 0;
};

// The three keys of a file that belongs to a set of more than one file; count 0 when the file is not
// such a part (no split.count, or 0 or 1 as llama.cpp's --merge leaves it).
Result<SplitKeys> read_split_keys(const GgufFile& f) {
  SplitKeys keys;
  SW_ASSIGN_OR_RETURN(auto count, split_key(f, kSplitCountKey, ValueType::UINT16));
  SW_ASSIGN_OR_RETURN(auto no, split_key(f, kSplitNoKey, ValueType::UINT16));
  SW_ASSIGN_OR_RETURN(auto tensors, split_key(f, kSplitTensorsCountKey, ValueType::INT32));
  if (!count || *count <= 1) return keys;
  keys.count = *count;
  if (!no) return invalid_split(f.name(), "split.count is " + std::to_string(*count) + " but split.no is missing");
  if (!tensors) return invalid_split(f.name(), "split.count is " + std::to_string(*count) + " but split.tensors.count is missing");
  keys.no = *no;
  keys.tensors = static_cast<std::int64_t>(*tensors);
  if (keys.no >= keys.count)
    return invalid_split(f.name(), "split.no is " + std::to_string(keys.no) + ", not below split.count " + std::to_string(keys.count));
  if (keys.tensors < 0) return invalid_split(f.name(), "split.tensors.count is negative");
  return keys;
}

// The whole model: file 0's metadata, every file's tensors in file order, one name index.
class SplitModel final : public GgufFile {
 public:
  std::string_view format() const noexcept override { return "gguf"; }
  const std::string& name() const noexcept override { return parts_[0]->name(); }
  std::span<const TensorEntry> tensors() const noexcept override { return entries_; }
  const TensorEntry* find(std::string_view name) const noexcept override {
    const std::int64_t i = index_.find(name, [this](std::size_t j) { return entries_[j].name; });
    return i < 0 ? nullptr : &entries_[static_cast<std::size_t>(i)];
  }
  const Metadata* metadata() const noexcept override { return parts_[0]->metadata(); }
  std::uint32_t version() const noexcept override { return parts_[0]->version(); }
  std::uint32_t alignment() const noexcept override { return parts_[0]->alignment(); }
  std::uint64_t data_offset() const noexcept override { return parts_[0]->data_offset(); }
  std::span<const KeyValue> kv() const noexcept override { return parts_[0]->kv(); }
  const Value* find_kv(std::string_view key) const noexcept override { return parts_[0]->find_kv(key); }
  std::span<const TensorRecord> infos() const noexcept override { return infos_; }
  const SourcePtr& source() const noexcept override { return parts_[0]->source(); }
  std::size_t split_count() const noexcept override { return parts_.size(); }
  const GgufFile& split(std::size_t i) const noexcept override { return *parts_[i]; }
  std::size_t split_of(std::size_t tensor) const noexcept override { return part_of_[tensor]; }

  // Every part opened and checked; `total` their tensors (so every size here is what the files hold).
  static Result<std::unique_ptr<GgufFile>> join(std::vector<std::unique_ptr<GgufFile>> parts, std::size_t total) {
    auto m = std::unique_ptr<SplitModel>(new SplitModel);
    m->entries_.reserve(total);
    m->infos_.reserve(total);
    m->part_of_.reserve(total);
    m->index_ = NameTable(total, hash_seed());
    const auto name_of = [&m](std::size_t j) { return m->entries_[j].name; };
    for (std::size_t k = 0; k < parts.size(); ++k) {
      for (std::size_t i = 0; i < parts[k]->tensors().size(); ++i) {
        const TensorEntry& e = parts[k]->tensors()[i];
        const std::uint64_t hash = m->index_.hash(e.name);
        std::uint64_t& slot = m->index_.slot(e.name, hash, name_of);
        if (slot != 0) {
          const std::string& first = parts[m->part_of_[static_cast<std::uint32_t>(slot) - 1]]->name();
          return std::move(invalid_split(parts[k]->name(), "duplicate tensor name across split files (also in " + first + ")").with_tensor(e.name));
        }
        slot = NameTable::make(hash, static_cast<std::uint32_t>(m->entries_.size()));
        m->entries_.push_back(e);
        m->infos_.push_back(parts[k]->infos()[i]);
        m->part_of_.push_back(k);
      }
    }
    m->parts_ = std::move(parts);
    return std::unique_ptr<GgufFile>(std::move(m));
  }

 private:
  SplitModel() = default;
  std::vector<std::unique_ptr<GgufFile>> parts_;
  std::vector<TensorEntry> entries_;
  std::vector<TensorRecord> infos_;
  std::vector<std::size_t> part_of_;
  NameTable index_;
};

// Files 2..N hold the three split keys and at most general.alignment, as gguf-split and gguf-py write
// them: the model's metadata is file 1's alone.
Status check_other_kv(const GgufFile& f) {
  for (const KeyValue& e : f.kv())
    if (e.key != kSplitNoKey && e.key != kSplitCountKey && e.key != kSplitTensorsCountKey && e.key != kAlignmentKey)
      return invalid_split(f.name(), "key `" + e.key + "` in a split file other than the first (the model's metadata is in file 1 only)");
  return Status::ok();
}

}  // namespace

std::string split_file_name(std::string_view prefix, std::uint32_t number, std::uint32_t count) {
  char tail[40];
  std::snprintf(tail, sizeof tail, "-%05u-of-%05u.gguf", number, count);
  return std::string(prefix) + tail;
}

std::optional<SplitName> parse_split_file_name(std::string_view name) {
  constexpr std::size_t kTail = 1 + kDigits + 4 + kDigits + kSuffix.size();  // "-00001-of-00003.gguf"
  if (name.size() <= kTail) return std::nullopt;
  const std::string_view tail = name.substr(name.size() - kTail);
  if (tail[0] != '-' || tail.substr(1 + kDigits, 4) != "-of-" || !tail.ends_with(kSuffix)) return std::nullopt;
  const auto number = five_digits(tail.substr(1, kDigits));
  const auto count = five_digits(tail.substr(1 + kDigits + 4, kDigits));
  if (!number || !count || *number == 0 || *number > *count) return std::nullopt;
  return SplitName{std::string(name.substr(0, name.size() - kTail)), *number, *count};
}

Result<std::uint64_t> parse_split_size(std::string_view text) {
  const auto bad = [&] {
    return Error(ErrorKind::InvalidArgument,
                 "split size `" + std::string(text) + "`: expected a positive number of bytes, or of K, M or G (10^3, 10^6, 10^9 bytes)");
  };
  std::uint64_t unit = 1;
  if (!text.empty() && (text.back() == 'K' || text.back() == 'M' || text.back() == 'G')) {
    unit = text.back() == 'K' ? 1000 : text.back() == 'M' ? 1000 * 1000 : 1000 * 1000 * 1000;
    text.remove_suffix(1);
  }
  if (text.empty() || text.size() > 19) return bad();
  std::uint64_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return bad();
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  std::uint64_t bytes = 0;
  if (n == 0 || __builtin_mul_overflow(n, unit, &bytes)) return bad();
  return bytes;
}

Result<std::unique_ptr<GgufFile>> open_split_model(std::unique_ptr<GgufFile> file, const FormatOptions& options) {
  SW_ASSIGN_OR_RETURN(SplitKeys keys, read_split_keys(*file));
  if (keys.count == 0) return file;
  const std::string named = file->name();
  const auto parsed = parse_split_file_name(named);
  const std::string expected = split_file_name("PREFIX", static_cast<std::uint32_t>(keys.no + 1), static_cast<std::uint32_t>(keys.count));
  if (!parsed || parsed->number != keys.no + 1 || parsed->count != keys.count)
    return invalid_split(named, "file " + std::to_string(keys.no + 1) + " of a split model (split.no " + std::to_string(keys.no) + ", split.count " +
                                    std::to_string(keys.count) + ") must be named " + expected +
                                    " (llama.cpp's split naming) so that its other files can be found");
  const Resolver& resolver = resolver_of(options);
  std::vector<std::unique_ptr<GgufFile>> parts;
  parts.reserve(static_cast<std::size_t>(keys.count));  // at most 65535
  std::uint64_t total = 0;
  for (std::uint32_t k = 0; k < keys.count; ++k) {
    if (Status s = check_cancelled(); !s.is_ok()) return std::move(s).error();
    std::unique_ptr<GgufFile> part;
    if (k == keys.no) {
      part = std::move(file);
    } else {
      const std::string path = split_file_name(parsed->prefix, k + 1, static_cast<std::uint32_t>(keys.count));
      auto source = resolver.open(path, options.backend);
      if (!source.is_ok()) {
        Error e = std::move(source).error();
        return Error(e.kind(), "file " + std::to_string(k + 1) + " of the split model " + named + " cannot be opened: " + e.message())
            .with_file(path);
      }
      SW_ASSIGN_OR_RETURN(part, open_one(std::move(*source), options));
      SW_ASSIGN_OR_RETURN(SplitKeys other, read_split_keys(*part));
      if (other.count != keys.count)
        return invalid_split(path, "split.count is " + std::to_string(other.count) + " but " + named + " says " + std::to_string(keys.count));
      if (other.no != k)
        return invalid_split(path, "split.no is " + std::to_string(other.no) + " in the file named as number " + std::to_string(k + 1) +
                                       " (split.no " + std::to_string(k) + ")");
      if (other.tensors != keys.tensors)
        return invalid_split(path,
                             "split.tensors.count is " + std::to_string(other.tensors) + " but " + named + " says " + std::to_string(keys.tensors));
    }
    if (k != 0) SW_RETURN_IF_ERROR(check_other_kv(*part));
    total += part->tensors().size();
    parts.push_back(std::move(part));
  }
  if (total != static_cast<std::uint64_t>(keys.tensors))
    return invalid_split(named,
                         "the split files hold " + std::to_string(total) + " tensors but split.tensors.count is " + std::to_string(keys.tensors));
  return SplitModel::join(std::move(parts), static_cast<std::size_t>(total));
}

}  // namespace safeweights::gguf
