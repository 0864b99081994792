// Format conversion (include/safeweights/convert.h): TensorFile -> per-tensor transform -> TensorSink.
//
// Each tensor gets an output type from the policy (choose_type), then is written by one of two paths:
// a tensor that keeps its type and order is copied as it is (copy_tensor: in the kernel between local
// files; no element is touched, so the bytes are the input's); any other goes through pieces of whole
// rows, gathered in the permuted order when asked, dequantized to F32 and quantized to the output type
// on the shared pool. Pieces are pipelined: piece k is converted by every thread while k - 1 is
// written and k + 1 read, so at most three pieces of one tensor are in memory at a time (two buffers
// each way), and each tensor's input pages are released once written. A piece's bytes depend only on
// its elements, never on the threads.
#include "safeweights/convert.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <thread>
#include <unordered_map>

#include "convert/pieces.h"
#include "core/parallel.h"
#include "core/status_macros.h"
#include "safeweights/cancel.h"
#include "safeweights/quantize.h"
#include "safeweights/safetensors_writer.h"

namespace safeweights {
namespace {

using convert_detail::bytes_of;
using convert_detail::read_elements;

constexpr std::uint64_t kPieceElements = 4u << 20;  // elements per piece of a converted tensor
constexpr std::uint64_t kTaskElements = 64u << 10;  // elements per pool task within a piece

// The safetensors __metadata__ of a GGUF file is kept under this key prefix (docs/GGUF.md).
constexpr std::string_view kMetadataPrefix = "safetensors.";

enum class OutFormat { Safetensors, Gguf };

Result<OutFormat> output_format(const std::string& path) {
  if (path.ends_with(".gguf")) return OutFormat::Gguf;
  if (path.ends_with(".safetensors")) return OutFormat::Safetensors;
  return Error(ErrorKind::InvalidArgument, "the output's extension picks its format: .gguf or .safetensors").with_file(path);
}

bool is_number_kept(TensorType t) {
  const TypeClass c = type_info(t).cls;
  return c == TypeClass::Bool || c == TypeClass::Unsigned || c == TypeClass::Signed || c == TypeClass::Complex || t == TensorType::F64;
}

std::uint32_t block_of(TensorType t) { return type_info(t).block_elements; }

// llama.cpp's fallback when a row is not a whole number of `t`'s blocks (llama-quant.cpp): the
// 2-3 bit K-quants go to IQ4_NL (Q4_0 when no IQ4_NL quantizer is built), Q4_K to Q5_0, Q5_K to
// Q5_1, Q6_K to Q8_0; when that does not fit either, or for the 32-element types, F16.
TensorType fallback_for(TensorType t, std::uint64_t cols) {
  TensorType next = TensorType::F16;
  switch (t) {
    case TensorType::Q2_K:
    case TensorType::Q3_K: next = can_quantize(TensorType::IQ4_NL) ? TensorType::IQ4_NL : TensorType::Q4_0; break;
    case TensorType::Q4_K: next = TensorType::Q5_0; break;
    case TensorType::Q5_K: next = TensorType::Q5_1; break;
    case TensorType::Q6_K: next = TensorType::Q8_0; break;
    default: break;
  }
  return cols % block_of(next) == 0 ? next : TensorType::F16;
}

struct Job {
  const TensorEntry* entry = nullptr;
  std::string name;
  std::uint32_t permute_heads = 0;
  TensorType to{};
  std::string note;
};

// The output type of one tensor, and why it differs from the requested one.
Status choose_type(Job& job, const ConvertOptions& options, OutFormat out) {
  const TensorEntry& e = *job.entry;
  const TensorType from = e.type;
  job.to = from;
  if (!options.type) {
    if (out == OutFormat::Safetensors && type_info(from).is_block()) {
      job.to = TensorType::F32;
      job.note = "safetensors has no " + std::string(type_name(from)) + ": dequantized";
    }
  } else if (const TensorType want = *options.type; is_number_kept(from)) {
    if (want != from) job.note = std::string(type_name(from)) + " is kept";
  } else if (e.shape.size() <= 1) {
    job.to = TensorType::F32;
    if (want != TensorType::F32) job.note = e.shape.empty() ? "scalar" : "1-D";
  } else if (want == from) {
  } else if (const std::uint64_t cols = e.shape.back(); cols % block_of(want) != 0) {
    job.to = fallback_for(want, cols);
    job.note = "rows of " + std::to_string(cols) + " are not a multiple of " + std::to_string(block_of(want));
  } else {
    job.to = want;
  }
  if (out == OutFormat::Gguf && !gguf::ggml_id(job.to))
    return Error(ErrorKind::NotSupported, "GGUF has no " + std::string(type_name(job.to)) + " type").with_tensor(e.name);
  if (out == OutFormat::Safetensors && type_info(job.to).is_block())
    return Error(ErrorKind::InvalidArgument,
                 "safetensors cannot hold " + std::string(type_name(job.to)) + " (write a .gguf, or --type f32, f16 or bf16)")
        .with_tensor(e.name);
  if (job.to != from && !can_dequantize(from))
    return Error(ErrorKind::NotSupported, "converting from " + std::string(type_name(from)) + " is not supported").with_tensor(e.name);
  if (job.to != from && !can_quantize(job.to))
    return Error(ErrorKind::NotSupported, "converting to " + std::string(type_name(job.to)) + " is not supported").with_tensor(e.name);
  return Status::ok();
}

Result<std::vector<Job>> plan_jobs(const TensorFile& input, const ConvertOptions& options, OutFormat out) {
  std::vector<Job> jobs;
  if (options.tensors.empty()) {
    for (const TensorEntry& e : input.tensors()) jobs.push_back({&e, std::string(e.name), 0, {}, {}});
  } else {
    for (const ConvertTensor& t : options.tensors) {
      SW_ASSIGN_OR_RETURN(const TensorEntry* e, input.tensor(t.source));
      jobs.push_back({e, t.name, t.permute_heads, {}, {}});
    }
  }
  for (Job& job : jobs) SW_RETURN_IF_ERROR(choose_type(job, options, out));
  return jobs;
}

// ---- metadata ----------------------------------------------------------------------------------

void set_kv(std::vector<gguf::KeyValue>& kv, gguf::KeyValue entry) {
  auto it = std::ranges::find(kv, entry.key, &gguf::KeyValue::key);
  if (it != kv.end())
    it->value = std::move(entry.value);
  else
    kv.push_back(std::move(entry));
}

// llama.cpp's split.* keys describe the files a model was written as, not the model: a split input's
// keys are never carried (a split output gets its own from the split writer).
bool is_split_key(std::string_view key) { return key == gguf::kSplitNoKey || key == gguf::kSplitCountKey || key == gguf::kSplitTensorsCountKey; }

// A split GGUF output: OUT.gguf becomes OUT-00001-of-0000N.gguf, ...
Result<std::unique_ptr<TensorSink>> open_split_sink(const std::string& path, std::vector<gguf::KeyValue> kv, std::vector<TensorDecl> decls,
                                                    const gguf::WriterOptions& wo, const ConvertOptions& options, std::vector<std::string>& files) {
  const std::string prefix = path.substr(0, path.size() - std::string_view(".gguf").size());
  SW_ASSIGN_OR_RETURN(auto w, gguf::SplitWriter::create(prefix, std::move(kv), std::move(decls), options.split, wo));
  files = w->paths();
  return std::unique_ptr<TensorSink>(std::move(w));
}

// A GGUF input's pairs (general.alignment becomes the writer's option; general.file_type follows
// --type), or another input's __metadata__ as STRING pairs under "safetensors."; then the caller's.
std::vector<gguf::KeyValue> gguf_metadata(const TensorFile& input, const ConvertOptions& options, std::uint32_t& alignment) {
  std::vector<gguf::KeyValue> kv;
  if (!options.carry_metadata) {
  } else if (const auto* g = dynamic_cast<const gguf::GgufFile*>(&input)) {
    alignment = g->alignment();
    for (const gguf::KeyValue& e : g->kv()) {
      if (e.key == "general.alignment" || is_split_key(e.key)) continue;
      kv.push_back(e);
    }
    const auto ftype = options.type ? llama_file_type(*options.type) : std::nullopt;
    if (ftype && g->find_kv("general.file_type")) set_kv(kv, {"general.file_type", gguf::Value::u32(*ftype)});
  } else if (const MetadataEntries* md = input.metadata()) {
    for (const auto& [k, v] : *md) kv.push_back({std::string(kMetadataPrefix) + k, gguf::Value::string(v)});
  }
  for (const gguf::KeyValue& e : options.gguf_kv) set_kv(kv, e);
  return kv;
}

// A safetensors input's __metadata__; from GGUF, the STRING pairs under "safetensors." (what
// gguf_metadata wrote), the rest of a GGUF file's pairs having no safetensors form.
safetensors::Metadata safetensors_metadata(const TensorFile& input, const ConvertOptions& options) {
  if (!options.carry_metadata) return std::nullopt;
  if (const auto* g = dynamic_cast<const gguf::GgufFile*>(&input)) {
    MetadataEntries md;
    for (const gguf::KeyValue& e : g->kv())
      if (e.key.starts_with(kMetadataPrefix) && e.value.type == gguf::ValueType::STRING)
        md.emplace_back(e.key.substr(kMetadataPrefix.size()), e.value.str);
    if (md.empty()) return std::nullopt;
    return md;
  }
  if (const MetadataEntries* md = input.metadata()) return *md;
  return std::nullopt;
}

Result<std::unique_ptr<TensorSink>> open_sink(const TensorFile& input, const std::string& path, OutFormat out, const std::vector<Job>& jobs,
                                              const ConvertOptions& options, std::vector<std::string>& files) {
  std::vector<TensorDecl> decls;
  decls.reserve(jobs.size());
  for (const Job& j : jobs) decls.push_back({j.name, j.to, std::vector<std::uint64_t>(j.entry->shape.begin(), j.entry->shape.end())});
  if (out == OutFormat::Gguf) {
    gguf::WriterOptions wo;
    wo.durable = options.durable;
    std::vector<gguf::KeyValue> kv = gguf_metadata(input, options, wo.alignment);
    if (options.split.enabled()) return open_split_sink(path, std::move(kv), std::move(decls), wo, options, files);
    return gguf::create(path, std::move(kv), std::move(decls), wo);
  }
  safetensors::WriteOptions wo;
  wo.durable = options.durable;
  return safetensors::create(path, std::move(decls), safetensors_metadata(input, options), wo);
}

// ---- the transform -----------------------------------------------------------------------------

// Rows (units along the outermost dimension) reordered as llama.cpp's permute(): within each of
// `heads` heads of D rows, row h*D + s*D/2 + i moves to h*D + 2*i + s.
struct Permutation {
  std::uint64_t heads = 0, rows = 0;
  std::uint64_t source_row(std::uint64_t out_row) const {
    const std::uint64_t d = rows / heads, half = d / 2;
    const std::uint64_t h = out_row / d, o = out_row % d;
    return h * d + (o % 2) * half + o / 2;
  }
};

// Buffers reused from tensor to tensor.
struct Scratch {
  std::vector<std::byte> in[2];  // two pieces' input when it is read (or gathered), not viewed
  // A piece's output: float-aligned (F32 is decoded into it directly).
  struct Output {
    std::vector<float> words;
    std::size_t bytes = 0;
    std::size_t size() const { return bytes; }
    void resize(std::uint64_t n) {
      words.resize(static_cast<std::size_t>((n + 3) / 4));
      bytes = static_cast<std::size_t>(n);
    }
    std::byte* data() { return reinterpret_cast<std::byte*>(words.data()); }
  } out[2];
};

class TensorConverter {
 public:
  TensorConverter(const Job& job, TensorSink& sink, unsigned threads, Scratch& scratch)
      : job_(job), e_(*job.entry), sink_(sink), threads_(threads), scratch_(scratch) {}

