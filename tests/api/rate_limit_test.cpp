// Token buckets: bursts, refill, Retry-After, independent keys, a clock that steps back, and
// the key cap; IPv6 clients keyed by their /64.
#include "api/rate_limit.h"

#include <gtest/gtest.h>

#include <string>

#include "api/client_key.h"

namespace gp::api {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TimePoint t0() { return TimePoint(seconds(1'800'000'000)); }

TEST(RateLimiter, ABurstThenOneTokenPerRefillInterval) {
  RateLimiter l({.per_second = 2, .burst = 3});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(l.take("a", t0()).allowed) << i;
  auto refused = l.take("a", t0());
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_after, milliseconds(500));  // one token at 2 per second
  EXPECT_FALSE(l.take("a", t0() + milliseconds(499)).allowed);
  EXPECT_TRUE(l.take("a", t0() + milliseconds(999)).allowed);  // refilled during the wait
  EXPECT_FALSE(l.take("a", t0() + milliseconds(999)).allowed);
  // Idle for long: back to the burst, never above it.
  const TimePoint later = t0() + seconds(60);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(l.take("a", later).allowed) << i;
  EXPECT_FALSE(l.take("a", later).allowed);
}

TEST(RateLimiter, KeysAreIndependent) {
  RateLimiter l({.per_second = 1, .burst = 1});
  EXPECT_TRUE(l.take("tenant-a", t0()).allowed);
  EXPECT_FALSE(l.take("tenant-a", t0()).allowed);
  EXPECT_TRUE(l.take("tenant-b", t0()).allowed);
}

TEST(RateLimiter, CheckDoesNotSpend) {
  RateLimiter l({.per_second = 1, .burst = 1});
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(l.check("k", t0()).allowed);
  EXPECT_TRUE(l.take("k", t0()).allowed);
  EXPECT_FALSE(l.check("k", t0()).allowed);
}

TEST(RateLimiter, AClockSteppingBackAddsNothing) {
  RateLimiter l({.per_second = 1, .burst = 1});
  EXPECT_TRUE(l.take("k", t0()).allowed);
  EXPECT_FALSE(l.take("k", t0() - seconds(3600)).allowed);
  EXPECT_FALSE(l.take("k", t0() + milliseconds(500)).allowed);
  EXPECT_TRUE(l.take("k", t0() + seconds(1)).allowed);
}

TEST(RateLimiter, OffLimitsAdmitEverything) {
  RateLimiter off({});
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(off.take("k", t0()).allowed);
  EXPECT_EQ(off.size(), 0u);
}

TEST(RateLimiter, TheKeyCapForgetsRefilledBucketsFirst) {
  RateLimiter l({.per_second = 1, .burst = 2}, /*max_keys=*/16);  // one key per shard
  for (int i = 0; i < 200; ++i) l.take("k" + std::to_string(i), t0());
  EXPECT_LE(l.size(), 16u);
  // A key whose bucket is in use keeps it: spend "hot" fully, then churn other keys later.
  RateLimiter m({.per_second = 1, .burst = 2}, 16);
  m.take("hot", t0());
  m.take("hot", t0());
  EXPECT_FALSE(m.take("hot", t0()).allowed);
  for (int i = 0; i < 200; ++i) m.take("cold" + std::to_string(i), t0() + milliseconds(10));
  EXPECT_FALSE(m.take("hot", t0() + milliseconds(20)).allowed);
}

TEST(ClientKey, IPv6ClientsShareTheirSlash64AndIPv4StaysWhole) {
  EXPECT_EQ(client_key("203.0.113.7"), "203.0.113.7");
  EXPECT_NE(client_key("203.0.113.7"), client_key("203.0.113.8"));
  EXPECT_EQ(client_key("::ffff:203.0.113.7"), "203.0.113.7");
  EXPECT_EQ(client_key("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64");
  EXPECT_EQ(client_key("2001:db8:1:2:ffff:ffff:ffff:ffff"), client_key("2001:db8:1:2::9"));
  EXPECT_NE(client_key("2001:db8:1:2::1"), client_key("2001:db8:1:3::1"));
  EXPECT_EQ(client_key("not an address"), "not an address");
  EXPECT_EQ(client_key(""), "");
}

}  // namespace
}  // namespace gp::api
