// Header::parse: the reference's rules in the reference's order, then ours.
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "core/hash.h"
#include "core/little_endian.h"
#include "core/name_table.h"
#include "core/status_macros.h"
#include "json/json_parse.h"
#include "safetensors/header_memory.h"
#include "safetensors/json_schema.h"
#include "safeweights/safetensors.h"

namespace safeweights::safetensors {

std::uint64_t TensorInfo::num_elements() const noexcept { return safeweights::num_elements(shape); }

namespace {
constexpr std::size_t kLargeArray = std::size_t{1} << 20, kHugePage = std::size_t{2} << 20;
std::size_t mapped_length(std::size_t bytes) { return (bytes + kHugePage - 1) & ~(kHugePage - 1); }
}  // namespace

void* allocate_pages(std::size_t bytes) {
  if (bytes < kLargeArray) return ::operator new(bytes);
  // 2 MiB more than needed, trimmed so that the array starts on a huge-page boundary.
  const std::size_t len = mapped_length(bytes);
  void* raw = ::mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const auto aligned = (start + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned > start) ::munmap(raw, aligned - start);
  if (const std::size_t tail = start + len + kHugePage - (aligned + len); tail > 0) {
    ::munmap(reinterpret_cast<void*>(aligned + len), tail);
  }
#ifdef MADV_HUGEPAGE
  ::madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);
#endif
  return reinterpret_cast<void*>(aligned);
}

void free_pages(void* p, std::size_t bytes) noexcept {
  if (bytes < kLargeArray) {
    ::operator delete(p);
  } else {
    ::munmap(p, mapped_length(bytes));
  }
}

namespace {

Error invalid(ErrorKind kind, std::string message) { return Error(kind, std::move(message)); }

}  // namespace

// Builds a Header from a parsed JSON document; friend of Header.
class HeaderBuilder {
 public:
  // What a Header owns: the text and the arrays its spans view. Built in place, never moved. One
  // allocation (the arena) holds the text of n bytes and its padding, then the blocks the reader
  // reserves for shapes and entries; pages are touched only where something is written.
  struct Storage {
    explicit Storage(std::size_t n) : Storage(Layout::of(n)) {}
    char* text() const noexcept { return arena.data(); }

    // `count` zeroed slots for the name index: in what the entries left of their block when it holds
    // them (the entries' last huge page is touched already), else an allocation of their own.
    std::span<std::uint64_t> index_slots(std::size_t count) {
      const auto used = reinterpret_cast<std::uintptr_t>(raw.entries.data() + raw.entries.size());
      const auto start = (used + alignof(std::uint64_t) - 1) & ~std::uintptr_t{alignof(std::uint64_t) - 1};
      const auto block_end = reinterpret_cast<std::uintptr_t>(entries_block.at) + entries_block.bytes;
      std::uint64_t* slots = nullptr;
      if (raw.entries.data() == entries_block.at && start <= block_end && (block_end - start) / sizeof(std::uint64_t) >= count) {
        slots = reinterpret_cast<std::uint64_t*>(start);
        std::fill_n(slots, count, 0);
      } else {
        index_store.assign(count, 0);
        slots = index_store.data();
      }
      return {slots, count};
    }

    Region dims_block, entries_block;
    PageBuffer arena;
    RawHeader raw;
    std::vector<TensorInfo, PageAllocator<TensorInfo>> in_offset_order;  // when the file's order is not
    std::vector<std::uint64_t> index_store;                              // when the entries' block has no room

   private:
    // The text and its padding, the shapes' block, the entries' block: the arena's bytes, in order.
    struct Layout {
      std::size_t dims_at, dims_bytes, entries_at, entries_bytes;
      static Layout of(std::size_t n) {
        constexpr std::size_t kAlign = 64;
        auto up = [](std::size_t v) { return (v + kAlign - 1) & ~(kAlign - 1); };
        Layout l{};
        l.dims_at = up(n + json::kJsonPadding);
        l.dims_bytes = RawHeader::dims_bound(n) * sizeof(std::uint64_t);
        l.entries_at = up(l.dims_at + l.dims_bytes);
        l.entries_bytes = RawHeader::entries_bound(n) * sizeof(TensorInfo);
        return l;
      }
    };
    explicit Storage(const Layout& l)
        : dims_block{nullptr, l.dims_bytes},
          entries_block{nullptr, l.entries_bytes},
          arena(l.entries_at + l.entries_bytes),
          raw(&entries_block, &dims_block) {
      dims_block.at = arena.data() + l.dims_at;
      entries_block.at = arena.data() + l.entries_at;
    }
  };

