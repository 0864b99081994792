// WithGenerated (hf/generated.h).
#include "hf/generated.h"

#include <cstring>

#include "core/status_macros.h"
#include "safeweights/quantize.h"

namespace safeweights::hf {

WithGenerated::WithGenerated(const TensorFile& base) : base_(base) {
  const auto list = base.tensors();
  entries_.assign(list.begin(), list.end());
}

void WithGenerated::add_f32(std::string name, std::vector<std::uint64_t> shape, const std::vector<float>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  const std::uint64_t nbytes = bytes.size();
  Owned& o = owned_.emplace_back(Owned{std::move(name), std::move(shape), nullptr});
  o.source = owned_memory_source(std::move(bytes), "<" + o.name + ", computed from config.json>");
  entries_.push_back(TensorEntry{o.name, TensorType::F32, o.shape, o.source.get(), 0, nbytes});
}

void WithGenerated::add_source(std::string name, TensorType type, std::vector<std::uint64_t> shape, SourcePtr source) {
  const std::uint64_t nbytes = source->size();
  Owned& o = owned_.emplace_back(Owned{std::move(name), std::move(shape), std::move(source)});
  entries_.push_back(TensorEntry{o.name, type, o.shape, o.source.get(), 0, nbytes});
}

const TensorEntry* WithGenerated::find(std::string_view name) const noexcept {
  for (const Owned& o : owned_) {
    if (o.name == name) {
      for (const TensorEntry& e : entries_) {
        if (e.name.data() == o.name.data()) return &e;
      }
    }
  }
  return base_.find(name);
}

Result<std::vector<float>> read_floats(const TensorEntry& e) {
  SW_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, e.read_owned());
  std::vector<float> values(e.num_elements());
  if (e.type == TensorType::F32) {
    std::memcpy(values.data(), bytes.data(), bytes.size());
  } else {
    SW_RETURN_IF_ERROR(dequantize(e.type, bytes, values));
  }
  return values;
}

}  // namespace safeweights::hf
