#include "cli_common.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <map>


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

void add_http_options(CLI::App* cmd) {
  cmd->add_option("--header", http_cli().headers,
                  "HTTP(S) FILE: send this header, \"Name: value\" (repeatable; only to the URL's own host)");
  cmd->add_flag("--stats", http_cli().stats, "print HTTP requests made and bytes transferred to stderr");
  cmd->add_option("--cacert", http_cli().cacert, "HTTPS FILE: trust the CA certificates in this PEM file (default: the system's)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--timeout", http_cli().timeout,
                  std::string("HTTP(S) FILE: deadline of each request in seconds, retries included (0: none; default: $") +
                      kHttpTimeoutEnv + ", else " + std::to_string(static_cast<int>(kDefaultHttpTimeoutS)) + ")")
      ->check(CLI::NonNegativeNumber);
}

CheckpointCli& checkpoint_cli() {
  static CheckpointCli options;
  return options;
}

void add_checkpoint_options(CLI::App* cmd) {
  cmd->add_flag("--allow-unknown", checkpoint_cli().allow_unknown,
                "PyTorch FILE: keep globals outside the allowlist as inert placeholders (nothing is called)");
  cmd->add_option("--key", checkpoint_cli().key,
                  "PyTorch FILE: read the tensors under this top-level key (default: state_dict, model or module when present)");
}

void print_http_stats() {
  if (!http_cli().stats) return;
  const HttpStats& s = *http_counters();
  std::fprintf(stderr, "stats: %llu requests, %llu bytes transferred (%llu retries, %llu redirects)\n",
               static_cast<unsigned long long>(s.requests.load()), static_cast<unsigned long long>(s.bytes_received.load()),
               static_cast<unsigned long long>(s.retries.load()), static_cast<unsigned long long>(s.redirects.load()));
}

FormatOptions input_options(const std::string& backend) {
  static const std::shared_ptr<const Resolver> resolver = [] {
    HttpOptions options;
    options.headers = http_cli().headers;
    options.parallel = http_cli().parallel;
    options.stats = http_counters();
    options.ca_file = http_cli().cacert;
    options.timeout_s = http_cli().timeout;
    options.warn = [](const std::string& message) {
      static std::atomic<bool> warned{false};  // once per process: one remote file or a hundred shards
      if (!warned.exchange(true)) std::fprintf(stderr, "safeweights: warning: %s\n", message.c_str());
    };
    return default_resolver(options);
  }();
  FormatOptions options;
  options.backend = parse_backend(backend);
  options.resolver = resolver;
  options.allow_unknown_globals = checkpoint_cli().allow_unknown;
  options.checkpoint_key = checkpoint_cli().key;
  return options;
}

FileBackend parse_backend(const std::string& name) { return name == "pread" ? FileBackend::Pread : FileBackend::Mmap; }

// Messages carry names and text from the input: escaped, so they cannot drive the terminal.
void print_error(const Error& error) { std::fprintf(stderr, "safeweights: %s\n", printable(error.to_string()).c_str()); }

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
