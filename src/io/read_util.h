// Reading whole small files and copying ranges of a source: the two shapes of read that several
// parts of the library and the tool need. Internal.
//
// Thread safety: the functions keep no state; they may run concurrently on the same source.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "safeweights/error.h"
#include "safeweights/source.h"

namespace safeweights {

// Every byte of `source`, as a string. ResourceLimit when the source is larger than `cap` bytes (it is
// checked before anything is allocated). Errors carry no file context: the caller knows what to call
// the source (an archive entry, a path).
Result<std::string> read_small(const ByteSource& source, std::uint64_t cap);

// read_small of the regular file at `path` (read with pread, never mapped); errors name the file.
Result<std::string> read_small_file(const std::string& path, std::uint64_t cap);

// Hands the bytes [offset, offset + length) of `source` to `sink`, in order: in one piece straight
// from the mapping when there is one, else in pieces of at most `chunk` bytes read into one reused
// buffer. Stops at the first error of the read or of the sink.
using ByteSink = std::function<Status(std::span<const std::byte>)>;
Status copy_range(const ByteSource& source, std::uint64_t offset, std::uint64_t length, std::uint64_t chunk,
                  const ByteSink& sink);

}  // namespace safeweights
