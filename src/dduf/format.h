// DDUF's registration in the format registry. Internal: only the registry includes it.
#pragma once

#include "safeweights/format.h"

namespace safeweights::dduf {

const Format& dduf_format();

}  // namespace safeweights::dduf
