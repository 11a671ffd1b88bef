// The pure part of jobs: the spec a tenant submits, the states, what a node runs for a member.
#include "jobs/jobs.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "policy/policy.h"

namespace gp::jobs {
namespace {

Json minimal() {
  return {{"name", "train"},
          {"image", "127.0.0.1:5000/team/trainer:1"},
          {"command", {"/bin/sh", "-c", "echo hi"}},
          {"offering", "h200-1g"}};
}

std::string error_of(const Json& body) {
  auto s = parse_job_spec(body);
  return s ? std::string() : s.error().message;
}

TEST(JobSpec, AMinimalSpecGetsTheDocumentedDefaults) {
  auto s = parse_job_spec(minimal());
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->count, 1);
  EXPECT_EQ(s->members, 1);
  EXPECT_EQ(s->max_duration_seconds, kDefaultDurationSeconds);
  EXPECT_EQ(s->restart, RestartPolicy::kNever);
  EXPECT_EQ(s->retries, 0);
  EXPECT_TRUE(s->volumes.empty());
  // Its JSON is a body that parses back to the same spec.
  auto again = parse_job_spec(s->to_json());
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, *s);
}

TEST(JobSpec, EveryFieldIsRead) {
  Json b = minimal();
  b["args"] = {"--epochs", "3"};
  b["env"] = Json::array({{{"name", "LR"}, {"value", "0.1"}}});
  b["count"] = 2;
  b["gang"] = 4;
  b["volumes"] =
      Json::array({{{"kind", "datasets"}, {"read_only", true}}, {{"kind", "checkpoints"}}});
  b["secrets"] = {"hf-token"};
  b["max_duration_seconds"] = 3600;
  b["restart_policy"] = "on-failure";
  b["retries"] = 2;
  auto s = parse_job_spec(b);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->args, (std::vector<std::string>{"--epochs", "3"}));
  EXPECT_EQ(s->env, (std::vector<EnvVar>{{"LR", "0.1"}}));
  EXPECT_EQ(s->count, 2);
  EXPECT_EQ(s->members, 4);
  EXPECT_EQ(s->volumes, (std::vector<VolumeMount>{{"datasets", true}, {"checkpoints", false}}));
  EXPECT_EQ(s->secrets, (std::vector<std::string>{"hf-token"}));
  EXPECT_EQ(s->max_duration_seconds, 3600);
  EXPECT_EQ(s->restart, RestartPolicy::kOnFailure);
  EXPECT_EQ(s->retries, 2);
}

TEST(JobSpec, ThereIsNoFieldForPrivilegesHostNamespacesHostPathsOrDevices) {
  for (const char* field : {"privileged", "host_network", "host_pid", "host_ipc", "host_paths",
                            "devices", "capabilities", "user", "security_opt"}) {
    Json b = minimal();
    b[field] = true;
    EXPECT_NE(error_of(b).find(field), std::string::npos) << field << ": " << error_of(b);
  }
}

