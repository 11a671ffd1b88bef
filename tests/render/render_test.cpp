// The Kubernetes tenant bundle: valid against the strict Kubernetes schemas for every tier and
// class, byte-stable (golden files), deterministic, and refusing bad input with a reason.
// Regenerate the golden files with GP_UPDATE_GOLDEN=1.
#include "render/render.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "support/json_schema.h"
#include "test_util.h"

namespace gp::render {
namespace {

namespace fs = std::filesystem;
using gp::testing::shared_schemas;
using gp::testing::source_dir;
using vocab::IsolationClass;
using vocab::Tier;

// A scratch directory removed at scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "gprender-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A realistic tenant with two projects, egress, an exposure, role bindings of every kind and,
// for dedicated-pool / dedicated-node tiers, a pool of two nodes.
TenantBundleInput make_input(IsolationClass c, std::vector<Tier> tiers) {
  TenantBundleInput in;
  in.tenant = "acme";
  in.isolation_class = c;
  in.tiers = tiers;
  auto has = [&](Tier t) { return std::find(tiers.begin(), tiers.end(), t) != tiers.end(); };
  if (has(Tier::kMig)) in.mig_profiles = {"1g.18gb", "3g.71gb"};
  Project train;
  train.name = "train";
  if (has(Tier::kDedicatedPool) || has(Tier::kDedicatedNode) || has(Tier::kDedicatedGpu))
    train.quota.gpus = 16;
  if (has(Tier::kMig)) train.quota.mig = {{"1g.18gb", 14}, {"3g.71gb", 4}};
  if (has(Tier::kShared)) train.quota.shared_gpus = 8;
  train.quota.cpu = "128";
  train.quota.memory = "1Ti";
  train.quota.storage = "10Ti";
  train.egress = {{"object-store", "10.20.0.0/16", {"10.20.99.0/24"}, {{"TCP", 443, 0}}},
                  {"pypi-mirror", "192.0.2.10/32", {}, {{"TCP", 8000, 8010}}}};
  train.service_accounts = {"trainer"};
  Project serve;
  serve.name = "serve";
  serve.exposures = {{"api", {{"app", "inference"}}, {{"TCP", 8443, 0}}, {"203.0.113.0/24"}}};
  serve.defaults.cpu_limit = "2";
  in.projects = {train, serve};
  if (has(Tier::kDedicatedPool) || has(Tier::kDedicatedNode)) {
    in.pools = {{"acme-h200",
                 {{"nvidia.com/gpu.product", "NVIDIA-H200"}},
                 {{"nvidia.com/gpu", "present", "NoSchedule"}},
                 {"gpu-node-02", "gpu-node-01"}}};
  }
  in.role_bindings = {
      {"tenant-admin", "User", "alice@example.com", ""},
      {"tenant-billing", "User", "carol@example.com", ""},
      {"project-member", "Group", "ml-team", "train"},
      {"project-viewer", "User", "bob", "serve"},
      {"project-member", "ServiceAccount", "trainer", "train"},
  };
  in.webhook = {"https://gpuplane.example.com", "", 10};
  return in;
}

// Every class with every tier it allows.
std::vector<TenantBundleInput> every_tier_and_class() {
  std::vector<TenantBundleInput> out;
  for (auto c : {IsolationClass::kInternal, IsolationClass::kStandard, IsolationClass::kSensitive,
                 IsolationClass::kRegulated}) {
    std::vector<Tier> all;
    for (auto t : {Tier::kDedicatedPool, Tier::kDedicatedNode, Tier::kDedicatedGpu, Tier::kMig,
                   Tier::kShared}) {
      if (!vocab::class_allows(c, t)) continue;
      out.push_back(make_input(c, {t}));
      all.push_back(t);
    }
    out.push_back(make_input(c, all));
  }
  return out;
}

class Schemas {
 public:
  Schemas() {
    auto load = [&](const std::string& kind, const fs::path& path) {
      auto s = gp::testing::JsonSchema::load(path.string());
      EXPECT_TRUE(s) << (s ? "" : s.error().message);
      if (s) by_kind_.emplace(kind, std::move(*s));
    };
    fs::path shared = shared_schemas();
    load("Namespace", shared / "namespace-v1.json");
    load("ResourceQuota", shared / "resourcequota-v1.json");
    load("LimitRange", shared / "limitrange-v1.json");
    load("ServiceAccount", shared / "serviceaccount-v1.json");
    load("NetworkPolicy", shared / "redacid-master-2025" / "networkpolicy-networking-v1.json");
    load("Role", shared / "redacid-master-2025" / "role-rbac-v1.json");
    load("RoleBinding", shared / "redacid-master-2025" / "rolebinding-rbac-v1.json");
    fs::path own = source_dir() / "tests" / "fixtures" / "k8s-schemas";
    load("Node", own / "node-v1.json");
    load("ValidatingWebhookConfiguration",
         own / "validatingwebhookconfiguration-admissionregistration-v1.json");
  }
  // Problems with one object; a kind without a schema is a problem too.
  std::vector<std::string> validate(const Json& obj) const {
    auto it = by_kind_.find(obj.value("kind", ""));
    if (it == by_kind_.end()) return {"no schema for kind " + obj.value("kind", "")};
    return it->second.validate(obj);
  }

