// The TensorSink of a file whose layout is decided before any tensor byte arrives. Internal.
//
// A format's writer plans its file up front (its header bytes, and each declared tensor's place: the
// absolute offset of its first byte and its length) and hands the plan to PlannedFileSink, which keeps
// everything else in one place for every format: the lookup by name, the bytes written per tensor,
// chunks in order without gaps, refusals of an unknown name, of a tensor written twice, of more bytes
// than a tensor holds and of use after finish, the completeness check, and the atomic commit (an
// AtomicFile: no file under the target's name until finish, nothing left behind otherwise).
//
// Thread safety: one owner, like every TensorSink.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/hash.h"
#include "safeweights/atomic_file.h"
#include "safeweights/error.h"
#include "safeweights/tensor_file.h"

namespace safeweights {

class PlannedFileSink final : public TensorSink {
 public:
  // Where one declared tensor's bytes go.
  struct Slot {
    std::uint64_t offset = 0;  // of its first byte, in the file
    std::uint64_t nbytes = 0;
  };

  // Creates the output (AtomicFile::create: preallocated to file_size), writes `header` at offset 0 and
  // sizes the file to file_size, so that bytes nobody writes (padding) read as zeros. `slots[i]` is
  // where decls[i] goes; the caller has checked that the slots lie inside the file.
  static Result<std::unique_ptr<PlannedFileSink>> create(const std::string& path, std::vector<TensorDecl> decls, std::vector<Slot> slots,
                                                         std::span<const std::byte> header, std::uint64_t file_size, bool durable);

  // InvalidArgument, naming the output and the tensor: an undeclared name, a tensor already written,
  // a size other than the declared one, more bytes than the tensor holds, use after finish().
  Status write(std::string_view name, std::span<const std::byte> data) override;
  Status write_chunk(std::string_view name, std::span<const std::byte> chunk) override;
  // In the kernel when `source` is a local file (AtomicFile::copy_from).
  Status copy_chunk(std::string_view name, const ByteSource& source, std::uint64_t offset, std::uint64_t length) override;
  // InvalidArgument (and nothing left behind) when a tensor is incomplete; otherwise commits the file.
  Status finish() override;
  std::span<const std::string> files() const noexcept override { return {&file_.target(), 1}; }
  // The declared tensors, in the order given to create().
  std::span<const TensorDecl> decls() const noexcept { return decls_; }

  // OK when every declared tensor is complete: what finish() checks, without committing (a multi-file
  // writer checks every part before it commits any).
  Status complete() const;
  // The output file, for a multi-file writer that commits its parts together (AtomicFile::commit_all)
  // after complete() said OK for each.
  AtomicFile& file() noexcept { return file_; }

 private:
  PlannedFileSink(AtomicFile file, std::vector<TensorDecl> decls, std::vector<Slot> slots);
  Error misuse(std::string message, std::string_view tensor) const;
  // The index of tensor `name`: refuses use after finish() and an undeclared name.
  Result<std::size_t> lookup(std::string_view name) const;
  // lookup(), checked for room for `length` more bytes.
  Result<std::size_t> next_chunk(std::string_view name, std::uint64_t length);
  // Writes the next bytes of declaration i (checked by the caller).
  Status put(std::size_t i, std::span<const std::byte> chunk);

  AtomicFile file_;
  std::vector<TensorDecl> decls_;
  std::vector<Slot> slots_;
  std::vector<std::uint64_t> written_;  // bytes written per declaration
  // name -> declaration; keys view decls_' strings, which never move. Seeded hash: names come from input files.
  std::unordered_map<std::string_view, std::size_t, SeededHash> by_name_;
  bool finished_ = false;
};

}  // namespace safeweights
