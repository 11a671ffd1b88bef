// Private files: created new, never through a symlink, with exactly the mode asked for.
#include "common/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_util.h"

namespace gp {
namespace {

namespace fs = std::filesystem;
using gp::testing::TempDir;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode;
}

TEST(PrivateFile, IsCreatedWithItsModeWhateverTheUmask) {
  TempDir dir;
  mode_t old = ::umask(0);
  auto made = create_private_file(dir.file("cred"), "secret\n");
  ::umask(old);
  ASSERT_TRUE(made) << made.error().message;
  EXPECT_EQ(mode_of(dir.file("cred")) & 07777, 0600u);
  EXPECT_EQ(slurp(dir.file("cred")), "secret\n");
}

TEST(PrivateFile, NeverWritesThroughASymlinkOrOverAFile) {
  TempDir dir;
  std::ofstream(dir.file("victim")) << "precious\n";
  fs::create_symlink(dir.file("victim"), dir.file("link"));
  auto through_link = create_private_file(dir.file("link"), "secret\n");
  ASSERT_FALSE(through_link);
  EXPECT_NE(through_link.error().message.find("already exists"), std::string::npos);
  EXPECT_FALSE(create_private_file(dir.file("victim"), "secret\n"));
  EXPECT_EQ(slurp(dir.file("victim")), "precious\n");
  EXPECT_TRUE(S_ISLNK(mode_of(dir.file("link"))));
}

TEST(PrivateFile, AFailureLeavesNothingAndNamesThePath) {
  TempDir dir;
  auto r = create_private_file(dir.file("missing/cred"), "x");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find(dir.file("missing/cred")), std::string::npos);
}

TEST(PrivateFile, ReplacingSwapsASymlinkForAFileAndLeavesItsTarget) {
  TempDir dir;
  std::ofstream(dir.file("victim")) << "precious\n";
  fs::create_symlink(dir.file("victim"), dir.file("port"));
  ASSERT_TRUE(replace_private_file(dir.file("port"), "8080\n"));
  EXPECT_TRUE(S_ISREG(mode_of(dir.file("port"))));
  EXPECT_EQ(slurp(dir.file("port")), "8080\n");
  EXPECT_EQ(slurp(dir.file("victim")), "precious\n");
  ASSERT_TRUE(replace_private_file(dir.file("port"), "8081\n"));
  EXPECT_EQ(slurp(dir.file("port")), "8081\n");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 2) << "a temporary file was left behind";
}

}  // namespace
}  // namespace gp
