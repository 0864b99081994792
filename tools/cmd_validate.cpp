// safeweights validate [--json] [--strict] [--detect] FILE...: each file read as what its content is; a
// name that claims another format (x.dduf holding safetensors) fails unless --detect says to go by
// content alone.
#include <algorithm>
#include <cstdio>
#include <utility>

#include "cli_common.h"
#include "commands.h"

namespace safeweights::cli {
namespace {

struct Outcome {
  const Format* format = nullptr;  // null when the file could not be read at all
  Status status;
  std::string summary;  // for valid files: "12 tensors, 1.2 GiB of data"
};

Outcome validate_one(const std::string& path, const ValidateArgs& opt) {
  FormatOptions options = input_options(opt.backend);
  options.strict = opt.strict;
  // Over HTTP a CRC check downloads every entry: only on request.
  options.crc = !opt.quick && (!is_url(path) || opt.crc);
  auto format = detect_format(path, options);
  if (!format.is_ok()) return {nullptr, std::move(format).status(), ""};
  const Format* claimed = format_claimed_by_name(path);
  if (!opt.detect && claimed != nullptr && claimed != *format) {
    return {*format,
            Error(ErrorKind::UnknownFormat,
                  "the name says " + std::string(claimed->name()) + " but the content is " + std::string((*format)->name()) +
                      ": a reader that trusts the name refuses it; rename the file, or pass --detect to validate it by its content")
                .with_file(redact_secrets(path)),
            ""};
  }
  auto summary = (*format)->validate(path, options);
  if (!summary.is_ok()) return {*format, std::move(summary).status(), ""};
  return {*format, Status::ok(), std::move(summary).value()};
}

// {"file":..,"format":..|null,"valid":..,"error":{..}|null}: one line of --json.
std::string outcome_json(const std::string& path, const Outcome& out) {
  JsonWriter w;
  w.object().key("file").string(path).key("format");
  if (out.format)
    w.string(out.format->name());
  else
    w.null();
  w.key("valid").boolean(out.status.is_ok()).key("error");
  if (out.status.is_ok())
    w.null();
  else
    w.raw(error_json(out.status.error()));
  return std::move(w.end().text());
}

}  // namespace

// Every file is checked; the exit status is the highest any file gives (an unreadable one outranks an
// invalid one: its verdict is unknown).
int run_validate(const ValidateArgs& opt) {
  int code = kExitOk;
  for (const std::string& path : opt.files) {
    Outcome out = validate_one(path, opt);
    code = std::max(code, exit_code_of(out.status));
    const std::string shown = redact_secrets(path);  // a presigned URL's signature is not echoed
    if (opt.json) {
      std::printf("%s\n", outcome_json(shown, out).c_str());
    } else if (out.status.is_ok()) {
      std::printf("%s: OK (%s, %s)\n", printable(shown).c_str(), std::string(out.format->name()).c_str(), printable(out.summary).c_str());
    } else {
      std::printf("%s: INVALID\n", printable(shown).c_str());
      print_error(out.status.error());
    }
  }
  return code;
}

}  // namespace safeweights::cli