  Status run() {
    if (e_.type == job_.to && job_.permute_heads == 0) return copy();
    SW_RETURN_IF_ERROR(plan());
    return convert_pieces();
  }

 private:
  // The bytes as they are: in the kernel between local files (copy_tensor).
  Status copy() { return copy_tensor(e_, job_.name, sink_); }

  Error invalid(std::string message) const { return Error(ErrorKind::InvalidArgument, std::move(message)).with_tensor(job_.name); }

  // The granularity of pieces: whole blocks of both types, whole permuted rows.
  Status plan() {
    elements_ = e_.num_elements();
    const std::uint64_t base = std::lcm<std::uint64_t>(block_of(e_.type), block_of(job_.to));
    std::uint64_t grain = base;
    if (job_.permute_heads != 0) {
      if (e_.shape.empty()) return invalid("a scalar has no rows to permute");
      perm_ = {job_.permute_heads, e_.shape[0]};
      if (perm_.rows % (2 * perm_.heads) != 0)
        return invalid(std::to_string(perm_.rows) + " rows cannot be split into " + std::to_string(perm_.heads) + " heads of row pairs");
      grain = perm_.rows == 0 ? base : elements_ / perm_.rows;
      if (grain == 0 || grain % base != 0) return invalid("rows of a block-quantized 1-D tensor cannot be permuted");
      SW_ASSIGN_OR_RETURN(row_bytes_, bytes_of(e_.type, grain));
    }
    unit_ = grain;
    piece_ = std::max(grain, kPieceElements / grain * grain);
    task_ = std::max(base, kTaskElements / base * base);
    return Status::ok();
  }

