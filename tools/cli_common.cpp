#include "cli_common.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <map>

#include "json/json_parse.h"
#include "json/json_writer.h"

namespace safeweights::cli {

std::string_view format_name(Format format) {
  switch (format) {
    case Format::Safetensors: return "safetensors";
    case Format::SafetensorsIndex: return "safetensors-index";
    case Format::Dduf: return "dduf";
    case Format::Unknown: break;
  }
  return "unknown";
}

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
}

void print_http_stats() {
  if (!http_cli().stats) return;
  const HttpStats& s = *http_counters();
  std::fprintf(stderr, "stats: %llu requests, %llu bytes transferred (%llu retries, %llu redirects)\n",
               static_cast<unsigned long long>(s.requests.load()), static_cast<unsigned long long>(s.bytes_received.load()),
               static_cast<unsigned long long>(s.retries.load()), static_cast<unsigned long long>(s.redirects.load()));
}

Result<SourcePtr> open_input(const std::string& path, FileBackend backend) {
  if (!is_url(path)) return open_file(path, backend);
  // Failures are kept too: a missing file costs one request, not one per step.
  static std::map<std::string, Result<SourcePtr>> opened;
  if (auto it = opened.find(path); it != opened.end()) return it->second;
  HttpOptions options;
  options.headers = http_cli().headers;
  options.parallel = http_cli().parallel;
  options.stats = http_counters();
  options.ca_file = http_cli().cacert;
  auto source = open_url(path, options);
  opened.emplace(path, source);
  return source;
}

Result<safetensors::Reader> open_safetensors_input(const std::string& path, FileBackend backend,
                                                   const safetensors::ReadOptions& options) {
  auto source = open_input(path, backend);
  if (!source.is_ok()) return std::move(source).status();
  return safetensors::Reader::open(std::move(source).value(), options);
}

Result<dduf::Reader> open_dduf_input(const std::string& path, FileBackend backend) {
  auto source = open_input(path, backend);
  if (!source.is_ok()) return std::move(source).status();
  return dduf::Reader::open(std::move(source).value());
}

Result<safetensors::ShardedReader> open_sharded_input(const std::string& path, FileBackend backend,
                                                      const safetensors::ReadOptions& options) {
  if (is_url(path)) {
    return Error(ErrorKind::InvalidArgument,
                 "sharded checkpoints (*.safetensors.index.json) are not read over HTTP; give each shard's URL instead")
        .with_file(path);
  }
  return safetensors::ShardedReader::open(path, backend, options);
}

Format detect_format(const std::string& path) {
  // A remote file's first bytes come with the opening request: detection costs no extra request.
  auto source = open_input(path, FileBackend::Pread);
  if (!source.is_ok()) return Format::Unknown;
  const ByteSource& src = **source;
  // A ZIP archive starts with a local header, or (when empty) is just an end record.
  std::byte magic[4];
  if (src.size() >= 4 && src.read_at(0, magic).is_ok()) {
    const bool local = magic[0] == std::byte{'P'} && magic[1] == std::byte{'K'} && magic[2] == std::byte{3} && magic[3] == std::byte{4};
    const bool end = magic[0] == std::byte{'P'} && magic[1] == std::byte{'K'} && magic[2] == std::byte{5} && magic[3] == std::byte{6};
    if (local || end) return Format::Dduf;
  }
  // Not a ZIP by its first bytes, but named as one: let the ZIP reader say what is wrong with it.
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".dduf") == 0) return Format::Dduf;
  const bool json_name = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  if (json_name) {
    char first = 0;
    std::byte buf[64];
    std::uint64_t n = std::min<std::uint64_t>(sizeof buf, src.size());
    if (src.read_at(0, std::span<std::byte>(buf, static_cast<std::size_t>(n))).is_ok()) {
      for (std::uint64_t i = 0; i < n; ++i) {
        char c = static_cast<char>(buf[i]);
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
          first = c;
          break;
        }
      }
    }
    if (first == '{') return Format::SafetensorsIndex;
  }
  return Format::Safetensors;
}

FileBackend parse_backend(const std::string& name) { return name == "pread" ? FileBackend::Pread : FileBackend::Mmap; }

void print_error(const Error& error) { std::fprintf(stderr, "safeweights: %s\n", error.to_string().c_str()); }

// Names and messages can carry bytes from a hostile file that are not UTF-8; JSON output must stay
// valid, so each invalid byte becomes U+FFFD.
std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len > 1 && i + len <= s.size() && json::is_valid_utf8(s.substr(i, len))) {
      out.append(s.substr(i, len));
      i += len;
    } else if (len == 1) {
      out.push_back(s[i++]);
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

std::string json_string(std::string_view s) {
  std::string out;
  if (json::is_valid_utf8(s)) {
    json::append_string(out, s);
  } else {
    json::append_string(out, valid_utf8(s));
  }
  return out;
}

std::string json_error(const Error& error) {
  std::string out = "{\"kind\":" + json_string(error.kind_name()) + ",\"message\":" + json_string(error.message());
  const ErrorContext& ctx = error.context();
  if (!ctx.entry.empty()) out += ",\"entry\":" + json_string(ctx.entry);
  if (!ctx.tensor.empty()) out += ",\"tensor\":" + json_string(ctx.tensor);
  if (ctx.offset) out += ",\"offset\":" + std::to_string(*ctx.offset);
  out += "}";
  return out;
}

std::string human_bytes(std::uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024.0 && unit < 6) {
    v /= 1024.0;
    ++unit;
  }
  char buf[32];
  if (unit == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[unit]);
  return buf;
}

std::string shape_string(std::span<const std::uint64_t> shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
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
