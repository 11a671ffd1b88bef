// Token buckets: bursts, refill, Retry-After, independent keys, a clock that steps back, and
// the key cap; IPv6 clients keyed by their /64, node certificates by their node, and clients
// behind trusted proxies by their X-Forwarded-For address.
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

// Issue 24 finding 6: a full shard used to admit new keys without a bucket, so enough fresh
// keys (addresses, or account names the caller picks) switched the limit off for newcomers.
TEST(RateLimiter, AFullLimiterStillCountsNewKeysByEvictingTheLeastRecentlySeen) {
  RateLimiter l({.per_second = 1, .burst = 2}, /*max_keys=*/16);  // one key per shard
  auto spend = [&](const std::string& key, TimePoint at) {
    int allowed = 0;
    for (int i = 0; i < 5; ++i) allowed += l.take(key, at).allowed;
    return allowed;
  };
  // Every shard fills with spent buckets (nothing refills at this instant).
  for (int i = 0; i < 200; ++i) EXPECT_EQ(spend("old" + std::to_string(i), t0()), 2) << i;
  EXPECT_LE(l.size(), 16u);
  // A new key still gets its own bucket: two, then refused.
  for (int i = 0; i < 50; ++i) EXPECT_EQ(spend("new" + std::to_string(i), t0()), 2) << i;
  EXPECT_LE(l.size(), 16u);
}

TEST(RateLimiter, AKeySeenRecentlyKeepsItsBucketWhileNewKeysChurn) {
  RateLimiter l({.per_second = 1, .burst = 2}, /*max_keys=*/32);  // two keys per shard
  l.take("hot", t0());
  l.take("hot", t0());
  for (int i = 0; i < 200; ++i) {
    l.take("cold" + std::to_string(i), t0() + milliseconds(10));
    EXPECT_FALSE(l.take("hot", t0() + milliseconds(10)).allowed) << i;
  }
}

TEST(RateLimiter, AnAllowedTakeCountsTheRefusalsSinceTheLastOne) {
  RateLimiter l({.per_second = 1, .burst = 1});
  EXPECT_EQ(l.take("k", t0()).refused_before, 0);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(l.take("k", t0()).allowed);
  EXPECT_FALSE(l.check("k", t0()).allowed);  // a check is no refused take
  auto next = l.take("k", t0() + seconds(1));
  ASSERT_TRUE(next.allowed);
  EXPECT_EQ(next.refused_before, 3);
  EXPECT_EQ(l.take("k", t0() + seconds(2)).refused_before, 0);
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
  // Dotted decimal as formatted is its own key; anything else parses or is used as given.
  for (auto v4 : {"0.0.0.0", "10.0.0.1", "255.255.255.255", "192.168.100.20"})
    EXPECT_EQ(client_key(v4), v4);
  for (auto odd :
       {"1.2.3", "1.2.3.4.", "1.2.3.4.5", "256.1.1.1", "1..2.3", "1.2.3.4 ", "1234.1.1.1"})
    EXPECT_EQ(client_key(odd), odd);
  EXPECT_EQ(client_key("::ffff:10.0.0.1"), client_key("10.0.0.1"));
}

TEST(ThrottleKey, AVerifiedNodeCertificateIsCountedAsItsNodeNotItsAddress) {
  HttpRequest req;
  req.remote = "203.0.113.7";
  EXPECT_EQ(throttle_key(req), "203.0.113.7");
  req.client_cert = tls::PeerCert{.serial = "7", .common_name = "nod_a", .verify_error = ""};
  EXPECT_EQ(throttle_key(req), "node:nod_a");
  req.client_cert->verify_error = "certificate has expired";
  EXPECT_EQ(throttle_key(req), "203.0.113.7");
}

TEST(TrustedProxies, ParsesAddressesAndNetworksAndRefusesTheRest) {
  auto p = TrustedProxies::parse(" 10.0.0.0/8, 192.0.2.10 ,2001:db8::/32,");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_TRUE(p->contains("10.1.2.3"));
  EXPECT_TRUE(p->contains("::ffff:10.1.2.3"));
  EXPECT_TRUE(p->contains("192.0.2.10"));
  EXPECT_FALSE(p->contains("192.0.2.11"));
  EXPECT_TRUE(p->contains("2001:db8:5::1"));
  EXPECT_FALSE(p->contains("2001:db9::1"));
  EXPECT_FALSE(p->contains("not an address"));
  EXPECT_TRUE(TrustedProxies::parse("")->empty());
  for (const char* bad : {"10.0.0.1/8", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/x", "proxy.local",
                          "2001:db8::/129", "10.0.0.0/8; 10.1.0.0/16"})
    EXPECT_FALSE(TrustedProxies::parse(bad)) << bad;
}

TEST(TrustedProxies, TheClientIsTheFirstUntrustedHopFromTheRight) {
  auto p = *TrustedProxies::parse("10.0.0.0/8");
  // A peer that is no proxy: its header is the client's own word and means nothing.
  EXPECT_EQ(p.client_address("198.51.100.1", {"203.0.113.5"}), "198.51.100.1");
  // Through a trusted proxy: the hop it saw.
  EXPECT_EQ(p.client_address("10.0.0.1", {"203.0.113.5"}), "203.0.113.5");
  // Hops the client added itself (left of the one the proxy saw) are not believed.
  EXPECT_EQ(p.client_address("10.0.0.1", {"1.2.3.4, 203.0.113.5"}), "203.0.113.5");
  // Chained proxies, over two headers.
  EXPECT_EQ(p.client_address("10.0.0.1", {"1.2.3.4, 203.0.113.5", "10.9.9.9"}), "203.0.113.5");
  EXPECT_EQ(p.client_address("10.0.0.1", {"2001:db8::7"}), "2001:db8::7");
  // No header, or only proxies: the left-most address known.
  EXPECT_EQ(p.client_address("10.0.0.1", {}), "10.0.0.1");
  EXPECT_EQ(p.client_address("10.0.0.1", {"10.0.0.2"}), "10.0.0.2");
  // A hop that is no address stops the walk at the proxy that forwarded it.
  EXPECT_EQ(p.client_address("10.0.0.1", {"203.0.113.5, garbage"}), "10.0.0.1");
  EXPECT_EQ(p.client_address("10.0.0.1", {"203.0.113.5, garbage, 10.0.0.3"}), "10.0.0.3");
  // No trusted proxies at all: always the peer.
  EXPECT_EQ(TrustedProxies().client_address("10.0.0.1", {"203.0.113.5"}), "10.0.0.1");
}

}  // namespace
}  // namespace gp::api
