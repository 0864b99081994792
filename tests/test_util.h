// Shared helpers for the safeweights test suite: building safetensors byte strings by hand, temporary
// folders, and gtest assertion helpers that compare ErrorKinds and print the whole error on failure.
#pragma once

#include <gtest/gtest.h>

#include <stdlib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/tensor_type.h"
#include "safeweights/error.h"
#include "safeweights/safetensors.h"
#include "safeweights/source.h"

// Whether this build runs under AddressSanitizer (the ASan CI tree), for tests whose figures or signals
// it changes.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

namespace swt {

namespace fs = std::filesystem;
using safeweights::Error;
using safeweights::ErrorKind;
using safeweights::TensorType;

// ---- bytes ---------------------------------------------------------------------------------------

inline std::string le64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file: N = json.size() (no padding), then `json`, then `data_len` bytes of `fill`.
inline std::string st_file(std::string_view json, std::uint64_t data_len = 0, char fill = '\0') {
  std::string s = le64(json.size());
  s.append(json);
  s.append(static_cast<std::size_t>(data_len), fill);
  return s;
}

// An explicit N followed by `rest` (for length-prefix tests where N does not match).
inline std::string with_n(std::uint64_t n, std::string_view rest) {
  std::string s = le64(n);
  s.append(rest);
  return s;
}

// One tensor entry: {"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}. `shape` is the text between the
// brackets, `offsets` likewise (so callers can inject malformed numbers).
inline std::string entry(std::string_view dtype, std::string_view shape, std::string_view offsets) {
  std::string s = "{\"dtype\":\"";
  s += dtype;
  s += "\",\"shape\":[";
  s += shape;
  s += "],\"data_offsets\":[";
  s += offsets;
  s += "]}";
  return s;
}
inline std::string entry(std::string_view dtype, std::string_view shape, std::uint64_t b, std::uint64_t e) {
  return entry(dtype, shape, std::to_string(b) + "," + std::to_string(e));
}

inline std::vector<std::byte> to_bytes(std::string_view s) {
  std::vector<std::byte> v(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) v[i] = static_cast<std::byte>(s[i]);
  return v;
}
inline std::string to_string(std::span<const std::byte> b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }

// Printable rendering of bytes for failure messages.
inline std::string hexdump(std::string_view s, std::size_t max = 160) {
  std::string out;
  static const char* digits = "0123456789abcdef";
  for (std::size_t i = 0; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  if (s.size() > max) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

inline safeweights::SourcePtr mem(std::string_view bytes, std::string name = "mem.safetensors") {
  return safeweights::owned_memory_source(to_bytes(bytes), std::move(name));
}

inline std::string describe(const Error& e) {
  std::string s = std::string(e.kind_name()) + ": " + e.message();
  const auto& c = e.context();
  s += " [file='" + c.file + "' tensor='" + hexdump(c.tensor) + "'";
  if (c.offset) s += " offset=" + std::to_string(*c.offset);
  s += "]";
  return s;
}

inline std::string kind_name(ErrorKind k) { return std::string(safeweights::error_kind_name(k)); }

// ---- assertions ----------------------------------------------------------------------------------

template <typename T>
::testing::AssertionResult IsKind(const safeweights::Result<T>& r, ErrorKind kind) {
  if (r.is_ok()) return ::testing::AssertionFailure() << "expected " << kind_name(kind) << ", got success";
  if (r.error().kind() != kind) return ::testing::AssertionFailure() << "expected " << kind_name(kind) << ", got " << describe(r.error());
  return ::testing::AssertionSuccess();
}
inline ::testing::AssertionResult IsKind(const safeweights::Status& s, ErrorKind kind) {
  if (s.is_ok()) return ::testing::AssertionFailure() << "expected " << kind_name(kind) << ", got success";
  if (s.error().kind() != kind) return ::testing::AssertionFailure() << "expected " << kind_name(kind) << ", got " << describe(s.error());
  return ::testing::AssertionSuccess();
}
template <typename T>
::testing::AssertionResult IsOk(const safeweights::Result<T>& r) {
  if (!r.is_ok()) return ::testing::AssertionFailure() << "expected success, got " << describe(r.error());
  return ::testing::AssertionSuccess();
}
inline ::testing::AssertionResult IsOk(const safeweights::Status& s) {
  if (!s.is_ok()) return ::testing::AssertionFailure() << "expected success, got " << describe(s.error());
  return ::testing::AssertionSuccess();
}

inline safeweights::Result<safeweights::safetensors::Header> parse(std::string_view bytes, const safeweights::safetensors::ReadOptions& opt = {},
                                                                   std::string name = "mem.safetensors") {
  auto src = mem(bytes, std::move(name));
  return safeweights::safetensors::Header::parse(*src, opt);
}

// Parses `bytes` and checks the kind; on failure prints the input too.
inline ::testing::AssertionResult ParseFails(std::string_view bytes, ErrorKind kind, const safeweights::safetensors::ReadOptions& opt = {}) {
  auto r = parse(bytes, opt);
  auto a = IsKind(r, kind);
  if (!a) a << "\n  input: " << hexdump(bytes, 400);
  return a;
}
inline ::testing::AssertionResult ParseOk(std::string_view bytes, const safeweights::safetensors::ReadOptions& opt = {}) {
  auto r = parse(bytes, opt);
  auto a = IsOk(r);
  if (!a) a << "\n  input: " << hexdump(bytes, 400);
  return a;
}

// ---- files ---------------------------------------------------------------------------------------

// waitpid() with a bound: the child's pid once it has ended (its status in `status`), or -1 after
// `limit` (the child is then killed with SIGKILL and reaped, so no test leaves a process behind).
inline pid_t wait_for_child(pid_t pid, int& status, std::chrono::seconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r != 0) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/safeweights-test-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    char* p = ::mkdtemp(buf.data());
    if (p == nullptr) {
      ADD_FAILURE() << "mkdtemp failed";
      path_ = "/tmp";
      owned_ = false;
    } else {
      path_ = p;
    }
  }
  ~TempDir() {
    if (owned_) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }
  // Sorted names of the folder's entries.
  std::vector<std::string> list() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string path_;
  bool owned_ = true;
};

inline void write_file_bytes(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << "cannot write " << path;
}
inline std::string read_file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return s;
}

