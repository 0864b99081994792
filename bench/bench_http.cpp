// bench_http — fetching a 1 GiB range over HTTP on loopback: our parallel ranged reader against one
// `curl` stream of the same range, measured in the same run against the same nginx.
//
// Usage: bench_http [--dir DIR] [--passes N] [--mb MB]
//
// Writes DIR/safeweights-http-XXXXXX/www/big.bin (MB MiB of pseudo-random bytes plus 4 KiB; default
// MB = 1024), starts nginx (Debian's /usr/sbin/nginx) on a free 127.0.0.1 port with a throwaway
// config (tests/http/servers.h), then for N passes (default 5), in alternating order, measures:
//   curl        `curl -s -r 4096-END URL -o /dev/null`: one connection, one stream, bytes discarded
//   ours, P     open_url + read_at(4096, MB MiB) into a preallocated, pre-faulted buffer, P requests
//               in flight (P = 1, 4, 8; 8 MiB chunks)
// and prints medians and the ratio to curl. The page cache holds the file (just written). Everything
// is removed and nginx stopped at the end. GB = 1e9 bytes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "safeweights/http.h"
#include "../tests/http/servers.h"

namespace {

using namespace safeweights;
using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_http: %s\n", what.c_str());
  std::exit(1);
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp";
  int passes = 5;
  std::uint64_t mb = 1024;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--dir")
      dir = argv[i + 1];
    else if (a == "--passes")
      passes = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--mb")
      mb = std::max(1, std::atoi(argv[i + 1]));
    else
      die("unknown argument " + a);
  }
  swhttp::Servers servers;
  std::string tmpl = dir + "/safeweights-http-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) die("cannot create a folder in " + dir);
  servers.dir = tmpl;
  servers.www = servers.dir / "www";
  std::filesystem::create_directories(servers.www);
  const std::uint64_t offset = 4096, length = mb << 20;
  {
    std::ofstream out(servers.www / "big.bin", std::ios::binary);
    std::mt19937_64 rng(42);
    std::vector<std::uint64_t> block(1 << 17);  // 1 MiB
    for (std::uint64_t done = 0; done < offset + length; done += 8 * block.size()) {
      for (auto& w : block) w = rng();
      out.write(reinterpret_cast<const char*>(block.data()),
                static_cast<std::streamsize>(std::min<std::uint64_t>(8 * block.size(), offset + length - done)));
    }
    if (!out) die("cannot write the test file");
  }
  if (!servers.start_nginx()) {
    servers.shutdown();
    die(servers.problem);
  }
  const std::string url = servers.nginx_url("big.bin");
  std::printf("bench_http: %llu MiB range of a %llu-byte file, nginx on 127.0.0.1:%d, %d passes\n", static_cast<unsigned long long>(mb),
              static_cast<unsigned long long>(offset + length), servers.nginx_port, passes);

  std::vector<std::byte> buffer(length);  // zero-filled: every page is faulted in before timing
  const std::vector<unsigned> parallels = {1, 4, 8};
  std::vector<double> curl_s;
  std::vector<std::vector<double>> ours_s(parallels.size());
  const std::string curl_cmd = "curl -s -f -r " + std::to_string(offset) + "-" + std::to_string(offset + length - 1) + " " + url + " -o /dev/null";
  for (int pass = 0; pass < passes; ++pass) {
    auto run_curl = [&] {
      auto t0 = Clock::now();
      if (std::system(curl_cmd.c_str()) != 0) die("curl failed: " + curl_cmd);
      curl_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    };
    auto run_ours = [&] {
      for (std::size_t k = 0; k < parallels.size(); ++k) {
        HttpOptions options;
        options.parallel = parallels[k];
        auto t0 = Clock::now();
        auto src = open_url(url, options);
        if (!src.is_ok()) die(src.error().to_string());
        Status s = (*src)->read_at(offset, buffer);
        if (!s.is_ok()) die(s.error().to_string());
        ours_s[k].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
    };
    if (pass % 2 == 0)
      run_curl(), run_ours();
    else
      run_ours(), run_curl();
  }
  // The bytes are the file's bytes.
  {
    std::ifstream in(servers.www / "big.bin", std::ios::binary);
    std::vector<char> want(1 << 20);
    for (std::uint64_t at : {offset, offset + length / 2, offset + length - want.size()}) {
      in.seekg(static_cast<std::streamoff>(at));
      in.read(want.data(), static_cast<std::streamsize>(want.size()));
      if (std::memcmp(want.data(), buffer.data() + (at - offset), want.size()) != 0) die("fetched bytes differ from the file");
    }
  }
  servers.shutdown();

  const double c = median(curl_s), gb = static_cast<double>(length) / 1e9;
  std::printf("\n| measurement | median | rate | vs curl |\n|---|---:|---:|---|\n");
  std::printf("| `curl -r` one stream to /dev/null (reference) | %.3f s | %.2f GB/s | 1.00x |\n", c, gb / c);
  for (std::size_t k = 0; k < parallels.size(); ++k) {
    const double t = median(ours_s[k]);
    std::printf("| open_url + read_at, %u in flight | %.3f s | %.2f GB/s | **%.2fx** |\n", parallels[k], t, gb / t, c / t);
  }
  return 0;
}