  static Result<Header> build(const ByteSource& source, std::uint64_t n, std::shared_ptr<Storage> storage) {
    Header h;
    h.header_size_ = n;
    h.text_ = storage->text();
    RawHeader& raw = storage->raw;
    h.has_metadata_ = raw.has_metadata;
    h.index_seed_ = hash_seed();

    if (raw.entries.size() >= UINT32_MAX) return invalid(ErrorKind::ResourceLimit, "too many tensors");
    const std::uint32_t count = static_cast<std::uint32_t>(raw.entries.size());
    NameTable table(storage->index_slots(NameTable::capacity_for(count)), h.index_seed_);
    const Names names = index_names(raw, table, count);
    const Order order = offset_order(raw, names.dropped, count);
    SW_ASSIGN_OR_RETURN(const std::uint64_t data_end, check_offsets(raw, order));
    h.tensors_ = tensors_in_order(*storage, order);
    SW_RETURN_IF_ERROR(check_covers_source(source, n, data_end));
    h.data_size_ = data_end;

    // Every reference rule holds; now ours.
    if (raw.strict_violation) return std::move(*raw.strict_violation);
    if (names.duplicate) return invalid(ErrorKind::DuplicateKey, "tensor name appears more than once").with_tensor(*names.duplicate);

    h.metadata_ = raw.metadata;
    h.index_ = table.slots();
    renumber_index(table, order);
    h.storage_ = std::move(storage);
    return h;
  }

 private:
  // What indexing the names found. The reference collects tensors into a map, so a repeated name
  // silently replaces the earlier entry (last wins). Reproduce that so its errors are ours, and report
  // the duplicate afterwards.
  struct Names {
    std::optional<std::string> duplicate;  // the first name that repeats
    std::vector<bool> dropped;             // per entry: replaced by a later one; allocated only once a name repeats
  };

  // The kept entries in offset order; ties keep file order so results never depend on hashing.
  struct Order {
    std::uint32_t count = 0;          // entries in the header
    bool file_order = true;           // the kept entries are all of them, in file order (as the reference writes)
    std::vector<std::uint32_t> keep;  // otherwise: the entry of each kept tensor, in offset order

    std::size_t kept() const noexcept { return file_order ? count : keep.size(); }
    std::uint32_t entry_at(std::size_t p) const noexcept { return file_order ? static_cast<std::uint32_t>(p) : keep[p]; }
  };

  // Maps every name to its entry in `table`, the last entry of a repeated name winning.
  static Names index_names(const RawHeader& raw, NameTable& table, std::uint32_t count) {
    auto name_of_entry = [&](std::size_t i) { return raw.entries[i].name; };
    Names names;
    // Insert with the slot of a later name already being fetched: the table is larger than the cache,
    // so this hides most of the misses. The hashes of the names in between wait in a ring, not in an
    // array as long as the header.
    constexpr std::uint32_t kAhead = 16;
    std::uint64_t ahead[kAhead];
    for (std::uint32_t i = 0; i < std::min(count, kAhead); ++i) ahead[i] = table.hash(name_of_entry(i));
    for (std::uint32_t i = 0; i < count; ++i) {
      const std::uint64_t hash = ahead[i % kAhead];
      if (i + kAhead < count) {
        ahead[i % kAhead] = table.hash(name_of_entry(i + kAhead));
        table.prefetch(ahead[i % kAhead]);
      }
      std::uint64_t& slot = table.slot(name_of_entry(i), hash, name_of_entry);
      if (slot != 0) {
        if (!names.duplicate) names.duplicate = std::string(name_of_entry(i));
        if (names.dropped.empty()) names.dropped.assign(count, false);
        names.dropped[static_cast<std::uint32_t>(slot) - 1] = true;
      }
      slot = NameTable::make(hash, i);
    }
    return names;
  }

