// safeweights validate [--json] [--strict] FILE...
#include <cstdio>
#include <memory>

#include "cli_common.h"

namespace safeweights::cli {
namespace {

struct ValidateOptions {
  std::vector<std::string> files;
  bool json = false;
  bool strict = false;
  bool quick = false;
  bool crc = false;
  std::string backend = "mmap";
};

struct Outcome {
  const Format* format = nullptr;  // null when the file could not be read at all
  Status status;
  std::string summary;  // for valid files: "12 tensors, 1.2 GiB of data"
};

Outcome validate_one(const std::string& path, const ValidateOptions& opt) {
  FormatOptions options = input_options(opt.backend);
  options.strict = opt.strict;
  // Over HTTP a CRC check downloads every entry: only on request.
  options.crc = !opt.quick && (!is_url(path) || opt.crc);
  auto format = detect_format(path, options);
  if (!format.is_ok()) return {nullptr, std::move(format).status(), ""};
  auto summary = (*format)->validate(path, options);
  if (!summary.is_ok()) return {*format, std::move(summary).status(), ""};
  return {*format, Status::ok(), std::move(summary).value()};
}

int run(const ValidateOptions& opt) {
  bool all_valid = true;
  for (const std::string& path : opt.files) {
    Outcome out = validate_one(path, opt);
    all_valid = all_valid && out.status.is_ok();
    if (opt.json) {
      std::string line = "{\"file\":" + json_quote(path) + ",\"format\":" +
                         (out.format ? json_quote(out.format->name()) : std::string("null")) +
                         ",\"valid\":" + (out.status.is_ok() ? "true" : "false") + ",\"error\":" +
                         (out.status.is_ok() ? std::string("null") : error_json(out.status.error())) + "}";
      std::printf("%s\n", line.c_str());
    } else if (out.status.is_ok()) {
      std::printf("%s: OK (%s, %s)\n", printable(path).c_str(), std::string(out.format->name()).c_str(),
                  printable(out.summary).c_str());
    } else {
      std::printf("%s: INVALID\n", printable(path).c_str());
      print_error(out.status.error());
    }
  }
  std::fflush(stdout);
  return all_valid ? kExitOk : kExitInvalid;
}

}  // namespace

void add_validate_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<ValidateOptions>();
  CLI::App* cmd = app.add_subcommand("validate", "Check files against every rule of their format (DDUF: also every entry's CRC and contents); exit 0 if all are valid, 1 if any is not");
  cmd->add_option("FILE", opt->files, "safetensors or DDUF files (paths or http(s):// URLs), or *.safetensors.index.json")->required();
  cmd->add_flag("--quick", opt->quick, "DDUF: skip the CRC-32 check of every entry");
  cmd->add_flag("--crc", opt->crc, "DDUF over HTTP(S): also check every entry's CRC-32 (downloads every entry; off by default for URLs)");
  cmd->add_flag("--json", opt->json, "one JSON object per file per line: {file, format, valid, error: {kind, message, ...}}");
  cmd->add_flag("--strict", opt->strict, "also reject tensor entries with fields other than dtype, shape, data_offsets");
  cmd->add_option("--backend", opt->backend, "how files are read")->check(CLI::IsMember({"mmap", "pread"}));
  add_http_options(cmd);
  add_checkpoint_options(cmd);
  cmd->callback([opt, &exit_code] { exit_code = run(*opt); });
}

}  // namespace safeweights::cli
