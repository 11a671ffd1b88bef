// What `gpuplane serve` writes on its first start: the bootstrap admin credential file is made
// private and new (never through a symlink, never over another file, mode 0600 whatever the
// umask), and a credential that cannot be written is never committed: the server exits non-zero
// and the next start bootstraps afresh.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "process/process_util.h"

namespace gp::proc {
namespace {

namespace fs = std::filesystem;

// `gpuplane serve` with its bootstrap credential written to `cred`; returns the exit code when it
// stopped by itself within the timeout, or nullopt when it was still serving (then it is killed).
std::optional<int> serve_once(const TempDir& dir, const fs::path& cred, mode_t umask_value) {
  std::vector<std::string> args = {"serve",       "--data",        dir.str("data"),
                                   "--listen",    "127.0.0.1:0",   "--plaintext",
                                   "--port-file", dir.str("port"), "--bootstrap-credential-file",
                                   cred.string(), "--log-level",   "warn"};
  mode_t old = ::umask(umask_value);
  auto child =
      Child::spawn(gpuplane_binary(), args,
                   {.stdout_path = dir.path() / "stdout", .stderr_path = dir.path() / "stderr"});
  ::umask(old);
  if (!child) {
    ADD_FAILURE() << "could not start gpuplane";
    return -1;
  }
  // It either exits at once or writes its port file once it is serving.
  eventually(
      [&] { return child->wait_for(0ms).has_value() || !read_file(dir.path() / "port").empty(); },
      15s);
  if (!child->running()) return child->exit_code();
  child->signal(SIGKILL);
  child->wait_for(5s);
  fs::remove(dir.path() / "port");
  return std::nullopt;
}

TEST(ServeBootstrapFile, IsNeverWrittenThroughASymlink) {
  TempDir dir;
  fs::path victim = dir.path() / "victim";
  std::ofstream(victim) << "precious\n";
  fs::path cred = dir.path() / "cred";
  fs::create_symlink(victim, cred);

  auto exit = serve_once(dir, cred, 022);
  ASSERT_TRUE(exit.has_value()) << "serve kept running with a credential it could not write";
  EXPECT_NE(*exit, 0);
  EXPECT_EQ(read_file(victim), "precious\n");
  EXPECT_NE(read_file(dir.path() / "stderr").find("already exists"), std::string::npos)
      << read_file(dir.path() / "stderr");
}

TEST(ServeBootstrapFile, IsPrivateWhateverTheUmask) {
  TempDir dir;
  fs::path cred = dir.path() / "cred";
  auto exit = serve_once(dir, cred, 0);
  ASSERT_FALSE(exit.has_value()) << "serve stopped with " << *exit << ":\n"
                                 << read_file(dir.path() / "stderr");
  struct stat st {};
  ASSERT_EQ(::lstat(cred.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(read_file(cred).find("api_key: "), std::string::npos);
}

TEST(ServeBootstrapFile, ACredentialThatCannotBeWrittenIsNotCommitted) {
  TempDir dir;
  fs::path unwritable = dir.path() / "no-such-dir" / "cred";
  auto exit = serve_once(dir, unwritable, 022);
  ASSERT_TRUE(exit.has_value()) << "serve kept running with a credential it could not write";
  EXPECT_NE(*exit, 0);

  // Nothing was bootstrapped: the next start over the same data makes the admin, and its
  // credential works.
  fs::path cred = dir.path() / "cred";
  ASSERT_FALSE(serve_once(dir, cred, 022).has_value()) << read_file(dir.path() / "stderr");
  EXPECT_NE(read_file(cred).find("api_key: "), std::string::npos)
      << "the second start did not bootstrap: the first one committed an unreadable credential";
}

// A bad --trusted-proxies list is a usage error, exit 2, before anything is created: no data
// directory, no credential.
TEST(ServeFlags, ABadTrustedProxiesListExitsTwoAndCreatesNothing) {
  TempDir dir;
  for (const char* bad : {"10.0.0.0/33", "not-an-address", "10.0.0.1/8"}) {
    auto r =
        run_gpuplane({"serve", "--data", dir.str("data"), "--listen", "127.0.0.1:0", "--plaintext",
                      "--bootstrap-credential-file", dir.str("cred"), "--trusted-proxies", bad},
                     {}, {}, 15s);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("--trusted-proxies"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir.path() / "data")) << bad;
    EXPECT_FALSE(fs::exists(dir.path() / "cred")) << bad;
  }
}

}  // namespace
}  // namespace gp::proc
