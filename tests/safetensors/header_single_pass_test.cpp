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
  EXPECT_EQ(message_of(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":-9223372036854775809}})"), syntax(simdjson::NUMBER_ERROR));
  EXPECT_EQ(message_of(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1e999}})"), syntax(simdjson::NUMBER_ERROR));
  EXPECT_EQ(message_of(R"({"t":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})"), "shape must hold non-negative integers");
}

TEST(HeaderSinglePass, NegativeZeroBeatsSchemaErrors) {
  EXPECT_EQ(message_of(R"({"t":{"dtype":"X","shape":[-0],"data_offsets":[0,4]}})"), "invalid JSON in header: -0 is not an unsigned integer");
}

TEST(HeaderSinglePass, TheFirstSchemaErrorIsReported) {
  EXPECT_EQ(message_of(kBadDtype + R"(,"u":5})"), "unknown dtype `X`");
  EXPECT_EQ(message_of(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[-1]}})"), "data_offsets must have exactly 2 elements");
  EXPECT_EQ(message_of(R"({"t":["X",[1]]})"), "tensor entry must be an object");
  EXPECT_EQ(message_of(R"({"t":{"shape":[1],"data_offsets":[0,4]}})"), "missing field `dtype`");
}

// What reading entry `t` (between a metadata entry and a tensor `u` of 1 byte at 24) gives: the
// tensors, or the error.
std::string outcome(const std::string& entry) {
  const std::string json = R"({"__metadata__":{"k":"v"},"t":)" + entry + R"(,"u":{"dtype":"U8","shape":[1],"data_offsets":[24,25]}})";
  auto r = st::Header::parse(*mem(st_file(json, 25)));
  if (!r.is_ok()) return std::string(safeweights::error_kind_name(r.error().kind())) + ": " + r.error().message() + " @" + r.error().context().tensor;
  std::string out;
  for (const auto& t : r.value().tensors()) {
    out += std::string(t.name) + " " + std::string(st::type_code(t.dtype)) + " [";
    for (auto d : t.shape) out += std::to_string(d) + ",";
    out += "] " + std::to_string(t.begin) + "-" + std::to_string(t.end) + "; ";
  }
  return out;
}

// The reader takes entries spelled as the reference writes them ({"dtype":"F32","shape":[2],
// "data_offsets":[0,8]}) by exact matching, and any other spelling the general way. Each entry below
// deviates somewhere along the exact match, so that path gives up part-way; a space after its '{'
// sends the same entry down the general path from the start. Both must read it alike: the same
// tensor, or the same error.
TEST(HeaderSinglePass, TheReferenceSpellingReadsAsAnyOther) {
  const std::string entries[] = {
      R"({"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})",
      R"({"dtype":"F32","shape":[],"data_offsets":[0,4]})",
      R"({"dtype":"BF16","shape":[0],"data_offsets":[0,0]})",
      R"({"dtype":"F32","shape":[2,3],"data_offsets":[0,24],"x":1})",
      R"({"dtype":"F32","shape":[2, 3],"data_offsets":[0,24]})",
      R"({"dtype":"F32","shape":[6],"data_offsets":[0,24] })",
      R"({"dtype":"F32","shape":[6],"data_offsets":[0,24]})",
      R"({"dtype":"F33","shape":[6],"data_offsets":[0,24]})",
      R"({"dtype":"","shape":[6],"data_offsets":[0,24]})",
      R"({"dtype":"F32","shape":[06],"data_offsets":[0,24]})",
      R"({"dtype":"F32","shape":[-6],"data_offsets":[0,24]})",
      R"({"dtype":"F32","shape":[-0],"data_offsets":[0,24]})",
      R"({"dtype":"F32","shape":[6.0],"data_offsets":[0,24]})",
      R"({"dtype":"F32","shape":[6e0],"data_offsets":[0,24]})",
      R"({"dtype":"F32","shape":[6,],"data_offsets":[0,24]})",
      R"({"dtype":"F32","shape":[,6],"data_offsets":[0,24]})",
      R"({"dtype":"F32","shape":[6]],"data_offsets":[0,24]})",
      R"({"dtype":"F32","shape":[1000000000000000000],"data_offsets":[0,24]})",
      R"({"dtype":"F32","shape":[10000000000000000000],"data_offsets":[0,24]})",
      R"({"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,24]})",
      R"({"dtype":"F32","shape":[6],"data_offsets":[0,24,48]})",
      R"({"dtype":"F32","shape":[6],"data_offsets":[0]})",
      R"({"dtype":"F32","shape":[6],"data_offsets":[0,23]})",
      R"({"dtype":"F32","shape":[6],"data_offsets":[1,25]})",
      R"({"dtype":"F32","shape":[6],"data_offsets":[0,24]}x)",
      R"({"dtype":"F32","shape":[6],"data_offsets":[0,24],"dtype":"F32"})",
      R"({"dtype":"F32","shape":[6],"dtype":"F32","data_offsets":[0,24]})",
      R"({"shape":[6],"dtype":"F32","data_offsets":[0,24]})",
      R"({"dtype":"F32","shape":[6],"data_offsets":[0,24])",
      R"({"dtype":"F32","shape":[6],"data_offsets":[0,24)",
      R"({"dtype":"F32)",
      R"({"dtype":{"F32":null},"shape":[6],"data_offsets":[0,24]})",
  };
  for (const std::string& entry : entries) {
    const std::string general = "{ " + entry.substr(1);
    EXPECT_EQ(outcome(entry), outcome(general)) << entry;
  }
  EXPECT_EQ(outcome(entries[0]), "t F32 [2,3,] 0-24; u U8 [1,] 24-25; ");
}

// The exact path reads numbers eight digits at a time; every length, up to past what 64 bits hold,
// in every place a number stands, reads as the general path reads it.
TEST(HeaderSinglePass, NumbersOfEveryLengthReadAsTheGeneralPathReadsThem) {
  const std::string digits = "98765432109876543210987";
  for (std::size_t n = 1; n <= digits.size(); ++n) {
    for (const std::string& number : {digits.substr(0, n), std::string("1").append(n - 1, '0'), std::string(n, '9')}) {
      for (const std::string& entry : {R"({"dtype":"U8","shape":[)" + number + R"(],"data_offsets":[0,24]})",
                                       R"({"dtype":"U8","shape":[)" + number + R"(,1],"data_offsets":[0,24]})",
                                       R"({"dtype":"U8","shape":[24],"data_offsets":[)" + number + R"(,24]})",
                                       R"({"dtype":"U8","shape":[24],"data_offsets":[0,)" + number + R"(]})"}) {
        const std::string general = "{ " + entry.substr(1);
        EXPECT_EQ(outcome(entry), outcome(general)) << entry;
      }
    }
  }
  EXPECT_EQ(outcome(R"({"dtype":"U8","shape":[1234567890123456789],"data_offsets":[0,24]})"),
            "TensorInvalidInfo: shape and dtype need 1234567890123456789 bytes but data_offsets span 24 @t");
}

}  // namespace
