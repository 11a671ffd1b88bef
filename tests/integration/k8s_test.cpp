// Kubernetes through the API: the admission webhook a cluster calls with a platform key, and
// the tenant bundle rendered from the store. Two tenants: acme (standard, project train) and
// beta (standard, project infer, owning pool beta-pool with one node).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cctype>
#include <map>
#include <set>
#include <string>

#include "fleet/fleet.h"
#include "integration/harness.h"

namespace gp::it {
namespace {

class K8s : public ::testing::Test {
 protected:
  TestServer s;
  TenantInfo acme, beta;
  std::string webhook_token;  // a platform-operator service account's key, as a cluster uses

  void SetUp() override {
    const std::string admin = s.admin_token();
    acme = s.create_tenant("acme", "acme-admin");
    beta = s.create_tenant("beta", "beta-admin");
    s.create_project(acme.admin_token, acme.id, "train");
    s.create_project(beta.admin_token, beta.id, "infer");
    expect_status(
        s.request("POST", "/v1/pools", {{"name", "beta-pool"}, {"tenant", beta.id}}, admin), 201,
        "pool");
    Json nodes = Json::array({{{"inventory", h200_inventory("beta-node-1", 8)}}});
    expect_status(
        s.request("POST", "/v1/fleet/import", {{"pool", "beta-pool"}, {"nodes", nodes}}, admin),
        201, "import");
    auto sa = expect_status(
        s.request("POST", "/v1/service-accounts", {{"name", "cluster-webhook"}}, admin), 201,
        "platform service account");
    std::string sa_id = sa.body.at("id");
    expect_status(s.request("POST", "/v1/role-bindings",
                            {{"role", "platform-operator"},
                             {"subject_kind", "service_account"},
                             {"subject_id", sa_id}},
                            admin),
                  201, "binding");
    webhook_token =
        expect_status(
            s.request("POST", "/v1/api-keys",
                      {{"name", "webhook"}, {"owner_kind", "service_account"}, {"owner_id", sa_id}},
                      admin),
            201, "key")
            .body.at("token");
  }

