// Multimodal rope sections (Qwen3.5's interleaved MRoPE) as llama.cpp writes them: the rope object's
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

}  // namespace safeweights::hf
