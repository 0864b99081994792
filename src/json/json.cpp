// Parsing and validating JSON on simdjson, shared by every format's schema reader.
#include "json/dom.h"

namespace safeweights::json {
namespace {

// simdjson needs SIMDJSON_PADDING readable bytes after the input, so a document without padding is
// copied into a padded buffer once. Parsers are reused per thread for small documents (their buffers grow once); big ones get a
// parser of their own, freed with the document, since a parser reserves about 14 bytes per byte of its
// capacity (tape 8, structural indexes 4, strings 5/3): a reused one kept up to 14 MiB per thread, not
// the 224 MiB a 16 MiB limit let it keep (and the DOM of a large tokenizer.json alive beside the
// metadata built from it).
constexpr std::size_t kReusableParserLimit = 1u << 20;

static_assert(kJsonPadding >= simdjson::SIMDJSON_PADDING);

// One step of the path from the root to an element: an object's key or an array's index.
struct Step {
  std::string_view key;
  std::size_t index = 0;
  bool in_array = false;
};

std::string path_text(const std::vector<Step>& path) {
  std::string out;
  for (const Step& s : path) {
    if (s.in_array) {
      out += '[';
      out += std::to_string(s.index);
      out += ']';
    } else {
      if (!out.empty()) out += '.';
      out.append(s.key);
    }
  }
  return out;
}

// Depth first: true (with `out` set) at the first repeat. `path` leads to `e`.
bool find_repeat(element e, std::vector<Step>& path, RepeatedKey& out) {
  if (e.type() == element_type::OBJECT) {
    KeySet keys;
    for (auto field : as_object(e)) {
      if (!keys.insert(field.key)) {
        out = {std::string(field.key), path_text(path)};
        return true;
      }
      path.push_back({field.key, 0, false});
      if (find_repeat(field.value, path, out)) return true;
      path.pop_back();
    }
  } else if (e.type() == element_type::ARRAY) {
    std::size_t index = 0;
    for (auto item : as_array(e)) {
      // Scalars hold no keys: a long array of strings (merges) costs no path step per item.
      if (item.type() == element_type::OBJECT || item.type() == element_type::ARRAY) {
        path.push_back({{}, index, true});
        if (find_repeat(item, path, out)) return true;
        path.pop_back();
      }
      ++index;
    }
  }
  return false;
}

}  // namespace

std::optional<RepeatedKey> find_repeated_key(element root) {
  std::vector<Step> path;
  RepeatedKey out;
  if (find_repeat(root, path, out)) return out;
  return std::nullopt;
}

std::string quoted(std::string_view s) {
  std::string out = "`";
  out.append(s.substr(0, 200));
  if (s.size() > 200) out += "...";
  out += "`";
  return out;
}

// `text` must have kJsonPadding readable bytes after it.
simdjson::error_code parse_padded(std::string_view text, int max_depth, std::unique_ptr<simdjson::dom::parser>& own, element& root) {
  thread_local simdjson::dom::parser shared;
  simdjson::dom::parser* parser = &shared;
  if (text.size() > kReusableParserLimit) {
    own = std::make_unique<simdjson::dom::parser>();
    parser = own.get();
  }
  if (parser->capacity() < text.size() || parser->max_depth() != static_cast<std::size_t>(max_depth)) {
    auto err = parser->allocate(std::max<std::size_t>(text.size(), 4096), static_cast<std::size_t>(max_depth));
    if (err) return err;
  }
  return parser->parse(text.data(), text.size(), false).get(root);
}

simdjson::error_code parse_document(std::string_view text, int max_depth, std::unique_ptr<simdjson::dom::parser>& own, element& root) {
  simdjson::padded_string copy(text.data(), text.size());
  return parse_padded(std::string_view(copy.data(), copy.size()), max_depth, own, root);
}

Status validate_json(std::string_view text, int max_depth) {
  if (!simdjson::validate_utf8(text.data(), text.size())) return Error(ErrorKind::InvalidArgument, "not valid UTF-8");
  std::unique_ptr<simdjson::dom::parser> own;
  element root;
  if (auto err = parse_document(text, max_depth, own, root); err) {
    return Error(ErrorKind::InvalidArgument, std::string("invalid JSON: ") + simdjson::error_message(err));
  }
  return Status::ok();
}

Status read_top_level(std::string_view text, TopLevel& out) {
  if (!simdjson::validate_utf8(text.data(), text.size())) return Error(ErrorKind::InvalidArgument, "not valid UTF-8");
  std::unique_ptr<simdjson::dom::parser> own;
  element root;
  if (auto err = parse_document(text, 1024, own, root); err) {
    return Error(ErrorKind::InvalidArgument, std::string("invalid JSON: ") + simdjson::error_message(err));
  }
  switch (root.type()) {
    case element_type::OBJECT: out.python_type = "dict"; break;
    case element_type::ARRAY: out.python_type = "list"; break;
    case element_type::STRING: out.python_type = "str"; break;
    case element_type::INT64:
    case element_type::UINT64: out.python_type = "int"; break;
    case element_type::DOUBLE: out.python_type = "float"; break;
    case element_type::BOOL: out.python_type = "bool"; break;
    case element_type::NULL_VALUE: out.python_type = "NoneType"; break;
  }
  if (root.type() == element_type::OBJECT) {
    KeySet seen;
    for (auto field : as_object(root)) {
      if (!seen.insert(field.key) && !out.duplicate_key) out.duplicate_key = std::string(field.key);
      out.keys.emplace_back(field.key);
    }
  }
  return Status::ok();
}

}  // namespace safeweights::json
