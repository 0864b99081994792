// fuzz_pickle — arbitrary bytes as a pickle, through the machine that calls nothing.
//
// Pickle::run must fail cleanly (InvalidPickle, UnsafePickle, ResourceLimit, InvalidCheckpoint or
// NotSupported, with an offset inside the input) or return a root whose graph holds: consumed bytes
// within the input; every tensor has a storage, as many strides as dimensions, at most max_rank of
// them; every storage's view lies inside it. The strict and permissive modes agree when the strict
// one succeeds, and the permissive one never accepts what strict refused for a reason other than a
// global outside the allowlist. Tight limits keep each run small.
#include <cstddef>
#include <cstdint>
#include <unordered_set>

#include "fuzz_common.h"
#include "pytorch/pickle_vm.h"

using namespace safeweights;
using namespace safeweights::pytorch;

namespace {

void check_graph(const Value* v, std::unordered_set<const Value*>& seen, const PickleLimits& limits) {
  if (!seen.insert(v).second) return;
  if (v->kind == Kind::Tensor) {
    FUZZ_CHECK(v->tensor && v->tensor->storage && v->tensor->storage->kind == Kind::Storage);
    FUZZ_CHECK(v->tensor->shape.size() == v->tensor->stride.size());
    FUZZ_CHECK(v->tensor->shape.size() <= limits.max_rank);
  }
  if (v->kind == Kind::Storage) {
    const StorageInfo& s = *v->storage;
    FUZZ_CHECK(s.view_offset <= s.nbytes && s.view_nbytes <= s.nbytes - s.view_offset);
  }
  for (const Value* item : v->items) check_graph(item, seen, limits);
}

void run(std::span<const std::byte> input, PidForm pids) {
  PickleOptions strict;
  strict.pids = pids;
  strict.limits.max_stack = 4096;
  strict.limits.max_memo = 4096;
  strict.limits.max_objects = 1u << 16;
  strict.limits.max_items = 1u << 16;
  strict.limits.max_string = 1u << 16;
  strict.limits.max_text = 1u << 20;
  PickleOptions permissive = strict;
  permissive.allow_unknown = true;
  auto a = Pickle::run(input, strict);
  auto b = Pickle::run(input, permissive);
  if (a.is_ok()) {
    FUZZ_CHECK(b.is_ok());
    FUZZ_CHECK((*a)->end() <= input.size() && (*a)->end() == (*b)->end());
    std::unordered_set<const Value*> seen;
    check_graph((*a)->root(), seen, strict.limits);
    return;
  }
  FUZZ_CHECK(a.error().context().offset.has_value() && *a.error().context().offset <= input.size());
  if (a.error().kind() != ErrorKind::UnsafePickle) FUZZ_CHECK(!b.is_ok());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto input = fuzz::as_bytes(data, size);
  run(input, PidForm::Zip);
  run(input, PidForm::Legacy);
  return 0;
}
