// The local files a command reads, known by identity (device and inode, symbolic links followed), so
// that nothing it writes replaces one: the one check behind convert, pack and unpack. An output that is
// an input under any name (the same path, `./` or `..` spellings, a symbolic or hard link) is refused
// before anything is written, and so is an unpack whose folder, replaced as a whole, holds its archive.
// Remote inputs (URLs) are never local files, so they add nothing. Internal.
//
// Thread safety: add() may run on several threads at once (a resolver opening shards); the checks run
// after every add().
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/resolver.h"

namespace safeweights {

class InputFiles {
 public:
  // Records the local file `path` names; a URL, or a name that is no local file, adds nothing.
  void add(const std::string& path);
  // InvalidArgument naming both when `output` names one of the inputs.
  Status check_output(const std::string& output) const;
  // check_output of each output (a model written as several files).
  Status check_outputs(std::span<const std::string> outputs) const;
  // InvalidArgument when an input lies anywhere inside `folder` (a folder about to be replaced whole).
  Status check_outside(const std::string& folder) const;
  // The names of the inputs, as added.
  std::vector<std::string> names() const;

 private:
  struct Input {
    dev_t device;
    ino_t inode;
    std::string name;
  };
  mutable std::mutex mutex_;
  std::vector<Input> inputs_;
};

// A resolver that opens and lists through `inner` and adds every file it opens to `inputs` (so a
// command learns every file its readers opened: shards of an index, GGUF split parts, a model folder's
// config and tokenizer). `inner` and `inputs` must outlive it.
std::shared_ptr<const Resolver> recording_resolver(const Resolver& inner, InputFiles& inputs);

}  // namespace safeweights
