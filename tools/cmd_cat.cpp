// safeweights cat FILE TENSOR [--slice SPEC] [-o OUT]
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "core/status_macros.h"
#include "io/read_util.h"
#include "safeweights/atomic_file.h"
#include "safeweights/dduf.h"
#include "safeweights/safetensors.h"
#include "safeweights/sharded.h"

namespace safeweights::cli {
namespace {

struct CatOptions {
  std::string file;
  std::vector<std::string> names;  // TENSOR, or (DDUF) ENTRY [TENSOR]
  std::string slice;
  bool has_slice = false;
  std::string output;
  std::string backend = "mmap";
};

// Where the bytes go: stdout, or a file that appears only once complete.
class Sink {
 public:
  static Result<Sink> open(const std::string& path) {
    Sink sink;
    if (!path.empty() && path != "-") {
      auto file = AtomicFile::create(path);
      if (!file.is_ok()) return std::move(file).status();
      sink.file_ = std::make_unique<AtomicFile>(std::move(file).value());
    }
    return sink;
  }
  Status write(std::span<const std::byte> bytes) {
    if (file_) return file_->append(bytes);
    if (!write_all(STDOUT_FILENO, bytes)) return Error(ErrorKind::IoError, "cannot write to standard output");
    return Status::ok();
  }
  Status finish() { return file_ ? file_->commit() : Status::ok(); }

 private:
  std::unique_ptr<AtomicFile> file_;
};

// Copies [offset, offset + length) of a source to the sink. Pieces of 64 MiB keep several requests in
// flight for each read of a remote source.
Status copy_range(const ByteSource& source, std::uint64_t offset, std::uint64_t length, Sink& sink) {
  return safeweights::copy_range(source, offset, length, 64u << 20,
                                 [&](std::span<const std::byte> part) { return sink.write(part); });
}

Status usage(std::string message) { return Error(ErrorKind::InvalidArgument, std::move(message)); }

Status cat(const CatOptions& opt) {
  // A tensor lives in a single file, in one shard of a sharded checkpoint, or in a .safetensors entry
  // of a DDUF; a DDUF entry can also be written whole.
  std::optional<safetensors::Reader> single;
  std::optional<safetensors::ShardedReader> sharded;
  std::optional<dduf::Reader> archive;
  const safetensors::Reader* reader = nullptr;
  std::string tensor;
  const Format format = detect_format(opt.file);
  if (format == Format::Dduf) {
    auto r = open_dduf_input(opt.file, parse_backend(opt.backend));
    if (!r.is_ok()) return std::move(r).status();
    archive.emplace(std::move(r).value());
    const std::string& entry = opt.names[0];
    if (opt.names.size() == 1) {
      if (opt.has_slice) return usage("--slice needs a tensor: cat FILE.dduf ENTRY TENSOR --slice SPEC");
      auto src = archive->open_entry(entry);
      if (!src.is_ok()) return std::move(src).status();
      if (opt.output.empty() && ::isatty(STDOUT_FILENO)) return usage("refusing to write binary data to a terminal; use -o FILE or a pipe");
      SW_ASSIGN_OR_RETURN(Sink sink, Sink::open(opt.output));
      SW_RETURN_IF_ERROR(copy_range(**src, 0, (*src)->size(), sink));
      return sink.finish();
    }
    auto st = archive->open_safetensors(entry);
    if (!st.is_ok()) return std::move(st).status();
    single.emplace(std::move(st).value());
    reader = &*single;
    tensor = opt.names[1];
  } else {
    if (opt.names.size() != 1) return usage("cat FILE TENSOR takes one tensor name (ENTRY TENSOR is for DDUF files)");
    tensor = opt.names[0];
    if (format == Format::SafetensorsIndex) {
      auto r = open_sharded_input(opt.file, parse_backend(opt.backend));
      if (!r.is_ok()) return std::move(r).status();
      sharded.emplace(std::move(r).value());
      auto loc = sharded->find(tensor);
      if (!loc.is_ok()) return std::move(loc.error().with_file(opt.file));
      reader = loc->shard;
    } else {
      auto r = open_safetensors_input(opt.file, parse_backend(opt.backend));
      if (!r.is_ok()) return std::move(r).status();
      single.emplace(std::move(r).value());
      reader = &*single;
    }
  }
  SW_ASSIGN_OR_RETURN(safetensors::TensorView view, reader->tensor(tensor));
  const safetensors::TensorInfo& info = *view.info;

  if (opt.output.empty() && ::isatty(STDOUT_FILENO)) return usage("refusing to write binary tensor data to a terminal; use -o FILE or a pipe");
  SW_ASSIGN_OR_RETURN(Sink sink, Sink::open(opt.output));
  if (!opt.has_slice) {
    SW_RETURN_IF_ERROR(copy_range(reader->source(), view.offset, info.nbytes(), sink));
    return sink.finish();
  }
  auto spec = SliceSpec::parse(opt.slice);
  if (!spec.is_ok()) return std::move(spec.error().with_file(reader->name()).with_tensor(info.name));
  SW_ASSIGN_OR_RETURN(SlicePlan plan, reader->plan_slice(info, *spec));
  // The slice is at most the tensor's size, which the validated file holds: a justified allocation.
  std::vector<std::byte> bytes(static_cast<std::size_t>(plan.nbytes()));
  SW_RETURN_IF_ERROR(reader->read_slice(plan, bytes));
  SW_RETURN_IF_ERROR(sink.write(bytes));
  return sink.finish();
}

}  // namespace

void add_cat_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<CatOptions>();
  CLI::App* cmd = app.add_subcommand("cat", "Write a tensor's (or a slice's) raw little-endian C-order bytes, or a DDUF entry's bytes");
  cmd->add_option("FILE", opt->file, "a safetensors or DDUF file (a path or an http(s):// URL), or *.safetensors.index.json")->required();
  cmd->add_option("NAME", opt->names, "TENSOR; for a DDUF file: ENTRY, or ENTRY TENSOR for a tensor of a .safetensors entry")
      ->required()
      ->expected(1, 2);
  cmd->add_option("--slice", opt->slice, "numpy basic indexing, e.g. \"1:3, ::-2, 0\" or \"..., -1\"");
  cmd->add_option("-o,--output", opt->output, "write to this file (atomically) instead of standard output");
  cmd->add_option("--backend", opt->backend, "how files are read")->check(CLI::IsMember({"mmap", "pread"}));
  add_http_options(cmd);
  cmd->callback([opt, cmd, &exit_code] {
    opt->has_slice = cmd->count("--slice") > 0;
    Status s = cat(*opt);
    if (!s.is_ok()) {
      print_error(s.error());
      exit_code = s.error().kind() == ErrorKind::InvalidArgument ? kExitUsage : kExitInvalid;
    }
  });
}

}  // namespace safeweights::cli
