// config.json of a Llama-family folder: the hyper-parameters llama.cpp's converter reads.
#include <array>

#include "hf/hf_files.h"
#include "hf/json_read.h"

namespace safeweights::hf {
namespace {

constexpr std::array<std::string_view, 2> kLlamaClasses = {"LlamaForCausalLM", "MistralForCausalLM"};
// llama.cpp keeps per-layer parameters in arrays of LLAMA_MAX_LAYERS (512): more layers cannot load.
constexpr std::int64_t kMaxLayers = 512;
// The special-token ids llama.cpp's SpecialVocab takes from config.json when tokenizer_config.json
// does not give them.
constexpr std::array<std::string_view, 6> kSpecialTypes = {"bos", "eos", "unk", "sep", "pad", "mask"};

// The first Llama-family class of "architectures", or empty.
std::string llama_class(const JsonFile& file) {
  auto arch = JsonFile::member(file.root(), "architectures");
  if (!arch || arch->type() != json::element_type::ARRAY) return {};
  for (auto item : json::as_array(*arch)) {
    for (auto name : kLlamaClasses) {
      if (item.type() == json::element_type::STRING && json::as_string(item) == name) return std::string(name);
    }
  }
  return {};
}

// rope_scaling: linear is a GGUF key; llama3 needs a generated rope_freqs tensor and the rest (yarn,
// dynamic, longrope) other keys and tensors, none of which this converter writes.
Status read_rope_scaling(const JsonFile& file, LlamaConfig& out) {
  auto scaling = JsonFile::member(file.root(), "rope_scaling");
  if (!scaling) return Status::ok();
  if (scaling->type() != json::element_type::OBJECT) return file.bad("rope_scaling", "must be an object or null");
  SW_RETURN_IF_ERROR(file.check_unique(*scaling, "rope_scaling"));
  SW_ASSIGN_OR_RETURN(auto type, file.string(*scaling, "type"));
  SW_ASSIGN_OR_RETURN(auto rope_type, file.string(*scaling, "rope_type"));
  const std::string kind = type ? *type : rope_type.value_or("");
  if (kind == "linear") {
    SW_ASSIGN_OR_RETURN(auto factor, file.positive(*scaling, "factor"));
    if (!factor) return file.bad("rope_scaling", "is linear without a factor");
    out.linear_rope_factor = factor;
    return Status::ok();
  }
  if (kind == "default") return Status::ok();
  return Error(ErrorKind::NotSupported,
               "rope_scaling of type " + json::quoted(kind) + " is not converted (only linear scaling has a GGUF key without extra tensors)")
      .with_file(file.path());
}

}  // namespace

bool names_llama_architecture(const std::string& folder) {
  auto file = JsonFile::read(folder + "/config.json", kMaxConfigBytes);
  return file.is_ok() && !llama_class(**file).empty();
}

Result<LlamaConfig> read_config(const std::string& folder) {
  SW_ASSIGN_OR_RETURN(auto file, JsonFile::read(folder + "/config.json", kMaxConfigBytes));
  const auto root = file->root();
  LlamaConfig c;
  c.architecture = llama_class(*file);
  if (c.architecture.empty()) {
    return file->bad("architectures", "names neither LlamaForCausalLM nor MistralForCausalLM");
  }
  if (JsonFile::member(root, "num_local_experts")) {
    return Error(ErrorKind::NotSupported, "mixture-of-experts models (num_local_experts) are not converted").with_file(file->path());
  }
  SW_ASSIGN_OR_RETURN(c.vocab_size, file->required_count(root, "vocab_size", kMaxVocab));
  SW_ASSIGN_OR_RETURN(c.hidden_size, file->required_count(root, "hidden_size"));
  SW_ASSIGN_OR_RETURN(c.intermediate_size, file->required_count(root, "intermediate_size"));
  SW_ASSIGN_OR_RETURN(c.num_hidden_layers, file->required_count(root, "num_hidden_layers", kMaxLayers));
  SW_ASSIGN_OR_RETURN(c.num_attention_heads, file->required_count(root, "num_attention_heads"));
  SW_ASSIGN_OR_RETURN(c.num_key_value_heads, file->count(root, "num_key_value_heads"));
  SW_ASSIGN_OR_RETURN(c.max_position_embeddings, file->count(root, "max_position_embeddings"));
  SW_ASSIGN_OR_RETURN(c.head_dim, file->count(root, "head_dim"));
  SW_ASSIGN_OR_RETURN(c.rope_theta, file->positive(root, "rope_theta"));
  SW_ASSIGN_OR_RETURN(c.rms_norm_eps, file->positive(root, "rms_norm_eps"));
  SW_RETURN_IF_ERROR(read_rope_scaling(*file, c));
  for (auto type : kSpecialTypes) {
    const std::string key = std::string(type) + "_token_id";
    auto e = JsonFile::member(root, key);
    if (!e || e->type() == json::element_type::ARRAY) continue;  // a list of ids: not one token
    SW_ASSIGN_OR_RETURN(auto id, file->integer(root, key, 0, kMaxVocab));
    c.special_ids.emplace_back(std::string(type), *id);
  }

  // What the tensor shapes and the permutation rely on.
  const std::uint32_t heads = c.num_attention_heads;
  const std::uint32_t kv_heads = c.num_key_value_heads.value_or(heads);
  if (kv_heads > heads || heads % kv_heads != 0) {
    return file->bad("num_key_value_heads", "must divide num_attention_heads (" + std::to_string(heads) + ")");
  }
  if (!c.head_dim && c.hidden_size % heads != 0) {
    return file->bad("hidden_size", "is not a multiple of num_attention_heads");
  }
  const std::uint32_t head_dim = c.head_dim.value_or(c.hidden_size / heads);
  if (head_dim % 2 != 0) return file->bad(c.head_dim ? "head_dim" : "hidden_size", "gives an odd head size: rotary embeddings need pairs");
  if (!c.max_position_embeddings) return file->bad("max_position_embeddings", "is missing (llama.cpp needs llama.context_length)");
  return c;
}

}  // namespace safeweights::hf
