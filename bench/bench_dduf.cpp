// bench_dduf — DDUF packing and reading against physical references, measured in the same run.
//
// Usage: bench_dduf [--dir DIR] [--passes N] [--mb MB] [--entries K]
//
// Builds DIR/safeweights_bench_dduf/ — a diffusers-like folder of about MB megabytes (default 1024):
// model_index.json, unet/ vae/ text_encoder/ (config + one .safetensors each, sizes 70/8/22 % of MB),
// tokenizer/ and scheduler/ side files — then, for N passes (default 5), measures:
//   pack        dduf::pack_folder(folder, out) (default 4096-byte alignment; CRC in the same pass)
//   cp -r       `cp -r folder copy` of the same folder (physical reference for pack)
//   read views  dduf::Reader::open (mmap) + every entry's bytes read through its zero-copy view
//               (a 64-bit XOR over all of them, so every byte is touched), with 1 and with 2 threads
//               (the views are shared, read-only memory: a consumer may read them from several threads)
//   cat         `cat archive > /dev/null` (physical reference for read views)
//   open+list   dduf::Reader::open + listing entries, for the archive above and for one of K entries
//               (default 5000) written once up front
// The page cache is warm (everything was just written). sync() runs before each write measurement and
// outputs are deleted right after theirs, outside the timed regions; the order of pack and cp -r
// alternates between passes. Medians; GB = 1e9 bytes.
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "safeweights/dduf.h"
#include "safeweights/safetensors_writer.h"

namespace {

using namespace safeweights;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_dduf: %s\n", what.c_str());
  std::exit(1);
}
void check(const Status& s, const char* what) {
  if (!s.is_ok()) die(std::string(what) + ": " + s.error().to_string());
}
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
int run_shell(const std::string& command) {
  int rc = std::system(command.c_str());
  if (rc != 0) die("command failed: " + command);
  return rc;
}
std::string quote(const std::string& s) { return "'" + s + "'"; }

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

// One safetensors file of about `bytes` bytes: F16 tensors of 8 MiB with a non-trivial pattern.
void write_weights(const fs::path& path, std::uint64_t bytes) {
  constexpr std::uint64_t kTensor = 8u << 20;
  std::vector<std::byte> data(kTensor);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>((i * 2654435761u) >> 13);
  std::vector<safetensors::TensorData> tensors;
  for (std::uint64_t i = 0; i * kTensor < bytes; ++i) {
    tensors.push_back({"layers." + std::to_string(i) + ".weight", TensorType::F16, {kTensor / 2}, data});
  }
  check(safetensors::write_file(path.string(), tensors), "write weights");
}

void build_folder(const fs::path& root, std::uint64_t total) {
  fs::remove_all(root);
  for (const char* c : {"unet", "vae", "text_encoder", "tokenizer", "scheduler"}) fs::create_directories(root / c);
  write_text(root / "model_index.json", R"({"_class_name":"StableDiffusionPipeline","unet":["diffusers","UNet2DConditionModel"],)"
                                        R"("vae":["diffusers","AutoencoderKL"],"text_encoder":["transformers","CLIPTextModel"],)"
                                        R"("tokenizer":["transformers","CLIPTokenizer"],"scheduler":["diffusers","PNDMScheduler"]})");
  for (const char* c : {"unet", "vae", "text_encoder"}) write_text(root / c / "config.json", R"({"sample_size":64})");
  write_weights(root / "unet" / "diffusion_pytorch_model.safetensors", total * 70 / 100);
  write_weights(root / "vae" / "diffusion_pytorch_model.safetensors", total * 8 / 100);
  write_weights(root / "text_encoder" / "model.safetensors", total * 22 / 100);
  write_text(root / "tokenizer" / "tokenizer_config.json", R"({"model_max_length":77})");
  std::string vocab = "{";
  for (int i = 0; i < 20000; ++i) vocab += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":" + std::to_string(i);
  write_text(root / "tokenizer" / "vocab.json", vocab + "}");
  write_text(root / "tokenizer" / "merges.txt", std::string(400000, 'a'));
  write_text(root / "scheduler" / "scheduler_config.json", R"({"num_train_timesteps":1000})");
}

