// PyTorch checkpoints' registration in the format registry. Internal: only the registry includes it.
#pragma once

#include "safeweights/format.h"

namespace safeweights::pytorch {

const Format& pytorch_format();

}  // namespace safeweights::pytorch
