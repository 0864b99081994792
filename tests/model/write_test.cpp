// The writing half of the registry and the neutral metadata (format.h, metadata.h): output_format by
// name and extension, each format's can_hold refusal, and Metadata mapped through each format's own
// table by Format::create (read back through the readers, never through the code under test).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "safeweights/format.h"
#include "safeweights/gguf.h"
#include "safeweights/metadata.h"
#include "safeweights/safetensors.h"
#include "test_util.h"

namespace {

using namespace swt;
namespace sw = safeweights;
using K = sw::ErrorKind;

TEST(OutputFormat, ByExtensionOrByName) {
  EXPECT_EQ((*sw::output_format("a/b.gguf"))->name(), "gguf");
  EXPECT_EQ((*sw::output_format("b.safetensors"))->name(), "safetensors");
  EXPECT_EQ((*sw::output_format("b.bin", "gguf"))->name(), "gguf");
  EXPECT_EQ((*sw::output_format("b.gguf", "safetensors"))->name(), "safetensors");
  auto unknown = sw::output_format("b.bin");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_EQ(unknown.error().kind(), K::InvalidArgument);
  EXPECT_EQ(unknown.error().context().file, "b.bin");
  for (const char* ext : {".safetensors", ".safetensors.index.json", ".gguf"})
    EXPECT_NE(unknown.error().message().find(ext), std::string::npos) << unknown.error().message();
  EXPECT_EQ((*sw::output_format("out/model.safetensors.index.json"))->name(), "safetensors-index");
  // A format that is read but not written is not an output.
  auto dduf = sw::output_format("x", "dduf");
  ASSERT_FALSE(dduf.is_ok());
  EXPECT_NE(dduf.error().message().find("(safetensors, safetensors-index, gguf)"), std::string::npos) << dduf.error().message();
  EXPECT_EQ(sw::find_format("dduf")->create("x.dduf", {}, nullptr, {}).status().error().kind(), K::NotSupported);
}

TEST(OutputFormat, EachFormatSaysWhatItCannotHold) {
  const sw::Format& st = *sw::find_format("safetensors");
  const sw::Format& gguf = *sw::find_format("gguf");
  EXPECT_TRUE(st.can_hold(sw::TensorType::BF16).is_ok());
  EXPECT_TRUE(IsKind(st.can_hold(sw::TensorType::Q8_0), K::InvalidArgument));
  EXPECT_TRUE(gguf.can_hold(sw::TensorType::Q8_0).is_ok());
  EXPECT_TRUE(IsKind(gguf.can_hold(sw::TensorType::BOOL), K::NotSupported));
}

TEST(Metadata, StringMapsRoundTripAndSetReplacesInPlace) {
  const sw::MetadataEntries map = {{"format", "pt"}, {"k", "v"}};
  sw::Metadata md = sw::Metadata::from_string_map(map);
  ASSERT_EQ(md.size(), 2u);
  EXPECT_EQ(md.entries()[0].key, "safetensors.format");
  EXPECT_EQ(md.to_string_map(), map);
  md.set({"safetensors.format", sw::MetaValue::string("gguf")});
  md.set({"general.architecture", sw::MetaValue::string("llama")});
  EXPECT_EQ(md.entries()[0].value.str, "gguf");
  EXPECT_EQ(md.entries()[2].key, "general.architecture");
  EXPECT_EQ(md.to_string_map(), (sw::MetadataEntries{{"format", "gguf"}, {"k", "v"}}));  // not the typed pair
  md.erase("safetensors.k");
  EXPECT_EQ(md.find("safetensors.k"), nullptr);
  // An empty map read from a string-map format stays a map; typed metadata without string pairs has none.
  EXPECT_EQ(sw::Metadata::from_string_map({}).to_string_map(), sw::MetadataEntries{});
  EXPECT_EQ(sw::Metadata({{"general.name", sw::MetaValue::string("x")}}).to_string_map(), std::nullopt);
}

TEST(FormatCreate, EachFormatMapsMetadataThroughItsOwnTable) {
  TempDir dir;
  sw::Metadata md({{"general.alignment", sw::MetaValue::u32(64)},
                   {"safetensors.format", sw::MetaValue::string("pt")},
                   {"split.count", sw::MetaValue::u16(3)},
                   {"general.name", sw::MetaValue::string("m")}});
  const std::vector<sw::TensorDecl> decls = {{"w", sw::TensorType::F32, {2}}};
  const std::vector<std::byte> bytes(8, std::byte{1});
  for (const char* name : {"safetensors", "gguf"}) {
    const std::string path = dir.file(std::string("m.") + name);
    auto sink = sw::find_format(name)->create(path, decls, &md, {});
    ASSERT_TRUE(sink.is_ok()) << sink.error().to_string();
    ASSERT_TRUE((*sink)->write("w", bytes).is_ok());
    ASSERT_TRUE((*sink)->finish().is_ok());
    EXPECT_EQ(std::vector<std::string>((*sink)->files().begin(), (*sink)->files().end()), std::vector<std::string>{path});
  }
  // safetensors: the string map only.
  auto st = sw::safetensors::Reader::open(dir.file("m.safetensors"));
  ASSERT_TRUE(st.is_ok());
  EXPECT_EQ(st->header().metadata().entries(), (sw::MetadataEntries{{"format", "pt"}}));
  // GGUF: the alignment as the file's (its key first), no split keys, the rest in order.
  auto g = sw::gguf::open(dir.file("m.gguf"));
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ((*g)->alignment(), 64u);
  std::vector<std::string> keys;
  for (const auto& e : (*g)->kv()) keys.push_back(e.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"general.alignment", "safetensors.format", "general.name"}));
  // GGUF's typed pairs come back as they were written, through the neutral view.
  EXPECT_EQ(*(*g)->metadata()->find("general.name"), sw::MetaValue::string("m"));
  // One file always for safetensors.
  sw::WriteOptions split;
  split.split.max_tensors = 1;
  EXPECT_TRUE(IsKind(sw::find_format("safetensors")->create(dir.file("s.safetensors"), decls, nullptr, split).status(), K::InvalidArgument));
}

}  // namespace
