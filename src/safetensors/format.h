// The safetensors formats' registrations: single files, and sharded checkpoints (index + shards).
// Internal: only the registry includes it.
#pragma once

#include <memory>
#include <string>

#include "safeweights/format.h"

namespace safeweights::safetensors {

const Format& safetensors_format();
const Format& index_format();

// The inspect output of one safetensors file (shared with archives that hold safetensors members);
// `display` names it in the text form.
std::string inspect_file(const class Reader& reader, const std::string& display, bool json);

}  // namespace safeweights::safetensors