std::uint64_t folder_bytes(const fs::path& root, int* files) {
  std::uint64_t n = 0;
  *files = 0;
  for (auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file()) n += e.file_size(), ++*files;
  }
  return n;
}

// Every entry's bytes through its zero-copy view, in 64 MiB pieces spread over `threads` threads; each
// piece's page tables are populated in one call (hint WillNeed) before a 64-bit XOR touches every byte.
std::uint64_t read_all_views(const std::string& path, unsigned threads) {
  auto reader = dduf::Reader::open(path);
  if (!reader.is_ok()) die(reader.error().to_string());
  struct Piece {
    SourcePtr src;
    std::uint64_t offset, length;
  };
  std::vector<Piece> pieces;
  constexpr std::uint64_t kPiece = 64u << 20;
  for (const auto& e : reader->entries()) {
    auto src = reader->open_entry(e.filename);
    if (!src.is_ok()) die(src.error().to_string());
    for (std::uint64_t off = 0; off < (*src)->size(); off += kPiece) {
      pieces.push_back({*src, off, std::min(kPiece, (*src)->size() - off)});
    }
  }
  std::atomic<std::size_t> next{0};
  std::vector<std::uint64_t> result(threads, 0);
  auto worker = [&](unsigned t) {
    std::uint64_t a = 0, b = 0, c = 0, d = 0;
    for (std::size_t k; (k = next.fetch_add(1)) < pieces.size();) {
      const Piece& piece = pieces[k];
      piece.src->hint({piece.offset, piece.length}, AccessHint::WillNeed);
      auto view = piece.src->view(piece.offset, piece.length);
      const std::byte* p = view.data();
      std::size_t n = view.size(), i = 0;
      for (; i + 32 <= n; i += 32) {
        std::uint64_t w[4];
        std::memcpy(w, p + i, 32);
        a ^= w[0], b ^= w[1], c ^= w[2], d ^= w[3];
      }
      for (; i < n; ++i) a ^= std::to_integer<std::uint64_t>(p[i]);
    }
    result[t] = a ^ b ^ c ^ d;
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker, t);
  worker(0);
  for (auto& th : pool) th.join();
  std::uint64_t x = 0;
  for (auto r : result) x ^= r;
  return x;
}

