// Tensors a plan assembles (ConvertTensor::pieces, join_dim, stack, unpermute, type): each output is
// checked against the test's own assembly in memory (slices, joins, stacks and the row permutations
// written here from their definitions), as F32 values and, through a type change, as the bytes of
// converting that in-memory tensor the same way; the refusals with their exact messages; the bytes for
// any thread count and either file backend; and the peak memory of a large join.
#include <gtest/gtest.h>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <tuple>
#include <vector>

#include "test_util.h"
#include "convert/assemble.h"
#include "safeweights/convert.h"
#include "safeweights/safetensors_writer.h"

namespace safeweights {
namespace {

using swt::TempDir;
using Shape = std::vector<std::uint64_t>;

// A row-major F32 array, the test's model of a tensor.
struct Array {
  Shape shape;
  std::vector<float> v;
};

std::uint64_t count_of(const Shape& shape) {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) n *= d;
  return n;
}

// Distinct values, exact in F16 for small arrays, varied enough to quantize.
Array make_array(Shape shape, int seed) {
  Array a{std::move(shape), {}};
  a.v.resize(count_of(a.shape));
  for (std::size_t i = 0; i < a.v.size(); ++i) a.v[i] = static_cast<float>(seed * 1000 + static_cast<int>(i % 997)) / 8.0f - 300.0f;
  return a;
}

// Calls f with each index of `shape`, in row-major order.
void for_each_index(const Shape& shape, const std::function<void(const Shape&)>& f) {
  if (count_of(shape) == 0) return;
  Shape idx(shape.size(), 0);
  for (;;) {
    f(idx);
    std::size_t d = shape.size();
    while (d > 0 && ++idx[d - 1] == shape[d - 1]) idx[--d] = 0;
    if (d == 0) return;
  }
}

float at(const Array& a, const Shape& idx) {
  std::uint64_t flat = 0;
  for (std::size_t d = 0; d < idx.size(); ++d) flat = flat * a.shape[d] + idx[d];
  return a.v[flat];
}

Array slice(const Array& a, std::uint32_t dim, std::uint64_t begin, std::uint64_t end, std::uint64_t step) {
  Array out{a.shape, {}};
  out.shape[dim] = (end - begin + step - 1) / step;
  for_each_index(out.shape, [&](const Shape& idx) {
    Shape src = idx;
    src[dim] = begin + idx[dim] * step;
    out.v.push_back(at(a, src));
  });
  return out;
}

Array join(const std::vector<Array>& parts, std::uint32_t dim) {
  Array out{parts[0].shape, {}};
  out.shape[dim] = 0;
  for (const Array& p : parts) out.shape[dim] += p.shape[dim];
  for_each_index(out.shape, [&](const Shape& idx) {
    Shape src = idx;
    std::size_t p = 0;
    while (src[dim] >= parts[p].shape[dim]) src[dim] -= parts[p++].shape[dim];
    out.v.push_back(at(parts[p], src));
  });
  return out;
}

Array stack(const std::vector<Array>& parts) {
  Array out{parts[0].shape, {}};
  out.shape.insert(out.shape.begin(), parts.size());
  for (const Array& p : parts) out.v.insert(out.v.end(), p.v.begin(), p.v.end());
  return out;
}

// Rows viewed as [heads, 2, D/2] swapped to [heads, D/2, 2] (llama.cpp's permute, transformers' order to
// Meta's), or viewed as [heads, D/2, 2] swapped to [heads, 2, D/2] (transformers' permute in
// convert_llama_weights_to_hf.py, Meta's order to transformers').
Array permute_rows(const Array& a, std::uint64_t heads, bool to_transformers) {
  const std::uint64_t rows = a.shape[0], d = rows / heads, half = d / 2, cols = a.v.size() / rows;
  Array out{a.shape, std::vector<float>(a.v.size())};
  for (std::uint64_t h = 0; h < heads; ++h)
    for (std::uint64_t s = 0; s < 2; ++s)
      for (std::uint64_t i = 0; i < half; ++i) {
        const std::uint64_t split = h * d + s * half + i, interleaved = h * d + 2 * i + s;
        const std::uint64_t to = to_transformers ? split : interleaved, from = to_transformers ? interleaved : split;
        std::memcpy(&out.v[to * cols], &a.v[from * cols], cols * sizeof(float));
      }
  return out;
}

void write_arrays(const std::string& path, const std::vector<std::pair<std::string, const Array*>>& arrays) {
  std::vector<safetensors::TensorData> t;
  for (const auto& [name, a] : arrays) t.push_back({name, TensorType::F32, a->shape, std::as_bytes(std::span(a->v))});
  ASSERT_TRUE(safetensors::write_file(path, t).is_ok());
}

struct Written {
  Shape shape;
  TensorType type{};
  std::string bytes;
};

Written read_tensor(const std::string& path, const std::string& name) {
  auto f = open_tensors(path);
  EXPECT_TRUE(f.is_ok()) << f.error().to_string();
  if (!f.is_ok()) return {};
  const TensorEntry* e = (*f)->find(name);
  EXPECT_NE(e, nullptr) << name;
  if (e == nullptr) return {};
  auto bytes = e->read_owned();
  EXPECT_TRUE(bytes.is_ok());
  return {Shape(e->shape.begin(), e->shape.end()), e->type, std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size())};
}

