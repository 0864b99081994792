// Small POSIX helpers shared by the I/O layer. Internal.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "core/status_macros.h"
#include "safeweights/error.h"
#include "safeweights/source.h"

namespace safeweights {

// The value of environment variable `name`, empty when unset (the credential and endpoint settings
// read it so: an empty value counts as unset).
inline std::string getenv_string(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// "No such file or directory (errno 2)".
std::string errno_text(int err);

// pread(2) until dst is full; retries EINTR; IoError on failure or a short file.
Status pread_exact(int fd, std::uint64_t offset, std::span<std::byte> dst, const std::string& name);
// Reads each request's bytes into its own destination with as few system calls as it can: runs that
// follow each other in the file (one's offset is where the previous ends) are read by one preadv(2).
// The requests must already be checked against the file's size. IoError as pread_exact.
Status pread_scatter(int fd, std::span<const ReadRequest> requests, const std::string& name);
// pwrite(2) until everything is written; retries EINTR; IoError (ENOSPC included) on failure.
Status pwrite_exact(int fd, std::uint64_t offset, std::span<const std::byte> src, const std::string& name);

}  // namespace safeweights