// ---- memory --------------------------------------------------------------------------------------

// A line of /proc/self/status in kB ("VmRSS:", "VmHWM:"), or -1.
inline long status_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::strtol(line.c_str() + std::strlen(field), nullptr, 10);
  return -1;
}

// Runs `f` in a child process whose high-water mark is reset first (/proc/self/clear_refs), so the
// figure is f's own: the growth of its peak resident memory in bytes, or -1 when f returns false.
inline long long peak_memory_growth(const std::function<bool()>& f) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipefd[0]);
    std::ofstream("/proc/self/clear_refs") << "5";  // resets VmHWM to the current RSS
    const long before = status_kb("VmRSS:");
    const long long result = f() ? (status_kb("VmHWM:") - before) * 1024LL : -1;
    (void)!::write(pipefd[1], &result, sizeof result);
    ::_exit(0);
  }
  ::close(pipefd[1]);
  long long result = -1;
  if (::read(pipefd[0], &result, sizeof result) != sizeof result) result = -1;
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return result;
}

// ---- randomness ----------------------------------------------------------------------------------

// The seed for a randomized test: $SAFEWEIGHTS_TEST_SEED when set, else `fallback`. Printed so that a
// failure can be replayed.
inline std::uint64_t test_seed(std::uint64_t fallback) {
  std::uint64_t seed = fallback;
  if (const char* env = std::getenv("SAFEWEIGHTS_TEST_SEED"); env && *env) seed = std::strtoull(env, nullptr, 0);
  std::cout << "[ seed     ] SAFEWEIGHTS_TEST_SEED=" << seed << std::endl;
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

// The safetensors size in bytes of `count` elements, or nullopt when not a whole number of bytes.
inline std::optional<std::uint64_t> byte_size(TensorType dt, std::uint64_t count) {
  const std::uint64_t bits = safeweights::type_bits(dt) * count;
  if (bits % 8 != 0) return std::nullopt;
  return bits / 8;
}

// Every type a safetensors file can hold, in enum order.
inline std::vector<TensorType> all_dtypes() {
  std::vector<TensorType> v;
  for (const auto& info : safeweights::tensor_type_table())
    if (safeweights::safetensors::can_store(info.type)) v.push_back(info.type);
  return v;
}

}  // namespace swt
