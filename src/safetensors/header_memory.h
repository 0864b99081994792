// Memory for a parsed safetensors header. Internal.
//
// A large header's arrays (its text, the tensor entries, the shapes, the metadata) are written once,
// front to back, into memory reserved from the header's length. Faulting that in 4 KiB at a time was most
// of a first parse (a 2.4 MB header took about 1,000 page faults). Arrays of 1 MiB and more therefore
// come straight from mmap, 2 MiB-aligned, with transparent huge pages asked for (MADV_HUGEPAGE; where the
// system does not give them, nothing changes): a few faults per array, and pages never touched are never
// committed. Smaller ones come from operator new as usual. Header::parse takes one such allocation for
// the text and the bounds of the entries and their shapes (an arena: Region), and puts the name index in
// what the entries left of theirs, so a 2.4 MB header touches three huge pages, not five plus a
// quarter megabyte of small ones.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>

namespace safeweights::safetensors {

// Throws std::bad_alloc on failure, as operator new does (the header parser turns it into ResourceLimit).
void* allocate_pages(std::size_t bytes);
void free_pages(void* p, std::size_t bytes) noexcept;

// A block that an allocator hands out once before asking for pages of its own: a part of one larger
// allocation (the header's arena, which its owner frees), so that the arrays reserved from the header's
// length lie next to each other and share their huge pages.
struct Region {
  void* at = nullptr;
  std::size_t bytes = 0;
  bool taken = false;
};

template <typename T>
struct PageAllocator {
  using value_type = T;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  PageAllocator() = default;
  explicit PageAllocator(Region* block) noexcept : region(block) {}
  template <typename U>
  PageAllocator(const PageAllocator<U>& o) noexcept : region(o.region) {}
  T* allocate(std::size_t n) {
    if (region != nullptr && !region->taken && n <= region->bytes / sizeof(T)) {
      region->taken = true;
      return static_cast<T*>(region->at);
    }
    return static_cast<T*>(allocate_pages(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (region != nullptr && p == region->at) {
      region->taken = false;
    } else {
      free_pages(p, n * sizeof(T));
    }
  }
  template <typename U>
  bool operator==(const PageAllocator<U>& o) const noexcept {
    return region == o.region;
  }
  Region* region = nullptr;
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
