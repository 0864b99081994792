// The global allocation functions of gguf_test, replaced so that the open-path allocation test can count
// them; otherwise operator new is malloc. Every unaligned form is replaced, so that whatever a library
// allocates with (simdjson uses new(std::nothrow)) is freed by the matching delete: under ASan a form left
// out would pair ASan's operator new with this free.
//
// A translation unit of their own: GCC 12 inlines a replacement operator delete defined beside the code
// that calls new and then reports its free() as mismatched with operator new (-Wmismatched-new-delete),
// although the replacement operator new it pairs with is malloc.
#include "count_allocations.h"

#include <malloc.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace {
std::atomic<bool> g_counting{false};
std::atomic<std::size_t> g_allocations{0};
std::atomic<bool> g_measuring{false};
std::atomic<std::int64_t> g_live{0};  // bytes allocated minus bytes freed since start_measuring_peak()
std::atomic<std::int64_t> g_peak{0};

void add_live(std::int64_t bytes) noexcept {
  const std::int64_t now = g_live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  std::int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {}
}
void release(void* p) noexcept {
  if (p != nullptr && g_measuring.load(std::memory_order_relaxed)) add_live(-static_cast<std::int64_t>(::malloc_usable_size(p)));
  std::free(p);
}
}  // namespace

namespace swt {
void start_counting_allocations() noexcept {
  g_allocations = 0;
  g_counting = true;
}
std::size_t stop_counting_allocations() noexcept {
  g_counting = false;
  return g_allocations.load();
}
void start_measuring_peak() noexcept {
  g_live = 0;
  g_peak = 0;
  g_measuring = true;
}
std::size_t stop_measuring_peak() noexcept {
  g_measuring = false;
  return static_cast<std::size_t>(g_peak.load());
}
}  // namespace swt

void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) {
    if (g_measuring.load(std::memory_order_relaxed)) add_live(static_cast<std::int64_t>(::malloc_usable_size(p)));
    return p;
  }
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return ::operator new(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return ::operator new(n, t); }
void operator delete(void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
