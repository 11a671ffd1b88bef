#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/crypto.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/page.h"

namespace gp {
namespace {

TEST(ParseJson, RejectsMalformedInvalidUtf8AndDeepNesting) {
  EXPECT_TRUE(parse_json(R"({"a": [1, 2, {"b": null}]})").has_value());
  EXPECT_EQ(parse_json("{\"a\": ").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(parse_json("{} {}").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(parse_json("{\"a\": \"\xff\xfe\"}").error().message, "request body is not valid UTF-8");
  std::string deep(100, '[');
  deep += std::string(100, ']');
  EXPECT_NE(parse_json(deep).error().message.find("nesting"), std::string::npos);
  std::string ok_depth(kMaxJsonDepth, '[');
  ok_depth += std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parse_json(ok_depth).has_value());
}

// Found by fuzz/fuzz_json (fuzz/corpus/json/regress-number-overflow): a number beyond double's
// range made nlohmann throw out_of_range, which escaped parse_json and terminated the process.
TEST(ParseJson, RejectsNumbersOutOfRangeWithoutThrowing) {
  for (std::string_view text : {"123453e678", "[1, -1e999]", R"({"memory_bytes": 858993e59120})"}) {
    auto j = parse_json(text);
    ASSERT_FALSE(j) << text;
    EXPECT_EQ(j.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(j.error().message, "JSON number out of range");
  }
  EXPECT_TRUE(parse_json("1e308").has_value());
  EXPECT_TRUE(parse_json("18446744073709551616").has_value());  // beyond uint64: a double
}

TEST(ObjectReader, ReportsUnknownFieldsWrongTypesAndRanges) {
  Json j = {{"name", "x"}, {"count", 5}, {"extra", true}};
  {
    ObjectReader r(j, "thing");
    EXPECT_EQ(r.string("name"), "x");
    EXPECT_EQ(r.integer("count", 0, 10), 5);
    auto f = r.finish();
    ASSERT_FALSE(f);
    EXPECT_EQ(f.error().message, "unknown field 'extra' in thing");
  }
  {
    ObjectReader r(j, "thing");
    r.integer("name", 0, 1);
    r.optional_bool("extra");
    r.integer("count", 0, 1);
    EXPECT_EQ(r.finish().error().message, "field 'name': must be an integer");
  }
  {
    ObjectReader r(j, "thing");
    r.string("name");
    r.optional_bool("extra");
    r.integer("count", 0, 4);
    EXPECT_EQ(r.finish().error().message, "field 'count': must be between 0 and 4");
  }
  {
    Json arr = Json::array();
    ObjectReader r(arr, "body");
    EXPECT_EQ(r.finish().error().message, "body must be a JSON object");
  }
  {
    Json empty = Json::object();
    ObjectReader r(empty, "body");
    r.string("name");
    EXPECT_EQ(r.finish().error().message, "field 'name' is required");
  }
  {
    Json long_name = {{"name", std::string(300, 'a')}};
    ObjectReader r(long_name, "body");
    r.string("name", 63);
    EXPECT_EQ(r.finish().error().message, "field 'name': longer than 63 characters");
  }
}

TEST(DnsLabel, AcceptsOnlyLowercaseLabels) {
  EXPECT_TRUE(validate_dns_label("name", "acme-1"));
  for (const std::string& bad :
       std::vector<std::string>{"", "Acme", "1acme", "acme-", "ac_me", "a.b", std::string(64, 'a')})
    EXPECT_FALSE(validate_dns_label("name", bad)) << bad;
}

TEST(Utf8, RejectsOverlongsSurrogatesAndTruncation) {
  EXPECT_TRUE(is_valid_utf8("héllo \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xe2\x82"));          // truncated
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // > U+10FFFF
}

TEST(Encoding, HexAndBase64UrlRoundTrip) {
  std::string bytes = random_bytes(37);
  EXPECT_EQ(*hex_decode(hex_encode(bytes)), bytes);
  EXPECT_EQ(*base64url_decode(base64url_encode(bytes)), bytes);
  EXPECT_EQ(base64url_encode("\xfb\xff"), "-_8");
  EXPECT_FALSE(hex_decode("zz"));
  EXPECT_EQ(hex_encode(sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// Small draws come from a per-thread pool; a forked child must not hand out the bytes its
// parent hands out next (both would hold the same copy of the pool).
TEST(Random, AForkedChildDrawsOtherBytesThanItsParent) {
  (void)random_bytes(8);  // the pool is filled, with most of it left
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string drawn = random_bytes(16);
    const bool sent = ::write(fds[1], drawn.data(), drawn.size()) == ssize_t(drawn.size());
    ::_exit(sent ? 0 : 1);
  }
  const std::string mine = random_bytes(16);
  std::string theirs(16, '\0');
  ASSERT_EQ(::read(fds[0], theirs.data(), theirs.size()), 16);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(fds[0]);
  ::close(fds[1]);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(mine, theirs);
}

TEST(Clock, Rfc3339RoundTripAndOffsets) {
  TimePoint t;
  ASSERT_TRUE(parse_rfc3339("2026-11-29T22:49:10.5Z", &t));
  EXPECT_EQ(format_rfc3339(t), "2026-11-29T22:49:10.500000Z");
  TimePoint u;
  ASSERT_TRUE(parse_rfc3339("2026-11-30T00:49:10.5+02:00", &u));
  EXPECT_EQ(t, u);
  for (auto bad : {"2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-11-29 22:49:10Z",
                   "2026-11-29T22:49:10", "2026-11-29T22:49:10Zjunk"})
    EXPECT_FALSE(parse_rfc3339(bad, &t)) << bad;
}

TEST(Clock, Rfc3339KeepsEveryFieldsWidthAcrossTheCalendar) {
  for (auto [text, want] : std::initializer_list<std::pair<const char*, const char*>>{
           {"1970-01-01T00:00:00Z", "1970-01-01T00:00:00.000000Z"},
           {"1969-12-31T23:59:59.999999Z", "1969-12-31T23:59:59.999999Z"},
           {"2000-02-29T09:05:07.000042Z", "2000-02-29T09:05:07.000042Z"},
           {"0999-01-02T03:04:05.6Z", "0999-01-02T03:04:05.600000Z"},
           {"2199-12-31T23:59:59.123456Z", "2199-12-31T23:59:59.123456Z"}}) {
    TimePoint t;
    ASSERT_TRUE(parse_rfc3339(text, &t)) << text;
    EXPECT_EQ(format_rfc3339(t), want);
  }
}

// Years 0-9999 are written in place; others (which no stored time holds) through fmt.
TEST(Clock, Rfc3339WritesYearsBeyondFourDigitsTheSlowWay) {
  const TimePoint y10k = from_unix_micros(int64_t(253'402'300'800) * 1'000'000);
  Rfc3339Buffer buf;
  EXPECT_FALSE(format_rfc3339_to(buf, y10k));
  EXPECT_EQ(format_rfc3339(y10k), "10000-01-01T00:00:00.000000Z");
  const TimePoint before = y10k - std::chrono::microseconds(1);
  EXPECT_EQ(format_rfc3339_to(buf, before), "9999-12-31T23:59:59.999999Z");
  EXPECT_EQ(format_rfc3339(before), "9999-12-31T23:59:59.999999Z");
}

TEST(Ids, SeededSourceIsReproducibleAndPrefixed) {
  SeededIdSource a(7), b(7);
  std::string x = a.next("ten");
  EXPECT_EQ(x, b.next("ten"));
  EXPECT_EQ(x.size(), 4u + 16u);
  EXPECT_TRUE(x.starts_with("ten_"));
  EXPECT_NE(a.next("ten"), x);
  RandomIdSource r;
  EXPECT_NE(r.next("k"), r.next("k"));
}

TEST(Ids, ProductionIdsSortByCreationTime) {
  RandomIdSource r;
  std::string first = r.next("alc");
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  std::string later = r.next("alc");
  EXPECT_LT(first, later);
  EXPECT_EQ(later.size(), 4u + 16u);
  // The random half differs between ids made in the same millisecond.
  std::set<std::string> tails;
  for (int i = 0; i < 100; ++i) tails.insert(r.next("alc").substr(12));
  EXPECT_GT(tails.size(), 95u);
}

struct Named {
  std::string id;
};

// A listing over ids "a0".."a<n-1>" that pages as the repositories do (make_page), and counts
// the requests it answers.
struct Listing {
  int n = 0;
  int calls = 0;
  std::optional<std::string> fail_after;  // the request after this cursor fails
  Result<Page<Named>> operator()(const PageRequest& page) {
    ++calls;
    if (fail_after && page.after == fail_after) return fail(Error::unavailable("store went away"));
    std::vector<Named> items;
    for (int i = 0; i < n; ++i) {
      std::string id = "a" + std::to_string(1000 + i);
      if (!page.after || id > *page.after) items.push_back({id});
      if (int(items.size()) > page.limit) break;
    }
    return make_page(std::move(items), page);
  }
};

TEST(AllPages, ReadsEveryItemOnceAcrossPageBoundaries) {
  for (int n : {0, 1, 4, 5, 6, 23}) {
    Listing listing{.n = n};
    Result<std::vector<Named>> all = all_pages(std::ref(listing), 5);
    ASSERT_TRUE(all.has_value()) << n;
    ASSERT_EQ(all->size(), size_t(n));
    for (int i = 0; i < n; ++i) EXPECT_EQ((*all)[i].id, "a" + std::to_string(1000 + i));
    EXPECT_EQ(listing.calls, std::max(1, (n + 4) / 5)) << n;  // no request past the last page
  }
}

TEST(AllPages, StopsAtTheFirstError) {
  Listing listing{.n = 12, .fail_after = "a1004"};
  Result<std::vector<Named>> all = all_pages(std::ref(listing), 5);
  ASSERT_FALSE(all.has_value());
  EXPECT_EQ(all.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(listing.calls, 2);
}

}  // namespace
}  // namespace gp
