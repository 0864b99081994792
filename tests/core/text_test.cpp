// Text for people: printable() escapes everything a terminal would act on, and nothing else.
#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace safeweights