  static Json restricted_pod(const std::string& ns) {
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", "worker"}, {"namespace", ns}}},
            {"spec",
             {{"securityContext",
               {{"runAsNonRoot", true}, {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
              {"containers",
               Json::array({{{"name", "main"},
                             {"image", "registry.example.com/acme/train:1"},
                             {"securityContext",
                              {{"allowPrivilegeEscalation", false},
                               {"capabilities", {{"drop", Json::array({"ALL"})}}}}}}})}}}};
  }

  static Json review(const Json& object, const std::string& ns, const std::string& uid) {
    return {{"apiVersion", "admission.k8s.io/v1"},
            {"kind", "AdmissionReview"},
            {"request",
             {{"uid", uid},
              {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
              {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
              {"operation", "CREATE"},
              {"namespace", ns},
              {"name", "worker"},
              {"userInfo", {{"username", "alice"}}},
              {"object", object}}}};
  }

  Resp validate(const Json& body, const std::string& query = "") {
    return s.request("POST", "/v1/admission/validate" + query, body, webhook_token);
  }

  static std::set<std::string> controls_of(const Json& response) {
    std::set<std::string> out;
    for (const auto& c : response.at("response").at("status").at("details").at("causes")) {
      std::string m = c.at("message");
      out.insert(m.substr(0, m.find(": ")));
    }
    return out;
  }

  std::vector<Json> admission_denials() {
    std::vector<Json> out;
    for (auto& rec : s.audit_records())
      if (rec.at("action") == "admission.deny") out.push_back(rec);
    return out;
  }
};

TEST_F(K8s, PrivilegedPodIsDeniedWithItsControlsAndAudited) {
  Json pod = restricted_pod("acme-train");
  auto& c = pod["spec"]["containers"][0];
  c["securityContext"]["privileged"] = true;
  c["securityContext"]["allowPrivilegeEscalation"] = true;
  pod["spec"]["hostNetwork"] = true;
  auto r = validate(review(pod, "acme-train", "uid-priv"));
  ASSERT_EQ(r.status, 200) << r.raw;  // a denial is an answer, not an error
  const Json& resp = r.body.at("response");
  EXPECT_EQ(resp.at("uid"), "uid-priv");
  EXPECT_FALSE(resp.at("allowed").get<bool>());
  EXPECT_EQ(resp.at("status").at("code"), 403);
  auto controls = controls_of(r.body);
  for (const char* want : {"privileged", "hostNamespaces", "allowPrivilegeEscalation"})
    EXPECT_TRUE(controls.contains(want)) << want << " missing in " << r.raw;
  std::string message = resp.at("status").at("message");
  EXPECT_NE(message.find("violates PodSecurity \"restricted:latest\""), std::string::npos)
      << message;

  auto denials = admission_denials();
  ASSERT_EQ(denials.size(), 1u);
  const Json& rec = denials[0];
  EXPECT_EQ(rec.at("tenant_id"), acme.id);
  EXPECT_EQ(rec.at("outcome"), "denied");
  EXPECT_EQ(rec.at("request_id"), r.request_id());
  EXPECT_EQ(rec.at("detail").at("namespace"), "acme-train");
  EXPECT_EQ(rec.at("detail").at("uid"), "uid-priv");
  std::set<std::string> audited;
  for (const auto& x : rec.at("detail").at("controls")) audited.insert(x.get<std::string>());
  EXPECT_EQ(audited, controls);
  // acme's admins see it in their own trail.
  bool seen = false;
  for (const auto& x : s.list_all(acme.admin_token, "/v1/tenants/" + acme.id + "/audit"))
    seen = seen || x.at("action") == "admission.deny";
  EXPECT_TRUE(seen);
}

TEST_F(K8s, RestrictedPodIsAllowedAndNotAudited) {
  auto r = validate(review(restricted_pod("acme-train"), "acme-train", "uid-ok"));
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body.at("apiVersion"), "admission.k8s.io/v1");
  EXPECT_EQ(r.body.at("kind"), "AdmissionReview");
  EXPECT_EQ(r.body.at("response").at("uid"), "uid-ok");
  EXPECT_TRUE(r.body.at("response").at("allowed").get<bool>()) << r.raw;
  EXPECT_TRUE(admission_denials().empty());
  // The same pod asking for a MIG slice of a standard tenant's tiers is fine; a whole GPU
  // only because standard allows dedicated tiers; time-sliced shares are not standard's.
  Json shared = restricted_pod("acme-train");
  shared["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpu.shared", 1}}}};
  auto d = validate(review(shared, "acme-train", "uid-shared"));
  ASSERT_EQ(d.status, 200) << d.raw;
  EXPECT_FALSE(d.body.at("response").at("allowed").get<bool>()) << d.raw;
  EXPECT_TRUE(controls_of(d.body).contains("tenant.gpuResources")) << d.raw;
}

TEST_F(K8s, ForeignNamespaceAndForeignPoolAreDenied) {
  // acme's webhook (?tenant=acme) asked about beta's namespace.
  auto r = validate(review(restricted_pod("beta-infer"), "beta-infer", "uid-ns"), "?tenant=acme");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_FALSE(r.body.at("response").at("allowed").get<bool>());
  EXPECT_TRUE(controls_of(r.body).contains("tenant.namespace")) << r.raw;
  // A namespace no tenant owns is refused too (fail closed).
  auto none = validate(review(restricted_pod("kube-public"), "kube-public", "uid-none"));
  ASSERT_EQ(none.status, 200) << none.raw;
  EXPECT_FALSE(none.body.at("response").at("allowed").get<bool>());
  EXPECT_TRUE(controls_of(none.body).contains("tenant.namespace")) << none.raw;
  // Without ?tenant the namespace's owner is found: the same pod in beta's namespace passes.
  auto own = validate(review(restricted_pod("beta-infer"), "beta-infer", "uid-own"));
  EXPECT_TRUE(own.body.at("response").at("allowed").get<bool>()) << own.raw;

  // acme's pod steering onto beta's pool by label, and by node name.
  Json by_label = restricted_pod("acme-train");
  by_label["spec"]["nodeSelector"] = {{"gpuplane.io/pool", "beta-pool"}};
  auto l = validate(review(by_label, "acme-train", "uid-label"));
  ASSERT_EQ(l.status, 200) << l.raw;
  EXPECT_FALSE(l.body.at("response").at("allowed").get<bool>());
  EXPECT_TRUE(controls_of(l.body).contains("tenant.placement")) << l.raw;
  Json by_node = restricted_pod("acme-train");
  by_node["spec"]["nodeName"] = "beta-node-1";
  auto n = validate(review(by_node, "acme-train", "uid-node"));
  EXPECT_FALSE(n.body.at("response").at("allowed").get<bool>()) << n.raw;
  EXPECT_TRUE(controls_of(n.body).contains("tenant.placement")) << n.raw;
  // beta itself may target its pool.
  Json beta_pod = restricted_pod("beta-infer");
  beta_pod["spec"]["nodeSelector"] = {{"gpuplane.io/pool", "beta-pool"}};
  auto b = validate(review(beta_pod, "beta-infer", "uid-beta"));
  EXPECT_TRUE(b.body.at("response").at("allowed").get<bool>()) << b.raw;

  // Every denial above is audited, under the tenant evaluated.
  std::map<std::string, std::string> tenant_by_uid;
  for (const auto& rec : admission_denials())
    tenant_by_uid[rec.at("detail").at("uid")] =
        rec.at("tenant_id").is_null() ? "" : rec.at("tenant_id").get<std::string>();
  EXPECT_EQ(tenant_by_uid.size(), 4u);
  EXPECT_EQ(tenant_by_uid["uid-ns"], acme.id);
  EXPECT_EQ(tenant_by_uid["uid-none"], "");
  EXPECT_EQ(tenant_by_uid["uid-label"], acme.id);
  EXPECT_EQ(tenant_by_uid["uid-node"], acme.id);
}

// Issue 24, finding 2: a standard tenant's pod that passes restricted and asks for no GPU, but
// sets NVIDIA_VISIBLE_DEVICES=all, would get every GPU of its node where the toolkit accepts
// the variable. The webhook refuses it under a control of its own, on any container kind.
TEST_F(K8s, PodSelectingGpusThroughItsEnvironmentIsDenied) {
  Json pod = restricted_pod("acme-train");
  pod["spec"]["containers"][0]["env"] =
      Json::array({{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}}});
  auto r = validate(review(pod, "acme-train", "uid-env"));
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_FALSE(r.body.at("response").at("allowed").get<bool>()) << r.raw;
  EXPECT_EQ(controls_of(r.body), std::set<std::string>{"tenant.gpuDeviceEnv"}) << r.raw;
  bool named = false;
  for (const auto& c : r.body.at("response").at("status").at("details").at("causes"))
    named = named || c.value("field", "") == "spec.containers[0].env[0].name";
  EXPECT_TRUE(named) << r.raw;
  auto denials = admission_denials();
  ASSERT_EQ(denials.size(), 1u);
  EXPECT_EQ(denials[0].at("detail").at("controls"), Json::array({"tenant.gpuDeviceEnv"}));
  // In an init container of a Deployment's template too.
  Json deployment = {
      {"apiVersion", "apps/v1"},
      {"kind", "Deployment"},
      {"metadata", {{"name", "worker"}, {"namespace", "acme-train"}}},
      {"spec",
       {{"selector", {{"matchLabels", {{"app", "w"}}}}},
        {"template", {{"metadata", {{"labels", {{"app", "w"}}}}}, {"spec", pod["spec"]}}}}}};
  auto& spec = deployment["spec"]["template"]["spec"];
  spec["initContainers"] = spec["containers"];
  spec["containers"][0].erase("env");
  Json dr = review(deployment, "acme-train", "uid-env-deploy");
  dr["request"]["kind"] = {{"group", "apps"}, {"version", "v1"}, {"kind", "Deployment"}};
  auto d = validate(dr);
  ASSERT_EQ(d.status, 200) << d.raw;
  EXPECT_FALSE(d.body.at("response").at("allowed").get<bool>()) << d.raw;
  EXPECT_EQ(controls_of(d.body), std::set<std::string>{"tenant.gpuDeviceEnv"}) << d.raw;
}

// The same escape through the container runtime: containerd and CRI-O inject the CDI devices a
// pod's cdi.k8s.io/ annotations name, device plugin or not.
TEST_F(K8s, PodAskingTheRuntimeForCdiDevicesIsDenied) {
  Json pod = restricted_pod("acme-train");
  pod["metadata"]["annotations"] = {{"cdi.k8s.io/gpus", "nvidia.com/gpu=all"}};
  auto r = validate(review(pod, "acme-train", "uid-cdi"));
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_FALSE(r.body.at("response").at("allowed").get<bool>()) << r.raw;
  EXPECT_EQ(controls_of(r.body), std::set<std::string>{"tenant.cdiDevices"}) << r.raw;
  pod["metadata"]["annotations"] = {{"example.com/team", "vision"}};
  auto ok = validate(review(pod, "acme-train", "uid-cdi-ok"));
  ASSERT_EQ(ok.status, 200) << ok.raw;
  EXPECT_TRUE(ok.body.at("response").at("allowed").get<bool>()) << ok.raw;
}

// Issue 24, finding 3: tenant acme creating project "labs-research" produced the namespace of
// tenant acme-labs, project research, and the webhook then refused acme-labs' pods there.
TEST_F(K8s, NoTenantCanTakeOrLockAnotherTenantsNamespace) {
  const std::string admin = s.admin_token();
  // Names that could share namespaces are refused when the second tenant is created (only a
  // platform admin does that, and sees every tenant anyway).
  for (const char* name : {"acme-labs", "acme-x1"}) {
    auto r = s.request("POST", "/v1/tenants", {{"name", name}}, admin);
    EXPECT_TRUE(IsProblem(r, 409, "conflict")) << name << ": " << r.raw;
    EXPECT_NE(r.raw.find("'acme'"), std::string::npos) << r.raw;
  }
  expect_status(s.request("POST", "/v1/tenants", {{"name", "acmelabs"}}, admin), 201, "acmelabs");
  // So acme's "labs-research" is only ever acme's, and its namespace is stored with it.
  Json p = s.create_project(acme.admin_token, acme.id, "labs-research");
  EXPECT_EQ(p.at("kubernetes_namespace"), "acme-labs-research") << p.dump();
  auto own = validate(review(restricted_pod("acme-labs-research"), "acme-labs-research", "u1"));
  EXPECT_TRUE(own.body.at("response").at("allowed").get<bool>()) << own.raw;

  // A store from before migration 20 can hold both names. There the first project keeps the
  // namespace: another tenant's later project cannot take it, and the webhook's owner stays.
  auto legacy = s.store().write([&](store::Tx& tx) -> Result<void> {
    GP_TRY_VOID(
        tx.exec("INSERT INTO tenants (id, name, display_name, isolation_class, state, labels, "
                "created_at, updated_at, version) VALUES ('ten_legacy', 'beta-labs', 'beta-labs', "
                "'standard', 'active', '{}', 1, 1, 1)"));
    GP_TRY_VOID(tx.exec(
        "INSERT INTO projects (id, tenant_id, name, display_name, created_at, updated_at, "
        "version, k8s_namespace) VALUES ('prj_legacy', 'ten_legacy', 'research', 'research', 1, "
        "1, 1, 'beta-labs-research')"));
    return ok();
  });
  ASSERT_TRUE(legacy) << legacy.error().message;
  auto taken = s.request("POST", "/v1/tenants/" + beta.id + "/projects",
                         {{"name", "labs-research"}}, beta.admin_token);
  EXPECT_TRUE(IsProblem(taken, 409, "conflict")) << taken.raw;
  EXPECT_EQ(taken.raw.find("ten_legacy"), std::string::npos) << taken.raw;
  Json legacy_pod = restricted_pod("beta-labs-research");
  auto kept = validate(review(legacy_pod, "beta-labs-research", "u2"));
  EXPECT_TRUE(kept.body.at("response").at("allowed").get<bool>()) << kept.raw;
  auto foreign = validate(review(legacy_pod, "beta-labs-research", "u3"), "?tenant=beta");
  EXPECT_FALSE(foreign.body.at("response").at("allowed").get<bool>()) << foreign.raw;
  // Neither bundle declares the other's namespace.
  auto b = s.request("GET", "/v1/tenants/" + beta.id + "/render/kubernetes", nullptr, admin);
  ASSERT_EQ(b.status, 200) << b.raw;
  EXPECT_EQ(b.raw.find("beta-labs-research"), std::string::npos) << b.raw;
}

// Issue 24, finding 2, the node side: a node that two tenants' allocations share and whose
// toolkit accepts device lists from unprivileged containers fails the posture control of both;
// once its agent reports the variable refused, it passes.
TEST_F(K8s, PostureFailsASharedNodeWhoseToolkitAcceptsTheDeviceVariable) {
  const std::string admin = s.admin_token();
  Json inventory = h200_inventory("shared-1", 2);
  inventory["gpu_runtime"] = {{"toolkit_config", "/etc/nvidia-container-runtime/config.toml"},
                              {"toolkit_config_state", "absent"},
                              {"accept_envvar_when_unprivileged", true},
                              {"accept_volume_mounts", false},
                              {"device_list_strategy", Json::array({"envvar"})},
                              {"device_list_strategy_source", "flag"}};
  expect_status(s.request("POST", "/v1/fleet/import",
                          {{"nodes", Json::array({{{"inventory", inventory}}})}}, admin),
                201, "import");
  std::vector<TenantInfo> tenants;
  for (const char* name : {"gamma", "delta"}) {
    TenantInfo t = s.create_tenant(name, std::string(name) + "-admin");
    std::string project = s.create_project(t.admin_token, t.id, "train").at("id");
    expect_status(s.request("PUT", "/v1/tenants/" + t.id + "/quota",
                            {{"models", {{"H200", {{"nominal", 1}}}}}}, admin),
                  200, "quota");
    auto a = s.request("POST", "/v1/tenants/" + t.id + "/projects/" + project + "/allocations",
                       {{"shape", {{"tier", "dedicated-gpu"}}}}, t.admin_token);
    ASSERT_EQ(a.status, 201) << a.raw;
    ASSERT_EQ(a.body.at("state"), "placed") << a.raw;
    tenants.push_back(t);
  }
  auto control = [&](const TenantInfo& t) {
    auto r = s.request("GET", "/v1/tenants/" + t.id + "/posture", nullptr, t.admin_token);
    EXPECT_EQ(r.status, 200) << r.raw;
    for (const auto& layer : r.body.at("layers"))
      for (const auto& c : layer.at("controls"))
        if (c.at("id") == "workload.gpu-device-env") return c;
    ADD_FAILURE() << "no workload.gpu-device-env in " << r.raw;
    return Json();
  };
  for (const auto& t : tenants) {
    Json c = control(t);
    EXPECT_EQ(c.value("status", ""), "fail") << c.dump(2);
    const Json& seen = c.at("evidence").at("seen");
    EXPECT_TRUE(seen.at("probe").at("denied").get<bool>()) << c.dump(2);
    ASSERT_EQ(seen.at("accepting_nodes").size(), 1u) << c.dump(2);
    EXPECT_EQ(seen.at("accepting_nodes")[0].at("node"), "shared-1");
    EXPECT_EQ(c.dump().find(t.name == "gamma" ? "delta" : "gamma"), std::string::npos)
        << "the other tenant is named: " << c.dump(2);
  }
  // The node's agent reports the toolkit closed: both pass.
  inventory["gpu_runtime"]["toolkit_config_state"] = "read";
  inventory["gpu_runtime"]["accept_envvar_when_unprivileged"] = false;
  inventory["gpu_runtime"]["device_list_strategy"] = Json::array({"volume-mounts"});
  auto closed = s.store().write([&](store::Tx& tx) -> Result<void> {
    auto node = GP_TRY(fleet::find_node(tx, "shared-1"));
    GP_TRY_VOID(fleet::apply_inventory(tx, s.api().env(), node->id,
                                       GP_TRY(fleet::parse_inventory(inventory))));
    return ok();
  });
  ASSERT_TRUE(closed) << closed.error().message;
  for (const auto& t : tenants) {
    Json c = control(t);
    EXPECT_EQ(c.value("status", ""), "pass") << c.dump(2);
  }
}

TEST_F(K8s, MalformedReviewsAre400AndTheWebhookNeedsItsPermission) {
  Json no_uid = review(restricted_pod("acme-train"), "acme-train", "x");
  no_uid["request"].erase("uid");
  EXPECT_TRUE(IsProblem(validate(no_uid), 400, "invalid_argument"));
  Json v1beta1 = review(restricted_pod("acme-train"), "acme-train", "x");
  v1beta1["apiVersion"] = "admission.k8s.io/v1beta1";
  EXPECT_TRUE(IsProblem(validate(v1beta1), 400, "invalid_argument"));
  Json no_object = review(restricted_pod("acme-train"), "acme-train", "x");
  no_object["request"].erase("object");
  EXPECT_TRUE(IsProblem(validate(no_object), 400, "invalid_argument"));
  EXPECT_TRUE(IsProblem(s.request_raw("POST", "/v1/admission/validate", "{not json", webhook_token),
                        400, "invalid_argument"));
  EXPECT_TRUE(
      IsProblem(validate(review(restricted_pod("acme-train"), "acme-train", "x"), "?tenant=nobody"),
                400, "invalid_argument"));
  EXPECT_TRUE(admission_denials().empty()) << "malformed reviews are not verdicts";
  // A tenant admin cannot answer for the cluster; nobody anonymous either.
  auto ok = review(restricted_pod("acme-train"), "acme-train", "x");
  EXPECT_TRUE(IsProblem(s.request("POST", "/v1/admission/validate", ok, acme.admin_token), 403,
                        "permission_denied"));
  EXPECT_TRUE(IsProblem(s.request("POST", "/v1/admission/validate", ok), 401, "unauthenticated"));
}

// A tenant checks its own manifests with its own credential: the webhook's verdict, nothing
// audited as a denial, another tenant's namespace denied, another tenant's route hidden.
TEST_F(K8s, ATenantDryChecksItsOwnManifests) {
  auto check = [&](const std::string& tenant, const Json& body, const std::string& token) {
    return s.request("POST", "/v1/tenants/" + tenant + "/admission/check", body, token);
  };
  auto allowed =
      check("acme", review(restricted_pod("acme-train"), "acme-train", "a"), acme.admin_token);
  ASSERT_EQ(allowed.status, 200) << allowed.raw;
  EXPECT_TRUE(allowed.body.at("response").at("allowed").get<bool>()) << allowed.raw;

  Json pod = restricted_pod("acme-train");
  pod["spec"]["containers"][0]["securityContext"]["privileged"] = true;
  auto denied = check("acme", review(pod, "acme-train", "b"), acme.admin_token);
  ASSERT_EQ(denied.status, 200) << denied.raw;
  EXPECT_FALSE(denied.body.at("response").at("allowed").get<bool>());
  EXPECT_TRUE(controls_of(denied.body).contains("privileged")) << denied.raw;
  // The same verdict the webhook gives, which does audit it.
  EXPECT_EQ(controls_of(validate(review(pod, "acme-train", "b")).body), controls_of(denied.body));
  EXPECT_EQ(admission_denials().size(), 1u) << "the dry check audited a denial";

  // beta's namespace is not acme's to check; beta's route is not acme's to call.
  auto foreign =
      check("acme", review(restricted_pod("beta-infer"), "beta-infer", "c"), acme.admin_token);
  ASSERT_EQ(foreign.status, 200) << foreign.raw;
  EXPECT_TRUE(controls_of(foreign.body).contains("tenant.namespace")) << foreign.raw;
  EXPECT_TRUE(IsProblem(
      check("beta", review(restricted_pod("beta-infer"), "beta-infer", "d"), acme.admin_token), 404,
      "not_found"));
  Json no_uid = review(restricted_pod("acme-train"), "acme-train", "x");
  no_uid["request"].erase("uid");
  EXPECT_TRUE(IsProblem(check("acme", no_uid, acme.admin_token), 400, "invalid_argument"));
}

// A self-signed CA certificate, PEM, made with OpenSSL for the test.
std::string self_signed_ca_pem() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), 0);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("gpuplane test CA"), -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509_sign(x, key, EVP_sha256());
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, x);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  std::string pem(data, size_t(len));
  BIO_free(bio);
  X509_free(x);
  EVP_PKEY_free(key);
  return pem;
}

