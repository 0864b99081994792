// llama-quantize's per-tensor type choice (src/gguf/quant_mix.h), as src/llama-quant.cpp of the pinned
// llama.cpp decides it: tensor_allows_quantization, llama_tensor_get_type(_impl), tensor_type_fallback,
// tensor_requires_imatrix. Written from those rules; the order of the checks is theirs, since several
// rules count the tensors seen so far.
#include "gguf/quant_mix.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <map>
#include <numeric>
#include <optional>
#include <regex>

#include "core/status_macros.h"
#include "io/read_util.h"
#include "safeweights/gguf.h"

namespace safeweights::gguf {
namespace {

using T = TensorType;

// llama.cpp's LLAMA_FTYPE_* numbers.
enum Ftype : std::uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q8_0 = 7,
  Q5_0 = 8,
  Q5_1 = 9,
  Q2_K = 10,
  Q3_K_S = 11,
  Q3_K_M = 12,
  Q3_K_L = 13,
  Q4_K_S = 14,
  Q4_K_M = 15,
  Q5_K_S = 16,
  Q5_K_M = 17,
  Q6_K = 18,
  IQ2_XXS = 19,
  IQ2_XS = 20,
  Q2_K_S = 21,
  IQ3_XS = 22,
  IQ3_XXS = 23,
  IQ1_S = 24,
  IQ4_NL = 25,
  IQ3_S = 26,
  IQ3_M = 27,
  IQ2_S = 28,
  IQ2_M = 29,
  IQ4_XS = 30,
  IQ1_M = 31,
  BF16 = 32,
  TQ1_0 = 36,
  TQ2_0 = 37,
  MXFP4_MOE = 38,
  Q1_0 = 40,
  Q2_0 = 41,
};

// tools/quantize's QUANT_OPTIONS, in its order (a number finds its first entry), with
// llama_ftype_get_default_type's base type. NVFP4 has no entry there (llama.h numbers MOSTLY_NVFP4 39,
// but llama-quantize refuses it as a file type): NVFP4 is a tensor type only (--type nvfp4, --tensor-type).
constexpr FileType kFileTypes[] = {
    {"Q1_0", Q1_0, T::Q1_0},
    {"Q2_0", Q2_0, T::Q2_0},
    {"Q4_0", Q4_0, T::Q4_0},
    {"Q4_1", Q4_1, T::Q4_1},
    {"MXFP4_MOE", MXFP4_MOE, T::MXFP4},
    {"Q5_0", Q5_0, T::Q5_0},
    {"Q5_1", Q5_1, T::Q5_1},
    {"IQ2_XXS", IQ2_XXS, T::IQ2_XXS},
    {"IQ2_XS", IQ2_XS, T::IQ2_XS},
    {"IQ2_S", IQ2_S, T::IQ2_XS},
    {"IQ2_M", IQ2_M, T::IQ2_S},
    {"IQ1_S", IQ1_S, T::IQ1_S},
    {"IQ1_M", IQ1_M, T::IQ1_M},
    {"TQ1_0", TQ1_0, T::TQ1_0},
    {"TQ2_0", TQ2_0, T::TQ2_0},
    {"Q2_K", Q2_K, T::Q2_K},
    {"Q2_K_S", Q2_K_S, T::Q2_K},
    {"IQ3_XXS", IQ3_XXS, T::IQ3_XXS},
    {"IQ3_S", IQ3_S, T::IQ3_S},
    {"IQ3_M", IQ3_M, T::IQ3_S},
    {"Q3_K", Q3_K_M, T::Q3_K},
    {"IQ3_XS", IQ3_XS, T::IQ3_S},
    {"Q3_K_S", Q3_K_S, T::Q3_K},
    {"Q3_K_M", Q3_K_M, T::Q3_K},
    {"Q3_K_L", Q3_K_L, T::Q3_K},
    {"IQ4_NL", IQ4_NL, T::IQ4_NL},
    {"IQ4_XS", IQ4_XS, T::IQ4_XS},
    {"Q4_K", Q4_K_M, T::Q4_K},
    {"Q4_K_S", Q4_K_S, T::Q4_K},
    {"Q4_K_M", Q4_K_M, T::Q4_K},
    {"Q5_K", Q5_K_M, T::Q5_K},
    {"Q5_K_S", Q5_K_S, T::Q5_K},
    {"Q5_K_M", Q5_K_M, T::Q5_K},
    {"Q6_K", Q6_K, T::Q6_K},
    {"Q8_0", Q8_0, T::Q8_0},
    {"F16", F16, T::F16},
    {"BF16", BF16, T::BF16},
    {"F32", F32, T::F32},
};

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// ---- the model's facts ----------------------------------------------------------------------------

// An integer key, or the first item of an integer array (llama.cpp's per-layer arrays, layer 0).
std::optional<std::uint64_t> integer(const Metadata& md, const std::string& key) {
  const MetaValue* v = md.find(key);
  if (v && v->type == MetaType::ARRAY && !v->items.empty()) v = &v->items[0];
  if (!v) return std::nullopt;
  switch (v->type) {
    case MetaType::UINT8:
    case MetaType::UINT16:
    case MetaType::UINT32:
    case MetaType::UINT64: return v->as_u64();
    case MetaType::INT8:
    case MetaType::INT16:
    case MetaType::INT32:
    case MetaType::INT64: return v->as_i64() < 0 ? std::nullopt : std::optional<std::uint64_t>(v->as_u64());
    default: return std::nullopt;
  }
}

std::uint32_t clamp32(std::uint64_t v) { return static_cast<std::uint32_t>(std::min<std::uint64_t>(v, UINT32_MAX)); }

// ---- tensor roles -----------------------------------------------------------------------------------

enum class Role { TokenEmbd, AttnQ, AttnV, AttnK, AttnQkv, AttnKvB, AttnOutput, FfnUp, FfnGate, FfnDown, Output, Other };

bool is_token_embd(std::string_view n) { return n == "token_embd.weight" || n == "per_layer_token_embd.weight"; }

Role role_of(std::string_view n) {
  if (n == "output.weight") return Role::Output;
  if (is_token_embd(n)) return Role::TokenEmbd;
  if (contains(n, "attn_qkv.weight")) return Role::AttnQkv;
  if (contains(n, "attn_kv_b.weight")) return Role::AttnKvB;
  if (contains(n, "attn_v.weight")) return Role::AttnV;
  if (contains(n, "attn_k.weight")) return Role::AttnK;
  if (contains(n, "attn_q.weight")) return Role::AttnQ;
  if (contains(n, "attn_output.weight")) return Role::AttnOutput;
  if (contains(n, "ffn_up")) return Role::FfnUp;
  if (contains(n, "ffn_gate")) return Role::FfnGate;
  if (contains(n, "ffn_down")) return Role::FfnDown;
  return Role::Other;
}

bool is_attn_v_like(Role r) { return r == Role::AttnV || r == Role::AttnQkv || r == Role::AttnKvB; }

// ggml_n_dims: the dimensions up to the last (in ne order: outermost) that is not 1, at least one.
std::size_t n_dims(std::span<const std::uint64_t> shape) {
  std::size_t i = 0;
  while (i + 1 < shape.size() && shape[i] == 1) ++i;
  return std::max<std::size_t>(1, shape.size() - i);
}

std::uint64_t ne(std::span<const std::uint64_t> shape, std::size_t k) { return k < shape.size() ? shape[shape.size() - 1 - k] : 1; }

// tensor_allows_quantization: 2-D and 3-D weights, but for norms, routers and the small or positional
// tensors llama.cpp names.
bool allows_quantization(const QuantizeMix& knobs, std::string_view arch, std::string_view n, std::span<const std::uint64_t> shape) {
  if (n_dims(shape) < 2 || !n.ends_with("weight")) return false;
  if (contains(n, "_norm.weight") || (knobs.leave_output_tensor && n == "output.weight")) return false;
  if (n == "position_embd.weight" || n == "token_types.weight") return false;
  static constexpr std::string_view kNever[] = {"ffn_gate_inp.weight",
                                                "ffn_gate_tid2eid.weight",
                                                "altup",
                                                "laurel",
                                                "per_layer_model_proj",
                                                "ssm_conv1d",
                                                "shortconv.conv.weight",
                                                "indexer.k_proj.weight",
                                                "indexer.q_proj.weight",
                                                "time_mix_first.weight",
                                                "time_mix_w0.weight",
                                                "time_mix_w1.weight",
                                                "time_mix_w2.weight",
                                                "time_mix_v0.weight",
                                                "time_mix_v1.weight",
                                                "time_mix_v2.weight",
                                                "time_mix_a0.weight",
                                                "time_mix_a1.weight",
                                                "time_mix_a2.weight",
                                                "time_mix_g1.weight",
                                                "time_mix_g2.weight",
                                                "time_mix_decay_w1.weight",
                                                "time_mix_decay_w2.weight",
                                                "time_mix_lerp_fused.weight",
                                                "attn_rel_b.weight",
                                                ".position_embd",
                                                "sam.pos_embd",
                                                "sam.neck.",
                                                "sam.net_",
                                                ".rel_pos",
                                                ".patch_embd",
                                                ".patch_merger",
                                                "a.rvq.codebook",
                                                "mm.a.code_embd"};
  static constexpr std::string_view kNeverGlm5Next[] = {"hc_",
                                                        "indexer.attn_q_b",
                                                        "indexer.attn_k",
                                                        "indexer.proj",
                                                        "indexer_compressor_gate",
                                                        "indexer_compressor_ape",
                                                        "ssm_f_a.weight",
                                                        "ssm_f_b.weight",
                                                        "ssm_g_a.weight",
                                                        "ssm_g_b.weight",
                                                        "ssm_beta.weight",
                                                        "attn_kv_a_mqa.weight",
                                                        "attn_k_b.weight",
                                                        "attn_v_b.weight"};
  const auto found = [&](std::string_view part) { return contains(n, part); };
  if (std::ranges::any_of(kNever, found)) return false;
  return arch != "glm5-next" || std::ranges::none_of(kNeverGlm5Next, found);
}

// The layer of blk.N. names as llama.cpp's loader orders tensors (sscanf "blk.%d."), -1 for others.
long layer_of(std::string_view n) {
  if (!n.starts_with("blk.")) return -1;
  n.remove_prefix(4);
  std::size_t i = 0;
  while (i < n.size() && std::isspace(static_cast<unsigned char>(n[i]))) ++i;
  if (i < n.size() && n[i] == '+') ++i;
  long v = -1;
  const auto [end, ec] = std::from_chars(n.data() + i, n.data() + n.size(), v);
  return ec == std::errc() ? v : -1;
}

// ---- the rules ----------------------------------------------------------------------------------------

struct State {
  const FileType& ft;
  const QuantizeMix& knobs;
  const ModelFacts& model;
  bool has_imatrix = false;
  bool tied = true;  // no output.weight: token_embd is the output too
  int n_attention_wv = 0, i_attention_wv = 0, i_ffn_down = 0, i_ffn_gate = 0, i_ffn_up = 0;
  std::vector<std::pair<std::regex, TensorType>> patterns;
};

bool use_more_bits(int i_layer, int n_layers) { return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2; }

// The layer a per-layer rule reads: the counter of tensors seen, or with experts the name's blk.N.
Result<std::pair<int, int>> layer_info(const State& s, int counter, std::string_view name) {
  const int n_layer = static_cast<int>(s.model.n_layer);
  if (std::max<std::uint32_t>(1, s.model.n_expert) <= 1) return std::pair{counter, n_layer};
  const long layer = layer_of(name);
  if (!name.starts_with("blk.") || layer < 0 || layer >= n_layer)
    return Error(ErrorKind::InvalidArgument, "an expert model's tensor needs a layer in [0, " + std::to_string(n_layer) + ") in its name")
        .with_tensor(std::string(name));
  return std::pair{static_cast<int>(layer), n_layer};
}

bool is_ftype(const State& s, std::initializer_list<std::uint32_t> set) { return std::ranges::find(set, s.ft.ftype) != set.end(); }

// llama_tensor_get_type_impl: the file type's rule for a tensor's role, layer and the model.
Result<TensorType> mix_rule(State& s, TensorType t, std::string_view name, std::span<const std::uint64_t> shape, Role role) {
  const std::uint32_t f = s.ft.ftype;
  const std::string& arch = s.model.arch;
  const bool falcon = arch == "falcon";
  const std::uint32_t gqa = s.model.n_gqa(), n_expert = s.model.n_expert;
  if (arch == "glm5-next" && (contains(name, "attn_q_a") || contains(name, "attn_q_b") || contains(name, "nextn.eh_proj")))
    return t == T::F32 || t == T::BF16 || t == T::F16 ? t : T::Q8_0;
  const bool low = is_ftype(s, {IQ2_XXS, IQ2_XS, IQ1_S, IQ2_S, IQ2_M, IQ1_M});
  if (role == Role::Output || (s.tied && role == Role::TokenEmbd)) {
    if (s.knobs.output_tensor_type) return *s.knobs.output_tensor_type;
    if (f == MXFP4_MOE) return T::Q8_0;
    if (falcon || ne(shape, 0) % type_info(t).block_elements != 0) return T::Q8_0;
    if (is_ftype(s, {IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ2_S, IQ2_M, IQ1_M})) return T::Q5_K;
    return t != T::Q8_0 ? T::Q6_K : t;
  }
  if (f == MXFP4_MOE) {
    const bool expert_role = role == Role::FfnUp || role == Role::FfnGate || role == Role::FfnDown;
    return ne(shape, 2) > 1 && (arch != "bailingmoe3" || expert_role) ? T::MXFP4 : T::Q8_0;
  }
  if (role == Role::TokenEmbd) {
    if (s.knobs.token_embedding_type) return *s.knobs.token_embedding_type;
    if (is_ftype(s, {IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M})) return T::Q2_K;
    if (is_ftype(s, {IQ2_S, IQ2_M, IQ3_XXS})) return T::IQ3_S;
    if (is_ftype(s, {TQ1_0, TQ2_0, Q2_0})) return T::Q4_K;
    return t;
  }
  const bool s_or_m = is_ftype(s, {IQ2_S, IQ2_M});
  if (low) {
    if (is_attn_v_like(role)) {
      ++s.i_attention_wv;
      if (gqa >= 4 || n_expert >= 4) return T::Q4_K;
      return s_or_m ? T::IQ3_S : T::Q2_K;
    }
    if (n_expert == 8 && role == Role::AttnK) return T::Q4_K;
    if (role == Role::FfnDown) {
      const bool first = s.i_ffn_down < static_cast<int>(s.model.n_layer) / 8;
      ++s.i_ffn_down;
      return first ? (s_or_m ? T::IQ3_S : T::Q2_K) : t;
    }
    if (role == Role::AttnOutput) {
      if (n_expert == 8) return T::Q5_K;
      if (is_ftype(s, {IQ1_S, IQ1_M})) return T::IQ2_XXS;
      return s_or_m ? T::IQ3_S : t;
    }
    return t;
  }
  if (is_attn_v_like(role)) {
    TensorType n = t;
    if (f == Q2_K)
      n = gqa >= 4 ? T::Q4_K : T::Q3_K;
    else if (f == Q2_K_S && gqa >= 4)
      n = T::Q4_K;
    else if (f == IQ3_XXS)
      n = gqa >= 4 ? T::Q4_K : !s.has_imatrix ? T::IQ3_S : T::IQ3_XXS;
    else if (is_ftype(s, {IQ3_XS, IQ3_S}) && gqa >= 4)
      n = T::Q4_K;
    else if (f == IQ3_M)
      n = T::Q4_K;
    else if (f == Q3_K_M)
      n = s.i_attention_wv < 2 ? T::Q5_K : T::Q4_K;
    else if (f == Q3_K_L)
      n = T::Q5_K;
    else if (is_ftype(s, {IQ4_NL, IQ4_XS}) && gqa >= 4)
      n = T::Q5_K;
    else if (is_ftype(s, {Q4_K_M, Q5_K_M}) && use_more_bits(s.i_attention_wv, s.n_attention_wv))
      n = T::Q6_K;
    else if (f == Q4_K_S && s.i_attention_wv < 4)
      n = T::Q5_K;
    if (s.model.is_70b && (n == T::Q3_K || n == T::Q4_K)) n = T::Q5_K;
    if (n_expert == 8) n = T::Q8_0;
    ++s.i_attention_wv;
    return n;
  }
  if (role == Role::AttnK) {
    if (n_expert == 8) return T::Q8_0;
    if (f == IQ3_XS) return T::IQ3_XXS;
    return f == IQ3_XXS ? T::IQ2_S : t;
  }
  if (role == Role::AttnQ) {
    if (f == IQ3_XS) return T::IQ3_XXS;
    return f == IQ3_XXS ? T::IQ2_S : t;
  }
  if (role == Role::FfnDown) {
    SW_ASSIGN_OR_RETURN(const auto info, layer_info(s, s.i_ffn_down, name));
    const auto [i, n_layer] = info;
    ++s.i_ffn_down;
    if (f == Q2_K) return T::Q3_K;
    if (f == Q2_K_S) return i < n_layer / 8 ? T::Q4_K : t;
    if (f == IQ3_XXS && !s.has_imatrix) return i < n_layer / 8 ? T::Q4_K : T::Q3_K;
    if (f == Q3_K_M) return i < n_layer / 16 ? T::Q5_K : !falcon || use_more_bits(i, n_layer) ? T::Q4_K : T::Q3_K;
    if (f == IQ3_M && (i < n_layer / 8 || (n_expert == 8 && use_more_bits(i, n_layer)))) return T::Q4_K;
    if (f == Q3_K_L) return falcon ? T::Q4_K : T::Q5_K;
    if (f == Q4_K_M) {
      if (falcon) return i < n_layer / 16 ? T::Q6_K : use_more_bits(i, n_layer) ? T::Q5_K : T::Q4_K;
      return use_more_bits(i, n_layer) ? T::Q6_K : t;
    }
    if (i < n_layer / 8 && is_ftype(s, {IQ4_NL, IQ4_XS}) && !s.has_imatrix) return T::Q5_K;
    if (f == Q5_K_M && use_more_bits(i, n_layer)) return T::Q6_K;
    if (f == Q4_K_S && !falcon && i < n_layer / 8) return T::Q5_K;
    if (is_ftype(s, {Q4_0, Q5_0}) && s.has_imatrix && i < n_layer / 8) return f == Q4_0 ? T::Q4_1 : T::Q5_1;
    return t;
  }
  if (role == Role::AttnOutput) {
    if (falcon) return f == Q3_K_L ? T::Q4_K : t;
    if (n_expert == 8) return is_ftype(s, {Q2_K, IQ3_XS, IQ3_XXS, Q3_K_S, Q3_K_M, IQ4_NL, Q4_K_S, Q4_K_M, IQ3_S, IQ3_M, IQ4_XS}) ? T::Q5_K : t;
    if (f == Q2_K) return T::Q3_K;
    if (f == IQ3_XXS) return T::IQ3_S;
    if (f == Q3_K_M || f == IQ3_M) return T::Q4_K;
    return f == Q3_K_L ? T::Q5_K : t;
  }
  if (role == Role::AttnQkv) {
    if (is_ftype(s, {Q3_K_M, Q3_K_L, IQ3_M})) return T::Q4_K;
    if (f == Q4_K_M) return T::Q5_K;
    return f == Q5_K_M ? T::Q6_K : t;
  }
  if (role == Role::FfnGate || role == Role::FfnUp) {
    int& counter = role == Role::FfnGate ? s.i_ffn_gate : s.i_ffn_up;
    SW_ASSIGN_OR_RETURN(const auto info, layer_info(s, counter, name));
    const auto [i, n_layer] = info;
    ++counter;
    return f == IQ3_XS && i >= n_layer / 8 && i < 7 * n_layer / 8 ? T::IQ3_XXS : t;
  }
  return t;
}

bool requires_imatrix(std::string_view name, TensorType type, std::uint32_t ftype) {
  if (is_token_embd(name) || name == "output.weight") return false;
  switch (type) {
    case T::IQ3_XXS:
    case T::IQ2_XXS:
    case T::IQ2_XS:
    case T::IQ2_S:
    case T::IQ1_M:
    case T::IQ1_S: return true;
    case T::Q2_K: return ftype == Q2_K_S;
    default: return false;
  }
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// llama_tensor_get_type for a tensor it may quantize.
Result<TypeChoice> choose_one(State& s, const MixTensor& t, Role role) {
  TypeChoice c{t.type, {}, true, false};
  const std::string name(t.name);
  const std::string_view ft = s.ft.name;
  if (s.knobs.token_embedding_type && role == Role::TokenEmbd) {
    const bool named =
        name == "per_layer_token_embd.weight" && std::ranges::any_of(s.patterns, [&](const auto& p) { return std::regex_search(name, p.first); });
    if (!named) return TypeChoice{*s.knobs.token_embedding_type, "--token-embedding-type", true, false};
  }
  if (s.knobs.output_tensor_type && role == Role::Output) return TypeChoice{*s.knobs.output_tensor_type, "--output-tensor-type", true, false};
  c.type = s.ft.base;
  c.note = std::string(ft);
  if (type_info(s.ft.base).cls != TypeClass::Quantized) return c;
  bool manual = false;
  for (std::size_t k = 0; k < s.patterns.size(); ++k) {
    if (!std::regex_search(name, s.patterns[k].first)) continue;
    c.type = s.patterns[k].second;
    c.note = "--tensor-type " + s.knobs.tensor_types[k].first + "=" + std::string(type_name(c.type));
    manual = true;
    break;
  }
  if (!manual && s.knobs.pure) c.note += ", --pure";
  if (!manual && !s.knobs.pure) {
    SW_ASSIGN_OR_RETURN(const TensorType ruled, mix_rule(s, c.type, t.name, t.shape, role));
    if (ruled != c.type) c.note += "'s rule for this tensor";
    c.type = ruled;
  }
  const std::uint64_t cols = ne(t.shape, 0);
  SW_ASSIGN_OR_RETURN(const TensorType fitted, row_fallback(c.type, cols));
  if (fitted != c.type) c.note += ", rows of " + std::to_string(cols) + " are not a multiple of " + std::to_string(type_info(c.type).block_elements);
  c.type = fitted;
  return c;
}

}  // namespace

std::span<const FileType> file_types() noexcept { return kFileTypes; }

const FileType* find_file_type(std::string_view text) noexcept {
  for (const FileType& f : kFileTypes)
    if (iequals(f.name, text)) return &f;
  std::uint32_t number = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return nullptr;
  for (const FileType& f : kFileTypes)
    if (f.ftype == number) return &f;
  return nullptr;
}

bool is_llama_file_type(std::string_view name) noexcept { return find_file_type(name) != nullptr; }

Result<MetaEntry> parse_kv_override(std::string_view spec) {
  const auto bad = [&](std::string rule) { return Error(ErrorKind::InvalidArgument, "--override-kv " + std::string(spec) + ": " + std::move(rule)); };
  const std::size_t eq = spec.find('=');
  if (eq == std::string_view::npos || eq >= 128) return bad("expected KEY=TYPE:VALUE with a key under 128 bytes");
  std::string key(spec.substr(0, eq));
  const std::string_view rest = spec.substr(eq + 1);
  const auto value_after = [&](std::string_view tag) -> std::optional<std::string> {
    if (!rest.starts_with(tag)) return std::nullopt;
    return std::string(rest.substr(tag.size()));
  };
  if (auto v = value_after("int:")) {
    // atol's parse; llama.cpp writes the magnitude as UINT32 (its int overrides are UINT32 keys).
    const long long n = std::strtoll(v->c_str(), nullptr, 10);
    const unsigned long long magnitude = n < 0 ? 0ull - static_cast<unsigned long long>(n) : static_cast<unsigned long long>(n);
    return MetaEntry{std::move(key), MetaValue::u32(static_cast<std::uint32_t>(magnitude))};
  }
  if (auto v = value_after("float:")) return MetaEntry{std::move(key), MetaValue::f32(static_cast<float>(std::strtod(v->c_str(), nullptr)))};
  if (auto v = value_after("bool:")) {
    if (*v != "true" && *v != "false") return bad("a bool is true or false");
    return MetaEntry{std::move(key), MetaValue::boolean(*v == "true")};
  }
  if (auto v = value_after("str:")) {
    if (v->size() > 127) return bad("a string value holds at most 127 bytes");
    return MetaEntry{std::move(key), MetaValue::string(std::move(*v))};
  }
  return bad("the type is int, float, bool or str");
}

Result<TensorType> parse_ggml_type(std::string_view where, std::string_view name) {
  for (const TensorTypeInfo& info : tensor_type_table())
    if (iequals(info.name, name) && ggml_id(info.type)) return info.type;
  return Error(ErrorKind::InvalidArgument, std::string(where) + " " + std::string(name) + ": not a ggml type name (q8_0, q6_k, f16, ...)");
}

Result<std::pair<std::string, TensorType>> parse_tensor_type(std::string_view where, std::string_view spec) {
  const std::size_t eq = spec.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == spec.size())
    return Error(ErrorKind::InvalidArgument, std::string(where) + " " + std::string(spec) + ": expected PATTERN=TYPE");
  SW_ASSIGN_OR_RETURN(const TensorType type, parse_ggml_type(where, spec.substr(eq + 1)));
  return std::pair{std::string(spec.substr(0, eq)), type};
}