TEST(JobSpec, NoVariableThatChoosesGpusOrThatThePlatformSetsIsAccepted) {
  for (const char* name :
       {"NVIDIA_VISIBLE_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_IMEX_CHANNELS",
        "NVIDIA_SOMETHING_NEW", "CUDA_VERSION", "CUDA_VISIBLE_DEVICES", "RANK", "WORLD_SIZE",
        "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "GPUPLANE_JOB"}) {
    Json b = minimal();
    b["env"] = Json::array({{{"name", name}, {"value", "all"}}});
    std::string e = error_of(b);
    EXPECT_NE(e.find(name), std::string::npos) << name << " was accepted";
  }
  // Every name the platform sets in a member is refused.
  for (const auto& e : platform_env(MemberLaunch{})) {
    Json b = minimal();
    b["env"] = Json::array({{{"name", e.name}, {"value", "x"}}});
    EXPECT_FALSE(parse_job_spec(b)) << e.name;
  }
  Json ok = minimal();
  ok["env"] = Json::array({{{"name", "NVIDIA_DRIVER_CAPABILITIES"}, {"value", "compute"}}});
  EXPECT_TRUE(parse_job_spec(ok)) << error_of(ok);
}

TEST(JobSpec, BadValuesAreRefusedNamingTheField) {
  struct Case {
    const char* field;
    Json value;
    const char* says;
  };
  const Case cases[] = {
      {"name", "Train", "name"},
      {"image", "-v", "image"},
      {"image", "Team/Trainer", "image"},
      {"image", "busybox@sha256:abc", "image"},
      {"image", "127.0.0.1:99999999/x", "image"},
      {"count", 0, "count"},
      {"count", kMaxUnitsPerMember + 1, "count"},
      {"gang", kMaxGangMembers + 1, "gang"},
      {"max_duration_seconds", kMaxDurationSeconds + 1, "max_duration_seconds"},
      {"restart_policy", "always", "restart_policy"},
      {"retries", 1, "retries"},  // without on-failure
      {"volumes", Json::array({{{"kind", "home"}}}), "volumes[0]"},
      {"volumes", Json::array({{{"kind", "models"}}, {{"kind", "models"}}}), "twice"},
      {"secrets", {"a/b"}, "secrets[0]"},
      {"env", Json::array({{{"name", "1X"}, {"value", ""}}}), "env[0]"},
      {"env", Json::array({{{"name", "A"}, {"value", "1"}}, {{"name", "A"}, {"value", "2"}}}),
       "twice"},
      {"env", Json::array({{{"name", "A"}, {"value", "1"}, {"from", "x"}}}), "from"},
      {"command", Json::array(), "command"},
  };
  for (const auto& c : cases) {
    Json b = minimal();
    b[c.field] = c.value;
    if (std::string_view(c.field) == "command") b.erase("args");
    std::string e = error_of(b);
    EXPECT_NE(e.find(c.says), std::string::npos)
        << c.field << " = " << c.value.dump() << " gave: " << (e.empty() ? "accepted" : e);
  }
}

TEST(ImageReference, WellFormedReferencesAreAcceptedAndOthersNot) {
  for (const char* good :
       {"busybox", "library/busybox:1.36", "127.0.0.1:5000/gpuplane-test/busybox:1", "localhost/x",
        "ghcr.io/org/repo_a/b-c:v1.2.3",
        "ghcr.io/o/r@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"})
    EXPECT_TRUE(policy::valid_image_reference(good)) << good;
  for (const char* bad : {"", "-x", "--privileged", "UPPER", "a//b", "a/", "/a", "a:", "a:-t",
                          "host:0/x", "a b", "a@sha256:xyz", "ex$ample.com/x"})
    EXPECT_FALSE(policy::valid_image_reference(bad)) << bad;
}

TEST(ImageReference, TheAllowListIsTheWebhooksRule) {
  std::vector<std::string> allowed = {"127.0.0.1:5000/team", "ghcr.io"};
  EXPECT_TRUE(policy::registry_allowed(allowed, "127.0.0.1:5000/team/img:1"));
  EXPECT_TRUE(policy::registry_allowed(allowed, "ghcr.io/x/y"));
  EXPECT_FALSE(policy::registry_allowed(allowed, "127.0.0.1:5000/teamx/img"));
  EXPECT_FALSE(policy::registry_allowed(allowed, "busybox"));
  EXPECT_TRUE(policy::registry_allowed({}, "busybox"));
}

// ---- states ----

JobSpec spec_with(RestartPolicy p, int retries) {
  JobSpec s;
  s.restart = p;
  s.retries = retries;
  return s;
}

TEST(JobState, TheNormalPathAndEachFailureReason) {
  JobSpec never = spec_with(RestartPolicy::kNever, 0);
  auto step = [&](State from, Event e, int attempts = 1) {
    auto t = next_state(from, e, never, attempts);
    EXPECT_TRUE(t) << state_name(from) << ": " << (t ? "" : t.error().message);
    return t ? *t : Transition{State::kQueued};
  };
  EXPECT_EQ(step(State::kQueued, {Event::kPlaced}).to, State::kStarting);
  EXPECT_EQ(step(State::kStarting, {Event::kStarted}).to, State::kRunning);
  EXPECT_EQ(step(State::kRunning, {Event::kExited, 0}).to, State::kSucceeded);
  auto code3 = step(State::kRunning, {Event::kExited, 3});
  EXPECT_EQ(code3.to, State::kFailed);
  EXPECT_EQ(code3.failure, Failure::kExitCode);
  auto oom = step(State::kRunning, {Event::kExited, 137, true});
  EXPECT_EQ(oom.failure, Failure::kOom);
  EXPECT_EQ(step(State::kRunning, {Event::kNodeLost}).failure, Failure::kNodeLost);
  EXPECT_EQ(step(State::kRunning, {Event::kDeadline}).failure, Failure::kDeadline);
  Event pull{Event::kStartFailed};
  pull.start_failure = Failure::kImagePull;
  EXPECT_EQ(step(State::kStarting, pull).failure, Failure::kImagePull);
  EXPECT_EQ(step(State::kStarting, {Event::kStartFailed}).failure, Failure::kStartFailed);
  for (State s : {State::kQueued, State::kStarting, State::kRunning}) {
    EXPECT_EQ(step(s, {Event::kCancel}).to, State::kCancelled);
    EXPECT_EQ(step(s, {Event::kPreempt}).to, State::kPreempted);
  }
}

TEST(JobState, AFinishedJobTakesNoEventAndOutOfOrderEventsAreRefused) {
  JobSpec s = spec_with(RestartPolicy::kOnFailure, 3);
  for (State done : {State::kSucceeded, State::kFailed, State::kCancelled, State::kPreempted})
    for (auto k : {Event::kPlaced, Event::kStarted, Event::kExited, Event::kCancel, Event::kPreempt,
                   Event::kNodeLost})
      EXPECT_FALSE(next_state(done, {k}, s, 1)) << state_name(done) << " took " << k;
  EXPECT_FALSE(next_state(State::kQueued, {Event::kStarted}, s, 1));
  EXPECT_FALSE(next_state(State::kQueued, {Event::kExited}, s, 1));
  EXPECT_FALSE(next_state(State::kQueued, {Event::kNodeLost}, s, 1));
  EXPECT_FALSE(next_state(State::kRunning, {Event::kPlaced}, s, 1));
  EXPECT_FALSE(next_state(State::kStarting, {Event::kDeadline}, s, 1));
}

// A lost node queues an on-failure job again (a new attempt elsewhere) while retries are left;
// an eviction by a drain's deadline always does, whatever the policy.
TEST(JobState, ALostNodeRequeuesUnderOnFailureAndAnEvictionAlways) {
  JobSpec retry = spec_with(RestartPolicy::kOnFailure, 1),
          never = spec_with(RestartPolicy::kNever, 0);
  for (State from : {State::kStarting, State::kRunning}) {
    auto lost = next_state(from, {Event::kNodeLost}, retry, 1);
    ASSERT_TRUE(lost);
    EXPECT_EQ(lost->to, State::kQueued);
    EXPECT_TRUE(lost->requeue);
    EXPECT_FALSE(lost->restart);
    auto spent = next_state(from, {Event::kNodeLost}, retry, 2);
    ASSERT_TRUE(spent);
    EXPECT_EQ(spent->to, State::kFailed);
    EXPECT_FALSE(spent->requeue);
    auto evicted = next_state(from, {Event::kEvicted}, never, 5);
    ASSERT_TRUE(evicted);
    EXPECT_EQ(evicted->to, State::kQueued);
    EXPECT_TRUE(evicted->requeue);
  }
  EXPECT_FALSE(next_state(State::kQueued, {Event::kEvicted}, never, 0));
  EXPECT_FALSE(next_state(State::kSucceeded, {Event::kEvicted}, never, 1));
}

TEST(JobState, OnFailureStartsAFailedJobAgainExactlyRetriesTimes) {
  JobSpec s = spec_with(RestartPolicy::kOnFailure, 2);
  int attempts = 1, restarts = 0;
  for (;;) {
    auto t = next_state(State::kRunning, {Event::kExited, 1}, s, attempts);
    ASSERT_TRUE(t);
    if (!t->restart) {
      EXPECT_EQ(t->to, State::kFailed);
      break;
    }
    EXPECT_EQ(t->to, State::kStarting);
    ++restarts;
    ++attempts;
    ASSERT_LT(restarts, 10);
  }
  EXPECT_EQ(restarts, 2);
  // Success is never retried; `never` never retries.
  EXPECT_FALSE(next_state(State::kRunning, {Event::kExited, 0}, s, 1)->restart);
  EXPECT_FALSE(
      next_state(State::kRunning, {Event::kExited, 1}, spec_with(RestartPolicy::kNever, 0), 1)
          ->restart);
}

TEST(JobState, NamesRoundTrip) {
  for (State s : {State::kQueued, State::kStarting, State::kRunning, State::kSucceeded,
                  State::kFailed, State::kCancelled, State::kPreempted})
    EXPECT_EQ(parse_state(state_name(s)), s);
  EXPECT_FALSE(parse_state("done"));
}

// ---- the member's command line ----

MemberLaunch launch() {
  MemberLaunch m;
  m.container = container_name("job_1", 1, 2);
  m.job_id = "job_1";
  m.tenant_id = "ten_a";
  m.project_id = "prj_a";
  m.allocation_id = "alc_1";
  m.rank = 1;
  m.world_size = 2;
  m.attempt = 2;
  m.master_addr = "10.64.0.2";
  m.image = "127.0.0.1:5000/gpuplane-test/busybox:1";
  m.command = {"/bin/sh", "-c"};
  m.args = {"echo hi"};
  m.env = {{"LR", "0.1"}};
  m.devices = {{"nvidia.com/gpu=GPU-aaa", "GPU-aaa"}, {"nvidia.com/gpu=GPU-bbb", "GPU-bbb"}};
  m.ids_first = 1'065'536;
  m.ids_count = 65'536;
  m.run_as = 1'065'537;
  m.mounts = {{"/srv/gp/acme/p/checkpoints", "/data/checkpoints", false},
              {"/run/gpuplane/jobs/x/secrets", "/run/secrets", true}};
  m.netns = "/run/netns/gp-job_1-r1";
  m.hostname = "train-1";
  m.limits = {.cpu_millis = 2500, .memory_bytes = 1 << 30, .pids = 512, .open_files = 1024};
  return m;
}

// The value after each occurrence of `flag`.
std::vector<std::string> values(const std::vector<std::string>& argv, std::string_view flag) {
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == flag) out.push_back(argv[i + 1]);
  return out;
}

