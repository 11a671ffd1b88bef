// Media types (Content-Type) parsed by RFC 9110's grammar, not by prefix.
#include "api/http.h"

#include <gtest/gtest.h>

namespace gp::api {
namespace {

TEST(MediaType, ParsesTypeSubtypeAndParameters) {
  auto t = parse_media_type("Application/JSON ; Charset=\"UTF-8\";  q=\"a\\\"b\"");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->essence(), "application/json");
  ASSERT_EQ(t->parameters.size(), 2u);
  EXPECT_EQ(t->parameter("charset"), "UTF-8");
  EXPECT_EQ(t->parameter("q"), "a\"b");
  EXPECT_EQ(parse_media_type("application/merge-patch+json")->subtype, "merge-patch+json");
  EXPECT_EQ(parse_media_type("application/jsonfoo")->subtype, "jsonfoo");
  EXPECT_TRUE(parse_media_type("application/json;charset=utf-8")->parameter("charset"));
}

TEST(MediaType, RefusesWhatIsNoMediaType) {
  for (const char* bad :
       {"", "application", "application/", "/json", "application/json foo", "application/json;",
        "application/json; charset", "application/json; =x",
        "application/json; charset=", "application/json; charset=\"utf-8",
        "application/json, text/plain", "application/json\x01", "appli cation/json"})
    EXPECT_FALSE(parse_media_type(bad)) << bad;
}

}  // namespace
}  // namespace gp::api
