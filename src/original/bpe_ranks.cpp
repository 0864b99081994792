// Byte-level spelling, base64 and the merges of a rank vocabulary (original/bpe_ranks.h).
#include "original/bpe_ranks.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <unordered_map>

#include "core/hash.h"

namespace safeweights::original {

namespace {

// GPT-2's byte-to-character table: bytes '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for
// themselves; the other 68 bytes take U+0100, U+0101, ... in byte order.
std::array<char32_t, 256> make_byte_table() {
  std::array<char32_t, 256> table{};
  char32_t next = 0x100;
  for (unsigned b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    table[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return table;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else {  // every character of the table is below U+0800
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Polynomial hashes modulo the Mersenne prime 2^61 - 1 under a per-process base, so that the hash of
// any prefix and any suffix of a token costs O(1) once its prefix hashes are known.
class RollingHash {
 public:
  explicit RollingHash(std::size_t max_length) : powers_(max_length + 1) {
    base_ = (hash_seed() % (kPrime - 1024)) + 512;
    powers_[0] = 1;
    for (std::size_t i = 1; i < powers_.size(); ++i) powers_[i] = mul(powers_[i - 1], base_);
  }
  // prefix[i] = hash of bytes[0, i).
  void prefixes(std::string_view bytes, std::vector<std::uint64_t>& prefix) const {
    prefix.resize(bytes.size() + 1);
    prefix[0] = 0;
    for (std::size_t i = 0; i < bytes.size(); ++i) prefix[i + 1] = add(mul(prefix[i], base_), static_cast<unsigned char>(bytes[i]) + 1u);
  }
  // Hash of bytes[from, to) from the prefix hashes.
  std::uint64_t range(const std::vector<std::uint64_t>& prefix, std::size_t from, std::size_t to) const {
    return sub(prefix[to], mul(prefix[from], powers_[to - from]));
  }
  // The table key of a part: its hash and its length.
  static std::uint64_t key(std::uint64_t hash, std::size_t length) {
    return hash ^ (static_cast<std::uint64_t>(length) << 61) ^ (length * 0x9E3779B97F4A7C15ull);
  }

 private:
  static constexpr std::uint64_t kPrime = (1ull << 61) - 1;
  static std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
    const __uint128_t m = static_cast<__uint128_t>(a) * b;
    const std::uint64_t r = static_cast<std::uint64_t>(m & kPrime) + static_cast<std::uint64_t>(m >> 61);
    return r >= kPrime ? r - kPrime : r;
  }
  static std::uint64_t add(std::uint64_t a, std::uint64_t b) {
    const std::uint64_t r = a + b;
    return r >= kPrime ? r - kPrime : r;
  }
  static std::uint64_t sub(std::uint64_t a, std::uint64_t b) { return a >= b ? a - b : a + kPrime - b; }

  std::uint64_t base_ = 0;
  std::vector<std::uint64_t> powers_;
};

// Every token by its bytes: a table by rolling-hash key for the common path, the exact table behind
// it for the rare key that two tokens share.
class TokenIndex {
 public:
  TokenIndex(std::span<const std::string> tokens, const RollingHash& hash) : tokens_(tokens), hash_(hash) {
    by_key_.reserve(tokens.size());
    exact_.reserve(tokens.size());
  }

  // Adds rank `rank`; the rank already holding the same bytes, if any.
  std::optional<std::uint32_t> add(std::uint32_t rank, std::vector<std::uint64_t>& prefix) {
    const std::string& bytes = tokens_[rank];
    auto [it, fresh] = exact_.try_emplace(std::string_view(bytes), rank);
    if (!fresh) return it->second;
    hash_.prefixes(bytes, prefix);
    by_key_.try_emplace(RollingHash::key(prefix.back(), bytes.size()), rank);
    return std::nullopt;
  }

  // A rank whose bytes have the rolling hash `hash` and `length`, unchecked; none when no token has
  // them. Checking waits until both parts of a split have a candidate: checking each prefix as it is
  // found would cost a token's length squared when its prefixes are tokens but its suffixes are not.
  std::optional<std::uint32_t> candidate(std::uint64_t hash, std::size_t length) const {
    auto it = by_key_.find(RollingHash::key(hash, length));
    if (it == by_key_.end()) return std::nullopt;
    return it->second;
  }

  // The rank of `part`, given the candidate its hash found.
  std::optional<std::uint32_t> confirm(std::string_view part, std::uint32_t candidate) const {
    if (tokens_[candidate] == part) return candidate;
    auto exact = exact_.find(part);  // a key that two different byte strings share
    if (exact == exact_.end()) return std::nullopt;
    return exact->second;
  }

 private:
  std::span<const std::string> tokens_;
  const RollingHash& hash_;
  std::unordered_map<std::uint64_t, std::uint32_t> by_key_;
  std::unordered_map<std::string_view, std::uint32_t> exact_;
};

Error bad_token(std::string_view name, std::string message) { return Error(ErrorKind::InvalidModelFolder, std::move(message)).with_file(name); }

}  // namespace

void append_byte_level(std::string& out, std::string_view bytes) {
  static const std::array<char32_t, 256> table = make_byte_table();
  for (char c : bytes) append_utf8(out, table[static_cast<unsigned char>(c)]);
}

std::optional<std::string> decode_base64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const std::size_t pad = last ? (text[i + 3] == '=' ? (text[i + 2] == '=' ? 2 : 1) : 0) : 0;
    std::uint32_t group = 0;
    for (std::size_t j = 0; j < 4; ++j) {
      const int v = j < 4 - pad ? base64_value(text[i + j]) : 0;
      if (v < 0) return std::nullopt;  // '=' outside the last group's tail lands here too
      group = (group << 6) | static_cast<std::uint32_t>(v);
    }
    if ((pad == 1 && (group & 0xFF) != 0) || (pad == 2 && (group & 0xFFFF) != 0)) return std::nullopt;
    out.push_back(static_cast<char>(group >> 16));
    if (pad < 2) out.push_back(static_cast<char>((group >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(group & 0xFF));
  }
  return out;
}

Result<std::vector<Merge>> derive_merges(std::span<const std::string> tokens, std::string_view name) {
  const RollingHash hash(kMaxTokenBytes);
  TokenIndex index(tokens, hash);
  std::vector<std::uint64_t> prefix;
  for (std::size_t rank = 0; rank < tokens.size(); ++rank) {
    const std::size_t length = tokens[rank].size();
    if (length == 0 || length > kMaxTokenBytes) {
      return bad_token(
          name, "rank " + std::to_string(rank) + " holds " + std::to_string(length) + " bytes: a token holds 1 to " + std::to_string(kMaxTokenBytes));
    }
    if (auto earlier = index.add(static_cast<std::uint32_t>(rank), prefix)) {
      return bad_token(name, "ranks " + std::to_string(*earlier) + " and " + std::to_string(rank) + " hold the same bytes: each token has one rank");
    }
  }
  std::vector<Merge> merges;
  merges.reserve(tokens.size() * 5 / 2);
  std::uint64_t merge_bytes = 0;
  for (std::size_t rank = 0; rank < tokens.size(); ++rank) {
    const std::string_view token = tokens[rank];
    if (token.size() < 2) continue;
    hash.prefixes(token, prefix);
    const std::size_t first = merges.size();
    for (std::size_t cut = 1; cut < token.size(); ++cut) {
      auto left = index.candidate(prefix[cut], cut);
      if (!left) continue;
      auto right = index.candidate(hash.range(prefix, cut, token.size()), token.size() - cut);
      if (!right) continue;
      left = index.confirm(token.substr(0, cut), *left);
      right = index.confirm(token.substr(cut), *right);
      if (!left || !right) continue;
      merge_bytes += token.size();
      if (merge_bytes > kMaxMergeBytes || merges.size() == kMaxMerges) {
        return Error(ErrorKind::ResourceLimit, "the merges this vocabulary implies are more than " + std::to_string(kMaxMerges) +
                                                   " or spell more than " + std::to_string(kMaxMergeBytes >> 20) + " MiB (at rank " +
                                                   std::to_string(rank) + ")")
            .with_file(name);
      }
      merges.push_back({*left, *right});
    }
    // TikTokenConverter sorts a token's splits by (rank of left, rank of right); the left rank alone
    // decides, since one left part fixes the split.
    std::sort(merges.begin() + static_cast<std::ptrdiff_t>(first), merges.end(), [](const Merge& a, const Merge& b) { return a.left < b.left; });
  }
  return merges;
}

}  // namespace safeweights::original