// Converts tensor `t` of `input` into `out` (its extension names the format) and the test's own
// assembly `expected`, written as a plain tensor, the same way: the same shape, type and bytes; with
// no type asked, the bytes are `expected`'s floats.
void expect_assembled(const TempDir& dir, const std::string& input, const ConvertTensor& t, const Array& expected, std::optional<TensorType> type,
                      const std::string& out, unsigned threads = 0, const FormatOptions& read = {}) {
  SCOPED_TRACE(t.name + " -> " + out);
  ConvertOptions options;
  options.type = type;
  options.threads = threads;
  options.plan.tensors = {t};
  auto in = open_tensors(input, {}, read);
  ASSERT_TRUE(in.is_ok()) << in.error().to_string();
  auto report = convert(**in, dir.file(out), options);
  ASSERT_TRUE(report.is_ok()) << report.error().to_string();
  const Written got = read_tensor(dir.file(out), t.name);
  EXPECT_EQ(got.shape, expected.shape);

  const std::string ref_in = dir.file("reference-input-" + t.name + ".safetensors"), ref_out = dir.file("reference-" + out);
  write_arrays(ref_in, {{t.name, &expected}});
  ConvertOptions plain;
  plain.type = type;
  plain.plan.tensors = {{.source = t.name, .name = t.name}};
  auto ref = open_tensors(ref_in);
  ASSERT_TRUE(ref.is_ok());
  ASSERT_TRUE(convert(**ref, ref_out, plain).is_ok());
  const Written want = read_tensor(ref_out, t.name);
  EXPECT_EQ(got.type, want.type);
  EXPECT_TRUE(got.bytes == want.bytes) << "bytes differ from the in-memory assembly's conversion";
  if (!type) {
    EXPECT_TRUE(got.bytes == std::string(reinterpret_cast<const char*>(expected.v.data()), expected.v.size() * 4));
  }
}

TEST(Assemble, JoinsOnEachDimensionOf3D) {
  TempDir dir;
  const Array base = make_array({3, 4, 64}, 1);
  for (std::uint32_t dim = 0; dim < 3; ++dim) {
    Shape other = base.shape;
    other[dim] = dim == 2 ? 32 : 2;
    const Array b = make_array(other, 2 + static_cast<int>(dim)), c = make_array(base.shape, 7);
    const std::string input = dir.file("in" + std::to_string(dim) + ".safetensors");
    write_arrays(input, {{"a", &base}, {"b", &b}, {"c", &c}});
    ConvertTensor t{.name = "joined" + std::to_string(dim), .pieces = {{.source = "a"}, {.source = "b"}, {.source = "c"}}, .join_dim = dim};
    const Array expected = join({base, b, c}, dim);
    const std::string stem = "join" + std::to_string(dim);
    expect_assembled(dir, input, t, expected, std::nullopt, stem + ".safetensors");
    expect_assembled(dir, input, t, expected, TensorType::F16, stem + "-f16.safetensors");
    expect_assembled(dir, input, t, expected, TensorType::Q8_0, stem + "-q8.gguf");
  }
}

