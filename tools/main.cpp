// safeweights: read, check, inspect, pack and convert model-weight files.
//
// The command line: every subcommand, option, check and help text, bound to the plain structs of
// commands.h whose run_* functions do the work. This is the only file that includes CLI11 (header-only,
// and large): the commands compile without it.
#include <CLI/CLI.hpp>

#include <string>

#include "cli_common.h"
#include "commands.h"
#include "safeweights/atomic_file.h"

namespace safeweights::cli {
namespace {

// What validate, inspect and cat accept: every registered format.
const std::string kAnyFormat =
    "safetensors (or a *.safetensors.index.json of shards), DDUF, GGUF, a PyTorch checkpoint (or a pytorch_model.bin.index.json "
    "of shards)";

void add_backend_option(CLI::App* cmd, std::string& backend, const std::string& help) {
  cmd->add_option("--backend", backend, help)->check(CLI::IsMember({"mmap", "pread"}));
}

void add_http_options(CLI::App* cmd) {
  HttpCli& http = http_cli();
  cmd->add_option("--header", http.headers, "HTTP(S) FILE: send this header, \"Name: value\" (repeatable; only to the URL's own host)");
  cmd->add_flag("--stats", http.stats, "print HTTP requests made and bytes transferred to stderr");
  cmd->add_option("--cacert", http.cacert, "HTTPS FILE: trust the CA certificates in this PEM file (default: the system's)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--timeout", http.timeout,
                  std::string("HTTP(S) FILE: deadline of each request in seconds, retries included (0: none; default: $") + kHttpTimeoutEnv +
                      ", else " + std::to_string(static_cast<int>(kDefaultHttpTimeoutS)) + ")")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--connections", http.parallel, "remote FILE: requests in flight at once per file (default 8)")->check(CLI::Range(1u, 256u));
  cmd->add_option("--part-mib", http.part_mib, "remote FILE: MiB asked for by each request of a large read (default 8)")
      ->check(CLI::Range(1u, 4096u));
  cmd->add_option("--s3-region", http.s3.region,
                  "s3:// FILE: the bucket's region (default: $AWS_REGION, $AWS_DEFAULT_REGION, the profile's, us-east-1)");
  cmd->add_option("--s3-endpoint", http.s3.endpoint_url,
                  "s3:// FILE: an S3-compatible server's URL (default: $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, the profile's endpoint_url, AWS)");
  cmd->add_option("--s3-profile", http.s3.profile,
                  "s3:// FILE: the profile in ~/.aws/credentials and ~/.aws/config (default: $AWS_PROFILE, default)");
  cmd->add_option("--s3-addressing", http.s3.addressing_style,
                  "s3:// FILE: virtual (https://BUCKET.ENDPOINT/KEY) or path (ENDPOINT/BUCKET/KEY) (default: auto: virtual on AWS, path elsewhere)")
      ->check(CLI::IsMember({"auto", "virtual", "path"}));
  cmd->add_flag("--s3-anonymous", http.s3.anonymous, "s3:// FILE: send unsigned requests (public buckets); no credentials are looked up");
}

void add_checkpoint_options(CLI::App* cmd) {
  CheckpointCli& checkpoint = checkpoint_cli();
  cmd->add_flag("--allow-unknown", checkpoint.allow_unknown,
                "PyTorch FILE: keep globals outside the allowlist as inert placeholders (nothing is called)");
  cmd->add_option("--key", checkpoint.key,
                  "PyTorch FILE: read the tensors under this top-level key (default: state_dict, model or module when present)");
}

// The options validate, inspect and cat end with: how the FILE is read, locally or remotely.
void add_input_options(CLI::App* cmd, std::string& backend) {
  add_backend_option(cmd, backend, "how files are read");
  add_http_options(cmd);
  add_checkpoint_options(cmd);
}

void add_validate(CLI::App& app, ValidateArgs& args, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Check files against every rule of their format (DDUF: also every entry's CRC and contents); exit 0 if all are valid, 1 if any is not "
      "(3 if one could not be read: docs/CLI.md, \"Exit status\")");
  cmd->add_option("FILE", args.files, "files (paths, http(s)://, s3:// or hf:// names) of any supported format: " + kAnyFormat)->required();
  cmd->add_flag("--quick", args.quick, "DDUF: skip the CRC-32 check of every entry");
  cmd->add_flag("--crc", args.crc, "DDUF over HTTP(S): also check every entry's CRC-32 (downloads every entry; off by default for URLs)");
  cmd->add_flag("--json", args.json, "one JSON object per file per line: {file, format, valid, error: {kind, rule, message, ...}}");
  cmd->add_flag("--strict", args.strict, "also reject tensor entries with fields other than dtype, shape, data_offsets");
  cmd->add_flag("--detect", args.detect,
                "go by content alone: by default a file whose name claims a format (.safetensors, .safetensors.index.json, .gguf, .dduf, "
                ".pt, .pth, .ckpt) but holds another is INVALID (UnknownFormat), since readers that trust the name refuse it");
  add_input_options(cmd, args.backend);
  cmd->callback([&args, &exit_code] { exit_code = run_validate(args); });
}

void add_inspect(CLI::App& app, InspectArgs& args, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("inspect", "Show a file's tensors (name, dtype, shape, size), totals by dtype and metadata");
  cmd->add_option("FILE", args.file, "a file (a path, or an http(s)://, s3:// or hf:// name) of any supported format: " + kAnyFormat)->required();
  cmd->add_option("ENTRY", args.entry, "DDUF: a .safetensors entry to inspect as a safetensors file");
  cmd->add_flag("--json", args.json,
                "machine-readable: one object, {format, ...} with that format's fields (safetensors: header_size, metadata, tensors; DDUF: "
                "entries, components; GGUF: version, alignment, kv, tensors; PyTorch: container, key, tensors, shared; docs/CLI.md has each)");
  add_input_options(cmd, args.backend);
  cmd->callback([&args, &exit_code] { exit_code = run_inspect(args); });
}

void add_cat(CLI::App& app, CatArgs& args, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("cat", "Write a tensor's (or a slice's) raw little-endian C-order bytes, or a DDUF entry's bytes");
  cmd->add_option("FILE", args.file, "a file (a path, or an http(s)://, s3:// or hf:// name) of any supported format: " + kAnyFormat)->required();
  cmd->add_option("NAME", args.names, "TENSOR; for a DDUF file: ENTRY, or ENTRY TENSOR for a tensor of a .safetensors entry")
      ->required()
      ->expected(1, 2);
  cmd->add_option("--slice", args.slice, "numpy basic indexing, e.g. \"1:3, ::-2, 0\" or \"..., -1\"");
  cmd->add_option("-o,--output", args.output, "write to this file (atomically; a device or FIFO is written in place) instead of standard output");
  add_input_options(cmd, args.backend);
  cmd->callback([&args, cmd, &exit_code] {
    args.has_slice = cmd->count("--slice") > 0;
    exit_code = run_cat(args);
  });
}

void add_bench(CLI::App& app, BenchArgs& args, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("bench", "Time a full load against physical references (read(), parallel pread, pinned host->device)");
  cmd->add_option("FILE", args.file,
                  "a tensor file (safetensors, sharded index, GGUF, PyTorch checkpoint): a path, or an http(s)://, s3:// or hf:// name (then the "
                  "load is timed against one connection reading the whole object)")
      ->required();
  cmd->add_flag("--json", args.json, "one JSON object (fields in docs/CLI.md)");
  cmd->add_option("--passes", args.passes, "timed passes (the median is reported)")->check(CLI::Range(1, 1000));
  cmd->add_option("--threads", args.threads, "load threads (default: one per core)")->check(CLI::Range(0, 256));
  cmd->add_option("--device", args.device, "load into device memory: cuda, cuda:N, or host (the same pipeline in host memory)");
  cmd->add_flag("--cold", args.cold, "evict the file from the page cache before every pass");
  cmd->add_option("--strategy", args.strategy, "device loads: auto, staging, register, hybrid or gpudirect (cuFile)")
      ->check(CLI::IsMember({"auto", "staging", "register", "hybrid", "gpudirect"}));
  cmd->add_option("--read", args.read, "auto, pread or direct (O_DIRECT)")->check(CLI::IsMember({"auto", "pread", "direct"}));
  cmd->add_option("--chunk-mib", args.chunk_mib, "read chunk in MiB (default 16)")->check(CLI::Range(0, 4096));
  cmd->add_option("--register-mib", args.register_mib, "device loads: MiB page-locked at once by registration (default 256)")
      ->check(CLI::Range(0, 65536));
  cmd->add_option("--buffer-mib", args.buffer_mib, "device loads: one pinned staging buffer in MiB (default 4)")->check(CLI::Range(0, 1024));
  add_http_options(cmd);
  cmd->callback([&args, &exit_code] { exit_code = run_bench(args); });
}

void add_sample(CLI::App& app, SampleArgs& args, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("sample", "Write a small deterministic model file to try the other commands on");
  cmd->add_option("OUT", args.output, "output path (.safetensors)")->required();
  cmd->callback([&args, &exit_code] { exit_code = run_sample(args); });
}

void add_pack(CLI::App& app, PackArgs& args, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("pack", "Pack a diffusers folder into a DDUF file (checked before the first byte is written)");
  cmd->add_option("FOLDER", args.folder, "folder with model_index.json and one folder per component")->required();
  cmd->add_option("OUT", args.output, "the .dduf file to write (atomically)")->required();
  cmd->add_option("--align", args.align, "start each .safetensors entry's data on this boundary (power of two, 0 for none)")
      ->check(CLI::Range(0u, 32768u));
  cmd->add_flag("--reference-layout", args.reference_layout, "write huggingface_hub's exact layout (no alignment padding)");
  cmd->callback([&args, &exit_code] { exit_code = run_pack(args); });
}

void add_unpack(CLI::App& app, UnpackArgs& args, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("unpack", "Write a DDUF file's entries into a diffusers folder (all or nothing, CRCs checked)");
  cmd->add_option("FILE", args.file, "a .dduf file (a path, or an http(s)://, s3:// or hf:// name)")->required();
  cmd->add_option("FOLDER", args.folder, "the folder to write (created if missing; must be empty unless --force)")->required();
  cmd->add_flag("--force", args.force, "replace a non-empty FOLDER as a whole (none of its old files remain)");
  add_http_options(cmd);
  cmd->callback([&args, &exit_code] { exit_code = run_unpack(args); });
}

void add_convert(CLI::App& app, ConvertArgs& args, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "convert", "Convert between safetensors, GGUF, DDUF entries, Hugging Face folders and PyTorch checkpoints, optionally changing the type");
  cmd->add_option("INPUT", args.input,
                  "a safetensors file or index, a DDUF file (with --entry), a GGUF file, a Hugging Face model folder (safetensors or "
                  "pytorch_model*.bin weights), Meta's or Mistral's original download (params.json + consolidated.*), or a PyTorch checkpoint")
      ->required();
  cmd->add_option("OUTPUT", args.output,
                  "the file to write, atomically: its extension (.gguf, .safetensors, .safetensors.index.json) picks the format unless --to "
                  "names it. For a folder of pytorch_model*.bin INPUT, a folder (existing and empty, ending in /, or with no . in its "
                  "name) gets the safetensors shards, index, config and tokenizer files, all or nothing; any other name is refused. An original "
                  "download converts likewise to a transformers folder, or to GGUF")
      ->required();
  cmd->add_option("--to", args.to, "the output's format (gguf, safetensors, safetensors-index) whatever its name");
  cmd->add_option("--type", args.type,
                  "f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q2_k|q3_k|q4_k|q5_k|q6_k|nvfp4: as llama.cpp, 1-D tensors stay F32, rows that are "
                  "not whole blocks fall back to a type that fits, integers are kept; or a llama-quantize file type (Q4_K_M, IQ3_M, ... "
                  "or its number; GGUF output): each tensor the type llama-quantize gives it (the knobs below make a name both, "
                  "like q8_0, the file type)");
  cmd->add_option("--output-tensor-type", args.output_tensor_type, "file type: output.weight's ggml type (llama-quantize's option)");
  cmd->add_option("--token-embedding-type", args.token_embedding_type, "file type: token_embd.weight's ggml type");
  CLI::Option* tensor_type = cmd->add_option("--tensor-type", args.tensor_types,
                                             "file type: PATTERN=TYPE, tensors whose name PATTERN (a regex) finds get TYPE (repeatable)");
  CLI::Option* tensor_type_file = cmd->add_option("--tensor-type-file", args.tensor_type_files,
                                                  "file type: a text file of PATTERN=TYPE entries separated by white space, each a --tensor-type, "
                                                  "tried where the option stands among them (repeatable)");
  cmd->add_option("--override-kv", args.override_kv,
                  "file type: KEY=TYPE:VALUE (int, float, bool or str), a metadata entry written over the output's, as llama-quantize does "
                  "(repeatable)");
  cmd->add_option("--prune-layers", args.prune_layers,
                  "file type: L0,L1,...: leave out these blocks (blk.N.), renumber the others and write the block count kept, as "
                  "llama-quantize does");
  cmd->add_flag("--pure", args.pure, "file type: every quantized tensor the file type's base type, without llama.cpp's per-tensor rules");
  cmd->add_flag("--leave-output-tensor", args.leave_output_tensor, "file type: output.weight keeps its type");
  cmd->add_flag("--allow-requantize", args.allow_requantize, "file type: quantize tensors that are already quantized (refused without it)");
  cmd->add_option("--imatrix", args.imatrix, "file type: llama-imatrix's importance matrix (GGUF or legacy .dat) for the quantizers");
  cmd->add_option("--include-weights", args.include_weights, "file type: use only the imatrix entries whose name holds this (repeatable)");
  cmd->add_option("--exclude-weights", args.exclude_weights, "file type: leave out the imatrix entries whose name holds this (repeatable)");
  cmd->add_option("--threads", args.threads, "threads that quantize (default: one per core)");
  cmd->add_option("--entry", args.entry, "DDUF input: the .safetensors entry to convert");
  cmd->add_flag("--dedup", args.dedup, "PyTorch input: write one copy of tensors that share storage; the others become aliases in the metadata");
  add_checkpoint_options(cmd);
  cmd->add_flag("--durable", args.durable, "fsync the output before renaming it into place");
  cmd->add_flag("--keep-split", args.keep_split,
                "a split GGUF input: write the output split where the input is (OUT-00001-of-0000N.gguf ...), as llama-quantize does");
  cmd->add_flag("--dry-run", args.dry_run, "print each tensor's type and size, and the total, without writing anything (llama-quantize's option)");
  cmd->add_option("--split-max-size", args.split_max_size,
                  "write OUT.gguf as llama.cpp's split files OUT-00001-of-0000N.gguf, or the shards of OUT.safetensors.index.json, each at "
                  "most SIZE of tensor data (2G, 500M; decimal units K, M, G, or bytes)");
  cmd->add_option("--split-max-tensors", args.split_max_tensors, "write OUT.gguf as split files (or an index's shards) of at most N tensors each")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--llama-version", args.llama_version,
                  "Meta's original download (params.json + consolidated.NN.pth): 1, 2, 3, 3.1 or 3.2, when params.json and the tokenizer "
                  "do not say it (the context length and Llama 3's rope scaling follow from it)");
  cmd->add_option("--max-position-embeddings", args.max_position_embeddings,
                  "an original download's context length, over what its version or params.json gives")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--instruct", args.instruct, "Meta's Llama 3 original download of an instruct model: <|eot_id|> (and 3.1's list) as end of sequence");
  add_backend_option(cmd, args.backend, "how the input is read: mmap (default: values read in place, pages released as converted) or pread");
  add_http_options(cmd);
  cmd->callback([&args, cmd, tensor_type, tensor_type_file, &exit_code] {
    for (const CLI::Option* o : cmd->parse_order())
      if (o == tensor_type || o == tensor_type_file) args.tensor_type_order.push_back(o == tensor_type_file);
    exit_code = run_convert(args);
  });
}