std::string base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  out.resize(size_t(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                    reinterpret_cast<const unsigned char*>(bytes.data()),
                                    int(bytes.size()))));
  return out;
}

std::string query_escape(const std::string& s) {
  std::string out;
  for (char c : s)
    out +=
        std::isalnum(static_cast<unsigned char>(c)) ? std::string(1, c) : fmt::format("%{:02X}", c);
  return out;
}

TEST_F(K8s, RenderCarriesTheWebhookCaBundle) {
  const std::string b64 = base64(self_signed_ca_pem());
  auto r = s.request("GET", "/v1/tenants/acme/render/kubernetes?ca_bundle=" + query_escape(b64),
                     nullptr, s.admin_token());
  ASSERT_EQ(r.status, 200) << r.raw;
  // The YAML writer quotes the value when it must; either way it is the bundle, unchanged.
  EXPECT_TRUE(r.raw.find("caBundle: " + b64 + "\n") != std::string::npos ||
              r.raw.find("caBundle: \"" + b64 + "\"\n") != std::string::npos)
      << r.raw;
  // Without it there is no caBundle; base64 that is not a certificate is refused.
  auto plain = s.request("GET", "/v1/tenants/acme/render/kubernetes", nullptr, s.admin_token());
  EXPECT_EQ(plain.raw.find("caBundle"), std::string::npos);
  for (std::string bad : {base64("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END "
                                 "CERTIFICATE-----\n"),
                          std::string("not base64!"), base64("hello")})
    EXPECT_TRUE(IsProblem(
        s.request("GET", "/v1/tenants/acme/render/kubernetes?ca_bundle=" + query_escape(bad),
                  nullptr, s.admin_token()),
        400, "invalid_argument"))
        << bad;
}

