// transformers' index of a sharded checkpoint, on simdjson's DOM.
#include "model/hf_index.h"

#include <algorithm>

#include "core/utf8.h"
#include "json/dom.h"

namespace safeweights {

using json::as_object;
using json::as_string;
using json::element;
using json::element_type;
using json::KeySet;
using json::quoted;

namespace {

Error bad_index(std::string message) { return Error(ErrorKind::InvalidIndex, std::move(message)); }

// A member object of the index as json.dumps(indent=2, sort_keys=True) writes it, keys sorted.
template <class Value, class AppendValue>
void append_sorted_object(std::string& out, std::vector<std::pair<std::string_view, Value>> members, AppendValue append_value) {
  std::sort(members.begin(), members.end());
  out += '{';
  for (std::size_t i = 0; i < members.size(); ++i) {
    out += i ? ",\n    " : "\n    ";
    append_json_string(out, members[i].first);
    out += ": ";
    append_value(out, members[i].second);
  }
  out += "\n  }";
}

}  // namespace

Status parse_hf_index(std::string_view text, HfIndex& out) {
  if (!is_valid_utf8(text)) return bad_index("index is not valid UTF-8");
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
        std::string json_text = simdjson::minify(entry.value);
        std::string value = entry.value.type() == element_type::STRING ? std::string(as_string(entry.value)) : json_text;
        out.metadata.emplace_back(std::string(entry.key), std::move(value));
        out.metadata_json.push_back(std::move(json_text));
      }
    }
  }
  if (!have_map) return bad_index("index has no weight_map");
  return Status::ok();
}

std::string hf_index_text(std::vector<std::pair<std::string_view, std::string>> metadata,
                          std::vector<std::pair<std::string_view, std::string_view>> weight_map) {
  std::string out = "{\n  \"metadata\": ";
  append_sorted_object(out, std::move(metadata), [](std::string& to, const std::string& text) { to += text; });
  out += ",\n  \"weight_map\": ";
  append_sorted_object(out, std::move(weight_map), [](std::string& to, std::string_view file) { append_json_string(to, file); });
  return out + "\n}\n";
}

}  // namespace safeweights
