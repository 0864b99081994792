// Format conversion (include/safeweights/convert.h): TensorFile -> plan (which tensors, their names,
// permutations and types; dedup) -> the TensorSink of the output's Format, with the metadata carried.
//
// Each tensor gets an output type from the policy (choose_type), then is written by one of two paths:
// a tensor that keeps its type and order is copied as it is (copy_tensor: in the kernel between local
// files; no element is touched, so the bytes are the input's; an assembled one piece by piece when
// each piece is one run of the output); any other goes through pieces of whole rows, gathered from
// the plan's pieces (convert/assemble.h) and in the permuted order when asked, dequantized to F32 and
// quantized to the output type on the shared pool. Pieces are pipelined: piece k is converted by
// every thread while k - 1 is written and k + 1 read, so at most three pieces of one tensor are in
// memory at a time (two buffers each way). A piece that is one run of a mapping is converted in place
// (no copy: a pread's copy was most of the kernel's share of a conversion), its page tables filled
// when it is read and its pages released once it is converted; a gathered piece's as soon as it is
// read. A piece's bytes depend only on its elements, never on the threads.
#include "safeweights/convert.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <thread>
#include <unordered_map>

#include "convert/assemble.h"
#include "convert/pieces.h"
#include "core/fault_guard.h"
#include "core/parallel.h"
#include "core/status_macros.h"
#include "core/hash.h"
#include "io/input_files.h"
#include "safeweights/cancel.h"
#include "safeweights/quantize.h"