TEST_F(K8s, RenderReturnsTheTenantBundleAsYaml) {
  expect_status(s.request("PUT", "/v1/tenants/" + acme.id + "/quota",
                          {{"models", {{"H200", {{"nominal", 2}}}}}}, s.admin_token()),
                200, "quota");
  auto r =
      s.request("GET", "/v1/tenants/" + acme.id + "/render/kubernetes", nullptr, acme.admin_token);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_TRUE(r.header("Content-Type").starts_with("application/yaml")) << r.header("Content-Type");
  const std::string& y = r.raw;
  EXPECT_TRUE(y.starts_with("# Kubernetes bundle for tenant acme")) << y.substr(0, 200);
  EXPECT_NE(y.find("\n---\n"), std::string::npos) << "a multi-document stream";
  EXPECT_NE(y.find("kind: Namespace"), std::string::npos);
  EXPECT_NE(y.find("name: acme-train"), std::string::npos);
  EXPECT_NE(y.find("kind: ResourceQuota"), std::string::npos);
  EXPECT_NE(y.find("requests.nvidia.com/gpu: \"2\""), std::string::npos)
      << "the tenant quota of 2 H200 caps whole GPUs:\n"
      << y;
  EXPECT_NE(y.find("kind: ValidatingWebhookConfiguration"), std::string::npos);
  // The server as the client addressed it (Host, port included).
  EXPECT_NE(y.find(fmt::format("https://127.0.0.1:{}/v1/admission/validate", s.port())),
            std::string::npos)
      << y;
  EXPECT_NE(y.find("acme/acme-admin"), std::string::npos) << "the tenant admin's binding";
  EXPECT_EQ(y.find("beta"), std::string::npos) << "nothing of another tenant";
  // Deterministic: the same state renders the same bytes.
  auto again =
      s.request("GET", "/v1/tenants/" + acme.id + "/render/kubernetes", nullptr, acme.admin_token);
  EXPECT_EQ(again.raw, y);
  // An explicit webhook URL; a bad one is a 400.
  auto w =
      s.request("GET", "/v1/tenants/acme/render/kubernetes?webhook_url=https://gp.example.com:8443",
                nullptr, s.admin_token());
  ASSERT_EQ(w.status, 200) << w.raw;
  EXPECT_NE(w.raw.find("https://gp.example.com:8443/v1/admission/validate"), std::string::npos);
  EXPECT_TRUE(
      IsProblem(s.request("GET", "/v1/tenants/acme/render/kubernetes?webhook_url=http://plain",
                          nullptr, s.admin_token()),
                400, "invalid_argument"));

  // beta owns a pool: its bundle pins its namespace to it and labels and taints the node.
  auto b =
      s.request("GET", "/v1/tenants/" + beta.id + "/render/kubernetes", nullptr, beta.admin_token);
  ASSERT_EQ(b.status, 200) << b.raw;
  EXPECT_NE(b.raw.find("kind: Node"), std::string::npos) << b.raw;
  EXPECT_NE(b.raw.find("name: beta-node-1"), std::string::npos);
  EXPECT_NE(b.raw.find("gpuplane.io/pool: beta-pool"), std::string::npos);
  // Another tenant's admin gets 404, as if acme did not exist.
  EXPECT_TRUE(IsProblem(
      s.request("GET", "/v1/tenants/" + acme.id + "/render/kubernetes", nullptr, beta.admin_token),
      404, "not_found"));
}

