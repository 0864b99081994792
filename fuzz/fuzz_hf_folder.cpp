// fuzz_hf_folder — arbitrary bytes as the files of a Hugging Face model folder: what src/hf reads
// before it plans a GGUF (config.json, tokenizer.json, tokenizer_config.json, tokenizer.model,
// generation_config.json).
//
// Input: byte 0 says which files exist (bit 0 config.json, 1 tokenizer.json, 2 tokenizer_config.json,
// 3 tokenizer.model, 4 generation_config.json); the rest is their contents in that order, separated by kSeparator (a file whose
// bit is clear takes no part). They are written into one temporary folder, reused from run to run and
// removed at exit.
//
// What must hold: every reader fails cleanly with an error that names a file of the folder, or gives
// its struct; a config.json read as a model is one is_model_config() and is_model_folder() recognise;
// the vocabulary (add_vocabulary: the tokenizer as GGUF metadata) either fails naming a file or gives
// tokenizer.ggml.tokens with config.json's vocab_size entries; generation_config.json's sampling keys
// are general.sampling.* (read_sampling never fails: like gguf-py it takes nothing from a broken file). A vocab_size over 2^16 skips the
// vocabulary step (it pads to vocab_size, which only costs time here).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_common.h"
#include "hf/hf_files.h"
#include "hf/vocab.h"
#include "safeweights/hf_gguf.h"

using namespace safeweights;

namespace {

constexpr std::string_view kSeparator = "\n@@file@@\n";
constexpr const char* kFiles[] = {"config.json", "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "generation_config.json"};

const std::string& folder() { return fuzz::scratch_folder("fuzz_hf_folder"); }

// An error of a reader names the file it is about: one of the folder's, or the folder itself.
void check_names_file(const Error& e) {
  if (!e.context().file.starts_with(folder())) {
    std::fprintf(stderr, "error names no file of the folder: %s\n", e.to_string().c_str());
    std::abort();
  }
}

// FUZZ_HF_VERBOSE=1 prints each step's verdict (to see how deep a seed reaches).
void say(const char* step, const Status& s) {
  static const bool verbose = std::getenv("FUZZ_HF_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "%s: %s\n", step, s.to_string().c_str());
}

template <typename T>
void check(const char* step, const Result<T>& r) {
  say(step, r.status());
  if (!r.is_ok()) check_names_file(r.error());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned present = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string model;
  for (unsigned i = 0; i < std::size(kFiles); ++i) {
    const std::string path = folder() + "/" + kFiles[i];
    if (!(present & (1u << i))) {
      ::unlink(path.c_str());
      continue;
    }
    const std::size_t cut = rest.find(kSeparator);
    const std::string_view part = rest.substr(0, cut);
    rest = cut == std::string_view::npos ? std::string_view() : rest.substr(cut + kSeparator.size());
    fuzz::put_scratch("fuzz_hf_folder", kFiles[i], part);
    if (i == 3) model = part;
  }

  auto listed = Folder::open(folder(), uncached_resolver());
  FUZZ_CHECK(listed.is_ok());
  const Folder& dir = *listed;
  auto config = hf::read_config(dir);
  check("config.json", config);
  if (config.is_ok()) {
    FUZZ_CHECK(hf::is_model_config(dir));
    FUZZ_CHECK(hf::is_model_folder(folder()));
    FUZZ_CHECK(config->arch != nullptr);
  }
  check("tokenizer.json", hf::read_tokenizer_json(dir));
  check("tokenizer_config.json", hf::read_tokenizer_config(dir));
  for (const MetaEntry& e : hf::read_sampling(dir)) FUZZ_CHECK(e.key.starts_with("general.sampling."));
  if (present & 8u) {
    auto pieces = hf::parse_sentencepiece(model, "tokenizer.model");
    say("tokenizer.model", pieces.status());
    if (pieces.is_ok()) FUZZ_CHECK(pieces->size() <= model.size());  // each piece takes bytes
  }
  if (config.is_ok() && config->vocab_size <= (1u << 16)) {
    std::vector<MetaEntry> kv;
    Status s = hf::add_vocabulary(dir, *config, {}, kv);
    say("vocabulary", s);
    if (!s.is_ok()) {
      check_names_file(s.error());
    } else {
      bool tokens = false;
      for (const MetaEntry& e : kv) {
        if (e.key != "tokenizer.ggml.tokens") continue;
        tokens = true;
        FUZZ_CHECK(e.value.items.size() == config->vocab_size);
      }
      FUZZ_CHECK(tokens);
    }
  }
  return 0;
}