namespace safeweights {
namespace {

using convert_detail::Assembly;
using convert_detail::ByteRuns;
using convert_detail::bytes_of;
using convert_detail::ByteUnit;

constexpr std::uint64_t kPieceElements = 4u << 20;  // elements per piece of a converted tensor
constexpr std::uint64_t kTaskElements = 64u << 10;  // elements per pool task within a piece
// Elements taken through F32 at a time within a task: 16 KiB of floats, which stay in the L1 cache
// between dequantizing and quantizing (a task's 256 KiB of them went out to L2 and back).
constexpr std::uint64_t kCacheElements = 4u << 10;
// Pieces cut at the input's runs (TensorConverter::run_aligned_piece): at least this many elements (a
// smaller run is gathered with its neighbours), and an assembly of at most this many runs looked at.
constexpr std::uint64_t kMinAlignedPiece = 256u << 10;
constexpr std::uint64_t kMaxAlignedRuns = 1u << 16;

bool is_number_kept(TensorType t) {
  const TypeClass c = type_info(t).cls;
  return c == TypeClass::Bool || c == TypeClass::Unsigned || c == TypeClass::Signed || c == TypeClass::Complex || t == TensorType::F64;
}

struct Job {
  const TensorEntry* entry = nullptr;  // the input tensor, or the assembled one (no source of its own)
  std::string name;
  std::uint32_t permute_heads = 0;
  TensorType to{};
  std::string note;
  bool unpermute = false;
  std::optional<TensorType> type{};            // the plan's own type for this tensor, over the requested one
  std::shared_ptr<const Assembly> assembly{};  // the pieces the plan assembles the tensor from
  std::vector<float> importance{};             // a mix's weights for quantize_rows(): a row of columns per expert
};

// The output type of one tensor, and why it differs from the requested one: the policy every output
// shares (integers, BOOL and F64 kept; 1-D tensors and scalars F32), then the output format's choice
// (Format::stored_type: GGUF's is llama.cpp's), which the format must then be able to hold.
Status choose_type(Job& job, const ConvertOptions& options, const Format& out) {
  const TensorEntry& e = *job.entry;
  const TensorType from = e.type;
  const std::optional<TensorType> requested = job.type ? job.type : options.type;
  job.to = from;
  if (!requested) {
    if (type_info(from).is_block() && !out.can_hold(from).is_ok()) {
      job.to = TensorType::F32;
      job.note = std::string(out.name()) + " has no " + std::string(type_name(from)) + ": dequantized";
    }
  } else if (const TensorType want = *requested; is_number_kept(from)) {
    if (want != from) job.note = std::string(type_name(from)) + " is kept";
  } else if (e.shape.size() <= 1) {
    job.to = TensorType::F32;
    if (want != TensorType::F32) job.note = e.shape.empty() ? "scalar" : "1-D";
  } else if (want != from) {
    StoredType stored = out.stored_type(want, e.shape);
    job.to = stored.type;
    job.note = std::move(stored.note);
  }
  if (Status s = out.can_hold(job.to); !s.is_ok()) return error_of(s).with_tensor(e.name);
  if (job.to != from && !can_dequantize(from))
    return Error(ErrorKind::NotSupported, "converting from " + std::string(type_name(from)) + " is not supported").with_tensor(e.name);
  if (job.to != from && !can_quantize(job.to))
    return Error(ErrorKind::NotSupported, "converting to " + std::string(type_name(job.to)) + " is not supported").with_tensor(e.name);
  return Status::ok();
}

// A quantization mix (ConvertOptions::mix) over the types the policy chose: the output format's plan
// (Format::plan_mix: GGUF's is llama-quantize's) sees each tensor as the policy left it, against the
// model's metadata (the input's, the plan's over it); its types, notes, weights and names replace
// theirs, and the tensors it prunes are left out. Returns the metadata the format then states.
Result<Metadata> apply_mix(std::vector<Job>& jobs, const TensorFile& input, const ConvertOptions& options, const Format& out) {
  Metadata model;
  if (input.metadata()) model = *input.metadata();
  model.merge(options.plan.metadata);
  std::vector<MixTensor> tensors;
  tensors.reserve(jobs.size());
  for (const Job& j : jobs) tensors.push_back({j.name, j.to, j.entry->shape});
  SW_ASSIGN_OR_RETURN(MixPlan plan, out.plan_mix(*options.mix, tensors, model));
  std::size_t kept = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    MixChoice& c = plan.tensors[i];
    if (c.pruned) continue;
    if (kept != i) jobs[kept] = std::move(jobs[i]);
    Job& job = jobs[kept++];
    if (!c.rename.empty()) job.name = std::move(c.rename);
    if (c.type == job.to) continue;
    job.to = c.type;
    job.note = std::move(c.note);
    job.importance = std::move(c.importance);
    if (Status s = out.can_hold(job.to); !s.is_ok()) return error_of(s).with_tensor(job.name);
    if (!can_quantize(job.to))
      return Error(ErrorKind::NotSupported, "converting to " + std::string(type_name(job.to)) + " is not supported").with_tensor(job.name);
    if (!can_dequantize(job.entry->type))
      return Error(ErrorKind::NotSupported, "converting from " + std::string(type_name(job.entry->type)) + " is not supported").with_tensor(job.name);
  }
  jobs.resize(kept);
  return std::move(plan.metadata);
}

// ---- which tensors ------------------------------------------------------------------------------

// With dedup, the tensors that are the same tensor as a kept one of their storage: both cover the whole
// storage with the same type and shape. The kept one is the smallest such name (as safetensors'
// convert.py chooses); views of other shapes are written with their own contents. Alias -> kept name.
std::map<std::string, std::string> aliases_of(const TensorFile& input) {
  std::unordered_map<std::string_view, const TensorEntry*, SeededHash> keeper;  // storage -> kept entry
  for (const TensorEntry& e : input.tensors()) {
    if (!input.covers_storage(e) || input.storage_of(e).empty()) continue;
    auto [it, fresh] = keeper.emplace(input.storage_of(e), &e);
    if (!fresh && e.name < it->second->name) it->second = &e;
  }
  std::map<std::string, std::string> aliases;
  for (const TensorEntry& e : input.tensors()) {
    auto it = keeper.find(input.storage_of(e));
    const TensorEntry* k = it == keeper.end() ? nullptr : it->second;
    if (k && k != &e && input.covers_storage(e) && k->type == e.type && std::ranges::equal(k->shape, e.shape))
      aliases.emplace(std::string(e.name), std::string(k->name));
  }
  return aliases;
}

// One tensor of a plan: an input tensor, or the assembly of its pieces.
Result<Job> plan_job(const TensorFile& input, const ConvertTensor& t) {
  Job job;
  job.name = t.name;
  job.permute_heads = t.permute_heads;
  job.unpermute = t.unpermute;
  job.type = t.type;
  if (t.unpermute && t.permute_heads == 0)
    return Error(ErrorKind::InvalidArgument, "unpermute needs permute_heads, the number of heads").with_tensor(t.name);
  if (t.pieces.empty()) {
    SW_ASSIGN_OR_RETURN(job.entry, input.tensor(t.source));
    return job;
  }
  if (!t.source.empty()) return Error(ErrorKind::InvalidArgument, "a tensor has a source or pieces, not both").with_tensor(t.name);
  SW_ASSIGN_OR_RETURN(job.assembly, Assembly::make(input, t));
  job.entry = &job.assembly->entry();
  return job;
}

Result<std::vector<Job>> plan_jobs(const TensorFile& input, const ConvertOptions& options, const std::map<std::string, std::string>& aliases,
                                   const Format& out) {
  std::vector<Job> jobs;
  if (options.plan.tensors.empty()) {
    for (const TensorEntry& e : input.tensors())
      if (!aliases.contains(std::string(e.name))) jobs.push_back({&e, std::string(e.name), 0, {}, {}});
  } else {
    for (const ConvertTensor& t : options.plan.tensors) {
      SW_ASSIGN_OR_RETURN(Job job, plan_job(input, t));
      jobs.push_back(std::move(job));
    }
  }
  for (Job& job : jobs) {
    SW_RETURN_IF_ERROR(choose_type(job, options, out));
    if (job.assembly && !job.assembly->note().empty()) job.note = job.assembly->note() + (job.note.empty() ? "" : "; " + job.note);
  }
  return jobs;
}

// Whether the output's metadata is the plan's alone: no input metadata carried, no dedup aliases. It
// is then written as it is: a Hugging Face plan's tokenizer arrays can be most of a conversion's memory.
bool plan_metadata_alone(const TensorFile& input, const ConvertOptions& options, const std::map<std::string, std::string>& aliases) {
  const bool carried = options.carry_metadata && input.metadata() && !input.metadata()->empty();
  return !carried && aliases.empty();
}

// The output's metadata: the input's (unless not carried), updated by the output's format where it
// states the tensors' type, the plan's set over it, and the aliases of a dedup as string-map entries.
Metadata output_metadata(const TensorFile& input, const ConvertOptions& options, const std::map<std::string, std::string>& aliases, const Format& out,
                         const Metadata& mix) {
  Metadata md;
  if (options.carry_metadata && input.metadata()) md = *input.metadata();
  if (options.type) out.retype_metadata(md, *options.type);
  md.merge(options.plan.metadata);
  md.merge(mix);
  for (const auto& [alias, kept] : aliases) md.set({std::string(kStringMapPrefix) + alias, MetaValue::string(kept)});
  return md;
}

// ---- the transform -----------------------------------------------------------------------------

// Rows (units along the outermost dimension) reordered as llama.cpp's permute() (transformers' rotary
// order to Meta's interleaved one): within each of `heads` heads of D rows, row h*D + s*D/2 + i moves
// to h*D + 2*i + s. Its inverse (transformers' convert_llama_weights_to_hf.py permute(): Meta's order
// to transformers') moves row h*D + 2*i + s to h*D + s*D/2 + i.
struct Permutation {
  std::uint64_t heads = 0, rows = 0;
  bool inverse = false;
  std::uint64_t source_row(std::uint64_t out_row) const {
    const std::uint64_t d = rows / heads, half = d / 2;
    const std::uint64_t h = out_row / d, o = out_row % d;
    return inverse ? h * d + 2 * (o % half) + o / half : h * d + (o % 2) * half + o / 2;
  }
};

// Buffers reused from tensor to tensor.
struct Scratch {
  std::vector<std::byte> in[2];  // two pieces' input when it is read (or gathered), not viewed
  // The runs a piece is gathered from, and the window short runs are picked from (one read at a time).
  std::vector<ByteRuns> runs;
  std::vector<std::byte> window;
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
    if (e_.type == job_.to && job_.permute_heads == 0) {
      if (!job_.assembly) return copy();
      if (job_.assembly->whole_pieces()) return copy_pieces();
    }
    SW_RETURN_IF_ERROR(plan());
    return convert_pieces();
  }

