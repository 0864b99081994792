// A byte-level BPE vocabulary given as ranks (token bytes by rank, tiktoken's form) and what
// transformers derives from it: the GPT-2 byte-to-character spelling of each token, and the merges of
// TikTokenConverter's "all valid splits" rule. Shared by the tiktoken and tekken readers. Internal to
// src/original.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "safeweights/error.h"

namespace safeweights::original {

// The longest token a rank file may hold, in bytes (Llama 3's and tekken's longest are far shorter).
inline constexpr std::size_t kMaxTokenBytes = 4096;
// The most merges, and the most bytes they may spell (summed over both halves of each), so that a
// crafted vocabulary whose every split is a merge cannot make the output, or the work, quadratic:
// Llama 3's 280,147 merges spell under 3 MB.
inline constexpr std::size_t kMaxMerges = 4u << 20;
inline constexpr std::uint64_t kMaxMergeBytes = 64ull << 20;

// One merge: the ranks of its left and right halves.
struct Merge {
  std::uint32_t left = 0, right = 0;
};

// `bytes` spelled through GPT-2's bytes_to_unicode (printable Latin-1 bytes as themselves, the others
// as U+0100 and up, in byte order), appended to `out` as UTF-8.
void append_byte_level(std::string& out, std::string_view bytes);

// `text` decoded as standard, padded base64 (RFC 4648 section 4); nullopt for any other character, a
// length that is not a multiple of 4, misplaced padding or non-zero bits under the padding.
std::optional<std::string> decode_base64(std::string_view text);

// The merges TikTokenConverter derives from `tokens` (the bytes of rank 0, 1, ...): for each token in
// rank order, every split into a left and a right part that are both tokens, ordered by the left
// part's rank. Linear in the tokens' bytes plus the merges' (a rolling hash finds the parts; a split
// both of whose parts it finds is checked byte for byte). InvalidModelFolder naming `name` when two
// ranks hold the same bytes or a token is empty or longer than kMaxTokenBytes; ResourceLimit past
// kMaxMerges or kMaxMergeBytes.
Result<std::vector<Merge>> derive_merges(std::span<const std::string> tokens, std::string_view name);

}  // namespace safeweights::original
