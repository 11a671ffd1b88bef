// `gpuplane job` end to end: the real binary against a real server with one tenant, one project,
// a container offering and one node, whose agent the test plays by posting its heartbeats (the
// member reports a node's agent would send). Reads as a transcript: a job that waits and is
// cancelled, inputs refused before anything is sent, a job followed until it exits.
#include <gtest/gtest.h>

#include <regex>

#include "process/process_util.h"

namespace gp::proc {
namespace {

class JobCli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.start());
    ASSERT_TRUE(succeeded(admin({"tenant", "create", "acme"})));
    ASSERT_TRUE(succeeded(admin({"project", "create", "ml", "--tenant", "acme"})));
    ASSERT_TRUE(succeeded(admin({"offering", "create", "h200-1x", "--tier", "dedicated-gpu",
                                 "--model", "H200", "--gpus", "1"})));
    auto token = server_.admin_request("POST", "/v1/join-tokens", Json{{"ttl_seconds", 600}});
    ASSERT_TRUE(token && token->status == 201) << (token ? token->body : token.error().message);
    Json inventory = {{"node", {{"name", "gpu-1"}, {"cpu_millis", 64000}, {"rack", "r1"}}},
                      {"gpus",
                       {{{"uuid", "GPU-gpu-1-0"},
                         {"index", 0},
                         {"model", "NVIDIA H200"},
                         {"memory_bytes", int64_t{141} << 30},
                         {"mig_capable", true}}}}};
    auto enrolled = server_.request(
        "POST", "/v1/agent/enroll",
        {{"join_token", Json::parse(token->body)["token"]}, {"inventory", inventory}});
    ASSERT_TRUE(enrolled && enrolled->status == 201)
        << (enrolled ? enrolled->body : enrolled.error().message);
    node_credential_ = Json::parse(enrolled->body)["credential"].get<std::string>();
  }
  void TearDown() override { EXPECT_EQ(server_.terminate(), 0) << server_.log(); }

  std::map<std::string, std::optional<std::string>> admin_env() const {
    return {{"GPUPLANE_ENDPOINT", server_.endpoint()}, {"GPUPLANE_TOKEN", server_.admin().api_key}};
  }
  RunResult admin(const std::vector<std::string>& args) { return run_gpuplane(args, admin_env()); }
  // `gpuplane job VERB --tenant acme --project ml ARGS...`
  RunResult job(std::vector<std::string> args) {
    args.insert(args.begin() + 1, {"--tenant", "acme", "--project", "ml"});
    args.insert(args.begin(), "job");
    return admin(args);
  }

  static bool has(const std::string& haystack, std::string_view needle) {
    return haystack.find(needle) != std::string::npos;
  }
  static ::testing::AssertionResult succeeded(const RunResult& r) {
    if (r.exit_code == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "exit code " << r.exit_code << (r.timed_out ? " (timed out)" : "")
           << "\nstdout: " << r.out << "\nstderr: " << r.err;
  }

  // The tenant's jobs as the API has them.
  std::vector<Json> jobs() const {
    auto r = server_.admin_request("GET", "/v1/tenants/acme/jobs?limit=1000");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : r.error().message);
    if (!r || r->status != 200) return {};
    Json items = Json::parse(r->body)["items"];
    return {items.begin(), items.end()};
  }

  // The node's agent reports its members.
  void heartbeat(const std::vector<Json>& reports) {
    auto r = server_.request("POST", "/v1/agent/heartbeat", {{"jobs", reports}}, node_credential_);
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : r.error().message);
  }
  // One report of member 0 (attempt 1) with output [offset, offset + log.size()).
  static Json member_report(const std::string& job_id, const std::string& state, int64_t offset,
                            const std::string& log, std::optional<int> exit_code = std::nullopt) {
    Json m = {{"job", job_id},
              {"rank", 0},
              {"attempt", 1},
              {"state", state},
              {"log_offset", offset},
              {"log_end", offset + static_cast<int64_t>(log.size())},
              {"log", log}};
    if (exit_code) m["exit_code"] = *exit_code;
    return m;
  }

  TempDir tmp_;
  Server server_{tmp_.path() / "data"};
  std::string node_credential_;
};