  // The input bytes of elements [e0, e1): a view of a mapping, or read (gathered when permuting) into
  // `in`, which the calling thread has already sized (a pool worker that reads here never allocates).
  Result<std::span<const std::byte>> input(std::uint64_t e0, std::uint64_t e1, std::vector<std::byte>& in) const {
    if (job_.permute_heads == 0) return read_elements(e_, e0, e1, in);
    SW_ASSIGN_OR_RETURN(const std::uint64_t length, bytes_of(e_.type, e1 - e0));
    in.resize(static_cast<std::size_t>(length));
    std::span<std::byte> dst(in);
    for (std::uint64_t r = e0 / unit_, k = 0; r < e1 / unit_; ++r, ++k) {
      const std::uint64_t from = e_.offset + perm_.source_row(r) * row_bytes_;
      SW_RETURN_IF_ERROR(e_.source->read_at(from, dst.subspan(k * row_bytes_, row_bytes_)));
    }
    return std::span<const std::byte>(dst);
  }

  // One piece in flight: its elements, its input and (once converted) its output bytes.
  struct Piece {
    std::uint64_t e0 = 0, e1 = 0;
    std::span<const std::byte> src, out;
  };

  // The pipeline: round k converts piece k on every thread while one thread writes piece k - 1 and
  // another reads piece k + 1 (the I/O tasks come first in the loop, so they start at once). Pieces
  // alternate between the two buffers of each side; writes stay in order, one round apart.
  Status convert_pieces() {
    const std::uint64_t count = (elements_ + piece_ - 1) / piece_;
    SW_RETURN_IF_ERROR(size_buffers());
    Piece pieces[2];
    auto read = [&](std::uint64_t k) -> Status {
      Piece& p = pieces[k % 2];
      p.e0 = k * piece_;
      p.e1 = std::min(elements_, p.e0 + piece_);
      SW_ASSIGN_OR_RETURN(p.src, input(p.e0, p.e1, scratch_.in[k % 2]));
      return Status::ok();
    };
    auto write = [&](std::uint64_t k) { return sink_.write_chunk(job_.name, pieces[k % 2].out); };
    if (count > 0) SW_RETURN_IF_ERROR(read(0));
    for (std::uint64_t k = 0; k < count; ++k) {
      SW_RETURN_IF_ERROR(check_cancelled());
      Piece& p = pieces[k % 2];
      const bool writes = k > 0, reads = k + 1 < count;
      const std::size_t io = (writes ? 1 : 0) + (reads ? 1 : 0);
      const std::uint64_t n = p.e1 - p.e0;
      SW_ASSIGN_OR_RETURN(const std::uint64_t out_len, bytes_of(job_.to, n));
      const auto tasks = static_cast<std::size_t>((n + task_ - 1) / task_);
      SW_RETURN_IF_ERROR(parallel_for(io + tasks, threads_, [&](std::size_t t) -> Status {
        if (t < io) return writes && t == 0 ? write(k - 1) : read(k + 1);
        return convert_task(p, scratch_.out[k % 2], t - io);
      }));
      p.out = std::span<const std::byte>(scratch_.out[k % 2].data(), out_len);
    }
    return count > 0 ? write(count - 1) : Status::ok();
  }

