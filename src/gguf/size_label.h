// A model's size label (general.size_label: "8.0B", "8x7.2B"), as llama.cpp's convert_hf_to_gguf.py
// writes it when the folder's name gives none: gguf-py's GGUFWriter.get_total_parameter_count over the
// written tensors, then gguf-py's utility.size_label. Internal.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace safeweights::gguf {

// The parameters of a model's tensors: every element counts in `total`; a tensor named `*_exps.*` of
// three or more dimensions counts one expert's share in `expert` (its elements over its experts), any
// other in `shared`.
struct ParameterCount {
  std::uint64_t total = 0, shared = 0, expert = 0;
  std::uint64_t expert_sum = 0, expert_tensors = 0;  // the experts of each expert tensor, summed; how many
  // Adds one written tensor, its shape outermost first (saturating: a size label is no place to fail).
  void add(std::string_view name, std::span<const std::uint64_t> shape);
  // The experts of an expert tensor, on average (0 without expert tensors).
  std::uint64_t experts() const noexcept { return expert_tensors == 0 ? 0 : expert_sum / expert_tensors; }
};

// A count in gguf-py's rounded notation with at least two digits: 400000 -> "400K", 1234567 -> "1.2M",
// 8030261248 -> "8.0B" (K, M, B, T by whether the count is above 1e3·(1e3)^k; rounded as Python formats).
std::string rounded_count(std::uint64_t count);

// "E x (shared + expert)" for a model with experts ("8x7.2B"), else the total ("8.0B"); empty for no
// parameters (llama.cpp writes no label then).
std::string size_label(const ParameterCount& count);

}  // namespace safeweights::gguf
