// Importance matrices (src/gguf/imatrix.h): llama-imatrix's GGUF and legacy formats, normalized as
// llama-quantize's load_imatrix does, every count, length and size checked against the bytes present.
#include "gguf/imatrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/little_endian.h"
#include "core/status_macros.h"
#include "gguf/layout.h"
#include "io/read_util.h"
#include "safeweights/gguf.h"

namespace safeweights::gguf {
namespace {

Error malformed(const std::string& name, std::string rule, std::uint64_t offset) {
  return Error(ErrorKind::InvalidArgument, "importance matrix: " + std::move(rule)).with_file(name).with_offset(offset);
}

// A cursor over the legacy file's bytes.
struct Cursor {
  std::span<const std::byte> bytes;
  std::uint64_t at = 0;
  std::uint64_t left() const { return bytes.size() - at; }
  std::int32_t i32() {
    const auto v = static_cast<std::int32_t>(le::u32(bytes.data() + at));
    at += 4;
    return v;
  }
};

constexpr std::string_view kSums = ".in_sum2", kCounts = ".counts";

// The F32 values of a tensor of the GGUF form.
Result<std::vector<float>> f32_values(const TensorEntry& t) {
  SW_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, t.read_owned());
  std::vector<float> v(bytes.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

// The sums of one tensor divided by their counts, one count per expert (load_imatrix's GGUF branch).
Result<std::vector<float>> normalized(const TensorEntry& sums, const TensorEntry& counts, const std::string& file) {
  const auto bad = [&](std::string why) {
    return Error(ErrorKind::InvalidArgument, "importance matrix: " + why).with_file(file).with_tensor(sums.name);
  };
  if (sums.type != TensorType::F32 || counts.type != TensorType::F32) return bad("in_sum2 and counts must be F32");
  const std::uint64_t nval = sums.num_elements(), ncounts = counts.num_elements();
  if (ncounts == 0 || nval == 0 || nval % ncounts != 0)
    return bad(std::to_string(nval) + " sums are not a whole number of rows for " + std::to_string(ncounts) + " counts");
  SW_ASSIGN_OR_RETURN(std::vector<float> s, f32_values(sums));
  SW_ASSIGN_OR_RETURN(std::vector<float> c, f32_values(counts));
  const std::uint64_t ne0 = nval / ncounts;
  for (std::uint64_t j = 0; j < ncounts; ++j) {
    // llama.cpp rounds each count to an integer, then divides by it as a float.
    const auto count = static_cast<float>(std::isfinite(c[j]) && std::fabs(c[j]) < 9.2e18f ? std::lround(c[j]) : 0);
    for (std::uint64_t i = 0; i < ne0; ++i) {
      float& x = s[j * ne0 + i];
      x = count > 0.0f ? x / count : 1.0f;
    }
  }
  return s;
}

Result<ImportanceMatrix> read_gguf_imatrix(const GgufFile& f) {
  const std::string& file = f.name();
  ImportanceMatrix m;
  if (f.tensors().empty()) return malformed(file, "no entries", 0);
  const Value* datasets = f.find_kv("imatrix.datasets");
  const Value* chunk_count = f.find_kv("imatrix.chunk_count");
  const Value* chunk_size = f.find_kv("imatrix.chunk_size");
  if (!datasets || !chunk_count || !chunk_size)
    return malformed(file, "missing imatrix.datasets, imatrix.chunk_count or imatrix.chunk_size (llama-quantize requires them)", 0);
  if (chunk_count->type != ValueType::UINT32 || chunk_size->type != ValueType::UINT32)
    return malformed(file, "imatrix.chunk_count and imatrix.chunk_size must be UINT32", 0);
  m.chunk_count = static_cast<std::uint32_t>(chunk_count->bits);
  if (datasets->type == ValueType::ARRAY && datasets->elem_type == ValueType::STRING)
    for (const Value& d : datasets->items) m.datasets.push_back(d.str);
  std::map<std::string, std::pair<const TensorEntry*, const TensorEntry*>> pairs;
  for (const TensorEntry& t : f.tensors()) {
    std::string_view n = t.name;
    if (n.ends_with(kSums))
      pairs[std::string(n.substr(0, n.size() - kSums.size()))].first = &t;
    else if (n.ends_with(kCounts))
      pairs[std::string(n.substr(0, n.size() - kCounts.size()))].second = &t;
  }
  for (const auto& [name, pair] : pairs) {
    if (!pair.first || !pair.second)
      return Error(ErrorKind::InvalidArgument, "importance matrix: in_sum2 and counts do not come in pairs").with_file(file).with_tensor(name);
    SW_ASSIGN_OR_RETURN(m.entries[name], normalized(*pair.first, *pair.second, file));
  }
  return m;
}

}  // namespace

Result<ImportanceMatrix> parse_legacy_imatrix(std::span<const std::byte> bytes, const std::string& name) {
  ImportanceMatrix m;
  m.legacy = true;
  Cursor in{bytes};
  if (in.left() < 4) return malformed(name, "shorter than its entry count", 0);
  const std::int32_t n = in.i32();
  if (n < 1) return malformed(name, "an entry count below 1", 0);
  for (std::int32_t i = 0; i < n; ++i) {
    const std::uint64_t start = in.at;
    const std::string where = "entry " + std::to_string(i + 1) + " of " + std::to_string(n) + ": ";
    if (in.left() < 4) return malformed(name, where + "ends before its name length", start);
    const std::int32_t len = in.i32();
    if (len < 0 || static_cast<std::uint64_t>(len) > in.left()) return malformed(name, where + "a name length outside the file", start);
    std::string key(reinterpret_cast<const char*>(bytes.data() + in.at), static_cast<std::size_t>(len));
    key.resize(std::strlen(key.c_str()));  // llama.cpp reads the name as a C string
    in.at += static_cast<std::uint64_t>(len);
    if (in.left() < 8) return malformed(name, where + "ends before its call and value counts", in.at);
    const std::int32_t ncall = in.i32();
    const std::int32_t nval = in.i32();
    if (nval < 1 || static_cast<std::uint64_t>(nval) * 4 > in.left())
      return malformed(name, where + "a value count below 1 or past the file", in.at - 4);
    std::vector<float> v(static_cast<std::size_t>(nval));
    std::memcpy(v.data(), bytes.data() + in.at, v.size() * 4);
    in.at += v.size() * 4;
    // llama-quantize divides the sums by ncall (as a float) when it is positive.
    if (ncall > 0)
      for (float& x : v) x /= static_cast<float>(static_cast<std::int64_t>(ncall));
    m.entries[std::move(key)] = std::move(v);  // a repeated name replaces the earlier entry, as in llama.cpp
  }
  // The optional trailer: the chunk count, then the dataset's name; a partial trailer is ignored.
  if (in.left() >= 4) {
    const std::int32_t chunks = in.i32();
    m.chunk_count = static_cast<std::uint32_t>(chunks);
    if (in.left() >= 4) {
      const std::int32_t len = in.i32();
      if (len > 0 && static_cast<std::uint64_t>(len) <= in.left()) {
        std::string dataset(reinterpret_cast<const char*>(bytes.data() + in.at), static_cast<std::size_t>(len));
        dataset.resize(std::strlen(dataset.c_str()));
        m.datasets.push_back(std::move(dataset));
      }
    }
  }
  return m;
}

Result<ImportanceMatrix> read_imatrix(const SourcePtr& source) {
  std::byte magic[4] = {};
  const bool has_magic = source->size() >= 4 && source->read_at(0, magic).is_ok() && std::memcmp(magic, kMagic.data(), 4) == 0;
  if (has_magic) {
    SW_ASSIGN_OR_RETURN(auto file, gguf::open(source));
    return read_gguf_imatrix(*file);
  }
  auto bytes = read_small(*source, kMaxLegacyImatrixBytes);
  if (!bytes.is_ok()) return error_of(bytes).with_file(source->name());
  return parse_legacy_imatrix(std::as_bytes(std::span(*bytes)), source->name());
}

Status filter_imatrix(ImportanceMatrix& m, std::span<const std::string> include, std::span<const std::string> exclude, const std::string& name) {
  if (!include.empty() && !exclude.empty())
    return Error(ErrorKind::InvalidArgument, "--include-weights and --exclude-weights cannot be used together");
  const auto named = [](const std::string& key, std::span<const std::string> parts) {
    return std::ranges::any_of(parts, [&](const std::string& p) { return key.find(p) != std::string::npos; });
  };
  std::erase_if(m.entries,
                [&](const auto& e) { return (!exclude.empty() && named(e.first, exclude)) || (!include.empty() && !named(e.first, include)); });
  for (const auto& [key, values] : m.entries)
    if (std::ranges::any_of(values, [](float x) { return !std::isfinite(x); }))
      return Error(ErrorKind::InvalidArgument, "importance matrix: a non-finite value (llama-quantize refuses them)")
          .with_file(name)
          .with_tensor(key);
  return Status::ok();
}

}  // namespace safeweights::gguf