Result<std::vector<std::pair<std::string, TensorType>>> read_tensor_type_file(const std::string& path) {
  constexpr std::uint64_t kMaxBytes = 1 << 20;
  SW_ASSIGN_OR_RETURN(const std::string text, read_small_file(path, kMaxBytes));
  const std::string where = "--tensor-type-file " + path + ":";
  std::vector<std::pair<std::string, TensorType>> entries;
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  for (auto at = text.begin(); at != text.end();) {
    const auto begin = std::find_if_not(at, text.end(), space);
    at = std::find_if(begin, text.end(), space);
    if (begin == at) break;
    SW_ASSIGN_OR_RETURN(auto entry, parse_tensor_type(where, std::string_view(&*begin, static_cast<std::size_t>(at - begin))));
    entries.push_back(std::move(entry));
  }
  return entries;
}

Result<ModelFacts> model_facts(const Metadata& md) {
  ModelFacts m;
  const MetaValue* arch = md.find("general.architecture");
  if (!arch || arch->type != MetaType::STRING)
    return Error(ErrorKind::InvalidArgument, "llama-quantize's types need the model's general.architecture (a string)");
  m.arch = arch->str;
  const auto layers = integer(md, m.arch + ".block_count");
  if (!layers || *layers == 0 || *layers > 512)  // llama.cpp's LLAMA_MAX_LAYERS
    return Error(ErrorKind::InvalidArgument, "llama-quantize's types need " + m.arch + ".block_count, a layer count in [1, 512]");
  m.n_layer = static_cast<std::uint32_t>(*layers);
  m.n_head = clamp32(integer(md, m.arch + ".attention.head_count").value_or(0));
  m.n_head_kv = clamp32(integer(md, m.arch + ".attention.head_count_kv").value_or(m.n_head));
  m.n_expert = clamp32(integer(md, m.arch + ".expert_count").value_or(0));
  // LLM_TYPE_70B, the one model size the rules read, as each architecture's loader names it.
  m.is_70b = (m.arch == "llama" && m.n_layer == 80 && m.n_head != m.n_head_kv) ||
             ((m.arch == "qwen2" || m.arch == "deci" || m.arch == "olmo") && m.n_layer == 80) || (m.arch == "jais2" && m.n_layer == 68);
  return m;
}

