//===- JsonReaderTest.cpp - The strict JSON reader ------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/JsonReader.h"

#include <gtest/gtest.h>

using namespace dtfm::format;

TEST(JsonReader, ReadsEveryKindOfValue) {
  JsonValue v;
  std::string error;
  ASSERT_TRUE(parseJson(R"( {"a": [1, -2.5e1, true, false, null],
      "s": "q\"\\\/\b\f\n\r\tx\u00e9\ud83d\ude00", "big": 9007199254740993,
      "o": {}} )",
                        v, error))
      << error;
  ASSERT_EQ(v.kind, JsonValue::Kind::Object);
  ASSERT_EQ(v.members.size(), 4u);
  const JsonValue *a = v.find("a");
  ASSERT_TRUE(a && a->kind == JsonValue::Kind::Array && a->items.size() == 5);
  EXPECT_TRUE(a->items[0].isInteger);
  EXPECT_EQ(a->items[0].integer, 1);
  EXPECT_FALSE(a->items[1].isInteger);
  EXPECT_EQ(a->items[1].number, -25.0);
  EXPECT_TRUE(a->items[2].boolean);
  EXPECT_EQ(a->items[4].kind, JsonValue::Kind::Null);
  EXPECT_EQ(v.find("s")->string, "q\"\\/\b\f\n\r\tx\xc3\xa9\xf0\x9f\x98\x80");
  // Integers are exact beyond a double's 53 bits.
  EXPECT_EQ(v.find("big")->integer, 9007199254740993ll);
  EXPECT_EQ(v.find("o")->kind, JsonValue::Kind::Object);
  EXPECT_EQ(v.find("none"), nullptr);
}

TEST(JsonReader, RefusesWhatIsNotStrictJson) {
  struct Case {
    const char *text, *error;
  };
  for (Case c : std::initializer_list<Case>{
           {"", "at byte 0: the JSON ends where a value should be"},
           {"{\"a\": 1,}", "at byte 8: expected a string key"},
           {"[1, 2,]", "at byte 6: not a JSON value"},
           {"{\"a\": 1, \"a\": 2}", "at byte 9: the key \"a\" is given twice"},
           {"01", "at byte 0: a number with a leading zero"},
           {"1.", "at byte 2: a number needs digits after '.'"},
           {"1e999", "at byte 0: a number out of range"},
           {"NaN", "at byte 0: not a JSON value"},
           {"\"a\nb\"", "at byte 2: a control character inside a string"},
           {"\"\\x\"", "at byte 2: an unknown escape in a string"},
           {"\"\\ud800\"", "at byte 7: a high surrogate without its low half"},
           {"\"\\udc00\"", "at byte 7: a lone low surrogate in a \\u escape"},
           {"\"abc", "at byte 4: a string is not closed"},
           {"{} x", "at byte 3: trailing characters after the JSON value"},
           {"// c\n{}", "at byte 0: not a JSON value"},
           {"{'a': 1}", "at byte 1: expected a string key"},
       }) {
    JsonValue v;
    std::string error;
    EXPECT_FALSE(parseJson(c.text, v, error)) << c.text;
    EXPECT_EQ(error, c.error) << c.text;
  }
}

TEST(JsonReader, BoundsTheNesting) {
  std::string deep(kMaxJsonDepth, '['), closing(kMaxJsonDepth, ']');
  JsonValue v;
  std::string error;
  EXPECT_TRUE(parseJson(deep + closing, v, error)) << error;
  EXPECT_FALSE(parseJson("[" + deep + closing + "]", v, error));
  EXPECT_EQ(error, "at byte 64: nested deeper than 64");
}
