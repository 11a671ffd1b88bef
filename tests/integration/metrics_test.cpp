// The metrics of docs/observability.md through the API, with the node's side played by hand: a
// heartbeat's samples become DCGM-named series labelled with who holds each GPU; /metrics counts
// the fleet, the queue and the jobs; a tenant reads its own GPUs' series and its job's
// utilization over time, never another tenant's; platform endpoints refuse tenant credentials.
#include <gtest/gtest.h>

#include <string>

#include "integration/harness.h"

namespace gp::it {
namespace {

// The value of the one series of `family` whose line contains every one of `parts`; "" when
// none (or several) does.
std::string value_of(const std::string& text, const std::string& family,
                     std::initializer_list<std::string> parts) {
  std::string found;
  int matches = 0;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    if (!line.starts_with(family + "{")) continue;
    bool all = true;
    for (const auto& p : parts) all = all && line.find(p) != std::string::npos;
    if (!all) continue;
    ++matches;
    found = line.substr(line.rfind(' ') + 1);
  }
  return matches == 1 ? found : "";
}

class Metrics : public ::testing::Test {
 protected:
  TestServer s;
  TenantInfo acme, bravo;
  std::string acme_jobs, node_token;

  void SetUp() override {
    const std::string admin = s.admin_token();
    auto o = s.request("POST", "/v1/offerings",
                       {{"name", "gpu1"}, {"tier", "dedicated-gpu"}, {"models", {"H200"}}}, admin);
    ASSERT_EQ(o.status, 201) << o.raw;
    acme = s.create_tenant("acme", "acme-admin");
    bravo = s.create_tenant("bravo", "bravo-admin");
    acme_jobs = "/v1/tenants/" + acme.id + "/projects/" +
                s.create_project(acme.admin_token, acme.id, "train").at("id").get<std::string>() +
                "/jobs";
    for (const auto& t : {acme.id, bravo.id}) {
      auto q = s.request("PUT", "/v1/tenants/" + t + "/quota",
                         {{"models", {{"H200", {{"nominal", 1}, {"limit", 1}}}}}}, admin);
      ASSERT_EQ(q.status, 200) << q.raw;
    }
    auto jt = s.request("POST", "/v1/join-tokens", Json::object(), admin);
    auto enrolled =
        s.request("POST", "/v1/agent/enroll",
                  {{"join_token", jt.body["token"]}, {"inventory", h200_inventory("m-node", 2)}});
    ASSERT_EQ(enrolled.status, 201) << enrolled.raw;
    node_token = enrolled.body["credential"];
  }

