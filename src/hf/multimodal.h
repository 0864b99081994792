// The text model of a multimodal `...ForConditionalGeneration` folder, as llama.cpp's converter takes it:
// config.json's `text_config` merged over its top level (text_config's keys win), the weights under
// `language_model.` (transformers 5: model.language_model.*, transformers 4: language_model.model.* and
// language_model.lm_head.weight), and the vision tower and projector left out (an mmproj file is a
// later step). Internal to src/hf.
//
// Thread safety: pure functions.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "hf/arch.h"
#include "safeweights/error.h"
#include "safeweights/tensor_file.h"

namespace safeweights::hf {

class JsonFile;

// Whether `arch` converts `hf_class` as the text model of a multimodal folder (Architecture::multimodal).
bool is_multimodal(const Architecture& arch, std::string_view hf_class);

// config.json with text_config's keys over the top level's, as one object (errors name the file);
// InvalidModelFolder when text_config is missing or not an object.
Result<std::unique_ptr<JsonFile>> text_model_config(const JsonFile& config);

// Where the text model's weights are: `prefix` stands for transformers' "model." of a text-only model
// ("model.language_model." or "language_model.model."), `head` for "lm_head.weight".
struct TextModelNames {
  std::string prefix = "model.";
  std::string head = "lm_head.weight";
};
// Found by the embedding's name; TensorNotFound naming both layouts when neither is there.
Result<TextModelNames> text_model_names(const TensorFile& weights);

// A weight of the vision tower or its projector (left out, as llama.cpp's converter leaves it out).
bool is_vision_tensor(std::string_view name);

}  // namespace safeweights::hf
