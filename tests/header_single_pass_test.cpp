// The header is read in one pass (json/pull.h), where the DOM parser it replaced checked the whole
// document before any schema rule. These pin what must not change with that: a syntax error anywhere
// beats a schema error, the errors simdjson's first stage found come first, the first schema error is
// the one reported, and the messages are the ones the DOM reader gave.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <string>

#include "test_util.h"

namespace {

using namespace swt;
namespace st = safeweights::safetensors;
using K = safeweights::ErrorKind;

std::string message_of(const std::string& json, std::uint64_t data = 4) {
  auto r = st::Header::parse(*mem(st_file(json, data)));
  EXPECT_FALSE(r.is_ok()) << json;
  if (r.is_ok()) return "";
  EXPECT_EQ(r.error().kind(), K::InvalidHeaderDeserialization) << json;
  return r.error().message();
}

std::string syntax(simdjson::error_code e) { return std::string("invalid JSON in header: ") + simdjson::error_message(e); }

const std::string kBadDtype = R"({"t":{"dtype":"X","shape":[1],"data_offsets":[0,4]})";

TEST(HeaderSinglePass, ASyntaxErrorAfterASchemaErrorWins) {
  EXPECT_EQ(message_of(kBadDtype + R"(,"u":{"dtype":"F32","shape":[1],"data_offsets":[0,4],}})"), syntax(simdjson::TAPE_ERROR));
  EXPECT_EQ(message_of(kBadDtype + R"(,"u":[1,2,tru]})"), syntax(simdjson::T_ATOM_ERROR));
  EXPECT_EQ(message_of(kBadDtype + R"(,"u":"\q"})"), syntax(simdjson::STRING_ERROR));
}

TEST(HeaderSinglePass, FirstStageErrorsComeBeforeEarlierOnes) {
  EXPECT_EQ(message_of(R"({"a\q":1,"b)"), syntax(simdjson::UNCLOSED_STRING));
  EXPECT_EQ(message_of("{\"a\\q\":1,\"b\x01\":2}"), syntax(simdjson::UNESCAPED_CHARS));
  EXPECT_EQ(message_of(R"({"a\q":1} x)"), syntax(simdjson::TAPE_ERROR));
}

TEST(HeaderSinglePass, NumbersAsSimdjsonReadsThem) {
  const std::string big = R"({"t":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,4]}})";
  EXPECT_EQ(message_of(big), syntax(simdjson::NUMBER_ERROR));
  EXPECT_EQ(message_of(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":-9223372036854775809}})"),
            syntax(simdjson::NUMBER_ERROR));
  EXPECT_EQ(message_of(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1e999}})"), syntax(simdjson::NUMBER_ERROR));
  EXPECT_EQ(message_of(R"({"t":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})"), "shape must hold non-negative integers");
}

TEST(HeaderSinglePass, NegativeZeroBeatsSchemaErrors) {
  EXPECT_EQ(message_of(R"({"t":{"dtype":"X","shape":[-0],"data_offsets":[0,4]}})"),
            "invalid JSON in header: -0 is not an unsigned integer");
}

TEST(HeaderSinglePass, TheFirstSchemaErrorIsReported) {
  EXPECT_EQ(message_of(kBadDtype + R"(,"u":5})"), "unknown dtype `X`");
  EXPECT_EQ(message_of(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[-1]}})"), "data_offsets must have exactly 2 elements");
  EXPECT_EQ(message_of(R"({"t":["X",[1]]})"), "tensor entry must be an object");
  EXPECT_EQ(message_of(R"({"t":{"shape":[1],"data_offsets":[0,4]}})"), "missing field `dtype`");
}

}  // namespace