  // Both sides' buffers at the size of a full piece, on the calling thread.
  Status size_buffers() {
    const std::uint64_t n = std::min(piece_, elements_);
    SW_ASSIGN_OR_RETURN(const std::uint64_t in_len, bytes_of(e_.type, n));
    SW_ASSIGN_OR_RETURN(const std::uint64_t out_len, bytes_of(job_.to, n));
    for (int i = 0; i < 2; ++i) {
      scratch_.in[i].reserve(static_cast<std::size_t>(in_len));
      if (scratch_.out[i].size() < out_len) scratch_.out[i].resize(out_len);
    }
    return Status::ok();
  }

  // Elements [t x task, (t + 1) x task) of a piece, converted into their place in `out`.
  Status convert_task(const Piece& p, Scratch::Output& out, std::size_t t) const {
    const std::uint64_t n = p.e1 - p.e0;
    const std::uint64_t a = t * task_, b = std::min(n, a + task_);
    SW_ASSIGN_OR_RETURN(const std::uint64_t ia, bytes_of(e_.type, a));
    SW_ASSIGN_OR_RETURN(const std::uint64_t ib, bytes_of(e_.type, b));
    SW_ASSIGN_OR_RETURN(const std::uint64_t oa, bytes_of(job_.to, a));
    SW_ASSIGN_OR_RETURN(const std::uint64_t ob, bytes_of(job_.to, b));
    return convert_elements(p.src.subspan(ia, ib - ia), std::span(out.data() + oa, ob - oa), b - a);
  }