TEST(PodmanArgv, EveryBoundaryIsOnTheCommandLine) {
  auto argv = podman_run_argv(launch());
  ASSERT_TRUE(argv) << argv.error().message;
  EXPECT_EQ(values(*argv, "--runtime"), (std::vector<std::string>{"runc"}));
  EXPECT_EQ(values(*argv, "--cap-drop"), (std::vector<std::string>{"all"}));
  EXPECT_EQ(values(*argv, "--security-opt"), (std::vector<std::string>{"no-new-privileges"}));
  EXPECT_EQ(values(*argv, "--uidmap"), (std::vector<std::string>{"0:1065536:65536"}));
  EXPECT_EQ(values(*argv, "--gidmap"), (std::vector<std::string>{"0:1065536:65536"}));
  EXPECT_EQ(values(*argv, "--user"), (std::vector<std::string>{"1:1"}));
  EXPECT_EQ(values(*argv, "--network"), (std::vector<std::string>{"ns:/run/netns/gp-job_1-r1"}));
  EXPECT_EQ(values(*argv, "--hostname"), (std::vector<std::string>{"train-1"}));
  for (const char* ns : {"--pid", "--ipc", "--uts"})
    EXPECT_EQ(values(*argv, ns), (std::vector<std::string>{"private"})) << ns;
  EXPECT_EQ(values(*argv, "--device"),
            (std::vector<std::string>{"nvidia.com/gpu=GPU-aaa", "nvidia.com/gpu=GPU-bbb"}));
  EXPECT_EQ(values(*argv, "--memory"), (std::vector<std::string>{"1073741824"}));
  EXPECT_EQ(values(*argv, "--memory-swap"), (std::vector<std::string>{"1073741824"}));
  EXPECT_EQ(values(*argv, "--cpus"), (std::vector<std::string>{"2.500"}));
  EXPECT_EQ(values(*argv, "--pids-limit"), (std::vector<std::string>{"512"}));
  EXPECT_EQ(values(*argv, "--mount"),
            (std::vector<std::string>{
                "type=bind,source=/srv/gp/acme/p/checkpoints,destination=/data/checkpoints",
                "type=bind,source=/run/gpuplane/jobs/x/secrets,destination=/run/secrets,ro=true"}));
  EXPECT_EQ(values(*argv, "--entrypoint"), (std::vector<std::string>{R"(["/bin/sh","-c"])"}));
  // The image, then the args, end the line.
  ASSERT_GE(argv->size(), 2u);
  EXPECT_EQ((*argv)[argv->size() - 2], "127.0.0.1:5000/gpuplane-test/busybox:1");
  EXPECT_EQ(argv->back(), "echo hi");
  for (const auto& a : *argv) {
    EXPECT_NE(a, "--privileged");
    EXPECT_EQ(a.find("unconfined"), std::string::npos) << a;
    EXPECT_NE(a, "host") << "a host namespace";
    EXPECT_NE(a, "--volume");
    EXPECT_NE(a, "--cap-add");
  }
  auto labels = values(*argv, "--label");
  EXPECT_NE(std::find(labels.begin(), labels.end(), "dev.gpuplane.job=job_1"), labels.end());
  EXPECT_NE(std::find(labels.begin(), labels.end(), "dev.gpuplane.attempt=2"), labels.end());
}

