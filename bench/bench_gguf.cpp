// bench_gguf — open + validate a GGUF of many tensors (what `validate` and every reader do first).
//
// Usage: bench_gguf [--dir DIR] [--tensors N] [--runs R] [--vocab V]
//
// Writes DIR/safeweights_bench.gguf once with the GGUF writer: N tensors (default 20,000) with
// llama.cpp-like names ("blk.<i>.ffn_down.weight", ...), Q8_0 [64, 32] each, and a V-token
// vocabulary (default 32,000) (strings, scores and token types), then measures gguf::open (mapped; every rule checked,
// duplicate names by hash set) R times (default 50) and prints the median and the minimum, with the
// machine. The page cache is warm (the file was just written).
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "safeweights/gguf.h"

namespace {

using namespace safeweights;
using gguf::Value;
using gguf::ValueType;

std::vector<gguf::KeyValue> vocabulary(int n) {
  std::vector<Value> tokens, scores, types;
  for (int i = 0; i < n; ++i) {
    tokens.push_back(Value::string("tok" + std::to_string(i)));
    scores.push_back(Value::f32(-static_cast<float>(i)));
    types.push_back(Value::i32(1));
  }
  return {{"general.architecture", Value::string("llama")},
          {"tokenizer.ggml.model", Value::string("llama")},
          {"tokenizer.ggml.tokens", Value::array(ValueType::STRING, std::move(tokens))},
          {"tokenizer.ggml.scores", Value::array(ValueType::FLOAT32, std::move(scores))},
          {"tokenizer.ggml.token_type", Value::array(ValueType::INT32, std::move(types))}};
}

int write_file(const std::string& path, int count, int vocab) {
  static const char* kParts[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down", "attn_norm"};
  std::vector<TensorDecl> decls;
  for (int i = 0; i < count; ++i) decls.push_back({"blk." + std::to_string(i / 8) + "." + kParts[i % 8] + ".weight", TensorType::Q8_0, {32, 64}});
  auto w = gguf::create(path, vocabulary(vocab), decls);
  if (!w.is_ok()) return std::fprintf(stderr, "%s\n", w.error().to_string().c_str()), 1;
  const std::vector<std::byte> block(2 * 34 * 32, std::byte{0x11});
  for (const TensorDecl& d : decls)
    if (Status s = (*w)->write(d.name, block); !s.is_ok()) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;
  if (Status s = (*w)->finish(); !s.is_ok()) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = std::filesystem::temp_directory_path().string();
  int count = 20000, runs = 50, vocab = 32000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--dir"))
      dir = argv[i + 1];
    else if (!std::strcmp(argv[i], "--tensors"))
      count = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--runs"))
      runs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--vocab"))
      vocab = std::atoi(argv[i + 1]);
  }
  const std::string path = dir + "/safeweights_bench.gguf";
  if (write_file(path, count, vocab) != 0) return 1;
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    auto f = gguf::open(path);
    const auto t1 = std::chrono::steady_clock::now();
    if (!f.is_ok() || (*f)->tensors().size() != static_cast<std::size_t>(count)) return std::fprintf(stderr, "open failed\n"), 1;
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  utsname u{};
  uname(&u);
  std::printf("machine: %s %s, %u hardware threads\n", u.sysname, u.machine, std::thread::hardware_concurrency());
  std::printf("file: %d tensors, %d-token vocabulary, %ju bytes\n", count, vocab, static_cast<std::uintmax_t>(std::filesystem::file_size(path)));
  std::printf("gguf::open (all rules): median %.2f ms, min %.2f ms over %d runs\n", ms[ms.size() / 2], ms.front(), runs);
  std::filesystem::remove(path);
  return 0;
}
