// Loading across a process group (safeweights/group.h): which rank reads which bytes (GroupPlan), the
// status rounds, and the exchange.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "core/hash.h"
#include "core/status_macros.h"
#include "safeweights/group.h"

namespace safeweights {
namespace {

// Cuts between parts fall on 4 KiB boundaries of the destination (which are the file's in a dense
// region: O_DIRECT reads stay aligned), or on 64-byte ones when the parts are small.
constexpr std::uint64_t kCutAlign = 4096;
constexpr std::uint64_t kSmallCutAlign = 64;
constexpr std::uint64_t kSmallPart = 1u << 20;
constexpr std::uint64_t kPieceBytes = 64u << 20;
// A fixed seed: the plan hashes are compared between processes.
constexpr std::uint64_t kPlanSeed = 0x5afe'3e16'47c0'0001ull;

// One rank's record of a status round: fixed-size fields, then as much of its error's text and file as
// fit (a peer's error names the failed rank's file, so that a missing file is FileNotFound there too).
struct Record {
  static constexpr std::size_t kWords = 5;
  static constexpr std::size_t kText = 512;
  static constexpr std::size_t kFile = 512;
  static constexpr std::size_t kBytes = kWords * 8 + kText + kFile;
  std::uint64_t failed = 0;  // 0: ok; else 1 + the ErrorKind
  std::uint64_t whole = 0;   // hash of the whole plan
  std::uint64_t prefix = 0;  // hash of the replicated prefix
  std::uint64_t size = 0;
  std::uint64_t replicated = 0;
  std::string text;
  std::string file;

