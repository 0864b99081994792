// The safetensors JSON schemas: the header, read in one pass by json::Pull (no tree is built; every
// entry goes straight into the Header's arrays). What serde_json rejects in the reference, these reject with the same kind; rules
// stricter than the reference are recorded in strict_violation and reported after every reference rule.
#include <algorithm>
#include <cstring>

#include "core/hash.h"
#include "core/utf8.h"
#include "json/dom.h"
#include "json/pull.h"
#include "safeweights/safetensors.h"
#include "safetensors/json_schema.h"

namespace safeweights::safetensors {
namespace {

using json::as_array;
using json::as_object;
using json::as_string;
using json::element;
using json::element_type;
using json::KeySet;
using json::quoted;

Error bad_json(std::string message) { return Error(ErrorKind::InvalidHeaderDeserialization, std::move(message)); }

// One pass over the header text (json::Pull): every tensor entry goes straight into RawHeader, nothing
// else is built. The DOM parser this replaced saw a syntax error anywhere before any schema rule, so
// schema errors here never stop the pass: the first one is kept, the rest of the text is still read
// (and checked), and the syntax error wins if one follows. Every reader method consumes its whole
// value and returns false only on a syntax error.
class HeaderReader {
 public:
  HeaderReader(json::Pull& in, const HeaderJsonOptions& options, RawHeader& out) : in_(in), options_(options), out_(out) {}

  // `first_stage()` gives the error simdjson would have found before this pass's, if any.
  template <typename FirstStage>
  Status document(FirstStage&& first_stage) {
    auto syntax = [&](simdjson::error_code e) {
      const simdjson::error_code earlier = first_stage();
      return syntax_error(earlier != simdjson::SUCCESS ? earlier : e);
    };
    if (in_.empty_document()) return syntax(simdjson::EMPTY);
    bool root_is_object = in_.peek() == '{';
    if (!(root_is_object ? top_level() : skip()) || !in_.at_end()) return syntax(in_.error());
    if (!root_is_object) return bad_json("header must be a JSON object");
    if (in_.saw_negative_zero()) return bad_json("invalid JSON in header: -0 is not an unsigned integer");
    if (schema_error_) return std::move(*schema_error_);
    return Status::ok();
  }

 private:
  static Status syntax_error(simdjson::error_code e) { return bad_json(std::string("invalid JSON in header: ") + simdjson::error_message(e)); }
  void schema(Error e) {
    if (!schema_error_) schema_error_ = std::move(e);
  }
  void strict(Error e) {
    if (!out_.strict_violation) out_.strict_violation = std::move(e);
  }
  std::uint32_t offset_of(std::string_view s) const { return static_cast<std::uint32_t>(s.data() - in_.text()); }

  bool skip() {
    return in_.skip([] { return [](std::string_view) {}; });
  }
  // An unknown field's value: the reference ignores it; we look for duplicate keys in it.
  bool skip_checking_keys(std::string_view tensor) {
    return in_.skip([&] {
      return [&, keys = json::KeySet()](std::string_view key) mutable {
        if (!keys.insert(key)) strict(Error(ErrorKind::DuplicateKey, "duplicate key " + quoted(key) + " in an unknown field").with_tensor(tensor));
      };
    });
  }

  bool top_level() {
    if (!in_.begin_object()) return false;
    bool seen_metadata = false;
    for (bool more = true;;) {
      std::string_view key;
      if (!in_.next_member(more, key)) return false;
      if (!more) return true;
      if (key == "__metadata__") {
        if (seen_metadata) {
          schema(bad_json("duplicate field `__metadata__`"));
          if (!skip()) return false;
          continue;
        }
        seen_metadata = true;
        if (!metadata()) return false;
      } else if (!tensor(key)) {
        return false;
      }
    }
  }

  bool u64(std::string_view what, std::string_view tensor, std::uint64_t& result) {
    const char c = in_.peek();
    if (c != '-' && (c < '0' || c > '9')) {
      schema(bad_json(std::string(what) + " must hold non-negative integers").with_tensor(tensor));
      return skip();
    }
    json::Pull::Number n;
    if (!in_.number(n)) return false;
    if (n.kind != json::Pull::Number::kUnsigned) {
      schema(bad_json(std::string(what) + " must hold non-negative integers").with_tensor(tensor));
    }
    result = n.value;
    return true;
  }

