// The HTTP source and the CLI over HTTP, against a real nginx and, for the faults nginx cannot produce
// on demand, tests/http/fault_server.py. Both run on loopback, started and stopped by this process.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "io/secrets.h"
#include "safeweights/dduf.h"
#include "safeweights/format.h"
#include "safeweights/http.h"
#include "safeweights/resolver.h"
#include "safeweights/sharded.h"
#include "safeweights/safetensors.h"
#include "safeweights/safetensors_writer.h"
#include "safeweights/zip.h"
#include "servers.h"

namespace {

using namespace safeweights;
namespace fs = std::filesystem;

swhttp::Servers* g = nullptr;

class ServersEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    g = new swhttp::Servers;
    if (!g->start(SAFEWEIGHTS_FAULT_SERVER)) return;
    make_small_files();
  }
  void TearDown() override {
    if (g) g->shutdown();
    delete g;
    g = nullptr;
  }

  static void make_small_files();
};

#define REQUIRE_SERVERS()                                                                    \
  do {                                                                                       \
    if (!g->problem.empty()) {                                                               \
      if (swhttp::under_ci()) FAIL() << g->problem << " (CI=true: the HTTP tests must run)"; \
      GTEST_SKIP() << g->problem;                                                            \
    }                                                                                        \
  } while (0)

std::vector<std::byte> file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(s.size());
  if (!s.empty()) std::memcpy(out.data(), s.data(), s.size());
  return out;
}

std::vector<std::byte> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng() & 0xff);
  return v;
}

std::span<const std::byte> text(const std::string& s) { return {reinterpret_cast<const std::byte*>(s.data()), s.size()}; }

// small.safetensors: a 3 MiB tensor (several chunks at the tests' chunk size) between small ones;
// small.dduf: two components, .safetensors entries 4096-aligned (long local extra fields).
void ServersEnv::make_small_files() {
  auto a = random_bytes(4 * 5 * 4, 1), big = random_bytes((3u << 20) + 17, 2), c = random_bytes(3 * 8, 3);
  std::vector<safetensors::TensorData> tensors = {
      {"a", TensorType::F32, {4, 5}, a}, {"big", TensorType::U8, {big.size()}, big}, {"c", TensorType::I64, {3}, c}};
  ASSERT_TRUE(safetensors::write_file((g->www / "small.safetensors").string(), tensors).is_ok());
  auto other = random_bytes(5000, 4);
  std::vector<safetensors::TensorData> vae = {{"w", TensorType::U8, {other.size()}, other}};
  ASSERT_TRUE(safetensors::write_file((g->www / "vae.safetensors").string(), vae).is_ok());
  auto ex = dduf::Exporter::create((g->www / "small.dduf").string());
  ASSERT_TRUE(ex.is_ok());
  ASSERT_TRUE(ex->add_bytes("model_index.json", text(R"({"unet": ["diffusers", "U"], "vae": ["diffusers", "V"]})")).is_ok());
  ASSERT_TRUE(ex->add_bytes("unet/config.json", text("{}")).is_ok());
  ASSERT_TRUE(ex->add_file("unet/diffusion_pytorch_model.safetensors", (g->www / "small.safetensors").string()).is_ok());
  ASSERT_TRUE(ex->add_bytes("vae/config.json", text(R"({"x": 1})")).is_ok());
  ASSERT_TRUE(ex->add_file("vae/diffusion_pytorch_model.safetensors", (g->www / "vae.safetensors").string()).is_ok());
  ASSERT_TRUE(ex->finish().is_ok());
  fs::create_directories(g->www / "auth");
  fs::copy_file(g->www / "small.safetensors", g->www / "auth" / "small.safetensors");
}

constexpr std::uint64_t kGiB = 1ull << 30;

