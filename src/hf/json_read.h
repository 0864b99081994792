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
#include <cstdio>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status_macros.h"
#include "core/utf8.h"
#include "hf/hf_files.h"
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
  // InvalidModelFolder when the file is not UTF-8 JSON holding one object; DuplicateKey when an object
  // repeats a key, at any depth (json::find_repeated_key: Python's json, which transformers reads them
  // with, keeps the last, simdjson's lookups the first), naming the key and where it is.
  static Result<std::unique_ptr<JsonFile>> read(const Folder& folder, std::string_view name, std::uint64_t cap) {
    SW_ASSIGN_OR_RETURN(std::string text, read_model_file(folder, name, cap));
    return parse(folder.path_of(name), std::move(text));
  }

  // `text` as read() reads a file's, errors naming `path` (hf/multimodal.h re-reads a merged config so).
  static Result<std::unique_ptr<JsonFile>> parse(std::string path, std::string text) {
    auto file = std::unique_ptr<JsonFile>(new JsonFile(std::move(path)));
    if (!is_valid_utf8(text)) return file->bad("", "is not valid UTF-8");
    widen_numbers(text);
    // The parser's padding added in a buffer of exactly that size (resize() would double the capacity),
    // and the unpadded text freed before the parser allocates; the padded text is freed when read()
    // returns, so the file then costs its DOM alone.
    const std::size_t length = text.size();
    {
      std::string padded;
      padded.reserve(length + json::kJsonPadding);
      padded.append(text).append(json::kJsonPadding, ' ');
      text = std::move(padded);
    }
    if (auto err = json::parse_padded(std::string_view(text.data(), length), 256, file->own_, file->root_); err) {
      return file->bad("", std::string("is not valid JSON: ") + simdjson::error_message(err));
    }
    if (file->root_.type() != json::element_type::OBJECT) return file->bad("", "must hold a JSON object");
    if (auto repeat = json::find_repeated_key(file->root_)) {
      return Error(ErrorKind::DuplicateKey,
                   "key " + json::quoted(repeat->key) + " repeated" + (repeat->where.empty() ? std::string() : " in " + repeat->where))
          .with_file(file->path_);
    }
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

  // A finite positive number that a 32-bit float holds (to_float32); nullopt when absent.
  Result<std::optional<double>> positive(json::element object, std::string_view key) const {
    auto e = member(object, key);
    if (!e) return std::optional<double>();
    double v = 0;
    if (e->get_double().get(v) != simdjson::SUCCESS) return bad(key, "must be a number");
    if (!std::isfinite(v) || v <= 0) return bad(key, "must be a finite positive number");
    if (auto f = to_float32(key, v); !f.is_ok()) return std::move(f).status();
    return std::optional<double>(v);
  }

  // The one narrowing of a config number to llama.cpp's 32-bit floats (every float key of the GGUF):
  // InvalidModelFolder naming `key` and the value when float32 cannot hold it, since the cast would
  // write infinity (beyond 3.4e38) or 0 (below 1.4e-45) where the file says otherwise.
  Result<float> to_float32(std::string_view key, double v) const {
    const bool too_big = !(std::abs(v) <= static_cast<double>(std::numeric_limits<float>::max()));  // NaN too
    if (too_big || (v != 0 && static_cast<float>(v) == 0)) {
      char text[32];
      std::snprintf(text, sizeof text, "%g", v);
      return bad(key, "is " + std::string(text) + ", which a 32-bit float cannot hold (llama.cpp keeps it as one: it would be " +
                          (too_big ? "infinity" : "0") + ")");
    }
    return static_cast<float>(v);
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