// An assembly's groups (the converter bounds the runs it looks at by them): the product of the
// dimensions before a join, 1 for a stack.
TEST(Assemble, GroupsAreTheDimensionsBeforeTheJoin) {
  TempDir dir;
  const Array a = make_array({3, 4, 64}, 1);
  const std::string input = dir.file("in.safetensors");
  write_arrays(input, {{"a", &a}, {"b", &a}});
  auto in = open_tensors(input);
  ASSERT_TRUE(in.is_ok());
  const std::uint64_t want[] = {1, 3, 12};
  for (std::uint32_t dim = 0; dim < 3; ++dim) {
    auto joined = convert_detail::Assembly::make(**in, {.name = "j", .pieces = {{.source = "a"}, {.source = "b"}}, .join_dim = dim});
    ASSERT_TRUE(joined.is_ok());
    EXPECT_EQ((*joined)->groups(), want[dim]) << dim;
  }
  auto stacked = convert_detail::Assembly::make(**in, {.name = "s", .pieces = {{.source = "a"}, {.source = "b"}}, .stack = true});
  ASSERT_TRUE(stacked.is_ok());
  EXPECT_EQ((*stacked)->groups(), 1u);
}

// One expert tensor per expert stacked into [E, ...] (what llama.cpp's ffn_*_exps are).
TEST(Assemble, StacksExperts) {
  TempDir dir;
  std::vector<Array> experts;
  for (int e = 0; e < 4; ++e) experts.push_back(make_array({3, 64}, e + 1));
  const std::string input = dir.file("in.safetensors");
  write_arrays(input, {{"e0", &experts[0]}, {"e1", &experts[1]}, {"e2", &experts[2]}, {"e3", &experts[3]}});
  ConvertTensor t{.name = "exps", .pieces = {{.source = "e0"}, {.source = "e1"}, {.source = "e2"}, {.source = "e3"}}, .stack = true};
  expect_assembled(dir, input, t, stack(experts), std::nullopt, "stack.safetensors");
  expect_assembled(dir, input, t, stack(experts), TensorType::Q8_0, "stack-q8.gguf");
}

// A fused gate_up_proj split into its halves ([E, 2F, D], dim 1), gpt-oss's interleaved halves (step
// 2 on the innermost dimension, from 0 and from 1), every other row, and slices of several tensors
// stacked.
TEST(Assemble, SlicesWithSteps) {
  TempDir dir;
  const Array fused = make_array({2, 6, 64}, 3), interleaved = make_array({2, 5, 8}, 4);
  const std::string input = dir.file("in.safetensors");
  write_arrays(input, {{"gate_up", &fused}, {"gpt_oss", &interleaved}});
  const ConvertTensor gate{.name = "gate", .pieces = {{.source = "gate_up", .dim = 1, .begin = 0, .end = 3}}};
  const ConvertTensor up{.name = "up", .pieces = {{.source = "gate_up", .dim = 1, .begin = 3}}};
  expect_assembled(dir, input, gate, slice(fused, 1, 0, 3, 1), std::nullopt, "gate.safetensors");
  expect_assembled(dir, input, up, slice(fused, 1, 3, 6, 1), TensorType::Q8_0, "up.gguf");
  for (std::uint64_t begin = 0; begin < 2; ++begin) {
    const ConvertTensor half{.name = "half" + std::to_string(begin), .pieces = {{.source = "gpt_oss", .dim = 2, .begin = begin, .step = 2}}};
    expect_assembled(dir, input, half, slice(interleaved, 2, begin, 8, 2), std::nullopt, half.name + ".safetensors");
    expect_assembled(dir, input, half, slice(interleaved, 2, begin, 8, 2), TensorType::F16, half.name + "-f16.safetensors");
  }
  const ConvertTensor rows{.name = "rows", .pieces = {{.source = "gpt_oss", .dim = 1, .begin = 1, .end = 5, .step = 2}}};
  expect_assembled(dir, input, rows, slice(interleaved, 1, 1, 5, 2), std::nullopt, "rows.safetensors");
  const ConvertTensor stacked{.name = "halves",
                              .pieces = {{.source = "gate_up", .dim = 1, .begin = 0, .end = 3}, {.source = "gate_up", .dim = 1, .begin = 3}},
                              .stack = true};
  expect_assembled(dir, input, stacked, stack({slice(fused, 1, 0, 3, 1), slice(fused, 1, 3, 6, 1)}), TensorType::Q8_0, "halves.gguf");
}

