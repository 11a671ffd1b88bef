// Fleet: pools, join tokens, nodes and their lifecycle, GPUs, the fleet summary, inventory
// import, and the node agent's enrolment and heartbeat.
#include <fmt/format.h>

#include "alloc/alloc.h"
#include "api/router.h"
#include "common/crypto.h"
#include "fleet/fleet.h"
#include "jobs/records.h"
#include "metering/metering.h"
#include "network/network.h"

namespace gp::api {
namespace {

using iam::Permission;

Result<Mutation> create_pool(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "pool");
  std::string name = r.string("name", 63);
  auto tenant = r.optional_string("tenant", 64);
  std::string description = r.optional_string("description", 500).value_or("");
  GP_TRY_VOID(r.finish());
  std::optional<std::string> tenant_id;
  if (tenant) {
    auto t = GP_TRY(found(tenancy::find_tenant(tx, *tenant), "tenant"));
    tenant_id = t.id;
  }
  auto p = GP_TRY(fleet::create_pool(tx, api.env(), name, tenant_id, description));
  Mutation m;
  m.reply = json_reply(201, p.to_json(), p.version);
  m.resource = "/v1/pools/" + p.id;
  m.tenant_id = tenant_id;
  m.detail = {{"name", p.name}, {"kind", p.kind()}};
  return m;
}

Result<Mutation> create_join_token(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "join token");
  auto pool = r.optional_string("pool", 64);
  int64_t ttl = r.optional_integer("ttl_seconds", 60, 7 * 86400).value_or(3600);
  GP_TRY_VOID(r.finish());
  std::optional<std::string> pool_id;
  if (pool) pool_id = GP_TRY(found(fleet::find_pool(tx, *pool), "pool")).id;
  auto t = GP_TRY(
      fleet::create_join_token(tx, api.env(), pool_id, call.who.id, std::chrono::seconds(ttl)));
  Mutation m;
  m.reply = json_reply(201, t.to_json());
  m.resource = "/v1/join-tokens/" + t.id;
  m.detail = {{"pool_id", pool_id ? Json(*pool_id) : Json(nullptr)}, {"ttl_seconds", ttl}};
  return m;
}

Json node_with_gpus(const fleet::Node& n, const std::vector<fleet::Gpu>& gpus) {
  Json j = n.to_json();
  Json g = Json::array();
  for (const auto& x : gpus) g.push_back(x.to_json());
  j["gpus"] = g;
  return j;
}

Result<Reply> get_node(Api&, Call& call, store::Tx& tx) {
  auto n = GP_TRY(found(fleet::find_node(tx, call.param("node")), "node"));
  auto gpus = GP_TRY(fleet::list_gpus(tx, n.id));
  return json_reply(200, node_with_gpus(n, gpus), n.version);
}

Result<Reply> list_nodes(Api& api, Call& call, store::Tx& tx) {
  auto page = GP_TRY(page_request(api, call));
  std::optional<fleet::NodeState> state;
  if (auto s = call.req.query.find("state"); s != call.req.query.end()) {
    state = fleet::parse_node_state(s->second);
    if (!state) return fail(Error::invalid("unknown node state"));
  }
  auto p = GP_TRY(fleet::list_nodes(tx, page, state));
  return json_reply(200, page_json(p, [](const auto& n) { return n.to_json(); }));
}