// A gang member waiting for the others is created, not started: the same line with `create`.
TEST(PodmanArgv, ACreatedMemberHasTheSameBoundariesAndIsNotStarted) {
  auto run = podman_run_argv(launch());
  MemberLaunch waiting = launch();
  waiting.create_only = true;
  auto create = podman_run_argv(waiting);
  ASSERT_TRUE(run && create);
  EXPECT_EQ(std::vector<std::string>(run->begin() + 3, run->begin() + 5),
            (std::vector<std::string>{"run", "--detach"}));
  EXPECT_EQ((*create)[3], "create");
  EXPECT_EQ(std::find(create->begin(), create->end(), "--detach"), create->end());
  EXPECT_EQ(std::vector<std::string>(create->begin() + 4, create->end()),
            std::vector<std::string>(run->begin() + 5, run->end()));
}

TEST(PodmanArgv, ThePlatformsEnvironmentComesLastAndMatchesTheDevices) {
  auto argv = podman_run_argv(launch());
  ASSERT_TRUE(argv);
  auto env = values(*argv, "--env");
  ASSERT_FALSE(env.empty());
  EXPECT_EQ(env.front(), "LR=0.1");
  auto at = [&](std::string_view prefix) {
    auto it = std::find_if(env.begin(), env.end(),
                           [&](const std::string& e) { return e.starts_with(prefix); });
    return it == env.end() ? -1 : static_cast<int>(it - env.begin());
  };
  EXPECT_GT(at("NVIDIA_VISIBLE_DEVICES="), at("LR="));
  EXPECT_NE(std::find(env.begin(), env.end(), "NVIDIA_VISIBLE_DEVICES=GPU-aaa,GPU-bbb"), env.end());
  EXPECT_NE(std::find(env.begin(), env.end(), "CUDA_VISIBLE_DEVICES=0,1"), env.end());
  EXPECT_NE(std::find(env.begin(), env.end(), "RANK=1"), env.end());
  EXPECT_NE(std::find(env.begin(), env.end(), "WORLD_SIZE=2"), env.end());
  EXPECT_NE(std::find(env.begin(), env.end(), "MASTER_ADDR=10.64.0.2"), env.end());
  // No device: "void", so an image's own NVIDIA_VISIBLE_DEVICES=all gives nothing.
  MemberLaunch none = launch();
  none.devices.clear();
  auto e2 = platform_env(none);
  EXPECT_EQ(e2[0].name, "NVIDIA_VISIBLE_DEVICES");
  EXPECT_EQ(e2[0].value, "void");
  EXPECT_EQ(e2[1].value, "");
}

