// safeweights inspect [--json] FILE [ENTRY]
#include <cstdio>
#include <memory>

#include "cli_common.h"

namespace safeweights::cli {
namespace {

struct InspectOptions {
  std::string file;
  std::string entry;  // DDUF: a .safetensors entry to inspect
  bool json = false;
  std::string backend = "mmap";
};

int run(const InspectOptions& opt) {
  const FormatOptions options = input_options(opt.backend);
  auto format = detect_format(opt.file, options);
  std::vector<std::string> members;
  if (!opt.entry.empty()) members.push_back(opt.entry);
  auto text = format.is_ok() ? (*format)->inspect(opt.file, members, options, opt.json) : Result<std::string>(format.error());
  if (!text.is_ok()) {
    print_error(text.error());
    return kExitInvalid;
  }
  // JSON escapes what it must and stays exact; a report for people must not drive their terminal.
  std::fputs(opt.json ? text->c_str() : printable(*text, LineBreaks::Keep).c_str(), stdout);
  return kExitOk;
}

}  // namespace

void add_inspect_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show a file's tensors (name, dtype, shape, size), totals by dtype and metadata");
  cmd->add_option("FILE", opt->file, "a safetensors or DDUF file (a path or an http(s):// URL), or *.safetensors.index.json")->required();
  cmd->add_option("ENTRY", opt->entry, "DDUF: a .safetensors entry to inspect as a safetensors file");
  cmd->add_flag("--json", opt->json, "machine-readable: {format, header_size, metadata, tensors: [{name, dtype, shape, data_offsets}]}; DDUF: {format, entries: [{name, offset, length}], components}");
  cmd->add_option("--backend", opt->backend, "how files are read")->check(CLI::IsMember({"mmap", "pread"}));
  add_http_options(cmd);
  add_checkpoint_options(cmd);
  cmd->callback([opt, &exit_code] { exit_code = run(*opt); });
}

}  // namespace safeweights::cli