  bool dtype(std::string_view tensor, TensorType& out) {
    std::string_view code;
    const char c = in_.peek();
    if (c == '"') {
      if (!in_.string(code)) return false;
    } else if (c == '{') {
      // serde also accepts an enum in externally-tagged form: {"F32": null}. Accept, then flag it.
      if (!in_.begin_object()) return false;
      std::size_t fields = 0;
      bool null_value = true;
      for (bool more = true;;) {
        std::string_view key;
        if (!in_.next_member(more, key)) return false;
        if (!more) break;
        if (++fields == 1) code = key;
        if (in_.peek() == 'n') {
          if (!in_.null()) return false;
        } else {
          null_value = fields != 1 && null_value;
          if (!skip()) return false;
        }
      }
      if (fields != 1) {
        schema(bad_json("dtype object must have exactly one key").with_tensor(tensor));
        return true;
      }
      if (!null_value) {
        schema(bad_json("dtype object value must be null").with_tensor(tensor));
        return true;
      }
      strict(Error(ErrorKind::NonCanonicalEntry, "dtype written as an object; expected a string").with_tensor(tensor));
    } else {
      schema(bad_json("dtype must be a string").with_tensor(tensor));
      return skip();
    }
    auto parsed = safetensors::type_from_code(code);
    if (!parsed) {
      schema(bad_json("unknown dtype " + quoted(code)).with_tensor(tensor));
    } else {
      out = *parsed;
    }
    return true;
  }

  // dims moved from `old_base` to its current buffer: point every shape read so far at the new one.
  // Addresses are compared as integers, never dereferenced, since the old buffer is gone.
  void rebase_shapes(std::uintptr_t old_base) {
    for (TensorInfo& t : out_.entries) {
      const std::size_t offset = (reinterpret_cast<std::uintptr_t>(t.shape.data()) - old_base) / sizeof(std::uint64_t);
      t.shape = std::span<const std::uint64_t>(out_.dims.data() + offset, t.shape.size());
    }
  }

  void push_dim(std::uint64_t d) {
    const auto base = reinterpret_cast<std::uintptr_t>(out_.dims.data());
    out_.dims.push_back(d);
    if (reinterpret_cast<std::uintptr_t>(out_.dims.data()) != base) rebase_shapes(base);
  }

  bool shape(std::string_view tensor, TensorInfo& entry) {
    if (in_.peek() != '[') {
      schema(bad_json("shape must be an array").with_tensor(tensor));
      return skip();
    }
    if (!in_.begin_array()) return false;
    const std::size_t first = out_.dims.size();
    for (bool more = true;;) {
      if (!in_.next_element(more)) return false;
      if (!more) break;
      std::uint64_t d = 0;
      if (!u64("shape", tensor, d)) return false;
      push_dim(d);
    }
    entry.shape = std::span<const std::uint64_t>(out_.dims.data() + first, out_.dims.size() - first);
    return true;
  }

  bool offsets(std::string_view tensor, TensorInfo& entry) {
    if (in_.peek() != '[') {
      schema(bad_json("data_offsets must be an array").with_tensor(tensor));
      return skip();
    }
    if (!in_.begin_array()) return false;
    std::size_t count = 0;
    const bool had_error = schema_error_.has_value();
    for (bool more = true;;) {
      if (!in_.next_element(more)) return false;
      if (!more) break;
      std::uint64_t v = 0;
      // The length is checked before the elements (the DOM reader knew it first): an element's error
      // counts only in an array of the right length, so keep it aside until then.
      if (!u64("data_offsets", tensor, v)) return false;
      if (count < 2) (count == 0 ? entry.begin : entry.end) = v;
      ++count;
    }
    if (count != 2 && !had_error) {
      schema_error_.reset();
      schema(bad_json("data_offsets must have exactly 2 elements").with_tensor(tensor));
    }
    return true;
  }

