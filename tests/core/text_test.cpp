// Text for people: printable() escapes everything a terminal would act on, and nothing else. Text for
// machines: JsonWriter, the one writer of every JSON document printed, and error_json() built with it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "safeweights/text.h"

namespace safeweights {
namespace {

TEST(Printable, OrdinaryTextIsUnchanged) {
  const std::string text = "model.layers.0.weight: \xC3\xA9t\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 [1, 2] \\ ok";
  EXPECT_EQ(printable(text), text);
  EXPECT_EQ(printable(""), "");
}

TEST(Printable, C0AndDelBecomeHexEscapes) {
  EXPECT_EQ(printable("a\x1b[31mb\x07"
                      "c\rd\te\x7f"
                      "f"),
            "a\\x1b[31mb\\x07c\\x0dd\\x09e\\x7ff");
  EXPECT_EQ(printable(std::string("nul\0x", 5)), "nul\\x00x");
  EXPECT_EQ(printable("two\nlines"), "two\\x0alines");
  EXPECT_EQ(printable("two\nlines\r", LineBreaks::Keep), "two\nlines\\x0d");
}

TEST(Printable, C1ControlsBecomeCodePointEscapes) {
  EXPECT_EQ(printable("a\xC2\x9B"
                      "2J"),
            "a\\u{9b}2J");                                                     // U+009B, the 8-bit CSI
  EXPECT_EQ(printable("\xC2\x80\xC2\x9F\xC2\xA0"), "\\u{80}\\u{9f}\xC2\xA0");  // U+00A0 is not a control
}

TEST(Printable, BytesThatAreNotUtf8BecomeHexEscapes) {
  EXPECT_EQ(printable("a\x9B"
                      "b"),
            "a\\x9bb");  // a lone continuation byte (CSI on 8-bit terminals)
  EXPECT_EQ(printable("\xFF\xFE"), "\\xff\\xfe");
  EXPECT_EQ(printable("cut \xE2\x82"), "cut \\xe2\\x82");   // a truncated sequence
  EXPECT_EQ(printable("\xC0\xAF"), "\\xc0\\xaf");           // an overlong encoding
  EXPECT_EQ(printable("\xED\xA0\x80"), "\\xed\\xa0\\x80");  // a UTF-16 surrogate
}

TEST(JsonWriter, PlacesCommasAndColonsInNestedContainers) {
  JsonWriter w;
  const std::vector<std::uint64_t> shape{2, 3};
  w.object().key("a").uint(1).key("b").array().uint(2).boolean(true).null().object().end().array().end().end();
  w.key("shape").uints(shape).key("empty").uints({}).key("s").string("x").end();
  EXPECT_EQ(w.text(), R"({"a":1,"b":[2,true,null,{},[]],"shape":[2,3],"empty":[],"s":"x"})");
  JsonWriter top;
  top.array().uint(0).uint(UINT64_MAX).end();
  EXPECT_EQ(top.text(), "[0,18446744073709551615]");
}

TEST(JsonWriter, StringsAndKeysAreQuotedAsJsonQuoteDoes) {
  JsonWriter w;
  w.object().key("k\"\n").string("\x1b\xff\x01 \xC3\xA9").end();
  EXPECT_EQ(w.text(), "{" + json_quote("k\"\n") + ":" + json_quote("\x1b\xff\x01 \xC3\xA9") + "}");
  EXPECT_EQ(w.text(), "{\"k\\\"\\n\":\"\\u001b\xEF\xBF\xBD\\u0001 \xC3\xA9\"}");  // not UTF-8: U+FFFD
}

TEST(JsonWriter, NumbersAreShortestOrFixedAndNeverNanOrInfinity) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  JsonWriter w;
  w.array().number(0.1).number(1e308).number(-2.5).number(0.7071067811865476).number(nan).number(-inf).end();
  EXPECT_EQ(w.text(), "[0.1,1e+308,-2.5,0.7071067811865476,null,null]");
  JsonWriter f;
  f.array().fixed(12.5, 3).fixed(0.00004, 4).fixed(2.0 / 3.0, 0).fixed(nan, 3).fixed(inf, 3).fixed(1e308, 1).end();
  EXPECT_EQ(f.text().substr(0, 30), "[12.500,0.0000,1,null,null,100");
  EXPECT_EQ(f.text().size(), 30 + 309 - 3 + 3);  // 1e308 printed whole: 309 digits, ".0" and "]"
}

TEST(JsonWriter, RawValuesTakeTheirPlaceLikeAnyOther) {
  JsonWriter w;
  w.object().key("error").raw(R"({"kind":"IoError"})").key("n").raw("2e+308").end();
  EXPECT_EQ(w.text(), R"({"error":{"kind":"IoError"},"n":2e+308})");
}

TEST(ErrorJson, NamesTheKindRuleMessageAndContextKnown) {
  EXPECT_EQ(error_json(Error(ErrorKind::IoError, "write failed")), R"({"kind":"IoError","message":"write failed"})");
  const Error full = Error(ErrorKind::InvalidGguf, "cut \"short\"")
                         .with_rule(ErrorRule::GgufTruncated)
                         .with_file("m.gguf")
                         .with_entry("e")
                         .with_tensor("w\xff")
                         .with_offset(24);
  EXPECT_EQ(error_json(full), R"({"kind":"InvalidGguf","rule":"gguf.truncated","message":"cut \"short\"","file":"m.gguf","entry":"e","tensor":"w)"
                              "\xEF\xBF\xBD"
                              R"(","offset":24})");
}

}  // namespace
}  // namespace safeweights
