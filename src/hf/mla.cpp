// Multi-head latent attention (hf/mla.h): config keys, the layer's plan, and the transposed key heads.
#include "hf/mla.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "hf/json_read.h"
#include "safeweights/source.h"

namespace safeweights::hf {
namespace {

Error refused(const JsonFile& file, std::string_view key, const std::string& why) {
  return Error(ErrorKind::NotSupported, "key " + json::quoted(key) + " " + why).with_file(file.path());
}

// kv_b_proj [heads * (nope + v), rank] read as llama.cpp's attn_k_b [heads, rank, nope]: each head's
// first `nope` rows, transposed. Bytes are computed as they are read, one head's rows at a time.
class TransposedKeyHeads final : public ByteSource {
 public:
  TransposedKeyHeads(const TensorEntry& kv_b, std::uint64_t heads, std::uint64_t nope, std::uint64_t v, std::uint64_t element_bytes)
      : source_(kv_b.source),
        base_(kv_b.offset),
        rank_(kv_b.shape[1]),
        nope_(nope),
        head_rows_(nope + v),
        element_(element_bytes),
        size_(heads * rank_ * nope * element_bytes),
        name_(std::string("<").append(kv_b.name).append(", key heads transposed>")) {}

  const std::string& name() const noexcept override { return name_; }
  std::uint64_t size() const noexcept override { return size_; }

  Status read_at(std::uint64_t offset, std::span<std::byte> dst) const override {
    if (offset > size_ || dst.size() > size_ - offset) {
      return Error(ErrorKind::OutOfRange, "read past the end of " + name_);
    }
    const std::uint64_t head_bytes = rank_ * nope_ * element_;
    std::vector<std::byte> rows(head_bytes);  // one head's key rows, [nope, rank]
    std::uint64_t done = 0;
    while (done < dst.size()) {
      const std::uint64_t at = offset + done;
      const std::uint64_t head = at / head_bytes;
      SW_RETURN_IF_ERROR(source_->read_at(base_ + head * head_rows_ * rank_ * element_, rows));
      const std::uint64_t end = std::min<std::uint64_t>(dst.size(), (head + 1) * head_bytes - offset);
      for (; done < end; ++done) {
        const std::uint64_t in_head = offset + done - head * head_bytes;
        const std::uint64_t element = in_head / element_;  // [rank, nope] index
        const std::uint64_t r = element / nope_;
        const std::uint64_t j = element % nope_;
        dst[done] = rows[(j * rank_ + r) * element_ + in_head % element_];
      }
    }
    return Status::ok();
  }