  // One member of a tensor entry's object form.
  struct Seen {
    bool dtype = false, shape = false, offsets = false;
  };
  bool tensor_field(std::string_view name, std::string_view key, Seen& seen, json::KeySet& unknown, TensorInfo& entry) {
    auto once = [&](bool& flag, const char* field) {
      if (flag) schema(bad_json(std::string("duplicate field `") + field + "`").with_tensor(name));
      flag = true;
    };
    if (key == "dtype") {
      once(seen.dtype, "dtype");
      return dtype(name, entry.dtype);
    }
    if (key == "shape") {
      once(seen.shape, "shape");
      return shape(name, entry);
    }
    if (key == "data_offsets") {
      once(seen.offsets, "data_offsets");
      return offsets(name, entry);
    }
    if (!unknown.insert(key)) strict(Error(ErrorKind::DuplicateKey, "duplicate key " + quoted(key)).with_tensor(name));
    if (options_.reject_unknown_fields) strict(Error(ErrorKind::UnknownField, "unknown field " + quoted(key)).with_tensor(name));
    return skip_checking_keys(name);
  }

  // The entry as the reference writer spells it, {"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},
  // read with exact matches (most headers are all entries of this form). Anything else leaves the
  // reader where it was and returns false: the general path then reads the entry, with the same result.
  bool canonical_tensor(std::string_view name) {
    if (!in_.depth_allows(2)) return false;
    const json::Pull::Mark mark = in_.mark();
    const std::size_t first_dim = out_.dims.size();
    auto mismatch = [&] {
      in_.rewind(mark);
      out_.dims.resize(first_dim);
      return false;
    };
    TensorInfo entry{};
    entry.name = name;
    std::string_view code;
    if (!in_.exact("{\"dtype\":\"") || !in_.word_until_quote(16, code)) return mismatch();
    const auto type = safetensors::type_from_code(code);
    if (!type || !in_.exact(",\"shape\":[")) return mismatch();
    entry.dtype = *type;
    if (!in_.exact("]")) {
      for (;;) {
        std::uint64_t d = 0;
        if (!in_.plain_u64(',', ']', d)) return mismatch();
        push_dim(d);
        if (in_.exact("]")) break;
        in_.exact(",");
      }
    }
    entry.shape = std::span<const std::uint64_t>(out_.dims.data() + first_dim, out_.dims.size() - first_dim);
    if (!in_.exact(",\"data_offsets\":[") || !in_.plain_u64(',', ',', entry.begin) || !in_.exact(",") || !in_.plain_u64(']', ']', entry.end) ||
        !in_.exact("]}")) {
      return mismatch();
    }
    out_.entries.push_back(entry);
    return true;
  }

  bool tensor(std::string_view name) {
    const char c = in_.peek();
    if (c == '{' && canonical_tensor(name)) return true;
    TensorInfo entry{};
    entry.name = name;
    if (c == '{') {
      if (!in_.begin_object()) return false;
      Seen seen;
      json::KeySet unknown;
      for (bool more = true;;) {
        std::string_view key;
        if (!in_.next_member(more, key)) return false;
        if (!more) break;
        if (!tensor_field(name, key, seen, unknown, entry)) return false;
      }
      if (!seen.dtype) schema(bad_json("missing field `dtype`").with_tensor(name));
      if (!seen.shape) schema(bad_json("missing field `shape`").with_tensor(name));
      if (!seen.offsets) schema(bad_json("missing field `data_offsets`").with_tensor(name));
    } else if (c == '[') {
      // serde's derived struct visitor accepts [dtype, shape, data_offsets]. Accept, then flag it.
      if (!in_.begin_array()) return false;
      const bool had_error = schema_error_.has_value();
      std::size_t count = 0;
      for (bool more = true;;) {
        if (!in_.next_element(more)) return false;
        if (!more) break;
        const bool ok = count == 0 ? dtype(name, entry.dtype) : count == 1 ? shape(name, entry) : count == 2 ? offsets(name, entry) : skip();
        if (!ok) return false;
        ++count;
      }
      if (count != 3) {
        if (!had_error) schema_error_.reset();
        schema(bad_json("tensor entry must be an object").with_tensor(name));
      } else {
        strict(Error(ErrorKind::NonCanonicalEntry, "tensor entry written as an array; expected an object").with_tensor(name));
      }
    } else {
      schema(bad_json("tensor entry must be an object").with_tensor(name));
      return skip();
    }
    out_.entries.push_back(entry);
    return true;
  }

