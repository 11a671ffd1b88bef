// The job commands' pure parts: the body `job run` sends, a job's summary line and exit status,
// and the printing of a job's output across polls (cli/cli_job.h).
#include "cli/cli_job.h"

#include <gtest/gtest.h>

namespace gp::cli {
namespace {

// One member of a GET .../logs reply: its bytes [start, start + text.size()).
Json member(int64_t rank, int64_t start, const std::string& text) {
  return {{"rank", rank},
          {"start", start},
          {"end", start + static_cast<int64_t>(text.size())},
          {"dropped_before", 0},
          {"text", text}};
}

Json reply(std::vector<Json> members, bool finished = false) {
  return {{"job", "job_1"},
          {"state", finished ? "succeeded" : "running"},
          {"finished", finished},
          {"limit_bytes", 1 << 20},
          {"members", members}};
}

TEST(JobLogPrinter, PrintsALoneMembersTextAsItIs) {
  JobLogPrinter p;
  EXPECT_EQ(p.since(), std::nullopt) << "the first poll asks for everything kept";
  EXPECT_EQ(p.take(reply({member(0, 0, "hello\nworld\n")})), "hello\nworld\n");
  EXPECT_EQ(p.since(), 12);
  EXPECT_FALSE(p.line_open());
}

TEST(JobLogPrinter, HeadsEachMembersBlockWhenThereAreSeveral) {
  JobLogPrinter p;
  EXPECT_EQ(p.take(reply({member(0, 0, "a0\n"), member(1, 0, "b0\n")})),
            "== rank 0 ==\na0\n== rank 1 ==\nb0\n");
}

TEST(JobLogPrinter, PrintsOnlyWhatIsNewPollAfterPoll) {
  JobLogPrinter p;
  EXPECT_EQ(p.take(reply({member(0, 0, "hello\n")})), "hello\n");
  // The follower asks from byte 6 on and gets just that.
  EXPECT_EQ(p.take(reply({member(0, 6, "")})), "");
  EXPECT_EQ(p.take(reply({member(0, 6, "bye")})), "bye");
  EXPECT_TRUE(p.line_open());
  // A reply that repeats what was printed (a server that ignores `since`) adds only the rest.
  EXPECT_EQ(p.take(reply({member(0, 0, "hello\nbye\n")})), "\n");
  EXPECT_EQ(p.since(), 10);
  EXPECT_FALSE(p.line_open());
}

TEST(JobLogPrinter, FollowsSeveralMembersFromTheLeastPrintedPosition) {
  JobLogPrinter p;
  EXPECT_EQ(p.take(reply({member(0, 0, "a0\na1\n"), member(1, 0, "b0")})),
            "== rank 0 ==\na0\na1\n== rank 1 ==\nb0");
  EXPECT_EQ(p.since(), 2) << "rank 1 has been printed up to byte 2";
  // From byte 2 on, rank 0's reply repeats what was printed: skipped, so no heading either.
  // Rank 1 goes on where it stopped, under no new heading.
  EXPECT_EQ(p.take(reply({member(0, 2, "\na1\n"), member(1, 2, " still\n")})), " still\n");
  // Rank 0 writes again: its heading comes back.
  EXPECT_EQ(p.take(reply({member(0, 6, "a2"), member(1, 9, "")})), "== rank 0 ==\na2");
  // An unfinished line ends before the next heading.
  EXPECT_EQ(p.take(reply({member(0, 8, ""), member(1, 9, "b1\n")})), "\n== rank 1 ==\nb1\n");
  EXPECT_EQ(p.since(), 8);
}

TEST(JobLogPrinter, OneMemberOfSeveralKeepsItsHeadings) {
  // `--rank` answers with one member; a job seen with several goes on being headed.
  JobLogPrinter p;
  EXPECT_EQ(p.take(reply({member(0, 0, "a\n"), member(1, 0, "")})), "== rank 0 ==\na\n");
  EXPECT_EQ(p.take(reply({member(1, 0, "b\n")})), "== rank 1 ==\nb\n");
}

TEST(JobLogPrinter, AsksForAMemberThatHasNotWrittenYetFromItsStart) {
  // A follower of a job of two members: rank 1 writes its first bytes after rank 0 has written
  // many. Were `since` rank 0's position, rank 1's first bytes would never come.
  JobLogPrinter p({0, 1});
  EXPECT_EQ(p.since(), std::nullopt);
  EXPECT_EQ(p.take(reply({member(0, 0, "a0\na1\n")})), "== rank 0 ==\na0\na1\n")
      << "a job of several members heads its blocks from the first";
  EXPECT_EQ(p.since(), 0) << "rank 1 has not been seen";
  EXPECT_EQ(p.take(reply({member(0, 0, "a0\na1\n"), member(1, 0, "b0\n")})), "== rank 1 ==\nb0\n");
  EXPECT_EQ(p.since(), 3);
}

TEST(JobLogPrinter, FollowsOneMemberOfSeveralUnheaded) {
  JobLogPrinter p({1});
  EXPECT_EQ(p.take(reply({member(1, 0, "b0\n")})), "b0\n");
  EXPECT_EQ(p.since(), 3);
}

TEST(JobLogPrinter, PrintsWhatIsKeptWhenOutputBeforeItWasDropped) {
  JobLogPrinter p;
  EXPECT_EQ(p.take(reply({member(0, 0, "first\n")})), "first\n");
  // The member wrote more than the job keeps between two polls: what is kept starts later.
  EXPECT_EQ(p.take(reply({member(0, 1000, "late\n")})), "late\n");
  EXPECT_EQ(p.since(), 1005);
}

Json job(const std::string& state, Json exit_code, const std::string& reason) {
  return {{"id", "job_1"},
          {"name", "train"},
          {"state", state},
          {"exit_code", exit_code},
          {"reason", reason}};
}

TEST(JobSummary, AQueuedJobGivesTheSchedulersReason) {
  Json j = job("queued", nullptr, "submitted");
  j["allocation"] = {{"id", "alc_1"},
                     {"state", "pending"},
                     {"reason_code", "quota_exceeded"},
                     {"reason", "tenant quota for H200 is used up"}};
  EXPECT_EQ(job_summary(j), "job_1 (train) queued: tenant quota for H200 is used up");
  j["allocation"]["reason"] = "";
  EXPECT_EQ(job_summary(j), "job_1 (train) queued: submitted");
}

TEST(JobSummary, AFailedJobGivesItsExitCode) {
  EXPECT_EQ(job_summary(job("failed", 3, "member 0 exited with code 3")),
            "job_1 (train) failed, exit code 3: member 0 exited with code 3");
  EXPECT_EQ(job_summary(job("succeeded", 0, "every member exited with code 0")),
            "job_1 (train) succeeded: every member exited with code 0");
  EXPECT_EQ(job_summary(job("running", nullptr, "")), "job_1 (train) running");
}

TEST(JobExitStatus, IsTheJobsExitCodeWhenItFailedWithOne) {
  struct Case {
    std::string state;
    Json exit_code;
    int want;
  };
  for (const auto& c : std::vector<Case>{{"succeeded", 0, 0},
                                         {"failed", 3, 3},
                                         {"failed", 137, 137},
                                         {"failed", nullptr, 1},  // image pull, node lost
                                         {"failed", 0, 1},
                                         {"failed", -1, 1},
                                         {"cancelled", nullptr, 1},
                                         {"preempted", nullptr, 1}}) {
    SCOPED_TRACE(c.state + " " + c.exit_code.dump());
    EXPECT_EQ(job_exit_status(job(c.state, c.exit_code, "")), c.want);
  }
}

TEST(JobRunBody, CarriesEveryFlagGiven) {
  JobRunFlags f{.name = "train",
                .image = "ghcr.io/acme/train:1",
                .offering = "h200-1x",
                .command = {"python", "train.py", "--lr", "0.1"},
                .count = 2,
                .retries = 0,
                .volumes = {"datasets:ro", "checkpoints"},
                .secrets = {"wandb"},
                .env = {"A=1", "B=x=y", "EMPTY="},
                .restart = "on-failure"};
  auto body = job_run_body(f);
  ASSERT_TRUE(body) << body.error().message;
  EXPECT_EQ(*body, Json::parse(R"({
    "name": "train", "image": "ghcr.io/acme/train:1", "offering": "h200-1x",
    "command": ["python", "train.py", "--lr", "0.1"], "args": [],
    "count": 2, "retries": 0, "restart_policy": "on-failure", "secrets": ["wandb"],
    "volumes": [{"kind": "datasets", "read_only": true}, {"kind": "checkpoints", "read_only": false}],
    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "x=y"},
            {"name": "EMPTY", "value": ""}]})"));
}

