// The native weights as one file, and their transformers view (original/weights.h).
#include "original/weights.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <unordered_set>

#include "core/status_macros.h"

namespace safeweights::original {
namespace {

// How a tensor of Meta's layout is split across the model-parallel shards.
enum class Split { Rows, Cols, Replicated, Embeddings };

// A Meta / Mistral tensor name and its transformers name, within a layer or at the top.
struct NameRule {
  std::string_view meta;
  std::string_view hf;
  Split split;
};

// fairscale's model parallelism as Meta's reference model uses it: ColumnParallelLinear split by rows
// (dim 0), RowParallelLinear by columns (dim 1), norms replicated.
constexpr std::array<NameRule, 9> kLayerRules = {{
    {"attention.wq.weight", "self_attn.q_proj.weight", Split::Rows},
    {"attention.wk.weight", "self_attn.k_proj.weight", Split::Rows},
    {"attention.wv.weight", "self_attn.v_proj.weight", Split::Rows},
    {"attention.wo.weight", "self_attn.o_proj.weight", Split::Cols},
    {"feed_forward.w1.weight", "mlp.gate_proj.weight", Split::Rows},
    {"feed_forward.w3.weight", "mlp.up_proj.weight", Split::Rows},
    {"feed_forward.w2.weight", "mlp.down_proj.weight", Split::Cols},
    {"attention_norm.weight", "input_layernorm.weight", Split::Replicated},
    {"ffn_norm.weight", "post_attention_layernorm.weight", Split::Replicated},
}};
constexpr std::array<NameRule, 3> kTopRules = {{
    {"tok_embeddings.weight", "model.embed_tokens.weight", Split::Embeddings},
    {"norm.weight", "model.norm.weight", Split::Replicated},
    {"output.weight", "lm_head.weight", Split::Rows},
}};
// Buffers of Meta's Llama 1/2 files that transformers computes itself.
constexpr std::string_view kDropped = "rope.freqs";

std::string shape_text(std::span<const std::uint64_t> shape) {
  std::string out;
  for (auto d : shape) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return "[" + out + "]";
}

// The layer number of "layers.N.rest" and rest; none for another name.
std::optional<std::pair<std::uint32_t, std::string_view>> layer_of(std::string_view name) {
  constexpr std::string_view kLayers = "layers.";
  if (!name.starts_with(kLayers)) return std::nullopt;
  name.remove_prefix(kLayers.size());
  std::uint32_t n = 0;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), n);
  if (ec != std::errc() || end == name.data() || *end != '.' || (name[0] == '0' && end - name.data() > 1)) return std::nullopt;
  return std::pair{n, name.substr(static_cast<std::size_t>(end - name.data()) + 1)};
}

// Every shard holds the tensors of shard 0, with the same types and shapes (Meta splits evenly).
Status check_shards_agree(const ShardSet& w) {
  const TensorFile& first = w.shard(0);
  for (std::size_t s = 1; s < w.shard_count(); ++s) {
    const TensorFile& other = w.shard(s);
    for (const TensorEntry& e : other.tensors())
      if (!first.find(e.name))
        return Error(ErrorKind::InvalidModelFolder, "tensor is not in " + first.name() + " (model-parallel shards hold the same tensors)")
            .with_file(other.name())
            .with_tensor(e.name);
    for (const TensorEntry& e : first.tensors()) {
      const TensorEntry* o = other.find(e.name);
      if (!o)
        return Error(ErrorKind::InvalidModelFolder, "tensor of " + first.name() + " is missing (model-parallel shards hold the same tensors)")
            .with_file(other.name())
            .with_tensor(e.name);
      if (o->type != e.type || !std::ranges::equal(o->shape, e.shape))
        return Error(ErrorKind::InvalidModelFolder, std::string(type_name(o->type)) + " " + shape_text(o->shape) + " where " + first.name() +
                                                        " has " + std::string(type_name(e.type)) + " " + shape_text(e.shape) +
                                                        " (model-parallel shards split evenly)")
            .with_file(other.name())
            .with_tensor(e.name);
    }
  }
  return Status::ok();
}

