// The format registry (detection by content, one registration per format), the format-neutral
// TensorFile / TensorSink, copy_tensors, and the Resolver.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "safeweights/dduf.h"
#include "safeweights/format.h"
#include "safeweights/resolver.h"
#include "safeweights/safetensors_writer.h"
#include "safeweights/sharded.h"
#include "test_util.h"

namespace {

using namespace swt;
using K = safeweights::ErrorKind;
namespace st = safeweights::safetensors;
namespace sw = safeweights;

std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> out(s.size());
  if (!s.empty()) std::memcpy(out.data(), s.data(), s.size());  // an empty vector's data() may be null
  return out;
}

// Three tensors of different types, and metadata.
void write_sample(const std::string& path) {
  static const std::vector<std::byte> a = bytes_of("0123456789abcdef"), b = bytes_of("xy"), c = bytes_of("");
  std::vector<st::TensorData> tensors = {{"w", TensorType::F32, {2, 2}, a}, {"b", TensorType::U8, {2}, b}, {"empty", TensorType::BF16, {0, 3}, c}};
  ASSERT_TRUE(st::write_file(path, tensors, st::MetadataEntries{{"format", "pt"}}).is_ok());
}

std::string detected(const std::string& path) {
  auto format = sw::detect_format(path);
  return format.is_ok() ? std::string((*format)->name()) : "error: " + format.status().to_string();
}

TEST(Registry, EveryFormatRegisteredOnceByName) {
  std::set<std::string> names;
  for (const sw::Format* f : sw::formats()) {
    EXPECT_TRUE(names.insert(std::string(f->name())).second) << f->name();
    EXPECT_EQ(sw::find_format(f->name()), f);
  }
  EXPECT_EQ(names, (std::set<std::string>{"safetensors", "safetensors-index", "dduf", "pytorch", "gguf"}));
  EXPECT_EQ(sw::find_format("ggml"), nullptr);
}

TEST(Registry, DetectsByContentNotByName) {
  TempDir dir;
  write_sample(dir.file("model.bin"));  // a safetensors file with a checkpoint's name
  EXPECT_EQ(detected(dir.file("model.bin")), "safetensors");

  const auto abcd = bytes_of("abcd"), efgh = bytes_of("efgh");
  st::ShardOptions shard;
  shard.max_shard_bytes = 1;
  std::vector<st::TensorData> two = {{"t", TensorType::F32, {1}, abcd}, {"u", TensorType::F32, {1}, efgh}};
  ASSERT_TRUE(st::write_sharded(dir.path(), two, shard).is_ok());
  EXPECT_EQ(detected(dir.file("model.safetensors.index.json")), "safetensors-index");

  auto exporter = sw::dduf::Exporter::create(dir.file("p.dduf"));
  ASSERT_TRUE(exporter.is_ok());
  ASSERT_TRUE(exporter->add_bytes("model_index.json", bytes_of("{}")).is_ok());
  ASSERT_TRUE(exporter->finish().is_ok());
  std::filesystem::copy_file(dir.file("p.dduf"), dir.file("archive.safetensors"));
  EXPECT_EQ(detected(dir.file("p.dduf")), "dduf");
  EXPECT_EQ(detected(dir.file("archive.safetensors")), "dduf");

  // torch.save's ZIP layout (the first member is <root>/data.pkl) and the legacy pickle's magic.
  std::string torch_zip = "PK\x03\x04" + std::string(22, '\0') + std::string("\x10\x00\x00\x00", 4) + "archive/data.pkl";
  write_file_bytes(dir.file("ckpt"), torch_zip);
  EXPECT_EQ(detected(dir.file("ckpt")), "pytorch");
  write_file_bytes(dir.file("legacy"), std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 14) + "rest");
  EXPECT_EQ(detected(dir.file("legacy")), "pytorch");

  // Anything unrecognised goes to the safetensors reader, whose error says what is wrong.
  write_file_bytes(dir.file("junk"), "hello");
  EXPECT_EQ(detected(dir.file("junk")), "safetensors");
  auto v = sw::find_format("safetensors")->validate(dir.file("junk"), {});
  ASSERT_FALSE(v.is_ok());
  EXPECT_EQ(v.error().kind(), K::HeaderTooSmall);
  EXPECT_EQ(sw::detect_format(dir.file("absent")).error().kind(), K::FileNotFound);
}

