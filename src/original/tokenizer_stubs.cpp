// TEMPORARY until branch `tiktoken` lands its readers: they refuse.
#include "original/tekken.h"
#include "original/tiktoken.h"

namespace safeweights::original {

Result<HfTokenizerFiles> tokenizer_files_from_tiktoken(const ByteSource&, std::string_view name, const TiktokenOptions&) {
  return Error(ErrorKind::NotSupported, "tiktoken rank files are not read yet").with_file(std::string(name));
}
Result<HfTokenizerFiles> tokenizer_files_from_tekken(const ByteSource&, std::string_view name, const TekkenOptions&) {
  return Error(ErrorKind::NotSupported, "tekken.json is not read yet").with_file(std::string(name));
}

}  // namespace safeweights::original
