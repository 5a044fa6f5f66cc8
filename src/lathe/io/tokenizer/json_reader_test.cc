// JsonDoc: values, escapes (incl. surrogate pairs, unescaped in place), lookups and error reporting.
#include "lathe/io/tokenizer/json_reader.h"

#include <gtest/gtest.h>

#include "lathe/base/error.h"

namespace lathe::tokenizer {
namespace {

TEST(JsonReader, ParsesValuesAndEscapes) {
  JsonDoc d = JsonDoc::parse(
      R"({"a": 1, "b": [true, false, null, -2.5e1], "s": "x\ny\u00e9\ud83d\ude42\"\\/", "o": {"k": "v"}, "e": {}})");
  JsonRef r = d.root();
  EXPECT_EQ(r["a"].integer(), 1);
  EXPECT_EQ(r["b"].size(), 4u);
  std::vector<JsonKind> kinds;
  r["b"].for_each_element([&](JsonRef v) { kinds.push_back(v.kind()); });
  EXPECT_EQ(kinds, (std::vector<JsonKind>{JsonKind::kBool, JsonKind::kBool, JsonKind::kNull, JsonKind::kNumber}));
  double last = 0;
  r["b"].for_each_element([&](JsonRef v) {
    if (v.is_number()) last = v.num();
  });
  EXPECT_DOUBLE_EQ(last, -25.0);
  EXPECT_EQ(r["s"].str(), "x\ny\xC3\xA9\xF0\x9F\x99\x82\"\\/");
  EXPECT_EQ(r["o"]["k"].str(), "v");
  EXPECT_FALSE(r["missing"].valid());
  EXPECT_TRUE(r["missing"].is_null());
  EXPECT_EQ(r["e"].size(), 0u);
  int members = 0;
  r.for_each_member([&](std::string_view, JsonRef) { ++members; });
  EXPECT_EQ(members, 5);
}

TEST(JsonReader, ReportsErrors) {
  EXPECT_THROW(JsonDoc::parse("{\"a\": }"), FormatError);
  EXPECT_THROW(JsonDoc::parse("[1, 2"), FormatError);
  EXPECT_THROW(JsonDoc::parse("\"unterminated"), FormatError);
  EXPECT_THROW(JsonDoc::parse("{} x"), FormatError);
  // Numbers are validated when read.
  JsonDoc bad = JsonDoc::parse("[1e]");
  bad.root().for_each_element([](JsonRef v) { EXPECT_THROW(v.num(), FormatError); });
}

TEST(JsonReader, TypedAccessorsCheckKinds) {
  JsonDoc d = JsonDoc::parse(R"({"n": 1.5, "s": "x"})");
  EXPECT_THROW(d.root()["s"].integer("s"), FormatError);
  EXPECT_THROW(d.root()["n"].integer("n"), FormatError);
  EXPECT_THROW(d.root()["n"].str("n"), FormatError);
}

}  // namespace
}  // namespace lathe::tokenizer