// POST /v1/nodes/{node}/<verb>: lifecycle actions and cordon.
MutationHandler node_verb(const std::string& verb) {
  return [verb](Api& api, Call& call, store::Tx& tx) -> Result<Mutation> {
    auto r = body_reader(call, "node action");
    std::string reason = r.optional_string("reason", 500).value_or("");
    // drain: what still runs this long after is evicted (preempted, with the grace period).
    auto deadline = r.optional_integer("deadline_seconds", 1, 30 * 86400);
    if (deadline && verb != "drain") r.reject("deadline_seconds", "is for a drain only");
    GP_TRY_VOID(r.finish());
    auto n = GP_TRY(found(fleet::find_node(tx, call.param("node")), "node"));
    fleet::Node out;
    if (verb == "cordon" || verb == "uncordon") {
      out = GP_TRY(fleet::set_cordoned(tx, api.env(), n.id, verb == "cordon"));
    } else {
      auto action = fleet::parse_node_action(verb);
      std::optional<int64_t> until;
      if (deadline) until = api.env().now() + *deadline * 1'000'000;
      out = GP_TRY(fleet::apply_action(tx, api.env(), n.id, *action,
                                       reason.empty() ? "operator: " + verb : reason, until));
      // Nothing on the node: the drain completes now rather than at the next tick.
      if (out.state == fleet::NodeState::kDraining &&
          GP_TRY(api.allocs().complete_drains(tx, api.env())) > 0)
        out = GP_TRY(found(fleet::find_node(tx, n.id), "node"));
    }
    // A failed or retired node takes its allocations down with it; drained and cordoned nodes
    // keep theirs and take no more.
    int failed = 0;
    if (out.state == fleet::NodeState::kFailed || out.state == fleet::NodeState::kRetired)
      failed = GP_TRY(api.allocs().node_failed(
          tx, api.env(), n.id,
          fmt::format("node {} {}: {}", n.info.name, fleet::node_state_name(out.state),
                      reason.empty() ? "operator: " + verb : reason)));
    api.allocs().invalidate();
    Mutation m;
    m.reply = json_reply(200, out.to_json(), out.version);
    m.resource = "/v1/nodes/" + n.id;
    m.detail = {{"node", n.info.name},
                {"from", fleet::node_state_name(n.state)},
                {"to", fleet::node_state_name(out.state)},
                {"reason", reason}};
    if (deadline) m.detail["deadline_seconds"] = *deadline;
    if (failed) m.detail["allocations_failed"] = failed;
    return m;
  };
}

Result<Mutation> import_inventory(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "import");
  const Json* nodes = r.optional_array("nodes");
  auto pool = r.optional_string("pool", 64);
  if (!nodes) r.reject("nodes", "is required");
  GP_TRY_VOID(r.finish());
  if (nodes->size() > 5000) return fail(Error::invalid("at most 5000 nodes per import"));
  std::optional<std::string> pool_id;
  if (pool) pool_id = GP_TRY(found(fleet::find_pool(tx, *pool), "pool")).id;
  Json created = Json::array();
  for (size_t i = 0; i < nodes->size(); ++i) {
    ObjectReader nr((*nodes)[i], fmt::format("nodes[{}]", i));
    const Json* inv = nr.optional_object("inventory");
    bool ready = nr.optional_bool("ready").value_or(true);
    if (!inv) nr.reject("inventory", "is required");
    GP_TRY_VOID(nr.finish());
    auto parsed = fleet::parse_inventory(*inv);
    if (!parsed)
      return fail(Error::invalid(fmt::format("nodes[{}]: {}", i, parsed.error().message)));
    auto n = GP_TRY(fleet::import_node(tx, api.env(), *parsed, pool_id, ready));
    created.push_back(n.to_json());
  }
  api.allocs().invalidate();
  Mutation m;
  m.reply = json_reply(201, {{"items", created}, {"next", nullptr}});
  m.detail = {{"nodes", created.size()}};
  return m;
}

constexpr size_t kMaxCsrBytes = 16 * 1024;

// Signs a node's certificate request with the node CA and records the certificate: the agent's
// client identity for mTLS, valid from a few minutes ago (clock skew) for the configured TTL.
Result<Json> issue_node_certificate(Api& api, store::Tx& tx, const std::string& node_id,
                                    const std::string& csr) {
  const auto& pki = api.isolation().node_pki;
  if (!pki)
    return fail(Error::invalid(
        "csr: this control plane issues no node certificates (it does not serve TLS)"));
  const auto now = std::chrono::floor<std::chrono::seconds>(api.clock().now());
  const auto ttl = std::chrono::duration_cast<std::chrono::seconds>(pki->cert_ttl);
  // Backdated for clocks that lag ours: five minutes, or a quarter of a short lifetime.
  const auto from = now - std::min<std::chrono::seconds>(std::chrono::minutes(5), ttl / 4);
  const uint64_t serial = tls::random_serial(api.random());
  std::string pem = GP_TRY(tls::sign_client_csr(
      pki->ca, csr, {.common_name = node_id, .not_before = from, .validity = now + ttl - from},
      serial));
  fleet::NodeCertificate record{.serial = std::to_string(serial),
                                .node_id = node_id,
                                .not_before = to_unix_micros(from),
                                .not_after = to_unix_micros(now + ttl)};
  GP_TRY_VOID(fleet::record_certificate(tx, api.env(), record));
  return Json{{"pem", pem},
              {"serial", record.serial},
              {"not_after", format_rfc3339(now + ttl)},
              {"ca", pki->ca.cert_pem}};
}