void put_le(std::string& s, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string st_header(std::uint64_t data) {
  std::string json = R"({"w":{"dtype":"U8","shape":[)" + std::to_string(data) + R"(],"data_offsets":[0,)" + std::to_string(data) + "]}}";
  while (json.size() % 8) json.push_back(' ');
  std::string out;
  put_le(out, json.size(), 8);
  return out + json;
}

bool pwrite_all(int fd, const std::string& s, std::uint64_t at) {
  return ::pwrite(fd, s.data(), s.size(), static_cast<off_t>(at)) == static_cast<ssize_t>(s.size());
}

// A 1 GiB safetensors file whose data is a hole: no disk space, no write time.
fs::path big_safetensors() {
  fs::path p = g->www / "big.safetensors";
  if (fs::exists(p)) return p;
  const std::string head = st_header(kGiB);
  int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  EXPECT_TRUE(fd >= 0 && pwrite_all(fd, head, 0) && ::ftruncate(fd, static_cast<off_t>(head.size() + kGiB)) == 0);
  ::close(fd);
  return p;
}

// A 1 GiB DDUF written by hand so that the big entry's data is a hole: model_index.json,
// unet/config.json and a 1 GiB unet/diffusion_pytorch_model.safetensors (zeros after its header).
fs::path big_dduf() {
  fs::path p = g->www / "big.dduf";
  if (fs::exists(p)) return p;
  struct E {
    std::string name, head;  // head: the leading bytes; the rest of `size` is zeros
    std::uint64_t size;
    std::uint32_t crc;
    std::uint64_t offset;
  };
  std::vector<E> es = {{"model_index.json", R"({"unet": ["diffusers", "U"]})", 0, 0, 0},
                       {"unet/config.json", "{}", 0, 0, 0},
                       {"unet/diffusion_pytorch_model.safetensors", st_header(kGiB), 0, 0, 0}};
  es[0].size = es[0].head.size();
  es[1].size = es[1].head.size();
  es[2].size = es[2].head.size() + kGiB;
  std::vector<std::byte> zeros(1u << 20);
  for (E& e : es) {
    e.crc = zip::crc32(0, text(e.head));
    for (std::uint64_t done = e.head.size(); done < e.size; done += zeros.size()) e.crc = zip::crc32(e.crc, zeros);
  }
  int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  std::uint64_t at = 0;
  for (E& e : es) {
    e.offset = at;
    std::string h;
    put_le(h, 0x04034b50, 4), put_le(h, 20, 2), put_le(h, 0, 2), put_le(h, 0, 2), put_le(h, 0, 2), put_le(h, 0x21, 2);
    put_le(h, e.crc, 4), put_le(h, e.size, 4), put_le(h, e.size, 4), put_le(h, e.name.size(), 2), put_le(h, 0, 2);
    h += e.name + e.head;
    EXPECT_TRUE(pwrite_all(fd, h, at));
    at += h.size() + (e.size - e.head.size());
  }
  std::string cd;
  for (const E& e : es) {
    put_le(cd, 0x02014b50, 4), put_le(cd, 20, 2), put_le(cd, 20, 2), put_le(cd, 0, 2), put_le(cd, 0, 2), put_le(cd, 0, 2);
    put_le(cd, 0x21, 2), put_le(cd, e.crc, 4), put_le(cd, e.size, 4), put_le(cd, e.size, 4), put_le(cd, e.name.size(), 2);
    put_le(cd, 0, 2), put_le(cd, 0, 2), put_le(cd, 0, 2), put_le(cd, 0, 2), put_le(cd, 0, 4), put_le(cd, e.offset, 4);
    cd += e.name;
  }
  std::string end;
  put_le(end, 0x06054b50, 4), put_le(end, 0, 2), put_le(end, 0, 2), put_le(end, es.size(), 2), put_le(end, es.size(), 2);
  put_le(end, cd.size(), 4), put_le(end, at, 4), put_le(end, 0, 2);
  EXPECT_TRUE(pwrite_all(fd, cd + end, at));
  ::close(fd);
  return p;
}

// A GGUF file with a 1 GiB I8 tensor whose data is a hole, written by hand (ggml's layout): `kv` is
// the raw key/value pairs (count `n_kv`), the vocabulary-sized metadata a real model has included.
fs::path big_gguf(const std::string& name, const std::string& kv, std::uint64_t n_kv) {
  fs::path p = g->www / name;
  if (fs::exists(p)) return p;
  std::string head = "GGUF";
  put_le(head, 3, 4), put_le(head, 1, 8), put_le(head, n_kv, 8);
  head += kv;
  put_le(head, 1, 8), head += "w";
  put_le(head, 1, 4), put_le(head, kGiB, 8), put_le(head, 24, 4), put_le(head, 0, 8);  // ne [2^30], I8, offset 0
  head.resize((head.size() + 31) / 32 * 32, '\0');
  int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  EXPECT_TRUE(fd >= 0 && pwrite_all(fd, head, 0) && ::ftruncate(fd, static_cast<off_t>(head.size() + kGiB)) == 0);
  ::close(fd);
  return p;
}

std::string gguf_kv(const std::string& key, std::uint32_t type, const std::string& value) {
  std::string out;
  put_le(out, key.size(), 8);
  out += key;
  put_le(out, type, 4);
  return out + value;
}

// 32,000 tokens of metadata (about 500 KiB), as a llama vocabulary is.
std::string vocabulary_kv() {
  std::string tokens;
  put_le(tokens, 8, 4), put_le(tokens, 32000, 8);  // ARRAY of STRING
  for (int i = 0; i < 32000; ++i) {
    const std::string t = "token" + std::to_string(i);
    put_le(tokens, t.size(), 8);
    tokens += t;
  }
  return gguf_kv("tokenizer.ggml.tokens", 9, tokens);
}

// A split model of two such files, as llama.cpp's gguf-split names and keys them.
void big_gguf_split() {
  for (std::uint64_t k = 0; k < 2; ++k) {
    std::string kv = k == 0 ? vocabulary_kv() : "";
    std::string no, count, total;
    put_le(no, k, 2), put_le(count, 2, 2), put_le(total, 2, 4);
    kv += gguf_kv("split.no", 2, no) + gguf_kv("split.count", 2, count) + gguf_kv("split.tensors.count", 5, total);
    std::string file = "big-0000" + std::to_string(k + 1) + "-of-00002.gguf";
    if (k == 1) {  // tensor names must differ across the files: rename "w" in file 2 by hand
      fs::path p = big_gguf(file, kv, 3);
      std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
      const std::uint64_t name_at = 4 + 4 + 8 + 8 + kv.size() + 8;
      f.seekp(static_cast<std::streamoff>(name_at));
      f.put('v');
    } else {
      big_gguf(file, kv, 4);
    }
  }
}

HttpOptions test_options(std::shared_ptr<HttpStats> stats = nullptr) {
  HttpOptions o;
  o.stats = std::move(stats);
  o.backoff_initial_ms = 1;
  o.backoff_max_ms = 4;
  o.chunk_size = 256u << 10;  // several chunks in flight for the 3 MiB tensor
  o.parallel = 4;
  o.use_hf_token = false;
  return o;
}

// Body bytes nginx logged as sent since `from` (a byte position in its access log).
std::uint64_t nginx_bytes_since_once(std::uint64_t from, std::uint64_t* requests);

// nginx logs a request after its last byte is sent, possibly after the client has moved on: wait
// (boundedly) for the log to show `expected` requests.
std::uint64_t nginx_bytes_since(std::uint64_t from, std::uint64_t* requests, std::uint64_t expected) {
  std::uint64_t bytes = 0;
  for (int i = 0; i < 200; ++i) {
    bytes = nginx_bytes_since_once(from, requests);
    if (*requests >= expected) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return bytes;
}

std::uint64_t nginx_bytes_since_once(std::uint64_t from, std::uint64_t* requests) {
  std::ifstream in(g->access_log());
  in.seekg(static_cast<std::streamoff>(from));
  std::string line;
  std::uint64_t total = 0;
  *requests = 0;
  while (std::getline(in, line)) {
    // combined format: ... "GET /x HTTP/1.1" STATUS BYTES "referer" "agent"
    auto q = line.find("\" ");
    if (q == std::string::npos) continue;
    std::istringstream rest(line.substr(q + 2));
    int status = 0;
    std::uint64_t bytes = 0;
    rest >> status >> bytes;
    total += bytes;
    ++*requests;
  }
  return total;
}

std::uint64_t log_size() {
  std::error_code ec;
  auto n = fs::file_size(g->access_log(), ec);
  return ec ? 0 : n;
}

void expect_same_tensors(const safetensors::Reader& remote, const safetensors::Reader& local) {
  ASSERT_EQ(remote.header().tensors().size(), local.header().tensors().size());
  for (const auto& t : local.header().tensors()) {
    auto r = remote.tensor(t.name).value()->read_owned();
    auto l = local.tensor(t.name).value()->read_owned();
    ASSERT_TRUE(r.is_ok()) << r.error().to_string();
    ASSERT_TRUE(l.is_ok());
    EXPECT_TRUE(*r == *l) << t.name;
  }
}

TEST(HttpUrl, IsUrl) {
  EXPECT_TRUE(is_url("http://x/y"));
  EXPECT_TRUE(is_url("HTTPS://x/y"));
  EXPECT_FALSE(is_url("ftp://x/y"));
  EXPECT_FALSE(is_url("model.safetensors"));
  EXPECT_FALSE(is_url("http:/x"));
}

TEST(HttpNginx, SafetensorsMatchesLocalFile) {
  REQUIRE_SERVERS();
  auto stats = std::make_shared<HttpStats>();
  auto src = open_url(g->nginx_url("small.safetensors"), test_options(stats));
  ASSERT_TRUE(src.is_ok()) << src.error().to_string();
  EXPECT_EQ((*src)->size(), fs::file_size(g->www / "small.safetensors"));
  EXPECT_EQ((*src)->mapped(), nullptr);
  auto remote = safetensors::Reader::open(*src);
  ASSERT_TRUE(remote.is_ok()) << remote.error().to_string();
  EXPECT_EQ(stats->requests.load(), 1u);  // the header came with the opening request
  auto local = safetensors::Reader::open((g->www / "small.safetensors").string());
  ASSERT_TRUE(local.is_ok());
  expect_same_tensors(*remote, *local);
  // The 3 MiB tensor in 256 KiB chunks: exactly what was asked crossed the wire, plus the first block.
  EXPECT_LT(stats->bytes_received.load(), fs::file_size(g->www / "small.safetensors") + (64u << 10));
  EXPECT_EQ(stats->retries.load(), 0u);
}

TEST(HttpNginx, ReadScatter) {
  REQUIRE_SERVERS();
  auto stats = std::make_shared<HttpStats>();
  auto src = open_url(g->nginx_url("small.safetensors"), test_options(stats));
  ASSERT_TRUE(src.is_ok());
  const auto local = file_bytes(g->www / "small.safetensors");
  // Large runs (several 256 KiB chunks, in flight together), small nearby runs (one request, scattered),
  // a cached run (block 0), an empty run, and runs adjacent in the file but not in memory.
  const std::vector<std::pair<std::uint64_t, std::size_t>> runs = {
      {200000, 1u << 20}, {local.size() - 10, 10}, {5, 100}, {2000000, 300}, {2000400, 50}, {0, 0}, {1500000, 4096}, {1504096, 4096}};
  std::vector<std::vector<std::byte>> bufs;
  for (const auto& r : runs) bufs.emplace_back(r.second);
  std::vector<ReadRequest> requests;
  for (std::size_t i = 0; i < runs.size(); ++i) requests.push_back({runs[i].first, bufs[i]});
  const auto before = stats->requests.load();
  ASSERT_TRUE((*src)->read_scatter(requests).is_ok());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].second > 0) {
      EXPECT_EQ(0, std::memcmp(bufs[i].data(), local.data() + runs[i].first, runs[i].second)) << "run " << i;
    }
  }
  // 1 MiB in 256 KiB chunks (5, as it starts mid-chunk or 4), the tail, the two nearby runs and the two
  // adjacent ones: far fewer requests than one per run and chunk would be.
  EXPECT_LE(stats->requests.load() - before, 8u);
  // Runs adjacent in the file and in memory become one request straight into the buffer.
  std::vector<std::byte> joined(600000);
  const std::vector<ReadRequest> halves = {{1000000, std::span<std::byte>(joined).first(300000)},
                                           {1300000, std::span<std::byte>(joined).subspan(300000)}};
  ASSERT_TRUE((*src)->read_scatter(halves).is_ok());
  EXPECT_EQ(0, std::memcmp(joined.data(), local.data() + 1000000, joined.size()));
  std::vector<std::byte> two(2);
  const std::vector<ReadRequest> past = {{0, two}, {local.size() - 1, two}};
  auto bad = (*src)->read_scatter(past);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.error().kind(), ErrorKind::OutOfRange);
}