  // Through F32: dequantize, then quantize (F32 on either side needs only one of the two). A permuted
  // tensor that keeps its type is copied too: its input buffer is refilled while its output is written.
  Status convert_elements(std::span<const std::byte> src, std::span<std::byte> dst, std::uint64_t n) const {
    if (job_.to == e_.type) {
      if (!src.empty()) std::memcpy(dst.data(), src.data(), src.size());
      return Status::ok();
    }
    if (job_.to == TensorType::F32) {
      return dequantize(e_.type, src, std::span(reinterpret_cast<float*>(dst.data()), n));
    }
    thread_local std::vector<float> scratch;
    if (scratch.size() < n) scratch.resize(n);
    std::span<float> f32(scratch.data(), n);
    SW_RETURN_IF_ERROR(dequantize(e_.type, src, f32));
    return quantize(job_.to, f32, dst);
  }

  const Job& job_;
  const TensorEntry& e_;
  TensorSink& sink_;
  unsigned threads_;
  Permutation perm_;
  std::uint64_t elements_ = 0, unit_ = 1, piece_ = 1, task_ = 1, row_bytes_ = 0;
  Scratch& scratch_;
};

}  // namespace

Result<ConvertReport> convert(const TensorFile& input, const std::string& output_path, const ConvertOptions& options) {
  SW_ASSIGN_OR_RETURN(const OutFormat out, output_format(output_path));
  auto jobs = plan_jobs(input, options, out);
  if (!jobs.is_ok()) return error_of(jobs).with_file(input.name());
  if (options.split.enabled() && out != OutFormat::Gguf)
    return Error(ErrorKind::InvalidArgument, "split outputs are GGUF files (llama.cpp's split naming): write a .gguf").with_file(output_path);
  ConvertReport report;
  SW_ASSIGN_OR_RETURN(std::unique_ptr<TensorSink> sink, open_sink(input, output_path, out, *jobs, options, report.files));
  Scratch scratch;
  // Every core, not parallel_for's default (at most 8, an I/O bound): quantizing is computation.
  const unsigned threads = options.threads != 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  std::size_t done = 0;
  for (const Job& job : *jobs) {
    const TensorEntry& e = *job.entry;
    if (Status s = TensorConverter(job, *sink, threads, scratch).run(); !s.is_ok()) return error_of(s).with_file(input.name()).with_tensor(e.name);
    // Done with its pages: a mapped input then holds about one tensor in memory.
    e.source->hint({e.offset, e.nbytes}, AccessHint::DontNeed);
    const std::uint64_t nbytes = *tensor_nbytes(job.to, e.shape);
    report.bytes_written += nbytes;
    report.tensors.push_back({job.name, e.type, job.to, job.note});
    if (options.progress) options.progress(++done, report.bytes_written);
  }
  SW_RETURN_IF_ERROR(sink->finish());
  return report;
}

std::optional<std::uint32_t> llama_file_type(TensorType t) noexcept {
  switch (t) {
    case TensorType::F32: return 0;
    case TensorType::F16: return 1;
    case TensorType::Q4_0: return 2;
    case TensorType::Q4_1: return 3;
    case TensorType::Q8_0: return 7;
    case TensorType::Q5_0: return 8;
    case TensorType::Q5_1: return 9;
    case TensorType::Q2_K: return 10;
    case TensorType::Q3_K: return 11;
    case TensorType::Q4_K: return 14;
    case TensorType::Q5_K: return 16;
    case TensorType::Q6_K: return 18;
    case TensorType::BF16: return 32;
    default: return std::nullopt;
  }
}

}  // namespace safeweights
