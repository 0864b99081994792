// fuzz_dduf — arbitrary bytes as a DDUF (ZIP) archive, and as a container (torch.save) ZIP archive.
//
// zip::Archive::open (both policies) and dduf::Reader::open must either fail cleanly or return entries
// whose invariants hold: every entry's data (and data descriptor) lies inside the input, before the
// central directory, without overlapping another entry; names are unique; only the Container policy
// admits data descriptors, and everything Strict accepts Container accepts too. For an accepted archive every entry is read through
// its zero-copy view and through an unmapped source (the bytes must agree), its CRC is checked (it may
// fail, but cleanly), and .safetensors entries are opened as safetensors files. Opening through a
// mapped and an unmapped source must agree on the verdict.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "safeweights/dduf.h"
#include "safeweights/zip.h"

using namespace safeweights;

namespace {

void check_archive(const zip::Archive& archive, std::span<const std::byte> input) {
  std::set<std::string_view> names;  // views into the archive's copy of its central directory
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const zip::Entry& e : archive.entries()) {
    FUZZ_CHECK(names.insert(e.name).second);
    FUZZ_CHECK(e.data_offset >= e.header_offset + 30);
    FUZZ_CHECK(e.data_offset <= input.size());
    FUZZ_CHECK(e.compressed_size <= input.size() - e.data_offset);
    FUZZ_CHECK(e.descriptor_size <= input.size() - e.data_offset - e.compressed_size);
    ranges.emplace_back(e.header_offset, e.data_offset + e.compressed_size + e.descriptor_size);
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i) FUZZ_CHECK(ranges[i - 1].second <= ranges[i].first);
}

void exercise(const SourcePtr& source, std::span<const std::byte> input, zip::ArchivePolicy policy) {
  auto archive = zip::Archive::open(source, policy);
  if (!archive.is_ok()) return;
  check_archive(*archive, input);
  for (const zip::Entry& e : archive->entries()) {
    auto entry = archive->open_entry(e);
    FUZZ_CHECK_OK(entry);
    std::vector<std::byte> copy(static_cast<std::size_t>((*entry)->size()));
    FUZZ_CHECK_OK((*entry)->read_at(0, copy));
    FUZZ_CHECK(copy.empty() || std::memcmp(copy.data(), input.data() + e.data_offset, copy.size()) == 0);
    // A wrong CRC is a clean error, and the copying check (unpack's) agrees with the plain one, having
    // handed over exactly the entry's bytes.
    const bool crc_ok = archive->verify_crc(e).is_ok();
    std::vector<std::byte> seen;
    Status copied = archive->copy_entry_checked(e, 4096, [&](std::span<const std::byte> piece) {
      seen.insert(seen.end(), piece.begin(), piece.end());
      return Status::ok();
    });
    FUZZ_CHECK(copied.is_ok() == crc_ok);
    FUZZ_CHECK(seen == copy);
    if (policy == zip::ArchivePolicy::Strict) FUZZ_CHECK(e.descriptor_size == 0);
  }
  if (policy == zip::ArchivePolicy::Container) return;

  auto reader = dduf::Reader::open(source);
  if (!reader.is_ok()) return;
  for (const dduf::Entry& e : reader->entries()) {
    FUZZ_CHECK(e.offset <= input.size() && e.length <= input.size() - e.offset);
    if (e.filename.size() >= 12 && e.filename.compare(e.filename.size() - 12, 12, ".safetensors") == 0) {
      auto st = reader->open_safetensors(e.filename);
      if (st.is_ok()) FUZZ_CHECK(st->header().file_size() == e.length);
    }
  }
  (void)reader->verify();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto input = fuzz::as_bytes(data, size);
  SourcePtr mapped = memory_source(input, "<fuzz>");
  SourcePtr unmapped = std::make_shared<fuzz::UnmappedSource>(input);
  // Mapped archives check local headers in place, unmapped ones (files read with pread, HTTP) in
  // batches through read_ranges: both must reach the same verdict, with the same kind.
  for (zip::ArchivePolicy policy : {zip::ArchivePolicy::Strict, zip::ArchivePolicy::Container}) {
    auto a = zip::Archive::open(mapped, policy);
    auto b = zip::Archive::open(unmapped, policy);
    FUZZ_CHECK(a.is_ok() == b.is_ok());
    if (!a.is_ok()) FUZZ_CHECK(a.error().kind() == b.error().kind() && a.error().message() == b.error().message());
    exercise(mapped, input, policy);
    exercise(unmapped, input, policy);
  }
  // Container only adds to what Strict accepts (it also refuses compressed entries, which Strict
  // leaves to DDUF).
  auto strict = zip::Archive::open(mapped, zip::ArchivePolicy::Strict);
  if (strict.is_ok()) {
    bool stored = true;
    for (const zip::Entry& e : strict->entries()) stored = stored && e.method == 0;
    if (stored) FUZZ_CHECK(zip::Archive::open(mapped, zip::ArchivePolicy::Container).is_ok());
  }
  return 0;
}
