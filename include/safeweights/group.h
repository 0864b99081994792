// safeweights/group.h — loading across a process group: the group reads each needed byte once.
//
// Without a group, every data-parallel or replicated process reads the whole checkpoint: eight ranks
// on a node read it eight times from the same disk or bucket. A group load splits the reading instead:
// each rank reads a disjoint part of the bytes the group needs into its own destination, and the rest
// reaches it through the group's collectives (GroupTransport: torch.distributed in the Python package,
// or whatever connects the processes of a C++ program).
//
// Which rank reads which bytes (GroupPlan). Every rank makes its own LoadPlan (loader.h) of the same
// tensors, and the ranks first compare what their plans place (a hash of the placement and the chunks
// of each): when the plans are identical (no shard, or the same shard on every rank) the whole
// destination is shared; when they differ only in their shard parts (tensor-parallel ranks, each with
// its own LoaderOptions::shard rank), the shared bytes are the tensors read whole,
// [0, LoadPlan::replicated_size()), and each rank reads its own shard part itself (those bytes are
// needed by that rank alone). The shared bytes are cut into `size` contiguous destination ranges that
// hold the same number of bytes to read (cuts on 4 KiB boundaries within file ranges, on row
// boundaries within shard slices); rank r reads range r. So the group reads every needed byte once.
//
// A load (load_into_group, load_to_device_group), on every rank, in the same order:
//   1. all_gather of a status record: each rank's plan hashes and sizes, or the error that kept it from
//      making a plan (fail_group). Any error, or plans that agree on no shared bytes: every rank fails.
//   2. the exchange, overlapped with the reading: each rank's range is cut into pieces
//      (GroupOptions::piece_bytes of reading each), broadcast round-robin (piece 0 of rank 0, of rank 1,
//      ..., then piece 1 of each) while a thread of each rank reads its pieces in that order (with
//      load_into / load_to_device of the plan restricted to the piece), and then its own bytes. A
//      broadcast of a piece waits until its rank has read it; the others' pieces arrive meanwhile.
//   3. all_gather of a status record: whether each rank's reads succeeded. Any failure: every rank fails,
//      naming the rank and its error (the bytes broadcast from a failed piece were never used).
// Traffic: each rank reads (shared / size + its own bytes) and receives shared x (size - 1) / size
// bytes through the transport; the load takes about the longer of the two, not their sum (plus the
// last round of broadcasts, which follows the last reads).
//
// Failures. A rank that fails before its plan exists (its file does not open) calls fail_group, which
// takes part in step 1, so that the others fail at once rather than wait. A rank that dies or stalls
// is the transport's to detect: every call of a GroupTransport must have a deadline (the Python
// transport waits on each torch.distributed collective with a timeout) and fail rather than wait
// forever; the load returns its error. A failed load leaves the destination's contents unspecified.
//
// Composing with tensor parallelism: the group given with per-rank shards must be the shard world (the
// group of ranks that differ only in their shard rank) or a group whose ranks all hold the same shard
// (the data-parallel replicas of one tensor-parallel rank). A group mixing both (2 x 2) agrees on the
// replicated bytes only, and each rank reads its shard part itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "safeweights/device.h"
#include "safeweights/error.h"
#include "safeweights/export.h"
#include "safeweights/loader.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

// The collectives of a group load. Every rank calls the same ones, in the same order, with the same
// lengths. Each call must end within a deadline, failing when a peer is gone or late.
class GroupTransport {
 public:
  virtual ~GroupTransport() = default;
  virtual std::uint64_t rank() const = 0;
  virtual std::uint64_t size() const = 0;
  // Every rank's `mine` (the same length on every rank), in rank order, into `all` (size() x
  // mine.size() bytes).
  virtual Status all_gather(std::span<const std::byte> mine, std::span<std::byte> all) = 0;
  // `length` bytes of the load's destination at `data` (host or device memory, as the destination is)
  // from rank `root` to every rank; the same offset in the destination on every rank.
  virtual Status broadcast(void* data, std::uint64_t length, std::uint64_t root) = 0;
};

// The destination range [begin, end) a rank reads and then gives to the others, and the bytes it
// reads there (0: the range holds only padding, and nothing is sent).
struct GroupPart {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t read_bytes = 0;
};

// One broadcast: [begin, end) of the destination, read by `rank` (read_bytes > 0).
struct GroupPiece {
  std::uint64_t rank = 0;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t read_bytes = 0;
};

struct GroupOptions {
  std::uint64_t piece_bytes = 0;  // bytes a rank reads per broadcast (0: 64 MiB)
};

class GroupPlan {
 public:
  // The first `shared` bytes of plan's destination are laid out alike on every rank and are split into
  // `size` parts; the chunks beyond are this rank's own. InvalidArgument when rank >= size or a chunk
  // straddles `shared`.
  static Result<GroupPlan> make(const LoadPlan& plan, std::uint64_t shared, std::uint64_t rank, std::uint64_t size, const GroupOptions& options = {});

  std::span<const GroupPart> parts() const noexcept { return parts_; }
  // Every rank's pieces, in the order they are broadcast.
  std::span<const GroupPiece> pieces() const noexcept { return pieces_; }
  // What this rank reads: the plan with only its chunks (its part of the shared bytes, pieces of the
  // plan's chunks, and its own bytes); tensors and size as the plan's.
  const LoadPlan& reads() const noexcept { return reads_; }
  // The same, cut: what it reads for each of its pieces (in broadcast order), then its own bytes.
  std::span<const LoadPlan> steps() const noexcept { return steps_; }
  std::uint64_t shared() const noexcept { return shared_; }
  std::uint64_t rank() const noexcept { return rank_; }

 private:
  static LoadPlan sub_plan(const LoadPlan& plan, std::vector<LoadChunk> chunks);
  LoadPlan reads_;
  std::vector<LoadPlan> steps_;
  std::vector<GroupPart> parts_;
  std::vector<GroupPiece> pieces_;
  std::uint64_t shared_ = 0;
  std::uint64_t rank_ = 0;
};

struct GroupLoadStats {
  std::uint64_t read_bytes = 0;      // bytes this rank read from the sources
  std::uint64_t shared_bytes = 0;    // destination bytes every rank holds alike (0 in a group of one)
  std::uint64_t received_bytes = 0;  // bytes the transport brought to this rank
  double read_seconds = 0;           // from the start of step 2 until this rank's reads ended
  double exchange_seconds = 0;       // from the start of step 2 until its last broadcast ended
  DeviceLoadStats device;            // load_to_device_group: the stats of this rank's reads (summed)
};

// A group load into host memory (dst.size() == plan.size()).
Result<GroupLoadStats> load_into_group(const LoadPlan& plan, std::span<std::byte> dst, GroupTransport& group, const GroupOptions& options = {});
// A group load into device memory; the transport's broadcasts get device addresses.
Result<GroupLoadStats> load_to_device_group(const LoadPlan& plan, Device& device, void* dst, std::uint64_t dst_size, GroupTransport& group,
                                            const DeviceLoadOptions& options = {}, const GroupOptions& group_options = {});
// For a rank that cannot take part (its file did not open, its plan failed): takes part in the first
// step with `why`, so that every other rank's load fails instead of waiting; returns `why`.
Status fail_group(GroupTransport& group, Error why);

SAFEWEIGHTS_API_END
}  // namespace safeweights