void add_diff(CLI::App& app, DiffArgs& args, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "diff", "Compare two tensor files of any formats, tensor by tensor (exit 0 same, 1 different or invalid, 2 usage, 3 environment)");
  cmd->add_option("A", args.a, "a tensor file of any supported format, or a Hugging Face folder")->required();
  cmd->add_option("B", args.b, "the file to compare it with")->required();
  cmd->add_flag("--json", args.json, "one JSON object: only_in_a, only_in_b, and per common tensor its types, shapes and statistics");
  cmd->add_option("--entry-a", args.entry_a, "A is a DDUF file: the .safetensors entry to compare");
  cmd->add_option("--entry-b", args.entry_b, "B is a DDUF file: the .safetensors entry to compare");
  add_checkpoint_options(cmd);
  add_backend_option(cmd, args.backend, "how inputs are read: mmap (default) or pread");
  add_http_options(cmd);
  cmd->callback([&args, &exit_code] { exit_code = run_diff(args); });
}

}  // namespace
}  // namespace safeweights::cli

int main(int argc, char** argv) {
  using namespace safeweights::cli;
  // Ctrl-C and SIGTERM end the CLI at once, removing any named temporary file first (nameless ones
  // vanish with the process).
  safeweights::install_cleanup_signal_handlers();
  CLI::App app{"safeweights: read, check, inspect, pack and convert model-weight files (safetensors, DDUF, GGUF, PyTorch)", "safeweights"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "safeweights 0.1.0");
  app.add_flag_callback(
      "--exit-codes",
      [] {
        print_exit_codes();
        throw CLI::Success();
      },
      "print the exit status each error kind gives, \"KIND CODE\" a line (docs/CLI.md, \"Exit status\"), and exit");
  // A parse error quotes the command line (a file name, a value): escaped like every other message.
  app.failure_message(
      [](const CLI::App*, const CLI::Error& e) { return safeweights::printable(e.what()) + "\nRun with --help for more information.\n"; });
  int exit_code = kExitOk;
  // One command runs per process: each has its options here, and its callback runs it after the parse.
  ValidateArgs validate;
  InspectArgs inspect;
  CatArgs cat;
  BenchArgs bench;
  SampleArgs sample;
  PackArgs pack;
  UnpackArgs unpack;
  ConvertArgs convert;
  DiffArgs diff;
  add_validate(app, validate, exit_code);
  add_inspect(app, inspect, exit_code);
  add_cat(app, cat, exit_code);
  add_bench(app, bench, exit_code);
  add_sample(app, sample, exit_code);
  add_pack(app, pack, exit_code);
  add_unpack(app, unpack, exit_code);
  add_convert(app, convert, exit_code);
  add_diff(app, diff, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::Success&) {
    return flush_stdout(kExitOk);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message and a hint
    return kExitUsage;
  }
  print_http_stats();
  return flush_stdout(exit_code);
}
