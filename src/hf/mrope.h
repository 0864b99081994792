// Multimodal rope sections (Qwen3.5's interleaved MRoPE; GLM-4.5V's sectioned one below) as llama.cpp writes them: the rope object's
// `mrope_section` (time, height, width) padded to llama.cpp's four sections, or its converter's default
// [11, 11, 10, 0] when the folder gives none (conversion/qwen.py's _Qwen35MRopeMixin). For text, whose
// three position ids are equal, transformers' rotation is the plain rope whatever the sections; llama.cpp
// gives the fourth position id 0, so a rotary pair its interleaving leaves to the fourth section would
// not rotate: such sections are refused by name. Internal to src/hf.
//
// Thread safety: pure functions.
#pragma once

#include "hf/hf_files.h"
#include "hf/json_read.h"

namespace safeweights::hf {

// Reads c.rope's mrope_section (mrope_interleaved is not read: transformers' Qwen3.5 always
// interleaves, as llama.cpp's qwen35 does) and adds {arch}.rope.dimension_sections to c.arch_kv.
// `rope_dims` are the rotary dimensions of a head, `head_dim` its width.
Status read_mrope_sections(const JsonFile& file, ModelConfig& c, std::uint32_t rope_dims, std::uint32_t head_dim);

// GLM-4.5V's sectioned (not interleaved) multimodal rope, llama.cpp's MROPE: the rope object's mrope_section,
// when given, as {arch}.rope.dimension_sections padded to four; none when absent (llama.cpp's converter writes
// none, and its NEOX rope rotates text as transformers' default sections do). The three sections must sum to the
// head's `rope_dims` / 2 rotary pairs (transformers splits them so); a fourth, whose pairs llama.cpp turns by
// a text position of 0, is refused by name.
Status read_sectioned_mrope(const JsonFile& file, ModelConfig& c, std::uint32_t rope_dims);

}  // namespace safeweights::hf