TEST_F(JobCli, AQueuedJobSaysWhyItWaitsAndIsCancelled) {
  // The tenant has no quota: the job waits, and says so with the scheduler's reason.
  auto run = job({"run", "--offering", "h200-1x", "--image", "busybox:1.36", "--name", "train",
                  "--env", "EPOCHS=3", "--", "sh", "-c", "echo hi"});
  ASSERT_TRUE(succeeded(run));
  auto listed = jobs();
  ASSERT_EQ(listed.size(), 1u);
  const std::string id = listed[0]["id"];
  EXPECT_EQ(listed[0]["state"], "queued");
  EXPECT_EQ(listed[0]["spec"]["command"], Json({"sh", "-c", "echo hi"}));
  EXPECT_EQ(listed[0]["spec"]["env"], Json::parse(R"([{"name": "EPOCHS", "value": "3"}])"));
  auto detail = server_.admin_request("GET", "/v1/tenants/acme/projects/ml/jobs/" + id);
  ASSERT_TRUE(detail && detail->status == 200);
  const std::string waits = Json::parse(detail->body)["allocation"]["reason"];
  EXPECT_TRUE(has(waits, "quota")) << waits;
  EXPECT_EQ(run.out, id + " (train) queued: " + waits + "\n");

  // Listed by the tenant and by the project, as a table; filtered by state.
  auto tenant_list = admin({"job", "list", "--tenant", "acme"});
  ASSERT_TRUE(succeeded(tenant_list));
  EXPECT_TRUE(tenant_list.out.starts_with("NAME ")) << tenant_list.out;
  EXPECT_TRUE(std::regex_search(tenant_list.out, std::regex("\ntrain +queued +- +0 +\\S+ +" + id)))
      << tenant_list.out;
  EXPECT_TRUE(has(tenant_list.out, " " + waits + "\n")) << tenant_list.out;
  auto queued = job({"list", "--state", "queued"});
  ASSERT_TRUE(succeeded(queued));
  EXPECT_TRUE(has(queued.out, id)) << queued.out;
  auto running = job({"list", "--state", "running"});
  ASSERT_TRUE(succeeded(running));
  EXPECT_FALSE(has(running.out, id)) << running.out;

  // The detail says the same, and what it would run.
  auto get = job({"get", id});
  ASSERT_TRUE(succeeded(get));
  for (const std::string& line : std::vector<std::string>{
           "state:      queued\n", "reason:     " + waits + "\n", "command:    sh -c 'echo hi'\n",
           "offering:   h200-1x (count 1, gang 1)\n"})
    EXPECT_TRUE(has(get.out, line)) << "no '" << line << "' in:\n" << get.out;
  auto get_json = admin({"-o", "json", "job", "get", id, "--tenant", "acme", "--project", "ml"});
  ASSERT_TRUE(succeeded(get_json));
  EXPECT_EQ(Json::parse(get_json.out)["id"], id);

  // Nothing ran, so there is no output.
  auto logs = job({"logs", id});
  ASSERT_TRUE(succeeded(logs));
  EXPECT_EQ(logs.out, "");

  // Cancelled, it ends at once; a second cancel is refused.
  auto cancel = job({"cancel", id});
  ASSERT_TRUE(succeeded(cancel));
  EXPECT_TRUE(cancel.out.starts_with(id + " (train) cancelled: cancelled by ")) << cancel.out;
  EXPECT_EQ(jobs()[0]["state"], "cancelled");
  auto again = job({"cancel", id});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_TRUE(again.err.starts_with("error: ") && has(again.err, "HTTP 409")) << again.err;
}

TEST_F(JobCli, InputsThatCannotBeAJobAreRefusedBeforeAnythingIsSent) {
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::string error;
  };
  const std::vector<std::string> cmd = {"--", "true"};
  auto with = [&](std::vector<std::string> flags) {
    std::vector<std::string> args = {"run", "--offering", "h200-1x"};
    args.insert(args.end(), flags.begin(), flags.end());
    return args;
  };
  for (const auto& c : std::vector<Case>{
           // The argument parser's own: a required flag (106), a value not in the set (105).
           {with({"--", "true"}), 106, "--image is required"},
           {with({"--image", "busybox", "--restart", "always", "--", "true"}), 105, "--restart"},
           // The job commands' usage errors: exit 2, one `error:` line.
           {with({"--image", "busybox", "--volume", "homes", "--", "true"}), 2,
            "error: --volume homes: want KIND or KIND:ro"},
           {with({"--image", "busybox", "--volume", "datasets:rw", "--", "true"}), 2,
            "error: --volume datasets:rw"},
           {with({"--image", "busybox", "--env", "EPOCHS", "--", "true"}), 2,
            "error: --env EPOCHS: want NAME=VALUE"},
           {with({"--image", "busybox"}), 2, "error: give the command to run after --"},
       }) {
    auto r = job(c.args);
    SCOPED_TRACE(::testing::PrintToString(c.args));
    EXPECT_EQ(r.exit_code, c.exit_code) << r.err;
    EXPECT_TRUE(has(r.err, c.error)) << r.err;
    EXPECT_EQ(r.out, "");
  }
  auto json_follow =
      admin({"-o", "json", "job", "run", "--tenant", "acme", "--project", "ml", "--offering",
             "h200-1x", "--image", "busybox", "--follow", "--", "true"});
  EXPECT_EQ(json_follow.exit_code, 2);
  EXPECT_EQ(json_follow.err,
            "error: --follow prints the job's output, not JSON: leave out "
            "--output json\n");
  EXPECT_TRUE(jobs().empty()) << "a refused job was submitted";
  // What only the server can judge comes back as its error: exit 1, nothing created.
  auto no_volumes = job({"run", "--offering", "h200-1x", "--image", "busybox", "--volume",
                         "datasets:ro", "--", "true"});
  EXPECT_EQ(no_volumes.exit_code, 1);
  EXPECT_TRUE(has(no_volumes.err, "has no volumes") && has(no_volumes.err, "HTTP 400"))
      << no_volumes.err;
  EXPECT_TRUE(jobs().empty());
}

