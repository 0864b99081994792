// fuzz_roundtrip — structured tensors and metadata -> serialize -> Header::parse.
//
// The input drives a FuzzedDataProvider that builds up to 8 tensors (any dtype, rank 0-4, small dims,
// names with quotes, backslashes, control characters and multi-byte UTF-8) and optional metadata.
// Whenever serialize() accepts them, the bytes must parse, and every name, dtype, shape, data byte and
// metadata entry must come back exactly. The output must also be deterministic and independent of the
// order the tensors were given in, and agree with Layout::plan.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "safeweights/tensor_type.h"
#include "safeweights/safetensors.h"
#include "safeweights/safetensors_writer.h"

using namespace safeweights;
using namespace safeweights::safetensors;

namespace {

// Valid UTF-8 text from a palette that stresses JSON escaping.
std::string make_text(FuzzedDataProvider& fdp, std::size_t max_chars) {
  static const char* const kPieces[] = {"a",
                                        "b",
                                        "z",
                                        "0",
                                        "9",
                                        ".",
                                        "_",
                                        "-",
                                        "/",
                                        " ",
                                        "\"",
                                        "\\",
                                        "\n",
                                        "\t",
                                        "\x01",
                                        "\x1f",
                                        "\x7f",
                                        "__metadata__",
                                        "weight",
                                        "model.layers.",
                                        "\xc3\xa9",
                                        "\xe4\xb8\xad",
                                        "\xf0\x9f\x98\x80",
                                        "\xe2\x80\xa8",
                                        "\xef\xbb\xbf",
                                        "{",
                                        "}",
                                        "[",
                                        "]",
                                        ":",
                                        ",",
                                        "u0000"};
  constexpr std::size_t kCount = sizeof(kPieces) / sizeof(kPieces[0]);
  std::string s;
  const std::size_t n = fdp.ConsumeIntegralInRange<std::size_t>(0, max_chars);
  for (std::size_t i = 0; i < n; ++i) {
    if (fdp.ConsumeBool()) {
      s += kPieces[fdp.ConsumeIntegralInRange<std::size_t>(0, kCount - 1)];
    } else {
      s += static_cast<char>(fdp.ConsumeIntegralInRange<int>(0x20, 0x7e));
    }
  }
  return s;
}

struct Case {
  std::vector<std::string> names;
  std::vector<TensorType> dtypes;
  std::vector<std::vector<std::uint64_t>> shapes;
  std::vector<std::vector<std::byte>> data;
  std::optional<MetadataEntries> metadata;
};

std::vector<TensorData> tensor_data(const Case& c, const std::vector<std::size_t>& order) {
  std::vector<TensorData> out;
  for (std::size_t i : order) out.push_back(TensorData{c.names[i], c.dtypes[i], c.shapes[i], c.data[i]});
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider fdp(data, size);
  Case c;
  const std::size_t count = fdp.ConsumeIntegralInRange<std::size_t>(0, 8);
  for (std::size_t t = 0; t < count; ++t) {
    c.names.push_back(fdp.ConsumeBool() ? "t" + std::to_string(t) : make_text(fdp, 12));
    const TensorType dtype = fuzz::storable_types()[fdp.ConsumeIntegralInRange<std::size_t>(0, fuzz::storable_types().size() - 1)];
    c.dtypes.push_back(dtype);
    std::vector<std::uint64_t> shape(fdp.ConsumeIntegralInRange<std::size_t>(0, 4));
    std::uint64_t elements = 1;
    for (auto& d : shape) {
      d = fdp.ConsumeIntegralInRange<std::uint64_t>(0, 7);
      elements *= d;
    }
    c.shapes.push_back(shape);
    std::vector<std::byte> bytes((elements * type_bits(dtype) + 7) / 8);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(fdp.ConsumeIntegral<std::uint8_t>());
    c.data.push_back(std::move(bytes));
  }
  if (fdp.ConsumeBool()) {
    MetadataEntries entries;
    const std::size_t n = fdp.ConsumeIntegralInRange<std::size_t>(0, 4);
    for (std::size_t i = 0; i < n; ++i) entries.emplace_back(make_text(fdp, 8), make_text(fdp, 16));
    c.metadata = std::move(entries);
  }

  std::vector<std::size_t> order(count);
  for (std::size_t i = 0; i < count; ++i) order[i] = i;
  const std::vector<TensorData> tensors = tensor_data(c, order);
  auto bytes = serialize(tensors, c.metadata);
  if (!bytes.is_ok()) {
    const ErrorKind kind = bytes.error().kind();
    FUZZ_CHECK(kind == ErrorKind::DuplicateKey || kind == ErrorKind::ReservedTensorName || kind == ErrorKind::MisalignedSlice ||
               kind == ErrorKind::ValidationOverflow || kind == ErrorKind::InvalidTensorView || kind == ErrorKind::TensorInvalidInfo ||
               kind == ErrorKind::InvalidArgument);
    return 0;
  }

  // Deterministic, and independent of the order the tensors were given in.
  auto again = serialize(tensors, c.metadata);
  FUZZ_CHECK_OK(again.status());
  FUZZ_CHECK(*again == *bytes);
  if (count > 1) {
    std::vector<std::size_t> reversed(order.rbegin(), order.rend());
    auto permuted = serialize(tensor_data(c, reversed), c.metadata);
    FUZZ_CHECK_OK(permuted.status());
    FUZZ_CHECK(*permuted == *bytes);
  }

  // Layout::plan agrees with the bytes.
  std::vector<TensorDecl> decls;
  for (std::size_t i = 0; i < count; ++i) decls.push_back(TensorDecl{c.names[i], c.dtypes[i], c.shapes[i]});
  auto layout = Layout::plan(decls, c.metadata);
  FUZZ_CHECK_OK(layout.status());
  FUZZ_CHECK(layout->file_size() == bytes->size());
  FUZZ_CHECK(layout->prefix().size() % 8 == 0);
  FUZZ_CHECK(std::memcmp(layout->prefix().data(), bytes->data(), layout->prefix().size()) == 0);

  // It parses, strictly, and everything comes back.
  SourcePtr source = memory_source(*bytes, "<serialized>");
  ReadOptions strict;
  strict.reject_unknown_fields = true;
  auto header = Header::parse(*source, strict);
  FUZZ_CHECK_OK(header.status());
  FUZZ_CHECK(header->file_size() == bytes->size());
  FUZZ_CHECK(header->data_start() == layout->prefix().size());
  FUZZ_CHECK(header->tensors().size() == count);
  for (std::size_t i = 0; i < count; ++i) {
    const TensorInfo* info = header->find(c.names[i]);
    FUZZ_CHECK(info != nullptr);
    FUZZ_CHECK(info->name == c.names[i]);
    FUZZ_CHECK(info->dtype == c.dtypes[i]);
    FUZZ_CHECK(std::equal(info->shape.begin(), info->shape.end(), c.shapes[i].begin(), c.shapes[i].end()));
    FUZZ_CHECK(info->nbytes() == c.data[i].size());
    const std::size_t at = header->data_start() + info->begin;
    FUZZ_CHECK(c.data[i].empty() || std::memcmp(bytes->data() + at, c.data[i].data(), c.data[i].size()) == 0);
    const auto& placement = layout->placement_of(i);
    FUZZ_CHECK(placement.begin == info->begin && placement.end == info->end);
  }
  if (c.metadata && !c.metadata->empty()) {
    FUZZ_CHECK(header->has_metadata());
    std::map<std::string, std::string> want(c.metadata->begin(), c.metadata->end());
    std::map<std::string, std::string> got(header->metadata().begin(), header->metadata().end());
    FUZZ_CHECK(want == got);
    // Keys are written sorted.
    FUZZ_CHECK(std::is_sorted(header->metadata().begin(), header->metadata().end(), [](const auto& a, const auto& b) { return a.first < b.first; }));
  } else if (!c.metadata) {
    FUZZ_CHECK(!header->has_metadata() || count == 0);
  }
  return 0;
}
