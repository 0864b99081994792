// fuzz_original_folder — arbitrary bytes as the files of Meta's original download or Mistral's native
// layout: what src/original reads before it plans a transformers folder or a GGUF (params.json, the
// tokenizer, the weights).
//
// Input: the contents of params.json, tokenizer.model and consolidated.safetensors, in that order,
// separated by kSeparator (missing parts are empty files). They are written into one temporary folder,
// reused from run to run and removed at exit.
//
// What must hold: planning either fails with an error that names a file of the folder (or the folder),
// or gives a plan whose every tensor is a transformers name over tensors the weights hold, and files
// beside them that include config.json; the GGUF plan likewise fails cleanly or gives a plan.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_common.h"
#include "gguf/format.h"
#include "original/planner.h"
#include "safeweights/folder.h"

using namespace safeweights;

namespace {

constexpr std::string_view kSeparator = "\n@@file@@\n";
constexpr const char* kFiles[] = {"params.json", "tokenizer.model", "consolidated.safetensors"};

const std::string& folder() { return fuzz::scratch_folder("fuzz_original_folder"); }

void check_names_file(const Error& e) {
  if (!e.context().file.starts_with(folder())) {
    std::fprintf(stderr, "error names no file of the folder: %s\n", e.to_string().c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  for (const char* name : kFiles) {
    const std::size_t cut = rest.find(kSeparator);
    fuzz::put_scratch("fuzz_original_folder", name, rest.substr(0, cut));
    rest = cut == std::string_view::npos ? std::string_view() : rest.substr(cut + kSeparator.size());
  }
  auto listed = Folder::open(folder(), uncached_resolver());
  FUZZ_CHECK(listed.is_ok());
  const LayoutPlanner& planner = original::layout_planner();
  FUZZ_CHECK(planner.knows(*listed));
  FormatOptions read;
  read.original.max_position_embeddings = 4096;  // so that a SentencePiece tokenizer (Llama 1 or 2) reaches the weights
  auto planned = planner.plan_folder(*listed, read, std::nullopt);
  if (!planned.is_ok()) {
    check_names_file(planned.error());
  } else {
    for (const ConvertTensor& t : planned->weights.plan.tensors) {
      FUZZ_CHECK(!t.name.empty());
      if (t.pieces.empty()) FUZZ_CHECK(planned->weights.tensors->find(t.source) != nullptr);
      for (const TensorPiece& p : t.pieces) FUZZ_CHECK(planned->weights.tensors->find(p.source) != nullptr);
    }
    FUZZ_CHECK(!planned->files.empty() && planned->files[0].first == "config.json");
  }
  std::vector<std::string> notes;
  auto gguf = planner.plan_file(*listed, read, gguf::gguf_format(), std::nullopt, notes);
  if (!gguf.is_ok()) check_names_file(gguf.error());
  return 0;
}
