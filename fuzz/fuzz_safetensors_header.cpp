// fuzz_safetensors_header — arbitrary bytes as a safetensors file.
//
// Header::parse must either fail cleanly or return a header whose invariants hold: tensors contiguous
// from offset 0 in data-offset order, each tensor's byte length equal to its shape x dtype size, the
// data section ending exactly at the end of the input. For an accepted file, every tensor is then
// read through its entry: the zero-copy view, read() (mapped and unmapped sources) and a
// couple of slices, and all of them must agree with the bytes of the input.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "safeweights/loader.h"
#include "safeweights/safetensors.h"
#include "safeweights/slice.h"
#include "safeweights/source.h"

using namespace safeweights;
using namespace safeweights::safetensors;

namespace {

void check_header(const Header& header, std::size_t size) {
  FUZZ_CHECK(header.file_size() == size);
  FUZZ_CHECK(header.data_start() == 8 + header.header_size());
  FUZZ_CHECK(header.header_size() <= kMaxHeaderSize);
  std::uint64_t expect_begin = 0;
  for (const TensorInfo& info : header.tensors()) {
    FUZZ_CHECK(info.begin == expect_begin);
    FUZZ_CHECK(info.end >= info.begin);
    expect_begin = info.end;
    // The byte length is exactly shape x dtype size (sub-byte types must fill whole bytes).
    const unsigned __int128 bits = static_cast<unsigned __int128>(info.num_elements()) * type_bits(info.dtype);
    FUZZ_CHECK(bits % 8 == 0);
    FUZZ_CHECK(bits / 8 == info.nbytes());
    unsigned __int128 product = 1;
    for (std::uint64_t d : info.shape) product *= d;
    FUZZ_CHECK(product == info.num_elements());
    FUZZ_CHECK(info.name != "__metadata__");
    const TensorInfo* found = header.find(info.name);
    FUZZ_CHECK(found == &info);
  }
  FUZZ_CHECK(expect_begin == header.data_size());
  for (const auto& [key, value] : header.metadata()) {
    const auto got = header.metadata_value(key);
    FUZZ_CHECK(got.has_value() && *got == value);  // duplicate keys are rejected, so lookups are exact
  }
}

// Reads a slice and, for the cases whose result is easy to predict, compares it with `whole`.
void check_slices(const TensorEntry& entry, std::span<const std::byte> whole) {
  // "" (everything) must give back the whole tensor, in order.
  if (auto spec = SliceSpec::parse(""); spec.is_ok()) {
    auto plan = entry.plan_slice(*spec);
    if (plan.is_ok()) {
      FUZZ_CHECK(plan->nbytes() == entry.nbytes);
      std::vector<std::byte> out(plan->nbytes());
      FUZZ_CHECK_OK(entry.read_slice(*plan, out));
      FUZZ_CHECK(out.empty() || std::memcmp(out.data(), whole.data(), out.size()) == 0);
    } else {
      FUZZ_CHECK(type_bits(entry.type) < 8);  // only sub-byte types can refuse a full slice
    }
  } else {
    FUZZ_CHECK(false);
  }
  if (entry.shape.empty()) return;
  // ":1" on the first axis is a prefix of the tensor's bytes.
  auto head = SliceSpec::parse(":1");
  FUZZ_CHECK(head.is_ok());
  if (auto plan = entry.plan_slice(*head); plan.is_ok()) {
    FUZZ_CHECK(plan->nbytes() <= entry.nbytes);
    std::vector<std::byte> out(plan->nbytes());
    FUZZ_CHECK_OK(entry.read_slice(*plan, out));
    FUZZ_CHECK(out.empty() || std::memcmp(out.data(), whole.data(), out.size()) == 0);
  }
  // A reversed, strided slice of the last axis: only checked for staying in bounds and being readable.
  auto rev = SliceSpec::parse("..., ::-2");
  FUZZ_CHECK(rev.is_ok());
  if (auto plan = entry.plan_slice(*rev); plan.is_ok()) {
    FUZZ_CHECK(plan->nbytes() <= entry.nbytes);
    const std::uint64_t lo = entry.offset;
    const std::uint64_t hi = entry.offset + entry.nbytes;
    plan->for_each_run([&](std::uint64_t offset, std::uint64_t length) {
      FUZZ_CHECK(offset >= lo && offset <= hi && length <= hi - offset);
      return true;
    });
    std::vector<std::byte> out(plan->nbytes());
    FUZZ_CHECK_OK(entry.read_slice(*plan, out));
  }
}

void check_reader(const Reader& reader, std::span<const std::byte> input, bool mapped) {
  const Header& header = reader.header();
  const std::span<const TensorEntry> entries_in_order = reader.tensors();
  FUZZ_CHECK(entries_in_order.size() == header.tensors().size());
  for (std::size_t i = 0; i < entries_in_order.size(); ++i) {
    const TensorInfo& info = header.tensors()[i];
    const TensorEntry& entry = entries_in_order[i];
    FUZZ_CHECK(entry.name == info.name && entry.type == info.dtype && entry.nbytes == info.nbytes());
    FUZZ_CHECK(entry.source == &reader.source());
    FUZZ_CHECK(entry.offset == header.data_start() + info.begin);
    const std::span<const std::byte> expected = input.subspan(entry.offset, info.nbytes());
    const std::span<const std::byte> view = entry.view();
    if (mapped) {
      FUZZ_CHECK(view.size() == info.nbytes());
      if (!view.empty()) {
        FUZZ_CHECK(view.data() == input.data() + entry.offset);  // zero-copy: points into the input
      }
    } else {
      FUZZ_CHECK(view.data() == nullptr);
    }
    std::vector<std::byte> copy(info.nbytes());
    FUZZ_CHECK_OK(entry.read(copy));
    FUZZ_CHECK(copy.empty() || std::memcmp(copy.data(), expected.data(), copy.size()) == 0);

    auto by_name = reader.tensor(info.name);
    FUZZ_CHECK(by_name.is_ok());
    FUZZ_CHECK(*by_name == &entry);

    check_slices(entry, expected);
  }
  auto missing = reader.tensor("\x01no such tensor\x02");
  FUZZ_CHECK(!missing.is_ok());

  // The loader over the reader's entries: every tensor's bytes, as in the input.
  std::vector<TensorEntry> entries;
  for (const TensorInfo& info : header.tensors()) entries.push_back(reader.entry(info));
  LoaderOptions load_options;
  load_options.threads = 1;
  auto plan = LoadPlan::make(entries, load_options);
  FUZZ_CHECK_OK(plan.status());
  auto loaded = load_host(*plan);
  FUZZ_CHECK_OK(loaded.status());
  // Checked against the header's own offsets (not the entries' offsets, which Reader::entry computes).
  FUZZ_CHECK(plan->tensors().size() == header.tensors().size());
  for (std::size_t i = 0; i < plan->tensors().size(); ++i) {
    const PlacedTensor& placed = plan->tensors()[i];
    const TensorInfo& info = header.tensors()[i];
    const std::uint64_t at = header.data_start() + info.begin;
    FUZZ_CHECK(placed.entry.offset == at && placed.entry.nbytes == info.nbytes());
    const std::span<const std::byte> got = loaded->bytes_of(placed);
    FUZZ_CHECK(got.size() == info.nbytes());
    FUZZ_CHECK(got.empty() || std::memcmp(got.data(), input.data() + at, got.size()) == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> input = fuzz::as_bytes(data, size);
  SourcePtr source = memory_source(input, "<fuzz>");

  auto header = Header::parse(*source);
  ReadOptions strict;
  strict.reject_unknown_fields = true;
  auto strict_header = Header::parse(*source, strict);
  if (!header.is_ok()) {
    // Strict mode only adds a rule: what the default mode rejects, it rejects too, with the same kind
    // unless the unknown-field rule (one of our own, checked after the reference's) fired first.
    FUZZ_CHECK(!strict_header.is_ok());
    const ErrorKind kind = header.error().kind();
    const ErrorKind strict_kind = strict_header.error().kind();
    FUZZ_CHECK(strict_kind == kind ||
               (strict_kind == ErrorKind::UnknownField &&
                (kind == ErrorKind::DuplicateKey || kind == ErrorKind::NonCanonicalEntry || kind == ErrorKind::ReservedTensorName)));
    // The unmapped path must reach the same verdict.
    fuzz::UnmappedSource unmapped(input);
    auto again = Header::parse(unmapped);
    FUZZ_CHECK(!again.is_ok());
    FUZZ_CHECK(again.error().kind() == header.error().kind());
    return 0;
  }
  FUZZ_CHECK(strict_header.is_ok() || strict_header.error().kind() == ErrorKind::UnknownField);
  check_header(*header, size);

  auto reader = Reader::open(source);
  FUZZ_CHECK_OK(reader.status());
  FUZZ_CHECK(reader->header().tensors().size() == header->tensors().size());
  check_reader(*reader, input, /*mapped=*/true);

  auto unmapped_reader = Reader::open(std::make_shared<fuzz::UnmappedSource>(input));
  FUZZ_CHECK_OK(unmapped_reader.status());
  check_reader(*unmapped_reader, input, /*mapped=*/false);
  return 0;
}
