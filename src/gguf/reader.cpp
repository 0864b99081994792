// The GGUF reader: one pass over a copy of the header, every rule checked before anything it sizes is
// allocated, then tensors as TensorEntry values over the file's ByteSource.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>

#include "core/little_endian.h"
#include "core/status_macros.h"
#include "core/utf8.h"
#include "gguf/layout.h"
#include "gguf/split.h"
#include "core/name_table.h"
#include "safeweights/cancel.h"
#include "safeweights/gguf.h"
#include "safeweights/text.h"

namespace safeweights::gguf {
namespace {

// Every InvalidGguf error names the rule it broke (ErrorRule, docs/GGUF.md "Rules checked").
Error invalid(ErrorRule rule, std::string message, std::uint64_t offset) {
  return Error(ErrorKind::InvalidGguf, std::move(message)).with_rule(rule).with_offset(offset);
}

// The header bytes, copied from the source as parsing needs them (so over HTTP only the header is
// fetched), with every read checked against what the file holds and the header budget. The copy grows
// by doubling (from 64 KiB), uninitialised: each byte is written once, by the source.
class Cursor {
 public:
  Cursor(const ByteSource& source, std::uint64_t budget) : source_(source), size_(source.size()), budget_(budget) {}

  std::uint64_t pos() const noexcept { return pos_; }
  std::uint64_t remaining() const noexcept { return size_ - pos_; }

  // Makes n more bytes readable. The copy never holds more than the file or the budget allows, so
  // bytes already copied need no other check.
  Status need(std::uint64_t n, std::string_view what) {
    if (n <= filled_ - pos_) [[likely]]
      return Status::ok();
    return grow(n, what);
  }
  // Preconditions: need() covered these bytes.
  std::uint64_t take_uint(int bytes) noexcept {
    const std::uint64_t v = le::load(buf_.get() + pos_, bytes);
    pos_ += static_cast<std::uint64_t>(bytes);
    return v;
  }
  std::string_view take_bytes(std::uint64_t n) noexcept {
    std::string_view s(reinterpret_cast<const char*>(buf_.get() + pos_), static_cast<std::size_t>(n));
    pos_ += n;
    return s;
  }
  Result<std::uint64_t> uint(int bytes, std::string_view what) {
    SW_RETURN_IF_ERROR(need(static_cast<std::uint64_t>(bytes), what));
    return take_uint(bytes);
  }
  // A gguf_string: u64 length, then the bytes. Returns the offset of its first byte.
  Result<std::uint64_t> string(std::string_view what, std::uint64_t max_length, std::string_view limit_name) {
    const std::uint64_t at = pos_;
    if (8 <= filled_ - pos_) [[likely]] {  // the length and the bytes already copied: no Status on the way
      const std::uint64_t length = le::load(buf_.get() + pos_, 8);
      if (length <= max_length && length <= filled_ - pos_ - 8) {
        last_length_ = length;
        pos_ += 8 + length;
        return pos_ - length;
      }
    }
    SW_ASSIGN_OR_RETURN(std::uint64_t length, uint(8, what));
    if (length > max_length)
      return invalid(ErrorRule::GgufLength, std::string(what) + " of " + std::to_string(length) + " bytes is over " + std::string(limit_name), at);
    SW_RETURN_IF_ERROR(need(length, what));
    last_length_ = length;
    pos_ += length;
    return pos_ - length;
  }
  std::uint64_t last_length() const noexcept { return last_length_; }
  void rewind(std::uint64_t n) noexcept { pos_ -= n; }
  std::string_view bytes_at(std::uint64_t offset, std::uint64_t length) const noexcept {
    return {reinterpret_cast<const char*>(buf_.get() + offset), static_cast<std::size_t>(length)};
  }
  // The copy (its first `end` bytes are the header).
  std::unique_ptr<std::byte[]> release() { return std::move(buf_); }

