// fuzz_tiktoken — arbitrary bytes as a tiktoken rank file (Llama 3's tokenizer.model) and as a
// tekken.json, through the readers of src/original that turn them into transformers' tokenizer files.
//
// Input: byte 0 picks the reader (even: rank file, odd: tekken.json) and, for the rank file, the
// options (bit 1: Llama 3.1's special tokens, bit 2: instruct); the rest is the file.
//
// What must hold: a refusal names the file; a success is consistent: the vocabulary holds the ranks
// and the special tokens, BOS and EOS are inside it, and the three documents are valid JSON text
// (tokenizer.json ends its object; the two configs end with a newline).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_common.h"
#include "original/tekken.h"
#include "original/tiktoken.h"

using namespace safeweights;

namespace {

const std::string kName = "tokenizer-file";

void check_files(const original::HfTokenizerFiles& files) {
  FUZZ_CHECK(files.vocab_size > 0);
  FUZZ_CHECK(files.bos_id < files.vocab_size && files.eos_id < files.vocab_size);
  FUZZ_CHECK(!files.pad_id || *files.pad_id < files.vocab_size);
  for (auto id : files.eos_ids) FUZZ_CHECK(id < files.vocab_size);
  FUZZ_CHECK(!files.tokenizer_json.empty() && files.tokenizer_json.front() == '{' && files.tokenizer_json.back() == '}');
  FUZZ_CHECK(files.tokenizer_config_json.ends_with("}\n") && files.special_tokens_map_json.ends_with("}\n"));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const unsigned mode = data[0];
  auto source = memory_source(std::as_bytes(std::span<const std::uint8_t>(data + 1, size - 1)), kName);
  Result<original::HfTokenizerFiles> files = Error(ErrorKind::InvalidArgument, "unset");
  if (mode & 1u) {
    files = original::tokenizer_files_from_tekken(*source, kName, {.model_max_length = 4096, .chat_template = std::nullopt});
  } else {
    const original::TiktokenOptions options{
        .version = (mode & 2u) ? original::LlamaTokenizerVersion::Llama3_1 : original::LlamaTokenizerVersion::Llama3,
        .instruct = (mode & 4u) != 0,
        .model_max_length = 8192,
        .chat_template = std::nullopt};
    files = original::tokenizer_files_from_tiktoken(*source, kName, options);
  }
  if (!files) {
    FUZZ_CHECK(files.error().context().file == kName);
    return 0;
  }
  check_files(*files);
  return 0;
}
