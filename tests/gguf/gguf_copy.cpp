// gguf_copy IN OUT: reads IN with safeweights' GGUF reader and writes its metadata and tensors with the
// GGUF writer (same key order, alignment and tensor order). Test tool for the gguf-py interop test.
#include <cstdio>

#include "safeweights/gguf.h"

using namespace safeweights;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: gguf_copy IN OUT\n");
    return 2;
  }
  auto in = gguf::open(argv[1]);
  if (!in.is_ok()) {
    std::fprintf(stderr, "%s\n", in.error().to_string().c_str());
    return 1;
  }
  const gguf::GgufFile& f = **in;
  std::vector<gguf::KeyValue> kv(f.kv().begin(), f.kv().end());
  std::vector<TensorDecl> decls;
  for (const TensorEntry& t : f.tensors())
    decls.push_back(TensorDecl{std::string(t.name), t.type, std::vector<std::uint64_t>(t.shape.begin(), t.shape.end())});
  WriteOptions options;
  options.alignment = f.alignment();
  auto out = gguf::create(argv[2], std::move(kv), std::move(decls), options);
  Status s = out.is_ok() ? copy_tensors(f, **out) : out.status();  // copy_tensors finishes the sink
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}
