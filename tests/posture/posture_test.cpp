// The posture evaluator as a specification: a tenant that satisfies everything passes every
// control; taking away one thing fails exactly that control (for every control in the table, so
// a control added without a case here fails CompliantTenant.EveryControlHasABreakingCase); the
// class decides which controls are required, as DESIGN.md says.
#include "posture/posture.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

namespace gp::posture {
namespace {

using IC = IsolationClass;

constexpr int64_t kNow = int64_t{1'790'000'000} * 1'000'000;  // 2026-09-21
constexpr int64_t kDay = int64_t{24} * 3600 * 1'000'000;

network::Ipv4Cidr cidr(const char* text) { return network::parse_cidr(text).value(); }

ProbeFact refused(const char* control) { return {true, "restricted v1.37", control}; }

// A regulated tenant (every control required) that satisfies every control.
Facts compliant() {
  Facts f;
  f.tenant_id = "ten_acme";
  f.tenant_name = "acme";
  f.isolation_class = IC::kRegulated;
  f.checked_at = kNow;
  f.identity.users = 2;
  f.identity.active_keys = {{"key_1", "ci", "service_account", "sva_1", kNow + 30 * kDay}};
  f.identity.bindings = {
      {"rb_1", "tenant-admin", "tenant", "ten_acme", "user", "usr_1", "ten_acme"},
      {"rb_2", "project-member", "project", "ten_acme", "service_account", "sva_1", "ten_acme"},
      // A platform operator bound inside the tenant is no escalation and crosses no boundary.
      {"rb_3", "tenant-admin", "tenant", "ten_acme", "user", "usr_ops", std::nullopt},
  };
  f.hardware.live = {{"alc_1", "active", Tier::kDedicatedNode},
                     {"alc_2", "placed", Tier::kDedicatedPool}};
  f.scheduling.tenant_models = {{"H200", 8 * 7000, 16 * 7000}};
  f.scheduling.projects = {{"vision", {{"H200", 4 * 7000, std::nullopt}}}};
  f.network.supernet = cidr("10.64.0.0/10");
  f.network.segment = network::Segment{"acme", 10000, cidr("10.64.0.0/24")};
  f.network.other_segments = {{"bravo", 10001, cidr("10.64.1.0/24")}};
  f.network.policy_stored = true;
  network::TenantPolicy p{.tenant = "acme"};
  p.egress.push_back({cidr("203.0.113.0/24"), network::Protocol::kTcp, {{443, 443}}, "registry"});
  p.egress.push_back({cidr("198.51.100.7"), network::Protocol::kIcmp, {}, "ping"});
  f.network.policy = p;
  f.network.tls = true;
  f.storage.keyring = KeyringFact{false, 2, {1, 2}, kNow - 10 * kDay};
  f.storage.secrets = {{"registry", 2, "acme"}, {"s3", 1, "acme"}};
  f.storage.volumes = VolumeFacts{1'000'000,
                                  65'536,
                                  {{"acme", 1'000'000, 1'000'000, 0750},
                                   {"acme/vision/datasets", 1'000'001, 1'000'001, 02770}}};
  f.storage.trees = {{.node = "gpu-a",
                      .encrypted = true,
                      .encryption_detail = "fscrypt v2 under key 00112233445566778899aabbccddeeff",
                      .audited_at = kNow - 3600 * int64_t{1'000'000}}};
  f.workload = {refused("privileged"),
                refused("restrictedVolumes"),
                refused("hostNamespaces"),
                refused("hostPorts"),
                refused("tenant.placement"),
                refused("tenant.gpuDeviceEnv"),
                {}};
  f.metering.allocations = 3;
  f.metering.usage = UsageFacts{};
  f.audit = {.chain_ok = true,
             .records_checked = 40,
             .oldest_seq = 1,
             .tenant_entries = 12,
             .latest_tenant_entry_at = kNow - kDay,
             .reads_audited = true};
  return f;
}

// The compliant tenant under another id and name (its bindings and secrets follow it).
Facts compliant_as(const std::string& id, const std::string& name) {
  Facts f = compliant();
  for (auto& b : f.identity.bindings) {
    if (b.scope_tenant == f.tenant_id) b.scope_tenant = id;
    if (b.subject_tenant == f.tenant_id) b.subject_tenant = id;
  }
  for (auto& sec : f.storage.secrets) sec.sealed_for = name;
  f.network.segment->tenant = name;
  f.tenant_id = id;
  f.tenant_name = name;
  return f;
}

// One way to break each control, keyed by control id.
const std::map<std::string, std::function<void(Facts&)>>& breakers() {
  static const std::map<std::string, std::function<void(Facts&)>> kBreak = {
      {"identity.api-key-expiry",
       [](Facts& f) {
         f.identity.active_keys.push_back({"key_2", "forever", "user", "usr_1", std::nullopt});
       }},
      {"identity.no-role-escalation",
       [](Facts& f) {
         f.identity.bindings.push_back(
             {"rb_9", "platform-admin", "platform", std::nullopt, "user", "usr_1", "ten_acme"});
       }},
      {"identity.tenant-boundary",
       [](Facts& f) {
         f.identity.bindings.push_back(
             {"rb_9", "project-viewer", "project", "ten_acme", "user", "usr_b", "ten_bravo"});
       }},
      {"hardware.tier-minimum",
       [](Facts& f) {
         f.hardware.live.push_back({"alc_9", "active", Tier::kDedicatedGpu});
       }},
      {"hardware.node-exclusive",
       [](Facts& f) {
         f.hardware.shared_nodes.push_back({"n1", "alc_1", 1});
       }},
      {"scheduling.tenant-quota", [](Facts& f) { f.scheduling.tenant_models.clear(); }},
      {"scheduling.project-quotas",
       [](Facts& f) {
         f.scheduling.projects.push_back({"nlp", {}});
       }},
      {"network.segment", [](Facts& f) { f.network.segment.reset(); }},
      {"network.default-deny",
       [](Facts& f) {
         // Names another tenant's addresses with explicit ports: only default deny breaks.
         f.network.policy->egress.push_back(
             {cidr("10.64.1.0/24"), network::Protocol::kTcp, {{22, 22}}, "bravo"});
       }},
      {"network.explicit-egress",
       [](Facts& f) {
         f.network.policy->egress.push_back(
             {cidr("192.0.2.0/24"), network::Protocol::kAny, {}, "anything"});
       }},
      {"network.tls", [](Facts& f) { f.network.tls = false; }},
      {"storage.private-volumes",
       [](Facts& f) {
         f.storage.volumes->volumes.push_back({"acme/vision/scratch", 1'000'001, 1'000'001, 03777});
       }},
      {"storage.volumes-encrypted",
       [](Facts& f) {
         f.storage.trees.push_back({.node = "gpu-b",
                                    .encrypted = false,
                                    .encryption_detail = "/srv cannot encrypt: tmpfs",
                                    .audited_at = kNow});
       }},
      {"storage.permission-audit",
       [](Facts& f) {
         f.storage.trees[0].finding_count = 1;
         f.storage.trees[0].findings = {
             {{"path", "vision/datasets/x"}, {"kind", "other-readable"}}};
       }},
      {"storage.secrets-encrypted",
       [](Facts& f) {
         f.storage.secrets.push_back({"old", 7, "acme"});
       }},
      {"storage.data-key-rotation",
       [](Facts& f) { f.storage.keyring->changed_at = kNow - 91 * kDay; }},
      {"workload.block-privileged", [](Facts& f) { f.workload.privileged.denied = false; }},
      {"workload.block-host-path", [](Facts& f) { f.workload.host_path.denied = false; }},
      {"workload.block-host-namespaces",
       [](Facts& f) { f.workload.host_namespaces.denied = false; }},
      {"workload.block-host-ports", [](Facts& f) { f.workload.host_ports.denied = false; }},
      {"workload.block-other-tenant-pools",
       [](Facts& f) { f.workload.other_tenant_pool.denied = false; }},
      {"workload.gpu-device-env",
       [](Facts& f) {
         // A node shared with another tenant whose toolkit keeps the default.
         fleet::GpuRuntime defaults{.toolkit_config = "/etc/nvidia-container-runtime/config.toml",
                                    .toolkit_config_state = "absent",
                                    .accepts_env_unprivileged = true,
                                    .accepts_volume_mounts = false};
         f.workload.node_sharing_gpu_nodes.push_back({"gpu-07", defaults});
       }},
      {"metering.allocation-events",
       [](Facts& f) { f.metering.allocations_without_events.push_back("alc_1"); }},
      {"metering.usage-recorded",
       [](Facts& f) { f.metering.usage->placed_without_usage.push_back("alc_1"); }},
      {"audit.chain",
       [](Facts& f) {
         f.audit.chain_ok = false;
         f.audit.chain_reason = "record 7: hash mismatch";
       }},
      {"audit.tenant-trail", [](Facts& f) { f.audit.tenant_entries = 0; }},
      {"audit.request-level", [](Facts& f) { f.audit.reads_audited = false; }},
      {"audit.retention", [](Facts& f) { f.audit.oldest_seq = 500; }},
  };
  return kBreak;
}

std::set<std::string> ids_with(const Report& r, Status s) {
  std::set<std::string> out;
  for (const auto& c : r.results)
    if (c.status == s) out.emplace(c.control->id);
  return out;
}

std::string describe(const Report& r) { return r.to_json().dump(2); }

const ControlResult& result_of(const Report& r, std::string_view id) {
  for (const auto& c : r.results)
    if (c.control->id == id) return c;
  throw std::runtime_error("no result for " + std::string(id));
}

TEST(CompliantTenant, PassesEveryControl) {
  Report r = evaluate(compliant());
  ASSERT_EQ(r.results.size(), controls().size());
  for (const auto& c : r.results) {
    EXPECT_EQ(c.status, Status::kPass) << c.control->id << ": " << c.summary;
    EXPECT_TRUE(c.required) << c.control->id;
  }
}

TEST(CompliantTenant, EveryControlHasABreakingCase) {
  for (const auto& c : controls())
    EXPECT_TRUE(breakers().contains(std::string(c.id))) << "no test case breaks " << c.id;
  for (const auto& [id, fn] : breakers())
    EXPECT_NE(find_control(id), nullptr) << "test case for unknown control " << id;
}

TEST(CompliantTenant, ControlIdsAreUniqueAndComplete) {
  std::set<std::string_view> ids;
  for (const auto& c : controls()) {
    EXPECT_TRUE(ids.insert(c.id).second) << "duplicate " << c.id;
    EXPECT_TRUE(c.id.starts_with(layer_name(c.layer))) << c.id;
    EXPECT_FALSE(c.title.empty()) << c.id;
    EXPECT_FALSE(c.threat.empty()) << c.id;
    EXPECT_FALSE(c.remediation.empty()) << c.id;
    EXPECT_FALSE(c.rule.empty()) << c.id;
  }
}

class OneControlMissing : public ::testing::TestWithParam<std::string> {};

TEST_P(OneControlMissing, FailsExactlyThatControl) {
  const std::string id = GetParam();
  auto it = breakers().find(id);
  ASSERT_NE(it, breakers().end()) << "no test case breaks " << id;
  Facts f = compliant();
  it->second(f);
  Report r = evaluate(f);
  EXPECT_EQ(ids_with(r, Status::kFail), std::set<std::string>{id}) << describe(r);
  EXPECT_EQ(r.failing(), std::vector<std::string>{id});
  EXPECT_EQ(r.count(Status::kFail), 1);
  // The failing result carries its evidence, threat and remediation.
  for (const auto& c : r.results) {
    if (c.control->id != id) continue;
    Json j = c.to_json();
    EXPECT_EQ(j.at("status"), "fail");
    EXPECT_FALSE(j.at("evidence").at("checked").get<std::string>().empty());
    EXPECT_TRUE(j.at("evidence").at("seen").is_object());
    EXPECT_EQ(j.at("evidence").at("checked_at"), "2026-09-21T14:13:20.000000Z");
    EXPECT_FALSE(j.at("summary").get<std::string>().empty());
  }
}

std::vector<std::string> all_ids() {
  std::vector<std::string> out;
  for (const auto& c : controls()) out.emplace_back(c.id);
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryControl, OneControlMissing, ::testing::ValuesIn(all_ids()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

// DESIGN.md, "Isolation tiers and classes": what each class adds.
TEST(Classes, RequireWhatDesignSays) {
  const std::set<std::string> standard_adds = {"network.segment", "network.default-deny",
                                               "network.explicit-egress", "storage.private-volumes",
                                               "storage.permission-audit"};
  const std::set<std::string> sensitive_adds = {"storage.volumes-encrypted",
                                                "storage.secrets-encrypted",
                                                "storage.data-key-rotation", "audit.request-level"};
  const std::set<std::string> regulated_adds = {"hardware.node-exclusive", "network.tls",
                                                "audit.retention"};
  for (IC c : {IC::kInternal, IC::kStandard, IC::kSensitive, IC::kRegulated}) {
    std::set<std::string> expected_na;
    if (c < IC::kStandard) expected_na.insert(standard_adds.begin(), standard_adds.end());
    if (c < IC::kSensitive) expected_na.insert(sensitive_adds.begin(), sensitive_adds.end());
    if (c < IC::kRegulated) expected_na.insert(regulated_adds.begin(), regulated_adds.end());
    Facts f = compliant();
    f.isolation_class = c;
    Report r = evaluate(f);
    EXPECT_EQ(ids_with(r, Status::kNotApplicable), expected_na) << vocab::class_name(c);
    EXPECT_EQ(r.count(Status::kFail), 0) << vocab::class_name(c);
    for (const auto& res : r.results)
      EXPECT_EQ(res.required, !expected_na.contains(std::string(res.control->id)))
          << res.control->id;
  }
}

TEST(Classes, AControlNotRequiredNeverFails) {
  // An internal tenant with allow-all egress and plain HTTP: not its class's concern.
  Facts f = compliant();
  f.isolation_class = IC::kInternal;
  breakers().at("network.explicit-egress")(f);
  breakers().at("network.tls")(f);
  Report r = evaluate(f);
  EXPECT_EQ(r.count(Status::kFail), 0) << describe(r);
  // The same facts fail for a standard tenant (explicit egress), and TLS only when regulated.
  f.isolation_class = IC::kStandard;
  EXPECT_EQ(evaluate(f).failing(), std::vector<std::string>{"network.explicit-egress"});
  f.isolation_class = IC::kRegulated;
  EXPECT_EQ(evaluate(f).failing(),
            (std::vector<std::string>{"network.explicit-egress", "network.tls"}));
}

TEST(Classes, TierMinimumFollowsTheClass) {
  Facts f = compliant();
  f.hardware.live = {{"alc_1", "active", Tier::kMig}};
  f.isolation_class = IC::kInternal;
  EXPECT_TRUE(evaluate(f).failing().empty());
  f.isolation_class = IC::kStandard;
  EXPECT_TRUE(evaluate(f).failing().empty());
  f.isolation_class = IC::kSensitive;
  EXPECT_EQ(evaluate(f).failing(), std::vector<std::string>{"hardware.tier-minimum"});
  f.hardware.live = {{"alc_1", "active", Tier::kShared}};
  f.isolation_class = IC::kInternal;
  EXPECT_TRUE(evaluate(f).failing().empty());
  f.isolation_class = IC::kStandard;
  EXPECT_EQ(evaluate(f).failing(), std::vector<std::string>{"hardware.tier-minimum"});
}

TEST(NotYetAvailable, MissingFactsAreNotApplicableAndSaySo) {
  Facts f = compliant();
  f.storage.volumes.reset();
  f.metering.usage.reset();
  Report r = evaluate(f);
  EXPECT_EQ(r.count(Status::kFail), 0);
  for (const auto& c : r.results) {
    if (c.control->id != "storage.private-volumes" && c.control->id != "metering.usage-recorded")
      continue;
    EXPECT_EQ(c.status, Status::kNotApplicable) << c.control->id;
    EXPECT_TRUE(c.required) << c.control->id;
    EXPECT_TRUE(c.summary.starts_with("not yet available")) << c.summary;
  }
}

// Issue 24: the control fails on any node shared with another tenant unless its toolkit is
// known to refuse device lists from unprivileged containers' environment, and when the
// webhook admits the variable.
TEST(GpuDeviceEnv, FailsOnEverySharedNodeNotKnownToRefuseTheVariable) {
  fleet::GpuRuntime closed{.toolkit_config = "/etc/nvidia-container-runtime/config.toml",
                           .toolkit_config_state = "read",
                           .accepts_env_unprivileged = false,
                           .accepts_volume_mounts = true,
                           .device_list_strategy = {"volume-mounts"},
                           .strategy_source = "flag"};
  fleet::GpuRuntime open = closed;
  open.accepts_env_unprivileged = true;
  fleet::GpuRuntime absent = open;
  absent.toolkit_config_state = "absent";
  fleet::GpuRuntime unknown = closed;
  unknown.toolkit_config_state = "unreadable";
  unknown.accepts_env_unprivileged.reset();
  unknown.detail = "line 3: not a TOML key = value line";
  const struct {
    std::string name;
    std::optional<fleet::GpuRuntime> runtime;
    bool pass;
    std::string problem;
  } kCases[] = {
      {"refuses the variable", closed, true, ""},
      {"accepts it", open, false, "accept-nvidia-visible-devices-envvar-when-unprivileged = true"},
      {"toolkit defaults", absent, false, "the default accepts"},
      {"agent cannot tell", unknown, false, "line 3"},
      {"never reported", std::nullopt, false, "reports no GPU runtime settings"},
  };
  for (const auto& k : kCases) {
    Facts f = compliant();
    f.workload.node_sharing_gpu_nodes = {{"gpu-01", closed}, {"gpu-02", k.runtime}};
    for (IC c : {IC::kInternal, IC::kStandard, IC::kSensitive, IC::kRegulated}) {
      f.isolation_class = c;
      Report r = evaluate(f);
      const auto& res = result_of(r, "workload.gpu-device-env");
      EXPECT_TRUE(res.required) << k.name;
      EXPECT_EQ(res.status, k.pass ? Status::kPass : Status::kFail)
          << k.name << ": " << res.summary;
      const Json& accepting = res.evidence.at("seen").at("accepting_nodes");
      if (k.pass) {
        EXPECT_TRUE(accepting.empty()) << k.name;
        continue;
      }
      ASSERT_EQ(accepting.size(), 1u) << k.name;
      EXPECT_EQ(accepting[0].at("node"), "gpu-02");
      EXPECT_NE(accepting[0].at("problem").get<std::string>().find(k.problem), std::string::npos)
          << accepting[0].dump();
    }
  }
  // No shared node: the probe alone decides.
  Facts f = compliant();
  f.workload.device_env = {false, "restricted v1.37", "admitted"};
  Report r = evaluate(f);
  EXPECT_EQ(r.failing(), std::vector<std::string>{"workload.gpu-device-env"});
  EXPECT_NE(result_of(r, "workload.gpu-device-env").summary.find("is admitted"), std::string::npos);
}

TEST(Evidence, NamesWhatWasSeen) {
  Facts f = compliant();
  breakers().at("identity.api-key-expiry")(f);
  breakers().at("network.segment")(f);
  Report r = evaluate(f);
  Json j = r.to_json();
  EXPECT_EQ(j.at("counts").at("fail"), 2);
  Json key_control, seg_control;
  for (const auto& layer : j.at("layers"))
    for (const auto& c : layer.at("controls")) {
      if (c.at("id") == "identity.api-key-expiry") key_control = c;
      if (c.at("id") == "network.segment") seg_control = c;
    }
  ASSERT_TRUE(key_control.is_object());
  EXPECT_EQ(key_control.at("layer"), "identity");
  EXPECT_EQ(key_control.at("evidence").at("seen").at("without_expiry")[0].at("id"), "key_2");
  EXPECT_EQ(seg_control.at("evidence").at("seen").at("problems")[0], "no segment assigned");
}

TEST(Evidence, OverlappingSegmentsFailTheSegmentControl) {
  Facts f = compliant();
  f.network.other_segments.push_back({"carol", 10000, cidr("10.64.0.128/25")});
  Report r = evaluate(f);
  EXPECT_EQ(r.failing(), std::vector<std::string>{"network.segment"});
  Json seen = result_of(r, "network.segment").evidence.at("seen").at("problems");
  EXPECT_EQ(seen.size(), 2u) << seen.dump();  // the CIDR overlap and the reused VNI
}

// A tenant's own report lists the nodes of its node-exclusive allocations that another tenant
// shares (a breach), without saying how many; allocations on tiers that share nodes are listed
// as such, with nothing about their neighbours (tier-minimum judges those tiers).
TEST(Evidence, TheTenantsNodeExclusiveViewCountsNoNeighbours) {
  Facts f = compliant();
  f.hardware.live.push_back({"alc_3", "placed", Tier::kDedicatedGpu});
  f.hardware.shared_nodes = {{"n2", "alc_3", 2}};  // as operators see it
  f.hardware.audience = Audience::kOperator;
  Report theirs = evaluate(f);
  EXPECT_EQ(result_of(theirs, "hardware.node-exclusive").status, Status::kFail);
  EXPECT_EQ(result_of(theirs, "hardware.node-exclusive")
                .evidence.at("seen")
                .at("shared_nodes")[0]
                .at("other_tenants"),
            2);
  // The tenant's gather leaves out the nodes of allocations on tiers that share nodes.
  f.hardware.audience = Audience::kTenant;
  f.hardware.shared_nodes.clear();
  Report mine = evaluate(f);
  EXPECT_EQ(mine.failing(), std::vector<std::string>{"hardware.tier-minimum"});
  Json seen = result_of(mine, "hardware.node-exclusive").evidence.at("seen");
  ASSERT_EQ(seen.at("on_tiers_that_share_nodes").size(), 1u) << seen.dump();
  EXPECT_EQ(seen.at("on_tiers_that_share_nodes")[0].at("allocation"), "alc_3");
  EXPECT_TRUE(seen.at("shared_nodes").empty());

  // A breach of a node-exclusive tier: the tenant sees the node, not how many share it.
  Facts breach = compliant();
  breach.hardware.audience = Audience::kTenant;
  breach.hardware.shared_nodes = {{"n1", "alc_1", std::nullopt}};
  Report breached = evaluate(breach);
  EXPECT_EQ(breached.failing(), std::vector<std::string>{"hardware.node-exclusive"});
  const ControlResult& b = result_of(breached, "hardware.node-exclusive");
  ASSERT_EQ(b.evidence.at("seen").at("shared_nodes").size(), 1u);
  EXPECT_EQ(b.evidence.dump().find("other_tenants"), std::string::npos) << b.evidence.dump();
}

TEST(Evidence, DestroyedKeysLeaveSecretsUnsealed) {
  Facts f = compliant();
  f.storage.keyring->destroyed = true;
  Report r = evaluate(f);
  EXPECT_EQ(r.failing(), std::vector<std::string>{"storage.secrets-encrypted"});
}

TEST(Fleet, MatrixCountsFailuresPerControlAndTenant) {
  Facts a = compliant();
  Facts b = compliant_as("ten_bravo", "bravo");
  breakers().at("network.tls")(b);
  breakers().at("scheduling.tenant-quota")(b);
  Facts c = compliant_as("ten_carol", "carol");
  breakers().at("network.tls")(c);
  std::vector<Report> reports = {evaluate(a), evaluate(b), evaluate(c)};
  Json m = fleet_matrix(reports);
  EXPECT_EQ(m.at("counts").at("tenants"), 3);
  EXPECT_EQ(m.at("counts").at("failing_tenants"), 2);
  std::map<std::string, int> per_control;
  for (const auto& col : m.at("controls"))
    per_control[col.at("id").get<std::string>()] = col.at("failing_tenants").get<int>();
  EXPECT_EQ(per_control.size(), controls().size());
  EXPECT_EQ(per_control.at("network.tls"), 2);
  EXPECT_EQ(per_control.at("scheduling.tenant-quota"), 1);
  EXPECT_EQ(per_control.at("audit.chain"), 0);
  EXPECT_EQ(m.at("tenants")[1].at("name"), "bravo");
  EXPECT_EQ(m.at("tenants")[1].at("fail"), 2) << m.at("tenants")[1].at("failing").dump();
  EXPECT_EQ(m.at("tenants")[1].at("controls").at("network.tls"), "fail");
  EXPECT_EQ(m.at("tenants")[0].at("failing"), Json::array());
}

TEST(Render, TextHasEveryLayerAndColourOnlyWhenAsked) {
  Facts f = compliant();
  breakers().at("identity.api-key-expiry")(f);
  Json j = evaluate(f).to_json();
  auto plain = render_report_text(j, false);
  ASSERT_TRUE(plain.has_value()) << plain.error().message;
  for (int l = 0; l <= static_cast<int>(Layer::kAudit); ++l)
    EXPECT_NE(plain->find("\n" + std::string(layer_name(static_cast<Layer>(l))) + "\n"),
              std::string::npos);
  EXPECT_NE(plain->find("failing controls"), std::string::npos);
  EXPECT_NE(plain->find("remediation: revoke keys without an expiry"), std::string::npos);
  EXPECT_EQ(plain->find('\x1b'), std::string::npos);
  auto coloured = render_report_text(j, true);
  ASSERT_TRUE(coloured.has_value());
  EXPECT_NE(coloured->find("\x1b[1;31m"), std::string::npos);
  EXPECT_FALSE(render_report_text(Json::object(), false).has_value());
}

TEST(Render, FleetSvgHasOneCellPerTenantAndControl) {
  Facts b = compliant();
  breakers().at("network.tls")(b);
  std::vector<Report> reports = {evaluate(compliant()), evaluate(b)};
  Json m = fleet_matrix(reports);
  auto svg = render_fleet_svg(m);
  ASSERT_TRUE(svg.has_value()) << svg.error().message;
  size_t cells = 0;
  for (size_t at = svg->find("<title>"); at != std::string::npos; at = svg->find("<title>", at + 1))
    ++cells;
  EXPECT_EQ(cells, 2 * controls().size());
  EXPECT_NE(svg->find("<title>acme: network.tls fail</title>"), std::string::npos);
  auto text = render_fleet_text(m, false);
  ASSERT_TRUE(text.has_value());
  EXPECT_NE(text->find("network.tls"), std::string::npos);
  EXPECT_FALSE(render_fleet_svg(Json::array()).has_value());
}

TEST(Docs, PostureMdDocumentsEveryControl) {
  const char* root = std::getenv("GP_SOURCE_DIR");
  if (root == nullptr) GTEST_SKIP() << "GP_SOURCE_DIR is not set (run through ctest)";
  std::ifstream in(std::string(root) + "/docs/posture.md");
  ASSERT_TRUE(in) << "docs/posture.md not found under " << root;
  std::stringstream text;
  text << in.rdbuf();
  for (const auto& c : controls())
    EXPECT_NE(text.str().find("| `" + std::string(c.id) + "`"), std::string::npos)
        << c.id << " has no row in docs/posture.md";
}

}  // namespace
}  // namespace gp::posture
