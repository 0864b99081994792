// The GGUF writer's entry for the registration (format.cpp). Internal.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "safeweights/gguf.h"

namespace safeweights::gguf {

// gguf::create over keys the caller keeps until it returns, so that a conversion's metadata is not
// copied into a key list of the writer's own (a Hugging Face plan's tokenizer arrays can be most of a
// conversion's memory): the header is serialized from them directly. A split model copies them still,
// as its first file's keys.
Result<std::unique_ptr<TensorSink>> create_over(const std::string& path, std::span<const KeyValue> kv, std::vector<TensorDecl> tensors,
                                                const WriteOptions& options);

}  // namespace safeweights::gguf
