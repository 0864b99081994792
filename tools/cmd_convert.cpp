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

std::string lower(std::string_view s) {
  std::string out(s);
  std::ranges::transform(out, out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::optional<TensorType> parse_type(std::string_view name) {
  const std::string wanted = lower(name);
  for (const TensorTypeInfo& info : tensor_type_table())
    if (lower(info.name) == wanted && std::ranges::find(plain_type_names(), wanted) != plain_type_names().end()) return info.type;
  return std::nullopt;
}

bool has_mix_knobs(const ConvertArgs& o) {
  return !o.output_tensor_type.empty() || !o.token_embedding_type.empty() || !o.tensor_types.empty() || !o.tensor_type_files.empty() ||
         !o.override_kv.empty() || !o.prune_layers.empty() || o.pure || o.leave_output_tensor || o.allow_requantize || !o.imatrix.empty() ||
         !o.include_weights.empty() || !o.exclude_weights.empty();
}

// The entries of one --tensor-type or --tensor-type-file, appended.
Status add_tensor_type(const std::string& spec, QuantizeMix& mix) {
  auto entry = gguf::parse_tensor_type("--tensor-type", spec);
  if (!entry.is_ok()) return std::move(entry).status();
  mix.tensor_types.push_back(std::move(entry).value());
  return Status::ok();
}

Status add_tensor_type_file(const std::string& path, QuantizeMix& mix) {
  auto entries = gguf::read_tensor_type_file(path);
  if (!entries.is_ok()) return std::move(entries).status();
  mix.tensor_types.insert(mix.tensor_types.end(), entries->begin(), entries->end());
  return Status::ok();
}

// The --tensor-type and --tensor-type-file entries in the order their options were given.
Status add_tensor_types(const ConvertArgs& o, QuantizeMix& mix) {
  std::vector<bool> order = o.tensor_type_order;
  if (order.size() != o.tensor_types.size() + o.tensor_type_files.size()) {
    order.assign(o.tensor_types.size(), false);
    order.resize(o.tensor_types.size() + o.tensor_type_files.size(), true);
  }
  std::size_t next_spec = 0, next_file = 0;
  for (const bool file : order) {
    auto status = file ? add_tensor_type_file(o.tensor_type_files[next_file++], mix) : add_tensor_type(o.tensor_types[next_spec++], mix);
    if (!status.is_ok()) return status;
  }
  return Status::ok();
}

// llama-quantize's file type and knobs, as QuantizeMix takes them.
Result<QuantizeMix> parse_mix(const ConvertArgs& o) {
  QuantizeMix mix;
  mix.file_type = o.type;
  if (!o.output_tensor_type.empty()) {
    auto t = gguf::parse_ggml_type("--output-tensor-type", o.output_tensor_type);
    if (!t.is_ok()) return std::move(t).error();
    mix.output_tensor_type = *t;
  }
  if (!o.token_embedding_type.empty()) {
    auto t = gguf::parse_ggml_type("--token-embedding-type", o.token_embedding_type);
    if (!t.is_ok()) return std::move(t).error();
    mix.token_embedding_type = *t;
  }
  auto status = add_tensor_types(o, mix);
  if (!status.is_ok()) return status;
  for (const std::string& spec : o.override_kv) {
    auto entry = gguf::parse_kv_override(spec);
    if (!entry.is_ok()) return std::move(entry).error();
    mix.override_kv.push_back(std::move(entry).value());
  }
  if (!o.prune_layers.empty()) {
    auto layers = gguf::parse_prune_layers(o.prune_layers);
    if (!layers.is_ok()) return std::move(layers).error();
    mix.prune_layers = std::move(layers).value();
  }
  mix.pure = o.pure;
  mix.leave_output_tensor = o.leave_output_tensor;
  mix.allow_requantize = o.allow_requantize;
  mix.imatrix = o.imatrix;
  mix.include_weights = o.include_weights;
  mix.exclude_weights = o.exclude_weights;
  return mix;
}

// --type: a tensor type (every tensor that type), or llama-quantize's file type with its knobs.
Status set_type(const ConvertArgs& opt, ConvertOptions& options) {
  const bool knobs = has_mix_knobs(opt);
  if (opt.type.empty()) return knobs ? usage("llama-quantize's options need --type with one of its file types (Q4_K_M, ...)") : Status::ok();
  if (!knobs) options.type = parse_type(opt.type);
  if (options.type) return Status::ok();
  if (!gguf::is_llama_file_type(opt.type))
    return usage("--type " + opt.type +
                 ": expected f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k or nvfp4, or a llama-quantize file type "
                 "(Q4_K_M, Q5_K_S, IQ4_XS, ... or its number)");
  auto mix = parse_mix(opt);
  if (!mix.is_ok()) return std::move(mix).status();
  options.mix = std::move(mix).value();
  return Status::ok();
}

std::function<void(std::size_t, std::uint64_t)> terminal_progress() {
  if (!::isatty(STDERR_FILENO)) return {};
  return [](std::size_t tensors, std::uint64_t bytes) { std::fprintf(stderr, "\rconverted %zu tensors, %s", tensors, human_bytes(bytes).c_str()); };
}

// One line per tensor whose type was decided (changed, or kept against --type; every tensor in a dry
// run), then the totals by type.
void print_summary(const ConvertReport& report, const std::string& output, bool dry_run) {
  std::map<std::string_view, std::size_t> by_type;
  for (const ConvertedTensor& t : report.tensors) {
    ++by_type[type_name(t.to)];
    if (!dry_run && t.from == t.to && t.note.empty()) continue;
    std::printf("%s: %s -> %s%s\n", printable(t.name).c_str(), std::string(type_name(t.from)).c_str(), std::string(type_name(t.to)).c_str(),
                t.note.empty() ? "" : (" (" + t.note + ")").c_str());
  }
  std::string totals;
  for (const auto& [name, count] : by_type) totals += (totals.empty() ? "" : ", ") + std::to_string(count) + " " + std::string(name);
  std::printf("%s %s: %zu tensors (%s), %s\n", dry_run ? "dry run, nothing written; would write" : "wrote", printable(output).c_str(),
              report.tensors.size(), totals.c_str(), human_bytes(report.bytes_written).c_str());
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
  if (Status s = set_type(opt, options); !s.is_ok()) return s;
  options.threads = opt.threads;
  options.dedup = opt.dedup;
  options.to = opt.to;
  options.write.durable = opt.durable;
  options.dry_run = opt.dry_run;
  options.keep_split = opt.keep_split;
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
  print_summary(*report, opt.output, opt.dry_run);
  return Status::ok();
}

}  // namespace

int run_convert(const ConvertArgs& args) { return exit_status(run_conversion(args)); }

}  // namespace safeweights::cli