 private:
  [[gnu::noinline]] Status grow(std::uint64_t n, std::string_view what) {
    if (n > remaining())
      return invalid(ErrorRule::GgufTruncated,
                     "truncated: " + std::string(what) + " needs " + std::to_string(n) + " bytes at byte " + std::to_string(pos_) +
                         " but the file has " + std::to_string(remaining()) + " left",
                     pos_);
    if (pos_ + n > budget_)
      return Error(ErrorKind::ResourceLimit, "the GGUF header is larger than the limit of " + std::to_string(budget_) + " bytes");
    const std::uint64_t grown = std::min({size_, budget_, std::max<std::uint64_t>(2 * filled_, 64 * 1024)});
    const std::uint64_t target = std::max(pos_ + n, grown);
    SW_ASSIGN_OR_RETURN(std::unique_ptr<std::byte[]> bigger, allocate_uninitialized(target, "the GGUF header"));
    if (filled_ != 0) std::memcpy(bigger.get(), buf_.get(), static_cast<std::size_t>(filled_));
    SW_RETURN_IF_ERROR(source_.read_at(filled_, std::span(bigger.get() + filled_, static_cast<std::size_t>(target - filled_))));
    buf_ = std::move(bigger);
    filled_ = target;
    return Status::ok();
  }

  const ByteSource& source_;
  std::uint64_t size_;
  std::uint64_t budget_;
  std::uint64_t pos_ = 0;
  std::uint64_t last_length_ = 0;
  std::unique_ptr<std::byte[]> buf_;
  std::uint64_t filled_ = 0;  // bytes of buf_ read from the source
};

// Memory the parsed metadata takes, against the same budget as the header bytes.
class Budget {
 public:
  explicit Budget(std::uint64_t limit) : left_(limit) {}
  Status charge(std::uint64_t count, std::uint64_t each) {
    if (each != 0 && count > left_ / each) return Error(ErrorKind::ResourceLimit, "the GGUF metadata needs more memory than the limit allows");
    left_ -= count * each;
    return Status::ok();
  }

 private:
  std::uint64_t left_;
};

class Parser {
 public:
  Parser(const ByteSource& source, const FormatOptions& options) : cur_(source, options.max_header_bytes), budget_(options.max_header_bytes) {}

  Status header(std::uint32_t& version, std::uint64_t& tensor_count, std::uint64_t& kv_count);
  // Also checks general.alignment where it stands.
  Status kvs(std::uint64_t count, std::vector<KeyValue>& out);
  std::uint32_t alignment() const noexcept { return alignment_; }
  Cursor& cursor() { return cur_; }
  Budget& budget() { return budget_; }

 private:
  Status value(ValueType type, Value& out);  // ARRAY never inside an array: value_type() refuses it
  Status scalar(ValueType type, int width, Value& out);
  bool take_scalar(ValueType type, int width, Value& out) noexcept;
  Result<ValueType> value_type(std::string_view what, bool in_array);

  Status check_alignment(const Value& value, std::uint64_t at);

