// LoadPlan: where each tensor goes and how the reading is cut into chunks (safeweights/loader.h).
#include <algorithm>
#include <string>
#include <unordered_map>

#include "core/status_macros.h"
#include "safeweights/loader.h"

namespace safeweights {
namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kPackAlign = 64;
constexpr std::uint64_t kDefaultChunk = 16u << 20;
// A group of tensors keeps its file layout when the tensors fill at least this share of the byte range
// they span (otherwise the gaps would be read for nothing).
constexpr double kDenseShare = 0.9;

std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

// Bytes per element for alignment purposes: a block type's tensors are byte arrays.
std::uint64_t element_alignment(TensorType type) {
  const TensorTypeInfo& info = type_info(type);
  if (info.is_block() || info.bits < 8) return 1;
  return info.bits / 8;
}

// numpy.array_split: the first (n % world) parts get one more row.
std::pair<std::uint64_t, std::uint64_t> split_rows(std::uint64_t n, std::uint64_t rank, std::uint64_t world) {
  const std::uint64_t base = n / world, extra = n % world;
  const std::uint64_t begin = rank * base + std::min(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

}  // namespace

class PlanBuilder {
 public:
  PlanBuilder(LoadPlan& plan, const LoaderOptions& options) : plan_(plan), options_(options) {
    plan_.options_ = options;
    plan_.chunk_bytes_ = align_up(options.chunk_bytes ? options.chunk_bytes : kDefaultChunk, kPage);
  }

  Status build(std::span<const TensorEntry> entries) {
    if (options_.shard) SW_RETURN_IF_ERROR(check_shard(*options_.shard));
    plan_.tensors_.reserve(entries.size());
    // Whole tensors, grouped by source in order of first appearance.
    std::vector<const ByteSource*> order;
    std::unordered_map<const ByteSource*, std::vector<std::size_t>> groups;
    std::vector<std::size_t> sharded;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const TensorEntry& e = entries[i];
      SW_RETURN_IF_ERROR(e.source->check_range(e.offset, e.nbytes));
      PlacedTensor t{e, std::vector<std::uint64_t>(e.shape.begin(), e.shape.end()), 0, e.nbytes, false};
      plan_.tensors_.push_back(std::move(t));
      if (is_split(e)) {
        sharded.push_back(i);
        continue;
      }
      auto [it, fresh] = groups.try_emplace(e.source);
      if (fresh) order.push_back(e.source);
      it->second.push_back(i);
    }
    for (const ByteSource* source : order) SW_RETURN_IF_ERROR(place_group(*source, groups[source]));
    plan_.replicated_size_ = align_up(cursor_, kPackAlign);  // where the first shard part goes
    for (std::size_t i : sharded) SW_RETURN_IF_ERROR(place_shard(i));
    plan_.size_ = align_up(cursor_, kPackAlign);
    return Status::ok();
  }

 private:
  Status check_shard(const TensorShard& s) {
    if (s.world == 0 || s.rank >= s.world)
      return Error(ErrorKind::InvalidArgument, "shard rank " + std::to_string(s.rank) + " is not below world size " + std::to_string(s.world));
    return Status::ok();
  }

  bool is_split(const TensorEntry& e) const {
    if (!options_.shard || options_.shard->world == 1) return false;
    const TensorShard& s = *options_.shard;
    return e.shape.size() > s.dim && e.shape[s.dim] >= s.world;
  }

  // Tensors of one source: in the file's layout when they are dense and aligned, else packed.
  Status place_group(const ByteSource& source, std::vector<std::size_t>& members) {
    std::sort(members.begin(), members.end(),
              [&](std::size_t a, std::size_t b) { return plan_.tensors_[a].entry.offset < plan_.tensors_[b].entry.offset; });
    std::uint64_t begin = UINT64_MAX, end = 0, bytes = 0;
    bool aligned = true;
    for (std::size_t i : members) {
      const TensorEntry& e = plan_.tensors_[i].entry;
      if (e.nbytes == 0) continue;
      begin = std::min(begin, e.offset);
      end = std::max(end, e.offset + e.nbytes);
      bytes += e.nbytes;
      aligned = aligned && e.offset % element_alignment(e.type) == 0;
    }
    if (bytes == 0) return place_packed(members);
    const std::uint64_t base = layout_base(source, begin);
    const bool dense = static_cast<double>(bytes) >= kDenseShare * static_cast<double>(end - base);
    if (!aligned || !dense) return place_packed(members);

    const std::uint64_t region = align_up(cursor_, kPage);
    for (std::size_t i : members) {
      PlacedTensor& t = plan_.tensors_[i];
      t.offset = t.entry.nbytes == 0 ? region : region + (t.entry.offset - base);
    }
    // Chunk boundaries at multiples of the chunk size in the underlying file, so that chunks start on
    // page boundaries there (O_DIRECT) and never share a page (registration of a mapping).
    const std::uint64_t chunk = plan_.chunk_bytes_;
    const auto file = source.file_region();
    const std::uint64_t shift = file ? file->offset : 0;
    for (std::uint64_t at = base; at < end;) {
      const std::uint64_t stop = std::min(end, ((shift + at) / chunk + 1) * chunk - shift);
      add_range(source, at, stop - at, region + (at - base));
      at = stop;
    }
    cursor_ = region + (end - base);
    return Status::ok();
  }

  // Where the file layout starts: the first tensor rounded down to a page boundary of the underlying
  // file (so O_DIRECT reads line up), or to 64 bytes when the source starts later than that page.
  static std::uint64_t layout_base(const ByteSource& source, std::uint64_t first) {
    const auto region = source.file_region();
    const std::uint64_t file_offset = (region ? region->offset : 0) + first;
    const std::uint64_t back = file_offset % kPage;
    if (back <= first) return first - back;
    return first - first % kPackAlign;
  }

  Status place_packed(const std::vector<std::size_t>& members) {
    for (std::size_t i : members) {
      PlacedTensor& t = plan_.tensors_[i];
      t.offset = align_up(cursor_, kPackAlign);
      cursor_ = t.offset + t.nbytes;
      for (std::uint64_t at = 0; at < t.nbytes; at += plan_.chunk_bytes_)
        add_range(*t.entry.source, t.entry.offset + at, std::min(plan_.chunk_bytes_, t.nbytes - at), t.offset + at);
    }
    return Status::ok();
  }

  // This rank's rows along the shard dimension; read as slices of whole dimension-0 rows per chunk.
  Status place_shard(std::size_t i) {
    PlacedTensor& t = plan_.tensors_[i];
    const TensorShard& s = *options_.shard;
    const auto [first, last] = split_rows(t.shape[s.dim], s.rank, s.world);
    t.shape[s.dim] = last - first;
    t.sharded = true;
    auto nbytes = tensor_nbytes(t.entry.type, t.shape);
    if (!nbytes.is_ok()) return error_of(nbytes).with_tensor(std::string(t.entry.name));
    t.nbytes = *nbytes;
    t.offset = align_up(cursor_, kPackAlign);
    cursor_ = t.offset + t.nbytes;
    if (t.nbytes == 0) return Status::ok();
    const auto index = static_cast<std::int64_t>(i);
    if (s.dim == 0) {
      // Rows of dimension 0 are contiguous in the file: plain ranges.
      const std::uint64_t row = t.nbytes / t.shape[0];
      for (std::uint64_t at = 0; at < t.nbytes; at += plan_.chunk_bytes_)
        add_range(*t.entry.source, t.entry.offset + first * row + at, std::min(plan_.chunk_bytes_, t.nbytes - at), t.offset + at);
      return Status::ok();
    }
    const std::uint64_t rows = t.shape[0];
    const std::uint64_t row_bytes = t.nbytes / rows;
    const std::uint64_t per_chunk = std::max<std::uint64_t>(1, plan_.chunk_bytes_ / std::max<std::uint64_t>(row_bytes, 1));
    for (std::uint64_t r = 0; r < rows; r += per_chunk) {
      const std::uint64_t stop = std::min(rows, r + per_chunk);
      LoadChunk c{t.entry.source, 0, (stop - r) * row_bytes, t.offset + r * row_bytes, index, r, stop};
      plan_.chunks_.push_back(c);
      plan_.read_bytes_ += c.length;
    }
    return Status::ok();
  }

  void add_range(const ByteSource& source, std::uint64_t offset, std::uint64_t length, std::uint64_t dst) {
    if (length == 0) return;
    plan_.chunks_.push_back({&source, offset, length, dst, -1, 0, 0});
    plan_.read_bytes_ += length;
  }

  LoadPlan& plan_;
  const LoaderOptions& options_;
  std::uint64_t cursor_ = 0;
};

Result<LoadPlan> LoadPlan::make(std::span<const TensorEntry> entries, const LoaderOptions& options) {
  LoadPlan plan;
  PlanBuilder builder(plan, options);
  SW_RETURN_IF_ERROR(builder.build(entries));
  return plan;
}

Result<LoadPlan> LoadPlan::make(const TensorFile& file, const LoaderOptions& options) {
  auto plan = make(file.tensors(), options);
  if (!plan.is_ok()) return error_of(plan).with_file(file.name());
  return plan;
}

SliceSpec LoadPlan::shard_spec(const LoadChunk& chunk) const {
  const PlacedTensor& t = tensors_[static_cast<std::size_t>(chunk.tensor)];
  const TensorShard& s = *options_.shard;
  const auto [first, last] = split_rows(t.entry.shape[s.dim], s.rank, s.world);
  SliceSpec spec;
  spec.items.push_back(SliceItem::range(static_cast<std::int64_t>(chunk.row_begin), static_cast<std::int64_t>(chunk.row_end)));
  for (unsigned d = 1; d < s.dim; ++d) spec.items.push_back(SliceItem::range());
  spec.items.push_back(SliceItem::range(static_cast<std::int64_t>(first), static_cast<std::int64_t>(last)));
  return spec;
}

}  // namespace safeweights