TEST_F(K8s, WorkloadPolicyRestrictsRegistriesAndNamesTheAllowList) {
  const std::string path = "/v1/tenants/" + acme.id + "/workload-policy";
  auto empty = s.request("GET", path, nullptr, acme.admin_token);
  ASSERT_EQ(empty.status, 200) << empty.raw;
  EXPECT_EQ(empty.body.at("version"), 0);
  EXPECT_TRUE(empty.body.at("allowed_registries").empty());
  // Never set: any registry passes.
  Json hub = restricted_pod("acme-train");
  hub["spec"]["containers"][0]["image"] = "busybox:1.36";
  auto any = validate(review(hub, "acme-train", "uid-any"));
  EXPECT_TRUE(any.body.at("response").at("allowed").get<bool>()) << any.raw;

  // The tenant admin sets the list; the host is case-folded.
  auto put = s.request(
      "PUT", path, {{"allowed_registries", Json::array({"Registry.Example.com/acme", "ghcr.io"})}},
      acme.admin_token);
  ASSERT_EQ(put.status, 200) << put.raw;
  EXPECT_EQ(put.body.at("allowed_registries"),
            Json::array({"registry.example.com/acme", "ghcr.io"}));
  EXPECT_EQ(put.header("ETag"), "\"1\"");
  EXPECT_EQ(s.request("GET", path, nullptr, acme.admin_token).body, put.body);

  // A pod from Docker Hub is now denied, and the denial names the allow-list.
  auto denied = validate(review(hub, "acme-train", "uid-hub"));
  ASSERT_EQ(denied.status, 200) << denied.raw;
  EXPECT_FALSE(denied.body.at("response").at("allowed").get<bool>()) << denied.raw;
  EXPECT_TRUE(controls_of(denied.body).contains("tenant.imageRegistry")) << denied.raw;
  std::string message = denied.body.at("response").at("status").at("message");
  EXPECT_NE(message.find("uses busybox:1.36"), std::string::npos) << message;
  EXPECT_NE(message.find("registry.example.com/acme, ghcr.io"), std::string::npos) << message;
  // A path prefix is a repository boundary: registry.example.com/acmeevil is not acme's.
  Json evil = restricted_pod("acme-train");
  evil["spec"]["containers"][0]["image"] = "registry.example.com/acmeevil/x:1";
  EXPECT_FALSE(validate(review(evil, "acme-train", "uid-evil"))
                   .body.at("response")
                   .at("allowed")
                   .get<bool>());
  // The listed registry passes (restricted_pod uses registry.example.com/acme/train:1).
  auto allowed = validate(review(restricted_pod("acme-train"), "acme-train", "uid-listed"));
  EXPECT_TRUE(allowed.body.at("response").at("allowed").get<bool>()) << allowed.raw;
  // beta has no policy: its pods from anywhere still pass.
  Json beta_hub = hub;
  beta_hub["metadata"]["namespace"] = "beta-infer";
  EXPECT_TRUE(validate(review(beta_hub, "beta-infer", "uid-beta-hub"))
                  .body.at("response")
                  .at("allowed")
                  .get<bool>());

  // require_pull_always tightens a standard tenant: a pod without Always is now denied.
  auto pull = s.request("PUT", path,
                        {{"allowed_registries", Json::array({"registry.example.com/acme"})},
                         {"require_pull_always", true}},
                        s.admin_token(), {{"If-Match", "\"1\""}});
  ASSERT_EQ(pull.status, 200) << pull.raw;
  EXPECT_EQ(pull.body.at("version"), 2);
  auto no_always = validate(review(restricted_pod("acme-train"), "acme-train", "uid-pull"));
  EXPECT_FALSE(no_always.body.at("response").at("allowed").get<bool>()) << no_always.raw;
  EXPECT_TRUE(controls_of(no_always.body).contains("tenant.imagePullPolicy")) << no_always.raw;
  std::string pm = no_always.body.at("response").at("status").at("message");
  EXPECT_NE(pm.find("workload policy"), std::string::npos) << pm;
  Json always = restricted_pod("acme-train");
  always["spec"]["containers"][0]["imagePullPolicy"] = "Always";
  EXPECT_TRUE(validate(review(always, "acme-train", "uid-always"))
                  .body.at("response")
                  .at("allowed")
                  .get<bool>());

  // A stale If-Match is 412 and changes nothing.
  EXPECT_TRUE(IsProblem(s.request("PUT", path, {{"allowed_registries", Json::array()}},
                                  acme.admin_token, {{"If-Match", "\"1\""}}),
                        412, "precondition_failed"));
  EXPECT_EQ(s.request("GET", path, nullptr, acme.admin_token).body.at("version"), 2);

  // Audited with what changed.
  std::vector<Json> sets;
  for (auto& rec : s.audit_records())
    if (rec.at("action") == "workload.policy.set" && rec.at("outcome") == "success")
      sets.push_back(rec);
  ASSERT_EQ(sets.size(), 2u);
  EXPECT_EQ(sets[0].at("tenant_id"), acme.id);
  EXPECT_EQ(sets[0].at("detail").at("registries_added"),
            Json::array({"registry.example.com/acme", "ghcr.io"}));
  EXPECT_EQ(sets[1].at("detail").at("registries_removed"), Json::array({"ghcr.io"}));

  // Another tenant's admin neither reads nor writes it (404: acme is hidden from beta).
  EXPECT_TRUE(IsProblem(s.request("GET", path, nullptr, beta.admin_token), 404, "not_found"));
  EXPECT_TRUE(
      IsProblem(s.request("PUT", path, {{"allowed_registries", Json::array()}}, beta.admin_token),
                404, "not_found"));
  EXPECT_EQ(s.request("GET", path, nullptr, acme.admin_token).body.at("version"), 2);
}

