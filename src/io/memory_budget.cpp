// Allocations sized by inputs and requests: a budget, and failures as errors (see source.h).
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "core/status_macros.h"
#include "safeweights/source.h"

namespace safeweights {
namespace {

std::uint64_t read_budget() noexcept {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  std::uint64_t budget = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : UINT64_MAX;
  if (const char* env = std::getenv("SAFEWEIGHTS_MEMORY_LIMIT"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const unsigned long long limit = std::strtoull(env, &end, 10);
    if (end != nullptr && *end == '\0' && limit < budget) budget = limit;
  }
  return budget;
}

Error too_much(std::uint64_t size, std::string_view what, const char* why) {
  return Error(ErrorKind::ResourceLimit, "cannot allocate " + std::to_string(size) + " bytes for " + std::string(what) + ": " + why);
}

// ResourceLimit when `size` is over the budget or more than this process can address.
Status check_budget(std::uint64_t size, std::string_view what) {
  if (size > memory_budget()) {
    return too_much(size, what, ("more than the memory budget of " + std::to_string(memory_budget()) + " bytes").c_str());
  }
  if (size > static_cast<std::uint64_t>(PTRDIFF_MAX)) return too_much(size, what, "beyond this platform's address space");
  return Status::ok();
}

}  // namespace

std::uint64_t memory_budget() noexcept {
  static const std::uint64_t budget = read_budget();
  return budget;
}

Result<std::vector<std::byte>> allocate_bytes(std::uint64_t size, std::string_view what) {
  SW_RETURN_IF_ERROR(check_budget(size, what));
  try {
    return std::vector<std::byte>(static_cast<std::size_t>(size));
  } catch (const std::bad_alloc&) {
    return too_much(size, what, "out of memory");
  }
}

Result<std::unique_ptr<std::byte[]>> allocate_uninitialized(std::uint64_t size, std::string_view what) {
  SW_RETURN_IF_ERROR(check_budget(size, what));
  std::unique_ptr<std::byte[]> bytes(new (std::nothrow) std::byte[std::max<std::uint64_t>(size, 1)]);
  if (!bytes) return too_much(size, what, "out of memory");
  return bytes;
}

}  // namespace safeweights
