// fuzz_common.h — small helpers shared by the libFuzzer targets.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/error.h"
#include "safeweights/safetensors.h"
#include "safeweights/tensor_type.h"
#include "safeweights/source.h"

namespace fuzz {

// The types a safetensors file can hold.
inline const std::vector<safeweights::TensorType>& storable_types() {
  static const std::vector<safeweights::TensorType> types = [] {
    std::vector<safeweights::TensorType> v;
    for (const auto& info : safeweights::tensor_type_table())
      if (safeweights::safetensors::can_store(info.type)) v.push_back(info.type);
    return v;
  }();
  return types;
}

// Aborts (so libFuzzer records the input) with a message when an invariant does not hold.
#define FUZZ_CHECK(cond)                                                                \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

#define FUZZ_CHECK_OK(status_expr)                                                                                                               \
  do {                                                                                                                                           \
    const auto& fuzz_status_ = (status_expr);                                                                                                    \
    if (!fuzz_status_.is_ok()) {                                                                                                                 \
      std::fprintf(stderr, "%s:%d: unexpected error from %s: %s\n", __FILE__, __LINE__, #status_expr, fuzz_status_.error().to_string().c_str()); \
      std::abort();                                                                                                                              \
    }                                                                                                                                            \
  } while (0)

// A folder of files for the targets that read a model folder from disk: made on first use (named after
// `tag`), reused from run to run; at exit the files written into it and the folder are removed. Never
// destroyed: the exit handler runs after the statics' destructors may have.
struct ScratchFolder {
  std::string path;
  std::set<std::string> files;
};
inline ScratchFolder*& scratch() {
  static ScratchFolder* folder = nullptr;
  return folder;
}
inline void remove_scratch() {
  for (const std::string& name : scratch()->files) ::unlink((scratch()->path + "/" + name).c_str());
  ::rmdir(scratch()->path.c_str());
}
inline const std::string& scratch_folder(const char* tag) {
  if (!scratch()) {
    const char* tmp = std::getenv("TMPDIR");
    scratch() = new ScratchFolder{std::string(tmp && *tmp ? tmp : "/tmp") + "/" + tag + ".XXXXXX", {}};
    FUZZ_CHECK(::mkdtemp(scratch()->path.data()) != nullptr);
    std::atexit(remove_scratch);
  }
  return scratch()->path;
}
// Writes `bytes` as the file `name` of the scratch folder.
inline void put_scratch(const char* tag, const std::string& name, std::string_view bytes) {
  const std::string path = scratch_folder(tag) + "/" + name;
  scratch()->files.insert(name);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  FUZZ_CHECK(f != nullptr);
  FUZZ_CHECK(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  FUZZ_CHECK(std::fclose(f) == 0);
}

// A source over a private copy of some bytes that is NOT mapped (mapped() returns null), so the
// library has to take its positional-read path, as it does for pread-backed files.
class UnmappedSource final : public safeweights::ByteSource {
 public:
  explicit UnmappedSource(std::span<const std::byte> bytes) : bytes_(bytes.begin(), bytes.end()) {}

  const std::string& name() const noexcept override { return name_; }
  std::uint64_t size() const noexcept override { return bytes_.size(); }
  safeweights::Status read_at(std::uint64_t offset, std::span<std::byte> dst) const override {
    if (offset > bytes_.size() || dst.size() > bytes_.size() - offset) {
      return safeweights::Error(safeweights::ErrorKind::OutOfRange, "read outside the fuzz input");
    }
    if (!dst.empty()) std::memcpy(dst.data(), bytes_.data() + offset, dst.size());
    return safeweights::Status::ok();
  }

 private:
  std::string name_ = "<fuzz-unmapped>";
  std::vector<std::byte> bytes_;
};

inline std::span<const std::byte> as_bytes(const std::uint8_t* data, std::size_t size) { return {reinterpret_cast<const std::byte*>(data), size}; }

}  // namespace fuzz
