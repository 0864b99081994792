// Shared pieces of the `safeweights` command-line tool. Each command lives in its own cmd_*.cpp and is
// a thin layer over the library.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/dduf.h"
#include "safeweights/error.h"
#include "safeweights/http.h"
#include "safeweights/safetensors.h"
#include "safeweights/sharded.h"
#include "safeweights/source.h"

namespace safeweights::cli {

// Exit codes shared by every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalid = 1;  // an input is invalid, or the operation failed
inline constexpr int kExitUsage = 2;    // bad command line

enum class Format { Safetensors, SafetensorsIndex, Dduf, Unknown };
std::string_view format_name(Format format);

// Remote inputs: the --header and --stats options every command taking a FILE has. One command runs
// per process, so they live in one place that main() reads after the command.
struct HttpCli {
  std::vector<std::string> headers;  // --header "Name: value" (repeatable)
  bool stats = false;                // --stats: print requests and bytes transferred to stderr
  unsigned parallel = 8;             // requests in flight per remote file
  std::string cacert;                // --cacert FILE: trusted CAs for https (default: the system's)
};
HttpCli& http_cli();
void add_http_options(CLI::App* cmd);
// Prints "stats: N requests, M bytes transferred (R retries, D redirects)" on stderr when --stats was
// given (for local files too: 0 requests).
void print_http_stats();

// Opens a FILE argument: a URL through open_url() (opened once per process, so format detection and
// the reader share one source and its cache), anything else through open_file().
Result<SourcePtr> open_input(const std::string& path, FileBackend backend);

// The readers over open_input().
Result<safetensors::Reader> open_safetensors_input(const std::string& path, FileBackend backend,
                                                   const safetensors::ReadOptions& options = {});
Result<dduf::Reader> open_dduf_input(const std::string& path, FileBackend backend);
Result<safetensors::ShardedReader> open_sharded_input(const std::string& path, FileBackend backend,
                                                      const safetensors::ReadOptions& options = {});

// Decides a file's format from its content: a ZIP archive is DDUF, a JSON object in a .json file is a
// sharded index.
// Anything unrecognised is handed to the safetensors reader, whose error says precisely what is wrong.
Format detect_format(const std::string& path);

FileBackend parse_backend(const std::string& name);

// Prints "safeweights: <file>: <Kind>: <message> (tensor `x`, byte offset N)" on stderr.
void print_error(const Error& error);

// JSON helpers for --json output.
std::string json_string(std::string_view s);
std::string json_error(const Error& error);  // {"kind":..,"message":..,"tensor":..,"offset":..}

std::string human_bytes(std::uint64_t bytes);
std::string shape_string(std::span<const std::uint64_t> shape);  // "[2, 3]"

// Writes all bytes to a file descriptor; false on failure (EPIPE included).
bool write_all(int fd, std::span<const std::byte> bytes);

void add_validate_command(CLI::App& app, int& exit_code);
void add_inspect_command(CLI::App& app, int& exit_code);
void add_cat_command(CLI::App& app, int& exit_code);
void add_bench_command(CLI::App& app, int& exit_code);
void add_sample_command(CLI::App& app, int& exit_code);
void add_pack_command(CLI::App& app, int& exit_code);
void add_unpack_command(CLI::App& app, int& exit_code);

}  // namespace safeweights::cli
