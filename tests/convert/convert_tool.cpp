// convert_tool IN OUT [SOURCE=NAME[:HEADS]]...: calls convert() with an explicit tensor list (renamed,
// rows permuted with HEADS heads as llama.cpp permutes Q/K), what the HF -> llama.cpp converter passes.
// Test tool: the CLI has no option for the permutation, and the Python test checks it against numpy.
#include <cstdio>
#include <string>

#include "safeweights/convert.h"

using namespace safeweights;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: convert_tool IN OUT [SOURCE=NAME[:HEADS]]...\n");
    return 2;
  }
  ConvertOptions options;
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('='), colon = arg.find(':', eq == std::string::npos ? 0 : eq);
    if (eq == std::string::npos) {
      std::fprintf(stderr, "bad tensor argument %s\n", argv[i]);
      return 2;
    }
    ConvertTensor t;
    t.source = arg.substr(0, eq);
    t.name = arg.substr(eq + 1, colon == std::string::npos ? std::string::npos : colon - eq - 1);
    if (colon != std::string::npos) t.permute_heads = static_cast<std::uint32_t>(std::stoul(arg.substr(colon + 1)));
    options.plan.tensors.push_back(std::move(t));
  }
  auto in = open_tensors(argv[1]);
  auto report = in.is_ok() ? convert(**in, argv[2], options) : Result<ConvertReport>(in.status());
  if (!report.is_ok()) {
    std::fprintf(stderr, "%s\n", report.error().to_string().c_str());
    return 1;
  }
  return 0;
}