  bool metadata() {
    const char c = in_.peek();
    if (c == 'n') return in_.null();  // Option::None, as serde reads it
    if (c != '{') {
      schema(bad_json("__metadata__ must be an object of strings"));
      return skip();
    }
    if (!in_.begin_object()) return false;
    out_.has_metadata = true;
    // A few entries first (most headers hold a handful: no fresh pages for them), then, from the first
    // one more, room for an entry per 12 bytes of what is left (an entry takes 6 at the very least,
    // `"":"",`, and millions of distinct keys take about 12 each), so even 8M entries rarely regrow.
    const std::size_t bound = in_.remaining() / 12 + 16;
    out_.metadata.reserve(std::min<std::size_t>(bound, 64));
    const std::size_t first = out_.metadata.size();
    for (bool more = true;;) {
      std::string_view key;
      if (!in_.next_member(more, key)) return false;
      if (!more) break;
      if (in_.peek() != '"') {
        schema(bad_json("__metadata__ value of " + quoted(key) + " must be a string"));
        if (!skip()) return false;
        continue;
      }
      std::string_view value;
      if (!in_.string(value)) return false;
      if (out_.metadata.size() == out_.metadata.capacity()) out_.metadata.reserve(std::max(bound, out_.metadata.size() * 2));
      out_.metadata.push_back({offset_of(key), static_cast<std::uint32_t>(key.size()), offset_of(value), static_cast<std::uint32_t>(value.size())});
    }
    note_duplicate_metadata_key(first);
    return true;
  }

  // Repeated keys among the metadata entries from `first` on, with a table of entry numbers sized once
  // (the count is known now) to be two thirds full: 6 bytes per key. Not a power of two (that could
  // double it): a slot is picked by multiplying the hash by the size.
  void note_duplicate_metadata_key(std::size_t first) {
    const std::size_t count = out_.metadata.size() - first;
    if (count < 2 || out_.strict_violation) return;
    const std::size_t cap = count + count / 2;
    std::vector<std::uint32_t> slots(cap, 0);
    const std::uint64_t seed = hash_seed();
    auto key_of = [&](std::size_t i) {
      const auto& e = out_.metadata[first + i];
      return std::string_view(in_.text() + e.key_offset, e.key_size);
    };
    for (std::size_t k = 0; k < count; ++k) {
      const std::string_view key = key_of(k);
      const auto hash = hash_key(key, seed);
      for (auto i = static_cast<std::size_t>((static_cast<__uint128_t>(hash) * cap) >> 64);; i = i + 1 == cap ? 0 : i + 1) {
        if (slots[i] == 0) {
          slots[i] = static_cast<std::uint32_t>(k + 1);
          break;
        }
        if (key_of(slots[i] - 1) == key) {
          strict(Error(ErrorKind::DuplicateKey, "duplicate __metadata__ key " + quoted(key)));
          return;
        }
      }
    }
  }

  json::Pull& in_;
  const HeaderJsonOptions& options_;
  RawHeader& out_;
  std::optional<Error> schema_error_;
};

}  // namespace

Status parse_safetensors_header_padded(char* text, std::size_t n, const HeaderJsonOptions& options, const ByteSource& original, RawHeader& out) {
  if (!is_valid_utf8(std::string_view(text, n))) return Error(ErrorKind::InvalidHeader, "invalid UTF-8 in header");
  try {
    out.entries.reserve(RawHeader::entries_bound(n));
    out.dims.reserve(RawHeader::dims_bound(n));
    json::Pull in(text, n, options.max_depth);
    auto first_stage = [&] {
      json::QuoteScan scan;
      char piece[64 * 1024];
      for (std::size_t at = 0; at < n; at += sizeof piece) {
        const std::size_t len = std::min(sizeof piece, n - at);
        if (!original.read_at(8 + at, std::as_writable_bytes(std::span<char>(piece, len))).is_ok()) return simdjson::SUCCESS;
        scan.feed(piece, len);
      }
      return scan.finish();
    };
    return HeaderReader(in, options, out).document(first_stage);
  } catch (const std::bad_alloc&) {
    return Error(ErrorKind::ResourceLimit, "out of memory reading a header of " + std::to_string(n) + " bytes");
  }
}

}  // namespace safeweights::safetensors
