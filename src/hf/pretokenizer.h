// llama.cpp's pre-tokenizers (tokenizer.ggml.pre) recognised by what a tokenizer.json's pre_tokenizer is,
// not by a hash of its output: for each name llama.cpp's loader knows (src/llama-vocab.cpp at the pinned
// llama.cpp) whose regexes split text as a tokenizer.json pre_tokenizer does, that pre_tokenizer's
// structure, and the matcher that names a tokenizer.json's. Patterns are compared as strings, never
// compiled: nothing from a file is run. Internal to src/hf.
//
// Thread safety: pure functions over constant tables.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace safeweights::hf {

// One step of a pre_tokenizer in canonical form (nested Sequences are flattened: applying a Sequence is
// applying its steps in order). Two steps split text alike when all three fields are equal.
struct PreTokenizerStep {
  std::string type;     // "Split", "ByteLevel", "Digits", "Punctuation", or another type as the file names it
  std::string args;     // the settings that change how text is split: "Isolated, Regex", "use_regex=false"...
  std::string pattern;  // Split's pattern (literal CR, LF and tab written as \r \n \t); empty for other types
  bool operator==(const PreTokenizerStep&) const = default;
};

// Canonical steps, as the reader builds them from tokenizer.json and the table spells them.
PreTokenizerStep split_step(std::string_view behavior, bool invert, bool is_regex, std::string_view pattern);
PreTokenizerStep byte_level_step(bool add_prefix_space, bool use_regex);
PreTokenizerStep digits_step(bool individual_digits);
PreTokenizerStep punctuation_step(std::string_view behavior);
PreTokenizerStep other_step(std::string_view type);

// What tokenizer.json splits text with before its BPE model runs.
struct PreTokenizerShape {
  std::vector<PreTokenizerStep> steps;  // empty: no pre_tokenizer
  std::string normalizer;               // "" none, "NFC", else a description of the normalizer
  bool ignore_merges = false;           // model.ignore_merges: a word in the vocabulary is one token
};

// What else picks among names llama.cpp splits alike.
struct PreTokenizerHints {
  std::string_view hf_class;                         // config.json's architectures[0]
  std::optional<bool> clean_up_tokenization_spaces;  // tokenizer_config.json's
};

// The llama.cpp name whose regexes split text as `shape` does, or empty when none does. Among names
// that split alike (llama.cpp maps them to the same regexes), the one whose llama.cpp settings agree
// with the file wins: a model family named by `hints.hf_class` first, then model.ignore_merges, then
// clean_up_tokenization_spaces; then the table's order (its most common model first).
std::string_view identify_pre_tokenizer(const PreTokenizerShape& shape, const PreTokenizerHints& hints);

// The shape for a message: `Sequence[Split(Isolated, Regex "..."), ByteLevel(use_regex=false)]`, each
// pattern cut after 60 bytes (at a character boundary) with "...", and the normalizer when there is one.
std::string describe_pre_tokenizer(const PreTokenizerShape& shape);

// The names identify_pre_tokenizer() can give, in table order (each once).
std::vector<std::string_view> known_pre_tokenizers();

}  // namespace safeweights::hf
