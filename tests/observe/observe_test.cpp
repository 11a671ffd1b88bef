// The exposition builder and the shard arithmetic of observe.h (pure); the gatherers are tested
// against a real Prometheus by prometheus_test.py.
#include "observe/observe.h"

#include <gtest/gtest.h>

#include <map>

namespace gp::observe {
namespace {

TEST(Exposition, AFamilyWithSamplesHasItsHelpAndTypeOnceAndAnEmptyOneIsLeftOut) {
  Exposition e;
  e.family("empty_total", "counter", "Never sampled.");
  e.family("gpus", "gauge", "GPUs by model.");
  e.sample({{"model", "H200"}}, 8);
  e.sample({{"model", "A100-80GB"}, {"health", "healthy"}}, 2.5);
  e.family("up", "gauge", "Up.");
  e.sample({}, 1);
  EXPECT_EQ(e.take(),
            "# HELP gpus GPUs by model.\n# TYPE gpus gauge\n"
            "gpus{model=\"H200\"} 8\n"
            "gpus{model=\"A100-80GB\",health=\"healthy\"} 2.5\n"
            "# HELP up Up.\n# TYPE up gauge\nup 1\n");
}

TEST(Exposition, LabelValuesEscapeBackslashQuoteAndNewline) {
  EXPECT_EQ(escape_label_value(R"(a\b"c)"
                               "\n"),
            R"(a\\b\"c\n)");
  Exposition e;
  e.family("x", "gauge", "X.");
  e.sample({{"tenant", "evil\"} 1\ninjected{"}}, 1);
  EXPECT_EQ(e.take(), "# HELP x X.\n# TYPE x gauge\nx{tenant=\"evil\\\"} 1\\ninjected{\"} 1\n");
}

TEST(TopWithOther, KeepsTheLargestAndSumsTheRestUnderOther) {
  auto top = top_with_other({{"a", 1}, {"b", 5}, {"c", 3}, {"d", 2}}, 2);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0], (std::pair<std::string, double>{"b", 5}));
  EXPECT_EQ(top[1], (std::pair<std::string, double>{"c", 3}));
  EXPECT_EQ(top[2], (std::pair<std::string, double>{"_other", 3}));
  EXPECT_EQ(top_with_other({{"a", 1}}, 2).size(), 1u);
}

TEST(Shard, ParsesIndexOverCountAndRefusesTheRest) {
  auto s = parse_shard("2/8");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->index, 2u);
  EXPECT_EQ(s->count, 8u);
  for (const char* bad : {"", "2", "8/8", "1/0", "-1/4", "a/4", "1/4x", "0/5000"})
    EXPECT_FALSE(parse_shard(bad)) << bad;
}

TEST(Shard, EveryNodeIsInExactlyOneShard) {
  std::map<uint32_t, int> per_shard;
  for (int n = 0; n < 1000; ++n) {
    const std::string node = "node-" + std::to_string(n);
    int in = 0;
    for (uint32_t i = 0; i < 4; ++i)
      if (in_shard(node, {i, 4})) {
        ++in;
        ++per_shard[i];
      }
    EXPECT_EQ(in, 1) << node;
    EXPECT_TRUE(in_shard(node, {0, 1}));
  }
  for (uint32_t i = 0; i < 4; ++i) EXPECT_GT(per_shard[i], 150) << i;  // roughly even
}

}  // namespace
}  // namespace gp::observe
