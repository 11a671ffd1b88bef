// The injected environment (common/env.h).
#include "common/env.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

namespace gp {
namespace {

TEST(Env, ASeededSourceRepeatsItsBytesAndTwoSeedsDiffer) {
  SeededRandom a(7), b(7), c(8);
  const std::string first = a.bytes(37);
  EXPECT_EQ(first.size(), 37u);
  EXPECT_EQ(first, b.bytes(37));
  EXPECT_NE(first, c.bytes(37));
  EXPECT_NE(a.bytes(37), first);  // the stream moves on
}

TEST(Env, UuidsAreVersionFourAndDistinct) {
  const std::regex v4("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  std::set<std::string> seen;
  SeededRandom seeded(1);
  for (const Random* r : {static_cast<const Random*>(&seeded), &system_random()}) {
    for (int i = 0; i < 100; ++i) {
      const std::string u = r->uuid();
      EXPECT_TRUE(std::regex_match(u, v4)) << u;
      EXPECT_TRUE(seen.insert(u).second) << u;
    }
  }
}

TEST(Env, AnEnvGivesItsOwnClockIdsRandomnessAndRoot) {
  ManualClock clock(from_unix_micros(1'000'000));
  SeededIdSource ids(3);
  SeededRandom random(5);
  const std::filesystem::path root = "/tmp/scratch-root";
  const Env env{clock, ids, random, root};
  EXPECT_EQ(env.now(), 1'000'000);
  clock.advance(std::chrono::seconds(1));
  EXPECT_EQ(env.now(), 2'000'000);
  EXPECT_EQ(env.random.bytes(8), SeededRandom(5).bytes(8));
  EXPECT_EQ(env.host_path("/etc/resolv.conf"), "/tmp/scratch-root/etc/resolv.conf");
  EXPECT_EQ(env.host_path("etc"), "/tmp/scratch-root/etc");
  // Given no randomness or root, an Env has the system's.
  const Env plain{clock, ids};
  EXPECT_EQ(&plain.random, &system_random());
  EXPECT_EQ(plain.host_path("/etc/hosts"), "/etc/hosts");
}

}  // namespace
}  // namespace gp