Result<Mutation> enroll(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "enrolment");
  std::string token = r.string("join_token", 128);
  const Json* inv = r.optional_object("inventory");
  if (!inv) r.reject("inventory", "is required");
  auto csr = r.optional_string("csr", kMaxCsrBytes);
  GP_TRY_VOID(r.finish());
  const auto& pki = api.isolation().node_pki;
  if (!csr && pki && pki->required)
    return fail(Error::invalid(
        "csr: this control plane requires node client certificates (mTLS); send a certificate "
        "request with the enrolment (gpuplane agent does)"));
  auto inventory = GP_TRY(fleet::parse_inventory(*inv));
  auto e = GP_TRY(fleet::enroll(tx, api.env(), token, inventory));
  auto gpus = GP_TRY(fleet::list_gpus(tx, e.node.id));
  Json reply = {{"node", node_with_gpus(e.node, gpus)}, {"credential", e.credential}};
  if (csr) reply["certificate"] = GP_TRY(issue_node_certificate(api, tx, e.node.id, *csr));
  api.allocs().invalidate();
  Mutation m;
  m.reply = json_reply(201, reply);
  m.resource = "/v1/nodes/" + e.node.id;
  m.actor = e.node.id;
  m.detail = {{"node", e.node.info.name}, {"gpus", gpus.size()}};
  if (csr) m.detail["certificate"] = reply["certificate"]["serial"];
  return m;
}

// POST /v1/agent/certificate: an agent renews its client certificate before it runs out.
Result<Mutation> renew_certificate(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "certificate request");
  std::string csr = r.string("csr", kMaxCsrBytes);
  GP_TRY_VOID(r.finish());
  Json cert = GP_TRY(issue_node_certificate(api, tx, call.who.id, csr));
  Mutation m;
  m.reply = json_reply(201, cert);
  m.resource = "/v1/nodes/" + call.who.id + "/certificates/" + cert["serial"].get<std::string>();
  m.detail = {{"serial", cert["serial"]}, {"not_after", cert["not_after"]}};
  return m;
}

// POST /v1/nodes/{node}/revoke: cuts a node's agent off at its next call.
Result<Mutation> revoke_node(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "node revocation");
  std::string reason = r.optional_string("reason", 500).value_or("");
  GP_TRY_VOID(r.finish());
  auto n = GP_TRY(found(fleet::find_node(tx, call.param("node")), "node"));
  if (reason.empty()) reason = "operator: revoke";
  int revoked = GP_TRY(fleet::revoke_node(tx, api.env(), n.id, reason));
  Mutation m;
  m.reply = json_reply(200, {{"node", n.to_json()}, {"certificates_revoked", revoked}});
  m.resource = "/v1/nodes/" + n.id;
  m.detail = {{"node", n.info.name}, {"certificates_revoked", revoked}, {"reason", reason}};
  return m;
}

// The node's GPU named in the path, by UUID or index.
Result<fleet::Gpu> path_gpu(Call& call, store::Tx& tx, const std::string& node_id) {
  for (auto& g : GP_TRY(fleet::list_gpus(tx, node_id)))
    if (g.info.uuid == call.param("gpu") || std::to_string(g.info.index) == call.param("gpu"))
      return std::move(g);
  return fail(Error::not_found("GPU not found on this node"));
}

// POST /v1/nodes/{node}/gpus/{gpu}/repair: out of service until a clean health report.
Result<Mutation> repair_gpu(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "GPU repair");
  std::string reason = r.optional_string("reason", 500).value_or("operator: repair");
  GP_TRY_VOID(r.finish());
  auto n = GP_TRY(found(fleet::find_node(tx, call.param("node")), "node"));
  const fleet::Gpu before = GP_TRY(path_gpu(call, tx, n.id));
  auto g = GP_TRY(fleet::start_repair(tx, api.env(), n.id, before.info.uuid, reason, call.who.id));
  api.allocs().invalidate();  // the scheduler no longer places on it
  Mutation m;
  Json out = g.to_json();
  out["repair"] = GP_TRY(fleet::find_repair(tx, g.info.uuid))->to_json();
  m.reply = json_reply(200, out);
  m.resource = "/v1/nodes/" + n.id + "/gpus/" + g.info.uuid;
  m.detail = {
      {"node", n.info.name}, {"gpu", g.info.uuid}, {"from", before.health}, {"reason", reason}};
  return m;
}

