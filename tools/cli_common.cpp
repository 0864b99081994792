#include "cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace safeweights::cli {

namespace {

std::shared_ptr<HttpStats>& http_counters() {
  static auto counters = std::make_shared<HttpStats>();
  return counters;
}

}  // namespace

HttpCli& http_cli() {
  static HttpCli options;
  return options;
}

CheckpointCli& checkpoint_cli() {
  static CheckpointCli options;
  return options;
}

void print_http_stats() {
  if (!http_cli().stats) return;
  const HttpStats& s = *http_counters();
  std::fprintf(stderr, "stats: %llu requests, %llu bytes transferred (%llu retries, %llu redirects)\n",
               static_cast<unsigned long long>(s.requests.load()), static_cast<unsigned long long>(s.bytes_received.load()),
               static_cast<unsigned long long>(s.retries.load()), static_cast<unsigned long long>(s.redirects.load()));
}

HttpOptions remote_options() {
  HttpOptions options;
  options.headers = http_cli().headers;
  options.parallel = http_cli().parallel;
  if (http_cli().part_mib > 0) options.chunk_size = http_cli().part_mib << 20;
  options.stats = http_counters();
  options.ca_file = http_cli().cacert;
  options.timeout_s = http_cli().timeout;
  options.s3 = http_cli().s3;
  options.warn = [](const std::string& message) {
    static std::atomic<bool> warned{false};  // once per process: one remote file or a hundred shards
    if (!warned.exchange(true)) std::fprintf(stderr, "safeweights: warning: %s\n", printable(message).c_str());
  };
  return options;
}

FormatOptions input_options(const std::string& backend) {
  static const std::shared_ptr<const Resolver> resolver = caching_resolver(remote_options());
  FormatOptions options;
  options.backend = parse_backend(backend);
  options.resolver = resolver;
  options.allow_unknown = checkpoint_cli().allow_unknown;
  options.checkpoint_key = checkpoint_cli().key;
  return options;
}

FileBackend parse_backend(const std::string& name) { return name == "pread" ? FileBackend::Pread : FileBackend::Mmap; }

// Messages carry names and text from the input: escaped, so they cannot drive the terminal.
void print_error(const Error& error) { std::fprintf(stderr, "safeweights: %s\n", printable(error.to_string()).c_str()); }

int exit_code_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidArgument: return kExitUsage;
    // Not the input's fault nor the command line's: what the process works with failed. Missing or
    // unusable credentials or configuration; an OS call (a full disk, a permission, an output that is a
    // folder); a server's refusal (a missing object is FileNotFound, as a missing file is); a remote
    // file that changed while it was read; a missed deadline; no GPU, or its runtime failing.
    case ErrorKind::EnvironmentFault:
    case ErrorKind::IoError:
    case ErrorKind::HttpError:
    case ErrorKind::RemoteChanged:
    case ErrorKind::Timeout:
    case ErrorKind::DeviceError: return kExitEnvironment;
    case ErrorKind::Interrupted: return kExitInterrupted;
    default: return kExitInvalid;  // every rule of every format, a missing input, a limit the input exceeds
  }
}

int exit_code_of(const Status& status) { return status.is_ok() ? kExitOk : exit_code_of(status.error().kind()); }

int exit_status(const Status& status) {
  if (!status.is_ok()) print_error(status.error());
  return exit_code_of(status);
}

void print_exit_codes() {
#define SAFEWEIGHTS_X(name, value, doc) std::printf("%s %d\n", #name, exit_code_of(ErrorKind::name));
  SAFEWEIGHTS_ERROR_KINDS(SAFEWEIGHTS_X)
#undef SAFEWEIGHTS_X
}

int flush_stdout(int exit_code) {
  const bool flushed = std::fflush(stdout) == 0;
  const int err = errno;
  if (flushed && !std::ferror(stdout)) return exit_code;
  const std::string why = flushed ? "a write failed" : std::strerror(err);
  return std::max(exit_code, exit_status(Error(ErrorKind::IoError, "cannot write to standard output: " + why)));
}

bool write_all(int fd, std::span<const std::byte> bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, std::min<std::size_t>(bytes.size() - done, std::size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace safeweights::cli