// transformers' permute() on 2 heads of 6 rows, by hand from w.view(n_heads, dim1 / n_heads / 2, 2,
// dim2).transpose(1, 2).reshape(dim1, dim2): row 2i + s of a head goes to s * 3 + i.
TEST(Assemble, UnpermuteIsTransformersPermute) {
  TempDir dir;
  Array rows{{12, 2}, {}};
  for (int r = 0; r < 12; ++r) rows.v.insert(rows.v.end(), {static_cast<float>(10 * r), static_cast<float>(10 * r + 1)});
  const std::vector<int> order = {0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11};
  Array known{{12, 2}, {}};
  for (int r : order) known.v.insert(known.v.end(), {static_cast<float>(10 * r), static_cast<float>(10 * r + 1)});
  EXPECT_EQ(permute_rows(rows, 2, true).v, known.v);

  const std::string input = dir.file("in.safetensors");
  write_arrays(input, {{"w", &rows}});
  expect_assembled(dir, input, {.source = "w", .name = "w", .permute_heads = 2, .unpermute = true}, known, std::nullopt, "u.safetensors");
}

// Meta's wq: model-parallel shards joined on dim 0, then unpermuted with the model's heads; and
// permuting what was unpermuted gives the joined tensor back.
TEST(Assemble, UnpermutesTheJoinedTensor) {
  TempDir dir;
  const Array s0 = make_array({8, 64}, 1), s1 = make_array({8, 64}, 2);
  const std::string input = dir.file("in.safetensors");
  write_arrays(input, {{"wq.0", &s0}, {"wq.1", &s1}});
  const ConvertTensor wq{.name = "q_proj", .permute_heads = 4, .unpermute = true, .pieces = {{.source = "wq.0"}, {.source = "wq.1"}}};
  const Array joined = join({s0, s1}, 0), hf = permute_rows(joined, 4, true);
  EXPECT_NE(hf.v, joined.v);
  expect_assembled(dir, input, wq, hf, std::nullopt, "q.safetensors");
  expect_assembled(dir, input, wq, hf, TensorType::Q8_0, "q.gguf", 2);

  auto back_in = open_tensors(dir.file("q.safetensors"));
  ASSERT_TRUE(back_in.is_ok());
  ConvertOptions again;
  again.plan.tensors = {{.source = "q_proj", .name = "wq", .permute_heads = 4}};
  ASSERT_TRUE(convert(**back_in, dir.file("back.safetensors"), again).is_ok());
  EXPECT_TRUE(read_tensor(dir.file("back.safetensors"), "wq").bytes ==
              std::string(reinterpret_cast<const char*>(joined.v.data()), joined.v.size() * 4));
}