TEST(HttpNginx, ReadRangesAndSlices) {
  REQUIRE_SERVERS();
  auto src = open_url(g->nginx_url("small.safetensors"), test_options());
  ASSERT_TRUE(src.is_ok());
  const auto local = file_bytes(g->www / "small.safetensors");
  std::vector<ByteRange> ranges = {{local.size() - 10, 10}, {5, 100}, {200000, 1u << 20}, {1u << 20, 3}, {0, 0}, {70000, 70000}};
  std::uint64_t total = 0;
  for (auto& r : ranges) total += r.length;
  std::vector<std::byte> got(total);
  ASSERT_TRUE((*src)->read_ranges(ranges, got).is_ok());
  std::size_t pos = 0;
  for (auto& r : ranges) {
    EXPECT_EQ(0, std::memcmp(got.data() + pos, local.data() + r.offset, r.length)) << r.offset;
    pos += r.length;
  }
  std::vector<std::byte> two(2);
  auto past = (*src)->read_at(local.size() - 1, two);
  ASSERT_FALSE(past.is_ok());
  EXPECT_EQ(past.error().kind(), ErrorKind::OutOfRange);
  auto reader = safetensors::Reader::open(*src);
  auto local_reader = safetensors::Reader::open((g->www / "small.safetensors").string());
  const safeweights::TensorEntry* a = reader->find("a");
  const safeweights::TensorEntry* local_a = local_reader->find("a");
  auto spec = SliceSpec::parse("1:3, ::-2");
  ASSERT_TRUE(spec.is_ok());
  auto plan = a->plan_slice(*spec);
  auto local_plan = local_a->plan_slice(*spec);
  std::vector<std::byte> x(plan->nbytes()), y(local_plan->nbytes());
  ASSERT_TRUE(a->read_slice(*plan, x).is_ok());
  ASSERT_TRUE(local_a->read_slice(*local_plan, y).is_ok());
  EXPECT_EQ(x, y);
}

TEST(HttpNginx, DdufOpenVerifyUnpack) {
  REQUIRE_SERVERS();
  auto stats = std::make_shared<HttpStats>();
  auto src = open_url(g->nginx_url("small.dduf"), test_options(stats));
  ASSERT_TRUE(src.is_ok()) << src.error().to_string();
  auto remote = dduf::Reader::open(*src);
  ASSERT_TRUE(remote.is_ok()) << remote.error().to_string();
  auto local = dduf::Reader::open((g->www / "small.dduf").string());
  ASSERT_TRUE(local.is_ok());
  ASSERT_EQ(remote->entries().size(), local->entries().size());
  for (std::size_t i = 0; i < local->entries().size(); ++i) {
    EXPECT_EQ(remote->entries()[i].filename, local->entries()[i].filename);
    EXPECT_EQ(remote->entries()[i].offset, local->entries()[i].offset);
    EXPECT_EQ(remote->entries()[i].length, local->entries()[i].length);
  }
  EXPECT_EQ(remote->model_index(), local->model_index());
  // Head block, tail block, local headers (two rounds at most, coalesced): a handful of requests.
  EXPECT_LE(stats->requests.load(), 8u);
  ASSERT_TRUE(remote->verify().is_ok());  // CRCs and contents, over HTTP
  auto st = remote->open_safetensors("unet/diffusion_pytorch_model.safetensors");
  ASSERT_TRUE(st.is_ok()) << st.error().to_string();
  auto st_local = safetensors::Reader::open((g->www / "small.safetensors").string());
  expect_same_tensors(*st, *st_local);
  const fs::path out = g->dir / "unpacked";
  ASSERT_TRUE(dduf::unpack(*remote, out.string(), 4).is_ok());
  for (const auto& e : local->entries()) {
    auto entry = local->open_entry(e.filename);
    std::vector<std::byte> want(e.length);
    ASSERT_TRUE((*entry)->read_at(0, want).is_ok());
    EXPECT_EQ(file_bytes(out / e.filename), want) << e.filename;
  }
}

TEST(HttpNginx, MissingFileIsFileNotFound) {
  REQUIRE_SERVERS();
  auto src = open_url(g->nginx_url("absent.safetensors"), test_options());
  ASSERT_FALSE(src.is_ok());
  EXPECT_EQ(src.error().kind(), ErrorKind::FileNotFound);
  EXPECT_NE(src.error().to_string().find("absent.safetensors"), std::string::npos);
  EXPECT_NE(src.error().message().find("404"), std::string::npos);
}

TEST(HttpNginx, EmptyFile) {
  REQUIRE_SERVERS();
  std::ofstream(g->www / "empty.bin").close();
  auto src = open_url(g->nginx_url("empty.bin"), test_options());
  ASSERT_TRUE(src.is_ok()) << src.error().to_string();
  EXPECT_EQ((*src)->size(), 0u);
  auto st = safetensors::Reader::open(*src);
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::HeaderTooSmall);
}

// open_tensors without a resolver of the caller's: detecting the format and opening the file share one
// source, so a remote file costs one request (its first block brings the header), not one to detect
// and another to open.
TEST(HttpNginx, OpenTensorsOpensARemoteFileOnce) {
  REQUIRE_SERVERS();
  const std::uint64_t log0 = log_size();
  auto file = open_tensors(g->nginx_url("small.safetensors"));
  ASSERT_TRUE(file.is_ok()) << file.error().to_string();
  EXPECT_EQ((*file)->format(), "safetensors");
  EXPECT_FALSE((*file)->tensors().empty());
  std::uint64_t requests = 0;
  nginx_bytes_since(log0, &requests, 2);  // waits (boundedly) for a second request, which must not come
  EXPECT_EQ(requests, 1u);
}

TEST(HttpNginx, OneGiBSafetensorsHeaderOnly) {
  REQUIRE_SERVERS();
  big_safetensors();
  auto stats = std::make_shared<HttpStats>();
  const std::uint64_t log0 = log_size();
  auto src = open_url(g->nginx_url("big.safetensors"), test_options(stats));
  ASSERT_TRUE(src.is_ok()) << src.error().to_string();
  auto reader = safetensors::Reader::open(*src);
  ASSERT_TRUE(reader.is_ok()) << reader.error().to_string();
  EXPECT_EQ(reader->header().data_size(), kGiB);
  EXPECT_LT(stats->bytes_received.load(), 1u << 20);
  EXPECT_LE(stats->requests.load(), 2u);
  std::uint64_t logged_requests = 0;
  EXPECT_LT(nginx_bytes_since(log0, &logged_requests, stats->requests.load()), 1u << 20);  // what nginx says it sent
  EXPECT_EQ(logged_requests, stats->requests.load());
}

TEST(HttpNginx, OneGiBDdufStructureAndContents) {
  REQUIRE_SERVERS();
  big_dduf();
  auto stats = std::make_shared<HttpStats>();
  const std::uint64_t log0 = log_size();
  auto src = open_url(g->nginx_url("big.dduf"), test_options(stats));
  ASSERT_TRUE(src.is_ok()) << src.error().to_string();
  auto reader = dduf::Reader::open(*src);
  ASSERT_TRUE(reader.is_ok()) << reader.error().to_string();
  dduf::VerifyOptions verify;
  verify.crc = false;  // what `validate URL` does by default; contents are still checked
  ASSERT_TRUE(reader->verify(verify).is_ok());
  EXPECT_LT(stats->bytes_received.load(), 1u << 20);
  EXPECT_LE(stats->requests.load(), 8u);
  std::uint64_t logged_requests = 0;
  EXPECT_LT(nginx_bytes_since(log0, &logged_requests, stats->requests.load()), 1u << 20);
  EXPECT_EQ(logged_requests, stats->requests.load());
}

// ---- faults ----------------------------------------------------------------------------------------

std::string fault(const std::string& file, const std::string& query) { return g->fault_url("/" + file + "?" + query); }

// https against the same nginx, whose certificate is self-signed for 127.0.0.1: refused by default,
// trusted with its CA file, readable with verification off.
#define REQUIRE_TLS()                                                                              \
  do {                                                                                             \
    REQUIRE_SERVERS();                                                                             \
    if (g->tls_port < 0) {                                                                         \
      if (swhttp::under_ci()) FAIL() << "no https listener: openssl could not make a certificate"; \
      GTEST_SKIP() << "openssl is not installed: no https listener";                               \
    }                                                                                              \
  } while (0)

TEST(HttpTls, TrustedWithCaFileMatchesLocalFile) {
  REQUIRE_TLS();
  HttpOptions options = test_options();
  options.ca_file = g->ca_file().string();
  auto src = open_url(g->nginx_https_url("small.safetensors"), options);
  ASSERT_TRUE(src.is_ok()) << src.error().to_string();
  auto remote = safetensors::Reader::open(*src);
  ASSERT_TRUE(remote.is_ok()) << remote.error().to_string();
  auto local = safetensors::Reader::open((g->www / "small.safetensors").string());
  ASSERT_TRUE(local.is_ok());
  expect_same_tensors(*remote, *local);
}

