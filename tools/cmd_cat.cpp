// safeweights cat FILE TENSOR [--slice SPEC] [-o OUT]
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "core/status_macros.h"
#include "safeweights/atomic_file.h"
#include "safeweights/safetensors.h"
#include "safeweights/sharded.h"

namespace safeweights::cli {
namespace {

struct CatOptions {
  std::string file;
  std::string tensor;
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

Status copy_tensor(const safetensors::Reader& reader, const safetensors::TensorInfo& info, Sink& sink) {
  safetensors::TensorView view = reader.view(info);
  if (view.data.data() != nullptr || info.nbytes() == 0) return sink.write(view.data);  // zero-copy
  constexpr std::uint64_t kChunk = 8u << 20;
  std::vector<std::byte> buf(static_cast<std::size_t>(std::min(kChunk, info.nbytes())));
  for (std::uint64_t done = 0; done < info.nbytes();) {
    std::uint64_t n = std::min<std::uint64_t>(buf.size(), info.nbytes() - done);
    std::span<std::byte> part(buf.data(), static_cast<std::size_t>(n));
    SW_RETURN_IF_ERROR(reader.source().read_at(view.offset + done, part));
    SW_RETURN_IF_ERROR(sink.write(part));
    done += n;
  }
  return Status::ok();
}

Status cat(const CatOptions& opt) {
  // A tensor lives either in a single file or in one shard of a sharded checkpoint.
  std::optional<safetensors::Reader> single;
  std::optional<safetensors::ShardedReader> sharded;
  const safetensors::Reader* reader = nullptr;
  const safetensors::TensorInfo* info = nullptr;
  if (detect_format(opt.file) == Format::SafetensorsIndex) {
    auto r = safetensors::ShardedReader::open(opt.file, parse_backend(opt.backend));
    if (!r.is_ok()) return std::move(r).status();
    sharded.emplace(std::move(r).value());
    auto loc = sharded->find(opt.tensor);
    if (!loc.is_ok()) return std::move(loc.error().with_file(opt.file));
    reader = loc->shard;
    info = loc->info;
  } else {
    auto r = safetensors::Reader::open(opt.file, parse_backend(opt.backend));
    if (!r.is_ok()) return std::move(r).status();
    single.emplace(std::move(r).value());
    auto view = single->tensor(opt.tensor);
    if (!view.is_ok()) return std::move(view).status();
    reader = &*single;
    info = view->info;
  }

  if (opt.output.empty() && ::isatty(STDOUT_FILENO)) {
    return Error(ErrorKind::InvalidArgument, "refusing to write binary tensor data to a terminal; use -o FILE or a pipe");
  }
  auto sink = Sink::open(opt.output);
  if (!sink.is_ok()) return std::move(sink).status();

  if (!opt.has_slice) {
    SW_RETURN_IF_ERROR(copy_tensor(*reader, *info, *sink));
    return sink->finish();
  }
  auto spec = SliceSpec::parse(opt.slice);
  if (!spec.is_ok()) return std::move(spec.error().with_file(opt.file).with_tensor(info->name));
  auto plan = reader->plan_slice(*info, *spec);
  if (!plan.is_ok()) return std::move(plan).status();
  // The slice is at most the tensor's size, which the validated file holds: a justified allocation.
  std::vector<std::byte> bytes(static_cast<std::size_t>(plan->nbytes()));
  SW_RETURN_IF_ERROR(reader->read_slice(*plan, bytes));
  SW_RETURN_IF_ERROR(sink->write(bytes));
  return sink->finish();
}

}  // namespace

void add_cat_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<CatOptions>();
  CLI::App* cmd = app.add_subcommand("cat", "Write a tensor's (or a slice's) raw little-endian C-order bytes");
  cmd->add_option("FILE", opt->file, "a safetensors file or *.safetensors.index.json")->required();
  cmd->add_option("TENSOR", opt->tensor, "tensor name")->required();
  cmd->add_option("--slice", opt->slice, "numpy basic indexing, e.g. \"1:3, ::-2, 0\" or \"..., -1\"");
  cmd->add_option("-o,--output", opt->output, "write to this file (atomically) instead of standard output");
  cmd->add_option("--backend", opt->backend, "how files are read")->check(CLI::IsMember({"mmap", "pread"}));
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
