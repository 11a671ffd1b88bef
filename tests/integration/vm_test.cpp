// GPU VMs through the API (docs/vms.md): an allocation of a vm offering reaches its node's agent
// as a VM assignment (exactly its GPUs, the offering's shape, the tenant's segment and SSH keys);
// the agent's reports become the tenant's VM state and addresses; power actions and console reads
// are audited; another tenant sees nothing; bad input changes nothing; a released allocation or
// an offboarded tenant leaves a destroyed VM once the node no longer holds it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "integration/harness.h"

namespace gp::it {
namespace {

constexpr const char* kKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHq0Xj1mH0V6K9P7vG2hQ7b5n1sVt8pF2xY4wZ3cA1bD alice@laptop";

class Vms : public ::testing::Test {
 protected:
  TestServer s;
  TenantInfo acme, bravo;
  std::string acme_project, bravo_project, node_token;

  void SetUp() override {
    const std::string admin = s.admin_token();
    for (Json o : {Json{{"name", "h200-vm"},
                        {"tier", "dedicated-gpu"},
                        {"models", {"H200"}},
                        {"delivery", "vm"},
                        {"vm", {{"vcpus", 8}, {"memory_mib", 65536}}}},
                   Json{{"name", "h200-vm-3g"},
                        {"tier", "mig"},
                        {"models", {"H200"}},
                        {"mig_profile", "3g.71gb"},
                        {"delivery", "vm"},
                        {"vm", {{"vcpus", 4}, {"memory_mib", 32768}}}}}) {
      auto c = s.request("POST", "/v1/offerings", o, admin);
      ASSERT_EQ(c.status, 201) << c.raw;
    }
    acme = s.create_tenant("acme", "acme-admin");
    bravo = s.create_tenant("bravo", "bravo-admin");
    acme_project = s.create_project(acme.admin_token, acme.id, "training").at("id");
    bravo_project = s.create_project(bravo.admin_token, bravo.id, "nlp").at("id");
    for (const auto* t : {&acme, &bravo}) {
      auto q = s.request("PUT", "/v1/tenants/" + t->id + "/quota",
                         {{"models", {{"H200", {{"nominal", 2}}}}}}, admin);
      ASSERT_EQ(q.status, 200) << q.raw;
    }
    auto jt = s.request("POST", "/v1/join-tokens", Json::object(), admin);
    ASSERT_EQ(jt.status, 201) << jt.raw;
    auto enrolled =
        s.request("POST", "/v1/agent/enroll",
                  {{"join_token", jt.body["token"]}, {"inventory", h200_inventory("vm-node", 2)}});
    ASSERT_EQ(enrolled.status, 201) << enrolled.raw;
    node_token = enrolled.body["credential"];
  }

  std::string vms(const TenantInfo& t) const { return "/v1/tenants/" + t.id + "/vms"; }

  // An allocation of `offering` for acme, placed.
  std::string allocate(const std::string& offering) {
    auto r =
        s.request("POST", "/v1/tenants/" + acme.id + "/projects/" + acme_project + "/allocations",
                  {{"offering", offering}}, acme.admin_token);
    EXPECT_EQ(r.status, 201) << r.raw;
    EXPECT_EQ(r.body["state"], "placed") << r.raw;
    return r.body.value("id", "");
  }

  // One heartbeat of the node with `reports` as its "vms" (none when null).
  // `holding`: the allocations whose VM the node still runs (an agent's "holding"); by default
  // none, so that an ended allocation's stop ends at once.
  Resp heartbeat(const Json& reports = nullptr, const Json& holding = Json::array()) {
    Json body = Json::object();
    if (!reports.is_null()) body["vms"] = reports;
    if (!holding.is_null()) body["holding"] = holding;
    return s.request("POST", "/v1/agent/heartbeat", body, node_token);
  }
  // The "stop" of allocation `id` in a heartbeat's assignment; null when it has none.
  static Json stop_of(const Resp& hb, const std::string& id) {
    for (const auto& a : hb.body.at("assignments").at("allocations"))
      if (a.at("id") == id) return a.value("stop", Json());
    return nullptr;
  }

  // The "vm" of allocation `id` in a heartbeat's assignment; null when it has none.
  static Json vm_of(const Resp& hb, const std::string& id) {
    for (const auto& a : hb.body.at("assignments").at("allocations"))
      if (a.at("id") == id) return a.value("vm", Json());
    return nullptr;
  }