TEST(PodmanArgv, UnusableLaunchesAreRefused) {
  auto refused = [](auto change) {
    MemberLaunch m = launch();
    change(m);
    return !podman_run_argv(m);
  };
  EXPECT_TRUE(refused([](MemberLaunch& m) { m.image = "--privileged"; }));
  EXPECT_TRUE(refused([](MemberLaunch& m) { m.run_as = 0; }));
  EXPECT_TRUE(refused([](MemberLaunch& m) { m.run_as = m.ids_first + m.ids_count; }));
  EXPECT_TRUE(refused([](MemberLaunch& m) { m.mounts[0].host_path = "relative"; }));
  EXPECT_TRUE(refused([](MemberLaunch& m) { m.mounts[0].host_path += ",ro=false"; }));
  EXPECT_TRUE(refused([](MemberLaunch& m) { m.mounts[1].container_path = "/data/checkpoints"; }));
  EXPECT_TRUE(refused([](MemberLaunch& m) { m.netns = "host"; }));
  EXPECT_TRUE(refused([](MemberLaunch& m) { m.hostname = "a.b"; }));
  EXPECT_TRUE(refused([](MemberLaunch& m) { m.hostname = "--privileged"; }));
  MemberLaunch no_net = launch();
  no_net.netns.clear();
  auto argv = podman_run_argv(no_net);
  ASSERT_TRUE(argv);
  EXPECT_EQ(values(*argv, "--network"), (std::vector<std::string>{"none"}));
}

