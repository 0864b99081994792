// safeweights convert IN.pt OUT.safetensors | FOLDER_WITH_BIN OUTFOLDER [--dedup] [--allow-unknown] [--key KEY]
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli_common.h"
#include "safeweights/pytorch.h"

namespace safeweights::cli {
namespace {

struct ConvertCli {
  std::string input;
  std::string output;
  bool dedup = false;
  bool durable = false;
  std::string backend = "pread";
};

Status run(const ConvertCli& opt) {
  pytorch::ConvertOptions options;
  options.dedup = opt.dedup;
  options.durable = opt.durable;
  options.read.allow_unknown = checkpoint_cli().allow_unknown;
  options.read.key = checkpoint_cli().key;
  options.read.backend = parse_backend(opt.backend);
  if (::isatty(STDERR_FILENO)) {
    options.progress = [](std::size_t tensors, std::uint64_t bytes) {
      std::fprintf(stderr, "\rconverted %zu tensors, %s", tensors, human_bytes(bytes).c_str());
    };
  }
  std::error_code ec;
  Status s;
  if (std::filesystem::is_directory(opt.input, ec)) {
    auto files = pytorch::convert_folder(opt.input, opt.output, options);
    s = files.status();
    if (files.is_ok())
      for (const std::string& f : *files) std::printf("%s\n", (opt.output + "/" + f).c_str());
  } else {
    s = pytorch::convert_to_safetensors(opt.input, opt.output, options);
  }
  if (options.progress) std::fprintf(stderr, "\n");
  return s;
}

}  // namespace

void add_convert_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<ConvertCli>();
  CLI::App* cmd = app.add_subcommand("convert", "Convert a PyTorch checkpoint (.pt/.pth/.bin/.ckpt) to safetensors without running its pickle");
  cmd->add_option("INPUT", opt->input, "a torch.save file (ZIP or legacy format), or a folder with pytorch_model.bin or its shards and index")->required();
  cmd->add_option("OUTPUT", opt->output, "the .safetensors file to write (atomically), or the output folder for a folder input")->required();
  cmd->add_flag("--dedup", opt->dedup, "write one copy of tensors that share storage; the others become aliases in __metadata__");
  add_checkpoint_options(cmd);
  cmd->add_flag("--durable", opt->durable, "fsync the output before renaming it into place");
  cmd->add_option("--backend", opt->backend, "how the input is read: pread (default: chunks through one buffer) or mmap")
      ->check(CLI::IsMember({"mmap", "pread"}));
  cmd->callback([opt, &exit_code] {
    Status s = run(*opt);
    if (!s.is_ok()) {
      print_error(s.error());
      exit_code = s.error().kind() == ErrorKind::InvalidArgument ? kExitUsage : kExitInvalid;
    }
  });
}

}  // namespace safeweights::cli
