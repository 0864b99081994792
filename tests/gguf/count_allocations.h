// Counting this test binary's allocations (count_allocations.cpp replaces the global operator new).
#pragma once

#include <cstddef>

namespace swt {

// Every operator new from here to stop_counting_allocations() is counted, on any thread.
void start_counting_allocations() noexcept;
// The count since start_counting_allocations().
std::size_t stop_counting_allocations() noexcept;

}  // namespace swt
