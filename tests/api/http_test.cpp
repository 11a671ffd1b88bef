// Media types (Content-Type) parsed by RFC 9110's grammar, not by prefix; request targets
// split and percent-decoded.
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

HttpRequest parsed(std::string target) {
  HttpRequest req;
  req.target = std::move(target);
  parse_target(req);
  return req;
}

TEST(Target, DecodesEscapesInThePathAndPlusAsSpaceOnlyInTheQuery) {
  auto req = parsed("/v1/tenants/a%2Fb+c/projects?name=x+y%26z&limit=20&flag&=v");
  EXPECT_EQ(req.path, "/v1/tenants/a/b+c/projects");
  EXPECT_FALSE(req.query_error);
  EXPECT_EQ(req.query.at("name"), "x y&z");
  EXPECT_EQ(req.query.at("limit"), "20");
  EXPECT_EQ(req.query.at("flag"), "");
  EXPECT_EQ(req.query.at(""), "v");
  EXPECT_EQ(parsed("/caf%C3%A9%20bar").path, "/caf\xC3\xA9 bar");
  EXPECT_EQ(parsed("/plain").path, "/plain");
  EXPECT_TRUE(parsed("/plain").query.empty());
}

TEST(Target, RefusesTruncatedOrBadEscapesAndInvalidUtf8) {
  for (const char* bad : {"/a%", "/a%4", "/a%zz", "/a%C3%28", "/%FF"}) {
    auto req = parsed(bad);
    EXPECT_EQ(req.query_error, "malformed percent-encoding in path") << bad;
    EXPECT_EQ(req.path, bad);  // kept raw for the error's message
  }
  for (const char* bad : {"/a?x=%4", "/a?x%zz=1", "/a?x=%FF"})
    EXPECT_EQ(parsed(bad).query_error, "malformed percent-encoding in query") << bad;
  EXPECT_EQ(parsed("/a?x=1&x=2").query_error, "query parameter 'x' repeated");
  EXPECT_EQ(parsed("/a%41%42?k=%41").path, "/aAB");
}

}  // namespace
}  // namespace gp::api
