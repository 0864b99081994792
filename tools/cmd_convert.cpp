// safeweights convert IN OUT [--to FORMAT] [--type T] ...: open_tensors(IN) -> convert() into OUT, whose
// extension (or --to) picks the format, all through convert_path (which routes a folder of .bin shards
// into a folder to convert_bin_folder, and gives a Hugging Face Llama folder into GGUF hf::plan's plan).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <memory>

#include "cli_common.h"
#include "commands.h"
#include "safeweights/convert.h"
#include "safeweights/gguf.h"

namespace safeweights::cli {
namespace {

Status usage(std::string message) { return Error(ErrorKind::InvalidArgument, std::move(message)); }

// --type: the output types offered, lower case: the float types and llama.cpp's usual quantizations.
constexpr std::string_view kTypes[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"};

std::optional<TensorType> parse_type(std::string_view name) {
  for (const TensorTypeInfo& info : tensor_type_table()) {
    std::string lower(info.name);
    std::ranges::transform(lower, lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower == name && std::ranges::find(kTypes, name) != std::end(kTypes)) return info.type;
  }
  return std::nullopt;
}

std::function<void(std::size_t, std::uint64_t)> terminal_progress() {
  if (!::isatty(STDERR_FILENO)) return {};
  return [](std::size_t tensors, std::uint64_t bytes) { std::fprintf(stderr, "\rconverted %zu tensors, %s", tensors, human_bytes(bytes).c_str()); };
}

// One line per tensor whose type was decided (changed, or kept against --type), then the totals by type.
void print_summary(const ConvertReport& report, const std::string& output) {
  std::map<std::string_view, std::size_t> by_type;
  for (const ConvertedTensor& t : report.tensors) {
    ++by_type[type_name(t.to)];
    if (t.from == t.to && t.note.empty()) continue;
    std::printf("%s: %s -> %s%s\n", printable(t.name).c_str(), std::string(type_name(t.from)).c_str(), std::string(type_name(t.to)).c_str(),
                t.note.empty() ? "" : (" (" + t.note + ")").c_str());
  }
  std::string totals;
  for (const auto& [name, count] : by_type) totals += (totals.empty() ? "" : ", ") + std::to_string(count) + " " + std::string(name);
  std::printf("wrote %s: %zu tensors (%s), %s\n", printable(output).c_str(), report.tensors.size(), totals.c_str(),
              human_bytes(report.bytes_written).c_str());
  if (report.files.size() > 1)
    for (const std::string& file : report.files) std::printf("  %s\n", printable(file).c_str());
}

// Says which level of a PyTorch checkpoint the tensors come from when it was chosen for the user.
std::function<void(const TensorFile&)> root_note() {
  if (!checkpoint_cli().key.empty()) return {};
  return [said = std::string()](const TensorFile& file) mutable {
    if (file.root().empty() || file.root() == said) return;
    std::fprintf(stderr, "reading the tensors under top-level key `%s` (use --key to choose another)\n", printable(file.root()).c_str());
    said = file.root();
  };
}

// --split-max-size / --split-max-tensors: llama.cpp's split files.
Status split_limits(const ConvertArgs& opt, SplitLimits& split) {
  if (!opt.split_max_size.empty()) {
    auto bytes = gguf::parse_split_size(opt.split_max_size);
    if (!bytes.is_ok()) return std::move(bytes).status();
    split.max_bytes = *bytes;
  }
  split.max_tensors = opt.split_max_tensors;
  return Status::ok();
}

Status run_conversion(const ConvertArgs& opt) {
  ConvertOptions options;
  if (!opt.type.empty()) {
    options.type = parse_type(opt.type);
    if (!options.type) return usage("--type " + opt.type + ": expected f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k or q6_k");
  }
  options.threads = opt.threads;
  options.dedup = opt.dedup;
  options.to = opt.to;
  options.write.durable = opt.durable;
  if (Status s = split_limits(opt, options.write.split); !s.is_ok()) return s;
  options.progress = terminal_progress();
  FormatOptions input = input_options(opt.backend);
  input.original.llama_version = opt.llama_version;
  if (opt.max_position_embeddings) input.original.max_position_embeddings = opt.max_position_embeddings;
  input.original.instruct = opt.instruct;
  auto report = convert_path(opt.input, opt.output, options, input, opt.entry, root_note());
  if (options.progress) std::fprintf(stderr, "\n");
  if (!report.is_ok()) return std::move(report).status();
  for (const std::string& note : report->notes) std::fprintf(stderr, "note: %s\n", printable(note).c_str());
  print_summary(*report, opt.output);
  return Status::ok();
}

}  // namespace

int run_convert(const ConvertArgs& args) { return exit_status(run_conversion(args)); }

}  // namespace safeweights::cli