TEST(HttpTls, UntrustedCertificateFailsAtOnce) {
  REQUIRE_TLS();
  auto stats = std::make_shared<HttpStats>();
  auto src = open_url(g->nginx_https_url("small.safetensors"), test_options(stats));
  ASSERT_FALSE(src.is_ok());
  EXPECT_EQ(src.error().kind(), ErrorKind::IoError);
  EXPECT_NE(src.error().message().find("certificate"), std::string::npos) << src.error().to_string();
  EXPECT_EQ(src.error().context().file, g->nginx_https_url("small.safetensors"));
  // The same handshake would fail again: no retries.
  EXPECT_EQ(stats->requests.load(), 1u);
  EXPECT_EQ(stats->retries.load(), 0u);
}

TEST(HttpTls, VerificationOffReadsTheFile) {
  REQUIRE_TLS();
  HttpOptions options = test_options();
  options.verify_tls = false;
  auto src = open_url(g->nginx_https_url("small.dduf"), options);
  ASSERT_TRUE(src.is_ok()) << src.error().to_string();
  EXPECT_EQ((*src)->size(), fs::file_size(g->www / "small.dduf"));
  auto archive = dduf::Reader::open(*src);
  ASSERT_TRUE(archive.is_ok()) << archive.error().to_string();
  EXPECT_TRUE(archive->verify().is_ok());
}

TEST(HttpFaults, DroppedConnectionResumesTheRest) {
  REQUIRE_SERVERS();
  auto stats = std::make_shared<HttpStats>();
  auto opts = test_options(stats);
  opts.chunk_size = 8u << 20;  // one request for the whole 3 MiB tensor, cut halfway twice
  auto src = open_url(fault("small.safetensors", "drop=2&tag=drop"), opts);
  ASSERT_TRUE(src.is_ok()) << src.error().to_string();
  auto remote = safetensors::Reader::open(*src);
  ASSERT_TRUE(remote.is_ok()) << remote.error().to_string();
  auto local = safetensors::Reader::open((g->www / "small.safetensors").string());
  expect_same_tensors(*remote, *local);
  EXPECT_GE(stats->retries.load(), 2u);
}

TEST(HttpFaults, ServerErrorThenSuccess) {
  REQUIRE_SERVERS();
  auto stats = std::make_shared<HttpStats>();
  auto src = open_url(fault("small.safetensors", "fail500=2&tag=flaky"), test_options(stats));
  ASSERT_TRUE(src.is_ok()) << src.error().to_string();
  EXPECT_EQ(stats->retries.load(), 2u);
  EXPECT_EQ(stats->requests.load(), 3u);
  auto remote = safetensors::Reader::open(*src);
  ASSERT_TRUE(remote.is_ok());
}

TEST(HttpFaults, AlwaysFailingServerGivesUpAfterMaxRetries) {
  REQUIRE_SERVERS();
  auto opts = test_options();
  opts.max_retries = 3;
  const std::string path = "/small.safetensors?always500=1&tag=down";
  auto src = open_url(g->fault_url(path), opts);
  ASSERT_FALSE(src.is_ok());
  EXPECT_EQ(src.error().kind(), ErrorKind::HttpError);
  EXPECT_NE(src.error().message().find("4 attempts"), std::string::npos) << src.error().to_string();
  EXPECT_NE(src.error().message().find("HTTP 500"), std::string::npos);
  // The server saw exactly the first attempt and three retries.
  auto counter = open_url(g->fault_url("/count?path=" + std::string("%2Fsmall.safetensors%3Falways500%3D1%26tag%3Ddown")), test_options());
  ASSERT_TRUE(counter.is_ok()) << counter.error().to_string();
  std::string n((*counter)->size(), '\0');
  ASSERT_TRUE((*counter)->read_at(0, std::as_writable_bytes(std::span<char>(n.data(), n.size()))).is_ok());
  EXPECT_EQ(n, "4");
}

TEST(HttpFaults, UnreachableServerIsBoundedIoError) {
  auto opts = test_options();
  opts.max_retries = 2;
  auto src = open_url("http://127.0.0.1:" + std::to_string(swhttp::free_port()) + "/x.safetensors", opts);
  ASSERT_FALSE(src.is_ok());
  EXPECT_EQ(src.error().kind(), ErrorKind::IoError);
  EXPECT_NE(src.error().message().find("3 attempts"), std::string::npos) << src.error().to_string();
}

TEST(HttpFaults, ServerIgnoringRangeIsStreamedNotBuffered) {
  REQUIRE_SERVERS();
  auto stats = std::make_shared<HttpStats>();
  auto src = open_url(fault("small.safetensors", "norange=1&tag=norange"), test_options(stats));
  ASSERT_TRUE(src.is_ok()) << src.error().to_string();
  EXPECT_EQ((*src)->size(), fs::file_size(g->www / "small.safetensors"));
  auto remote = safetensors::Reader::open(*src);
  ASSERT_TRUE(remote.is_ok()) << remote.error().to_string();
  auto local = safetensors::Reader::open((g->www / "small.safetensors").string());
  // Reading "a" (near the start) streams from byte 0 and stops: far less than the 3 MiB file.
  const std::uint64_t before = stats->bytes_received.load();
  auto a = remote->tensor("a").value()->read_owned();
  ASSERT_TRUE(a.is_ok()) << a.error().to_string();
  EXPECT_EQ(*a, *local->tensor("a").value()->read_owned());
  // libcurl's buffer holds what arrived before the cut; the rest of the file never does.
  EXPECT_LT(stats->bytes_received.load() - before, 2u << 20);
  expect_same_tensors(*remote, *local);
}

TEST(HttpFaults, FileChangingBetweenRequestsFailsClearly) {
  REQUIRE_SERVERS();
  for (const std::string query : {"change_after=1&tag=etag", "change_after=1&grow=1&tag=grow"}) {
    auto src = open_url(fault("small.safetensors", query), test_options());
    ASSERT_TRUE(src.is_ok()) << src.error().to_string();
    auto remote = safetensors::Reader::open(*src);  // header from the first response
    ASSERT_TRUE(remote.is_ok());
    auto big = remote->tensor("big").value()->read_owned();
    ASSERT_FALSE(big.is_ok()) << query;
    EXPECT_EQ(big.error().kind(), ErrorKind::RemoteChanged) << big.error().to_string();
    EXPECT_NE(big.error().to_string().find("small.safetensors"), std::string::npos);
  }
}

TEST(HttpFaults, RedirectsKeepHeadersOnTheirOrigin) {
  REQUIRE_SERVERS();
  auto opts = test_options();
  opts.headers = {"Authorization: Bearer secret"};
  // Same origin: the header follows.
  const std::string same = g->fault_url("/small.safetensors?require_auth=Bearer%20secret&tag=r1");
  auto a = open_url(g->fault_url("/redirect?to=" + std::string("%2Fsmall.safetensors%3Frequire_auth%3DBearer%2520secret%26tag%3Dr1")), opts);
  ASSERT_TRUE(a.is_ok()) << a.error().to_string();
  ASSERT_TRUE(safetensors::Reader::open(*a).is_ok());
  (void)same;
  // Another origin (host name differs): the header is dropped, or the target answers 400.
  const std::string other = "http://localhost:" + std::to_string(g->fault_port) + "/small.safetensors%3Fforbid_auth%3D1%26tag%3Dr2";
  auto stats = std::make_shared<HttpStats>();
  auto o2 = opts;
  o2.stats = stats;
  auto b = open_url(g->fault_url("/redirect?to=" + other), o2);
  ASSERT_TRUE(b.is_ok()) << b.error().to_string();
  auto reader = safetensors::Reader::open(*b);
  ASSERT_TRUE(reader.is_ok());
  ASSERT_TRUE(reader->tensor("big").value()->read_owned().is_ok());  // later requests go to the final URL, still without it
  EXPECT_EQ(stats->redirects.load(), 1u);
  // To nginx on another port, same host name: another origin too.
  auto c = open_url(g->fault_url("/redirect?to=" + g->nginx_url("small.safetensors")), opts);
  ASSERT_TRUE(c.is_ok()) << c.error().to_string();
}