// A plan's own type wins over the requested one (llama.cpp's routers stay F32 at any --type), through
// the same policy; the notes say how a tensor was assembled.
TEST(Assemble, PlanTypeAndNotes) {
  TempDir dir;
  const Array a = make_array({4, 64}, 1), b = make_array({4, 64}, 2);
  const std::string input = dir.file("in.safetensors");
  write_arrays(input, {{"a", &a}, {"b", &b}});
  ConvertOptions options;
  options.type = TensorType::Q8_0;
  options.plan.tensors = {{.source = "a", .name = "router", .type = TensorType::F32},
                          {.name = "joined", .pieces = {{.source = "a"}, {.source = "b"}}},
                          {.name = "stacked", .pieces = {{.source = "a"}, {.source = "b"}}, .stack = true, .type = TensorType::F16},
                          {.name = "sliced", .pieces = {{.source = "b", .dim = 0, .begin = 1, .end = 3}}}};
  auto in = open_tensors(input);
  ASSERT_TRUE(in.is_ok());
  auto report = convert(**in, dir.file("out.gguf"), options);
  ASSERT_TRUE(report.is_ok()) << report.error().to_string();
  ASSERT_EQ(report->tensors.size(), 4u);
  const std::vector<std::tuple<std::string, TensorType, std::string>> want = {{"router", TensorType::F32, ""},
                                                                              {"joined", TensorType::Q8_0, "joined from 2"},
                                                                              {"stacked", TensorType::F16, "stacked from 2"},
                                                                              {"sliced", TensorType::Q8_0, ""}};
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(report->tensors[i].name, std::get<0>(want[i]));
    EXPECT_EQ(report->tensors[i].from, TensorType::F32);
    EXPECT_EQ(report->tensors[i].to, std::get<1>(want[i]));
    EXPECT_EQ(report->tensors[i].note, std::get<2>(want[i]));
  }
  EXPECT_EQ(read_tensor(dir.file("out.gguf"), "stacked").shape, (Shape{2, 4, 64}));
  EXPECT_EQ(read_tensor(dir.file("out.gguf"), "sliced").shape, (Shape{2, 64}));

  // A stacked 1-D tensor is no longer 1-D: it takes the requested type; 1-D pieces joined stay 1-D.
  const Array v = make_array({64}, 3);
  write_arrays(dir.file("v.safetensors"), {{"v", &v}});
  auto vin = open_tensors(dir.file("v.safetensors"));
  ASSERT_TRUE(vin.is_ok());
  options.plan.tensors = {{.name = "vs", .pieces = {{.source = "v"}, {.source = "v"}}, .stack = true},
                          {.name = "vj", .pieces = {{.source = "v"}, {.source = "v"}}}};
  report = convert(**vin, dir.file("v.gguf"), options);
  ASSERT_TRUE(report.is_ok()) << report.error().to_string();
  EXPECT_EQ(report->tensors[0].to, TensorType::Q8_0);
  EXPECT_EQ(report->tensors[0].note, "stacked from 2");
  EXPECT_EQ(report->tensors[1].to, TensorType::F32);
  EXPECT_EQ(report->tensors[1].note, "joined from 2; 1-D");
}

