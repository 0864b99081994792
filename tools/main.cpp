// safeweights: read, check and inspect model-weight files.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli_common.h"
#include "safeweights/atomic_file.h"

int main(int argc, char** argv) {
  // Ctrl-C and SIGTERM end the CLI at once, removing any named temporary file first (nameless ones
  // vanish with the process).
  safeweights::install_cleanup_signal_handlers();
  CLI::App app{"safeweights: read, check, inspect, pack and convert model-weight files (safetensors, DDUF, PyTorch)", "safeweights"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "safeweights 0.1.0");
  int exit_code = safeweights::cli::kExitOk;
  safeweights::cli::add_validate_command(app, exit_code);
  safeweights::cli::add_inspect_command(app, exit_code);
  safeweights::cli::add_cat_command(app, exit_code);
  safeweights::cli::add_bench_command(app, exit_code);
  safeweights::cli::add_sample_command(app, exit_code);
  safeweights::cli::add_pack_command(app, exit_code);
  safeweights::cli::add_unpack_command(app, exit_code);
  safeweights::cli::add_convert_command(app, exit_code);
  safeweights::cli::add_diff_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message and a hint
    return safeweights::cli::kExitUsage;
  }
  safeweights::cli::print_http_stats();
  return exit_code;
}