TEST(Registry, PytorchCheckpointsAreReadOrRefusedByName) {
  TempDir dir;
  // The legacy stream's magic number with nothing after it: a truncated pickle, named with its offset.
  write_file_bytes(dir.file("legacy.pt"), std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 14));
  const sw::Format& format = *sw::detect_format(dir.file("legacy.pt")).value();
  EXPECT_EQ(format.name(), "pytorch");
  auto v = format.validate(dir.file("legacy.pt"), {});
  ASSERT_FALSE(v.is_ok());
  EXPECT_EQ(v.error().kind(), K::InvalidPickle);
  EXPECT_NE(v.error().message().find("truncated"), std::string::npos) << v.error().message();
  // A tar-format checkpoint (torch < 0.4) is named and refused.
  std::string tar(1024, '\0');
  tar.replace(257, 5, "ustar");
  write_file_bytes(dir.file("old.pth"), tar);
  auto t = sw::detect_format(dir.file("old.pth")).value()->validate(dir.file("old.pth"), {});
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.error().kind(), K::NotSupported);
  EXPECT_NE(t.error().message().find("tar-format"), std::string::npos) << t.error().message();
}

TEST(TensorFileView, SafetensorsEntriesMatchTheReader) {
  TempDir dir;
  write_sample(dir.file("m.safetensors"));
  auto file = sw::find_format("safetensors")->open(dir.file("m.safetensors"), {}, {});
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  auto reader = st::Reader::open(dir.file("m.safetensors")).value();
  EXPECT_EQ((*file)->format(), "safetensors");
  ASSERT_EQ((*file)->tensors().size(), reader.header().tensors().size());
  for (const st::TensorInfo& info : reader.header().tensors()) {
    const sw::TensorEntry* e = (*file)->find(info.name);
    ASSERT_NE(e, nullptr) << info.name;
    EXPECT_EQ(e->name, info.name);
    EXPECT_EQ(e->type, info.dtype);
    EXPECT_TRUE(std::equal(e->shape.begin(), e->shape.end(), info.shape.begin(), info.shape.end()));
    EXPECT_EQ(e->offset, reader.header().data_start() + info.begin);
    EXPECT_EQ(e->nbytes, info.nbytes());
    std::vector<std::byte> got(e->nbytes);
    ASSERT_TRUE(e->read(got).is_ok());
    auto view = e->view();
    EXPECT_TRUE(std::equal(got.begin(), got.end(), view.begin(), view.end()));
  }
  ASSERT_NE((*file)->metadata(), nullptr);
  EXPECT_EQ((*file)->metadata()->to_string_map(), (sw::MetadataEntries{{"format", "pt"}}));
  EXPECT_EQ(*(*file)->metadata(), sw::Metadata({{"safetensors.format", sw::MetaValue::string("pt")}}, /*string_map=*/true));
  auto missing = (*file)->tensor("nope");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.error().kind(), K::TensorNotFound);
  EXPECT_EQ(missing.error().context().file, dir.file("m.safetensors"));
}

TEST(TensorFileView, CopyThroughASinkReproducesTheFile) {
  TempDir dir;
  write_sample(dir.file("in.safetensors"));
  auto file = sw::find_format("safetensors")->open(dir.file("in.safetensors"), {}, {}).value();
  std::vector<sw::TensorDecl> decls;
  for (const auto& e : file->tensors()) decls.push_back({std::string(e.name), e.type, {e.shape.begin(), e.shape.end()}});
  auto sink = st::create(dir.file("out.safetensors"), decls, file->metadata()->to_string_map());
  ASSERT_TRUE(sink.is_ok());
  sw::TensorSink& as_sink = **sink;
  ASSERT_TRUE(sw::copy_tensors(*file, as_sink).is_ok());
  EXPECT_EQ(read_file_bytes(dir.file("out.safetensors")), read_file_bytes(dir.file("in.safetensors")));
}