// Each refusal: its kind, its exact message (naming the piece), the output tensor and the input file,
// and no file written.
TEST(Assemble, Refusals) {
  TempDir dir;
  const Array a = make_array({3, 4}, 1), b = make_array({2, 5}, 2);
  const std::vector<std::uint16_t> h(12, 0x3c00);
  const std::string input = dir.file("in.safetensors");
  std::vector<safetensors::TensorData> t = {{"a", TensorType::F32, a.shape, std::as_bytes(std::span(a.v))},
                                            {"b", TensorType::F32, b.shape, std::as_bytes(std::span(b.v))},
                                            {"h", TensorType::F16, {3, 4}, std::as_bytes(std::span(h))}};
  ASSERT_TRUE(safetensors::write_file(input, t).is_ok());
  auto in = open_tensors(input);
  ASSERT_TRUE(in.is_ok());
  const auto refused = [&](const ConvertTensor& tensor, ErrorKind kind, const std::string& message) {
    SCOPED_TRACE(message);
    ConvertOptions options;
    options.plan.tensors = {tensor};
    auto r = convert(**in, dir.file("out.safetensors"), options);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.error().kind(), kind);
    EXPECT_EQ(r.error().message(), message);
    EXPECT_EQ(r.error().context().tensor, tensor.name);
    EXPECT_EQ(r.error().context().file, input);
  };
  refused({.name = "t", .pieces = {{.source = "a"}, {.source = "nope"}}}, ErrorKind::TensorNotFound, "piece 1 (`nope`): no such tensor in the input");
  refused({.name = "t", .pieces = {{.source = "a"}, {.source = "h"}}}, ErrorKind::InvalidArgument, "piece 1 (`h`) is F16, piece 0 (`a`) F32");
  refused({.name = "t", .pieces = {{.source = "a"}, {.source = "b"}}}, ErrorKind::InvalidArgument,
          "piece 1 (`b`) has shape [2, 5], piece 0 (`a`) [3, 4]: joined pieces differ only in dimension 0");
  refused({.name = "t", .pieces = {{.source = "a"}, {.source = "a", .dim = 0, .begin = 1}}, .stack = true}, ErrorKind::InvalidArgument,
          "piece 1 (`a`) has shape [2, 4], piece 0 (`a`) [3, 4]: stacked pieces have one shape");
  refused({.name = "t", .pieces = {{.source = "a", .dim = 1, .begin = 2, .end = 9}}}, ErrorKind::SliceOutOfRange,
          "piece 0 (`a`): [2, 9) is not a non-empty range of dimension 1 of shape [3, 4]");
  refused({.name = "t", .pieces = {{.source = "a", .dim = 1, .begin = 4}}}, ErrorKind::SliceOutOfRange,
          "piece 0 (`a`): [4, 4) is not a non-empty range of dimension 1 of shape [3, 4]");
  refused({.name = "t", .pieces = {{.source = "a", .dim = 2, .begin = 1}}}, ErrorKind::InvalidSliceSpec,
          "piece 0 (`a`): no dimension 2 in shape [3, 4]");
  refused({.name = "t", .pieces = {{.source = "a", .dim = 0, .step = 0}}}, ErrorKind::InvalidSliceSpec, "piece 0 (`a`): step 0");
  refused({.name = "t", .pieces = {{.source = "a"}, {.source = "a"}}, .join_dim = 2}, ErrorKind::InvalidArgument,
          "join_dim 2 of pieces of shape [3, 4]");
  refused({.name = "t", .pieces = {{.source = "a"}}, .join_dim = 1, .stack = true}, ErrorKind::InvalidArgument, "stacked pieces take no join_dim");
  refused({.source = "a", .name = "t", .pieces = {{.source = "a"}}}, ErrorKind::InvalidArgument, "a tensor has a source or pieces, not both");
  refused({.source = "a", .name = "t", .unpermute = true}, ErrorKind::InvalidArgument, "unpermute needs permute_heads, the number of heads");
  EXPECT_EQ(dir.list(), std::vector<std::string>{"in.safetensors"});
}