 private:
  // The bytes as they are: in the kernel between local files (copy_tensor).
  Status copy() { return copy_tensor(e_, job_.name, sink_); }

  // An assembly whose pieces are runs of the output: each piece's bytes as they are, in turn.
  Status copy_pieces() {
    scratch_.runs.clear();
    job_.assembly->runs(0, e_.num_elements(), scratch_.runs);
    for (const ByteRuns& r : scratch_.runs) SW_RETURN_IF_ERROR(sink_.copy_chunk(job_.name, *r.source, r.offset, r.length));
    return Status::ok();
  }

  Error invalid(std::string message) const { return Error(ErrorKind::InvalidArgument, std::move(message)).with_tensor(job_.name); }

  // The granularity of pieces: whole blocks (or bytes) of both types, whole permuted rows; where the
  // bytes come from: the plan's pieces, or for a permutation the input tensor as a piece.
  Status plan() {
    elements_ = e_.num_elements();
    const std::uint64_t base = std::lcm(ByteUnit::of(e_.type).elements, ByteUnit::of(job_.to).elements);
    std::uint64_t grain = base;
    source_ = job_.assembly.get();
    if (job_.permute_heads != 0) {
      if (e_.shape.empty()) return invalid("a scalar has no rows to permute");
      if (!source_) source_ = (whole_ = Assembly::whole(e_)).get();
      perm_ = {job_.permute_heads, e_.shape[0], job_.unpermute};
      if (perm_.rows % (2 * perm_.heads) != 0)
        return invalid(std::to_string(perm_.rows) + " rows cannot be split into " + std::to_string(perm_.heads) + " heads of row pairs");
      grain = perm_.rows == 0 ? base : elements_ / perm_.rows;
      if (grain == 0 || grain % base != 0) return invalid("rows of a block-quantized 1-D tensor cannot be permuted");
    }
    if (!job_.importance.empty() && elements_ != 0) {
      // Weighted rows: every task holds whole rows, so that each knows its rows' experts.
      if (e_.shape.size() < 2 || e_.shape.back() % base != 0) return invalid("importance weights need rows of whole blocks");
      cols_ = e_.shape.back();
      rows_per_expert_ = e_.shape[e_.shape.size() - 2];
      if (job_.permute_heads == 0) grain = cols_;
      if (grain % cols_ != 0) return invalid("importance weights with permuted rows of another length");
      const std::uint64_t experts = rows_per_expert_ == 0 ? 0 : elements_ / cols_ / rows_per_expert_;
      if (job_.importance.size() != experts * cols_) return invalid("importance weights of another size than the columns times the experts");
    }
    unit_ = grain;
    piece_ = std::max(grain, kPieceElements / grain * grain);
    if (source_ != nullptr && job_.permute_heads == 0) piece_ = run_aligned_piece(grain).value_or(piece_);
    task_ = std::max(base, kTaskElements / base * base);
    chunk_ = std::max(base, kCacheElements / base * base);
    if (cols_ != 0) {
      task_ = std::max(cols_, kTaskElements / cols_ * cols_);
      chunk_ = std::max(cols_, kCacheElements / cols_ * cols_);
    }
    return Status::ok();
  }

