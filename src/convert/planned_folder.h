// Writing a layout planner's transformers folder (model/folder_planner.h, PlannedFolder): the weights
// through convert() as model.safetensors (or shards and their index, cut where transformers cuts them),
// the files beside them, all in a staging folder renamed into place last (bin_folder.cpp's, shared with
// the .bin folder converter). Internal to src/convert.
//
// Thread safety: one call writes one folder; calls for different outputs may run concurrently.
#pragma once

#include <string>

#include "model/folder_planner.h"
#include "safeweights/convert.h"

namespace safeweights {

// `output_folder` must be new or empty (InvalidArgument otherwise); on any error nothing is left there.
// The report's files are the paths written, its notes the planner's.
Result<ConvertReport> convert_planned_folder(PlannedFolder planned, const std::string& output_folder, ConvertOptions options);

}  // namespace safeweights
