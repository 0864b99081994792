// safeweights cat FILE TENSOR [--slice SPEC] [-o OUT]
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "cli_common.h"
#include "commands.h"
#include "safeweights/atomic_file.h"

namespace safeweights::cli {
namespace {

// Where the bytes go: stdout, or a file that appears only once complete. The bytes are a stream, written
// in order, so a character device or FIFO named by -o (/dev/stdout, /dev/null) is written into in place
// (AtomicFileOptions::stream), never replaced.
class Sink {
 public:
  static Result<Sink> open(const std::string& path) {
    Sink sink;
    if (!path.empty() && path != "-") {
      AtomicFileOptions options;
      options.stream = true;
      auto file = AtomicFile::create(path, options);
      if (!file.is_ok()) return std::move(file).status();
      sink.file_ = std::make_unique<AtomicFile>(std::move(file).value());
    }
    return sink;
  }
  Status write(std::span<const std::byte> bytes) {
    if (file_) return file_->append(bytes);
    if (!write_all(STDOUT_FILENO, bytes)) return Error(ErrorKind::IoError, "cannot write to standard output: " + std::string(std::strerror(errno)));
    return Status::ok();
  }
  Status finish() { return file_ ? file_->commit() : Status::ok(); }

 private:
  std::unique_ptr<AtomicFile> file_;
};

// Copies [offset, offset + length) of a source to the sink. Pieces of 64 MiB keep several requests in
// flight for each read of a remote source.
Status copy_to_sink(const ByteSource& source, std::uint64_t offset, std::uint64_t length, Sink& sink) {
  return copy_range(source, offset, length, 64u << 20, [&](std::span<const std::byte> part) { return sink.write(part); });
}

Status usage(std::string message) { return Error(ErrorKind::InvalidArgument, std::move(message)); }

Status cat(const CatArgs& opt) {
  const FormatOptions options = input_options(opt.backend);
  auto format = detect_format(opt.file, options);
  if (!format.is_ok()) return std::move(format).status();
  auto located = (*format)->locate(opt.file, opt.names, options);
  if (!located.is_ok()) return std::move(located).status();
  const CatTarget& target = *located;
  if (opt.has_slice && target.tensor == nullptr) {
    return usage("--slice needs a tensor: cat FILE.dduf ENTRY TENSOR --slice SPEC");
  }
  if (opt.output.empty() && ::isatty(STDOUT_FILENO)) {
    return usage("refusing to write binary data to a terminal; use -o FILE or a pipe");
  }
  auto sink = Sink::open(opt.output);
  if (!sink.is_ok()) return std::move(sink).status();
  if (!opt.has_slice) {
    if (Status s = copy_to_sink(*target.source, target.offset, target.length, *sink); !s.is_ok()) return s;
    return sink->finish();
  }
  auto spec = SliceSpec::parse(opt.slice);
  if (!spec.is_ok()) return std::move(spec.error().with_file(target.source->name()).with_tensor(target.tensor->name));
  auto plan = target.tensor->plan_slice(*spec);
  if (!plan.is_ok()) return std::move(plan).status();
  // Streamed in pieces: memory follows the piece, not what the header declares.
  if (Status s = copy_slice(*target.source, *plan, 64u << 20, [&](std::span<const std::byte> part) { return sink->write(part); }); !s.is_ok()) {
    return s;
  }
  return sink->finish();
}

}  // namespace

int run_cat(const CatArgs& args) { return exit_status(cat(args)); }

}  // namespace safeweights::cli