  void write(std::byte* out) const {
    const std::uint64_t words[kWords] = {failed, whole, prefix, size, replicated};
    std::memset(out, 0, kBytes);
    std::memcpy(out, words, sizeof words);
    std::memcpy(out + sizeof words, text.data(), std::min(text.size(), kText - 1));
    std::memcpy(out + sizeof words + kText, file.data(), std::min(file.size(), kFile - 1));
  }
  static Record read(const std::byte* in) {
    std::uint64_t words[kWords];
    std::memcpy(words, in, sizeof words);
    const char* t = reinterpret_cast<const char*>(in + sizeof words);
    const char* f = t + kText;
    return {words[0], words[1], words[2], words[3], words[4], std::string(t, strnlen(t, kText)), std::string(f, strnlen(f, kFile))};
  }
  static Record of(const Error& e) { return {1 + static_cast<std::uint64_t>(e.kind()), 0, 0, 0, 0, e.to_string(), e.context().file}; }
};

// Every rank's record.
Result<std::vector<Record>> exchange(GroupTransport& group, const Record& mine) {
  std::vector<std::byte> out(Record::kBytes), all(Record::kBytes * group.size());
  mine.write(out.data());
  SW_RETURN_IF_ERROR(group.all_gather(out, all));
  std::vector<Record> records;
  for (std::uint64_t r = 0; r < group.size(); ++r) records.push_back(Record::read(all.data() + r * Record::kBytes));
  return records;
}

// The first failed rank's error, as every other rank reports it.
Status first_failure(const std::vector<Record>& records, std::uint64_t self, const char* what) {
  for (std::size_t r = 0; r < records.size(); ++r) {
    if (records[r].failed == 0 || r == self) continue;
    const auto kind = static_cast<ErrorKind>(records[r].failed - 1);
    Error e(kind, "rank " + std::to_string(r) + " of " + std::to_string(records.size()) + " " + what + ": " + records[r].text);
    if (!records[r].file.empty()) e.with_file(records[r].file);
    return e;
  }
  return Status::ok();
}

// A hash of what the plan places below `limit` and of the chunks that fill it: equal on two ranks when
// they lay out and read those bytes alike (the files' names may differ: node-local copies).
std::uint64_t plan_hash(const LoadPlan& plan, std::uint64_t limit) {
  std::string s;
  auto put = [&](std::uint64_t v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(limit);
  for (const PlacedTensor& t : plan.tensors()) {
    if (t.offset >= limit) continue;
    s.append(t.entry.name);
    put(static_cast<std::uint64_t>(t.entry.type));
    for (std::uint64_t d : t.shape) put(d);
    put(t.offset);
    put(t.nbytes);
    put(t.entry.offset);
    if (t.sharded) {  // which part: a slice chunk names its rows, not the columns the shard rank takes
      const TensorShard& shard = *plan.options().shard;
      for (std::uint64_t v : {std::uint64_t{shard.dim}, shard.rank, shard.world}) put(v);
    }
  }
  for (const LoadChunk& c : plan.chunks()) {
    if (c.dst >= limit) continue;
    for (std::uint64_t v : {c.offset, c.length, c.dst, static_cast<std::uint64_t>(c.tensor), c.row_begin, c.row_end}) put(v);
  }
  return hash_key(s, kPlanSeed);
}

Record plan_record(const LoadPlan& plan) {
  return {0, plan_hash(plan, plan.size() + 1), plan_hash(plan, plan.replicated_size()), plan.size(), plan.replicated_size(), {}, {}};
}

// The bytes every rank holds alike: the whole destination when the plans agree, else the replicated
// prefix when that agrees.
Result<std::uint64_t> shared_bytes(const std::vector<Record>& records) {
  const Record& a = records.front();
  const auto same = [&](auto field) { return std::all_of(records.begin(), records.end(), [&](const Record& r) { return field(r) == field(a); }); };
  if (same([](const Record& r) { return r.whole; }) && same([](const Record& r) { return r.size; })) return a.size;
  if (same([](const Record& r) { return r.prefix; }) && same([](const Record& r) { return r.replicated; })) return a.replicated;
  return Error(ErrorKind::InvalidArgument,
               "the ranks of the group load different tensors (their plans agree on no bytes): every rank must load the same files, "
               "with the same shard dimension and world");
}

// Where a piece of `c` may end at or before destination offset `at` (c.dst <= at < c.dst + c.length):
// a multiple of `align` in a file range, a row boundary in a shard slice; c.dst when there is none.
std::uint64_t cut_at(const LoadChunk& c, std::uint64_t at, std::uint64_t align) {
  if (c.tensor >= 0) {
    const std::uint64_t row = c.length / (c.row_end - c.row_begin);
    return c.dst + (at - c.dst) / row * row;
  }
  return std::max(c.dst, at / align * align);
}

// `c` from destination offset `from` to `to` (both inside it; on row boundaries for a shard slice).
LoadChunk piece_of(const LoadChunk& c, std::uint64_t from, std::uint64_t to) {
  LoadChunk p = c;
  if (c.tensor >= 0) {
    const std::uint64_t row = c.length / (c.row_end - c.row_begin);
    p.row_begin = c.row_begin + (from - c.dst) / row;
    p.row_end = c.row_begin + (to - c.dst) / row;
  } else {
    p.offset = c.offset + (from - c.dst);
  }
  p.dst = from;
  p.length = to - from;
  return p;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Status run_group(const LoadPlan& plan, GroupTransport& group, const GroupOptions& options, GroupLoadStats& stats,
                 const std::function<Status(const LoadPlan&)>& read, const std::function<std::byte*(std::uint64_t)>& address) {
  const std::uint64_t rank = group.rank(), size = group.size();
  if (size == 0 || rank >= size)
    return fail_group(group,
                      Error(ErrorKind::InvalidArgument, "group rank " + std::to_string(rank) + " is not below its size " + std::to_string(size)));
  // 1. agree on the shared bytes
  SW_ASSIGN_OR_RETURN(const std::vector<Record> planned, exchange(group, plan_record(plan)));
  SW_RETURN_IF_ERROR(first_failure(planned, rank, "could not plan its load"));
  SW_ASSIGN_OR_RETURN(const std::uint64_t shared, shared_bytes(planned));
  SW_ASSIGN_OR_RETURN(const GroupPlan gp, GroupPlan::make(plan, shared, rank, size, options));

  // 2. a thread reads this rank's steps in order while this one broadcasts every piece in turn, each of
  // this rank's once it is read. A failed read is not a reason to stop: the others expect the pieces,
  // and step 3 tells them.
  const auto steps = gp.steps();
  std::mutex mu;
  std::condition_variable cv;
  std::size_t done = 0;
  Status read_error;
  std::atomic<bool> stop{false};
  const auto t0 = std::chrono::steady_clock::now();
  std::thread reader([&] {
    for (const LoadPlan& step : steps) {
      Status s = stop ? Status(Error(ErrorKind::Interrupted, "the group's exchange failed")) : read(step);
      std::lock_guard<std::mutex> lock(mu);
      if (!s.is_ok() && read_error.is_ok()) read_error = std::move(s);
      ++done;
      cv.notify_all();
    }
    stats.read_seconds = seconds_since(t0);
  });
  Status sent;
  std::size_t own = 0;
  for (const GroupPiece& p : gp.pieces()) {
    if (size == 1) break;
    if (p.rank == rank) {
      std::unique_lock<std::mutex> lock(mu);
      ++own;
      cv.wait(lock, [&] { return done >= own; });
    }
    sent = group.broadcast(address(p.begin), p.end - p.begin, p.rank);
    if (!sent.is_ok()) break;
    if (p.rank != rank) stats.received_bytes += p.end - p.begin;
  }
  stats.exchange_seconds = seconds_since(t0);
  if (!sent.is_ok()) stop = true;
  reader.join();
  SW_RETURN_IF_ERROR(sent);
  // 3. tell the others how the reads went
  SW_ASSIGN_OR_RETURN(const std::vector<Record> read_status, exchange(group, read_error.is_ok() ? Record{} : Record::of(read_error.error())));
  SW_RETURN_IF_ERROR(read_error);
  SW_RETURN_IF_ERROR(first_failure(read_status, rank, "failed to read its part of the load"));
  stats.read_bytes = gp.reads().read_bytes();
  stats.shared_bytes = size > 1 ? shared : 0;
  return Status::ok();
}

}  // namespace

// A plan of `chunks` over `plan`'s destination, holding only the tensors its slice chunks name.
LoadPlan GroupPlan::sub_plan(const LoadPlan& plan, std::vector<LoadChunk> chunks) {
  LoadPlan out;
  out.size_ = plan.size();
  out.replicated_size_ = plan.replicated_size();
  out.chunk_bytes_ = plan.chunk_bytes();
  out.options_ = plan.options();
  std::unordered_map<std::int64_t, std::int64_t> index;
  for (LoadChunk& c : chunks) {
    out.read_bytes_ += c.length;
    if (c.tensor < 0) continue;
    auto [it, fresh] = index.try_emplace(c.tensor, static_cast<std::int64_t>(out.tensors_.size()));
    if (fresh) out.tensors_.push_back(plan.tensors()[static_cast<std::size_t>(c.tensor)]);
    c.tensor = it->second;
  }
  out.chunks_ = std::move(chunks);
  return out;
}

Result<GroupPlan> GroupPlan::make(const LoadPlan& plan, std::uint64_t shared, std::uint64_t rank, std::uint64_t size, const GroupOptions& options) {
  if (size == 0 || rank >= size)
    return Error(ErrorKind::InvalidArgument, "group rank " + std::to_string(rank) + " is not below its size " + std::to_string(size));
  if (shared > plan.size()) return Error(ErrorKind::InvalidArgument, "the shared bytes pass the end of the plan's destination");
  const std::uint64_t piece_bytes = options.piece_bytes ? options.piece_bytes : kPieceBytes;
  GroupPlan gp;
  gp.shared_ = shared;
  gp.rank_ = rank;

  // The shared chunks in destination order, and the bytes they read.
  std::vector<const LoadChunk*> common;
  std::vector<LoadChunk> own;  // beyond the shared bytes: this rank's alone
  std::uint64_t total = 0;
  for (const LoadChunk& c : plan.chunks()) {
    if (c.dst + c.length <= shared) {
      common.push_back(&c);
      total += c.length;
    } else if (c.dst >= shared) {
      own.push_back(c);
    } else {
      return Error(ErrorKind::InvalidArgument, "a chunk of the plan straddles the end of the shared bytes");
    }
  }
  std::sort(common.begin(), common.end(), [](const LoadChunk* a, const LoadChunk* b) { return a->dst < b->dst; });

  // Cut k ends part k: where the bytes read before it first reach (k + 1) x total / size.
  const std::uint64_t align = total / size >= kSmallPart ? kCutAlign : kSmallCutAlign;
  std::vector<std::uint64_t> cuts;
  std::uint64_t before = 0;
  std::size_t i = 0;
  for (std::uint64_t k = 0; k + 1 < size; ++k) {
    const std::uint64_t target = (k + 1) * total / size;  // below total: chunk i exists
    while (i < common.size() && before + common[i]->length <= target) before += common[i++]->length;
    const std::uint64_t cut = i < common.size() ? cut_at(*common[i], common[i]->dst + (target - before), align) : shared;
    cuts.push_back(std::max(cut, cuts.empty() ? 0 : cuts.back()));
  }
  cuts.push_back(shared);
  for (std::uint64_t k = 0; k < size; ++k) gp.parts_.push_back({k == 0 ? 0 : cuts[k - 1], cuts[k], 0});

  // Every shared chunk cut at the parts' boundaries, the pieces of each part in order; within a part,
  // a piece ends at the first chunk boundary where it holds piece_bytes of reading.
  std::vector<std::vector<GroupPiece>> pieces(size);
  std::vector<std::vector<LoadChunk>> mine;  // this rank's chunks, per piece
  for (const LoadChunk* c : common) {
    std::uint64_t from = c->dst;
    const std::uint64_t end = c->dst + c->length;
    auto part = static_cast<std::size_t>(std::upper_bound(cuts.begin(), cuts.end(), from) - cuts.begin());
    while (from < end) {
      const std::uint64_t to = std::min(end, cuts[part]);
      if (to > from) {
        const LoadChunk piece = piece_of(*c, from, to);
        gp.parts_[part].read_bytes += piece.length;
        auto& list = pieces[part];
        if (list.empty() || list.back().read_bytes >= piece_bytes) {
          if (!list.empty()) list.back().end = from;
          list.push_back({part, list.empty() ? gp.parts_[part].begin : from, 0, 0});
          if (part == rank) mine.emplace_back();
        }
        list.back().read_bytes += piece.length;
        if (part == rank) mine.back().push_back(piece);
      }
      from = to;
      ++part;
    }
  }
  for (std::uint64_t k = 0; k < size; ++k)
    if (!pieces[k].empty()) pieces[k].back().end = gp.parts_[k].end;
  // Broadcast order: piece j of every rank, then piece j + 1.
  for (std::size_t j = 0;; ++j) {
    bool any = false;
    for (std::uint64_t k = 0; k < size; ++k) {
      if (j >= pieces[k].size()) continue;
      gp.pieces_.push_back(pieces[k][j]);
      any = true;
    }
    if (!any) break;
  }

  std::vector<LoadChunk> all;
  for (auto& step : mine) {
    all.insert(all.end(), step.begin(), step.end());
    gp.steps_.push_back(sub_plan(plan, std::move(step)));
  }
  if (!own.empty()) {
    all.insert(all.end(), own.begin(), own.end());
    gp.steps_.push_back(sub_plan(plan, std::move(own)));
  }
  gp.reads_ = sub_plan(plan, std::move(all));
  return gp;
}

Status fail_group(GroupTransport& group, Error why) {
  auto records = exchange(group, Record::of(why));
  (void)records;  // the others learn of it; this rank's own error is what it reports
  return why;
}

Result<GroupLoadStats> load_into_group(const LoadPlan& plan, std::span<std::byte> dst, GroupTransport& group, const GroupOptions& options) {
  GroupLoadStats stats;
  if (dst.size() != plan.size())
    return fail_group(group, Error(ErrorKind::InvalidArgument,
                                   "destination has " + std::to_string(dst.size()) + " bytes, the plan needs " + std::to_string(plan.size())));
  SW_RETURN_IF_ERROR(run_group(
      plan, group, options, stats, [&](const LoadPlan& reads) { return load_into(reads, dst); },
      [&](std::uint64_t offset) { return dst.data() + offset; }));
  return stats;
}

Result<GroupLoadStats> load_to_device_group(const LoadPlan& plan, Device& device, void* dst, std::uint64_t dst_size, GroupTransport& group,
                                            const DeviceLoadOptions& options, const GroupOptions& group_options) {
  GroupLoadStats stats;
  if (dst_size != plan.size())
    return fail_group(group, Error(ErrorKind::InvalidArgument,
                                   "device destination has " + std::to_string(dst_size) + " bytes, the plan needs " + std::to_string(plan.size())));
  auto* base = static_cast<std::byte*>(dst);
  SW_RETURN_IF_ERROR(run_group(
      plan, group, group_options, stats,
      [&](const LoadPlan& reads) -> Status {
        SW_ASSIGN_OR_RETURN(const DeviceLoadStats s, load_to_device(reads, device, dst, dst_size, options));
        DeviceLoadStats& sum = stats.device;  // only the reading thread writes it
        sum.strategy = s.strategy;
        sum.direct = sum.direct || s.direct;
        sum.staged_bytes += s.staged_bytes;
        sum.registered_bytes += s.registered_bytes;
        sum.file_read_bytes += s.file_read_bytes;
        sum.direct_bytes += s.direct_bytes;
        sum.register_seconds += s.register_seconds;
        sum.unregister_seconds += s.unregister_seconds;
        return Status::ok();
      },
      [&](std::uint64_t offset) { return base + offset; }));
  return stats;
}

}  // namespace safeweights
