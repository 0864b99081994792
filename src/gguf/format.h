// GGUF's registration in the format registry. Internal: only the registry includes it.
#pragma once

#include "safeweights/format.h"

namespace safeweights::gguf {

const Format& gguf_format();

}  // namespace safeweights::gguf