// GET /v1/nodes/{node}/gpus/{gpu}/health: the GPU's health, repair and history.
Result<Reply> gpu_health(Api&, Call& call, store::Tx& tx) {
  auto n = GP_TRY(found(fleet::find_node(tx, call.param("node")), "node"));
  const fleet::Gpu g = GP_TRY(path_gpu(call, tx, n.id));
  auto repair = GP_TRY(fleet::find_repair(tx, g.info.uuid));
  return json_reply(200, {{"gpu", g.info.uuid},
                          {"node_id", n.id},
                          {"index", g.info.index},
                          {"health", g.health},
                          {"health_reason", g.health_reason},
                          {"repair", repair ? repair->to_json() : Json(nullptr)},
                          {"events", GP_TRY(fleet::gpu_history(tx, g.info.uuid))}});
}

Result<Reply> list_node_certificates(Api&, Call& call, store::Tx& tx) {
  auto n = GP_TRY(found(fleet::find_node(tx, call.param("node")), "node"));
  Json items = Json::array();
  for (const auto& c : GP_TRY(fleet::list_certificates(tx, n.id))) items.push_back(c.to_json());
  return json_reply(200, {{"items", items}, {"next", nullptr}});
}

// A digest of what a node is assigned: its live allocations and states, and its job members as
// jobs::node_assignment describes them (secrets by name). The heartbeat's answer carries it,
// and the agent waits on GET /v1/agent/changes until it differs.
std::string assignment_etag(const Json& allocations, const Json& jobs) {
  return hex_encode(sha256(Json{{"allocations", allocations}, {"jobs", jobs}}.dump()))
      .substr(0, 32);
}

// GET /v1/agent/changes?since=E&wait=S: the node's assignment digest, and whether it differs
// from E; with `wait`, a request that finds it unchanged is held (holds.h) until the node's
// assignment may have changed or S seconds have passed.
Result<Reply> agent_changes(Api& api, Call& call) {
  const auto until = GP_TRY(hold_deadline(call));
  auto it = call.req.query.find("since");
  const std::string since = it == call.req.query.end() ? "" : it->second;
  // Taken before the read, so that nothing announced in between is missed.
  auto watch = until ? api.holds().watch("node:" + call.who.id) : nullptr;
  std::string etag;
  GP_TRY_VOID(api.store().read([&](store::Tx& tx) -> Result<void> {
    etag = assignment_etag(GP_TRY(alloc::node_allocation_states(tx, call.who.id)),
                           GP_TRY(jobs::node_assignment(tx, call.who.id)));
    return ok();
  }));
  Reply r = json_reply(200, {{"etag", etag}, {"changed", etag != since}});
  if (etag == since && until) r.hold = Hold{std::move(watch), *until};
  return r;
}