  Resp heartbeat(const Json& body) {
    return s.request("POST", "/v1/agent/heartbeat", body, node_token);
  }
  Json sample(const std::string& gpu, int util) {
    return {{"gpu_uuid", gpu},
            {"util_pct", util},
            {"mem_used_bytes", int64_t{3} << 30},
            {"mem_total_bytes", int64_t{141} << 30},
            {"power_mw", 81500},
            {"energy_mj", 5000000},
            {"temperature_c", 44},
            {"sm_clock_mhz", 1980},
            {"ecc_corrected", 2},
            {"ecc_uncorrected", 0}};
  }
};

TEST_F(Metrics, GpusCarryTheirHoldersAndATenantReadsOnlyItsOwn) {
  const std::string admin = s.admin_token();
  // acme runs a job on one GPU; bravo holds the other; bravo's second allocation waits.
  auto job = s.request("POST", acme_jobs,
                       {{"name", "train-1"},
                        {"image", "registry.example.com/acme/trainer:1"},
                        {"offering", "gpu1"},
                        {"command", {"python", "train.py"}}},
                       acme.admin_token);
  ASSERT_EQ(job.status, 201) << job.raw;
  const std::string job_id = job.body["id"];
  const std::string bravo_allocs =
      "/v1/tenants/" + bravo.id + "/projects/" +
      s.create_project(bravo.admin_token, bravo.id, "nlp").at("id").get<std::string>() +
      "/allocations";
  for (const char* name : {"b1", "b2"}) {
    auto a =
        s.request("POST", bravo_allocs, {{"name", name}, {"offering", "gpu1"}}, bravo.admin_token);
    ASSERT_EQ(a.status, 201) << a.raw;
  }
  auto hb = heartbeat(Json::object());
  ASSERT_EQ(hb.status, 200) << hb.raw;
  const Json& assigned = hb.body["assignments"]["jobs"];
  ASSERT_EQ(assigned.size(), 1u) << hb.raw;
  const Json running = {{"job", job_id},   {"rank", 0},    {"attempt", 1}, {"state", "running"},
                        {"log_offset", 0}, {"log_end", 0}, {"log", ""}};
  ASSERT_EQ(heartbeat({{"jobs", Json::array({running})}}).status, 200);
  auto j = s.request("GET", acme_jobs + "/" + job_id, nullptr, acme.admin_token);
  ASSERT_EQ(j.body["state"], "running") << j.raw;
  auto acme_allocs =
      s.request("GET", "/v1/tenants/" + acme.id + "/allocations", nullptr, acme.admin_token);
  ASSERT_EQ(acme_allocs.body["items"].size(), 1u) << acme_allocs.raw;
  const std::string acme_gpu = acme_allocs.body["items"][0]["placement"]["gpus"][0]["gpu"];
  const std::string bravo_gpu =
      acme_gpu == "GPU-m-node-0000" ? "GPU-m-node-0001" : "GPU-m-node-0000";
  auto reported =
      heartbeat({{"samples", Json::array({sample(acme_gpu, 42), sample(bravo_gpu, 7)})}});
  ASSERT_EQ(reported.status, 200) << reported.raw;

  // The operator's view: every GPU, with its holder.
  auto hw = s.request("GET", "/metrics/hardware", nullptr, admin);
  ASSERT_EQ(hw.status, 200) << hw.raw;
  EXPECT_EQ(value_of(hw.raw, "DCGM_FI_DEV_GPU_UTIL",
                     {"gpu=\"" + acme_gpu + "\"", "tenant=\"acme\"", "job=\"" + job_id + "\"",
                      "node=\"m-node\"", "model=\"H200\""}),
            "42");
  EXPECT_EQ(value_of(hw.raw, "DCGM_FI_DEV_GPU_UTIL",
                     {"gpu=\"" + bravo_gpu + "\"", "tenant=\"bravo\"", "job=\"\""}),
            "7");
  EXPECT_EQ(value_of(hw.raw, "DCGM_FI_DEV_POWER_USAGE", {acme_gpu}), "81.5");
  EXPECT_EQ(value_of(hw.raw, "DCGM_FI_DEV_FB_USED", {acme_gpu}), "3072");
  EXPECT_EQ(value_of(hw.raw, "DCGM_FI_DEV_FB_FREE", {acme_gpu}), std::to_string(138 * 1024));
  EXPECT_EQ(value_of(hw.raw, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", {acme_gpu}), "2");
  EXPECT_EQ(value_of(hw.raw, "gpuplane_node_info", {"node=\"m-node\"", "state=\"ready\""}), "1");
  auto fleet = s.request("GET", "/metrics", nullptr, admin);
  ASSERT_EQ(fleet.status, 200);
  EXPECT_NE(fleet.raw.find("gpuplane_jobs{state=\"running\"} 1\n"), std::string::npos);
  EXPECT_NE(fleet.raw.find("gpuplane_queue_length{tenant=\"bravo\"} 1\n"), std::string::npos);
  EXPECT_NE(fleet.raw.find("gpuplane_quota_used_gpus{tenant=\"acme\",model=\"H200\"} 1\n"),
            std::string::npos);
  EXPECT_NE(fleet.raw.find("gpuplane_allocations{state=\"pending\",tier=\"dedicated-gpu\"} 1\n"),
            std::string::npos);
  EXPECT_EQ(s.request("GET", "/metrics/hardware?shard=3/2", nullptr, admin).status, 400);

  // A tenant's view: its own GPU alone, and no node series.
  auto own = s.request("GET", "/v1/tenants/" + acme.id + "/metrics", nullptr, acme.admin_token);
  ASSERT_EQ(own.status, 200) << own.raw;
  EXPECT_EQ(value_of(own.raw, "DCGM_FI_DEV_GPU_UTIL", {acme_gpu, job_id}), "42");
  EXPECT_EQ(own.raw.find(bravo_gpu), std::string::npos) << own.raw;
  EXPECT_EQ(own.raw.find("bravo"), std::string::npos);
  EXPECT_EQ(own.raw.find("gpuplane_node_info"), std::string::npos);
  // Another tenant's does not exist for it (404, as every tenant route answers); the platform's
  // endpoints are refused.
  EXPECT_EQ(
      s.request("GET", "/v1/tenants/" + bravo.id + "/metrics", nullptr, acme.admin_token).status,
      404);
  EXPECT_EQ(s.request("GET", "/metrics/hardware", nullptr, acme.admin_token).status, 403);
  EXPECT_EQ(s.request("GET", "/metrics", nullptr, acme.admin_token).status, 403);

  // The job's utilization over time: its one GPU, from the samples since it started.
  ASSERT_EQ(heartbeat({{"samples", Json::array({sample(acme_gpu, 58)})}}).status, 200);
  auto u = s.request("GET", acme_jobs + "/" + job_id + "/utilization?points=1", nullptr,
                     acme.admin_token);
  ASSERT_EQ(u.status, 200) << u.raw;
  ASSERT_EQ(u.body["gpus"].size(), 1u) << u.raw;
  EXPECT_EQ(u.body["gpus"][0]["gpu"], acme_gpu);
  EXPECT_EQ(u.body["gpus"][0]["node"], "m-node");
  ASSERT_EQ(u.body["gpus"][0]["points"].size(), 1u) << u.raw;
  EXPECT_EQ(u.body["gpus"][0]["points"][0]["util_pct"], 50.0);  // (42 + 58) / 2
  EXPECT_EQ(u.body["gpus"][0]["points"][0]["samples"], 2);
  EXPECT_EQ(s.request("GET", acme_jobs + "/" + job_id + "/utilization?points=0", nullptr,
                      acme.admin_token)
                .status,
            400);
  EXPECT_EQ(s.request("GET", acme_jobs + "/" + job_id + "/utilization", nullptr, bravo.admin_token)
                .status,
            404);
}

}  // namespace
}  // namespace gp::it