 private:
  std::map<std::string, gp::testing::JsonSchema> by_kind_;
};

std::string label(const TenantBundleInput& in) {
  std::string s(vocab::class_name(in.isolation_class));
  for (auto t : in.tiers) s += "/" + std::string(vocab::tier_name(t));
  return s;
}

TEST(RenderKubernetes, EveryObjectOfEveryTierAndClassPassesTheStrictSchemas) {
  GP_REQUIRE_SHARED_SCHEMAS();
  Schemas schemas;
  size_t objects = 0;
  for (const auto& in : every_tier_and_class()) {
    auto out = render_kubernetes_objects(in);
    ASSERT_TRUE(out) << label(in) << ": " << out.error().message;
    for (const auto& obj : *out) {
      ++objects;
      auto errors = schemas.validate(obj);
      EXPECT_TRUE(errors.empty()) << label(in) << " " << obj["kind"] << " "
                                  << obj["metadata"]["name"] << ":\n"
                                  << errors.front();
    }
  }
  EXPECT_GT(objects, 300u);
  std::cout << "validated " << objects << " objects of " << every_tier_and_class().size()
            << " bundles against the strict schemas\n";
}

TEST(RenderKubernetes, TheValidatorRejectsUnknownFieldsAndWrongTypes) {
  GP_REQUIRE_SHARED_SCHEMAS();
  // The schema check above is only worth something if it can fail.
  Schemas schemas;
  auto out = render_kubernetes_objects(make_input(IsolationClass::kStandard, {Tier::kMig}));
  ASSERT_TRUE(out);
  Json ns = (*out)[0];
  ASSERT_EQ(ns["kind"], "Namespace");
  ns["metadata"]["labelz"] = Json::object();
  EXPECT_FALSE(schemas.validate(ns).empty());
  Json quota = (*out)[2];
  ASSERT_EQ(quota["kind"], "ResourceQuota");
  quota["spec"]["hard"]["pods"] = Json::array();
  EXPECT_FALSE(schemas.validate(quota).empty());
  Json np;
  for (const auto& o : *out)
    if (o["kind"] == "NetworkPolicy") np = o;
  np["spec"]["policyTypes"] = "Ingress";
  EXPECT_FALSE(schemas.validate(np).empty());
  Json hook = out->back();
  ASSERT_EQ(hook["kind"], "ValidatingWebhookConfiguration");
  hook["webhooks"][0]["sideEffects"] = "Maybe";
  EXPECT_FALSE(schemas.validate(hook).empty());
}

TEST(RenderKubernetes, YamlReadsBackToTheSameObjects) {
  for (const auto& in : every_tier_and_class()) {
    auto objects = render_kubernetes_objects(in);
    auto yaml = render_kubernetes(in);
    ASSERT_TRUE(objects && yaml);
    auto docs = from_yaml(*yaml);
    ASSERT_TRUE(docs) << docs.error().message;
    // LoadAll yields no document for the header comment.
    ASSERT_EQ(docs->size(), objects->size()) << label(in);
    for (size_t i = 0; i < docs->size(); ++i)
      EXPECT_EQ((*docs)[i], (*objects)[i]) << label(in) << " document " << i;
  }
}

TEST(RenderKubernetes, OutputDoesNotDependOnInputOrder) {
  auto in = make_input(IsolationClass::kRegulated, {Tier::kDedicatedPool, Tier::kDedicatedNode});
  in.pools.push_back({"acme-b200", {}, {}, {"gpu-node-09"}});
  auto reference = render_kubernetes(in);
  ASSERT_TRUE(reference);
  std::mt19937 rng(7);
  for (int round = 0; round < 10; ++round) {
    auto shuffled = in;
    std::shuffle(shuffled.projects.begin(), shuffled.projects.end(), rng);
    std::shuffle(shuffled.pools.begin(), shuffled.pools.end(), rng);
    std::shuffle(shuffled.role_bindings.begin(), shuffled.role_bindings.end(), rng);
    for (auto& p : shuffled.projects) std::shuffle(p.egress.begin(), p.egress.end(), rng);
    for (auto& p : shuffled.pools) std::shuffle(p.nodes.begin(), p.nodes.end(), rng);
    auto again = render_kubernetes(shuffled);
    ASSERT_TRUE(again);
    EXPECT_EQ(*again, *reference);
  }
}

struct Golden {
  std::string name;
  TenantBundleInput input;
};

TEST(RenderKubernetes, MatchesGoldenFiles) {
  std::vector<Golden> cases = {
      {"internal-shared", make_input(IsolationClass::kInternal, {Tier::kShared})},
      {"standard-mig", make_input(IsolationClass::kStandard, {Tier::kMig})},
      {"sensitive-dedicated-gpu", make_input(IsolationClass::kSensitive, {Tier::kDedicatedGpu})},
      {"regulated-dedicated-pool", make_input(IsolationClass::kRegulated, {Tier::kDedicatedPool})},
  };
  cases[3].input.webhook.ca_bundle = "TFMwdExTMUNSVWRKVGlCRFJWSlVTVVpKUTBGVVJTMHRMUzB0Q2c9PQ==";
  const bool update = std::getenv("GP_UPDATE_GOLDEN") != nullptr;
  for (const auto& c : cases) {
    auto yaml = render_kubernetes(c.input);
    ASSERT_TRUE(yaml) << c.name << ": " << yaml.error().message;
    fs::path golden = source_dir() / "tests" / "fixtures" / "render" / (c.name + ".yaml");
    if (update) {
      fs::create_directories(golden.parent_path());
      std::ofstream(golden) << *yaml;
      continue;
    }
    ASSERT_TRUE(fs::exists(golden)) << golden << " is missing; run with GP_UPDATE_GOLDEN=1";
    EXPECT_EQ(*yaml, read_file(golden))
        << c.name << " differs from " << golden << " (GP_UPDATE_GOLDEN=1 regenerates it)";
  }
}

// Objects of one kind, by namespace/name.
std::map<std::string, Json> of_kind(const std::vector<Json>& objects, std::string_view kind) {
  std::map<std::string, Json> out;
  for (const auto& o : objects)
    if (o["kind"] == kind)
      out[o["metadata"].value("namespace", "") + "/" + o["metadata"]["name"].get<std::string>()] =
          o;
  return out;
}

TEST(RenderKubernetes, NamespacesEnforceRestrictedPodSecurityAndCarryTheTenant) {
  auto out = render_kubernetes_objects(make_input(IsolationClass::kStandard, {Tier::kMig}));
  ASSERT_TRUE(out);
  auto namespaces = of_kind(*out, "Namespace");
  ASSERT_EQ(namespaces.size(), 2u);
  for (const auto& [_, ns] : namespaces) {
    const auto& labels = ns["metadata"]["labels"];
    EXPECT_EQ(labels["gpuplane.io/tenant"], "acme");
    for (std::string mode : {"enforce", "audit", "warn"})
      EXPECT_EQ(labels["pod-security.kubernetes.io/" + mode], "restricted");
    EXPECT_FALSE(ns["metadata"].contains("annotations"));  // no node placement for mig
  }
  EXPECT_TRUE(namespaces.contains("/acme-train"));
  EXPECT_TRUE(namespaces.contains("/acme-serve"));
}

TEST(RenderKubernetes, QuotaNamesTheGpuResourcesOfTheTiers) {
  auto mig = render_kubernetes_objects(make_input(IsolationClass::kStandard, {Tier::kMig}));
  ASSERT_TRUE(mig);
  auto hard = of_kind(*mig, "ResourceQuota")["acme-train/gpuplane-quota"]["spec"]["hard"];
  EXPECT_EQ(hard["requests.nvidia.com/mig-1g.18gb"], "14");
  EXPECT_EQ(hard["requests.nvidia.com/mig-3g.71gb"], "4");
  EXPECT_EQ(hard["requests.nvidia.com/gpu"], "0");  // no whole GPUs for a mig-only tenant
  EXPECT_EQ(hard["requests.nvidia.com/gpu.shared"], "0");
  EXPECT_EQ(hard["requests.cpu"], "128");
  EXPECT_EQ(hard["pods"], "100");
  auto serve = of_kind(*mig, "ResourceQuota")["acme-serve/gpuplane-quota"]["spec"]["hard"];
  EXPECT_EQ(serve["requests.nvidia.com/mig-1g.18gb"], "0");

  auto gpu =
      render_kubernetes_objects(make_input(IsolationClass::kSensitive, {Tier::kDedicatedGpu}));
  ASSERT_TRUE(gpu);
  auto gpu_hard = of_kind(*gpu, "ResourceQuota")["acme-train/gpuplane-quota"]["spec"]["hard"];
  EXPECT_EQ(gpu_hard["requests.nvidia.com/gpu"], "16");
  for (const auto& [k, _] : gpu_hard.items())
    EXPECT_FALSE(k.starts_with("requests.nvidia.com/mig-")) << k;
}

TEST(RenderKubernetes, NetworkPoliciesDenyByDefaultAndAllowOnlyWhatIsDeclared) {
  auto out = render_kubernetes_objects(make_input(IsolationClass::kStandard, {Tier::kMig}));
  ASSERT_TRUE(out);
  auto nps = of_kind(*out, "NetworkPolicy");
  for (std::string ns : {"acme-train", "acme-serve"}) {
    auto deny = nps[ns + "/gpuplane-default-deny"]["spec"];
    EXPECT_EQ(deny["podSelector"], Json::object());
    EXPECT_EQ(deny["policyTypes"], Json({"Ingress", "Egress"}));
    EXPECT_FALSE(deny.contains("ingress"));
    EXPECT_FALSE(deny.contains("egress"));
    auto tenant = nps[ns + "/gpuplane-allow-tenant"]["spec"];
    EXPECT_EQ(
        tenant["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"]["gpuplane.io/tenant"],
        "acme");
    auto dns = nps[ns + "/gpuplane-allow-dns"]["spec"]["egress"][0];
    EXPECT_EQ(dns["ports"].size(), 2u);
    EXPECT_EQ(dns["to"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
              "kube-system");
  }
  auto egress = nps["acme-train/gpuplane-egress-object-store"]["spec"]["egress"][0];
  EXPECT_EQ(egress["to"][0]["ipBlock"]["cidr"], "10.20.0.0/16");
  EXPECT_EQ(egress["to"][0]["ipBlock"]["except"][0], "10.20.99.0/24");
  EXPECT_EQ(egress["ports"][0]["port"], 443);
  EXPECT_EQ(
      nps["acme-train/gpuplane-egress-pypi-mirror"]["spec"]["egress"][0]["ports"][0]["endPort"],
      8010);
  auto expose = nps["acme-serve/gpuplane-expose-api"]["spec"];
  EXPECT_EQ(expose["podSelector"]["matchLabels"]["app"], "inference");
  EXPECT_EQ(expose["ingress"][0]["from"][0]["ipBlock"]["cidr"], "203.0.113.0/24");
  EXPECT_FALSE(nps.contains("acme-serve/gpuplane-egress-object-store"));  // per project
  EXPECT_EQ(nps.size(), 2u * 3u + 2u + 1u);
}

// Whether `role` grants `verb` on `resource` in `group`.
bool grants(const Json& role, std::string_view group, std::string_view resource,
            std::string_view verb) {
  for (const auto& r : role["rules"]) {
    auto has = [](const Json& list, std::string_view v) {
      return std::any_of(list.begin(), list.end(),
                         [&](const Json& x) { return x == v || x == "*"; });
    };
    if (has(r["apiGroups"], group) && has(r["resources"], resource) && has(r["verbs"], verb))
      return true;
  }
  return false;
}

TEST(RenderKubernetes, TenantRolesCannotTouchWhatThePlatformOwns) {
  auto out = render_kubernetes_objects(make_input(IsolationClass::kStandard, {Tier::kMig}));
  ASSERT_TRUE(out);
  auto roles = of_kind(*out, "Role");
  ASSERT_EQ(roles.size(), 6u);
  for (const auto& [name, role] : roles) {
    for (std::string verb : {"create", "update", "patch", "delete"}) {
      EXPECT_FALSE(grants(role, "", "resourcequotas", verb)) << name;
      EXPECT_FALSE(grants(role, "", "limitranges", verb)) << name;
      EXPECT_FALSE(grants(role, "networking.k8s.io", "networkpolicies", verb)) << name;
      EXPECT_FALSE(grants(role, "rbac.authorization.k8s.io", "rolebindings", verb)) << name;
      EXPECT_FALSE(grants(role, "rbac.authorization.k8s.io", "roles", verb)) << name;
      EXPECT_FALSE(grants(role, "apps", "daemonsets", verb)) << name;
      EXPECT_FALSE(grants(role, "", "namespaces", verb)) << name;
    }
  }
  EXPECT_TRUE(grants(roles["acme-train/gpuplane-admin"], "apps", "deployments", "create"));
  EXPECT_TRUE(grants(roles["acme-train/gpuplane-admin"], "", "resourcequotas", "get"));
  EXPECT_TRUE(grants(roles["acme-train/gpuplane-edit"], "batch", "jobs", "create"));
  EXPECT_FALSE(grants(roles["acme-train/gpuplane-view"], "", "secrets", "get"));
  EXPECT_FALSE(grants(roles["acme-train/gpuplane-view"], "", "pods", "create"));
}

TEST(RenderKubernetes, RoleBindingsMapGpuplaneRolesToNamespaces) {
  auto out = render_kubernetes_objects(make_input(IsolationClass::kStandard, {Tier::kMig}));
  ASSERT_TRUE(out);
  std::multimap<std::string, std::string> seen;  // namespace -> role:subject
  for (const auto& [_, b] : of_kind(*out, "RoleBinding"))
    seen.emplace(b["metadata"]["namespace"].get<std::string>(),
                 b["roleRef"]["name"].get<std::string>() + ":" +
                     b["subjects"][0]["name"].get<std::string>());
  auto has = [&](std::string ns, std::string v) {
    auto [a, z] = seen.equal_range(ns);
    return std::any_of(a, z, [&](const auto& kv) { return kv.second == v; });
  };
  EXPECT_TRUE(has("acme-train", "gpuplane-admin:alice@example.com"));
  EXPECT_TRUE(has("acme-serve", "gpuplane-admin:alice@example.com"));
  EXPECT_TRUE(has("acme-train", "gpuplane-edit:ml-team"));
  EXPECT_FALSE(has("acme-serve", "gpuplane-edit:ml-team"));
  EXPECT_TRUE(has("acme-serve", "gpuplane-view:bob"));
  EXPECT_TRUE(has("acme-train", "gpuplane-edit:trainer"));
  EXPECT_EQ(seen.size(), 5u);  // tenant-billing binds nothing in the cluster
}

TEST(RenderKubernetes, DedicatedPoolsPinPodsToTheTenantsTaintedNodes) {
  auto out =
      render_kubernetes_objects(make_input(IsolationClass::kRegulated, {Tier::kDedicatedPool}));
  ASSERT_TRUE(out);
  auto nodes = of_kind(*out, "Node");
  ASSERT_EQ(nodes.size(), 2u);
  for (const auto& [_, n] : nodes) {
    EXPECT_EQ(n["metadata"]["labels"]["gpuplane.io/tenant"], "acme");
    EXPECT_EQ(n["metadata"]["labels"]["gpuplane.io/pool"], "acme-h200");
    EXPECT_EQ(n["metadata"]["labels"]["nvidia.com/gpu.product"], "NVIDIA-H200");
    bool tenant_taint = false;
    for (const auto& t : n["spec"]["taints"])
      tenant_taint |= t["key"] == "gpuplane.io/tenant" && t["value"] == "acme";
    EXPECT_TRUE(tenant_taint);
  }
  for (const auto& [_, ns] : of_kind(*out, "Namespace")) {
    const auto& ann = ns["metadata"]["annotations"];
    EXPECT_EQ(ann["scheduler.alpha.kubernetes.io/node-selector"], "gpuplane.io/tenant=acme");
    Json tolerations =
        Json::parse(ann["scheduler.alpha.kubernetes.io/defaultTolerations"].get<std::string>());
    EXPECT_EQ(tolerations.size(), 2u);  // the tenant taint and the pool's own taint
    EXPECT_EQ(ann["scheduler.alpha.kubernetes.io/tolerationsWhitelist"],
              ann["scheduler.alpha.kubernetes.io/defaultTolerations"]);
  }
  // Shared-node tiers get no node objects or placement.
  auto gpu =
      render_kubernetes_objects(make_input(IsolationClass::kSensitive, {Tier::kDedicatedGpu}));
  ASSERT_TRUE(gpu);
  EXPECT_TRUE(of_kind(*gpu, "Node").empty());
}

// Issue 24: the webhook cannot see a device variable baked into an image or loaded through
// envFrom, so every bundle carries the node settings that close the hole, before any object.
TEST(RenderKubernetes, HeaderGivesTheGpuNodeSettingsAndTheNotes) {
  for (const auto& in : every_tier_and_class()) {
    auto yaml = render_kubernetes(in);
    ASSERT_TRUE(yaml) << yaml.error().message;
    const std::string head = yaml->substr(0, yaml->find("\n---\n"));
    for (const char* want :
         {"accept-nvidia-visible-devices-envvar-when-unprivileged = false",
          "accept-nvidia-visible-devices-as-volume-mounts = true",
          "deviceListStrategy volume-mounts", "docs/kubernetes.md, \"GPU devices\""})
      EXPECT_NE(head.find(want), std::string::npos) << label(in) << " lacks " << want << ":\n"
                                                    << head;
    std::istringstream lines(head);
    for (std::string line; std::getline(lines, line);)
      EXPECT_TRUE(line.starts_with("# ")) << "a header line that is not a comment: " << line;
  }
  auto in = make_input(IsolationClass::kStandard, {Tier::kMig});
  in.notes = {"project old is left out: its namespace acme-old belongs to an older project"};
  auto yaml = render_kubernetes(in);
  ASSERT_TRUE(yaml);
  EXPECT_NE(yaml->find("\n# project old is left out: its namespace acme-old belongs to an older "
                       "project\n---\n"),
            std::string::npos)
      << *yaml;
}

TEST(RenderKubernetes, WebhookPointsAtGpuplaneForTheTenantsNamespaces) {
  auto in = make_input(IsolationClass::kStandard, {Tier::kMig});
  in.webhook.base_url = "https://gpuplane.example.com:8443/";
  auto out = render_kubernetes_objects(in);
  ASSERT_TRUE(out);
  const auto& hook = out->back();
  ASSERT_EQ(hook["kind"], "ValidatingWebhookConfiguration");
  const auto& w = hook["webhooks"][0];
  EXPECT_EQ(w["clientConfig"]["url"], "https://gpuplane.example.com:8443/v1/admission/validate");
  EXPECT_EQ(w["failurePolicy"], "Fail");
  EXPECT_EQ(w["sideEffects"], "None");
  EXPECT_EQ(w["namespaceSelector"]["matchLabels"]["gpuplane.io/tenant"], "acme");
  std::set<std::string> resources;
  for (const auto& r : w["rules"])
    for (const auto& res : r["resources"]) resources.insert(res.get<std::string>());
  for (std::string r : {"pods", "deployments", "replicasets", "statefulsets", "daemonsets", "jobs",
                        "cronjobs", "replicationcontrollers", "pods/ephemeralcontainers"})
    EXPECT_TRUE(resources.contains(r)) << r;
}

TEST(RenderKubernetes, BadInputIsRefusedWithAReason) {
  struct Case {
    std::string what;
    std::function<void(TenantBundleInput&)> mutate;
    std::string message_part;
  };
  std::vector<Case> cases = {
      {"tenant name", [](auto& in) { in.tenant = "Acme!"; }, "tenant"},
      {"no tiers", [](auto& in) { in.tiers.clear(); }, "tier"},
      {"tier below class", [](auto& in) { in.tiers = {Tier::kShared}; }, "weaker"},
      {"no projects", [](auto& in) { in.projects.clear(); }, "project"},
      {"duplicate project", [](auto& in) { in.projects.push_back(in.projects[0]); }, "twice"},
      {"long namespace", [](auto& in) { in.projects[0].name = "p" + std::string(60, 'x'); }, "63"},
      {"bad quantity", [](auto& in) { in.projects[0].quota.cpu = "lots"; }, "quantity"},
      {"negative count", [](auto& in) { in.projects[0].quota.pods = -1; }, "negative"},
      {"whole gpus on mig tier", [](auto& in) { in.projects[0].quota.gpus = 1; }, "dedicated"},
      {"unknown mig profile", [](auto& in) { in.projects[0].quota.mig["7g.141gb"] = 1; },
       "7g.141gb"},
      {"shared gpus on mig tier", [](auto& in) { in.projects[0].quota.shared_gpus = 1; }, "shared"},
      {"bad cidr", [](auto& in) { in.projects[0].egress[0].cidr = "10.0.0.0/33"; }, "CIDR"},
      {"mixed family except", [](auto& in) { in.projects[0].egress[0].except = {"fd00::/8"}; },
       "family"},
      {"bad port", [](auto& in) { in.projects[0].egress[0].ports[0].port = 70000; }, "port"},
      {"bad protocol", [](auto& in) { in.projects[0].egress[0].ports[0].protocol = "ICMP"; },
       "protocol"},
      {"bad end port", [](auto& in) { in.projects[0].egress[1].ports[0].end_port = 10; },
       "end_port"},
      {"exposure without ports", [](auto& in) { in.projects[1].exposures[0].ports.clear(); },
       "ports"},
      {"bad exposure label",
       [](auto& in) { in.projects[1].exposures[0].pod_labels["bad key!"] = "x"; }, "label"},
      {"default service account",
       [](auto& in) { in.projects[0].service_accounts.push_back("default"); }, "default"},
      {"platform role",
       [](auto& in) {
         in.role_bindings.push_back({"platform-admin", "User", "eve", ""});
       },
       "role"},
      {"bad subject kind",
       [](auto& in) {
         in.role_bindings.push_back({"tenant-admin", "Robot", "r2", ""});
       },
       "subject kind"},
      {"project role without project",
       [](auto& in) {
         in.role_bindings.push_back({"project-viewer", "User", "dan", ""});
       },
       "project"},
      {"service account without project",
       [](auto& in) {
         in.role_bindings.push_back({"tenant-admin", "ServiceAccount", "bot", ""});
       },
       "project"},
      {"plain http webhook", [](auto& in) { in.webhook.base_url = "http://gpuplane"; }, "https"},
      {"webhook timeout", [](auto& in) { in.webhook.timeout_seconds = 60; }, "timeout"},
      {"webhook ca bundle", [](auto& in) { in.webhook.ca_bundle = "not base64!"; }, "base64"},
      {"bad mig profile name", [](auto& in) { in.mig_profiles.push_back("big one"); }, "profile"},
      {"pool label owned by gpuplane",
       [](auto& in) {
         in.tiers = {Tier::kMig, Tier::kDedicatedPool};
         in.pools = {{"p1", {{"gpuplane.io/tenant", "other"}}, {}, {"n1"}}};
       },
       "gpuplane"},
      {"bad taint effect",
       [](auto& in) {
         in.tiers = {Tier::kDedicatedPool};
         in.projects[0].quota.mig.clear();
         in.pools = {{"p1", {}, {{"k", "v", "Sometimes"}}, {"n1"}}};
       },
       "effect"},
      {"node in two pools",
       [](auto& in) {
         in.tiers = {Tier::kDedicatedPool};
         in.projects[0].quota.mig.clear();
         in.pools = {{"p1", {}, {}, {"n1"}}, {"p2", {}, {}, {"n1"}}};
       },
       "two pools"},
  };
  for (const auto& c : cases) {
    auto in = make_input(IsolationClass::kStandard, {Tier::kMig});
    c.mutate(in);
    auto out = render_kubernetes(in);
    ASSERT_FALSE(out) << c.what << " was accepted";
    EXPECT_EQ(out.error().code, ErrorCode::kInvalidArgument) << c.what;
    EXPECT_NE(out.error().message.find(c.message_part), std::string::npos)
        << c.what << ": " << out.error().message;
  }
}

TEST(RenderKubernetes, YamlQuotesStringsThatWouldReadAsOtherTypes) {
  Json j = {{"a", "true"}, {"b", "123"}, {"c", "null"}, {"d", "500m"}, {"e", "plain-text"},
            {"f", ""},     {"g", "yes"}, {"h", "a: b"}, {"i", 42},     {"j", false}};
  auto docs = from_yaml(to_yaml(j));
  ASSERT_TRUE(docs);
  ASSERT_EQ(docs->size(), 1u);
  EXPECT_EQ((*docs)[0], j);
}

// A manifest a tenant writes by hand reads as Kubernetes reads it.
TEST(RenderKubernetes, YamlManifestsReadWithTheCoreSchema) {
  auto docs = from_yaml(
      "---\n"
      "kind: Pod\n"
      "spec: {replicas: 3, ratio: 0.5, big: 123456789012345678901, on: True, off: false,\n"
      "       nothing: ~, empty: , quoted: \"42\", single: '1.5', name: 3g.71gb, neg: -7}\n"
      "---\n"
      "---\n"
      "[1, \"two\"]\n");
  ASSERT_TRUE(docs) << docs.error().message;
  ASSERT_EQ(docs->size(), 2u);  // the empty document is skipped
  const Json& spec = (*docs)[0]["spec"];
  EXPECT_EQ(spec["replicas"], 3);
  EXPECT_EQ(spec["ratio"], 0.5);
  EXPECT_TRUE(spec["big"].is_number_float());
  EXPECT_EQ(spec["on"], true);
  EXPECT_EQ(spec["off"], false);
  EXPECT_TRUE(spec["nothing"].is_null());
  EXPECT_TRUE(spec["empty"].is_null());
  EXPECT_EQ(spec["quoted"], "42");
  EXPECT_EQ(spec["single"], "1.5");
  EXPECT_EQ(spec["name"], "3g.71gb");
  EXPECT_EQ(spec["neg"], -7);
  EXPECT_EQ((*docs)[1], Json::parse(R"([1, "two"])"));

  auto bad = from_yaml("kind: Pod\nspec: [unclosed\n");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("line"), std::string::npos) << bad.error().message;
}

// kubectl needs no cluster to decode a manifest stream with `label --local`; create/apply
// --dry-run=client both ask the API server for discovery and fail without one.
TEST(RenderKubernetes, KubectlDecodesTheBundle) {
  if (std::system("kubectl version --client >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "kubectl is not installed; skipping the kubectl check of the bundle";
  ScratchDir dir;
  for (const auto& in : every_tier_and_class()) {
    auto yaml = render_kubernetes(in);
    auto objects = render_kubernetes_objects(in);
    ASSERT_TRUE(yaml && objects);
    std::string file = dir.file("bundle.yaml"), result = dir.file("out.json");
    std::ofstream(file) << *yaml;
    std::string cmd = "kubectl label --local -o json -f " + file + " gpuplane.io/checked=yes > " +
                      result + " 2>" + dir.file("err.txt");
    int rc = std::system(cmd.c_str());
    ASSERT_EQ(WEXITSTATUS(rc), 0) << label(in) << ": " << read_file(dir.file("err.txt"));
    // kubectl prints one JSON object per document, one after the other.
    std::vector<Json> items;
    std::istringstream stream(read_file(result));
    while ((stream >> std::ws).peek() != std::char_traits<char>::eof()) {
      Json item;
      ASSERT_NO_THROW(stream >> item) << label(in);
      items.push_back(std::move(item));
    }
    ASSERT_EQ(items.size(), objects->size()) << label(in);
    for (size_t i = 0; i < items.size(); ++i) {
      EXPECT_EQ(items[i]["kind"], (*objects)[i]["kind"]);
      EXPECT_EQ(items[i]["metadata"]["labels"]["gpuplane.io/checked"], "yes");
    }
  }
}

}  // namespace
}  // namespace gp::render

namespace gp::render {
namespace {

// A line chart: one polyline per series with its points on the axes' scale, every label escaped,
// and the same chart twice is the same bytes.
TEST(LineChart, DrawsEachSeriesOnTheAxesAndEscapesItsText) {
  LineChart c{.title = "util <of> job & co",
              .x_label = "minutes",
              .y_label = "%",
              .x_min = 0,
              .x_max = 10,
              .x_step = 5,
              .x_tick = {},
              .y_max = 100,
              .lines = {{"node-a \"GPU\"", {{0, 0}, {10, 100}}}, {"node-b", {{5, 50}, {5, 200}}}}};
  const std::string svg = line_chart_svg(c);
  EXPECT_EQ(svg, line_chart_svg(c));
  EXPECT_TRUE(svg.starts_with("<svg ")) << svg;
  EXPECT_TRUE(svg.ends_with("</svg>\n"));
  auto count = [&](std::string_view what) {
    size_t n = 0;
    for (size_t at = svg.find(what); at != std::string::npos; at = svg.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("<polyline"), 2u);
  EXPECT_NE(svg.find("util &lt;of&gt; job &amp; co"), std::string::npos);
  EXPECT_NE(svg.find("node-a &quot;GPU&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("<of>"), std::string::npos);
  // The plot spans x 50..490 and y 360..28: (0, 0) is its bottom left, (10, 100) its top right;
  // a value above the axis is drawn at its top.
  EXPECT_NE(svg.find("points=\"50.0,360.0 490.0,28.0 \""), std::string::npos) << svg;
  EXPECT_NE(svg.find("points=\"270.0,194.0 270.0,28.0 \""), std::string::npos) << svg;
  // x ticks every 5: 0, 5, 10.
  EXPECT_NE(svg.find(">10</text>"), std::string::npos);
}

}  // namespace
}  // namespace gp::render