std::string machine() {
  utsname u{};
  uname(&u);
  std::string cpu = "unknown CPU";
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  return cpu + ", " + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " cores, " +
         std::to_string(static_cast<long long>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) / (1 << 30)) + " GiB, " + u.sysname + " " + u.release;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp";
  int passes = 5;
  std::uint64_t mb = 1024;
  int many = 5000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value for " + a);
      return argv[++i];
    };
    if (a == "--dir")
      dir = next();
    else if (a == "--passes")
      passes = std::stoi(next());
    else if (a == "--mb")
      mb = std::stoull(next());
    else if (a == "--entries")
      many = std::stoi(next());
    else
      die("unknown argument " + a + " (see the comment at the top of bench/bench_dduf.cpp)");
  }
  const fs::path root = fs::path(dir) / "safeweights_bench_dduf";
  const fs::path folder = root / "pipeline";
  const std::string archive = (root / "pipeline.dduf").string();
  const std::string packed = (root / "packed.dduf").string();
  const std::string copy = (root / "copy").string();
  fs::create_directories(root);
  build_folder(folder, mb * 1000 * 1000);
  check(dduf::pack_folder(folder.string(), archive), "pack (setup)");
  int files = 0;
  const std::uint64_t bytes = folder_bytes(folder, &files);
  const std::uint64_t archive_bytes = fs::file_size(archive);

  // A many-entry archive for open+list.
  const std::string many_path = (root / "many.dduf").string();
  {
    auto ex = dduf::Exporter::create(many_path);
    if (!ex.is_ok()) die(ex.error().to_string());
    std::string index = "{";
    for (int i = 0; i < many; ++i) index += (i ? ",\"c" : "\"c") + std::to_string(i) + "\":[\"x\",\"y\"]";
    index += "}";
    check(ex->add_bytes("model_index.json", std::as_bytes(std::span<const char>(index.data(), index.size()))), "many");
    const std::string cfg = "{}";
    for (int i = 0; i + 1 < many; ++i) {
      std::string name = "c";
      name += std::to_string(i);
      name += "/config.json";
      check(ex->add_bytes(name, std::as_bytes(std::span<const char>(cfg.data(), cfg.size()))), "many");
    }
    check(ex->finish(), "many finish");
  }

  std::vector<double> pack_s, cp_s, view_s, view2_s, cat_s, open_s, open_many_s;
  (void)read_all_views(archive, 1);  // warm
  for (int pass = 0; pass < passes; ++pass) {
    auto time_pack = [&] {
      ::sync();
      auto t0 = Clock::now();
      check(dduf::pack_folder(folder.string(), packed), "pack");
      ::sync();
      pack_s.push_back(seconds_since(t0));
      fs::remove(packed);
    };
    auto time_cp = [&] {
      ::sync();
      auto t0 = Clock::now();
      run_shell("cp -r " + quote(folder.string()) + " " + quote(copy) + " && sync");
      cp_s.push_back(seconds_since(t0));
      fs::remove_all(copy);
    };
    if (pass % 2 == 0) {
      time_pack();
      time_cp();
    } else {
      time_cp();
      time_pack();
    }
    auto t0 = Clock::now();
    volatile std::uint64_t sink = read_all_views(archive, 1);
    view_s.push_back(seconds_since(t0));
    t0 = Clock::now();
    sink = read_all_views(archive, 2);
    (void)sink;
    view2_s.push_back(seconds_since(t0));
    t0 = Clock::now();
    run_shell("cat " + quote(archive) + " > /dev/null");
    cat_s.push_back(seconds_since(t0));
    t0 = Clock::now();
    for (int r = 0; r < 20; ++r) {
      auto reader = dduf::Reader::open(archive);
      if (!reader.is_ok() || reader->entries().empty()) die("open");
    }
    open_s.push_back(seconds_since(t0) / 20);
    t0 = Clock::now();
    {
      auto reader = dduf::Reader::open(many_path);
      if (!reader.is_ok() || static_cast<int>(reader->entries().size()) != many) die("open many");
    }
    open_many_s.push_back(seconds_since(t0));
  }

  const double pack = median(pack_s), cp = median(cp_s), view = median(view_s), cat = median(cat_s);
  std::printf("machine: %s\n", machine().c_str());
  std::printf("folder: %.3f GB in %d files; archive %.3f GB; %d passes; medians; GB = 1e9 bytes\n\n", static_cast<double>(bytes) / 1e9, files,
              static_cast<double>(archive_bytes) / 1e9, passes);
  std::printf("| measurement | median | rate | vs reference |\n|---|---|---|---|\n");
  std::printf("| pack (aligned, CRC, sync) | %.3f s | %.2f GB/s | %.2fx cp -r |\n", pack, static_cast<double>(bytes) / pack / 1e9, cp / pack);
  std::printf("| cp -r + sync (reference) | %.3f s | %.2f GB/s | 1.00x |\n", cp, static_cast<double>(bytes) / cp / 1e9);
  std::printf("| read every entry via zero-copy views, 1 thread | %.3f s | %.2f GB/s | %.2fx cat |\n", view,
              static_cast<double>(archive_bytes) / view / 1e9, cat / view);
  const double view2 = median(view2_s);
  std::printf("| read every entry via zero-copy views, 2 threads | %.3f s | %.2f GB/s | %.2fx cat |\n", view2,
              static_cast<double>(archive_bytes) / view2 / 1e9, cat / view2);
  std::printf("| cat > /dev/null (reference) | %.3f s | %.2f GB/s | 1.00x |\n", cat, static_cast<double>(archive_bytes) / cat / 1e9);
  std::printf("| open+list, %d-entry archive | %.3f ms | | |\n", files, median(open_s) * 1e3);
  std::printf("| open+list, %d-entry archive | %.3f ms | | |\n", many, median(open_many_s) * 1e3);
  fs::remove_all(root);
  return 0;
}