Result<TensorType> row_fallback(TensorType type, std::uint64_t cols) {
  const std::uint32_t block = type_info(type).block_elements;
  if (cols % block == 0) return type;
  TensorType next = type;
  switch (type) {
    case T::IQ1_S:
    case T::IQ1_M:
    case T::IQ2_XXS:
    case T::IQ2_XS:
    case T::IQ2_S:
    case T::IQ3_XXS:
    case T::IQ3_S:
    case T::IQ4_XS: next = T::IQ4_NL; break;
    case T::Q2_0:
    case T::Q2_K:
    case T::Q3_K:
    case T::TQ1_0:
    case T::TQ2_0: next = T::Q4_0; break;
    case T::Q4_K: next = T::Q5_0; break;
    case T::Q5_K: next = T::Q5_1; break;
    case T::Q6_K: next = T::Q8_0; break;
    default:
      if (block > 32) return Error(ErrorKind::NotSupported, "llama.cpp has no fallback type for " + std::string(type_name(type)));
  }
  return cols % type_info(next).block_elements == 0 ? next : T::F16;
}

std::vector<std::size_t> llama_order(std::span<const MixTensor> tensors) {
  std::vector<std::size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::ranges::stable_sort(order, [&](std::size_t a, std::size_t b) {
    const long la = layer_of(tensors[a].name), lb = layer_of(tensors[b].name);
    return la != lb ? la < lb : tensors[a].name < tensors[b].name;
  });
  return order;
}