Result<Mutation> agent_heartbeat(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "heartbeat");
  const Json* inv = r.optional_object("inventory");
  const Json* samples = r.optional_array("samples");
  const Json* vms = r.optional_array("vms");
  const Json* job_reports = r.optional_array("jobs");
  // The allocations whose work (job containers, VMs) the node still runs; absent while the
  // agent does not know yet (it has just started), which leaves every stop in place.
  auto holding = r.optional_string_array("holding", 4096, 64);
  // What became of the node's GPU plans (alloc.h): applied, waiting, or refused by the GPU.
  const Json* mig = r.optional_array("mig");
  auto underlay = r.optional_string("underlay_address", 15);
  // In place of an inventory: the digest this server said it holds (its last answer's
  // inventory_digest), while the node's inventory has not changed since.
  auto held = r.optional_string("inventory_digest", 64);
  GP_TRY_VOID(r.finish());
  if (inv && held)
    return fail(Error::invalid("send either 'inventory' or 'inventory_digest', not both"));
  if (underlay) {
    auto parsed = network::parse_ipv4(*underlay);
    if (!parsed) return fail(Error::invalid("field 'underlay_address': " + parsed.error().message));
  }
  auto w = api.env();
  Json detail = Json::object();
  if (job_reports) {
    auto reports = GP_TRY(jobs::parse_reports(*job_reports));
    if (Json changes = GP_TRY(jobs::apply_reports(tx, w, api.allocs(), call.who.id, reports));
        !changes.empty())
      detail["jobs"] = std::move(changes);
  }
  if (holding)
    if (Json ended = GP_TRY(alloc::end_stops(tx, w, call.who.id, *holding)); !ended.empty())
      detail["stopped"] = std::move(ended);
  if (vms) {
    // Checked before anything is recorded, so a malformed report changes nothing.
    auto reports = GP_TRY(alloc::parse_vm_reports(*vms));
    if (Json changes = GP_TRY(alloc::apply_vm_reports(tx, w, call.who.id, reports));
        !changes.empty())
      detail["vms"] = std::move(changes);
  }
  // An inventory the node reported before, applied lately, is not applied again: most
  // heartbeats repeat it (the same JSON was checked when it was first applied), and an agent
  // that was told the digest names it instead of sending the inventory.
  std::optional<std::string> holds;  // the digest of the inventory applied, once this is done
  const std::string inventory_digest = inv ? hex_encode(sha256(inv->dump())) : "";
  if (held && GP_TRY(fleet::inventory_unchanged(tx, w, call.who.id, *held))) holds = *held;
  if (inv) holds = inventory_digest;
  if (inv && !GP_TRY(fleet::inventory_unchanged(tx, w, call.who.id, inventory_digest))) {
    auto inventory = GP_TRY(fleet::parse_inventory(*inv));
    auto before = GP_TRY(fleet::list_gpus(tx, call.who.id));
    GP_TRY_VOID(fleet::apply_inventory(tx, w, call.who.id, inventory));
    GP_TRY_VOID(fleet::record_inventory_digest(tx, w, call.who.id, inventory_digest));
    auto after = GP_TRY(fleet::list_gpus(tx, call.who.id));
    // Health changes are what the audit trail must show; routine heartbeats carry no detail.
    Json changes = Json::array();
    for (const auto& g : after) {
      auto it = std::find_if(before.begin(), before.end(),
                             [&](const auto& b) { return b.info.uuid == g.info.uuid; });
      if (it == before.end() || it->health != g.health)
        changes.push_back(
            {{"gpu", g.info.uuid}, {"health", g.health}, {"reason", g.health_reason}});
    }
    if (!changes.empty()) detail["gpu_health"] = changes;
  }
  if (mig) {
    auto reports = GP_TRY(alloc::parse_mig_reports(*mig));
    if (Json changes = GP_TRY(api.allocs().record_mig_reports(tx, w, call.who.id, reports));
        !changes.empty())
      detail["mig"] = std::move(changes);
  }
  if (samples) {
    auto parsed = GP_TRY(fleet::parse_samples(*samples, w));
    detail["samples"] = GP_TRY(fleet::record_samples(tx, call.who.id, parsed));
  }
  auto n = GP_TRY(fleet::heartbeat(tx, w, call.who.id));
  if (underlay) GP_TRY_VOID(fleet::record_underlay_address(tx, call.who.id, *underlay));
  // Health or state changes reshape what the scheduler may use.
  if (detail.contains("gpu_health") || n.state_reason == "heartbeats resumed")
    api.allocs().invalidate();
  Json assignments = GP_TRY(api.allocs().acknowledge(tx, w, call.who.id));
  assignments["jobs"] = GP_TRY(jobs::node_assignment(tx, call.who.id));
  assignments["gpu_repairs"] = GP_TRY(fleet::node_repairs(tx, call.who.id));
  const std::string etag =
      assignment_etag(GP_TRY(alloc::node_allocation_states(tx, call.who.id)), assignments["jobs"]);
  // The secrets a member mounts travel to its node opened, over the node's own connection.
  for (auto& member : assignments["jobs"]) {
    Json opened = Json::array();
    for (const auto& name : member["secrets"])
      opened.push_back({{"name", name},
                        {"value", GP_TRY(open_tenant_secret(api, tx, member["tenant_id"],
                                                            name.get<std::string>()))}});
    member["secrets"] = std::move(opened);
  }
  Mutation m;
  m.reply = json_reply(
      200, {{"node", n.to_json()},
            {"assignments", assignments},
            {"assignments_etag", etag},
            // null: the next heartbeat must carry the inventory (it is due again, or the
            // digest named was not the one held).
            {"inventory_digest", holds ? Json(*holds) : Json(nullptr)},
            {"heartbeat_seconds", 10},
            {"node_timeout_seconds",
             std::chrono::duration_cast<std::chrono::seconds>(api.limits().node_timeout).count()}});
  m.resource = "/v1/nodes/" + n.id;
  m.audited = detail.contains("gpu_health") || detail.contains("vms") || detail.contains("jobs") ||
              detail.contains("stopped") || detail.contains("mig") ||
              n.state_reason == "heartbeats resumed";
  m.detail = detail;
  return m;
}

