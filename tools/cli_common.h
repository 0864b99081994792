// Shared pieces of the `safeweights` command-line tool. Each command lives in its own cmd_*.cpp and is
// a thin layer over the library's public API: formats are found and read through the format registry
// (safeweights/format.h), never dispatched here. The command line itself is declared in main.cpp alone.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/format.h"
#include "safeweights/http.h"
#include "safeweights/source.h"
#include "safeweights/text.h"

namespace safeweights::cli {

// The exit status of every command, one policy (docs/CLI.md, "Exit status"; `safeweights --exit-codes`
// prints which error kind gives which): what a script needs to know is whose move it is.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalid = 1;        // the input is invalid, or differs (validate, diff, bench's check)
inline constexpr int kExitUsage = 2;          // the command line is wrong: CLI11's parse errors, InvalidArgument
inline constexpr int kExitEnvironment = 3;    // the environment failed: credentials, network, disk, a device
inline constexpr int kExitInterrupted = 130;  // Ctrl-C: 128 + SIGINT, what a shell reports for a process it ended

// Remote inputs: the --header, --stats, --cacert and --timeout options every command taking a FILE has. One command runs
// per process, so they live in one place that main() fills and reads after the command.
struct HttpCli {
  std::vector<std::string> headers;  // --header "Name: value" (repeatable)
  bool stats = false;                // --stats: print requests and bytes transferred to stderr
  unsigned parallel = 8;             // --connections N: requests in flight per remote file
  std::uint64_t part_mib = 0;        // --part-mib N: MiB per request of a large read (0: HttpOptions' default)
  std::string cacert;                // --cacert FILE: trusted CAs for https (default: the system's)
  double timeout = -1;               // --timeout SECONDS: each request's deadline (<0: HttpOptions' default)
  S3Options s3;                      // --s3-region, --s3-endpoint, --s3-profile, --s3-addressing, --s3-anonymous
};
HttpCli& http_cli();

// PyTorch checkpoints: --key and --allow-unknown, for every command that reads a FILE (one command runs
// per process, so they live in one place that input_options() reads).
struct CheckpointCli {
  std::string key;             // --key: read the tensors under this top-level key
  bool allow_unknown = false;  // --allow-unknown: unknown globals become inert placeholders
};
CheckpointCli& checkpoint_cli();

// Prints "stats: N requests, M bytes transferred (R retries, D redirects)" on stderr when --stats was
// given (for local files too: 0 requests).
void print_http_stats();

// The HttpOptions the command line asks for (--header, --connections, --part-mib, --cacert, --timeout,
// --s3-*), with the process's counters for --stats.
HttpOptions remote_options();

// The options every command opens its inputs with: the backend, and one resolver for the whole process
// (so detecting a remote file's format and reading it share one source, its first request and cache).
FormatOptions input_options(const std::string& backend = "mmap");

FileBackend parse_backend(const std::string& name);

// Prints "safeweights: <file>: <Kind>: <message> (tensor `x`, byte offset N)" on stderr.
void print_error(const Error& error);

// The one table: the exit status an error of this kind gives (never kExitOk).
int exit_code_of(ErrorKind kind);
// kExitOk for an ok status, else exit_code_of() of its kind; prints nothing.
int exit_code_of(const Status& status);
// exit_code_of(status), printing the error first when there is one.
int exit_status(const Status& status);
// "KIND CODE" for every error kind, one a line, for --exit-codes.
void print_exit_codes();
// The exit status of a command whose reports went to standard output: `exit_code`, unless they could not
// all be written (a full disk, a closed pipe), which is an IoError (printed) like any other failed write.
int flush_stdout(int exit_code);

// Writes all bytes to a file descriptor; false on failure (EPIPE included).
bool write_all(int fd, std::span<const std::byte> bytes);

}  // namespace safeweights::cli