// A block met for the first time keeps its number below the first pruned one, is left out when
// pruned, and otherwise takes the next number after the last kept one.
PrunedNames prune_layers(std::span<const MixTensor> tensors, std::span<const int> prune) {
  PrunedNames out;
  out.names.reserve(tensors.size());
  for (const MixTensor& t : tensors) out.names.emplace_back(t.name);
  if (prune.empty()) return out;
  static const std::regex kBlock(R"(blk\.(\d+)\.)");
  std::map<int, std::optional<int>> mapped;  // input block -> output block; nullopt: pruned
  int next = 0;
  for (std::size_t i : llama_order(tensors)) {
    std::string& name = out.names[i];
    std::smatch m;
    if (!std::regex_search(name, m, kBlock)) continue;
    int block = 0;
    const std::string digits = m[1].str();
    if (std::from_chars(digits.data(), digits.data() + digits.size(), block).ec != std::errc()) continue;  // no int: no block
    auto [it, fresh] = mapped.try_emplace(block);
    if (fresh) {
      if (std::ranges::binary_search(prune, block))
        it->second = std::nullopt;
      else if (block < prune.front())
        it->second = block;
      else
        it->second = next;
      if (it->second) next = *it->second + 1;
    }
    const auto at = static_cast<std::size_t>(m.position(1)), length = static_cast<std::size_t>(m.length(1));
    if (it->second)
      name.replace(at, length, std::to_string(*it->second));
    else
      name.clear();
  }
  out.block_count = static_cast<std::uint32_t>(next);
  return out;
}