TEST(JobRunBody, LeavesOutWhatWasNotGiven) {
  auto body = job_run_body({.name = "n", .image = "busybox", .offering = "o", .command = {"true"}});
  ASSERT_TRUE(body) << body.error().message;
  EXPECT_EQ(*body, Json::parse(R"({"name": "n", "image": "busybox", "offering": "o",
                                   "command": ["true"], "args": []})"));
}

TEST(JobRunBody, RefusesWhatCannotBeAJob) {
  struct Case {
    JobRunFlags flags;
    std::string error;
  };
  const std::vector<std::string> cmd = {"true"};
  for (const auto& c : std::vector<Case>{
           {{.command = {}}, "give the command to run after --"},
           {{.command = cmd, .volumes = {"homes"}}, "--volume homes: want KIND or KIND:ro"},
           {{.command = cmd, .volumes = {"datasets:rw"}}, "--volume datasets:rw"},
           {{.command = cmd, .volumes = {"datasets:"}}, "--volume datasets:"},
           {{.command = cmd, .env = {"NOVALUE"}}, "--env NOVALUE: want NAME=VALUE"},
           {{.command = cmd, .env = {"=x"}}, "--env =x"}}) {
    SCOPED_TRACE(c.error);
    auto body = job_run_body(c.flags);
    ASSERT_FALSE(body) << body->dump();
    EXPECT_EQ(body.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(body.error().message.find(c.error), std::string::npos) << body.error().message;
  }
}

}  // namespace
}  // namespace gp::cli
