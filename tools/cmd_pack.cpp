// safeweights pack FOLDER OUT.dduf [--align N] [--reference-layout]
// safeweights unpack FILE.dduf FOLDER [--force]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "safeweights/dduf.h"

namespace safeweights::cli {
namespace {

struct PackCliOptions {
  std::string folder;
  std::string output;
  std::uint32_t align = 4096;
  bool reference_layout = false;
};

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

int run_pack(const PackCliOptions& opt) {
  dduf::PackOptions options;
  options.alignment = opt.align;
  options.reference_layout = opt.reference_layout;
  Status s;
  {
    Progress progress("packing");
    options.progress = [&progress](std::uint64_t done, std::uint64_t total) { progress.update(done, total); };
    s = dduf::pack_folder(opt.folder, opt.output, options);
  }
  if (!s.is_ok()) {
    print_error(s.error());
    return s.error().kind() == ErrorKind::InvalidArgument ? kExitUsage : kExitInvalid;
  }
  std::printf("wrote %s\n", opt.output.c_str());
  return kExitOk;
}

int run_unpack(const std::string& file, const std::string& folder, bool force) {
  auto source = resolver_of(input_options()).open(file);
  auto reader = source.is_ok() ? dduf::Reader::open(std::move(source).value()) : Result<dduf::Reader>(source.error());
  if (!reader.is_ok()) {
    print_error(reader.error());
    return kExitInvalid;
  }
  // Over HTTP, entries download in parallel, one connection each.
  const unsigned threads = is_url(file) ? http_cli().parallel : 0;
  if (Status s = dduf::unpack(*reader, folder, threads, force); !s.is_ok()) {
    print_error(s.error());
    return kExitInvalid;
  }
  std::printf("wrote %zu files into %s\n", reader->entries().size(), folder.c_str());
  return kExitOk;
}

}  // namespace

void add_pack_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<PackCliOptions>();
  CLI::App* cmd = app.add_subcommand("pack", "Pack a diffusers folder into a DDUF file (checked before the first byte is written)");
  cmd->add_option("FOLDER", opt->folder, "folder with model_index.json and one folder per component")->required();
  cmd->add_option("OUT", opt->output, "the .dduf file to write (atomically)")->required();
  cmd->add_option("--align", opt->align, "start each .safetensors entry's data on this boundary (power of two, 0 for none)")
      ->check(CLI::Range(0u, 32768u));
  cmd->add_flag("--reference-layout", opt->reference_layout, "write huggingface_hub's exact layout (no alignment padding)");
  cmd->callback([opt, &exit_code] { exit_code = run_pack(*opt); });
}

void add_unpack_command(CLI::App& app, int& exit_code) {
  auto file = std::make_shared<std::string>();
  auto folder = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("unpack", "Write a DDUF file's entries into a diffusers folder (all or nothing, CRCs checked)");
  cmd->add_option("FILE", *file, "a .dduf file (a path or an http(s):// URL)")->required();
  cmd->add_option("FOLDER", *folder, "the folder to write (created if missing; must be empty unless --force)")->required();
  cmd->add_flag("--force", *force, "replace a non-empty FOLDER as a whole (none of its old files remain)");
  add_http_options(cmd);
  cmd->callback([file, folder, force, &exit_code] { exit_code = run_unpack(*file, *folder, *force); });
}

}  // namespace safeweights::cli
