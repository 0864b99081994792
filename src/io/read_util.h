// Reading whole small files with a size cap. Internal. (Copying a range of a source in chunks is
// public: copy_range() in safeweights/source.h.)
//
// Thread safety: the functions keep no state; they may run concurrently on the same source.
#pragma once

#include <cstdint>
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

// memcpy (under core's fault guard) of every request shorter than `below` bytes from the mapping at `base` (of `name`) into its
// destination, all in one guarded section; longer ones are left to the caller. The requests are
// already checked against the mapping's size. The mapping_shrank error names the run that faulted.
Status copy_runs(const std::byte* base, std::span<const ReadRequest> requests, std::size_t below, const std::string& name);

}  // namespace safeweights
