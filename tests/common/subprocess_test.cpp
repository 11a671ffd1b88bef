// The subprocess helper (common/subprocess.h): output and exit codes captured, no deadlock on
// large input or output, a child that ignores its input, a missing program and a timeout.
#include "common/subprocess.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace gp {
namespace {

TEST(Subprocess, CapturesOutputAndExitCode) {
  auto r =
      run_process({"sh", "-c", "cat; echo oops >&2; exit 3"}, "hello\n", std::chrono::seconds(10));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->out, "hello\n");
  EXPECT_EQ(r->err, "oops\n");
  EXPECT_EQ(r->exit_code, 3);
}

TEST(Subprocess, LargeInputAndOutputDoNotDeadlock) {
  std::string big(4 << 20, 'x');
  auto r = run_process({"cat"}, big, std::chrono::seconds(30));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->out.size(), big.size());
}

TEST(Subprocess, ChildThatIgnoresInputDoesNotKillUs) {
  std::string big(4 << 20, 'x');
  auto r = run_process({"true"}, big, std::chrono::seconds(30));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->exit_code, 0);
}

TEST(Subprocess, MissingProgramAndTimeoutAreErrors) {
  auto r = run_process({"gpuplane-no-such-program"}, "", std::chrono::seconds(5));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  auto start = std::chrono::steady_clock::now();
  r = run_process({"sleep", "30"}, "", std::chrono::milliseconds(200));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("killed"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace gp