  // Files written by the reference are already in offset order without repeated names: then the
  // entries keep their positions and no permutation is built.
  static Order offset_order(const RawHeader& raw, const std::vector<bool>& dropped, std::uint32_t count) {
    auto by_offsets = [&](std::uint32_t a, std::uint32_t b) {
      const auto& ea = raw.entries[a];
      const auto& eb = raw.entries[b];
      return ea.begin != eb.begin ? ea.begin < eb.begin : ea.end < eb.end;
    };
    Order order;
    order.count = count;
    order.file_order = dropped.empty();
    for (std::uint32_t i = 1; order.file_order && i < count; ++i) order.file_order = !by_offsets(i, i - 1);
    if (order.file_order) return order;
    order.keep.reserve(count);
    for (std::uint32_t i = 0; i < count; ++i) {
      if (dropped.empty() || !dropped[i]) order.keep.push_back(i);
    }
    if (!std::is_sorted(order.keep.begin(), order.keep.end(), by_offsets)) std::stable_sort(order.keep.begin(), order.keep.end(), by_offsets);
    return order;
  }

  // The reference's rules on data offsets: in offset order, each tensor starts where the one before
  // it ends, and spans the bytes its dtype and shape need. Returns where the last one ends.
  static Result<std::uint64_t> check_offsets(const RawHeader& raw, const Order& order) {
    std::uint64_t running = 0;
    for (std::size_t p = 0; p < order.kept(); ++p) {
      const TensorInfo& info = raw.entries[order.entry_at(p)];
      if (info.begin != running || info.end < info.begin) {
        return invalid(ErrorKind::InvalidOffset, "invalid offset for tensor: data_offsets [" + std::to_string(info.begin) + ", " +
                                                     std::to_string(info.end) + "] but the previous tensor ends at " + std::to_string(running))
            .with_tensor(info.name);
      }
      running = info.end;
      auto nbytes = tensor_nbytes(info.dtype, info.shape);
      if (!nbytes.is_ok()) return error_of(nbytes).with_tensor(info.name);
      if (info.end - info.begin != nbytes.value()) {
        return invalid(ErrorKind::TensorInvalidInfo, "shape and dtype need " + std::to_string(nbytes.value()) + " bytes but data_offsets span " +
                                                         std::to_string(info.end - info.begin))
            .with_tensor(info.name);
      }
    }
    return running;
  }

  // The entries already are the tensors (names and shapes point into the stores Header now owns); in
  // file order they move over whole, otherwise the kept ones are copied in offset order.
  static std::span<const TensorInfo> tensors_in_order(Storage& storage, const Order& order) {
    RawHeader& raw = storage.raw;
    if (order.file_order) return raw.entries;
    auto& ordered = storage.in_offset_order;
    ordered.reserve(order.kept());
    for (std::uint32_t i : order.keep) ordered.push_back(raw.entries[i]);
    raw.entries = {};  // not needed any more
    return ordered;
  }

  // The data must end exactly at the end of the input: no truncation, no trailing (polyglot) bytes.
  static Status check_covers_source(const ByteSource& source, std::uint64_t n, std::uint64_t data_end) {
    const std::uint64_t data_start = 8 + n;
    std::uint64_t expected = 0;
    if (__builtin_add_overflow(data_end, data_start, &expected) || expected != source.size()) {
      return invalid(ErrorKind::MetadataIncompleteBuffer, "incomplete metadata, file not fully covered: tensors end at byte " +
                                                              (expected >= data_start ? std::to_string(expected) : std::string("(overflow)")) +
                                                              " but the file has " + std::to_string(source.size()) + " bytes")
          .with_offset(std::min(expected, source.size()));
    }
    return Status::ok();
  }

  // The table maps every kept name to its entry; renumbers the entries to positions in the tensors
  // (nothing to do when they are in file order).
  static void renumber_index(NameTable& table, const Order& order) {
    if (order.file_order) return;
    std::vector<std::uint32_t> position(order.count, 0);
    for (std::uint32_t p = 0; p < order.keep.size(); ++p) position[order.keep[p]] = p;
    for (std::uint64_t& slot : table.slots()) {
      if (slot != 0) slot = (slot >> 32 << 32) | (position[static_cast<std::uint32_t>(slot) - 1] + 1u);
    }
  }