TEST_F(K8s, WorkloadPolicyRejectsMalformedListsAndNeverLoosensTheClass) {
  const std::string path = "/v1/tenants/" + acme.id + "/workload-policy";
  auto bad = [&](const Json& body, const std::string& want) {
    auto r = s.request("PUT", path, body, acme.admin_token);
    EXPECT_TRUE(IsProblem(r, 400, "invalid_argument")) << body.dump() << " -> " << r.raw;
    EXPECT_NE(r.raw.find(want), std::string::npos) << body.dump() << " -> " << r.raw;
  };
  auto regs = [](std::initializer_list<const char*> l) {
    Json a = Json::array();
    for (const char* x : l) a.push_back(x);
    return Json{{"allowed_registries", a}};
  };
  bad(Json::object(), "allowed_registries");
  bad({{"allowed_registries", "ghcr.io"}}, "must be an array");
  bad({{"allowed_registries", Json::array({7})}}, "must be a string");
  bad(regs({""}), "is empty");
  bad(regs({"https://ghcr.io"}), "scheme");
  bad(regs({"acme/tools"}), "docker.io/acme/tools");
  bad(regs({"ghcr.io:0"}), "port");
  bad(regs({"ghcr.io:70000"}), "port");
  bad(regs({"ghcr..io"}), "host");
  bad(regs({"-ghcr.io"}), "host");
  bad(regs({"ghcr.io/Acme"}), "path component");
  bad(regs({"ghcr.io/acme/"}), "ends with");
  bad(regs({"ghcr.io/acme:1.0"}), "tag");
  bad(regs({"ghcr.io/acme@sha256:00"}), "digest");
  bad(regs({"ghcr.io/acme", "GHCR.io/acme"}), "listed twice");
  bad({{"allowed_registries", Json::array()}, {"pull", true}}, "pull");
  Json many = Json::array();
  for (int i = 0; i < 65; ++i) many.push_back(fmt::format("r{}.example.com", i));
  bad({{"allowed_registries", many}}, "at most 64");
  many.erase(many.size() - 1);
  EXPECT_EQ(s.request("PUT", path, {{"allowed_registries", many}}, acme.admin_token).status, 200);
  // Ports, localhost and separators that image references allow are fine.
  auto ok =
      s.request("PUT", path, regs({"localhost:5000", "10.0.0.7:5000/team", "quay.io/a__b/c-d.e_f"}),
                acme.admin_token);
  EXPECT_EQ(ok.status, 200) << ok.raw;

  // A sensitive tenant's class requires Always: the policy cannot switch it off.
  auto g = expect_status(s.request("POST", "/v1/tenants",
                                   {{"name", "gamma"},
                                    {"isolation_class", "sensitive"},
                                    {"admin", {{"username", "gamma-admin"}}}},
                                   s.admin_token()),
                         201, "sensitive tenant");
  const std::string gpath =
      "/v1/tenants/" + g.body.at("id").get<std::string>() + "/workload-policy";
  auto loosen = s.request("PUT", gpath,
                          {{"allowed_registries", Json::array()}, {"require_pull_always", false}},
                          s.admin_token());
  EXPECT_TRUE(IsProblem(loosen, 400, "invalid_argument")) << loosen.raw;
  EXPECT_NE(loosen.raw.find("only tighten"), std::string::npos) << loosen.raw;
  auto keep =
      s.request("PUT", gpath, {{"allowed_registries", Json::array({"ghcr.io"})}}, s.admin_token());
  ASSERT_EQ(keep.status, 200) << keep.raw;
  EXPECT_TRUE(keep.body.at("class_requires_pull_always").get<bool>());
  EXPECT_FALSE(keep.body.at("require_pull_always").get<bool>());
}

