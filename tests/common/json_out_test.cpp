// JsonText writes what Json::dump() would for the same document, so a page written straight into
// its text reads the same as one built as Json; JsonObjectOut builds that Json.
#include "common/json_out.h"

#include <gtest/gtest.h>

namespace gp {
namespace {

struct Sample {
  std::string text;
  std::optional<std::string> maybe;
  int64_t n = 0;
  bool flag = false;
  void describe(ObjectOut& out) const {
    out.string("text", text);
    out.optional_string("maybe", maybe);
    out.integer("n", n);
    out.boolean("flag", flag);
    out.time("at", 1'700'000'000'123'456);
  }
};

std::string text_of(const Sample& s) {
  JsonText out;
  out.begin_object();
  s.describe(out);
  out.end_object();
  return std::move(out).take();
}

TEST(JsonOut, TextParsesToTheSameJsonAsTheBuiltObject) {
  for (const Sample& s :
       {Sample{"plain", std::nullopt, 0, false}, Sample{"quote \" back \\ slash", "x", -42, true},
        Sample{"ctl \n\t\r\b\f \x01\x1f end", "", INT64_MAX, false},
        Sample{"utf8 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", std::nullopt, INT64_MIN, true}}) {
    const Json built = json_of(s);
    EXPECT_EQ(Json::parse(text_of(s)), built) << text_of(s);
    EXPECT_EQ(built["at"], "2023-11-14T22:13:20.123456Z");
  }
}

TEST(JsonOut, StringsAreEscapedAsDumpEscapesThem) {
  const std::string s = "a\"b\\c\n\x01\x7f\xc3\xa9";
  JsonText out;
  out.value(s);
  EXPECT_EQ(std::move(out).take(), Json(s).dump());
}

TEST(JsonOut, InvalidUtf8BecomesTheReplacementCharacter) {
  // A lone continuation byte, a truncated sequence, an overlong form, a surrogate: each byte
  // that starts no valid sequence becomes one U+FFFD.
  JsonText out;
  out.value(
      std::string("a\x80"
                  "b\xe2\x82"
                  "c\xc0\xaf"
                  "d\xed\xa0\x80"
                  "e"));
  const std::string r = "\xef\xbf\xbd";
  EXPECT_EQ(std::move(out).take(), "\"a" + r + "b" + r + r + "c" + r + r + "d" + r + r + r + "e\"");
}

TEST(JsonOut, ArraysAndObjectsNestWithCommasOnlyBetweenMembers) {
  JsonText out;
  out.begin_object();
  out.key("items");
  out.begin_array();
  out.begin_object();
  out.integer("a", 1);
  out.end_object();
  out.begin_object();
  out.end_object();
  out.value(int64_t{3});
  out.end_array();
  out.null("next");
  out.end_object();
  EXPECT_EQ(std::move(out).take(), R"({"items":[{"a":1},{},3],"next":null})");
}

}  // namespace
}  // namespace gp
