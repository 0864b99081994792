// Loading a plan into host memory (safeweights/loader.h): every chunk read straight into its place in
// the destination by the pool's threads; no staging, no copy after the read.
#include <algorithm>
#include <cstdint>
#include <string>

#include "core/parallel.h"
#include "core/status_macros.h"
#include "load/chunk_reader.h"
#include "safeweights/cancel.h"
#include "safeweights/loader.h"
#include "safeweights/source.h"

namespace safeweights {

Status load_into(const LoadPlan& plan, std::span<std::byte> dst) {
  if (dst.size() != plan.size())
    return Error(ErrorKind::InvalidArgument,
                 "destination has " + std::to_string(dst.size()) + " bytes, the plan needs " + std::to_string(plan.size()));
  const load::ChunkReader reader(plan);
  const auto chunks = plan.chunks();
  for (const LoadChunk& c : chunks)
    if (c.tensor < 0) c.source->hint({c.offset, c.length}, AccessHint::Sequential);
  return parallel_for(chunks.size(), load::loader_threads(plan.options()), [&](std::size_t i) {
    SW_RETURN_IF_ERROR(check_cancelled());
    const LoadChunk& c = chunks[i];
    return reader.read(c, dst.subspan(static_cast<std::size_t>(c.dst), static_cast<std::size_t>(c.length)));
  });
}

Result<HostLoad> load_host(const LoadPlan& plan) {
  const std::uint64_t budget = memory_budget();
  const std::uint64_t limit = plan.options().memory_limit ? std::min(plan.options().memory_limit, budget) : budget;
  if (plan.size() > limit)
    return Error(ErrorKind::ResourceLimit, "loading needs " + std::to_string(plan.size()) + " bytes of host memory; the " +
                                               (limit == budget ? "process's memory budget" : "load's memory limit") + " is " +
                                               std::to_string(limit) + " bytes");
  // Page-aligned, so that O_DIRECT can read into it.
  auto memory = allocate_uninitialized(plan.size() + load::kDirectAlign, "the loaded tensors");
  if (!memory.is_ok()) return std::move(memory).status();
  std::shared_ptr<std::byte[]> owner(std::move(*memory));
  const auto address = reinterpret_cast<std::uintptr_t>(owner.get());
  const std::size_t skip = static_cast<std::size_t>((load::kDirectAlign - address % load::kDirectAlign) % load::kDirectAlign);
  HostLoad out{std::shared_ptr<std::byte[]>(owner, owner.get() + skip), plan.size()};
  SW_RETURN_IF_ERROR(load_into(plan, {out.buffer.get(), static_cast<std::size_t>(out.size)}));
  return out;
}

}  // namespace safeweights
