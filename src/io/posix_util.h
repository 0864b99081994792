// Small POSIX helpers shared by the I/O layer. Internal.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/status_macros.h"
#include "safeweights/error.h"

namespace safeweights {

// "No such file or directory (errno 2)".
std::string errno_text(int err);

// pread(2) until dst is full; retries EINTR; IoError on failure or a short file.
Status pread_exact(int fd, std::uint64_t offset, std::span<std::byte> dst, const std::string& name);
// pwrite(2) until everything is written; retries EINTR; IoError (ENOSPC included) on failure.
Status pwrite_exact(int fd, std::uint64_t offset, std::span<const std::byte> src, const std::string& name);

}  // namespace safeweights