TEST(HttpFaults, HfTokenOnlyForTheHubOverHttps) {
  REQUIRE_TLS();
  ::setenv("HF_TOKEN", "tok", 1);
  auto opts = test_options();
  opts.use_hf_token = true;
  opts.ca_file = g->ca_file().string();
  ::unsetenv("HF_ENDPOINT");
  // Not the hub: the token stays home (nginx's /auth/ answers 401 without it).
  auto other = open_url(g->nginx_https_url("auth/small.safetensors"), opts);
  ASSERT_FALSE(other.is_ok());
  EXPECT_NE(other.error().message().find("401"), std::string::npos) << other.error().to_string();
  // The configured endpoint gets it over https.
  ::setenv("HF_ENDPOINT", ("https://127.0.0.1:" + std::to_string(g->tls_port)).c_str(), 1);
  auto src = open_url(g->nginx_https_url("auth/small.safetensors"), opts);
  EXPECT_TRUE(src.is_ok()) << src.error().to_string();
  // Never in clear text, even when the endpoint itself is http://.
  ::setenv("HF_ENDPOINT", ("http://127.0.0.1:" + std::to_string(g->fault_port)).c_str(), 1);
  auto plain = open_url(fault("small.safetensors", "forbid_auth=1&tag=t3"), opts);
  EXPECT_TRUE(plain.is_ok()) << plain.error().to_string();
  ::unsetenv("HF_ENDPOINT");
  ::unsetenv("HF_TOKEN");
}

// An unusable token is the environment's fault (EnvironmentFault), found before any request is sent,
// and the message does not repeat it.
TEST(HttpFaults, AnUnusableHubTokenIsAnEnvironmentFault) {
  ::setenv("HF_TOKEN", "tok\nen", 1);
  ::unsetenv("HF_ENDPOINT");
  auto opts = test_options();
  opts.use_hf_token = true;
  auto src = open_url("hf://org/repo/model.safetensors", opts);
  ASSERT_FALSE(src.is_ok());
  EXPECT_EQ(src.error().kind(), ErrorKind::EnvironmentFault) << src.error().to_string();
  EXPECT_NE(src.error().message().find("the Hub token contains a line break"), std::string::npos) << src.error().to_string();
  EXPECT_EQ(src.error().to_string().find("tok\nen"), std::string::npos) << src.error().to_string();
  ::unsetenv("HF_TOKEN");
}

TEST(HttpFaults, NotFoundAndRefusals) {
  REQUIRE_SERVERS();
  auto missing = open_url(g->fault_url("/nothing.safetensors"), test_options());
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.error().kind(), ErrorKind::FileNotFound);
  auto refused = open_url(fault("small.safetensors", "require_auth=x&tag=401"), test_options());
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.error().kind(), ErrorKind::HttpError);
  EXPECT_NE(refused.error().message().find("401"), std::string::npos);
}

// Without ETag and Last-Modified, a new version of the same size is seen where a response repeats
// bytes an earlier one delivered (here: the big tensor's request covers the rest of the opening block).
TEST(HttpFaults, WithoutValidatorsRepeatedBytesMustMatch) {
  REQUIRE_SERVERS();
  auto local = safetensors::Reader::open((g->www / "small.safetensors").string());
  for (const bool changes : {false, true}) {
    auto stats = std::make_shared<HttpStats>();
    auto opts = test_options(stats);
    std::vector<std::string> warnings;
    opts.warn = [&](const std::string& m) { warnings.push_back(m); };
    const std::string query = changes ? "novalidator=1&change_after=1&tag=nv2" : "novalidator=1&tag=nv1";
    auto src = open_url(fault("small.safetensors", query), opts);
    ASSERT_TRUE(src.is_ok()) << src.error().to_string();
    EXPECT_EQ(stats->unvalidated.load(), 1u);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("no ETag nor Last-Modified"), std::string::npos) << warnings[0];
    auto remote = safetensors::Reader::open(*src);
    ASSERT_TRUE(remote.is_ok());
    auto big = remote->tensor("big").value()->read_owned();
    if (!changes) {
      ASSERT_TRUE(big.is_ok()) << big.error().to_string();
      EXPECT_EQ(*big, *local->tensor("big").value()->read_owned());
      continue;
    }
    ASSERT_FALSE(big.is_ok());
    EXPECT_EQ(big.error().kind(), ErrorKind::RemoteChanged) << big.error().to_string();
    EXPECT_NE(big.error().message().find("differ from an earlier response"), std::string::npos) << big.error().to_string();
  }
  // A server with validators gets no warning.
  auto stats = std::make_shared<HttpStats>();
  auto opts = test_options(stats);
  opts.warn = [](const std::string& m) { ADD_FAILURE() << m; };
  ASSERT_TRUE(open_url(g->nginx_url("small.safetensors"), opts).is_ok());
  EXPECT_EQ(stats->unvalidated.load(), 0u);
}

// ---- limits: the deadline, the minimum rate, what no retry can fix ----------------------------------

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// How many requests the fault server has seen for `path` (as it saw it, query included).
int fault_requests(const std::string& path) {
  std::string escaped;
  for (unsigned char c : path) {
    char buf[4];
    std::snprintf(buf, sizeof buf, "%%%02X", c);
    escaped += std::isalnum(c) ? std::string(1, static_cast<char>(c)) : std::string(buf);
  }
  auto counter = open_url(g->fault_url("/count?path=" + escaped), test_options());
  if (!counter.is_ok()) return -1;
  std::string n((*counter)->size(), '\0');
  if (!(*counter)->read_at(0, std::as_writable_bytes(std::span<char>(n.data(), n.size()))).is_ok()) return -1;
  return std::atoi(n.c_str());
}

TEST(HttpLimits, TricklingBodyOrHeadersMissTheDeadline) {
  REQUIRE_SERVERS();
  const std::pair<std::string, std::string> cases[] = {{"trickle=1&tag=d1", "receiving the body"},
                                                       {"slowheaders=1&tag=d2", "waiting for the response headers"}};
  for (const auto& [query, what] : cases) {
    auto opts = test_options();
    opts.timeout_s = 1;
    const auto t0 = std::chrono::steady_clock::now();
    auto src = open_url(fault("small.safetensors", query), opts);
    ASSERT_FALSE(src.is_ok()) << query;
    EXPECT_LT(seconds_since(t0), 10.0) << query;
    EXPECT_EQ(src.error().kind(), ErrorKind::Timeout) << src.error().to_string();
    EXPECT_EQ(src.error().context().file, fault("small.safetensors", query));
    EXPECT_NE(src.error().message().find("deadline of 1 s"), std::string::npos) << src.error().to_string();
    EXPECT_NE(src.error().message().find(what), std::string::npos) << src.error().to_string();
  }
}

TEST(HttpLimits, BelowTheMinimumRateIsRetriedThenTimeout) {
  REQUIRE_SERVERS();
  auto stats = std::make_shared<HttpStats>();
  auto opts = test_options(stats);
  opts.timeout_s = 0;  // only the rate limits it
  opts.min_rate = 1000;
  opts.stall_timeout_s = 1;
  opts.max_retries = 1;
  const auto t0 = std::chrono::steady_clock::now();
  auto src = open_url(fault("small.safetensors", "trickle=1&tag=rate"), opts);
  ASSERT_FALSE(src.is_ok());
  EXPECT_LT(seconds_since(t0), 20.0);
  EXPECT_EQ(src.error().kind(), ErrorKind::Timeout) << src.error().to_string();
  EXPECT_NE(src.error().message().find("minimum rate of 1000 bytes/s over 1 s"), std::string::npos) << src.error().to_string();
  EXPECT_EQ(stats->retries.load(), 1u);
}

TEST(HttpLimits, EnvironmentSetsTheDeadline) {
  REQUIRE_SERVERS();
  auto opts = test_options();
  ASSERT_LT(opts.timeout_s, 0);  // unset: the environment decides
  ::setenv(kHttpTimeoutEnv, "1", 1);
  const auto t0 = std::chrono::steady_clock::now();
  auto src = open_url(fault("small.safetensors", "trickle=1&tag=env"), opts);
  ASSERT_FALSE(src.is_ok());
  EXPECT_LT(seconds_since(t0), 10.0);
  EXPECT_EQ(src.error().kind(), ErrorKind::Timeout) << src.error().to_string();
  ::setenv(kHttpTimeoutEnv, "soon", 1);
  auto bad = open_url(g->nginx_url("small.safetensors"), opts);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.error().kind(), ErrorKind::InvalidArgument);
  EXPECT_NE(bad.error().message().find(kHttpTimeoutEnv), std::string::npos) << bad.error().to_string();
  ::unsetenv(kHttpTimeoutEnv);
}