TEST_F(K8s, ReconcilePodsAgainstAllocations) {
  const std::string admin = s.admin_token();
  expect_status(s.request("PUT", "/v1/tenants/" + beta.id + "/quota",
                          {{"models", {{"H200", {{"nominal", 2}}}}}}, admin),
                200, "quota");
  std::string project;
  for (const auto& p : s.list_all(beta.admin_token, "/v1/tenants/" + beta.id + "/projects"))
    if (p.at("name") == "infer") project = p.at("id");
  ASSERT_FALSE(project.empty());
  auto alloc = expect_status(
      s.request("POST", "/v1/tenants/" + beta.id + "/projects/" + project + "/allocations",
                {{"shape", {{"tier", "dedicated-gpu"}}}}, beta.admin_token),
      201, "allocation");
  ASSERT_FALSE(alloc.body.at("placement").is_null()) << alloc.raw;

  auto gpu_pod = [](const std::string& ns, const std::string& name, int gpus) {
    return Json{{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", name}, {"namespace", ns}}},
                {"spec",
                 {{"nodeName", "beta-node-1"},
                  {"containers",
                   Json::array({{{"name", "main"},
                                 {"image", "x"},
                                 {"resources", {{"limits", {{"nvidia.com/gpu", gpus}}}}}}})}}},
                {"status", {{"phase", "Running"}}}};
  };
  Json pods = {{"apiVersion", "v1"},
               {"kind", "List"},
               {"items", Json::array({gpu_pod("beta-infer", "ok", 1)})}};
  const std::string path = "/v1/fleet/reconcile/kubernetes-pods";
  auto clean = s.request("POST", path, pods, webhook_token);
  ASSERT_EQ(clean.status, 200) << clean.raw;
  EXPECT_TRUE(clean.body.at("discrepancies").empty()) << clean.raw;
  ASSERT_EQ(clean.body.at("nodes").size(), 1u);
  EXPECT_EQ(clean.body.at("nodes")[0].at("holders"), Json::array({"beta"}));
  EXPECT_EQ(clean.body.at("nodes")[0].at("pods")[0].at("tenant"), "beta");

  // acme's pod on beta's node, and beta asking one GPU more than it holds there.
  pods["items"].push_back(gpu_pod("acme-train", "intruder", 1));
  pods["items"].push_back(gpu_pod("beta-infer", "greedy", 1));
  auto r = s.request("POST", path, pods, webhook_token);
  ASSERT_EQ(r.status, 200) << r.raw;
  std::map<std::string, Json> by_kind;
  for (const auto& d : r.body.at("discrepancies")) by_kind[d.at("kind")] = d;
  ASSERT_EQ(by_kind.size(), 2u) << r.raw;
  EXPECT_EQ(by_kind.at("foreign_node").at("tenant"), "acme");
  EXPECT_EQ(by_kind.at("over_request").at("requested"), 2);
  EXPECT_EQ(by_kind.at("over_request").at("held"), 1);

  // Bad input is a 400 naming the item; tenants may not call it.
  pods["items"][0]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1.5";
  auto bad = s.request("POST", path, pods, webhook_token);
  EXPECT_TRUE(IsProblem(bad, 400, "invalid_argument")) << bad.raw;
  EXPECT_NE(bad.raw.find("items[0]"), std::string::npos) << bad.raw;
  EXPECT_TRUE(IsProblem(s.request("POST", path, pods, beta.admin_token), 403, "permission_denied"));
}

}  // namespace
}  // namespace gp::it
