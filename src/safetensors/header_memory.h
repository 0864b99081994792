// Memory for a parsed safetensors header. Internal.
//
// A large header's arrays (its text, the tensor entries, the shapes, the metadata) are written once,
// front to back, into memory reserved from the header's length. Faulting that in 4 KiB at a time was most
// of a first parse (a 2.4 MB header took about 1,000 page faults). Arrays of 1 MiB and more therefore
// come straight from mmap, 2 MiB-aligned, with transparent huge pages asked for (MADV_HUGEPAGE; where the
// system does not give them, nothing changes): a few faults per array, and pages never touched are never
// committed. Smaller ones come from operator new as usual.
#pragma once

#include <cstddef>
#include <new>

namespace safeweights::safetensors {

// Throws std::bad_alloc on failure, as operator new does (the header parser turns it into ResourceLimit).
void* allocate_pages(std::size_t bytes);
void free_pages(void* p, std::size_t bytes) noexcept;

template <typename T>
struct PageAllocator {
  using value_type = T;
  PageAllocator() = default;
  template <typename U>
  PageAllocator(const PageAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(allocate_pages(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { free_pages(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const PageAllocator<U>&) const noexcept {
    return true;
  }
};

// An uninitialised buffer from allocate_pages.
class PageBuffer {
 public:
  explicit PageBuffer(std::size_t bytes) : p_(static_cast<char*>(allocate_pages(bytes))), size_(bytes) {}
  PageBuffer(PageBuffer&& o) noexcept : p_(o.p_), size_(o.size_) { o.p_ = nullptr; }
  PageBuffer& operator=(PageBuffer&&) = delete;
  ~PageBuffer() {
    if (p_) free_pages(p_, size_);
  }
  char* data() const noexcept { return p_; }

 private:
  char* p_;
  std::size_t size_;
};

}  // namespace safeweights::safetensors