  Cursor cur_;
  Budget budget_;
  std::uint32_t alignment_ = kDefaultAlignment;
};

Status Parser::header(std::uint32_t& version, std::uint64_t& tensor_count, std::uint64_t& kv_count) {
  SW_RETURN_IF_ERROR(cur_.need(4, "the magic"));
  const std::string_view magic = cur_.take_bytes(4);
  if (magic == "FUGG") return Error(ErrorKind::NotSupported, "big-endian GGUF (magic FUGG): only little-endian files are read").with_offset(0);
  if (magic != kMagic) return invalid(ErrorRule::GgufMagic, "not a GGUF file: the magic is not \"GGUF\"", 0);
  SW_ASSIGN_OR_RETURN(std::uint64_t v, cur_.uint(4, "the version"));
  version = static_cast<std::uint32_t>(v);
  if (version == 0) return invalid(ErrorRule::GgufVersion, "version 0 is not a GGUF version", 4);
  if ((version & 0xFFFF) == 0)
    return Error(ErrorKind::NotSupported,
                 "the version reads as a byte-swapped number: a big-endian GGUF file; only "
                 "little-endian files are read")
        .with_offset(4);
  if (version == 1) return Error(ErrorKind::NotSupported, "GGUF version 1 is no longer supported (ggml refuses it too)").with_offset(4);
  if (version > 3) return Error(ErrorKind::NotSupported, "GGUF version " + std::to_string(version) + " is newer than 3").with_offset(4);
  SW_ASSIGN_OR_RETURN(tensor_count, cur_.uint(8, "the tensor count"));
  SW_ASSIGN_OR_RETURN(kv_count, cur_.uint(8, "the key/value count"));
  // The smallest key/value pair takes 14 bytes (length, a 1-byte key, type, a 1-byte value).
  if (kv_count > cur_.remaining() / 14)
    return invalid(
        ErrorRule::GgufCount,
        "the key/value count " + std::to_string(kv_count) + " cannot fit in the " + std::to_string(cur_.remaining()) + " bytes that remain", 16);
  return Status::ok();
}

Result<ValueType> Parser::value_type(std::string_view what, bool in_array) {
  const std::uint64_t at = cur_.pos();
  SW_ASSIGN_OR_RETURN(std::uint64_t id, cur_.uint(4, what));
  const std::optional<ValueType> type = value_type_of_id(id);
  if (!type) return invalid(ErrorRule::GgufValueType, "unknown value type " + std::to_string(id), at);
  if (in_array && *type == ValueType::ARRAY) return invalid(ErrorRule::GgufValueType, "an array of arrays (ggml refuses nested arrays)", at);
  return *type;
}

// A fixed-width value whose bytes need() has covered; false for a BOOL that is not 0 or 1.
bool Parser::take_scalar(ValueType type, int width, Value& out) noexcept {
  out.type = type;
  out.bits = cur_.take_uint(width);
  if (is_signed(type) && width < 8 && (out.bits >> (8 * width - 1)) != 0) out.bits |= ~std::uint64_t{0} << (8 * width);
  return type != ValueType::BOOL || out.bits <= 1;
}

Status Parser::scalar(ValueType type, int width, Value& out) {
  const std::uint64_t at = cur_.pos();
  if (!take_scalar(type, width, out)) return invalid(ErrorRule::GgufBool, "a BOOL value is " + std::to_string(out.bits) + ", not 0 or 1", at);
  return Status::ok();
}

Status Parser::value(ValueType type, Value& out) {
  out.type = type;
  const int width = value_width(type);
  if (width > 0) {
    SW_RETURN_IF_ERROR(cur_.need(static_cast<std::uint64_t>(width), "a value"));
    return scalar(type, width, out);
  }
  if (type == ValueType::STRING) {
    SW_ASSIGN_OR_RETURN(std::uint64_t from, cur_.string("a string", kMaxStringBytes, "ggml's limit of 1 GiB"));
    SW_RETURN_IF_ERROR(budget_.charge(cur_.last_length(), 1));
    out.str.assign(cur_.bytes_at(from, cur_.last_length()));
    return Status::ok();
  }
  SW_ASSIGN_OR_RETURN(out.elem_type, value_type("an array's element type", true));
  const std::uint64_t count_at = cur_.pos();
  SW_ASSIGN_OR_RETURN(std::uint64_t count, cur_.uint(8, "an array's length"));
  if (count > kMaxArrayElements)
    return invalid(ErrorRule::GgufLength, "an array of " + std::to_string(count) + " elements is over ggml's limit of 2^30", count_at);
  const int elem_width = value_width(out.elem_type);
  const std::uint64_t min_bytes = elem_width > 0 ? static_cast<std::uint64_t>(elem_width) : 8;
  if (count > cur_.remaining() / min_bytes)
    return invalid(ErrorRule::GgufCount,
                   "an array of " + std::to_string(count) + " elements cannot fit in the " + std::to_string(cur_.remaining()) + " bytes that remain",
                   count_at);
  SW_RETURN_IF_ERROR(budget_.charge(count, sizeof(Value)));
  out.items.resize(static_cast<std::size_t>(count));
  if (elem_width > 0) {  // one bounds check for the whole array
    SW_RETURN_IF_ERROR(cur_.need(count * min_bytes, "an array"));
    for (Value& item : out.items)  // no Status per element: only a BOOL can be refused
      if (!take_scalar(out.elem_type, elem_width, item)) [[unlikely]] {
        cur_.rewind(static_cast<std::uint64_t>(elem_width));
        return scalar(out.elem_type, elem_width, item);
      }
    return Status::ok();
  }
  for (Value& item : out.items) SW_RETURN_IF_ERROR(value(out.elem_type, item));
  return Status::ok();
}

Status Parser::kvs(std::uint64_t count, std::vector<KeyValue>& out) {
  SW_RETURN_IF_ERROR(budget_.charge(count, sizeof(KeyValue)));
  out.resize(static_cast<std::size_t>(count));
  NameTable seen(static_cast<std::size_t>(count), hash_seed());
  const auto key_of = [&out](std::size_t i) { return std::string_view(out[i].key); };
  for (std::size_t i = 0; i < out.size(); ++i) {
    KeyValue& kv = out[i];
    const std::uint64_t at = cur_.pos();
    SW_ASSIGN_OR_RETURN(std::uint64_t from, cur_.string("a key", kMaxKeyBytes, "the limit of 65535 bytes"));
    const std::string_view raw = cur_.bytes_at(from, cur_.last_length());
    if (!is_valid_utf8(raw))
      return invalid(ErrorRule::GgufKey, "key " + std::to_string(i) + " `" + printable(raw) + "` is not valid UTF-8 (GGUF strings are UTF-8)", at);
    kv.key.assign(ggml_name(raw));  // what ggml's lookups match
    const std::string cut = kv.key.size() == raw.size()
                                ? std::string()
                                : " (`" + printable(raw) + "` is `" + printable(kv.key) + "` to ggml, which ends a key at its first NUL)";
    if (kv.key.empty())
      return invalid(ErrorRule::GgufKey,
                     raw.empty() ? "a key is empty" : "key `" + printable(raw) + "` is empty to ggml, which ends a key at its first NUL", at);
    const std::uint64_t hash = seen.hash(kv.key);
    std::uint64_t& slot = seen.slot(kv.key, hash, key_of);
    if (slot != 0) return invalid(ErrorRule::GgufKey, "duplicate key `" + printable(kv.key) + "`" + cut, at);
    slot = NameTable::make(hash, static_cast<std::uint32_t>(i));
    SW_ASSIGN_OR_RETURN(ValueType type, value_type("a value type", false));
    if (Status s = value(type, kv.value); !s.is_ok()) {
      if (s.error().kind() == ErrorKind::InvalidGguf)
        return invalid(s.error().rule(), "key `" + kv.key + "`: " + s.error().message(), *s.error().context().offset);
      return s;
    }
    if (kv.key == kAlignmentKey) SW_RETURN_IF_ERROR(check_alignment(kv.value, at));
  }
  return Status::ok();
}

Status Parser::check_alignment(const Value& value, std::uint64_t at) {
  if (value.type != ValueType::UINT32)
    return invalid(ErrorRule::GgufAlignment, "general.alignment must be UINT32, not " + std::string(value_type_name(value.type)), at);
  const auto a = static_cast<std::uint32_t>(value.bits);
  if (a == 0 || (a & (a - 1)) != 0)
    return invalid(ErrorRule::GgufAlignment, "general.alignment is " + std::to_string(a) + ", not a power of two", at);
  alignment_ = a;
  return Status::ok();
}

struct Tensor {
  std::uint64_t name_at = 0, name_length = 0;  // the name as ggml sees it: up to its first NUL
  std::uint64_t raw_length = 0;                // the name's bytes in the file
  std::size_t dims_at = 0, n_dims = 0;
  TensorType type{};
  std::uint32_t ggml_type = 0;
  std::uint64_t offset = 0, nbytes = 0;
};

class File final : public GgufFile {
 public:
  std::string_view format() const noexcept override { return "gguf"; }
  const std::string& name() const noexcept override { return source_->name(); }
  std::span<const TensorEntry> tensors() const noexcept override { return entries_; }
  const TensorEntry* find(std::string_view name) const noexcept override {
    const std::int64_t i = index_.find(name, [this](std::size_t j) { return entries_[j].name; });
    return i < 0 ? nullptr : &entries_[static_cast<std::size_t>(i)];
  }
  const Metadata* metadata() const noexcept override { return &metadata_; }
  std::uint32_t version() const noexcept override { return version_; }
  std::uint32_t alignment() const noexcept override { return alignment_; }
  std::uint64_t data_offset() const noexcept override { return data_offset_; }
  std::span<const KeyValue> kv() const noexcept override { return metadata_.entries(); }
  const Value* find_kv(std::string_view key) const noexcept override { return metadata_.find(key); }
  std::span<const TensorRecord> infos() const noexcept override { return infos_; }
  const SourcePtr& source() const noexcept override { return source_; }

