// Test driver over libllama (llama.cpp's C API, built separately; tests/python/test_hf_llama.py
// compiles this file against $LLAMA_CPP_DIR): loads a GGUF model the way llama.cpp's tools do and
//   llama_logits MODEL.gguf logits ID...     prints one line per position: the logits, space-separated
//   llama_logits MODEL.gguf tokenize TEXT    prints the token ids of TEXT (no BOS/EOS added)
// Errors go to stderr with exit status 1. Not part of safeweights; it never links our library.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"

namespace {

void quiet(enum ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

int fail(const char* what) {
  std::fprintf(stderr, "llama_logits: %s\n", what);
  return 1;
}

int tokenize(const llama_vocab* vocab, const std::string& text) {
  std::vector<llama_token> ids(text.size() + 8);
  const int n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(), static_cast<int32_t>(ids.size()), false, false);
  if (n < 0) return fail("tokenize failed");
  for (int i = 0; i < n; ++i) std::printf("%s%d", i ? " " : "", ids[i]);
  std::printf("\n");
  return 0;
}

int logits(llama_model* model, const std::vector<llama_token>& ids) {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 64;
  cp.n_batch = 64;
  cp.n_threads = 1;
  cp.n_threads_batch = 1;
  // A float32 cache (the default is F16), so the comparison measures the model, not the cache.
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return fail("cannot create a context");
  llama_batch batch = llama_batch_init(static_cast<int32_t>(ids.size()), 0, 1);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    batch.token[i] = ids[i];
    batch.pos[i] = static_cast<llama_pos>(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = static_cast<int32_t>(ids.size());
  if (llama_decode(ctx, batch) != 0) return fail("decode failed");
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const float* row = llama_get_logits_ith(ctx, static_cast<int32_t>(i));
    for (int v = 0; v < n_vocab; ++v) std::printf("%s%.9g", v ? " " : "", row[v]);
    std::printf("\n");
  }
  llama_batch_free(batch);
  llama_free(ctx);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return fail("usage: llama_logits MODEL.gguf logits ID... | MODEL.gguf tokenize TEXT");
  llama_log_set(quiet, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return fail("cannot load the model");
  int rc;
  if (std::strcmp(argv[2], "tokenize") == 0) {
    rc = tokenize(llama_model_get_vocab(model), argv[3]);
  } else {
    std::vector<llama_token> ids;
    for (int i = 3; i < argc; ++i) ids.push_back(static_cast<llama_token>(std::atoi(argv[i])));
    rc = logits(model, ids);
  }
  llama_model_free(model);
  llama_backend_free();
  return rc;
}