  // Pieces that each lie within one run of the input, when the assembly is runs of one length (a stack
  // of per-expert tensors; a slice of each expert of a fused one): that length, or equal parts of it of
  // at most a piece. Each is then read in place from a mapping instead of gathered from two or three
  // runs. A piece's bytes depend only on its elements, so the output does not change.
  std::optional<std::uint64_t> run_aligned_piece(std::uint64_t grain) const {
    // A bound on the runs, before making them: each piece gives one per outer index of its own, and one
    // more per group of a join (a strided slice gives more: not looked at).
    const std::uint64_t groups = source_->groups();
    if (groups > kMaxAlignedRuns) return std::nullopt;
    std::uint64_t bound = 0;
    for (const auto& p : source_->pieces()) {
      if (p.step != 1 && p.count != 1) return std::nullopt;
      if (p.outer > kMaxAlignedRuns) return std::nullopt;
      bound += p.outer + groups;
      if (bound > kMaxAlignedRuns) return std::nullopt;
    }
    std::vector<ByteRuns> runs;
    source_->runs(0, elements_, runs);
    if (runs.empty()) return std::nullopt;
    const std::uint64_t length = runs[0].length;
    if (!std::ranges::all_of(runs, [&](const ByteRuns& r) { return r.count == 1 && r.length == length; })) return std::nullopt;
    const ByteUnit unit = ByteUnit::of(e_.type);
    const std::uint64_t elements = length / unit.bytes * unit.elements;
    const std::uint64_t parts = (elements + kPieceElements - 1) / kPieceElements;
    const std::uint64_t piece = elements / parts;
    if (elements % parts != 0 || piece % grain != 0 || piece < kMinAlignedPiece) return std::nullopt;
    return piece;
  }

