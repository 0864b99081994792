// fuzz_tokenizer — arbitrary bytes as a model folder's tokenizer files, read from memory: tokenizer.json,
// tokenizer.model and tokenizer_config.json through their readers and add_vocabulary (the tokenizer as
// GGUF metadata), under a fixed Llama config.json. fuzz_hf_folder writes whole folders to disk; this
// target serves the files from memory (a Resolver of its own), so it runs many more inputs per second
// through the tokenizer readers.
//
// Input: byte 0 says which files exist (bit 0 tokenizer.json, 1 tokenizer.model, 2
// tokenizer_config.json), byte 1 sets vocab_size (256 + byte 1 * 4); the rest is the files' contents
// in that order, separated by kSeparator.
//
// What must hold: every step fails with an error that names a file of the folder, or succeeds; a
// vocabulary written has vocab_size tokens, and a SentencePiece one (model "llama") has a piece for
// every byte, as llama.cpp's byte_to_token needs (else it aborts on text outside the vocabulary).
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "fuzz_common.h"
#include "hf/arch.h"
#include "hf/hf_files.h"
#include "hf/vocab.h"
#include "safeweights/folder.h"

using namespace safeweights;

namespace {

constexpr std::string_view kSeparator = "\n@@file@@\n";
constexpr std::array<const char*, 3> kFiles = {"tokenizer.json", "tokenizer.model", "tokenizer_config.json"};
// The folder's name to the library: "/" is a local folder (Folder::open checks that), whose files
// MemoryResolver serves instead of the disk.
const std::string kFolder = "/";

class MemoryResolver final : public Resolver {
 public:
  std::map<std::string, std::string> files;  // by name in the folder

  Result<SourcePtr> open(const std::string& name, FileBackend) const override {
    auto it = files.find(name.substr(kFolder.size()));
    if (it == files.end()) return Error(ErrorKind::FileNotFound, "not in the fuzz input").with_file(name);
    return memory_source(std::as_bytes(std::span<const char>(it->second.data(), it->second.size())), name);
  }
  Result<std::vector<FolderEntry>> list(const std::string&) const override {
    std::vector<FolderEntry> entries;
    for (const auto& [name, bytes] : files) entries.push_back({name, bytes.size(), false});
    return entries;
  }
};

void check_names_file(const Error& e) {
  if (!e.context().file.starts_with(kFolder)) {
    std::fprintf(stderr, "error names no file of the folder: %s\n", e.to_string().c_str());
    std::abort();
  }
}

// llama.cpp's byte_to_token finds every byte: "<0xAB>", or the byte alone as a token.
void check_every_byte(const MetaValue& tokens) {
  std::unordered_set<std::string_view> texts;
  for (const MetaValue& t : tokens.items) texts.insert(t.str);
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof piece, "<0x%02X>", b);
    const char alone[2] = {static_cast<char>(b), 0};
    FUZZ_CHECK(texts.contains(piece) || texts.contains(std::string_view(alone, 1)));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const unsigned present = data[0];
  const std::uint32_t vocab_size = 256 + 4u * data[1];
  std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  MemoryResolver resolver;
  for (unsigned i = 0; i < kFiles.size(); ++i) {
    if (!(present & (1u << i))) continue;
    const std::size_t cut = rest.find(kSeparator);
    resolver.files[kFiles[i]] = std::string(rest.substr(0, cut));
    rest = cut == std::string_view::npos ? std::string_view() : rest.substr(cut + kSeparator.size());
  }
  auto folder = Folder::open(kFolder, resolver);
  FUZZ_CHECK(folder.is_ok());

  auto tokenizer = hf::read_tokenizer_json(*folder);
  if (!tokenizer.is_ok()) check_names_file(tokenizer.error());
  auto config = hf::read_tokenizer_config(*folder);
  if (!config.is_ok()) check_names_file(config.error());

  hf::ModelConfig model;
  model.hf_class = "LlamaForCausalLM";
  model.arch = hf::find_architecture(model.hf_class);
  FUZZ_CHECK(model.arch != nullptr);
  model.vocab_size = vocab_size;
  std::vector<MetaEntry> kv;
  Status s = hf::add_vocabulary(*folder, model, {}, kv);
  if (!s.is_ok()) {
    check_names_file(s.error());
    return 0;
  }
  const MetaValue* tokens = nullptr;
  bool llama = false;
  for (const MetaEntry& e : kv) {
    if (e.key == "tokenizer.ggml.tokens") tokens = &e.value;
    if (e.key == "tokenizer.ggml.model") llama = e.value.str == "llama";
  }
  FUZZ_CHECK(tokens != nullptr);
  FUZZ_CHECK(tokens->items.size() == vocab_size);
  if (llama) check_every_byte(*tokens);
  return 0;
}
