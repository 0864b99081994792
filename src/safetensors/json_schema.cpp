// The safetensors header schema on simdjson's DOM parser (full RFC 8259 validation, runtime-dispatched
// SIMD kernels). What serde_json rejects in the reference, this rejects with the same kind; rules
// stricter than the reference are recorded in strict_violation and reported later.
#include <cstring>

#include "json/dom.h"
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

void note_strict(RawHeader& out, Error error) {
  if (!out.strict_violation) out.strict_violation = std::move(error);
}

// Walks a value the reference ignores (an unknown field), only to find duplicate keys in it.
// simdjson has already bounded the nesting depth.
void check_nested_duplicates(element value, std::string_view tensor, RawHeader& out) {
  if (out.strict_violation) return;
  if (value.type() == element_type::OBJECT) {
    KeySet keys;
    for (auto field : as_object(value)) {
      if (!keys.insert(field.key)) {
        note_strict(out, Error(ErrorKind::DuplicateKey, "duplicate key " + quoted(field.key) + " in an unknown field")
                             .with_tensor(tensor));
        return;
      }
      check_nested_duplicates(field.value, tensor, out);
    }
  } else if (value.type() == element_type::ARRAY) {
    for (auto item : as_array(value)) check_nested_duplicates(item, tensor, out);
  }
}

Status read_u64(element value, std::string_view what, std::string_view tensor, std::uint64_t& result) {
  if (value.type() != element_type::INT64 && value.type() != element_type::UINT64) {
    return bad_json(std::string(what) + " must hold non-negative integers").with_tensor(tensor);
  }
  if (value.get_uint64().get(result) != simdjson::SUCCESS) {
    return bad_json(std::string(what) + " must hold non-negative integers").with_tensor(tensor);
  }
  return Status::ok();
}

Status read_dtype(element value, std::string_view tensor, RawHeader& out, TensorType& dtype) {
  std::string_view code;
  if (value.type() == element_type::STRING) {
    code = as_string(value);
  } else if (value.type() == element_type::OBJECT) {
    // serde also accepts an enum in externally-tagged form: {"F32": null}. Accept, then flag it.
    auto obj = as_object(value);
    if (obj.size() != 1) return bad_json("dtype object must have exactly one key").with_tensor(tensor);
    auto field = *obj.begin();
    if (!field.value.is_null()) return bad_json("dtype object value must be null").with_tensor(tensor);
    code = field.key;
    note_strict(out, Error(ErrorKind::NonCanonicalEntry, "dtype written as an object; expected a string")
                         .with_tensor(tensor));
  } else {
    return bad_json("dtype must be a string").with_tensor(tensor);
  }
  auto parsed = safetensors::type_from_code(code);
  if (!parsed) return bad_json("unknown dtype " + quoted(code)).with_tensor(tensor);
  dtype = *parsed;
  return Status::ok();
}

// dims moved from `old_base` to its current buffer: point every shape read so far at the new one.
// Addresses are compared as integers, never dereferenced, since the old buffer is gone.
void rebase_shapes(RawHeader& out, std::uintptr_t old_base) {
  for (TensorInfo& t : out.entries) {
    const std::size_t offset = (reinterpret_cast<std::uintptr_t>(t.shape.data()) - old_base) / sizeof(std::uint64_t);
    t.shape = std::span<const std::uint64_t>(out.dims.data() + offset, t.shape.size());
  }
}

Status read_shape(element value, std::string_view tensor, RawHeader& out, TensorInfo& entry) {
  if (value.type() != element_type::ARRAY) return bad_json("shape must be an array").with_tensor(tensor);
  const std::size_t first = out.dims.size();
  for (auto dim : as_array(value)) {
    std::uint64_t d = 0;
    SW_RETURN_IF_ERROR(read_u64(dim, "shape", tensor, d));
    const auto base = reinterpret_cast<std::uintptr_t>(out.dims.data());
    out.dims.push_back(d);
    if (reinterpret_cast<std::uintptr_t>(out.dims.data()) != base) rebase_shapes(out, base);
  }
  entry.shape = std::span<const std::uint64_t>(out.dims.data() + first, out.dims.size() - first);
  return Status::ok();
}