TEST(TensorFileView, ShardedAndDdufMembersLookTheSame) {
  TempDir dir;
  const auto abcd = bytes_of("abcd"), efgh = bytes_of("efgh");
  std::vector<st::TensorData> two = {{"t", TensorType::F32, {1}, abcd}, {"u", TensorType::I16, {2}, efgh}};
  st::ShardOptions shard;
  shard.max_shard_bytes = 1;
  ASSERT_TRUE(st::write_sharded(dir.path(), two, shard).is_ok());
  auto sharded = sw::find_format("safetensors-index")->open(dir.file("model.safetensors.index.json"), {}, {});
  ASSERT_TRUE(sharded.is_ok()) << sharded.status().to_string();
  ASSERT_EQ((*sharded)->tensors().size(), 2u);
  const sw::TensorEntry* u = (*sharded)->find("u");
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->type, TensorType::I16);
  EXPECT_NE(u->source->name().find("model-00002-of-00002.safetensors"), std::string::npos);
  std::vector<std::byte> got(u->nbytes);
  ASSERT_TRUE(u->read(got).is_ok());
  EXPECT_EQ(got, bytes_of("efgh"));

  write_sample(dir.file("unet.safetensors"));
  auto exporter = sw::dduf::Exporter::create(dir.file("p.dduf"));
  ASSERT_TRUE(exporter->add_bytes("model_index.json", bytes_of("{\"unet\": [\"x\", \"y\"]}")).is_ok());
  ASSERT_TRUE(exporter->add_bytes("unet/config.json", bytes_of("{}")).is_ok());
  ASSERT_TRUE(exporter->add_file("unet/m.safetensors", dir.file("unet.safetensors")).is_ok());
  ASSERT_TRUE(exporter->finish().is_ok());
  const sw::Format& dduf = *sw::find_format("dduf");
  EXPECT_EQ(dduf.open(dir.file("p.dduf"), {}, {}).error().kind(), K::InvalidArgument);  // which member?
  const std::vector<std::string> member = {"unet/m.safetensors"};
  auto inner = dduf.open(dir.file("p.dduf"), member, {});
  ASSERT_TRUE(inner.is_ok()) << inner.status().to_string();
  EXPECT_EQ((*inner)->tensors().size(), 3u);
  auto target = dduf.locate(dir.file("p.dduf"), std::vector<std::string>{"unet/m.safetensors", "w"}, {});
  ASSERT_TRUE(target.is_ok()) << target.status().to_string();
  ASSERT_NE(target->tensor, nullptr);
  EXPECT_EQ(target->length, 16u);
  std::vector<std::byte> w(16);
  ASSERT_TRUE(target->source->read_at(target->offset, w).is_ok());
  EXPECT_EQ(w, bytes_of("0123456789abcdef"));
}

TEST(ResolverNames, SiblingsOfPathsAndUrls) {
  EXPECT_EQ(sw::sibling_name("a/b/index.json", "s.safetensors"), "a/b/s.safetensors");
  EXPECT_EQ(sw::sibling_name("index.json", "s.safetensors"), "s.safetensors");
  EXPECT_EQ(sw::sibling_name("/index.json", "s"), "/s");
  EXPECT_EQ(sw::sibling_name("https://h:8/x/y/i.json?download=1#f", "s"), "https://h:8/x/y/s");
  EXPECT_EQ(sw::sibling_name("http://h/i.json", "s"), "http://h/s");
  EXPECT_EQ(sw::sibling_name("http://h", "s"), "http://h/s");
  // An s3:// key and an hf:// path may hold '?' and '#': nothing is dropped but the last segment.
  EXPECT_EQ(sw::sibling_name("s3://bucket/a?b/c#d/model.safetensors.index.json", "s"), "s3://bucket/a?b/c#d/s");
  EXPECT_EQ(sw::sibling_name("s3://bucket/i.json", "s"), "s3://bucket/s");
  EXPECT_EQ(sw::sibling_name("hf://org/repo@v1/sub/i.json", "s"), "hf://org/repo@v1/sub/s");
}

TEST(ResolverNames, DefaultResolverSharesWhatItOpened) {
  TempDir dir;
  write_sample(dir.file("m.safetensors"));
  auto resolver = sw::caching_resolver();
  auto first = resolver->open(dir.file("m.safetensors"));
  auto second = resolver->open(dir.file("m.safetensors"));
  ASSERT_TRUE(first.is_ok() && second.is_ok());
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ(resolver->open(dir.file("absent")).error().kind(), K::FileNotFound);
}

}  // namespace