// Who holds what, for the fleet map: the GPUs of every placed or active allocation, by GPU
// UUID, under its tenant's name.
Result<std::map<std::string, std::vector<fleet::GpuHold>>> gpu_holds(store::Tx& tx) {
  std::map<std::string, std::vector<fleet::GpuHold>> holds;
  const auto names = GP_TRY(tenancy::tenant_names(tx));
  for (const auto& live : GP_TRY(alloc::live_placements(tx))) {
    const auto name = names.find(live.tenant_id);
    const std::string& holder = name == names.end() ? live.tenant_id : name->second;
    for (const auto& g : live.placement.value("gpus", Json::array())) {
      fleet::GpuHold h{.holder = holder, .mig = std::nullopt, .milli = g.value("milli", 0)};
      if (g.contains("mig"))
        h.mig = vocab::PlacedInstance{g["mig"].value("profile", ""), g["mig"].value("start", 0)};
      holds[g.value("gpu", "")].push_back(std::move(h));
    }
  }
  return holds;
}

}  // namespace

Result<void> Api::housekeeping(Duration node_timeout, bool checkpoint) {
  auto r = store().write([&](store::Tx& tx) -> Result<void> {
    auto failed = GP_TRY(fleet::sweep_missed_heartbeats(tx, env(), node_timeout));
    for (const auto& n : failed) {
      const int lost = GP_TRY(allocs().node_failed(
          tx, env(), n.id, fmt::format("node {} failed: missed heartbeats", n.info.name)));
      audit::Entry e{
          "system",
          "",
          "node.fail",
          "/v1/nodes/" + n.id,
          "success",
          "housekeeping",
          "local",
          {{"node", n.info.name}, {"reason", "missed heartbeats"}, {"allocations_failed", lost}}};
      GP_TRY_VOID(audit().append(tx, e));
    }
    GP_TRY(allocs().tick(tx, env()));
    GP_TRY(jobs::sync(tx, env(), allocs()));
    if (checkpoint) GP_TRY_VOID(audit().checkpoint(tx));
    refresh_usage_gauges(*this, tx);
    return ok();
  });
  if (!r) allocs().invalidate();  // whatever the scheduler did in memory was rolled back
  return r;
}