// Block-quantized pieces are cut only between blocks.
TEST(Assemble, BlockTypesAreCutBetweenBlocks) {
  TempDir dir;
  const Array a = make_array({2, 64}, 1);
  write_arrays(dir.file("in.safetensors"), {{"a", &a}});
  auto in = open_tensors(dir.file("in.safetensors"));
  ASSERT_TRUE(in.is_ok());
  ConvertOptions q8;
  q8.type = TensorType::Q8_0;
  ASSERT_TRUE(convert(**in, dir.file("q.gguf"), q8).is_ok());
  auto q = open_tensors(dir.file("q.gguf"));
  ASSERT_TRUE(q.is_ok());
  const auto run = [&](const ConvertTensor& t) {
    ConvertOptions options;
    options.plan.tensors = {t};
    return convert(**q, dir.file("out.gguf"), options);
  };
  auto r = run({.name = "t", .pieces = {{.source = "a", .dim = 1, .begin = 0, .step = 2}}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::InvalidBlockShape);
  EXPECT_EQ(r.error().message(),
            "piece 0 (`a`): a slice of the innermost dimension must take every element from a start of Q8_0's units of 32 elements");
  r = run({.name = "t", .pieces = {{.source = "a", .dim = 1, .begin = 16}}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().message(), "piece 0 (`a`): rows of shape [2, 48] are not whole Q8_0's units of 32 elements");
  // Whole blocks: the second block of each row, joined with the rows themselves on dim 1, kept as Q8_0.
  r = run({.name = "t", .pieces = {{.source = "a"}, {.source = "a", .dim = 1, .begin = 32}}, .join_dim = 1});
  ASSERT_TRUE(r.is_ok()) << r.error().to_string();
  const Written got = read_tensor(dir.file("out.gguf"), "t"), whole = read_tensor(dir.file("q.gguf"), "a");
  EXPECT_EQ(got.shape, (Shape{2, 96}));
  const std::size_t row = 2 * 34;  // two Q8_0 blocks
  std::string want;
  for (std::size_t i = 0; i < 2; ++i) want += whole.bytes.substr(i * row, row) + whole.bytes.substr(i * row + 34, 34);
  EXPECT_TRUE(got.bytes == want);
}

// A tensor over several of the converter's pieces (4 Mi elements), joined from a whole tensor, an
// interleaved half and every other row: the same bytes for 1, 2 and 3 threads, mapped or read with
// pread (scattered reads, and windows picked from), and as the in-memory assembly converted.
TEST(Assemble, BytesDoNotDependOnThreadsOrBackend) {
  TempDir dir;
  const Array a = make_array({1200, 2048}, 1), c = make_array({1200, 4096}, 2), d = make_array({2400, 1024}, 3);
  const std::string input = dir.file("in.safetensors");
  write_arrays(input, {{"a", &a}, {"c", &c}, {"d", &d}});
  const ConvertTensor t{
      .name = "t",
      .pieces = {{.source = "a"}, {.source = "c", .dim = 1, .begin = 1, .step = 2}, {.source = "d", .dim = 0, .begin = 0, .step = 2}},
      .join_dim = 1};
  const Array expected = join({a, slice(c, 1, 1, 4096, 2), slice(d, 0, 0, 2400, 2)}, 1);
  FormatOptions read;
  for (FileBackend backend : {FileBackend::Mmap, FileBackend::Pread}) {
    read.backend = backend;
    for (unsigned threads = 1; threads <= 3; ++threads)
      expect_assembled(dir, input, t, expected, TensorType::Q8_0, "t" + std::to_string(threads) + ".gguf", threads, read);
  }
  expect_assembled(dir, input, t, expected, std::nullopt, "t.safetensors", 2, read);
}

// Six 32 MiB shards joined on their inner dimension (as Meta's wo and w2 are) and converted to F16,
// read from a mapping: the process holds the converter's buffers (48 MiB) and the rows in flight,
// never the 192 MiB of input (nor the 96 MiB of output).
TEST(Assemble, LargeJoinStreams) {
  if (kAddressSanitizer) GTEST_SKIP() << "ASan's allocator and shadow memory change every figure";
  TempDir dir;
  constexpr std::uint64_t kRows = 2048, kCols = 4096;
  {
    std::vector<float> shard(kRows * kCols);
    for (std::size_t i = 0; i < shard.size(); ++i) shard[i] = static_cast<float>(i % 4093);
    std::vector<safetensors::TensorData> t;
    for (int s = 0; s < 6; ++s) t.push_back({"w." + std::to_string(s), TensorType::F32, {kRows, kCols}, std::as_bytes(std::span(shard))});
    ASSERT_TRUE(safetensors::write_file(dir.file("in.safetensors"), t).is_ok());
  }
  const long long peak = swt::peak_memory_growth([&] {
    auto in = open_tensors(dir.file("in.safetensors"));
    if (!in.is_ok()) return false;
    ConvertOptions options;
    options.type = TensorType::F16;
    options.threads = 2;
    options.plan.tensors = {{.name = "wo", .join_dim = 1}};
    for (int s = 0; s < 6; ++s) options.plan.tensors[0].pieces.push_back({.source = "w." + std::to_string(s)});
    return convert(**in, dir.file("out.safetensors"), options).is_ok();
  });
  ASSERT_GE(peak, 0) << "the conversion failed";
  RecordProperty("peak_bytes", std::to_string(peak));
  std::printf("join of 192 MiB: peak growth %lld bytes\n", peak);
  EXPECT_LT(peak, 128ll << 20);
}

}  // namespace
}  // namespace safeweights
