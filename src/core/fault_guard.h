// Reads from a file mapping that survive the file shrinking underneath. Internal (core: slices copy
// from mappings too).
//
// When another process truncates a mapped file, touching a page past the new end raises SIGBUS.
// Every read the library itself makes from a mapping runs inside a guarded section: a process-wide
// SIGBUS handler (installed once, on first use) jumps out of the section, which then reports an
// IoError naming the file instead of the process dying. Faults outside a guarded section (a view the
// caller holds, another library's mapping) go to whatever handler was installed before ours, or kill
// the process as they would have without us. The guard can be turned off (set_mapping_fault_guard in
// safeweights/source.h, or SAFEWEIGHTS_NO_FAULT_GUARD=1): then sections run unguarded and no handler is
// installed.
//
// The work done inside a section must be plain copying or arithmetic over the mapped bytes: the jump
// skips the rest of it, so it must not allocate, lock, or own anything with a destructor. The cost is
// one sigsetjmp (no system call) per section, so callers guard large chunks, not single bytes.
//
// Thread safety: sections are per thread and may nest; any number of threads may be in one at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "safeweights/error.h"

namespace safeweights {

// Runs fn(ctx). False when a SIGBUS interrupted it (fn did not finish), true otherwise.
bool run_guarded(void (*fn)(void*), void* ctx) noexcept;

// run_guarded over any callable (a lambda capturing by reference); the same rules apply to it.
template <typename F>
bool guarded(F&& f) noexcept {
  using Fn = std::remove_reference_t<F>;
  return run_guarded([](void* p) { (*static_cast<Fn*>(p))(); }, const_cast<void*>(static_cast<const void*>(&f)));
}

// The error a guarded read reports: the mapped input `name` ended before `offset` + the bytes wanted.
Error mapping_shrank(const std::string& name, std::uint64_t offset);

// memcpy of n bytes from a mapping of `name` (src is at `offset` in it), or the mapping_shrank error.
Status guarded_copy(std::byte* dst, const std::byte* src, std::size_t n, const std::string& name, std::uint64_t offset);

}  // namespace safeweights