  Json get_vm(const std::string& vm) {
    auto r = s.request("GET", vms(acme) + "/" + vm, nullptr, acme.admin_token);
    EXPECT_EQ(r.status, 200) << r.raw;
    return r.body;
  }

  int audited(const std::string& action) {
    int n = 0;
    for (const auto& rec : s.audit_records())
      if (rec.at("action") == action && rec.at("outcome") == "success") ++n;
    return n;
  }
};

TEST_F(Vms, AnAllocationOfAVmOfferingBecomesAVmAssignmentWithExactlyItsGpu) {
  ASSERT_EQ(
      s.request("PUT", "/v1/tenants/" + acme.id + "/ssh-keys", {{"keys", {kKey}}}, acme.admin_token)
          .status,
      200);
  auto net = s.request("GET", "/v1/tenants/" + acme.id + "/network", nullptr, acme.admin_token);
  ASSERT_EQ(net.status, 200) << net.raw;
  const std::string id = allocate("h200-vm");
  auto hb = heartbeat();
  ASSERT_EQ(hb.status, 200) << hb.raw;
  const Json vm = vm_of(hb, id);
  ASSERT_TRUE(vm.is_object()) << hb.raw;
  std::string domain = "gp-" + id;
  std::ranges::replace(domain, '_', '-');
  EXPECT_EQ(vm["domain"], domain);
  EXPECT_EQ(vm["tenant"], "acme");
  EXPECT_EQ(vm["project"], "training");
  EXPECT_EQ(vm["vcpus"], 8);
  EXPECT_EQ(vm["memory_mib"], 65536);
  EXPECT_EQ(vm["desired"], "running");
  ASSERT_EQ(vm["passthrough"].size(), 1u) << vm.dump();
  const std::string pci = vm["passthrough"][0];
  EXPECT_TRUE(pci == "00000000:18:00.0" || pci == "00000000:19:00.0") << pci;
  EXPECT_TRUE(vm["vgpus"].empty());
  EXPECT_EQ(vm["segment"]["cidr"], net.body["segment"]["cidr"]);
  EXPECT_EQ(vm["ssh_keys"], Json::array({kKey}));
  EXPECT_TRUE(vm["volumes"].empty());  // the project has no volumes yet
  // The record is created once: a second heartbeat names the same VM.
  EXPECT_EQ(vm_of(heartbeat(), id)["uuid"], vm["uuid"]);

  // The tenant sees it pending until the agent reports, then what it reported.
  auto list = s.request("GET", vms(acme), nullptr, acme.admin_token);
  ASSERT_EQ(list.status, 200) << list.raw;
  ASSERT_EQ(list.body["items"].size(), 1u);
  EXPECT_EQ(list.body["items"][0]["state"], "pending");
  EXPECT_EQ(list.body["items"][0]["allocation_id"], id);
  const std::string vm_id = vm["id"];
  auto reported = heartbeat(
      {{{"domain", vm["domain"]}, {"state", "running"}, {"addresses", {"10.64.0.5/24"}}}});
  ASSERT_EQ(reported.status, 200) << reported.raw;
  Json got = get_vm(vm_id);
  EXPECT_EQ(got["state"], "running");
  EXPECT_EQ(got["addresses"], Json::array({"10.64.0.5/24"}));
  EXPECT_EQ(get_vm(vm["domain"])["id"], vm_id);  // by domain name too
  bool state_audited = false;
  for (const auto& rec : s.audit_records())
    if (rec.at("action") == "node.heartbeat" && rec.at("detail").contains("vms"))
      state_audited = rec.at("detail")["vms"][0]["to"] == "running";
  EXPECT_TRUE(state_audited);

  // Another tenant: nothing of acme's, by id or domain.
  EXPECT_TRUE(
      IsProblem(s.request("GET", vms(acme) + "/" + vm_id, nullptr, bravo.admin_token), 404));
  auto theirs = s.request("GET", vms(bravo), nullptr, bravo.admin_token);
  ASSERT_EQ(theirs.status, 200);
  EXPECT_TRUE(theirs.body["items"].empty());
  EXPECT_TRUE(IsProblem(s.request("GET", vms(bravo) + "/" + vm_id, nullptr, bravo.admin_token), 404,
                        "not_found"));
  EXPECT_TRUE(IsProblem(s.request("POST", vms(bravo) + "/" + vm_id + "/actions",
                                  {{"action", "stop"}}, bravo.admin_token),
                        404));
}

TEST_F(Vms, TheProjectsVolumesAreTheVmsSharesUntilTheyAreDeleted) {
  const std::string volumes = "/v1/tenants/" + acme.id + "/projects/" + acme_project + "/volumes";
  ASSERT_EQ(s.request("PUT", volumes, Json::object(), acme.admin_token).status, 200);
  const std::string id = allocate("h200-vm");
  Json vm = vm_of(heartbeat(), id);
  ASSERT_EQ(vm["volumes"].size(), 4u) << vm.dump();
  for (const auto& v : vm["volumes"])
    EXPECT_EQ(v["path"], "acme/training/" + v["tag"].get<std::string>()) << v.dump();
  EXPECT_EQ(vm["volumes"][0]["tag"], "datasets");
  // Scheduled for deletion: no longer handed to the VM.
  ASSERT_EQ(s.request("DELETE", volumes, nullptr, acme.admin_token).status, 202);
  EXPECT_TRUE(vm_of(heartbeat(), id)["volumes"].empty());
}

TEST_F(Vms, MigUnitsAreDeliveredAsTheirVgpuType) {
  const std::string id = allocate("h200-vm-3g");
  const Json vm = vm_of(heartbeat(), id);
  ASSERT_TRUE(vm.is_object());
  EXPECT_TRUE(vm["passthrough"].empty());
  ASSERT_EQ(vm["vgpus"].size(), 1u) << vm.dump();
  EXPECT_EQ(vm["vgpus"][0]["type"], "H200-3-71C");
  // The tenant's segment came with the tenant; one without a segment (created before segments
  // came with tenants) gets its VMs without one.
  EXPECT_EQ(vm["segment"],
            s.request("GET", "/v1/tenants/" + acme.id + "/network", nullptr, acme.admin_token)
                .body["segment"]);
  ASSERT_TRUE(s.store()
                  .write([&](store::Tx& tx) -> Result<void> {
                    GP_TRY(tx.exec("DELETE FROM tenant_segments WHERE tenant_id = ?", {acme.id}));
                    return ok();
                  })
                  .has_value());
  EXPECT_TRUE(vm_of(heartbeat(), id)["segment"].is_null());
}

TEST_F(Vms, PowerActionsAreAuditedAndCarriedToTheAgent) {
  const std::string id = allocate("h200-vm");
  const std::string vm_id = vm_of(heartbeat(), id)["id"];
  auto act = [&](const std::string& action) {
    return s.request("POST", vms(acme) + "/" + vm_id + "/actions", {{"action", action}},
                     acme.admin_token);
  };
  auto stopped = act("stop");
  ASSERT_EQ(stopped.status, 200) << stopped.raw;
  EXPECT_EQ(stopped.body["desired"], "stopped");
  EXPECT_EQ(vm_of(heartbeat(), id)["desired"], "stopped");
  EXPECT_TRUE(IsProblem(act("reboot"), 409, "conflict"));  // start it instead
  ASSERT_EQ(act("start").status, 200);
  auto rebooted = act("reboot");
  ASSERT_EQ(rebooted.status, 200) << rebooted.raw;
  EXPECT_EQ(rebooted.body["reboot_seq"], 1);
  const Json vm = vm_of(heartbeat(), id);
  EXPECT_EQ(vm["desired"], "running");
  EXPECT_EQ(vm["reboot_seq"], 1);
  EXPECT_EQ(audited("vm.action"), 3);

  // Bad input: refused with a reason, and the VM is unchanged.
  const int64_t version = get_vm(vm_id)["version"];
  EXPECT_TRUE(IsProblem(act("explode"), 400, "invalid_argument"));
  EXPECT_TRUE(IsProblem(s.request("POST", vms(acme) + "/" + vm_id + "/actions",
                                  {{"action", "stop"}, {"force", true}}, acme.admin_token),
                        400, "invalid_argument"));
  EXPECT_TRUE(IsProblem(s.request_raw("POST", vms(acme) + "/" + vm_id + "/actions",
                                      "{\"action\": ", acme.admin_token),
                        400));
  EXPECT_TRUE(IsProblem(
      s.request("POST", vms(acme) + "/vm_nope/actions", {{"action", "stop"}}, acme.admin_token),
      404, "not_found"));
  EXPECT_EQ(get_vm(vm_id)["version"], version);
  EXPECT_EQ(get_vm(vm_id)["desired"], "running");
}

TEST_F(Vms, TheConsoleIsReadThroughTheAgentAndEachReadIsAudited) {
  const std::string id = allocate("h200-vm");
  const Json vm = vm_of(heartbeat(), id);
  const std::string vm_id = vm["id"], domain = vm["domain"];
  EXPECT_EQ(vm["console_seq"], 0);
  const std::string console = vms(acme) + "/" + vm_id + "/console";
  auto asked = s.request("POST", console, nullptr, acme.admin_token);
  ASSERT_EQ(asked.status, 200) << asked.raw;
  EXPECT_EQ(asked.body["requested_seq"], 1);
  EXPECT_EQ(asked.body["current"], false);
  EXPECT_EQ(asked.body["text"], "");
  EXPECT_EQ(audited("vm.console"), 1);
  // The next heartbeat asks the agent; its answer is the tenant's to read.
  const Json again = vm_of(heartbeat(), id);
  EXPECT_EQ(again["console_seq"], 1);
  EXPECT_EQ(again["console_captured_seq"], 0);
  auto answered =
      heartbeat({{{"domain", domain},
                  {"state", "running"},
                  {"console", {{"seq", 1}, {"text", "Ubuntu 24.04 gp-vm ttyS0\nlogin: "}}}}});
  ASSERT_EQ(answered.status, 200) << answered.raw;
  auto read = s.request("GET", console, nullptr, acme.admin_token);
  ASSERT_EQ(read.status, 200) << read.raw;
  EXPECT_EQ(read.body["current"], true);
  EXPECT_EQ(read.body["captured_seq"], 1);
  EXPECT_EQ(read.body["text"], "Ubuntu 24.04 gp-vm ttyS0\nlogin: ");
  EXPECT_FALSE(read.body["captured_at"].is_null());
  EXPECT_EQ(vm_of(heartbeat(), id)["console_captured_seq"], 1);  // the agent stops sending
  // An answer to a request nobody made yet is not taken.
  ASSERT_EQ(heartbeat({{{"domain", domain},
                        {"state", "running"},
                        {"console", {{"seq", 9}, {"text", "forged"}}}}})
                .status,
            200);
  EXPECT_EQ(s.request("GET", console, nullptr, acme.admin_token).body["text"],
            "Ubuntu 24.04 gp-vm ttyS0\nlogin: ");
  // Another tenant can neither ask nor read.
  EXPECT_TRUE(IsProblem(s.request("POST", console, nullptr, bravo.admin_token), 404));
  EXPECT_TRUE(IsProblem(s.request("GET", console, nullptr, bravo.admin_token), 404));
  EXPECT_EQ(audited("vm.console"), 1);
}

TEST_F(Vms, MalformedReportsAreRefusedAndRecordNothing) {
  const std::string id = allocate("h200-vm");
  const std::string domain = vm_of(heartbeat(), id)["domain"];
  const std::string vm_id = vm_of(heartbeat(), id)["id"];
  const std::vector<Json> bad = {
      Json{{"domain", domain}, {"state", "exploded"}},
      Json{{"domain", domain}},
      Json{{"domain", domain}, {"state", "running"}, {"extra", 1}},
      Json{{"domain", domain}, {"state", "running"}, {"addresses", "10.0.0.1"}},
      Json{{"domain", domain},
           {"state", "running"},
           {"console", {{"seq", 1}, {"text", std::string(20000, 'x')}}}},
      Json{{"domain", domain}, {"state", "running"}, {"console", {{"seq", 0}, {"text", ""}}}},
      Json("running"),
  };
  for (const Json& report : bad) {
    auto r = heartbeat(Json::array({report}));
    EXPECT_TRUE(IsProblem(r, 400, "invalid_argument"))
        << report.dump().substr(0, 200) << " -> " << r.raw;
  }
  EXPECT_TRUE(IsProblem(heartbeat(Json::object()), 400));
  EXPECT_EQ(get_vm(vm_id)["state"], "pending");
  EXPECT_EQ(get_vm(vm_id)["version"], 1);
}

TEST_F(Vms, SshKeysAreCheckedAndOnlyTheTenantsOwn) {
  const std::string keys = "/v1/tenants/" + acme.id + "/ssh-keys";
  for (const Json& body :
       {Json{{"keys", {"ssh-ed25519 not-base64!"}}}, Json{{"keys", {"ssh-ed25519"}}},
        Json{{"keys", {std::string("command=\"sh\" ") + kKey}}}, Json{{"keys", {kKey, kKey}}},
        Json{{"keys", "one"}}, Json{{"keys", {kKey}}, {"more", 1}}, Json::object()}) {
    auto r = s.request("PUT", keys, body, acme.admin_token);
    EXPECT_TRUE(IsProblem(r, 400, "invalid_argument")) << body.dump() << " -> " << r.raw;
  }
  EXPECT_EQ(s.request("GET", keys, nullptr, acme.admin_token).body["keys"], Json::array());
  ASSERT_EQ(s.request("PUT", keys, {{"keys", {kKey}}}, acme.admin_token).status, 200);
  EXPECT_EQ(s.request("GET", keys, nullptr, acme.admin_token).body["keys"], Json::array({kKey}));
  EXPECT_TRUE(IsProblem(s.request("GET", keys, nullptr, bravo.admin_token), 404));
  EXPECT_TRUE(IsProblem(s.request("PUT", keys, {{"keys", Json::array()}}, bravo.admin_token), 404));
  // The audit record names the key by type and comment, never its blob.
  int stored = 0;
  for (const auto& rec : s.audit_records()) {
    if (rec.at("action") != "ssh_keys.set" || rec.at("outcome") != "success") continue;
    ++stored;
    EXPECT_EQ(rec.dump().find("AAAAC3NzaC1lZDI1NTE5"), std::string::npos) << rec.dump();
    EXPECT_NE(rec.dump().find("alice@laptop"), std::string::npos) << rec.dump();
  }
  EXPECT_EQ(stored, 1);
}

TEST_F(Vms, AReleasedAllocationsVmIsDestroyedOnceTheNodeNoLongerHoldsIt) {
  const std::string id = allocate("h200-vm");
  const Json vm = vm_of(heartbeat(), id);
  const std::string vm_id = vm["id"];
  ASSERT_EQ(heartbeat({{{"domain", vm["domain"]}, {"state", "running"}}}).status, 200);
  auto released = s.request(
      "POST",
      "/v1/tenants/" + acme.id + "/projects/" + acme_project + "/allocations/" + id + "/release",
      Json::object(), acme.admin_token);
  ASSERT_EQ(released.status, 200) << released.raw;
  // While the node still runs it, the node is told to stop it: an ACPI shutdown now, destroyed
  // once the grace period has passed.
  auto hb = heartbeat({{{"domain", vm["domain"]}, {"state", "running"}}}, Json::array({id}));
  EXPECT_EQ(vm_of(hb, id)["desired"], "stopped") << hb.raw;
  EXPECT_EQ(stop_of(hb, id)["grace_seconds"], 30) << hb.raw;
  EXPECT_EQ(get_vm(vm_id)["state"], "running");
  EXPECT_TRUE(IsProblem(s.request("POST", vms(acme) + "/" + vm_id + "/actions",
                                  {{"action", "start"}}, acme.admin_token),
                        409, "conflict"));
  // Shut off and no longer held: the node is no longer told of it; while it still reports the
  // domain, the VM is not destroyed.
  hb = heartbeat({{{"domain", vm["domain"]}, {"state", "shut-off"}}});
  EXPECT_TRUE(vm_of(hb, id).is_null()) << hb.raw;
  EXPECT_EQ(get_vm(vm_id)["state"], "shut-off");
  ASSERT_EQ(heartbeat(Json::array()).status, 200);
  EXPECT_EQ(get_vm(vm_id)["state"], "destroyed");
  EXPECT_TRUE(
      IsProblem(s.request("POST", vms(acme) + "/" + vm_id + "/console", nullptr, acme.admin_token),
                409, "conflict"));
}

TEST_F(Vms, OffboardingTheTenantDestroysItsVms) {
  const std::string id = allocate("h200-vm");
  const Json vm = vm_of(heartbeat(), id);
  ASSERT_EQ(heartbeat({{{"domain", vm["domain"]}, {"state", "running"}}}).status, 200);
  auto off = s.request("DELETE", "/v1/tenants/" + acme.id, nullptr, s.admin_token());
  ASSERT_EQ(off.status / 100, 2) << off.raw;
  auto hb = heartbeat(Json::array());
  ASSERT_EQ(hb.status, 200) << hb.raw;
  EXPECT_TRUE(vm_of(hb, id).is_null());
  auto list = s.request("GET", vms(acme), nullptr, s.admin_token());
  ASSERT_EQ(list.status, 200) << list.raw;
  ASSERT_EQ(list.body["items"].size(), 1u);
  EXPECT_EQ(list.body["items"][0]["state"], "destroyed");
}

}  // namespace
}  // namespace gp::it
