// Counting this test binary's allocations and their peak bytes (count_allocations.cpp replaces the global operator new).
#pragma once

#include <cstddef>

namespace swt {

// Every operator new from here to stop_counting_allocations() is counted, on any thread.
void start_counting_allocations() noexcept;
// The count since start_counting_allocations().
std::size_t stop_counting_allocations() noexcept;

// The most bytes allocated at once (operator new's blocks, as malloc_usable_size() sizes them) above
// what was allocated at start_measuring_peak(), until stop_measuring_peak(), on any thread: what a
// call costs at its worst, whatever it frees on the way.
void start_measuring_peak() noexcept;
std::size_t stop_measuring_peak() noexcept;

}  // namespace swt