TEST(HttpLimits, WhatNoRetryCanFixFailsAtOnce) {
  REQUIRE_SERVERS();
  const std::pair<std::string, std::string> cases[] = {
      {"bigheader=1&tag=n1", "header"}, {"endless=1&tag=n2", "KiB of response headers"}, {"gzip=1&tag=n3", "Content-Encoding: gzip"}};
  for (const auto& [query, what] : cases) {
    auto stats = std::make_shared<HttpStats>();
    auto opts = test_options(stats);
    opts.timeout_s = 60;
    auto src = open_url(fault("small.safetensors", query), opts);
    ASSERT_FALSE(src.is_ok()) << query;
    EXPECT_EQ(src.error().kind(), ErrorKind::HttpError) << src.error().to_string();
    EXPECT_NE(src.error().message().find(what), std::string::npos) << src.error().to_string();
    EXPECT_EQ(stats->retries.load(), 0u) << query;
    EXPECT_EQ(fault_requests("/small.safetensors?" + query), 1) << query;
  }
}

TEST(HttpFaults, EveryResponseCutStillDeliversALargeRead) {
  REQUIRE_SERVERS();
  const auto want = random_bytes(20u << 20, 9);
  {
    std::ofstream out(g->www / "cut.bin", std::ios::binary);
    out.write(reinterpret_cast<const char*>(want.data()), static_cast<std::streamsize>(want.size()));
  }
  auto stats = std::make_shared<HttpStats>();
  auto opts = test_options(stats);
  opts.chunk_size = 8u << 20;  // the default: three requests, each cut after a third, again and again
  auto src = open_url(fault("cut.bin", "cut=3&tag=cut"), opts);
  ASSERT_TRUE(src.is_ok()) << src.error().to_string();
  std::vector<std::byte> got(want.size());
  auto s = (*src)->read_at(0, got);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_TRUE(got == want);
  EXPECT_GT(stats->retries.load(), 3u * static_cast<unsigned>(opts.max_retries));
}

// ---- credentials a server reflects ------------------------------------------------------------------

TEST(HttpSecrets, EverySpellingOfACredentialIsRedacted) {
  secrets::remember("short");  // too short to be redacted everywhere its letters occur
  secrets::remember("s3cr3t/Key+Value=");
  secrets::remember_header("X-Api-Key: key-0123456789");
  secrets::remember_header("Authorization: Bearer hf_bearer0123456789");
  secrets::remember_header("Accept: application/json");  // no credential
  secrets::remember("xml&<secret>\"'");
  const std::string text =
      "short s3cr3t/Key+Value= s3cr3t%2FKey%2BValue%3D s3cr3t%2fKey%2bValue%3d s3cr3t\\/Key+Value= czNjcjN0L0tleStWYWx1ZT0= key-0123456789 "
      "hf_bearer0123456789 application/json xml&amp;&lt;secret&gt;&quot;&apos; "
      "https://b.s3.amazonaws.com/k?X-Amz-Credential=AKID%2F1&x-amz-signature=abc123&part=2 "
      "Signature=ff00, SignatureDoesNotMatch";
  EXPECT_EQ(secrets::scrub(text),
            "short <redacted> <redacted> <redacted> <redacted> <redacted> <redacted> <redacted> application/json <redacted> "
            "https://b.s3.amazonaws.com/k?X-Amz-Credential=<redacted>&x-amz-signature=<redacted>&part=2 Signature=<redacted>, SignatureDoesNotMatch");
  const Error e = secrets::scrub(Error(ErrorKind::HttpError, "HTTP 403 (AccessDenied: key-0123456789)")
                                     .with_file("https://h/x?sig=abc")
                                     .with_offset(7)
                                     .with_rule(ErrorRule::Unspecified));
  EXPECT_EQ(e.message(), "HTTP 403 (AccessDenied: <redacted>)");
  EXPECT_EQ(e.context().file, "https://h/x?sig=<redacted>");
  EXPECT_EQ(e.context().offset, 7u);
  EXPECT_EQ(e.kind(), ErrorKind::HttpError);
}

// ---- the CLI -----------------------------------------------------------------------------------------

struct CliRun {
  int code = -1;
  std::string out, err;
};

// Runs the CLI with `args` (shell words), with `env` ("NAME=value ...") added to its environment.
CliRun cli(const std::string& args, const std::string& env = "") {
  const fs::path err = g->dir / "stderr.txt", out = g->dir / "stdout.bin";
  std::string cmd = env + " " + SAFEWEIGHTS_CLI + " " + args + " >" + out.string() + " 2>" + err.string();
  CliRun r;
  int status = std::system(cmd.c_str());
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto o = file_bytes(out), e = file_bytes(err);
  if (!o.empty()) r.out.assign(reinterpret_cast<const char*>(o.data()), o.size());
  if (!e.empty()) r.err.assign(reinterpret_cast<const char*>(e.data()), e.size());
  return r;
}

// "stats: N requests, M bytes transferred" from stderr.
std::pair<std::uint64_t, std::uint64_t> parse_stats(const std::string& err) {
  auto at = err.find("stats: ");
  if (at == std::string::npos) return {UINT64_MAX, UINT64_MAX};
  unsigned long long n = 0, m = 0;
  std::sscanf(err.c_str() + at, "stats: %llu requests, %llu bytes", &n, &m);
  return {n, m};
}

// A listing that answers every page, slowly, with a next page (fault_server.py's endless listings,
// ENDLESS_PAGES pages of PAGE_PAUSE s each): --timeout bounds the whole listing, not each page.
TEST(HttpListing, TheDeadlineBoundsTheWholeListing) {
  REQUIRE_SERVERS();
  ::setenv("HF_ENDPOINT", g->fault_url("").c_str(), 1);
  auto opts = test_options();
  opts.timeout_s = 2;
  opts.s3.endpoint_url = g->fault_url("");
  opts.s3.addressing_style = "path";
  opts.s3.anonymous = true;
  for (const std::string name : {"hf://org/endless", "s3://endless/"}) {
    auto listed = caching_resolver(opts)->list(name);
    ASSERT_FALSE(listed.is_ok()) << name << ": " << listed->size() << " entries listed, each page within the deadline";
    const Error& e = listed.error();
    EXPECT_EQ(e.kind(), ErrorKind::Timeout) << e.to_string();
    EXPECT_EQ(e.context().file, name);
    EXPECT_NE(e.message().find("the listing stopped after "), std::string::npos) << e.to_string();
    EXPECT_NE(e.message().find(" pages ("), std::string::npos) << e.to_string();
    EXPECT_NE(e.message().find("deadline of 2 s"), std::string::npos) << e.to_string();
  }
  // The CLI's --timeout is the same deadline.
  CliRun r = cli("convert --timeout 2 hf://org/endless " + (g->dir / "endless.gguf").string(), "HF_ENDPOINT=" + g->fault_url(""));
  EXPECT_EQ(r.code, 3) << r.err;  // an environment fault (docs/CLI.md, "Exit status")
  EXPECT_NE(r.err.find("hf://org/endless: Timeout: the listing stopped after "), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(g->dir / "endless.gguf"));
  ::unsetenv("HF_ENDPOINT");
}

