// Hybrid attention (hf/linear_attention.h): config keys, the plan of each layer's attention half, and the
// tensors computed from the weights.
#include "hf/linear_attention.h"

#include <array>
#include <cmath>
#include <cstring>
#include <string>

#include "core/status_macros.h"
#include "hf/generated.h"
#include "hf/json_read.h"
#include "hf/mrope.h"
#include "hf/multimodal.h"
#include "hf/nextn.h"
#include "safeweights/quantize.h"

namespace safeweights::hf {
namespace {

// llama.cpp's converter writes these (Qwen3NextModel: the interval's default, and the rotary fraction's
// when config.json gives none).
constexpr std::uint32_t kDefaultFullAttentionInterval = 4;
constexpr double kDefaultPartialRotary = 0.25;
// Bounds on the linear attention's head counts and widths (real ones: 16-64 heads of 128), so that every
// size the plan derives from them (2 x key rows + 2 x value rows, ...) stays far inside 64 bits.
constexpr std::int64_t kMaxLinearDim = 1 << 20;
// The same for the gated full attention's query rows (2 x heads x head_dim).
constexpr std::uint64_t kMaxQueryRows = std::uint64_t{1} << 40;

// The per-layer kinds of layer_types, one per layer: true for linear attention.
Result<std::vector<bool>> read_layer_types(const JsonFile& file, std::uint32_t layers) {
  auto list = JsonFile::member(file.root(), "layer_types");
  if (!list) return file.bad("layer_types", "is missing (which layers are linear attention cannot be told)");
  if (list->type() != json::element_type::ARRAY || json::as_array(*list).size() != layers) {
    return file.bad("layer_types", "must be a list of num_hidden_layers (" + std::to_string(layers) + ") layer types");
  }
  std::vector<bool> out;
  for (auto v : json::as_array(*list)) {
    const std::string_view type = v.type() == json::element_type::STRING ? json::as_string(v) : std::string_view();
    if (type != "linear_attention" && type != "full_attention") {
      return file.bad("layer_types", "holds " + (type.empty() ? std::string("a non-string") : json::quoted(type)) +
                                         " (llama.cpp's hybrid layers are linear_attention or full_attention)");
    }
    out.push_back(type == "linear_attention");
  }
  return out;
}

// The rotary fraction: the rope object's partial_rotary_factor or the top level's (transformers 4).
Result<double> partial_rotary(const JsonFile& file, const ModelConfig& c) {
  SW_ASSIGN_OR_RETURN(auto top, file.positive(file.root(), "partial_rotary_factor"));
  if (top && c.rope.partial_rotary_factor && *top != *c.rope.partial_rotary_factor) {
    return file.bad("partial_rotary_factor", "differs from " + c.rope.source + ".partial_rotary_factor");
  }
  const double factor = c.rope.partial_rotary_factor ? *c.rope.partial_rotary_factor : top.value_or(kDefaultPartialRotary);
  if (factor > 1.0) return file.bad("partial_rotary_factor", "is above 1");
  return factor;
}

MetaValue bool_array(const std::vector<bool>& values) {
  std::vector<MetaValue> items;
  for (bool v : values) items.push_back(MetaValue::boolean(v));
  return MetaValue::array(MetaType::BOOL, std::move(items));
}

// The value heads in llama.cpp's tiled order: value head j of key head 0, 1, ..., then j + 1.
std::vector<std::uint64_t> tiled_heads(const LinearAttentionConfig& la) {
  const std::uint32_t per_key = la.tiled_values ? la.value_heads / la.key_heads : 1;
  std::vector<std::uint64_t> order;
  order.reserve(la.value_heads);
  for (std::uint32_t j = 0; j < per_key; ++j) {
    for (std::uint32_t g = 0; g < la.value_heads / per_key; ++g) order.push_back(std::uint64_t{g} * per_key + j);
  }
  return order;
}

// `t` as `source` with the value heads of dimension `dim` (each `head_size` wide, from `offset` on; what
// precedes them kept) in the tiled order, as pieces; as `source` itself when every key head has one.
void reorder_heads(ConvertTensor& t, const LinearAttentionConfig& la, const std::string& source, std::uint32_t dim, std::uint64_t offset,
                   std::uint64_t head_size) {
  if (la.value_heads == la.key_heads || !la.tiled_values) {
    t.source = source;
    return;
  }
  t.join_dim = dim;
  if (offset != 0) t.pieces.push_back({.source = source, .dim = dim, .begin = 0, .end = offset});
  for (std::uint64_t h : tiled_heads(la)) {
    const std::uint64_t begin = offset + h * head_size;
    t.pieces.push_back({.source = source, .dim = dim, .begin = begin, .end = begin + head_size});
  }
}

struct LayerPlan {
  const TensorFile& weights;
  std::vector<ConvertTensor>& out;

