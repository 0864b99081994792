// fuzz_common.h — small helpers shared by the libFuzzer targets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
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
