// tokenizer_files_tool — the tokenizer readers of src/original as a command, for the clients' tests
// (tests/clients/test_tiktoken_tokenizers.py), which compare what it writes with transformers',
// tiktoken's and tokenizers' answers:
//
//   tokenizer_files_tool tiktoken RANK_FILE OUT_DIR [--llama3.1] [--instruct] [--max-length N] [--chat-template TEXT]
//   tokenizer_files_tool tekken TEKKEN_JSON OUT_DIR [--max-length N] [--chat-template TEXT]
//
// Writes tokenizer.json, tokenizer_config.json, special_tokens_map.json and ids.json (vocab_size,
// bos_id, eos_id, pad_id, eos_ids) into OUT_DIR; on error prints it and exits 1.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "original/tekken.h"
#include "original/tiktoken.h"
#include "safeweights/text.h"

using namespace safeweights;
using namespace safeweights::original;

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string ids_json(const HfTokenizerFiles& files) {
  JsonWriter json;
  json.object().key("vocab_size").uint(files.vocab_size).key("bos_id").uint(files.bos_id).key("eos_id").uint(files.eos_id);
  json.key("pad_id");
  if (files.pad_id) {
    json.uint(*files.pad_id);
  } else {
    json.null();
  }
  json.key("eos_ids").array();
  for (auto id : files.eos_ids) json.uint(id);
  json.end().end();
  return json.text();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: tokenizer_files_tool tiktoken|tekken FILE OUT_DIR [options]\n");
    return 2;
  }
  const std::string kind = argv[1], path = argv[2], out = argv[3];
  TiktokenOptions tiktoken{.version = LlamaTokenizerVersion::Llama3, .instruct = false, .model_max_length = 8192, .chat_template = std::nullopt};
  TekkenOptions tekken{.model_max_length = 131072, .chat_template = std::nullopt};
  for (int i = 4; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--llama3.1") {
      tiktoken.version = LlamaTokenizerVersion::Llama3_1;
    } else if (arg == "--instruct") {
      tiktoken.instruct = true;
    } else if (arg == "--max-length" && i + 1 < argc) {
      tiktoken.model_max_length = tekken.model_max_length = std::stoull(argv[++i]);
    } else if (arg == "--chat-template" && i + 1 < argc) {
      tiktoken.chat_template = tekken.chat_template = std::string(argv[++i]);
    } else {
      std::fprintf(stderr, "unknown option %s\n", arg.c_str());
      return 2;
    }
  }
  auto source = open_file(path);
  if (!source) {
    std::fprintf(stderr, "%s\n", source.error().to_string().c_str());
    return 1;
  }
  auto files = kind == "tekken" ? tokenizer_files_from_tekken(**source, path, tekken) : tokenizer_files_from_tiktoken(**source, path, tiktoken);
  if (!files) {
    std::fprintf(stderr, "%s\n", files.error().to_string().c_str());
    return 1;
  }
  write(out + "/tokenizer.json", files->tokenizer_json);
  write(out + "/tokenizer_config.json", files->tokenizer_config_json);
  write(out + "/special_tokens_map.json", files->special_tokens_map_json);
  write(out + "/ids.json", ids_json(*files));
  return 0;
}