  // `hf` as `gguf`, checked to be of `shape`.
  Status add(const std::string& hf, const std::string& gguf, std::vector<std::uint64_t> shape) {
    SW_RETURN_IF_ERROR(expect_tensor(weights, hf, gguf, shape));
    out.push_back({.source = hf, .name = gguf});
    return Status::ok();
  }
  // The same with its value heads of dimension `dim` reordered (reorder_heads).
  Status add_reordered(const std::string& hf, const std::string& gguf, std::vector<std::uint64_t> shape, const LinearAttentionConfig& la,
                       std::uint32_t dim, std::uint64_t offset, std::uint64_t head_size) {
    SW_RETURN_IF_ERROR(expect_tensor(weights, hf, gguf, shape));
    ConvertTensor t{.source = {}, .name = gguf};
    reorder_heads(t, la, hf, dim, offset, head_size);
    out.push_back(std::move(t));
    return Status::ok();
  }
};

// Qwen3-Next's fused in_proj_qkvz: per key head, its query, key, value heads and their gates (z), which
// llama.cpp's converter regroups into attn_qkv (every query head, every key head, every value head) and
// attn_gate; in_proj_ba (per key head, its value heads' beta then alpha) is llama.cpp's ssm_ba as it is.
Status plan_fused_projections(const ModelConfig& c, LayerPlan& p, const std::string& hf, const std::string& gg) {
  const LinearAttentionConfig& la = *c.linear;
  const std::uint64_t hidden = c.hidden_size;
  const std::uint64_t kd = la.key_head_dim;
  const std::uint64_t group_v = std::uint64_t{la.value_heads / la.key_heads} * la.value_head_dim;  // a key head's values
  const std::uint64_t group = 2 * kd + 2 * group_v;
  const std::string qkvz = hf + "in_proj_qkvz.weight";
  SW_RETURN_IF_ERROR(expect_tensor(p.weights, qkvz, gg + "attn_qkv.weight", std::vector<std::uint64_t>{la.key_heads * group, hidden}));
  ConvertTensor qkv{.source = {}, .name = gg + "attn_qkv.weight"};
  ConvertTensor z{.source = {}, .name = gg + "attn_gate.weight"};
  const std::array<std::pair<std::uint64_t, std::uint64_t>, 3> parts = {{{0, kd}, {kd, kd}, {2 * kd, group_v}}};  // q, k, v
  for (const auto& [offset, size] : parts) {
    for (std::uint64_t g = 0; g < la.key_heads; ++g) {
      qkv.pieces.push_back({.source = qkvz, .dim = 0, .begin = g * group + offset, .end = g * group + offset + size});
    }
  }
  for (std::uint64_t g = 0; g < la.key_heads; ++g) {
    const std::uint64_t begin = g * group + 2 * kd + group_v;
    z.pieces.push_back({.source = qkvz, .dim = 0, .begin = begin, .end = begin + group_v});
  }
  p.out.push_back(std::move(qkv));
  p.out.push_back(std::move(z));
  return p.add(hf + "in_proj_ba.weight", gg + "ssm_ba.weight", {2 * std::uint64_t{la.value_heads}, hidden});
}

// Qwen3.5's projections, one tensor each, with the value heads reordered.
Status plan_split_projections(const ModelConfig& c, LayerPlan& p, const std::string& hf, const std::string& gg) {
  const LinearAttentionConfig& la = *c.linear;
  const std::uint64_t hidden = c.hidden_size;
  const std::uint64_t key_dim = std::uint64_t{la.key_heads} * la.key_head_dim;
  const std::uint64_t value_dim = std::uint64_t{la.value_heads} * la.value_head_dim;
  const std::uint64_t vh = la.value_heads;
  const std::uint64_t vd = la.value_head_dim;
  SW_RETURN_IF_ERROR(p.add_reordered(hf + "in_proj_qkv.weight", gg + "attn_qkv.weight", {2 * key_dim + value_dim, hidden}, la, 0, 2 * key_dim, vd));
  SW_RETURN_IF_ERROR(p.add_reordered(hf + "in_proj_z.weight", gg + "attn_gate.weight", {value_dim, hidden}, la, 0, 0, vd));
  SW_RETURN_IF_ERROR(p.add_reordered(hf + "in_proj_b.weight", gg + "ssm_beta.weight", {vh, hidden}, la, 0, 0, 1));
  return p.add_reordered(hf + "in_proj_a.weight", gg + "ssm_alpha.weight", {vh, hidden}, la, 0, 0, 1);
}

Status plan_linear(const ModelConfig& c, LayerPlan& p, const std::string& hf, const std::string& gg) {
  const LinearAttentionConfig& la = *c.linear;
  const std::uint64_t hidden = c.hidden_size;
  const std::uint64_t key_dim = std::uint64_t{la.key_heads} * la.key_head_dim;
  const std::uint64_t value_dim = std::uint64_t{la.value_heads} * la.value_head_dim;
  const std::uint64_t channels = 2 * key_dim + value_dim;
  const std::uint64_t vh = la.value_heads;
  const std::uint64_t vd = la.value_head_dim;
  SW_RETURN_IF_ERROR(la.tiled_values ? plan_split_projections(c, p, hf, gg) : plan_fused_projections(c, p, hf, gg));
  SW_RETURN_IF_ERROR(p.add_reordered(hf + "dt_bias", gg + "ssm_dt.bias", {vh}, la, 0, 0, 1));
  SW_RETURN_IF_ERROR(p.add_reordered(hf + "out_proj.weight", gg + "ssm_out.weight", {hidden, value_dim}, la, 1, 0, vd));
  SW_RETURN_IF_ERROR(p.add(hf + "norm.weight", gg + "ssm_norm.weight", {vd}));
  // Computed after planning (compute_linear_attention), from these sources.
  SW_RETURN_IF_ERROR(p.add(hf + "A_log", gg + "ssm_a", {vh}));
  SW_RETURN_IF_ERROR(p.add(hf + "conv1d.weight", gg + "ssm_conv1d.weight", {channels, 1, la.conv_kernel}));
  p.out.back().type = TensorType::F32;  // llama.cpp's converter keeps SSM_CONV1D F32
  return Status::ok();
}

// Gated full attention: q_proj holds, per head, the query then its output gate (2 * head_dim rows).
Status plan_full(const ModelConfig& c, LayerPlan& p, const std::string& hf, const std::string& gg) {
  const std::uint64_t hidden = c.hidden_size;
  const std::uint64_t head_dim = c.head_dim.value_or(c.hidden_size / c.num_attention_heads);
  const std::uint64_t q_rows = std::uint64_t{c.num_attention_heads} * head_dim;
  const std::uint64_t kv_rows = std::uint64_t{c.num_key_value_heads.value_or(c.num_attention_heads)} * head_dim;
  SW_RETURN_IF_ERROR(p.add(hf + "q_proj.weight", gg + "attn_q.weight", {2 * q_rows, hidden}));
  SW_RETURN_IF_ERROR(p.add(hf + "k_proj.weight", gg + "attn_k.weight", {kv_rows, hidden}));
  SW_RETURN_IF_ERROR(p.add(hf + "v_proj.weight", gg + "attn_v.weight", {kv_rows, hidden}));
  SW_RETURN_IF_ERROR(p.add(hf + "o_proj.weight", gg + "attn_output.weight", {hidden, q_rows}));
  SW_RETURN_IF_ERROR(p.add(hf + "q_norm.weight", gg + "attn_q_norm.weight", {head_dim}));
  return p.add(hf + "k_norm.weight", gg + "attn_k_norm.weight", {head_dim});
}

// `values`' rows (each `row` floats) of the value heads (`head_rows` rows each, from row `offset` on) in
// the tiled order.
std::vector<float> tiled_rows(const LinearAttentionConfig& la, const std::vector<float>& values, std::uint64_t row, std::uint64_t offset,
                              std::uint64_t head_rows) {
  std::vector<float> out(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(offset * row));
  for (std::uint64_t h : tiled_heads(la)) {
    const auto first = values.begin() + static_cast<std::ptrdiff_t>((offset + h * head_rows) * row);
    out.insert(out.end(), first, first + static_cast<std::ptrdiff_t>(head_rows * row));
  }
  return out;
}

}  // namespace

Status read_qwen35_linear_attention(const JsonFile& file, ModelConfig& c) {
  SW_RETURN_IF_ERROR(read_linear_attention(file, c));
  c.linear->tiled_values = true;
  return read_mrope_sections(file, c, c.linear->rope_dims, c.head_dim.value_or(c.hidden_size / c.num_attention_heads));
}

Status read_linear_attention(const JsonFile& file, ModelConfig& c) {
  const auto root = file.root();
  SW_ASSIGN_OR_RETURN(auto bias, file.boolean(root, "attention_bias"));
  if (bias == true) {
    return Error(ErrorKind::NotSupported,
                 "key `attention_bias` is true: llama.cpp's " + std::string(c.arch->name) + " architecture has no attention biases")
        .with_file(file.path());
  }
  LinearAttentionConfig la;
  SW_ASSIGN_OR_RETURN(la.key_heads, file.required_count(root, "linear_num_key_heads", kMaxLinearDim));
  SW_ASSIGN_OR_RETURN(la.value_heads, file.required_count(root, "linear_num_value_heads", kMaxLinearDim));
  SW_ASSIGN_OR_RETURN(la.key_head_dim, file.required_count(root, "linear_key_head_dim", kMaxLinearDim));
  SW_ASSIGN_OR_RETURN(la.value_head_dim, file.required_count(root, "linear_value_head_dim", kMaxLinearDim));
  SW_ASSIGN_OR_RETURN(la.conv_kernel, file.required_count(root, "linear_conv_kernel_dim", kMaxLinearDim));
  if (la.value_heads % la.key_heads != 0) {
    return file.bad("linear_num_value_heads", "must be a multiple of linear_num_key_heads (" + std::to_string(la.key_heads) + ")");
  }
  if (la.value_head_dim != la.key_head_dim) {
    return Error(ErrorKind::NotSupported, "key `linear_value_head_dim` differs from linear_key_head_dim: llama.cpp's " + std::string(c.arch->name) +
                                              " loader takes value heads as wide as key heads (ssm.state_size)")
        .with_file(file.path());
  }
  SW_ASSIGN_OR_RETURN(la.recurrent, read_layer_types(file, c.num_hidden_layers));
  SW_ASSIGN_OR_RETURN(auto interval, file.count(root, "full_attention_interval"));
  SW_ASSIGN_OR_RETURN(double partial, partial_rotary(file, c));
  const std::uint32_t head_dim = c.head_dim.value_or(c.hidden_size / c.num_attention_heads);
  if (std::uint64_t{head_dim} * c.num_attention_heads > kMaxQueryRows) return file.bad("head_dim", "times num_attention_heads is too large");
  const auto rope_dims = static_cast<std::uint32_t>(head_dim * partial);  // int(), as both transformers and llama.cpp
  if (rope_dims == 0 || rope_dims % 2 != 0)
    return file.bad("partial_rotary_factor", "gives " + std::to_string(rope_dims) + " rotary dimensions (not a positive even count)");
  const std::string a(c.arch->name);
  const std::uint64_t inner = std::uint64_t{la.value_head_dim} * la.value_heads;
  if (inner > UINT32_MAX) return file.bad("linear_value_head_dim", "times linear_num_value_heads overflows 32 bits");
  c.arch_kv.push_back({a + ".ssm.conv_kernel", MetaValue::u32(la.conv_kernel)});
  c.arch_kv.push_back({a + ".ssm.state_size", MetaValue::u32(la.key_head_dim)});
  c.arch_kv.push_back({a + ".ssm.group_count", MetaValue::u32(la.key_heads)});
  c.arch_kv.push_back({a + ".ssm.time_step_rank", MetaValue::u32(la.value_heads)});
  c.arch_kv.push_back({a + ".ssm.inner_size", MetaValue::u32(static_cast<std::uint32_t>(inner))});
  c.arch_kv.push_back({a + ".attention.recurrent_layers", bool_array(la.recurrent)});
  c.arch_kv.push_back({a + ".full_attention_interval", MetaValue::u32(interval.value_or(kDefaultFullAttentionInterval))});
  c.arch_kv.push_back({a + ".rope.dimension_count", MetaValue::u32(rope_dims)});
  la.rope_dims = rope_dims;
  c.linear = std::move(la);
  return Status::ok();
}

void pad_recurrent_layers(ModelConfig& c) {
  c.linear->recurrent.resize(c.num_hidden_layers + c.nextn_layers, false);
  const std::string key = std::string(c.arch->name) + ".attention.recurrent_layers";
  for (MetaEntry& kv : c.arch_kv) {
    if (kv.key == key) kv.value = bool_array(c.linear->recurrent);
  }
}

Status plan_hybrid_attention(const ModelConfig& c, const TextModelNames& names, std::uint32_t n, const TensorFile& weights,
                             std::vector<ConvertTensor>& out) {
  LayerPlan p{weights, out};
  const std::string layer = layer_prefix(c, names, n);  // a next-token layer's (Qwen's mtp.layers.i.) too: hf/nextn.h
  const std::string gg = "blk." + std::to_string(n) + ".";
  if (n < c.linear->recurrent.size() && c.linear->recurrent[n]) return plan_linear(c, p, layer + "linear_attn.", gg);
  return plan_full(c, p, layer + "self_attn.", gg);
}

Status compute_linear_attention(const ModelConfig& c, const TensorFile& weights, std::vector<ConvertTensor>& plan, WithGenerated& generated) {
  const LinearAttentionConfig& la = *c.linear;
  for (ConvertTensor& t : plan) {
    const bool a_log = t.source.ends_with(".linear_attn.A_log");
    const bool conv = t.source.ends_with(".linear_attn.conv1d.weight");
    if (!a_log && !conv) continue;
    const TensorEntry* e = weights.find(t.source);
    SW_ASSIGN_OR_RETURN(std::vector<float> values, read_floats(*e));
    if (a_log) {
      // transformers: -self.A_log.float().exp(). The float nearest the exact value (from a double exp):
      // torch's vectorized float exp, which llama.cpp's converter calls too, is only within 1 ulp of it.
      for (float& v : values) v = static_cast<float>(-std::exp(static_cast<double>(v)));
      values = tiled_rows(la, values, 1, 0, 1);
      t.source += " as -exp";
      generated.add_f32(t.source, {la.value_heads}, values);
    } else {
      // [channels, 1, kernel]: q and k channels, then the value heads' (value_head_dim channels each).
      const std::uint64_t kernel = e->shape[2];
      values = tiled_rows(la, values, kernel, 2 * std::uint64_t{la.key_heads} * la.key_head_dim, la.value_head_dim);
      t.source += " squeezed";
      generated.add_f32(t.source, {e->shape[0], kernel}, values);
    }
  }
  return Status::ok();
}

}  // namespace safeweights::hf