// Ctrl-C during a listing that goes on and on ends the CLI at once, as during a read.
TEST(HttpCli, InterruptStopsAListing) {
  REQUIRE_SERVERS();
  const std::string first_page = "/api/models/org/endless/tree/main";
  const int before = fault_requests(first_page);
  ::setenv("HF_ENDPOINT", g->fault_url("").c_str(), 1);
  const pid_t pid = swhttp::spawn({SAFEWEIGHTS_CLI, "convert", "--timeout", "0", "hf://org/endless", (g->dir / "interrupted.gguf").string()});
  ::unsetenv("HF_ENDPOINT");
  ASSERT_GT(pid, 0);
  for (int i = 0; i < 1000 && fault_requests(first_page) == before; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ::kill(pid, SIGINT);
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 1000 && (done = ::waitpid(pid, &status, WNOHANG)) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (done == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "the CLI was still listing 10 s after SIGINT";
  }
  EXPECT_TRUE(WIFSIGNALED(status) ? WTERMSIG(status) == SIGINT : WEXITSTATUS(status) != 0);
  EXPECT_FALSE(fs::exists(g->dir / "interrupted.gguf"));
}

// What a hostile server reflects of the credentials reaches neither stderr nor --json output; the rest
// of its message does. `hidden` are the credentials (and their encoded forms) that must not appear.
void expect_redacted(const CliRun& r, const std::vector<std::string>& hidden, const std::string& code) {
  EXPECT_NE(r.code, 0) << r.err << r.out;  // 1, or 2 for diff
  for (const std::string& s : hidden) {
    EXPECT_EQ(r.err.find(s), std::string::npos) << s << " in stderr: " << r.err;
    EXPECT_EQ(r.out.find(s), std::string::npos) << s << " in stdout: " << r.out;
  }
  EXPECT_NE((r.err + r.out).find(code), std::string::npos) << r.err << r.out;
  EXPECT_NE((r.err + r.out).find("<redacted>"), std::string::npos) << r.err << r.out;
}

TEST(HttpCli, S3CredentialsReflectedInTheErrorMessageAreRedacted) {
  REQUIRE_SERVERS();
  const std::string key_id = "AKIAREFLECTED0000001", secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYREFLECTED0",
                    token = "FwoGZXIvYXdzEReflected//Session+Token=";
  const std::string env = "AWS_ACCESS_KEY_ID=" + key_id + " AWS_SECRET_ACCESS_KEY='" + secret + "' AWS_SESSION_TOKEN='" + token +
                          "' AWS_ENDPOINT_URL=" + g->fault_url("") +
                          " AWS_REGION=us-east-1 AWS_SHARED_CREDENTIALS_FILE=/nonexistent AWS_CONFIG_FILE=/nonexistent";
  const std::vector<std::string> hidden = {key_id, secret, token, "FwoGZXIvYXdzEReflected%2F%2FSession%2BToken%3D"};
  const std::string out = (g->dir / "reflect.gguf").string();
  for (const std::string& args :
       std::vector<std::string>{"inspect s3://reflect/model.safetensors", "validate --json s3://reflect/model.safetensors",
                                "convert s3://reflect/llama/ " + out, "diff --json s3://reflect/llama/ s3://reflect/other/"}) {
    SCOPED_TRACE(args);
    expect_redacted(cli(args, env), hidden, "AccessDenied");
  }
}

TEST(HttpCli, HubTokenReflectedInXErrorMessageIsRedacted) {
  REQUIRE_TLS();
  const std::string token = "hf_ReflectedHubToken0123456789abcdef";
  const std::string env =
      "HF_ENDPOINT=https://127.0.0.1:" + std::to_string(g->tls_port) + " HF_TOKEN=" + token + " CURL_CA_BUNDLE=" + g->ca_file().string();
  for (const std::string& args :
       std::vector<std::string>{"inspect hf://org/reflect/model.safetensors", "validate --json hf://org/reflect/model.safetensors",
                                "convert hf://org/reflect " + (g->dir / "hub.gguf").string()}) {
    SCOPED_TRACE(args);
    CliRun r = cli(args, env);
    expect_redacted(r, {token}, "GatedRepo");
    EXPECT_NE((r.err + r.out).find("Access to this model is restricted for Bearer <redacted>"), std::string::npos) << r.err << r.out;
  }
  // The token from the token file, as from HF_TOKEN.
  const fs::path token_file = g->dir / "hf-token";
  std::ofstream(token_file) << token << "\n";
  const std::string file_env = "HF_ENDPOINT=https://127.0.0.1:" + std::to_string(g->tls_port) + " HF_TOKEN= HF_TOKEN_PATH=" + token_file.string() +
                               " CURL_CA_BUNDLE=" + g->ca_file().string();
  expect_redacted(cli("inspect hf://org/reflect/model.safetensors", file_env), {token}, "GatedRepo");
}

TEST(HttpCli, CallerCredentialsAndPresignedSignaturesAreRedacted) {
  REQUIRE_SERVERS();
  const std::string bearer = "plain-bearer-0123456789", api_key = "plain-api-key-0123456789";
  const std::string headers = " --header 'Authorization: Bearer " + bearer + "' --header 'X-Api-Key: " + api_key + "' ";
  for (const std::string& args : std::vector<std::string>{"inspect" + headers + "'" + fault("small.safetensors", "reflect=1") + "'",
                                                          "validate --json" + headers + "'" + fault("small.safetensors", "reflect=1") + "'"}) {
    SCOPED_TRACE(args);
    expect_redacted(cli(args), {bearer, api_key}, "Unauthorized");
  }
  // A message is cut to 2 KiB once scrubbed: a credential across the cut leaves no first half behind.
  const std::size_t pad = 2048 - std::string("bad credentials: Authorization: Bearer ").size() - 5;
  CliRun cut = cli("inspect" + headers + "'" + fault("small.safetensors", "reflect=1&pad=" + std::to_string(pad)) + "'");
  expect_redacted(cut, {bearer.substr(0, 5)}, "Unauthorized");
  // A presigned URL names the file in every error, its signature redacted. (validate --json also echoes
  // the argument as given, in "file": the caller's own text, not a message; only "error" is looked at.)
  const std::string signature = "0123456789abcdef0123456789abcdef", presigned = g->fault_url("/absent.safetensors?X-Amz-Signature=" + signature);
  CliRun r = cli("inspect '" + presigned + "'");
  expect_redacted(r, {signature}, "FileNotFound");
  EXPECT_NE(r.err.find("X-Amz-Signature=<redacted>: FileNotFound"), std::string::npos) << r.err;
  CliRun json = cli("validate --json '" + presigned + "'");
  json.out = json.out.substr(json.out.find("\"error\""));
  expect_redacted(json, {signature}, "FileNotFound");
}

TEST(HttpCli, InspectValidateCatMatchLocal) {
  REQUIRE_SERVERS();
  for (const std::string file : {"small.safetensors", "small.dduf"}) {
    const std::string url = g->nginx_url(file), path = (g->www / file).string();
    CliRun remote = cli("inspect --json " + url), local = cli("inspect --json " + path);
    EXPECT_EQ(remote.code, 0) << remote.err;
    EXPECT_EQ(remote.out, local.out);
    CliRun v = cli("validate --stats " + url);
    EXPECT_EQ(v.code, 0) << v.err;
    EXPECT_NE(v.out.find("OK"), std::string::npos);
    EXPECT_LT(parse_stats(v.err).first, 20u) << v.err;
  }
  CliRun crc = cli("validate --crc " + g->nginx_url("small.dduf"));
  EXPECT_EQ(crc.code, 0);
  EXPECT_NE(crc.out.find("CRCs checked"), std::string::npos) << crc.out;
  CliRun a = cli("cat " + g->nginx_url("small.safetensors") + " big"), b = cli("cat " + (g->www / "small.safetensors").string() + " big");
  EXPECT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out.size(), (3u << 20) + 17);
  EXPECT_TRUE(a.out == b.out);
  CliRun s1 = cli("cat " + g->nginx_url("small.safetensors") + " a --slice '1:3, ::-2'"),
         s2 = cli("cat " + (g->www / "small.safetensors").string() + " a --slice '1:3, ::-2'");
  EXPECT_EQ(s1.code, 0) << s1.err;
  EXPECT_EQ(s1.out, s2.out);
  CliRun e1 = cli("cat " + g->nginx_url("small.dduf") + " vae/config.json"), e2 = cli("cat " + (g->www / "small.dduf").string() + " vae/config.json");
  EXPECT_EQ(e1.out, e2.out);
  EXPECT_EQ(e1.out, R"({"x": 1})");
  CliRun t1 = cli("cat " + g->nginx_url("small.dduf") + " unet/diffusion_pytorch_model.safetensors c --stats");
  CliRun t2 = cli("cat " + (g->www / "small.dduf").string() + " unet/diffusion_pytorch_model.safetensors c");
  EXPECT_EQ(t1.code, 0) << t1.err;
  EXPECT_EQ(t1.out, t2.out);
  // The tensor's 24 bytes, not the 3 MiB entry.
  EXPECT_LT(parse_stats(t1.err).second, 1u << 20) << t1.err;
}

