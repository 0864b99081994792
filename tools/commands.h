// The commands of the `safeweights` tool, each a function of a plain options struct that returns the
// process's exit code. main.cpp, the only file that includes CLI11, declares the command line and fills
// these structs: CLI11 is header-only and large, so one translation unit parses it instead of one per
// command. Defaults live here, in the structs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace safeweights::cli {

// safeweights validate [--json] [--strict] [--detect] FILE...
struct ValidateArgs {
  std::vector<std::string> files;
  bool json = false;
  bool strict = false;
  bool detect = false;  // by content alone: a name claiming another format is no error
  bool quick = false;
  bool crc = false;
  std::string backend = "mmap";
};
int run_validate(const ValidateArgs& args);

// safeweights inspect [--json] FILE [ENTRY]
struct InspectArgs {
  std::string file;
  std::string entry;  // DDUF: a .safetensors entry to inspect
  bool json = false;
  std::string backend = "mmap";
};
int run_inspect(const InspectArgs& args);

// safeweights cat FILE TENSOR [--slice SPEC] [-o OUT]
struct CatArgs {
  std::string file;
  std::vector<std::string> names;  // TENSOR, or (DDUF) ENTRY [TENSOR]
  std::string slice;
  bool has_slice = false;  // --slice was given (an empty SPEC included)
  std::string output;
  std::string backend = "mmap";
};
int run_cat(const CatArgs& args);

// safeweights bench [--json] [--passes N] [--threads N] [--device DEV] [--cold] FILE
struct BenchArgs {
  std::string file;
  bool json = false;
  int passes = 7;
  unsigned threads = 0;  // 0: one per core
  std::string device;    // empty: a host load
  bool cold = false;
  std::string strategy = "auto";
  std::string read = "auto";
  std::uint64_t chunk_mib = 0;
  std::uint64_t register_mib = 0;
  std::uint64_t buffer_mib = 0;
};
int run_bench(const BenchArgs& args);

// safeweights sample OUT
struct SampleArgs {
  std::string output;
};
int run_sample(const SampleArgs& args);

// safeweights pack FOLDER OUT.dduf [--align N] [--reference-layout]
struct PackArgs {
  std::string folder;
  std::string output;
  std::uint32_t align = 4096;
  bool reference_layout = false;
};
int run_pack(const PackArgs& args);

// safeweights unpack FILE.dduf FOLDER [--force]
struct UnpackArgs {
  std::string file;
  std::string folder;
  bool force = false;
};
int run_unpack(const UnpackArgs& args);

// safeweights convert IN OUT [--to FORMAT] [--type T] [--threads N] [--entry NAME] [--dedup] [--split-max-size S] ...
struct ConvertArgs {
  std::string input;
  std::string output;
  std::string to;  // the output format's name; empty: by extension
  std::string type;
  // llama-quantize's knobs, with a file type as --type (docs/CLI.md)
  std::string output_tensor_type, token_embedding_type, imatrix;
  std::vector<std::string> tensor_types, include_weights, exclude_weights;
  // --tensor-type-file FILE: whitespace-separated PATTERN=TYPE entries, each as a --tensor-type. The
  // order of the two options' occurrences on the command line (true: a file), which is the order their
  // patterns are tried in; empty: the --tensor-type entries, then the files.
  std::vector<std::string> tensor_type_files;
  std::vector<bool> tensor_type_order;
  std::vector<std::string> override_kv;  // --override-kv KEY=TYPE:VALUE
  std::string prune_layers;              // --prune-layers L0,L1,...
  bool pure = false, leave_output_tensor = false, allow_requantize = false;
  unsigned threads = 0;  // 0: one per core
  std::string entry;
  bool dedup = false;
  bool durable = false;
  bool dry_run = false;     // print each tensor's type and size, write nothing
  bool keep_split = false;  // a split GGUF input's files kept
  std::string split_max_size;
  std::uint64_t split_max_tensors = 0;
  std::string backend = "mmap";
  // An original download (params.json + consolidated.*): what params.json does not say.
  std::string llama_version;
  std::uint32_t max_position_embeddings = 0;  // 0: the version's
  bool instruct = false;
};
int run_convert(const ConvertArgs& args);

// safeweights diff A B [--json] [--entry-a NAME] [--entry-b NAME]
struct DiffArgs {
  std::string a, b;
  std::string entry_a, entry_b;
  bool json = false;
  std::string backend = "mmap";
};
int run_diff(const DiffArgs& args);

}  // namespace safeweights::cli