  // One piece in flight: its elements, its input and (once converted) its output bytes. `mapped` is
  // the source whose mapping `src` views (from `offset` in it), or null when `src` is a buffer of ours.
  struct Piece {
    std::uint64_t e0 = 0, e1 = 0;
    std::span<const std::byte> src, out;
    const ByteSource* mapped = nullptr;
    std::uint64_t offset = 0;
  };

  // The runs of input bytes that hold elements [e0, e1), into scratch_.runs: the input tensor's one
  // run, or the plan's pieces' (in the permuted order when asked).
  Status input_runs(std::uint64_t e0, std::uint64_t e1) const {
    scratch_.runs.clear();
    if (!source_) {
      SW_ASSIGN_OR_RETURN(const std::uint64_t begin, bytes_of(e_.type, e0));
      SW_ASSIGN_OR_RETURN(const std::uint64_t length, bytes_of(e_.type, e1 - e0));
      scratch_.runs.push_back({.source = e_.source, .offset = e_.offset + begin, .length = length, .stride = length});
    } else if (job_.permute_heads == 0) {
      source_->runs(e0, e1, scratch_.runs);
    } else {
      for (std::uint64_t r = e0 / unit_; r < e1 / unit_; ++r)
        source_->runs(perm_.source_row(r) * unit_, (perm_.source_row(r) + 1) * unit_, scratch_.runs);
    }
    return Status::ok();
  }

  // The input bytes of piece `p`: a view of a mapping when they are one run of it (a plain tensor, or
  // a piece of a join on dim 0 or a stack), its page tables filled in one call (the conversion then
  // reads the page cache in place: no copy, no fault per page); else gathered into `in`, which the
  // calling thread has already sized (a pool worker that reads here does not allocate it). Reads never
  // overlap: one piece is read at a time.
  Status input(Piece& p, std::vector<std::byte>& in) const {
    SW_RETURN_IF_ERROR(input_runs(p.e0, p.e1));
    p.mapped = nullptr;
    if (const auto& r = scratch_.runs; r.size() == 1 && r[0].count == 1) {
      if (auto v = r[0].source->view(r[0].offset, r[0].length); v.data() != nullptr) {
        r[0].source->hint({r[0].offset, r[0].length}, AccessHint::WillNeed);
        p.src = v;
        p.mapped = r[0].source;
        p.offset = r[0].offset;
        return Status::ok();
      }
    }
    SW_ASSIGN_OR_RETURN(const std::uint64_t length, bytes_of(e_.type, p.e1 - p.e0));
    in.resize(static_cast<std::size_t>(length));
    SW_RETURN_IF_ERROR(convert_detail::gather(scratch_.runs, in, scratch_.window));
    p.src = std::span<const std::byte>(in);
    return Status::ok();
  }