TEST(MemberNames, TheHostnameIsTheJobAndRankAndStaysOneLabel) {
  EXPECT_EQ(member_hostname("train", 0), "train-0");
  EXPECT_EQ(member_hostname("train", 12), "train-12");
  const std::string long_name(63, 'a');
  EXPECT_EQ(member_hostname(long_name, 7), std::string(61, 'a') + "-7");
  // Cut where the name had a '-': never "--" before the rank.
  EXPECT_EQ(member_hostname(std::string(60, 'a') + "-bcd", 7), std::string(60, 'a') + "-7");
  EXPECT_TRUE(validate_dns_label("h", member_hostname(std::string(61, 'b') + "-c", 1023)));
}

TEST(MemberNames, HostsNameTheJobsMembersAndResolvConfOnlyTheReachableResolvers) {
  MemberNames n{.hostname = "train-1",
                .hosts = {{"train-0", "10.64.0.2"}, {"train-1", "10.64.0.3"}},
                .nameservers = {"192.0.2.53"}};
  EXPECT_EQ(render_hosts(n),
            "# Written by the gpuplane agent: this member and the members of its job.\n"
            "127.0.0.1\tlocalhost\n::1\tlocalhost\n10.64.0.2\ttrain-0\n10.64.0.3\ttrain-1\n");
  const std::string conf = render_resolv_conf(n);
  EXPECT_NE(conf.find("\nnameserver 192.0.2.53\n"), std::string::npos) << conf;
  // No network: its own name on loopback, and no nameserver at all.
  MemberNames alone{.hostname = "solo-0"};
  EXPECT_NE(render_hosts(alone).find("127.0.1.1\tsolo-0\n"), std::string::npos);
  EXPECT_EQ(render_resolv_conf(alone).find("\nnameserver"), std::string::npos);
}

TEST(MemberNames, TheNodesResolversAreItsIpv4NameserversButLoopback) {
  EXPECT_EQ(resolv_conf_nameservers("# a comment\nnameserver 127.0.0.53\nsearch example.org\n"
                                    "nameserver 192.0.2.1\nnameserver  10.0.0.2 # second\n"
                                    "nameserver 2001:db8::1\nnameserver 300.1.1.1\n"
                                    "nameserverx 192.0.2.9\n"),
            (std::vector<std::string>{"192.0.2.1", "10.0.0.2"}));
  EXPECT_TRUE(resolv_conf_nameservers("").empty());
}