 public:
  static const TensorInfo* find(const Header& h, std::string_view name) noexcept {
    if (h.index_.empty()) return nullptr;
    const std::size_t mask = h.index_.size() - 1;
    const std::uint64_t hash = hash_key(name, h.index_seed_);
    for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
      const std::uint64_t s = h.index_[i];
      if (s == 0) return nullptr;
      const TensorInfo& t = h.tensors_[static_cast<std::uint32_t>(s) - 1];
      if ((s >> 32) == (hash >> 32) && t.name == name) return &t;
    }
  }
};

Header::~Header() = default;

const TensorInfo* Header::find(std::string_view name) const noexcept { return HeaderBuilder::find(*this, name); }

std::optional<std::string_view> Header::metadata_value(std::string_view key) const noexcept {
  for (const auto& [k, v] : metadata()) {
    if (k == key) return v;
  }
  return std::nullopt;
}

MetadataEntries MetadataView::entries() const {
  MetadataEntries out;
  out.reserve(size());
  for (const auto& [k, v] : *this) out.emplace_back(k, v);
  return out;
}

Result<Header> Header::parse(const ByteSource& source, const ReadOptions& options) {
  auto fail = [&](Error e) -> Result<Header> { return std::move(e.with_file(source.name())); };

  if (source.size() < 8) return fail(Error(ErrorKind::HeaderTooSmall, "header too small: the file has fewer than 8 bytes"));
  std::byte prefix[8];
  SW_RETURN_IF_ERROR(source.read_at(0, prefix));
  const std::uint64_t n = le::u64(prefix);

  if (n > kMaxHeaderSize) {
    return fail(Error(ErrorKind::HeaderTooLarge,
                      "header too large: length field says " + std::to_string(n) + " bytes, the limit is " + std::to_string(kMaxHeaderSize))
                    .with_offset(0));
  }
  if (n > source.size() - 8) {
    return fail(Error(ErrorKind::InvalidHeaderLength, "invalid header length: " + std::to_string(n) + " header bytes do not fit in a file of " +
                                                          std::to_string(source.size()) + " bytes")
                    .with_offset(0));
  }

  // n <= 100 MB and n fits in the file, so this allocation is justified by the input. The bytes are
  // copied once, into a padded buffer the JSON reader reads in place and the Header then keeps (names
  // and metadata are views into it, unescaped in place); checking a copy also means a file changing
  // under a mapping cannot change what was validated.
  const std::size_t size = static_cast<std::size_t>(n) + json::kJsonPadding;
  if (size > memory_budget()) return fail(allocate_uninitialized(size, "header").error());  // says why
  std::shared_ptr<HeaderBuilder::Storage> storage;
  try {
    storage = std::make_shared<HeaderBuilder::Storage>(static_cast<std::size_t>(n));
  } catch (const std::bad_alloc&) {
    return fail(Error(ErrorKind::ResourceLimit, "out of memory reading a header of " + std::to_string(n) + " bytes"));
  }
  char* text = storage->text();
  SW_RETURN_IF_ERROR(source.read_at(8, std::as_writable_bytes(std::span<char>(text, static_cast<std::size_t>(n)))));

  HeaderJsonOptions json_options;
  json_options.reject_unknown_fields = options.reject_unknown_fields;
  json_options.max_depth = kMaxJsonDepth - 1;  // serde_json fails on reaching its limit
  if (auto status = parse_safetensors_header_padded(text, static_cast<std::size_t>(n), json_options, source, storage->raw); !status.is_ok()) {
    Error e = std::move(status).error();
    if (!e.context().offset && e.context().tensor.empty()) e.with_offset(8);
    return fail(std::move(e));
  }
  auto built = HeaderBuilder::build(source, n, std::move(storage));
  if (!built.is_ok()) return fail(std::move(built).error());
  return built;
}

}  // namespace safeweights::safetensors