  // A converted piece's mapped pages out of the process: it holds a few pieces, never a tensor.
  static void release(const Piece& p) {
    if (p.mapped != nullptr) p.mapped->hint({p.offset, p.src.size()}, AccessHint::DontNeed);
  }

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
      return input(p, scratch_.in[k % 2]);
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
      release(p);
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
    return convert_elements(p, p.src.subspan(ia, ib - ia), std::span(out.data() + oa, ob - oa), b - a, p.e0 + a);
  }

  // dequantize() of bytes of piece `p`, guarded when they are read in place from a mapping: a file
  // truncated under it is an error, not SIGBUS (the section reads the mapping and computes into f32;
  // the Status is assigned after the last read).
  Status dequantize_from(const Piece& p, std::span<const std::byte> src, std::span<float> f32) const {
    if (p.mapped == nullptr) return dequantize(e_.type, src, f32);
    Status s = Status::ok();
    if (!guarded([&] { s = dequantize(e_.type, src, f32); }))
      return mapping_shrank(p.mapped->name(), p.offset + static_cast<std::uint64_t>(src.data() - p.src.data()));
    return s;
  }

  // Whole rows from element `first` on, quantized with their expert's row of importance weights (rows
  // of one expert at a time: quantize_rows() takes one row of weights).
  Status quantize_weighted(std::span<const float> f32, std::span<std::byte> dst, std::uint64_t first) const {
    SW_ASSIGN_OR_RETURN(const std::uint64_t row_bytes, bytes_of(job_.to, cols_));
    const std::uint64_t rows = f32.size() / cols_;
    for (std::uint64_t r = 0, row = first / cols_; r < rows;) {
      const std::uint64_t expert = row / rows_per_expert_;
      const std::uint64_t n = std::min(rows - r, rows_per_expert_ - row % rows_per_expert_);
      const std::span<const float> weights(job_.importance.data() + expert * cols_, cols_);
      SW_RETURN_IF_ERROR(quantize_rows(job_.to, f32.subspan(r * cols_, n * cols_), dst.subspan(r * row_bytes, n * row_bytes), cols_, weights));
      r += n;
      row += n;
    }
    return Status::ok();
  }

  // Through F32: dequantize, then quantize (F32 on either side needs only one of the two), a chunk at a
  // time (whole blocks of both types, whole rows with weights: each block's bytes depend on its own
  // values only, each weighted row's on its row). A permuted tensor that keeps its type is copied too:
  // its input buffer is refilled while its output is written.
  Status convert_elements(const Piece& p, std::span<const std::byte> src, std::span<std::byte> dst, std::uint64_t n, std::uint64_t first) const {
    if (job_.to == e_.type) {
      if (src.empty()) return Status::ok();
      if (p.mapped != nullptr)
        return guarded_copy(dst.data(), src.data(), src.size(), p.mapped->name(), p.offset + static_cast<std::uint64_t>(src.data() - p.src.data()));
      std::memcpy(dst.data(), src.data(), src.size());
      return Status::ok();
    }
    if (job_.to == TensorType::F32) return dequantize_from(p, src, std::span(reinterpret_cast<float*>(dst.data()), n));
    thread_local std::vector<float> scratch;
    if (scratch.size() < chunk_) scratch.resize(chunk_);
    const ByteUnit from = ByteUnit::of(e_.type), to = ByteUnit::of(job_.to);
    for (std::uint64_t a = 0; a < n; a += chunk_) {
      const std::uint64_t m = std::min(chunk_, n - a);
      const std::span<float> f32(scratch.data(), m);
      SW_RETURN_IF_ERROR(dequantize_from(p, src.subspan(from.bytes_of(a), from.bytes_of(m)), f32));
      const std::span<std::byte> out = dst.subspan(to.bytes_of(a), to.bytes_of(m));
      SW_RETURN_IF_ERROR(cols_ != 0 ? quantize_weighted(f32, out, first + a) : quantize(job_.to, f32, out));
    }
    return Status::ok();
  }

  const Job& job_;
  const TensorEntry& e_;
  TensorSink& sink_;
  unsigned threads_;
  Permutation perm_;
  const Assembly* source_ = nullptr;  // where gathered bytes come from; null: the input tensor, viewed or read
  std::unique_ptr<Assembly> whole_;   // the input tensor as one piece, for a permutation
  std::uint64_t elements_ = 0, unit_ = 1, piece_ = 1, task_ = 1, chunk_ = 1;
  std::uint64_t cols_ = 0, rows_per_expert_ = 1;  // with importance weights: a row's length, an expert's rows
  Scratch& scratch_;
};

// What the output format cannot hold (a name, a rank, text) is the input's content: the error names the
// input file, where the writer that refused it named the output it was planning.
Error from_input(const Error& refused, const TensorFile& input) {
  Error e(refused.kind(), refused.message());
  e.with_rule(refused.rule()).with_file(input.name()).with_tensor(refused.context().tensor);
  return e;
}

// InvalidArgument when an output file would replace the input or another file read (options.inputs).
Status refuse_inputs(const TensorFile& input, std::span<const std::string> read, std::span<const std::string> outputs) {
  InputFiles inputs;
  inputs.add(input.name());
  for (const std::string& name : read) inputs.add(name);
  return inputs.check_outputs(outputs);
}

// The pages of a mapped input a tensor was read from, out of the process.
void release_pages(const Job& job) {
  if (!job.assembly) {
    job.entry->source->hint({job.entry->offset, job.entry->nbytes}, AccessHint::DontNeed);
    return;
  }
  for (const auto& p : job.assembly->pieces()) p.entry->source->hint({p.entry->offset, p.entry->nbytes}, AccessHint::DontNeed);
}

// A job's bytes in the output. A tensor with no elements holds none, whatever its other dimensions
// (GGUF's [0, 2^62, 2^62] ne, whose row-major product overflows from the left); any other shape passed
// the writer's sizing, or the sizing of the plan (a dry run).
std::uint64_t written_bytes(const Job& job) {
  const auto& shape = job.entry->shape;
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  auto bytes = tensor_nbytes(job.to, shape);
  return bytes.is_ok() ? *bytes : 0;
}