TEST(HttpCli, UnpackUrl) {
  REQUIRE_SERVERS();
  const fs::path out = g->dir / "cli-unpacked";
  CliRun r = cli("unpack --stats " + g->nginx_url("small.dduf") + " " + out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  auto local = dduf::Reader::open((g->www / "small.dduf").string());
  for (const auto& e : local->entries()) {
    auto entry = local->open_entry(e.filename);
    std::vector<std::byte> want(e.length);
    ASSERT_TRUE((*entry)->read_at(0, want).is_ok());
    EXPECT_EQ(file_bytes(out / e.filename), want) << e.filename;
  }
}

TEST(HttpCli, OneGiBInspectMovesUnderOneMiB) {
  REQUIRE_SERVERS();
  big_safetensors();
  big_dduf();
  for (const std::string file : {"big.safetensors", "big.dduf"}) {
    for (const std::string cmd : {"inspect", "validate"}) {
      CliRun r = cli(cmd + " --stats " + g->nginx_url(file));
      EXPECT_EQ(r.code, 0) << r.err;
      auto [requests, bytes] = parse_stats(r.err);
      EXPECT_LT(bytes, 1u << 20) << cmd << " " << file << ": " << r.err;
      EXPECT_LE(requests, 8u) << cmd << " " << file << ": " << r.err;
      std::printf("%s %s: %llu requests, %llu bytes\n", cmd.c_str(), file.c_str(), static_cast<unsigned long long>(requests),
                  static_cast<unsigned long long>(bytes));
    }
  }
}

// inspect of a GGUF over HTTP fetches the metadata, not the tensor data; a split model's siblings
// come through the same resolver.
TEST(HttpCli, GgufOverHttpReadsOnlyTheHeaders) {
  REQUIRE_SERVERS();
  big_gguf("big.gguf", vocabulary_kv(), 1);
  big_gguf_split();
  const std::uint64_t log0 = log_size();
  CliRun r = cli("inspect --json --stats " + g->nginx_url("big.gguf"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"nbytes\":1073741824"), std::string::npos);
  auto [requests, bytes] = parse_stats(r.err);
  std::uint64_t logged_requests = 0;
  const std::uint64_t served = nginx_bytes_since(log0, &logged_requests, requests);
  const std::uint64_t header = fs::file_size(g->www / "big.gguf") - kGiB;
  // The header is copied in doubling steps from 64 KiB: at most twice its bytes, nothing like the 1 GiB of data.
  EXPECT_GE(served, header);
  EXPECT_LE(served, 2 * header + (64u << 10)) << "header " << header << ", served " << served;
  EXPECT_LE(bytes, 2 * header + (64u << 10));
  std::printf("inspect big.gguf: header %llu bytes, %llu served in %llu requests\n", static_cast<unsigned long long>(header),
              static_cast<unsigned long long>(served), static_cast<unsigned long long>(requests));
  const std::uint64_t log1 = log_size();
  CliRun split = cli("validate --stats " + g->nginx_url("big-00002-of-00002.gguf"));
  EXPECT_EQ(split.code, 0) << split.err;
  EXPECT_NE(split.out.find("2 split files"), std::string::npos) << split.out;
  auto [split_requests, split_bytes] = parse_stats(split.err);
  const std::uint64_t split_served = nginx_bytes_since(log1, &logged_requests, split_requests);
  const std::uint64_t headers = fs::file_size(g->www / "big-00001-of-00002.gguf") + fs::file_size(g->www / "big-00002-of-00002.gguf") - 2 * kGiB;
  EXPECT_LE(split_served, 2 * headers + (128u << 10)) << "headers " << headers << ", served " << split_served;
  EXPECT_LE(split_bytes, 2 * headers + (128u << 10));
}

TEST(HttpCli, TimeoutOptionAndEnvironmentBoundARemoteRead) {
  REQUIRE_SERVERS();
  const std::string env = std::string(kHttpTimeoutEnv) + "=1";
  const std::pair<std::string, std::string> runs[] = {{"inspect --timeout 1 '" + fault("small.safetensors", "slowheaders=1&tag=c1") + "'", ""},
                                                      {"inspect '" + fault("small.safetensors", "trickle=1&tag=c2") + "'", env}};
  for (const auto& [args, how] : runs) {
    const auto t0 = std::chrono::steady_clock::now();
    CliRun r = cli(args, how);
    EXPECT_LT(seconds_since(t0), 10.0) << args;
    EXPECT_EQ(r.code, 3) << args << r.err;
    EXPECT_NE(r.err.find("Timeout"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("deadline of 1 s"), std::string::npos) << r.err;
  }
}

// Ctrl-C during a remote read that makes no progress ends the CLI at once.
TEST(HttpCli, InterruptStopsABlockedRemoteRead) {
  REQUIRE_SERVERS();
  const std::string query = "slowheaders=1&tag=sigint";
  const pid_t pid = swhttp::spawn({SAFEWEIGHTS_CLI, "inspect", fault("small.safetensors", query)});
  ASSERT_GT(pid, 0);
  for (int i = 0; i < 1000 && fault_requests("/small.safetensors?" + query) < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(pid, SIGINT);
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 && seconds_since(t0) < 10.0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (done == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "the CLI was still running 10 s after SIGINT";
  }
  // Killed by SIGINT (its default action, after any cleanup) or exited non-zero: either way, not 0.
  EXPECT_TRUE(WIFSIGNALED(status) ? WTERMSIG(status) == SIGINT : WEXITSTATUS(status) != 0);
}

TEST(HttpCli, CatRefusesToMixVersionsAndWarnsWithoutValidators) {
  REQUIRE_SERVERS();
  CliRun r = cli("cat '" + fault("small.safetensors", "novalidator=1&change_after=1&tag=nvcli") + "' big");
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("RemoteChanged"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("warning: "), r.err.rfind("warning: ")) << "one warning: " << r.err;
  EXPECT_NE(r.err.find("warning: "), std::string::npos) << r.err;
}

TEST(HttpCli, ErrorsNameTheUrl) {
  REQUIRE_SERVERS();
  CliRun r = cli("validate --json " + g->nginx_url("absent.safetensors"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("FileNotFound"), std::string::npos) << r.out;
  CliRun bad = cli("inspect --header 'no colon' " + g->nginx_url("small.safetensors"));
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("Name: value"), std::string::npos) << bad.err;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new ServersEnv);
  return RUN_ALL_TESTS();
}

TEST(HttpTls, CliCacert) {
  REQUIRE_TLS();
  CliRun untrusted = cli("inspect " + g->nginx_https_url("small.safetensors"));
  EXPECT_EQ(untrusted.code, 3) << untrusted.err;
  EXPECT_NE(untrusted.err.find("certificate"), std::string::npos) << untrusted.err;
  CliRun trusted = cli("inspect --cacert " + g->ca_file().string() + " " + g->nginx_https_url("small.safetensors"));
  EXPECT_EQ(trusted.code, 0) << trusted.err;
  CliRun local = cli("inspect " + (g->www / "small.safetensors").string());
  // Same listing; only the file name in the output differs.
  EXPECT_EQ(trusted.out.substr(trusted.out.find('\n')), local.out.substr(local.out.find('\n')));
}

namespace {

// A sharded checkpoint read over HTTP: the index's shards are the URLs beside it, opened through the
// same resolver, and every command sees what it sees locally.
TEST(HttpCli, ShardedIndexOverHttpMatchesLocal) {
  REQUIRE_SERVERS();
  const fs::path folder = g->www / "sharded";
  fs::create_directories(folder);
  std::vector<std::byte> a(4096, std::byte{1}), b(8192, std::byte{2});
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::byte>(i * 13);
  std::vector<safetensors::TensorData> tensors = {{"a", TensorType::F32, {1024}, a}, {"b", TensorType::I16, {64, 64}, b}};
  safetensors::ShardOptions options;
  options.max_shard_bytes = 4096;
  ASSERT_TRUE(safetensors::write_sharded(folder.string(), tensors, options).is_ok());
  const std::string url = g->nginx_url("sharded/model.safetensors.index.json");
  const std::string path = (folder / "model.safetensors.index.json").string();

  CliRun remote = cli("inspect --json " + url), local = cli("inspect --json " + path);
  EXPECT_EQ(remote.code, 0) << remote.err;
  EXPECT_EQ(remote.out, local.out);
  EXPECT_NE(remote.out.find("\"format\":\"safetensors-index\""), std::string::npos);
  CliRun v = cli("validate --json " + url);
  EXPECT_EQ(v.code, 0) << v.out << v.err;
  EXPECT_NE(v.out.find("\"valid\":true"), std::string::npos) << v.out;
  CliRun cat_remote = cli("cat " + url + " b --slice 3:5"), cat_local = cli("cat " + path + " b --slice 3:5");
  EXPECT_EQ(cat_remote.code, 0) << cat_remote.err;
  EXPECT_EQ(cat_remote.out, cat_local.out);
  EXPECT_EQ(cat_remote.out.size(), 2u * 64 * 2);

  auto reader = safetensors::ShardedReader::open(url, *caching_resolver());
  ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
  ASSERT_EQ(reader->shards().size(), 2u);
  EXPECT_EQ(reader->shards()[1].name(), g->nginx_url("sharded/model-00002-of-00002.safetensors"));
}

}  // namespace