TEST_F(JobCli, RunFollowPrintsTheOutputAsItComesAndExitsWithTheJobsCode) {
  ASSERT_TRUE(
      succeeded(admin({"quota", "set", "--tenant", "acme", "--model", "H200", "--nominal", "1"})));
  SpawnOptions o{.env = admin_env(),
                 .stdout_path = tmp_.path() / "follow.out",
                 .stderr_path = tmp_.path() / "follow.err"};
  o.env["GPUPLANE_CONFIG"] = (tmp_.path() / "no-config.json").string();
  auto follow = Child::spawn(gpuplane_binary(),
                             {"job", "run", "--tenant", "acme", "--project", "ml", "--offering",
                              "h200-1x", "--image", "busybox:1.36", "--name", "train", "--follow",
                              "--", "sh", "-c", "echo hello; echo bye; exit 3"},
                             o);
  ASSERT_TRUE(follow);
  // Placed on the node at once: it starts.
  std::string id;
  ASSERT_TRUE(eventually([&] {
    auto listed = jobs();
    if (listed.size() == 1 && listed[0]["state"] == "starting") id = listed[0]["id"];
    return !id.empty();
  }));

  // The member runs and writes a line: the follower prints it while the job runs.
  heartbeat({member_report(id, "running", 0, "hello\n")});
  EXPECT_TRUE(eventually([&] { return follow->stdout_text() == "hello\n"; }))
      << follow->stdout_text();
  EXPECT_EQ(follow->wait_for(0ms), std::nullopt) << "the follower stopped before the job ended";
  // It writes the rest and exits with code 3: so does the follower, after the rest.
  heartbeat({member_report(id, "exited", 6, "bye\n", 3)});
  EXPECT_EQ(follow->wait_for(20s), 3) << follow->stderr_text();
  EXPECT_EQ(follow->stdout_text(), "hello\nbye\n") << "stdout holds the job's output alone";
  const std::string err = follow->stderr_text();
  EXPECT_TRUE(has(err, id + " (train) starting: ")) << err;
  EXPECT_TRUE(has(err, id + " running\n")) << err;
  EXPECT_TRUE(err.ends_with(id + " (train) failed, exit code 3: member 0 exited with code 3\n"))
      << err;

  // The output stays with the job: all of it, its tail, or followed (it has ended: at once).
  auto logs = job({"logs", id});
  ASSERT_TRUE(succeeded(logs));
  EXPECT_EQ(logs.out, "hello\nbye\n");
  auto tail = job({"logs", id, "--tail", "1"});
  ASSERT_TRUE(succeeded(tail));
  EXPECT_EQ(tail.out, "bye\n");
  auto followed = job({"logs", id, "-f"});
  EXPECT_EQ(followed.exit_code, 3) << followed.err;
  EXPECT_EQ(followed.out, "hello\nbye\n");

  // The detail names the node the member ran on, how it ended, and every step.
  auto get = job({"get", id});
  ASSERT_TRUE(succeeded(get));
  for (std::string_view fragment :
       {"state:      failed\n", "failure:    exit_code\n", "exit code:  3\n",
        "reason:     member 0 exited with code 3\n", "queued    starting", "starting  running",
        "running   failed    member 0 exited with code 3"})
    EXPECT_TRUE(has(get.out, fragment)) << "no '" << fragment << "' in:\n" << get.out;
  EXPECT_TRUE(std::regex_search(get.out, std::regex("\n0 +1 +nod_\\S+ +exited +3 ")));
  auto failed = job({"list", "--state", "failed"});
  ASSERT_TRUE(succeeded(failed));
  EXPECT_TRUE(std::regex_search(failed.out, std::regex("\ntrain +failed +3 +1 ")));

  // Its GPU is free again: the next job starts, succeeds, and its follower exits 0.
  auto next = job(
      {"run", "--offering", "h200-1x", "--image", "busybox:1.36", "--name", "eval", "--", "true"});
  ASSERT_TRUE(succeeded(next));
  std::string next_id = next.out.substr(0, next.out.find(' '));
  EXPECT_TRUE(has(next.out, next_id + " (eval) starting: ")) << next.out;
  heartbeat({member_report(next_id, "exited", 0, "ok\n", 0)});
  auto ok = job({"logs", next_id, "--follow"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, "ok\n");
  EXPECT_TRUE(has(ok.err, next_id + " (eval) succeeded: ")) << ok.err;
}

}  // namespace
}  // namespace gp::proc