std::vector<Route> fleet_routes() {
  std::vector<Route> r;
  r.push_back({.method = "POST",
               .pattern = "/v1/pools",
               .action = "pool.create",
               .permission = Permission::kFleetWrite,
               .mutation = true,
               .handler = write_tx(create_pool),
               .summary = "Create a node pool; with `tenant`, dedicated to that tenant.",
               .request_schema = "PoolCreate",
               .response_schema = "Pool",
               .success_status = 201});
  r.push_back({.method = "GET",
               .pattern = "/v1/pools",
               .action = "pool.list",
               .permission = Permission::kFleetRead,
               .handler = read_tx([](Api&, Call&, store::Tx& tx) -> Result<Reply> {
                 Json items = Json::array();
                 for (const auto& p : GP_TRY(fleet::list_pools(tx))) items.push_back(p.to_json());
                 return json_reply(200, {{"items", items}, {"next", nullptr}});
               }),
               .summary = "Node pools.",
               .response_schema = "Pool[]"});
  r.push_back({.method = "GET",
               .pattern = "/v1/pools/{pool}",
               .action = "pool.get",
               .permission = Permission::kFleetRead,
               .handler = read_tx([](Api&, Call& call, store::Tx& tx) -> Result<Reply> {
                 auto p = GP_TRY(found(fleet::find_pool(tx, call.param("pool")), "pool"));
                 return json_reply(200, p.to_json(), p.version);
               }),
               .summary = "One pool.",
               .response_schema = "Pool"});
  r.push_back({.method = "DELETE",
               .pattern = "/v1/pools/{pool}",
               .action = "pool.delete",
               .permission = Permission::kFleetWrite,
               .mutation = true,
               .handler = write_tx([](Api&, Call& call, store::Tx& tx) -> Result<Mutation> {
                 auto p = GP_TRY(found(fleet::find_pool(tx, call.param("pool")), "pool"));
                 GP_TRY_VOID(fleet::delete_pool(tx, p.id));
                 Mutation m;
                 m.reply.status = 204;
                 m.detail = {{"name", p.name}};
                 return m;
               }),
               .summary = "Delete an empty pool.",
               .success_status = 204});
  r.push_back({.method = "POST",
               .pattern = "/v1/join-tokens",
               .action = "join_token.create",
               .permission = Permission::kFleetWrite,
               .mutation = true,
               .handler = write_tx(create_join_token),
               .summary = "A one-time token a node agent enrols with (shown once).",
               .request_schema = "JoinTokenCreate",
               .response_schema = "JoinToken",
               .success_status = 201});
  r.push_back({.method = "GET",
               .pattern = "/v1/nodes",
               .action = "node.list",
               .permission = Permission::kFleetRead,
               .handler = read_tx(list_nodes),
               .query_params = {"limit", "after", "state"},
               .summary = "Nodes.",
               .response_schema = "Node[]"});
  r.push_back({.method = "GET",
               .pattern = "/v1/nodes/{node}",
               .action = "node.get",
               .permission = Permission::kFleetRead,
               .handler = read_tx(get_node),
               .summary = "One node with its GPUs.",
               .response_schema = "Node"});
  for (std::string verb :
       {"drain", "maintenance", "resume", "fail", "retire", "cordon", "uncordon"})
    r.push_back({.method = "POST",
                 .pattern = "/v1/nodes/{node}/" + verb,
                 .action = "node." + verb,
                 .permission = Permission::kFleetWrite,
                 .mutation = true,
                 .handler = write_tx(node_verb(verb)),
                 .summary = "Node lifecycle: " + verb + ".",
                 .request_schema = "NodeAction",
                 .response_schema = "Node"});
  r.push_back({.method = "POST",
               .pattern = "/v1/nodes/{node}/revoke",
               .action = "node.revoke",
               .permission = Permission::kFleetWrite,
               .mutation = true,
               .handler = write_tx(revoke_node),
               .summary = "Revoke the node's certificates and credential: its agent is refused "
                          "from its next call on.",
               .request_schema = "NodeAction",
               .response_schema = "NodeRevoked"});
  r.push_back({.method = "GET",
               .pattern = "/v1/nodes/{node}/certificates",
               .action = "node.certificates",
               .permission = Permission::kFleetRead,
               .handler = read_tx(list_node_certificates),
               .summary = "Client certificates issued to the node's agent, newest first.",
               .response_schema = "NodeCertificate[]"});
  r.push_back({.method = "POST",
               .pattern = "/v1/nodes/{node}/gpus/{gpu}/repair",
               .action = "gpu.repair",
               .permission = Permission::kFleetWrite,
               .mutation = true,
               .handler = write_tx(repair_gpu),
               .summary = "Take a GPU ({gpu}: UUID or index) out of service for repair; it is "
                          "back in service once a health report of its node after this is clean.",
               .request_schema = "NodeAction",
               .response_schema = "GpuInRepair"});
  r.push_back({.method = "GET",
               .pattern = "/v1/nodes/{node}/gpus/{gpu}/health",
               .action = "gpu.health",
               .permission = Permission::kFleetRead,
               .handler = read_tx(gpu_health),
               .summary = "A GPU's health, its repair if any, and its history: every XID and "
                          "uncorrected-ECC change its node reported, each repair and return.",
               .response_schema = "GpuHealth"});
  r.push_back({.method = "GET",
               .pattern = "/v1/gpus",
               .action = "gpu.list",
               .permission = Permission::kFleetRead,
               .handler = read_tx([](Api&, Call& call, store::Tx& tx) -> Result<Reply> {
                 std::optional<std::string> node;
                 if (auto n = call.req.query.find("node"); n != call.req.query.end()) {
                   auto found_node = GP_TRY(found(fleet::find_node(tx, n->second), "node"));
                   node = found_node.id;
                 }
                 Json items = Json::array();
                 for (const auto& g : GP_TRY(fleet::list_gpus(tx, node)))
                   items.push_back(g.to_json());
                 return json_reply(200, {{"items", items}, {"next", nullptr}});
               }),
               .query_params = {"node"},
               .summary = "GPUs of the fleet (or of one node).",
               .response_schema = "Gpu[]"});
  r.push_back({.method = "GET",
               .pattern = "/v1/fleet/summary",
               .action = "fleet.summary",
               .permission = Permission::kFleetRead,
               .handler = read_tx([](Api&, Call&, store::Tx& tx) -> Result<Reply> {
                 return json_reply(200,
                                   GP_TRY(fleet::summary(tx, GP_TRY(metering::held_gpus(tx)))));
               }),
               .summary = "GPUs by model, mode and health; nodes by state.",
               .response_schema = "FleetSummary"});
  r.push_back({.method = "GET",
               .pattern = "/v1/fleet/map.svg",
               .action = "fleet.map",
               .permission = Permission::kFleetRead,
               .handler = read_tx([](Api&, Call&, store::Tx& tx) -> Result<Reply> {
                 auto holds = GP_TRY(gpu_holds(tx));
                 std::vector<std::pair<fleet::Node, std::vector<fleet::Gpu>>> rows;
                 const auto list = [&](const PageRequest& page) {
                   return fleet::list_nodes(tx, page, std::nullopt);
                 };
                 for (auto& n : GP_TRY(all_pages(list, 1000))) {
                   if (n.state == fleet::NodeState::kRetired) continue;
                   auto gpus = GP_TRY(fleet::list_gpus(tx, n.id));
                   rows.emplace_back(std::move(n), std::move(gpus));
                 }
                 std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
                   return a.first.info.name < b.first.info.name;
                 });
                 Reply reply;
                 reply.raw = fleet::fleet_map_svg(rows, holds);
                 reply.content_type = "image/svg+xml";
                 return reply;
               }),
               .summary = "The fleet drawn as SVG: nodes, GPUs, health, MIG slices, and who "
                          "holds each GPU or instance (a colour per tenant, with a legend)."});
  r.push_back({.method = "POST",
               .pattern = "/v1/fleet/import",
               .action = "fleet.import",
               .permission = Permission::kFleetWrite,
               .mutation = true,
               .handler = write_tx(import_inventory),
               .summary = "Register nodes from another inventory (Kubernetes), all or nothing.",
               .request_schema = "FleetImport",
               .response_schema = "Node[]",
               .success_status = 201});
  r.push_back({.method = "POST",
               .pattern = "/v1/agent/enroll",
               .action = "node.enroll",
               .access = Access::kPublic,
               .mutation = true,
               .handler = write_tx(enroll),
               .summary = "A node agent enrols with a join token; returns its credential once.",
               .request_schema = "Enrollment",
               .response_schema = "Enrolled",
               .success_status = 201});
  r.push_back({.method = "POST",
               .pattern = "/v1/agent/certificate",
               .action = "node.certificate.renew",
               .access = Access::kNode,
               .mutation = true,
               .handler = write_tx(renew_certificate),
               .summary = "A node agent renews its client certificate with a new key.",
               .request_schema = "CertificateRequest",
               .response_schema = "IssuedCertificate",
               .success_status = 201});
  r.push_back({.method = "GET",
               .pattern = "/v1/agent/changes",
               .action = "node.changes",
               .access = Access::kNode,
               .handler = agent_changes,
               .query_params = {"since", "wait"},
               .summary = "A node agent waits for its assignment to change: the digest of what "
                          "it is assigned, held up to `wait` seconds while it equals `since`.",
               .response_schema = "AssignmentChanges"});
  r.push_back({.method = "POST",
               .pattern = "/v1/agent/heartbeat",
               .action = "node.heartbeat",
               .access = Access::kNode,
               .mutation = true,
               .inline_write = true,
               .handler = write_tx(agent_heartbeat),
               .summary = "A node agent's heartbeat with its inventory, health and samples.",
               .request_schema = "Heartbeat",
               .response_schema = "HeartbeatReply"});
  return r;
}

}  // namespace gp::api