// A replicated tensor's copies agree byte for byte (they are small: norms).
Status check_replicas(const ShardSet& w, std::string_view name) {
  SW_ASSIGN_OR_RETURN(std::vector<std::byte> first, w.shard(0).find(name)->read_owned());
  for (std::size_t s = 1; s < w.shard_count(); ++s) {
    SW_ASSIGN_OR_RETURN(std::vector<std::byte> copy, w.shard(s).find(name)->read_owned());
    if (copy != first)
      return Error(ErrorKind::InvalidModelFolder,
                   "differs from its copy in " + w.shard(0).name() + " (a replicated tensor must agree in every shard)")
          .with_file(w.shard(s).name())
          .with_tensor(name);
  }
  return Status::ok();
}

struct Expected {
  const NameRule* rule;
  std::string meta;
  std::string hf;
  std::vector<std::uint64_t> shape;  // transformers' shape; dims.vocab unknown: rows taken from the tensor
  std::uint32_t unpermute_heads = 0;
};

// Every tensor the model needs, in transformers' order.
std::vector<Expected> expected_tensors(const Dimensions& d) {
  const std::uint64_t q = std::uint64_t{d.heads} * d.head_dim, kv = std::uint64_t{d.kv_heads} * d.head_dim, vocab = d.vocab.value_or(0);
  std::vector<Expected> out;
  out.push_back({&kTopRules[0], "tok_embeddings.weight", "model.embed_tokens.weight", {vocab, d.hidden}});
  for (std::uint32_t n = 0; n < d.layers; ++n) {
    const std::string meta = "layers." + std::to_string(n) + ".", hf = "model.layers." + std::to_string(n) + ".";
    const std::vector<std::uint64_t> shapes[] = {{q, d.hidden},
                                                 {kv, d.hidden},
                                                 {kv, d.hidden},
                                                 {d.hidden, q},
                                                 {d.intermediate, d.hidden},
                                                 {d.intermediate, d.hidden},
                                                 {d.hidden, d.intermediate},
                                                 {d.hidden},
                                                 {d.hidden}};
    for (std::size_t i = 0; i < kLayerRules.size(); ++i) {
      const NameRule& r = kLayerRules[i];
      const std::uint32_t heads = i == 0 ? d.heads : i == 1 ? d.kv_heads : 0;
      out.push_back({&r, meta + std::string(r.meta), hf + std::string(r.hf), shapes[i], heads});
    }
  }
  out.push_back({&kTopRules[1], "norm.weight", "model.norm.weight", {d.hidden}});
  if (!d.tied) out.push_back({&kTopRules[2], "output.weight", "lm_head.weight", {vocab, d.hidden}});
  return out;
}

// A tensor of the shards that no rule names (nor a layer beyond n_layers).
Status check_leftovers(const ShardSet& w, const std::vector<Expected>& expected, const Dimensions& d) {
  std::unordered_set<std::string_view> known;
  for (const Expected& e : expected) known.insert(e.meta);
  for (const TensorEntry& e : w.shard(0).tensors()) {
    if (known.contains(e.name) || e.name == kDropped) continue;
    if (auto layer = layer_of(e.name); layer && layer->first >= d.layers)
      return Error(ErrorKind::InvalidModelFolder,
                   "layer " + std::to_string(layer->first) + " is beyond params.json's n_layers (" + std::to_string(d.layers) + ")")
          .with_file(w.shard(0).name())
          .with_tensor(e.name);
    if (e.name == "output.weight")
      return Error(ErrorKind::InvalidModelFolder, "params.json says the embeddings are tied, but the output has weights of its own")
          .with_file(d.params_path)
          .with_tensor(e.name);
    return Error(ErrorKind::NotSupported, "tensor has no transformers name in Llama's layout").with_file(w.shard(0).name()).with_tensor(e.name);
  }
  return Status::ok();
}

// The shape of `e` once its shards are joined.
std::vector<std::uint64_t> joined_shape(const TensorEntry& e, Split split, std::uint32_t embeddings_dim, std::size_t shards) {
  std::vector<std::uint64_t> shape(e.shape.begin(), e.shape.end());
  const std::uint32_t dim = split == Split::Rows ? 0 : split == Split::Cols ? 1 : split == Split::Embeddings ? embeddings_dim : 99;
  if (dim < shape.size()) shape[dim] *= shards;
  return shape;
}

