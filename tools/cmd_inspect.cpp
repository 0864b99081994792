// safeweights inspect [--json] FILE [ENTRY]
#include <cstdio>

#include "cli_common.h"
#include "commands.h"

namespace safeweights::cli {

int run_inspect(const InspectArgs& opt) {
  const FormatOptions options = input_options(opt.backend);
  auto format = detect_format(opt.file, options);
  std::vector<std::string> members;
  if (!opt.entry.empty()) members.push_back(opt.entry);
  auto text = format.is_ok() ? (*format)->inspect(opt.file, members, options, opt.json) : Result<std::string>(format.error());
  if (!text.is_ok()) return exit_status(text.status());
  // JSON escapes what it must and stays exact; a report for people must not drive their terminal.
  std::fputs(opt.json ? text->c_str() : printable(*text, LineBreaks::Keep).c_str(), stdout);
  return kExitOk;
}

}  // namespace safeweights::cli