Status read_offsets(element value, std::string_view tensor, TensorInfo& entry) {
  if (value.type() != element_type::ARRAY) return bad_json("data_offsets must be an array").with_tensor(tensor);
  auto arr = as_array(value);
  if (arr.size() != 2) return bad_json("data_offsets must have exactly 2 elements").with_tensor(tensor);
  auto it = arr.begin();
  SW_RETURN_IF_ERROR(read_u64(*it, "data_offsets", tensor, entry.begin));
  ++it;
  SW_RETURN_IF_ERROR(read_u64(*it, "data_offsets", tensor, entry.end));
  return Status::ok();
}

Status read_tensor(std::string_view name, element value, const HeaderJsonOptions& options, RawHeader& out) {
  TensorInfo entry{};
  if (value.type() == element_type::OBJECT) {
    bool have_dtype = false, have_shape = false, have_offsets = false;
    KeySet unknown;
    for (auto field : as_object(value)) {
      if (field.key == "dtype") {
        if (have_dtype) return bad_json("duplicate field `dtype`").with_tensor(name);
        have_dtype = true;
        SW_RETURN_IF_ERROR(read_dtype(field.value, name, out, entry.dtype));
      } else if (field.key == "shape") {
        if (have_shape) return bad_json("duplicate field `shape`").with_tensor(name);
        have_shape = true;
        SW_RETURN_IF_ERROR(read_shape(field.value, name, out, entry));
      } else if (field.key == "data_offsets") {
        if (have_offsets) return bad_json("duplicate field `data_offsets`").with_tensor(name);
        have_offsets = true;
        SW_RETURN_IF_ERROR(read_offsets(field.value, name, entry));
      } else {
        if (!unknown.insert(field.key)) {
          note_strict(out, Error(ErrorKind::DuplicateKey, "duplicate key " + quoted(field.key)).with_tensor(name));
        }
        if (options.reject_unknown_fields) {
          note_strict(out, Error(ErrorKind::UnknownField, "unknown field " + quoted(field.key)).with_tensor(name));
        }
        check_nested_duplicates(field.value, name, out);
      }
    }
    if (!have_dtype) return bad_json("missing field `dtype`").with_tensor(name);
    if (!have_shape) return bad_json("missing field `shape`").with_tensor(name);
    if (!have_offsets) return bad_json("missing field `data_offsets`").with_tensor(name);
  } else if (value.type() == element_type::ARRAY) {
    // serde's derived struct visitor accepts [dtype, shape, data_offsets]. Accept, then flag it.
    auto arr = as_array(value);
    if (arr.size() != 3) return bad_json("tensor entry must be an object").with_tensor(name);
    auto it = arr.begin();
    SW_RETURN_IF_ERROR(read_dtype(*it, name, out, entry.dtype));
    ++it;
    SW_RETURN_IF_ERROR(read_shape(*it, name, out, entry));
    ++it;
    SW_RETURN_IF_ERROR(read_offsets(*it, name, entry));
    note_strict(out, Error(ErrorKind::NonCanonicalEntry, "tensor entry written as an array; expected an object")
                         .with_tensor(name));
  } else {
    return bad_json("tensor entry must be an object").with_tensor(name);
  }
  // Never true (the names were reserved to the header's length, see RawHeader), but a name must not
  // dangle if that ever changes.
  if (out.names.size() + name.size() > out.names.capacity()) return Error(ErrorKind::ResourceLimit, "name store full");
  const char* stored = out.names.data() + out.names.size();
  out.names.insert(out.names.end(), name.begin(), name.end());
  entry.name = std::string_view(stored, name.size());
  out.entries.push_back(entry);
  return Status::ok();
}

Status read_metadata(element value, RawHeader& out) {
  if (value.is_null()) return Status::ok();  // Option::None, as serde reads it
  if (value.type() != element_type::OBJECT) return bad_json("__metadata__ must be an object of strings");
  out.has_metadata = true;
  const auto object = as_object(value);
  KeySet keys;
  keys.reserve(object.size());
  out.metadata.reserve(out.metadata.size() + object.size());
  for (auto field : object) {
    if (field.value.type() != element_type::STRING) {
      return bad_json("__metadata__ value of " + quoted(field.key) + " must be a string");
    }
    if (!keys.insert(field.key)) {
      note_strict(out, Error(ErrorKind::DuplicateKey, "duplicate __metadata__ key " + quoted(field.key)));
    }
    out.metadata.emplace_back(std::string(field.key), std::string(as_string(field.value)));
  }
  return Status::ok();
}

