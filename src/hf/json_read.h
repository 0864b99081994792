// Reading a Hugging Face JSON file as hostile input: a size cap, strict JSON, duplicate keys refused,
// and typed field accessors whose errors name the file and the key. Numbers of any size are read, as
// Python's json reads them (transformers 5 writes "model_max_length": 1000000000000000019884624838656):
// see widen_numbers. Internal to src/hf; includes
// simdjson (json/dom.h), so only src/hf/*_json.cpp include it.
//
// Thread safety: a JsonFile has one owner. Its DOM may live in the thread's reused parser: it is valid
// until the next JSON parse on the same thread, so each reader takes what it needs before reading
// another file.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status_macros.h"
#include "core/utf8.h"
#include "io/read_util.h"
#include "json/dom.h"
#include "safeweights/folder.h"

namespace safeweights::hf {

// Rewrites, outside strings, each number the parser cannot hold so that it reads: an integer beyond
// 64 bits gets ".0" (it becomes the nearest double, as float(int) in Python); a number beyond the
// range of a double becomes a string of its own text. Every other byte is kept, so valid JSON stays
// valid and invalid JSON stays invalid (the parser's error then says why). Returns how many numbers
// were rewritten.
std::size_t widen_numbers(std::string& text);

// A parsed JSON file. The DOM points into the parser, which the object owns.
class JsonFile {
 public:
  // The file `name` of `folder`. FileNotFound when absent (callers that allow absence check first);
  // InvalidModelFolder when the file is not UTF-8 JSON holding one object; DuplicateKey when it repeats
  // a key at its top level.
  static Result<std::unique_ptr<JsonFile>> read(const Folder& folder, std::string_view name, std::uint64_t cap) {
    const std::string path = folder.path_of(name);
    SW_ASSIGN_OR_RETURN(SourcePtr source, folder.open_file(name));
    auto bytes = read_small(*source, cap);
    if (!bytes.is_ok()) return error_of(bytes).with_file(path);
    std::string text = std::move(*bytes);
    auto file = std::unique_ptr<JsonFile>(new JsonFile(path));
    if (!is_valid_utf8(text)) return file->bad("", "is not valid UTF-8");
    widen_numbers(text);
    if (auto err = json::parse_document(text, 256, file->own_, file->root_); err) {
      return file->bad("", std::string("is not valid JSON: ") + simdjson::error_message(err));
    }
    if (file->root_.type() != json::element_type::OBJECT) return file->bad("", "must hold a JSON object");
    SW_RETURN_IF_ERROR(file->check_unique(file->root_, ""));
    return file;
  }

  json::element root() const { return root_; }
  const std::string& path() const { return path_; }

  // InvalidModelFolder naming the file and the key ("config.json: key `hidden_size` must be ..."): the
  // folder's content is wrong, not the caller's request (the CLI exits 1, not 2).
  Error bad(std::string_view key, std::string_view what) const {
    std::string message = key.empty() ? std::string(what) : "key " + json::quoted(key) + " " + std::string(what);
    return Error(ErrorKind::InvalidModelFolder, message).with_file(path_);
  }

  // Repeated keys in an object: ambiguous (Python's json keeps the last one), so refused.
  Status check_unique(json::element object, std::string_view where) const {
    json::KeySet keys;
    for (auto field : json::as_object(object)) {
      if (!keys.insert(field.key)) {
        return Error(ErrorKind::DuplicateKey,
                     "key " + json::quoted(field.key) + " repeated" + (where.empty() ? std::string() : " in " + std::string(where)))
            .with_file(path_);
      }
    }
    return Status::ok();
  }

  // The member `key` of `object`, if present and not null.
  static std::optional<json::element> member(json::element object, std::string_view key) {
    json::element e;
    if (object.at_key(key).get(e) != simdjson::SUCCESS || e.is_null()) return std::nullopt;
    return e;
  }

  // An integer in [lo, hi]; nullopt when absent.
  Result<std::optional<std::int64_t>> integer(json::element object, std::string_view key, std::int64_t lo, std::int64_t hi) const {
    auto e = member(object, key);
    if (!e) return std::optional<std::int64_t>();
    std::int64_t v = 0;
    if (e->type() == json::element_type::INT64) {
      v = e->get_int64().value_unsafe();
    } else if (e->type() == json::element_type::UINT64) {
      return bad(key, "is out of range");
    } else {
      return bad(key, "must be an integer");
    }
    if (v < lo || v > hi) {
      return bad(key, "is " + std::to_string(v) + ", outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return std::optional<std::int64_t>(v);
  }

  // A positive integer that fits llama.cpp's uint32 keys (at most `hi`); nullopt when absent.
  Result<std::optional<std::uint32_t>> count(json::element object, std::string_view key,
                                             std::int64_t hi = std::numeric_limits<std::uint32_t>::max()) const {
    SW_ASSIGN_OR_RETURN(auto v, integer(object, key, 1, hi));
    if (!v) return std::optional<std::uint32_t>();
    return std::optional<std::uint32_t>(static_cast<std::uint32_t>(*v));
  }

  Result<std::uint32_t> required_count(json::element object, std::string_view key,
                                       std::int64_t hi = std::numeric_limits<std::uint32_t>::max()) const {
    SW_ASSIGN_OR_RETURN(auto v, count(object, key, hi));
    if (!v) return bad(key, "is missing");
    return *v;
  }

  // A finite positive number; nullopt when absent.
  Result<std::optional<double>> positive(json::element object, std::string_view key) const {
    auto e = member(object, key);
    if (!e) return std::optional<double>();
    double v = 0;
    if (e->get_double().get(v) != simdjson::SUCCESS) return bad(key, "must be a number");
    if (!std::isfinite(v) || v <= 0) return bad(key, "must be a finite positive number");
    return std::optional<double>(v);
  }

  Result<std::optional<bool>> boolean(json::element object, std::string_view key) const {
    auto e = member(object, key);
    if (!e) return std::optional<bool>();
    if (e->type() != json::element_type::BOOL) return bad(key, "must be true or false");
    return std::optional<bool>(e->get_bool().value_unsafe());
  }

  Result<std::optional<std::string>> string(json::element object, std::string_view key) const {
    auto e = member(object, key);
    if (!e) return std::optional<std::string>();
    if (e->type() != json::element_type::STRING) return bad(key, "must be a string");
    return std::optional<std::string>(std::string(json::as_string(*e)));
  }

 private:
  explicit JsonFile(std::string path) : path_(std::move(path)) {}

  std::string path_;
  std::unique_ptr<simdjson::dom::parser> own_;
  json::element root_;
};

}  // namespace safeweights::hf