// Where the jobs' input file changes (a split GGUF's files are a source each): the first job of each
// file, or none when they all come from one. An assembled tensor has no source of its own and stays
// with the file before it.
std::vector<std::size_t> input_file_starts(const std::vector<Job>& jobs) {
  std::vector<std::size_t> starts{0};
  const ByteSource* current = jobs.empty() ? nullptr : jobs.front().entry->source;
  for (std::size_t i = 1; i < jobs.size(); ++i) {
    const ByteSource* source = jobs[i].entry->source;
    if (source == nullptr || source == current) continue;
    starts.push_back(i);
    current = source;
  }
  if (starts.size() == 1) starts.clear();
  return starts;
}

// What a dry run reports: every job as a conversion would report it, nothing written.
ConvertReport planned_report(const std::vector<Job>& jobs) {
  ConvertReport report;
  for (const Job& job : jobs) {
    report.bytes_written += written_bytes(job);
    report.tensors.push_back({job.name, job.entry->type, job.to, job.note});
  }
  return report;
}

}  // namespace

Result<ConvertReport> convert(const TensorFile& input, const std::string& output_path, const ConvertOptions& options) {
  SW_ASSIGN_OR_RETURN(const Format* out, output_format(output_path, options.to));
  if (options.dedup && !options.plan.tensors.empty())
    return Error(ErrorKind::InvalidArgument, "dedup keeps every tensor's own name: it takes no tensor list").with_file(input.name());
  const std::map<std::string, std::string> aliases = options.dedup ? aliases_of(input) : std::map<std::string, std::string>{};
  auto jobs = plan_jobs(input, options, aliases, *out);
  if (!jobs.is_ok()) return error_of(jobs).with_file(input.name());
  Metadata mixed;
  if (options.mix) {
    auto applied = apply_mix(*jobs, input, options, *out);
    if (!applied.is_ok()) return error_of(applied).with_file(input.name());
    mixed = std::move(applied).value();
  }
  std::vector<TensorDecl> decls;
  decls.reserve(jobs->size());
  for (const Job& j : *jobs) decls.push_back({j.name, j.to, std::vector<std::uint64_t>(j.entry->shape.begin(), j.entry->shape.end())});
  std::optional<Metadata> combined;
  if (options.mix || !plan_metadata_alone(input, options, aliases)) combined = output_metadata(input, options, aliases, *out, mixed);
  const Metadata& metadata = combined ? *combined : options.plan.metadata;
  if (options.dry_run) return planned_report(*jobs);
  WriteOptions write = options.write;
  if (options.keep_split) {
    if (write.split.enabled())
      return Error(ErrorKind::InvalidArgument, "keep_split keeps the input's files: it takes no split limits").with_file(output_path);
    write.split.starts = input_file_starts(*jobs);
  }
  auto created = out->create(output_path, std::move(decls), &metadata, write);
  if (!created.is_ok()) return created.error().kind() == ErrorKind::Unrepresentable ? from_input(created.error(), input) : error_of(created);
  std::unique_ptr<TensorSink> sink = std::move(created).value();
  // Before the first byte: the sink's files exist only as temporaries, discarded on this return.
  SW_RETURN_IF_ERROR(refuse_inputs(input, options.inputs, sink->files()));
  ConvertReport report;
  Scratch scratch;
  // Every core, not parallel_for's default (at most 8, an I/O bound): quantizing is computation.
  const unsigned threads = options.threads != 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  std::size_t done = 0;
  for (const Job& job : *jobs) {
    const TensorEntry& e = *job.entry;
    SW_RETURN_IF_ERROR(check_cancelled());
    if (Status s = TensorConverter(job, *sink, threads, scratch).run(); !s.is_ok()) return error_of(s).with_file(input.name()).with_tensor(e.name);
    // Done with its pages: a mapped input then holds about one tensor in memory (they stay in the page
    // cache, so a view of the same storage later faults them back cheaply).
    release_pages(job);
    report.bytes_written += written_bytes(job);
    report.tensors.push_back({job.name, e.type, job.to, job.note});
    if (options.progress) options.progress(++done, report.bytes_written);
  }
  SW_RETURN_IF_ERROR(sink->finish());
  const auto files = sink->files();
  report.files.assign(files.begin(), files.end());
  return report;
}

}  // namespace safeweights
