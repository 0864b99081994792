// Nameless files (Linux O_TMPFILE) and the name they get once complete: one definition shared by
// AtomicFile and DDUF unpacking. Internal.
//
// Thread safety: the functions keep no state; the environment is read on each call.
#pragma once

#include <string>

namespace safeweights {

// False when SAFEWEIGHTS_NAMED_TEMPFILES asks for named temporary files (tests, odd filesystems).
bool nameless_files_allowed();

// A new nameless regular file in `folder` (relative to `dirfd`; "." for dirfd itself), 0666 minus the
// umask, open for writing; -1 with errno set when that fails. nameless_unsupported(errno) says whether
// to fall back to a named file.
int open_nameless(int dirfd, const std::string& folder);
bool nameless_unsupported(int err);

// Gives the nameless file open as `fd` the name `name` relative to `dirfd` (AT_FDCWD: the working
// folder). Never replaces anything: -1 with errno EEXIST when the name exists, -1 with errno on failure.
int link_nameless(int fd, int dirfd, const std::string& name);

}  // namespace safeweights