TEST(PodmanInspect, ReadsStateExitOomAndLabels) {
  Json j = Json::parse(R"([{"Name":"gp-job_1-r0-a1","ImageDigest":"sha256:ab",
    "State":{"Status":"exited","Running":false,"ExitCode":137,"OOMKilled":true,"Error":""},
    "Config":{"Labels":{"dev.gpuplane.job":"job_1","dev.gpuplane.rank":"0",
      "dev.gpuplane.attempt":"1","dev.gpuplane.allocation":"alc_1"}}},
    {"Name":"other","State":{"Status":"running","Running":true,"ExitCode":0},"Config":{}},
    {"Name":"pinned","ImageDigest":"sha256:local","ImageName":"127.0.0.1:5000/t/b@sha256:pulled",
     "State":{"Status":"running","Running":true},"Config":{}}])");
  auto s = parse_podman_inspect(j);
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_EQ(s->size(), 3u);
  EXPECT_EQ((*s)[0].state, "exited");
  EXPECT_EQ((*s)[0].exit_code, 137);
  EXPECT_TRUE((*s)[0].oom_killed);
  EXPECT_EQ((*s)[0].job_id, "job_1");
  EXPECT_EQ((*s)[0].allocation_id, "alc_1");
  EXPECT_EQ((*s)[0].attempt, 1);
  EXPECT_EQ((*s)[0].image_digest, "sha256:ab");
  EXPECT_TRUE((*s)[1].running);
  EXPECT_EQ((*s)[1].job_id, "");
  EXPECT_EQ((*s)[2].image_digest, "sha256:pulled") << "made from a pulled digest: that digest";
  EXPECT_FALSE(parse_podman_inspect(Json::object()));
  EXPECT_FALSE(parse_podman_inspect(Json::parse(R"([{"Name":"x"}])")));
}

TEST(PodmanPs, ReadsNamesStatesExitCodesAndLabels) {
  Json j = Json::parse(R"([{"Names":["gp-job_1-r2-a1"],"State":"exited","ExitCode":5,
    "Labels":{"dev.gpuplane.job":"job_1","dev.gpuplane.rank":"2","dev.gpuplane.attempt":"1"}},
    {"Names":["x"],"State":"running","ExitCode":0,"Labels":null}])");
  auto s = parse_podman_ps(j);
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].name, "gp-job_1-r2-a1");
  EXPECT_EQ((*s)[0].exit_code, 5);
  EXPECT_FALSE((*s)[0].running);
  EXPECT_EQ((*s)[0].rank, 2);
  EXPECT_EQ((*s)[0].job_id, "job_1");
  EXPECT_TRUE((*s)[1].running);
  EXPECT_FALSE(parse_podman_ps(Json::parse(R"([{"State":"running"}])")));
}

TEST(Oom, OnlyASigkillAtTheMemoryLimitOrThePodmansWordIsOutOfMemory) {
  ContainerStatus killed;
  killed.exit_code = 137;
  EXPECT_TRUE(ended_by_oom(killed, true));
  EXPECT_FALSE(ended_by_oom(killed, false));
  ContainerStatus failed;
  failed.exit_code = 1;
  EXPECT_FALSE(ended_by_oom(failed, true));
  ContainerStatus reported;
  reported.oom_killed = true;
  EXPECT_TRUE(ended_by_oom(reported, false));
  ContainerStatus running = killed;
  running.running = true;
  EXPECT_FALSE(ended_by_oom(running, true));
}

TEST(SimCdi, OneStandInDeviceNodePerUuid) {
  std::vector<std::string> uuids = {"GPU-sim-0", "GPU-sim-1"};
  std::vector<std::string> paths = {"/dev/gpuplane-sim/n1/gpu0", "/dev/gpuplane-sim/n1/gpu1"};
  auto spec = sim_cdi_spec(uuids, paths);
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ((*spec)["kind"], std::string(kSimCdiKind));
  ASSERT_EQ((*spec)["devices"].size(), 2u);
  EXPECT_EQ((*spec)["devices"][1]["name"], "GPU-sim-1");
  EXPECT_EQ((*spec)["devices"][1]["containerEdits"]["deviceNodes"][0]["path"], paths[1]);
  std::vector<std::string> outside = {"/etc/passwd", "/dev/x"};
  EXPECT_FALSE(sim_cdi_spec(uuids, outside));
  EXPECT_FALSE(sim_cdi_spec(uuids, std::span(paths).first(1)));
}

}  // namespace
}  // namespace gp::jobs