Result<std::vector<int>> parse_prune_layers(std::string_view list) {
  std::vector<int> layers;
  for (std::size_t begin = 0;;) {
    const std::size_t comma = std::min(list.find(',', begin), list.size());
    const std::string id(list.substr(begin, comma - begin));
    errno = 0;
    char* end = nullptr;
    const long v = std::strtol(id.c_str(), &end, 10);  // std::stoi's parse: spaces, a sign, digits, anything after
    if (end == id.c_str() || errno == ERANGE || v < 0 || v > INT_MAX)
      return Error(ErrorKind::InvalidArgument, "--prune-layers " + std::string(list) + ": invalid layer id '" + id + "'");
    layers.push_back(static_cast<int>(v));
    if (comma == list.size()) break;
    begin = comma + 1;
  }
  std::ranges::sort(layers);
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  return layers;
}

Result<std::vector<TypeChoice>> choose_types(const FileType& file_type, const QuantizeMix& knobs, const ModelFacts& model,
                                             std::span<const MixTensor> tensors, bool has_imatrix) {
  State s{file_type, knobs, model, has_imatrix, true, 0, 0, 0, 0, 0, {}};
  for (const auto& [pattern, type] : knobs.tensor_types) {
    try {
      s.patterns.emplace_back(std::regex(lower(pattern)), type);
    } catch (const std::regex_error& e) {
      return Error(ErrorKind::InvalidArgument, "--tensor-type " + pattern + ": not a regular expression (" + e.what() + ")");
    }
  }
  std::vector<Role> roles(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    roles[i] = role_of(tensors[i].name);
    if (is_attn_v_like(roles[i])) ++s.n_attention_wv;
    if (roles[i] == Role::Output) s.tied = false;
  }
  std::vector<TypeChoice> out(tensors.size(), TypeChoice{T::F32, {}, false, false});
  for (std::size_t i : llama_order(tensors)) {
    const MixTensor& t = tensors[i];
    if (!allows_quantization(knobs, model.arch, t.name, t.shape)) {
      out[i] = {t.type, {}, false, false};
      continue;
    }
    auto chosen = choose_one(s, t, roles[i]);
    if (!chosen.is_ok()) return error_of(chosen).with_tensor(std::string(t.name));
    out[i] = std::move(chosen).value();
    out[i].requires_imatrix = requires_imatrix(t.name, out[i].type, file_type.ftype);
  }
  return out;
}

}  // namespace safeweights::gguf