// serde_json reads "-0" as a float, which an unsigned field rejects; simdjson reads it as the integer
// 0. Find any "-0" number token outside strings. (We reject it anywhere, which is stricter than the
// reference only for "-0" nested inside an unknown field.)
bool has_negative_zero_token(std::string_view text) {
  if (text.find("-0") == std::string_view::npos) return false;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '-' && i + 1 < text.size() && text[i + 1] == '0') {
      char next = i + 2 < text.size() ? text[i + 2] : ' ';
      if (next != '.' && next != 'e' && next != 'E') return true;
    }
  }
  return false;
}

}  // namespace

Status parse_safetensors_header_padded(std::string_view header, const HeaderJsonOptions& options, RawHeader& out) {
  if (!simdjson::validate_utf8(header.data(), header.size())) {
    return Error(ErrorKind::InvalidHeader, "invalid UTF-8 in header");
  }
  std::unique_ptr<simdjson::dom::parser> own;
  element root;
  if (auto err = json::parse_padded(header, options.max_depth, own, root); err) {
    return bad_json(std::string("invalid JSON in header: ") + simdjson::error_message(err));
  }
  if (root.type() != element_type::OBJECT) return bad_json("header must be a JSON object");
  if (has_negative_zero_token(header)) return bad_json("invalid JSON in header: -0 is not an unsigned integer");

  auto object = as_object(root);
  // Names cannot be longer than the header; reserving that much avoids regrowth, and pages that are
  // never written are never faulted in.
  out.entries.reserve(object.size());
  out.names.reserve(header.size());
  out.dims.reserve(object.size() * 3);
  bool seen_metadata = false;
  for (auto field : object) {
    if (field.key == "__metadata__") {
      if (seen_metadata) return bad_json("duplicate field `__metadata__`");
      seen_metadata = true;
      SW_RETURN_IF_ERROR(read_metadata(field.value, out));
    } else {
      SW_RETURN_IF_ERROR(read_tensor(field.key, field.value, options, out));
    }
  }
  return Status::ok();
}

namespace {

Error bad_index(std::string message) { return Error(ErrorKind::InvalidIndex, std::move(message)); }

}  // namespace

Status parse_index_json(std::string_view text, RawIndex& out) {
  if (!simdjson::validate_utf8(text.data(), text.size())) return bad_index("index is not valid UTF-8");
  std::unique_ptr<simdjson::dom::parser> own;
  element root;
  if (auto err = json::parse_document(text, 128, own, root); err) {
    return bad_index(std::string("invalid JSON: ") + simdjson::error_message(err));
  }
  if (root.type() != element_type::OBJECT) return bad_index("index must be a JSON object");
  KeySet top;
  bool have_map = false;
  for (auto field : as_object(root)) {
    if (!top.insert(field.key)) return Error(ErrorKind::DuplicateKey, "duplicate key " + quoted(field.key) + " in index");
    if (field.key == "weight_map") {
      have_map = true;
      if (field.value.type() != element_type::OBJECT) return bad_index("weight_map must be an object");
      const auto map = as_object(field.value);
      KeySet names;
      names.reserve(map.size());
      out.weight_map.reserve(map.size());
      for (auto entry : map) {
        if (!names.insert(entry.key)) {
          return Error(ErrorKind::DuplicateKey, "tensor " + quoted(entry.key) + " listed twice in weight_map");
        }
        if (entry.value.type() != element_type::STRING) {
          return bad_index("weight_map value for " + quoted(entry.key) + " must be a file name");
        }
        out.weight_map.emplace_back(std::string(entry.key), std::string(as_string(entry.value)));
      }
    } else if (field.key == "metadata") {
      if (field.value.is_null()) continue;
      if (field.value.type() != element_type::OBJECT) return bad_index("metadata must be an object");
      KeySet keys;
      for (auto entry : as_object(field.value)) {
        if (!keys.insert(entry.key)) return Error(ErrorKind::DuplicateKey, "duplicate metadata key " + quoted(entry.key));
        std::string value = entry.value.type() == element_type::STRING
                                ? std::string(as_string(entry.value))
                                : simdjson::minify(entry.value);
        out.metadata.emplace_back(std::string(entry.key), std::move(value));
      }
    }
  }
  if (!have_map) return bad_index("index has no weight_map");
  return Status::ok();
}

}  // namespace safeweights::safetensors
