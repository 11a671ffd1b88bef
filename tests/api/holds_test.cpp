// Long-poll watches (api/holds.h): a watch fires on its own key only, once; a wake set after it
// fired runs at once; a watch unregisters when it goes.
#include "api/holds.h"

#include <gtest/gtest.h>

namespace gp::api {
namespace {

TEST(Holds, AWatchFiresOnceOnItsOwnKeyOnly) {
  Holds holds;
  auto node = holds.watch("node:a");
  auto other = holds.watch("node:b");
  int woken = 0;
  node->on_wake([&] { ++woken; });
  holds.announce({"node:c", "job:a"});
  EXPECT_EQ(woken, 0);
  EXPECT_FALSE(node->fired());
  holds.announce({"node:a"});
  holds.announce({"node:a"});
  EXPECT_EQ(woken, 1);
  EXPECT_TRUE(node->fired());
  EXPECT_FALSE(other->fired());
}

// A change announced after the watch was taken but before the wake was set is not lost: that is
// the window between a handler's read and the server's wait.
TEST(Holds, AWakeSetAfterTheChangeRunsAtOnce) {
  Holds holds;
  auto w = holds.watch("job:1");
  holds.announce({"job:1"});
  int woken = 0;
  w->on_wake([&] { ++woken; });
  EXPECT_EQ(woken, 1);
}

TEST(Holds, WatchesUnregisterWhenTheyGoAndStoppingWakesEveryOne) {
  Holds holds;
  {
    auto gone = holds.watch("node:a");
    EXPECT_EQ(holds.watching(), 1u);
  }
  EXPECT_EQ(holds.watching(), 0u);
  holds.announce({"node:a"});  // nobody to wake, nothing to crash on
  auto a = holds.watch("node:a"), b = holds.watch("job:9");
  int woken = 0;
  a->on_wake([&] { ++woken; });
  b->on_wake([&] { ++woken; });
  holds.wake_all();
  EXPECT_EQ(woken, 2);
}

}  // namespace
}  // namespace gp::api
