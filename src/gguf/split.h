// Split GGUF models, inside the GGUF folder: the reader opens one file (open_one), then
// open_split_model makes the whole model of it when it is part of a split set. Internal.
#pragma once

#include <memory>

#include "safeweights/gguf.h"

namespace safeweights::gguf {

// One file, every single-file rule checked; split keys not looked at.
Result<std::unique_ptr<GgufFile>> open_one(SourcePtr source, const FormatOptions& options);
// `file` itself when it is not part of a set of more than one file; else the whole model, every file
// opened with open_one and checked against the others (docs/GGUF.md, "Split files").
Result<std::unique_ptr<GgufFile>> open_split_model(std::unique_ptr<GgufFile> file, const FormatOptions& options);

}  // namespace safeweights::gguf
