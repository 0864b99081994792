// safeweights validate [--json] [--strict] FILE...
#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "safeweights/dduf.h"
#include "safeweights/safetensors.h"
#include "safeweights/sharded.h"

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
  Format format;
  Status status;
  std::string summary;  // for valid files: "safetensors, 12 tensors, 1.2 GiB"
};

Outcome validate_one(const std::string& path, const ValidateOptions& opt) {
  Format format = detect_format(path);
  safetensors::ReadOptions read_options;
  read_options.reject_unknown_fields = opt.strict;
  if (format == Format::Dduf) {
    auto reader = open_dduf_input(path, parse_backend(opt.backend));
    if (!reader.is_ok()) return {format, std::move(reader).status(), ""};
    dduf::VerifyOptions verify;
    // Over HTTP a CRC check downloads every entry: only on request.
    verify.crc = !opt.quick && (!is_url(path) || opt.crc);
    if (Status s = reader->verify(verify); !s.is_ok()) return {format, std::move(s), ""};
    return {format, Status::ok(),
            std::to_string(reader->entries().size()) + " entries, " + std::to_string(reader->components().size()) +
                " components" + (verify.crc ? ", CRCs checked" : ", CRCs not checked")};
  }
  if (format == Format::SafetensorsIndex) {
    auto reader = open_sharded_input(path, parse_backend(opt.backend), read_options);
    if (!reader.is_ok()) return {format, std::move(reader).status(), ""};
    return {format, Status::ok(),
            std::to_string(reader->names().size()) + " tensors in " + std::to_string(reader->shards().size()) + " shards"};
  }
  auto reader = open_safetensors_input(path, parse_backend(opt.backend), read_options);
  if (!reader.is_ok()) {
    Error e = std::move(reader).error();
    // A file we could not even open has no known format.
    if (e.kind() == ErrorKind::FileNotFound || e.kind() == ErrorKind::IoError) format = Format::Unknown;
    return {format, Status(std::move(e)), ""};
  }
  const auto& h = reader->header();
  return {format, Status::ok(),
          std::to_string(h.tensors().size()) + " tensors, " + human_bytes(h.data_size()) + " of data"};
}

int run(const ValidateOptions& opt) {
  bool all_valid = true;
  for (const std::string& path : opt.files) {
    Outcome out = validate_one(path, opt);
    all_valid = all_valid && out.status.is_ok();
    if (opt.json) {
      std::string line = "{\"file\":" + json_string(path) + ",\"format\":" +
                         (out.format == Format::Unknown ? std::string("null") : json_string(format_name(out.format))) +
                         ",\"valid\":" + (out.status.is_ok() ? "true" : "false") + ",\"error\":" +
                         (out.status.is_ok() ? std::string("null") : json_error(out.status.error())) + "}";
      std::printf("%s\n", line.c_str());
    } else if (out.status.is_ok()) {
      std::printf("%s: OK (%s, %s)\n", path.c_str(), std::string(format_name(out.format)).c_str(), out.summary.c_str());
    } else {
      std::printf("%s: INVALID\n", path.c_str());
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
  cmd->callback([opt, &exit_code] { exit_code = run(*opt); });
}

}  // namespace safeweights::cli
