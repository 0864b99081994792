// The weights of a Hugging Face folder plus the tensors llama.cpp's converter computes from config.json
// (rope_freqs for llama3 rope scaling): one TensorFile for convert() to read. Internal to src/hf.
//
// Thread safety: built by one owner; immutable (and safe to share) once handed out.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "safeweights/tensor_file.h"

namespace safeweights::hf {

class WithGenerated final : public TensorFile {
 public:
  // `base` must outlive this file.
  explicit WithGenerated(const TensorFile& base);

  // Adds an F32 tensor of `shape` holding `values` (one per element, row-major).
  void add_f32(std::string name, std::vector<std::uint64_t> shape, const std::vector<float>& values);
  // Adds a tensor of `type` and `shape` whose bytes `source` computes as they are read (hf/mla.h's
  // transposed heads): nothing is held.
  void add_source(std::string name, TensorType type, std::vector<std::uint64_t> shape, SourcePtr source);

  std::string_view format() const noexcept override { return base_.format(); }
  const std::string& name() const noexcept override { return base_.name(); }
  std::span<const TensorEntry> tensors() const noexcept override { return entries_; }
  const TensorEntry* find(std::string_view name) const noexcept override;
  const Metadata* metadata() const noexcept override { return base_.metadata(); }
  std::string_view root() const noexcept override { return base_.root(); }

 private:
  struct Owned {
    std::string name;
    std::vector<std::uint64_t> shape;
    SourcePtr source;
  };
  const TensorFile& base_;
  std::deque<Owned> owned_;  // stable addresses: entries point into it
  std::vector<TensorEntry> entries_;
};

// Every element of the weight `e` as float32 (what the tensors computed from weights start from).
Result<std::vector<float>> read_floats(const TensorEntry& e);

}  // namespace safeweights::hf