  SourcePtr source_;
  std::uint32_t version_ = 0, alignment_ = kDefaultAlignment;
  std::uint64_t data_offset_ = 0;
  Metadata metadata_;                    // the key/value pairs, in file order
  std::unique_ptr<std::byte[]> header_;  // the copy the parser read (tensor names are views into it)
  std::vector<std::uint64_t> ne_, shapes_;
  std::vector<TensorEntry> entries_;
  std::vector<TensorRecord> infos_;
  NameTable index_;
};

// One tensor info (the index-th): name, dims, type, offset. Dims go to `ne` (GGUF order).
Status read_tensor_info(Cursor& cur, std::size_t index, Tensor& t, std::vector<std::uint64_t>& ne) {
  const std::uint64_t at = cur.pos();
  SW_ASSIGN_OR_RETURN(t.name_at, cur.string("a tensor name", kMaxTensorName, "ggml's limit of 63 bytes"));
  t.raw_length = cur.last_length();
  const std::string_view raw = cur.bytes_at(t.name_at, t.raw_length);
  if (!is_valid_utf8(raw))
    return invalid(ErrorRule::GgufTensorName,
                   "tensor " + std::to_string(index) + ": the name `" + printable(raw) + "` is not valid UTF-8 (GGUF strings are UTF-8)", at);
  t.name_length = ggml_name(raw).size();
  const auto name = [&] { return std::string(cur.bytes_at(t.name_at, t.name_length)); };
  const std::uint64_t dims_at = cur.pos();
  SW_ASSIGN_OR_RETURN(std::uint64_t n_dims, cur.uint(4, "a tensor's dimension count"));
  if (n_dims > kMaxDims)
    return invalid(ErrorRule::GgufDimensions, "tensor `" + name() + "` has " + std::to_string(n_dims) + " dimensions; ggml allows at most 4",
                   dims_at);
  t.n_dims = static_cast<std::size_t>(n_dims);
  t.dims_at = ne.size();
  SW_RETURN_IF_ERROR(cur.need(8 * n_dims + 12, "a tensor's dimensions, type and offset"));
  for (std::size_t d = 0; d < t.n_dims; ++d) {
    const std::uint64_t v = cur.take_uint(8);
    if (v > static_cast<std::uint64_t>(INT64_MAX))
      return invalid(ErrorRule::GgufDimensions, "tensor `" + name() + "` dimension " + std::to_string(d) + " is negative as ggml's int64",
                     dims_at + 4 + 8 * d);
    ne.push_back(v);
  }
  const std::uint64_t type_at = cur.pos();
  t.ggml_type = static_cast<std::uint32_t>(cur.take_uint(4));
  t.offset = cur.take_uint(8);
  const std::optional<TensorType> type = type_from_ggml(t.ggml_type);
  if (!type) {
    const std::string_view removed = ggml_type_name(t.ggml_type);
    return invalid(
        ErrorRule::GgufTensorType,
        "tensor `" + name() + "`: " +
            (removed.empty() ? "unknown ggml type id " + std::to_string(t.ggml_type)
                             : "ggml type " + std::string(removed) + " (id " + std::to_string(t.ggml_type) + ") was removed from GGUF files"),
        type_at);
  }
  t.type = *type;
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<GgufFile>> open_one(SourcePtr source, const FormatOptions& options) {
  auto file = std::make_unique<File>();
  Parser parser(*source, options);
  Cursor& cur = parser.cursor();
  const auto fail = [&](Error e) { return Result<std::unique_ptr<GgufFile>>(std::move(e.with_file(source->name()))); };
  const auto fail_s = [&](Status s) { return fail(std::move(s).error()); };

  std::uint64_t tensor_count = 0, kv_count = 0;
  if (Status s = parser.header(file->version_, tensor_count, kv_count); !s.is_ok()) return fail_s(std::move(s));
  std::vector<KeyValue> kv;
  if (Status s = parser.kvs(kv_count, kv); !s.is_ok()) return fail_s(std::move(s));
  file->metadata_ = Metadata(std::move(kv));
  file->alignment_ = parser.alignment();

  // The smallest tensor info takes 24 bytes (name length, n_dims, type, offset).
  if (tensor_count > cur.remaining() / 24)
    return fail(invalid(
        ErrorRule::GgufCount,
        "the tensor count " + std::to_string(tensor_count) + " cannot fit in the " + std::to_string(cur.remaining()) + " bytes that remain", 8));
  if (Status s = parser.budget().charge(tensor_count, sizeof(Tensor) + sizeof(TensorEntry) + sizeof(TensorRecord) + 64); !s.is_ok())
    return fail_s(std::move(s));
  std::vector<Tensor> tensors(static_cast<std::size_t>(tensor_count));
  file->ne_.reserve(static_cast<std::size_t>(tensor_count) * 2);
  std::vector<std::uint64_t> tensor_at(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if ((i & 4095) == 4095) {
      if (Status s = check_cancelled(); !s.is_ok()) return fail_s(std::move(s));
    }
    tensor_at[i] = cur.pos();
    if (Status s = read_tensor_info(cur, i, tensors[i], file->ne_); !s.is_ok()) return fail_s(std::move(s));
  }
  const std::uint64_t header_end = cur.pos();
  file->header_ = cur.release();
  if (!align_up(header_end, file->alignment_, file->data_offset_))
    return fail(invalid(ErrorRule::GgufTensorOffset, "the data section starts past 2^64", header_end));

  // Shapes (row-major, the reverse of ne), sizes, names, offsets.
  file->shapes_.resize(file->ne_.size());
  file->entries_.resize(tensors.size());
  file->infos_.resize(tensors.size());
  file->index_ = NameTable(tensors.size(), hash_seed());
  const auto name_of = [&file](std::size_t j) { return file->entries_[j].name; };
  std::uint64_t expected = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    std::copy(file->ne_.begin() + t.dims_at, file->ne_.begin() + t.dims_at + t.n_dims,
              std::make_reverse_iterator(file->shapes_.begin() + t.dims_at + t.n_dims));
    const std::string_view name(reinterpret_cast<const char*>(file->header_.get() + t.name_at), t.name_length);
    const auto tensor_error = [&](Error e) { return fail(std::move(e.with_tensor(name).with_offset(tensor_at[i]))); };
    const std::span<const std::uint64_t> shape(file->shapes_.data() + t.dims_at, t.n_dims);
    auto nbytes = ggml_nbytes(t.type, shape);
    if (!nbytes.is_ok()) return tensor_error(std::move(nbytes).error());
    const std::uint64_t hash = file->index_.hash(name);
    std::uint64_t& slot = file->index_.slot(name, hash, name_of);
    if (slot != 0) {
      const std::string_view raw(name.data(), t.raw_length);
      const std::string cut = raw.size() == name.size()
                                  ? std::string()
                                  : " (`" + printable(raw) + "` is `" + printable(name) + "` to ggml, which ends a name at its first NUL)";
      return tensor_error(Error(ErrorKind::InvalidGguf, "duplicate tensor name" + cut).with_rule(ErrorRule::GgufTensorName));
    }
    slot = NameTable::make(hash, static_cast<std::uint32_t>(i));
    if (t.offset != expected)
      return tensor_error(Error(ErrorKind::InvalidGguf, "the tensor's offset is " + std::to_string(t.offset) + ", expected " +
                                                            std::to_string(expected) + " (tensors lie in order, each padded to " +
                                                            std::to_string(file->alignment_) + " bytes)")
                              .with_rule(ErrorRule::GgufTensorOffset));
    std::uint64_t begin = 0, end = 0, padded = 0;
    if (__builtin_add_overflow(file->data_offset_, t.offset, &begin) || __builtin_add_overflow(begin, *nbytes, &end) || end > source->size())
      return tensor_error(Error(ErrorKind::InvalidGguf, "the tensor's " + std::to_string(*nbytes) + " bytes at data offset " +
                                                            std::to_string(t.offset) + " run past the end of the file (" +
                                                            std::to_string(source->size()) + " bytes)")
                              .with_rule(ErrorRule::GgufTensorOffset));
    if (!align_up(*nbytes, file->alignment_, padded) || __builtin_add_overflow(expected, padded, &expected))
      return tensor_error(Error(ErrorKind::ValidationOverflow, "the data section's size overflows 64 bits"));
    file->entries_[i] = TensorEntry{name, t.type, shape, source.get(), begin, *nbytes};
    file->infos_[i] = TensorRecord{t.ggml_type, std::span<const std::uint64_t>(file->ne_.data() + t.dims_at, t.n_dims), t.offset};
  }
  file->source_ = std::move(source);
  return std::unique_ptr<GgufFile>(std::move(file));
}

Result<std::unique_ptr<GgufFile>> open(SourcePtr source, const FormatOptions& options) {
  SW_ASSIGN_OR_RETURN(auto file, open_one(std::move(source), options));
  return open_split_model(std::move(file), options);
}

Result<std::unique_ptr<GgufFile>> open(const std::string& path, const FormatOptions& options) {
  const Resolver& resolver = resolver_of(options);
  SW_ASSIGN_OR_RETURN(SourcePtr source, resolver.open(path, options.backend));
  return open(std::move(source), options);
}

}  // namespace safeweights::gguf
