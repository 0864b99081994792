// safeweights convert IN OUT [--type T] [--threads N] [--entry NAME]
//   IN: safetensors file or index, DDUF (--entry), GGUF, a Hugging Face folder, a PyTorch checkpoint;
//   OUT's extension picks the format (.safetensors, .gguf). A folder of .bin shards -> OUTFOLDER, and
//   .pt -> .safetensors [--dedup], keep the PyTorch converter's own path.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "cli_common.h"
#include "commands.h"
#include "safeweights/convert.h"
#include "safeweights/hf_llama.h"
#include "safeweights/pytorch.h"

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
  for (const std::string& file : report.files) std::printf("  %s\n", printable(file).c_str());
}

// The PyTorch converter's own paths: a folder of .bin shards, and .pt -> .safetensors (--dedup).
Status run_pytorch(const ConvertArgs& opt, bool folder) {
  pytorch::ConvertOptions options;
  options.dedup = opt.dedup;
  options.durable = opt.durable;
  options.read.allow_unknown = checkpoint_cli().allow_unknown;
  options.read.key = checkpoint_cli().key;
  options.read.backend = parse_backend(opt.backend);
  options.progress = terminal_progress();
  if (options.read.key.empty()) {  // say which level the tensors come from when it was chosen for the user
    options.opened = [said = std::string()](const std::string&, const std::string& key) mutable {
      if (key.empty() || key == said) return;
      std::fprintf(stderr, "reading the tensors under top-level key `%s` (use --key to choose another)\n", printable(key).c_str());
      said = key;
    };
  }
  Status s;
  if (folder) {
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

bool is_bin_folder(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path + "/pytorch_model.bin", ec) || std::filesystem::exists(path + "/pytorch_model.bin.index.json", ec);
}

// --split-max-size / --split-max-tensors: a .gguf output as llama.cpp's split files.
Status split_options(const ConvertArgs& opt, gguf::SplitOptions& split) {
  if (!opt.split_max_size.empty()) {
    auto bytes = gguf::parse_split_size(opt.split_max_size);
    if (!bytes.is_ok()) return std::move(bytes).status();
    split.max_bytes = *bytes;
  }
  split.max_tensors = opt.split_max_tensors;
  if (split.enabled() && !opt.output.ends_with(".gguf")) return usage("--split-max-size and --split-max-tensors write .gguf files");
  return Status::ok();
}

Status run_conversion(const ConvertArgs& opt) {
  ConvertOptions options;
  if (!opt.type.empty()) {
    options.type = parse_type(opt.type);
    if (!options.type) return usage("--type " + opt.type + ": expected f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k or q6_k");
  }
  std::error_code ec;
  const bool folder = std::filesystem::is_directory(opt.input, ec);
  if (folder && is_bin_folder(opt.input)) {
    if (options.type) return usage("--type is for single-file outputs; a folder of .bin shards converts to safetensors shards as they are");
    return run_pytorch(opt, true);
  }
  const FormatOptions input = input_options(opt.backend);
  if (!folder) {
    auto format = detect_format(opt.input, input);
    if (!format.is_ok()) return std::move(format).status();
    if ((*format)->name() == "pytorch" && opt.output.ends_with(".safetensors") && !options.type) return run_pytorch(opt, false);
  }
  if (opt.dedup) return usage("--dedup is for PyTorch checkpoint -> .safetensors without --type");
  options.threads = opt.threads;
  options.durable = opt.durable;
  if (Status s = split_options(opt, options.split); !s.is_ok()) return s;
  options.progress = terminal_progress();
  // A Hugging Face Llama-family folder into GGUF: llama.cpp's names, Q/K order, metadata and tokenizer.
  const bool llama = folder && opt.output.ends_with(".gguf") && hf::is_llama_folder(opt.input);
  auto file = llama ? Result<std::unique_ptr<TensorFile>>(nullptr) : open_tensors(opt.input, opt.entry, input);
  if (!file.is_ok()) return std::move(file).status();
  hf::LlamaOptions llama_options;
  llama_options.read = input;
  auto report = llama ? hf::convert_folder_to_gguf(opt.input, opt.output, options, llama_options) : convert(**file, opt.output, options);
  if (options.progress) std::fprintf(stderr, "\n");
  if (!report.is_ok()) return std::move(report).status();
  print_summary(*report, opt.output);
  return Status::ok();
}

}  // namespace

int run_convert(const ConvertArgs& args) { return exit_status(run_conversion(args)); }

}  // namespace safeweights::cli
