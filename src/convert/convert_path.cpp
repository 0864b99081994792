// convert_path (include/safeweights/convert.h): a path in, a path out, through the plan providers.
#include <filesystem>

#include "core/status_macros.h"
#include "safeweights/convert.h"
#include "safeweights/hf_llama.h"

namespace safeweights {

Result<ConvertReport> convert_path(const std::string& input, const std::string& output, ConvertOptions options, const FormatOptions& read,
                                   const std::string& entry, const std::function<void(const TensorFile&)>& opened) {
  SW_ASSIGN_OR_RETURN(std::unique_ptr<TensorFile> file, open_tensors(input, entry, read));
  if (opened) opened(*file);
  SW_ASSIGN_OR_RETURN(const Format* out, output_format(output, options.to));
  std::error_code ec;
  // A Hugging Face model folder into GGUF: llama.cpp's names, Q/K order, metadata and tokenizer.
  if (out->name() == "gguf" && std::filesystem::is_directory(input, ec) && hf::is_model_folder(input)) {
    SW_ASSIGN_OR_RETURN(hf::GgufConversion planned, hf::plan(input, *file, options.type));
    options.plan = std::move(planned.plan);
    return convert(*planned.tensors, output, options);
  }
  return convert(*file, output, options);
}

bool is_bin_folder(const std::string& folder) {
  std::error_code ec;
  return std::filesystem::exists(folder + "/pytorch_model.bin", ec) || std::filesystem::exists(folder + "/pytorch_model.bin.index.json", ec);
}

}  // namespace safeweights