Result<ViewTensor> view_tensor(const ShardSet& w, const Expected& x, Dimensions& d) {
  const TensorEntry* e = w.shard(0).find(x.meta);
  if (!e) return Error(ErrorKind::TensorNotFound, "tensor " + x.meta + " is missing (transformers needs " + x.hf + ")").with_file(w.shard(0).name());
  const std::size_t shards = w.shard_count();
  std::vector<std::uint64_t> shape = joined_shape(*e, x.rule->split, d.embeddings_join_dim, shards);
  std::vector<std::uint64_t> want = x.shape;
  const bool vocab_rows = x.rule == &kTopRules[0] || x.rule == &kTopRules[2];
  if (vocab_rows && want[0] == 0 && !shape.empty()) want[0] = d.vocab.value_or(static_cast<std::uint32_t>(shape[0]));
  if (shape != want)
    return Error(ErrorKind::InvalidModelFolder,
                 "assembled from " + std::to_string(shards) + " shard(s) it is " + shape_text(shape) + "; params.json implies " + shape_text(want))
        .with_file(d.params_path)
        .with_tensor(x.meta);
  if (x.rule == &kTopRules[0] && !d.vocab) d.vocab = static_cast<std::uint32_t>(shape[0]);
  if (x.rule->split == Split::Replicated && shards > 1) SW_RETURN_IF_ERROR(check_replicas(w, x.meta));
  ViewTensor t;
  t.decl = {x.hf, e->type, shape};
  t.plan.name = x.hf;
  t.plan.permute_heads = x.unpermute_heads;
  t.plan.unpermute = x.unpermute_heads != 0;
  if (shards == 1 || x.rule->split == Split::Replicated) {
    t.plan.source = ShardSet::key(0, x.meta);
  } else {
    t.plan.join_dim = x.rule->split == Split::Rows ? 0 : x.rule->split == Split::Cols ? 1 : d.embeddings_join_dim;
    for (std::size_t s = 0; s < shards; ++s) t.plan.pieces.push_back({.source = ShardSet::key(s, x.meta)});
  }
  return t;
}

}  // namespace

std::string ShardSet::key(std::size_t shard, std::string_view name) {
  std::string digits = std::to_string(shard);
  if (digits.size() < 2) digits.insert(0, 2 - digits.size(), '0');
  return digits + "/" + std::string(name);
}

Result<std::unique_ptr<ShardSet>> ShardSet::open(const Folder& folder, const NativeWeights& native, const FormatOptions& read) {
  auto set = std::unique_ptr<ShardSet>(new ShardSet());
  set->name_ = folder.name();
  for (const std::string& file : native.files) {
    SW_ASSIGN_OR_RETURN(std::unique_ptr<TensorFile> shard, open_tensors(folder.path_of(file), {}, read));
    set->shards_.push_back(std::move(shard));
  }
  for (std::size_t s = 0; s < set->shards_.size(); ++s)
    for (const TensorEntry& e : set->shards_[s]->tensors()) {
      TensorEntry copy = e;
      copy.name = set->names_.emplace_back(key(s, e.name));
      set->borrow(copy);
    }
  return set;
}

void ShardSet::borrow(const TensorEntry& entry) {
  index_.emplace(entry.name, entries_.size());
  entries_.push_back(entry);
}

const TensorEntry* ShardSet::find(std::string_view name) const noexcept {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

Result<std::vector<ViewTensor>> transformers_view(const ShardSet& weights, Dimensions& dims) {
  SW_RETURN_IF_ERROR(check_shards_agree(weights));
  // More shards than key/value heads, the query heads split evenly: 405B's mp16, which replicates them.
  // Any other count that does not divide the heads is refused by the shapes, below.
  if (weights.shard_count() > dims.kv_heads && dims.heads % weights.shard_count() == 0)
    return Error(ErrorKind::NotSupported, std::to_string(weights.shard_count()) + " model-parallel shards for " + std::to_string(dims.kv_heads) +
                                              " key/value heads (the shards would replicate them, as 405B's mp16 does): convert the mp8 download")
        .with_file(weights.name());
  const std::vector<Expected> expected = expected_tensors(dims);
  SW_RETURN_IF_ERROR(check_leftovers(weights, expected, dims));
  std::vector<ViewTensor> out;
  out.reserve(expected.size());
  for (const Expected& x : expected) {
    SW_ASSIGN_OR_RETURN(ViewTensor t, view_tensor(weights, x, dims));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace safeweights::original