 private:
  const ByteSource* source_;
  std::uint64_t base_;
  std::uint64_t rank_;
  std::uint64_t nope_;
  std::uint64_t head_rows_;
  std::uint64_t element_;
  std::uint64_t size_;
  std::string name_;
};

}  // namespace

Status read_mla(const JsonFile& file, ModelConfig& c) {
  const auto root = file.root();
  const std::string a(c.arch->name);
  MlaConfig m;
  // q_lora_rank null: the query is one q_proj (DeepSeek-V2-Lite).
  SW_ASSIGN_OR_RETURN(auto q_rank, file.count(root, "q_lora_rank"));
  m.q_lora_rank = q_rank.value_or(0);
  SW_ASSIGN_OR_RETURN(m.kv_lora_rank, file.required_count(root, "kv_lora_rank"));
  SW_ASSIGN_OR_RETURN(m.qk_nope_head_dim, file.required_count(root, "qk_nope_head_dim"));
  SW_ASSIGN_OR_RETURN(m.qk_rope_head_dim, file.required_count(root, "qk_rope_head_dim"));
  SW_ASSIGN_OR_RETURN(m.v_head_dim, file.required_count(root, "v_head_dim"));
  if (m.qk_rope_head_dim % 2 != 0) return file.bad("qk_rope_head_dim", "is odd: rotary embeddings need pairs");
  SW_ASSIGN_OR_RETURN(auto qk_head_dim, file.count(root, "qk_head_dim"));
  if (qk_head_dim && *qk_head_dim != std::uint64_t{m.qk_nope_head_dim} + m.qk_rope_head_dim) {
    return file.bad("qk_head_dim", "is not qk_nope_head_dim + qk_rope_head_dim");
  }
  // transformers 5 saves head_dim as qk_rope_head_dim; llama.cpp's head sizes are the keys below.
  if (c.head_dim && *c.head_dim != m.qk_rope_head_dim) return file.bad("head_dim", "is not qk_rope_head_dim");
  // llama.cpp's converter splits kv_b_proj by num_key_value_heads; transformers' MLA has one kv_b head per
  // query head whatever the key says.
  if (c.num_key_value_heads.value_or(c.num_attention_heads) != c.num_attention_heads) {
    return refused(file, "num_key_value_heads", "differs from num_attention_heads: llama.cpp's converter splits kv_b_proj by it");
  }
  // Interleaved rotary pairs are llama.cpp's deepseek2 rope; transformers' other layout is NEOX's.
  SW_ASSIGN_OR_RETURN(auto interleave, file.boolean(root, "rope_interleave"));
  if (interleave == false) return refused(file, "rope_interleave", "is false: llama.cpp's " + a + " rotates interleaved pairs");
  c.head_dim.reset();
  c.num_key_value_heads = 1;  // MLA as one shared key/value head (llama.cpp's converter writes 1)
  auto u32 = [&](std::string key, std::uint32_t v) { c.arch_kv.push_back({a + "." + key, MetaValue::u32(v)}); };
  if (m.q_lora_rank) u32("attention.q_lora_rank", m.q_lora_rank);
  u32("attention.kv_lora_rank", m.kv_lora_rank);
  u32("attention.key_length", m.kv_lora_rank + m.qk_rope_head_dim);
  u32("attention.value_length", m.kv_lora_rank);
  u32("attention.key_length_mla", m.qk_nope_head_dim + m.qk_rope_head_dim);
  u32("attention.value_length_mla", m.v_head_dim);
  u32("rope.dimension_count", m.qk_rope_head_dim);
  c.mla = m;
  return Status::ok();
}

Status plan_mla_attention(const ModelConfig& c, const TensorFile& weights, WithGenerated& generated, const std::string& hf, const std::string& gg,
                          std::vector<ConvertTensor>& out) {
  const MlaConfig& m = *c.mla;
  const std::uint64_t hidden = c.hidden_size;
  const std::uint64_t heads = c.num_attention_heads;
  const std::uint64_t q_rows = heads * (std::uint64_t{m.qk_nope_head_dim} + m.qk_rope_head_dim);
  const std::uint64_t head_rows = std::uint64_t{m.qk_nope_head_dim} + m.v_head_dim;
  auto add = [&](std::string_view from, std::string_view to, std::vector<std::uint64_t> shape) {
    std::string source = hf + "self_attn." + std::string(from);
    std::string name = gg + std::string(to);
    SW_RETURN_IF_ERROR(expect_tensor(weights, source, name, shape));
    out.push_back({.source = std::move(source), .name = std::move(name)});
    return Status::ok();
  };
  if (m.q_lora_rank) {
    SW_RETURN_IF_ERROR(add("q_a_proj.weight", "attn_q_a.weight", {m.q_lora_rank, hidden}));
    SW_RETURN_IF_ERROR(add("q_a_layernorm.weight", "attn_q_a_norm.weight", {m.q_lora_rank}));
    SW_RETURN_IF_ERROR(add("q_b_proj.weight", "attn_q_b.weight", {q_rows, m.q_lora_rank}));
  } else {
    SW_RETURN_IF_ERROR(add("q_proj.weight", "attn_q.weight", {q_rows, hidden}));
  }
  SW_RETURN_IF_ERROR(add("kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight", {std::uint64_t{m.kv_lora_rank} + m.qk_rope_head_dim, hidden}));
  SW_RETURN_IF_ERROR(add("kv_a_layernorm.weight", "attn_kv_a_norm.weight", {m.kv_lora_rank}));
  SW_RETURN_IF_ERROR(add("o_proj.weight", "attn_output.weight", {hidden, heads * m.v_head_dim}));

  const std::string kv_b = hf + "self_attn.kv_b_proj.weight";
  const std::vector<std::uint64_t> kv_b_shape = {heads * head_rows, m.kv_lora_rank};
  SW_RETURN_IF_ERROR(expect_tensor(weights, kv_b, gg + "attn_k_b.weight", kv_b_shape));
  const TensorEntry& entry = *weights.find(kv_b);
  const TensorTypeInfo& info = type_info(entry.type);
  if (info.is_block() || info.bits % 8 != 0) {
    return Error(ErrorKind::NotSupported, "type " + std::string(info.name) + " cannot be split into llama.cpp's attn_k_b and attn_v_b")
        .with_file(weights.name())
        .with_tensor(kv_b);
  }
  // attn_k_b: [heads, rank, nope], each head's key rows transposed (computed as read).
  std::string k_b = kv_b + " (key heads transposed)";
  generated.add_source(k_b, entry.type, {heads, m.kv_lora_rank, m.qk_nope_head_dim},
                       std::make_shared<TransposedKeyHeads>(entry, heads, m.qk_nope_head_dim, m.v_head_dim, info.bits / 8));
  out.push_back({.source = std::move(k_b), .name = gg + "attn_k_b.weight"});
  // attn_v_b: [heads, v, rank], each head's value rows as they are, stacked.
  ConvertTensor v_b{.source = {}, .name = gg + "attn_v_b.weight", .stack = true};
  for (std::uint64_t h = 0; h < heads; ++h) {
    v_b.pieces.push_back({.source = kv_b, .dim = 0, .begin = h * head_rows + m.qk_nope_head_dim, .end = (h + 1) * head_rows});
  }
  out.push_back(std::move(v_b));
  return Status::ok();
}

}  // namespace safeweights::hf
