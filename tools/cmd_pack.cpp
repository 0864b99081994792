// safeweights pack FOLDER OUT.dduf [--align N] [--reference-layout]
// safeweights unpack FILE.dduf FOLDER [--force]
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "cli_common.h"
#include "commands.h"
#include "safeweights/dduf.h"

namespace safeweights::cli {
namespace {

// A one-line progress meter on stderr, only when stderr is a terminal, at most ten updates a second.
class Progress {
 public:
  explicit Progress(const char* verb) : verb_(verb), enabled_(::isatty(STDERR_FILENO) != 0) {}
  void update(std::uint64_t done, std::uint64_t total) {
    if (!enabled_) return;
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(100) && done < total) return;
    last_ = now;
    if (total > 0) {
      std::fprintf(stderr, "\r%s: %3d%% (%s of %s)   ", verb_, static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total)),
                   human_bytes(done).c_str(), human_bytes(total).c_str());
    } else {
      std::fprintf(stderr, "\r%s: %s   ", verb_, human_bytes(done).c_str());
    }
    shown_ = true;
  }
  ~Progress() {
    if (shown_) std::fprintf(stderr, "\n");
  }

 private:
  const char* verb_;
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace

int run_pack(const PackArgs& opt) {
  dduf::PackOptions options;
  options.alignment = opt.align;
  options.reference_layout = opt.reference_layout;
  Status s;
  {
    Progress progress("packing");
    options.progress = [&progress](std::uint64_t done, std::uint64_t total) { progress.update(done, total); };
    s = dduf::pack_folder(opt.folder, opt.output, options);
  }
  if (!s.is_ok()) return exit_status(s);
  std::printf("wrote %s\n", printable(opt.output).c_str());
  return kExitOk;
}

int run_unpack(const UnpackArgs& args) {
  const std::string& file = args.file;
  const std::string& folder = args.folder;
  auto source = resolver_of(input_options()).open(file);
  auto reader = source.is_ok() ? dduf::Reader::open(std::move(source).value()) : Result<dduf::Reader>(source.error());
  if (!reader.is_ok()) return exit_status(reader.status());
  // Over HTTP, entries download in parallel, one connection each.
  const unsigned threads = is_url(file) ? http_cli().parallel : 0;
  if (Status s = dduf::unpack(*reader, folder, threads, args.force); !s.is_ok()) return exit_status(s);
  std::printf("wrote %zu files into %s\n", reader->entries().size(), printable(folder).c_str());
  return kExitOk;
}

}  // namespace safeweights::cli
