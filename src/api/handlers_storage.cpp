// Tenant storage volumes (a uid/gid range per tenant, a directory tree per project, optional
// size limits), the deletions offboarding and volume removal schedule after a grace period,
// and the node agent's side: its assignment (everything a node enforces: tenant segments and
// policies, volume plans, the deletions due for it), the tenants whose trees it holds, and its
// confirmation of a deletion. The rules live in gp_storage and gp_network, the rows in
// gp_storage_records (storage/records.h); this file is the HTTP side.
#include <fmt/format.h>

#include <algorithm>

#include "api/network_state.h"
#include "api/router.h"
#include "common/crypto.h"
#include "fleet/fleet.h"
#include "storage/records.h"

namespace gp::api {
namespace {

using iam::Permission;

// ---- JSON ----

Json ids_json(const storage::IdRange& r) {
  return {{"first", r.first}, {"last", r.last()}, {"count", r.count}};
}

Json dir_json(const storage::PlannedDir& d) {
  Json j = {{"path", d.path},
            {"uid", d.uid},
            {"gid", d.gid},
            {"mode", fmt::format("{:04o}", static_cast<unsigned>(d.mode))}};
  if (d.size_limit) {
    j["size_limit"] = *d.size_limit;
    j["quota_project"] = d.quota_project;
  }
  return j;
}

Json deletion_json(const storage::Deletion& d) { return json_of_fields(d); }

// ---- Who confirms a deletion ----

// The nodes that must confirm a deletion of the tenant's trees: every node recorded as holding
// them, but retired ones (a retired node runs nothing any more). Empty when none is recorded
// (trees made by agents that did not record holdings yet): any node's confirmation then does.
Result<std::vector<std::string>> required_confirmers(store::Tx& tx, const std::string& tenant_id) {
  std::vector<std::string> out;
  for (auto& node : GP_TRY(storage::holders(tx, tenant_id))) {
    auto n = GP_TRY(fleet::find_node(tx, node));
    if (n && n->state == fleet::NodeState::kRetired) continue;
    out.push_back(std::move(node));
  }
  return out;
}

bool confirmed_by(const std::vector<storage::Confirmation>& confirmed, const std::string& node) {
  return std::any_of(confirmed.begin(), confirmed.end(),
                     [&](const storage::Confirmation& c) { return c.node_id == node; });
}

// Every required node has confirmed (and at least one node has).
bool all_confirmed(const std::vector<std::string>& required,
                   const std::vector<storage::Confirmation>& confirmed) {
  return !confirmed.empty() && std::all_of(required.begin(), required.end(), [&](const auto& n) {
    return confirmed_by(confirmed, n);
  });
}

Json confirmations_json(const std::vector<storage::Confirmation>& confirmed) {
  Json out = Json::array();
  for (const auto& c : confirmed)
    out.push_back({{"node", c.node_id},
                   {"outcome", c.outcome},
                   {"detail", c.detail},
                   {"at", format_rfc3339(from_unix_micros(c.at))}});
  return out;
}

// The deletion as operators see it: with each node's confirmation and the nodes still awaited.
Result<Json> fleet_deletion_json(store::Tx& tx, const storage::Deletion& d) {
  Json j = deletion_json(d);
  auto confirmed = GP_TRY(storage::confirmations(tx, d.id));
  j["confirmations"] = confirmations_json(confirmed);
  Json waiting = Json::array();
  if (d.state == storage::DeletionState::kScheduled)
    for (const auto& n : GP_TRY(required_confirmers(tx, d.tenant_id)))
      if (!confirmed_by(confirmed, n)) waiting.push_back(n);
  j["waiting_for"] = waiting;
  return j;
}

Result<Json> scheduled_deletions_json(store::Tx& tx, const std::string& tenant_id) {
  Json out = Json::array();
  for (const auto& d : GP_TRY(storage::scheduled_deletions(tx, tenant_id)))
    out.push_back(deletion_json(d));
  return out;
}

// ---- Volumes ----

// What each node holding the tenant's trees last reported: encryption and permission audit.
Result<Json> trees_json(store::Tx& tx, const std::string& tenant_id) {
  Json out = Json::array();
  auto reports = GP_TRY(storage::storage_reports(tx, tenant_id));
  if (reports.empty()) return out;
  const auto names = GP_TRY(fleet::node_names(tx));
  for (const auto& r : reports) {
    Json j = json_of_fields(r);
    j["node"] = names.contains(r.node_id) ? names.at(r.node_id) : r.node_id;
    out.push_back(std::move(j));
  }
  return out;
}

// The tenant's plan: its id range, its projects and every directory the agents create; and
// what the nodes holding its trees report of them (encrypted or why not, the audit's findings).
Result<Reply> get_volumes(Api&, Call& call, store::Tx& tx) {
  const auto& t = *call.tenant;
  auto ids = GP_TRY(storage::load_ids(tx, t.id));
  auto stored = GP_TRY(storage::load_volumes(tx, t.id));
  Json projects = Json::array();
  for (const auto& s : stored) projects.push_back(json_of_fields(s));
  Json dirs = Json::array();
  if (ids && t.state != tenancy::TenantState::kOffboarding)
    for (const auto& d :
         GP_TRY(storage::plan_layout(storage::active_volumes(t.id, t.name, *ids, stored))))
      dirs.push_back(dir_json(d));
  return json_reply(200, {{"tenant", t.name},
                          {"ids", ids ? ids_json(*ids) : Json(nullptr)},
                          {"projects", projects},
                          {"directories", dirs},
                          {"deletions", GP_TRY(scheduled_deletions_json(tx, t.id))},
                          {"trees", GP_TRY(trees_json(tx, t.id))}});
}

Result<Mutation> put_volumes(Api& api, Call& call, store::Tx& tx) {
  const auto& t = *call.tenant;
  const auto& p = *call.project;
  if (t.state == tenancy::TenantState::kOffboarding)
    return fail(
        Error::conflict("tenant is being offboarded: its storage is scheduled for deletion"));
  auto r = body_reader(call, "volumes");
  const Json* limits_j = r.optional_object("size_limits");
  GP_TRY_VOID(r.finish());
  auto limits = limits_j ? GP_TRY(storage::parse_size_limits(*limits_j, "size_limits"))
                         : storage::SizeLimits{};

  const int64_t now = to_unix_micros(api.clock().now());
  auto ids = GP_TRY(storage::ensure_ids(tx, api.isolation().storage_ids, t.id, t.name, now));
  GP_TRY_VOID(ensure_tenant_key(api, tx, t));  // the nodes encrypt the tree with a key from it
  auto stored = GP_TRY(storage::load_volumes(tx, t.id));
  auto it = std::find_if(stored.begin(), stored.end(),
                         [&](const storage::StoredVolumes& s) { return s.project_id == p.id; });
  const bool created = it == stored.end();
  if (!created && it->state != "active")
    return fail(Error::conflict(
        "the project's volumes are scheduled for deletion; set them again once it is done"));
  GP_TRY_VOID(check_if_match(call, created ? 0 : it->version));
  storage::StoredVolumes next;
  if (created) {
    // The tree lives at <tenant>/<name>: while an earlier project's volumes under this name
    // are not removed yet, that path is still theirs.
    if (auto earlier = GP_TRY(storage::volumes_holding_path(tx, t.id, p.name, p.id))) {
      std::string due;
      for (const auto& d : GP_TRY(storage::scheduled_deletions(tx, t.id)))
        if (d.project_id == earlier->project_id) due = format_rfc3339(from_unix_micros(d.due_at));
      return fail(Error::conflict(fmt::format(
          "the tree {}/{} still holds the volumes of an earlier project of that name ({}, {}){}; "
          "set these volumes once that tree is removed",
          t.name, p.name, earlier->project_id,
          earlier->state == "active" ? "still active" : "being deleted",
          due.empty() ? "" : ", removal due " + due)));
    }
    std::vector<storage::ProjectVolumes> all;
    for (const auto& s : stored) all.push_back(s.volumes());  // deleting ones keep their ids
    next = {.project_id = p.id,
            .project = p.name,
            .uid = GP_TRY(storage::allocate_project_id(ids, all)),
            .size_limits = limits,
            .state = "active",
            .version = 1,
            .generation = api.ids().next("vgen")};
    stored.push_back(next);
  } else {
    it->size_limits = limits;
    it->version += 1;
    next = *it;
  }
  // The core checks names and ids before anything is stored.
  auto plan = GP_TRY(storage::plan_layout(storage::active_volumes(t.id, t.name, ids, stored)));
  if (created)
    GP_TRY_VOID(storage::insert_volumes(tx, t.id, next.volumes(), now));
  else
    GP_TRY_VOID(storage::update_size_limits(tx, t.id, p.id, limits, next.version - 1, now));
  Json body = json_of_fields(next);
  body["tenant"] = t.name;
  body["directories"] = Json::array();
  const std::string prefix = t.name + "/" + p.name;
  for (const auto& d : plan)
    if (d.path == prefix || d.path.starts_with(prefix + "/"))
      body["directories"].push_back(dir_json(d));
  Mutation m;
  m.reply = json_reply(200, body, next.version);
  m.detail = {{"project", p.name},
              {"uid", next.uid},
              {"generation", next.generation},
              {"size_limits", storage::size_limits_json(limits)},
              {"created", created}};
  return m;
}

Result<Mutation> delete_volumes(Api& api, Call& call, store::Tx& tx) {
  const auto& t = *call.tenant;
  const auto& p = *call.project;
  auto stored = GP_TRY(storage::load_volumes(tx, t.id));
  auto it = std::find_if(stored.begin(), stored.end(), [&](const storage::StoredVolumes& s) {
    return s.project_id == p.id && s.state == "active";
  });
  if (it == stored.end()) return fail(Error::not_found("volumes not found"));
  GP_TRY_VOID(check_if_match(call, it->version));
  const auto now = api.clock().now();
  auto d = GP_TRY(storage::schedule_project_deletion(
      tx, api.ids().next("sdel"), t.id, t.name, it->volumes(), "project volumes deleted",
      call.who.id, to_unix_micros(now), to_unix_micros(now + api.isolation().storage_grace)));
  Json body = deletion_json(d);
  Mutation m;
  m.reply = json_reply(202, body);
  m.detail = {{"project", p.name},
              {"generation", d.generation},
              {"deletion", d.id},
              {"due_at", body["due_at"]}};
  return m;
}

Result<Reply> list_deletions(Api& api, Call& call, store::Tx& tx) {
  auto page = GP_TRY(page_request(api, call));
  std::string state;
  if (auto q = call.req.query.find("state"); q != call.req.query.end()) {
    state = q->second;
    if (state != "scheduled" && state != "done")
      return fail(Error::invalid("state: must be scheduled or done"));
  }
  auto rows = make_page(
      GP_TRY(storage::list_deletions(tx, page.after.value_or(""), state, int64_t{page.limit} + 1)),
      page);
  Json items = Json::array();
  for (const auto& d : rows.items) items.push_back(GP_TRY(fleet_deletion_json(tx, d)));
  return json_reply(200, {{"items", items}, {"next", next_json(rows)}});
}

// ---- The agent's side ----

Result<Reply> agent_assignment(Api& api, Call& call, store::Tx& tx) {
  const std::string& node = call.who.id;
  const auto net = GP_TRY(node_net_state(api, tx));
  Json segments = Json::array();
  for (const auto& s : net.segments) {
    Json j = json_of_fields(s);
    j["tenant"] = s.tenant;  // the tenant's name here (node_net_state)
    segments.push_back(std::move(j));
  }
  Json policies = Json::array();
  for (const auto& policy : net.policies) {
    policies.push_back({{"tenant", policy.tenant}, {"policy", json_of_fields(policy)}});
  }
  // The volumes of every tenant with an id block that is not being offboarded, by tenant name.
  const auto blocks = GP_TRY(storage::all_ids(tx));
  auto tenants = GP_TRY(tenancy::all_tenants(tx));
  std::erase_if(tenants, [&](const tenancy::Tenant& t) {
    return t.state == tenancy::TenantState::kOffboarding || !blocks.contains(t.id);
  });
  std::ranges::sort(tenants, {}, &tenancy::Tenant::name);
  Json volumes = Json::array();
  for (const tenancy::Tenant& tenant : tenants) {
    const storage::IdRange& ids = blocks.at(tenant.id);
    auto tv = storage::active_volumes(tenant.id, tenant.name, ids,
                                      GP_TRY(storage::load_volumes(tx, tenant.id)));
    if (tv.projects.empty()) continue;
    Json projects = Json::array();
    for (const auto& p : tv.projects)
      projects.push_back({{"project", p.project},
                          {"project_id", p.project_id},
                          {"generation", p.generation},
                          {"id", p.id},
                          {"size_limits", storage::size_limits_json(p.size_limits)}});
    // The volume key travels only to the node, over its mutual-TLS session, on every round:
    // the agent adds it to the kernel and never writes it down.
    auto key = GP_TRY(tenant_volume_key(api, tx, tenant));
    volumes.push_back({{"tenant", tv.tenant},
                       {"tenant_id", tv.tenant_id},
                       {"held", GP_TRY(storage::is_holder(tx, tv.tenant_id, node))},
                       {"ids", {{"first", ids.first}, {"count", ids.count}}},
                       {"projects", projects},
                       {"encryption_key", key ? Json(base64url_encode(*key)) : Json(nullptr)}});
  }
  // The deletions this node has to execute: due, of a tenant whose trees it holds (or whose
  // holders are unknown), and not confirmed by it yet; or confirmed by it and awaiting no one
  // any more (a node it waited for was retired), so that its acknowledgement completes them.
  Json deletions = Json::array();
  for (const auto& d : GP_TRY(storage::due_deletions(tx, to_unix_micros(api.clock().now())))) {
    auto required = GP_TRY(required_confirmers(tx, d.tenant_id));
    if (!required.empty() && std::find(required.begin(), required.end(), node) == required.end())
      continue;
    auto confirmed = GP_TRY(storage::confirmations(tx, d.id));
    if (confirmed_by(confirmed, node) && !all_confirmed(required, confirmed)) continue;
    auto owner = GP_TRY(storage::expected_owner(tx, d));
    deletions.push_back({{"id", d.id},
                         {"tenant", d.tenant_name},
                         {"tenant_id", d.tenant_id},
                         {"project", d.project_name},
                         {"project_id", d.project_id},
                         {"generation", d.generation},
                         {"owner", owner ? Json(*owner) : Json(nullptr)},
                         {"due_at", format_rfc3339(from_unix_micros(d.due_at))}});
  }
  return json_reply(200, {{"node", node},
                          {"generated_at", format_rfc3339(api.clock().now())},
                          {"supernet", network::to_string(api.isolation().segments.supernet)},
                          {"segments", segments},
                          {"policies", policies},
                          {"volumes", volumes},
                          {"storage_deletions", deletions}});
}

// A node records that it holds the trees of these tenants, before it creates them. Only tenants
// with planned volumes are recorded; the others are refused (the node then creates nothing).
Result<Mutation> storage_holdings(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "storage holdings");
  auto tenants = r.optional_string_array("tenants", 10000, 128);
  if (!tenants) r.reject("tenants", "required: the ids of the tenants whose trees the node holds");
  GP_TRY_VOID(r.finish());
  const int64_t now = to_unix_micros(api.clock().now());
  Json held = Json::array(), refused = Json::array(), recorded = Json::array();
  for (const auto& id : *tenants) {
    auto t = GP_TRY(tenancy::find_tenant(tx, id));
    bool planned = t && t->id == id && t->state != tenancy::TenantState::kOffboarding;
    if (planned) {
      auto ids = GP_TRY(storage::load_ids(tx, id));
      planned =
          ids && !storage::active_volumes(id, t->name, *ids, GP_TRY(storage::load_volumes(tx, id)))
                      .projects.empty();
    }
    if (!planned) {
      refused.push_back(id);
      continue;
    }
    held.push_back(id);
    if (GP_TRY(storage::record_holder(tx, id, call.who.id, now))) recorded.push_back(id);
  }
  Mutation m;
  m.reply = json_reply(200, {{"held", held}, {"refused", refused}});
  m.audited = !recorded.empty();  // a node repeating what is recorded changes nothing
  m.detail = {{"recorded", recorded}, {"refused", refused}};
  return m;
}

// A node reports, per tenant tree it holds, whether the tree is encrypted under the tenant's key
// and what its permission audit found. Only trees the node is recorded as holding are kept;
// the others are refused by id. Strict: a malformed report records nothing.
Result<Mutation> storage_report(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "storage report");
  const Json* tenants = r.optional_array("tenants");
  if (!tenants) r.reject("tenants", "required: one report per tenant tree the node holds");
  GP_TRY_VOID(r.finish());
  if (tenants->size() > 10000) return fail(Error::invalid("tenants: at most 10000 reports"));
  std::vector<storage::StorageReport> reports;
  for (size_t i = 0; i < tenants->size(); ++i) {
    ObjectReader t((*tenants)[i], fmt::format("tenants[{}]", i));
    storage::StorageReport report{.node_id = call.who.id,
                                  .tenant_id = t.string("tenant_id", 128),
                                  .encrypted = t.optional_bool("encrypted").value_or(false),
                                  .encryption_detail = t.string("encryption_detail", 1024),
                                  .finding_count = t.integer("finding_count", 0, INT64_MAX),
                                  .audited_at = to_unix_micros(api.clock().now())};
    if (!t.has("encrypted")) t.reject("encrypted", "required: true or false");
    const Json* findings = t.optional_array("findings");
    if (!findings) t.reject("findings", "required: the audit's findings (at most 100)");
    GP_TRY_VOID(t.finish());
    if (findings->size() > storage::kMaxReportedFindings ||
        findings->size() > size_t(report.finding_count))
      return fail(
          Error::invalid(fmt::format("tenants[{}].findings: at most {} and at most finding_count",
                                     i, storage::kMaxReportedFindings)));
    for (size_t k = 0; k < findings->size(); ++k) {
      ObjectReader f((*findings)[k], fmt::format("tenants[{}].findings[{}]", i, k));
      f.string("path", 4096);
      f.string("kind", 64);
      f.string("detail", 1024);
      GP_TRY_VOID(f.finish());
    }
    report.findings = *findings;
    reports.push_back(std::move(report));
  }
  Json recorded = Json::array(), refused = Json::array();
  for (const auto& report : reports) {
    if (!GP_TRY(storage::is_holder(tx, report.tenant_id, call.who.id))) {
      refused.push_back(report.tenant_id);
      continue;
    }
    GP_TRY_VOID(storage::save_storage_report(tx, report));
    recorded.push_back(report.tenant_id);
  }
  Mutation m;
  m.reply = json_reply(200, {{"recorded", recorded}, {"refused", refused}});
  m.audited = false;  // a report, repeated every audit interval; the posture report shows it
  return m;
}

constexpr std::string_view kRemoveOutcomes[] = {"removed", "absent", "replaced"};

// A node confirms a deletion of its assignment. The deletion is done, and what its tree held is
// let go (for a tenant, the id block), once every node that holds the tenant's trees confirmed.
Result<Mutation> deletion_done(Api& api, Call& call, store::Tx& tx) {
  std::string outcome = "unreported", detail;
  if (call.body) {
    auto r = body_reader(call, "deletion report");
    if (auto o = r.optional_string("outcome", 16)) {
      outcome = *o;
      if (std::find(std::begin(kRemoveOutcomes), std::end(kRemoveOutcomes), outcome) ==
          std::end(kRemoveOutcomes))
        r.reject("outcome", "must be removed, absent or replaced");
    }
    detail = r.optional_string("detail", 1024).value_or("");
    GP_TRY_VOID(r.finish());
  }
  const std::string& node = call.who.id;
  auto d = GP_TRY(found(storage::find_deletion(tx, call.param("deletion")), "storage deletion"));
  Mutation m;
  m.tenant_id = d.tenant_id;
  auto confirmed = GP_TRY(storage::confirmations(tx, d.id));
  if (d.state == storage::DeletionState::kDone) {
    if (!confirmed_by(confirmed, node) && d.done_by != node)
      return fail(Error::conflict("the deletion is done; this node did not confirm it"));
    m.reply = json_reply(200, GP_TRY(fleet_deletion_json(tx, d)));  // a retry changes nothing
    m.audited = false;
    return m;
  }
  const auto now = api.clock().now();
  if (d.due_at > to_unix_micros(now))
    return fail(Error::conflict(fmt::format("the deletion is not due before {}",
                                            format_rfc3339(from_unix_micros(d.due_at)))));
  auto required = GP_TRY(required_confirmers(tx, d.tenant_id));
  if (!required.empty() && std::find(required.begin(), required.end(), node) == required.end())
    return fail(Error::denied(fmt::format(
        "deletion {} is not in this node's assignment: the node does not hold the trees of "
        "tenant {}",
        d.id, d.tenant_name)));
  const bool recorded =
      GP_TRY(storage::record_confirmation(tx, d.id, node, outcome, detail, to_unix_micros(now)));
  confirmed = GP_TRY(storage::confirmations(tx, d.id));
  const bool complete = all_confirmed(required, confirmed);
  if (complete) {
    GP_TRY_VOID(storage::complete_deletion(tx, d, node, to_unix_micros(now)));
    d = GP_TRY(found(storage::find_deletion(tx, d.id), "storage deletion"));
  }
  m.reply = json_reply(200, GP_TRY(fleet_deletion_json(tx, d)));
  m.audited = recorded || complete;
  m.detail = {{"tenant", d.tenant_name},
              {"project", d.project_name},
              {"project_id", d.project_id},
              {"generation", d.generation},
              {"outcome", outcome},
              {"done", complete},
              {"ids_released", complete && d.whole_tenant()}};
  return m;
}

}  // namespace

Result<Json> schedule_tenant_storage_deletion(Api& api, store::Tx& tx, const tenancy::Tenant& t,
                                              const std::string& who) {
  if (!GP_TRY(storage::load_ids(tx, t.id))) return Json("none");  // never had volumes
  const auto now = api.clock().now();
  auto d = GP_TRY(storage::schedule_tenant_deletion(
      tx, api.ids().next("sdel"), t.id, t.name, "tenant offboarded", who, to_unix_micros(now),
      to_unix_micros(now + api.isolation().storage_grace)));
  return Json{{"deletion", d.id}, {"due_at", format_rfc3339(from_unix_micros(d.due_at))}};
}

std::vector<Route> storage_routes() {
  const std::string project = "/v1/tenants/{tenant}/projects/{project}";
  std::vector<Route> r;
  r.push_back({.method = "PUT",
               .pattern = project + "/volumes",
               .action = "volumes.set",
               .permission = Permission::kQuotaWrite,
               .mutation = true,
               .conditional = true,
               .handler = write_tx(put_volumes),
               .summary = "Create the project's volumes (datasets, models, checkpoints, scratch) "
                          "or change their size limits; the tenant's uid/gid range and the "
                          "project's id are allocated on first use.",
               .request_schema = "VolumesSet",
               .response_schema = "ProjectVolumes"});
  r.push_back({.method = "DELETE",
               .pattern = project + "/volumes",
               .action = "volumes.delete",
               .permission = Permission::kProjectDelete,
               .mutation = true,
               .conditional = true,
               .handler = write_tx(delete_volumes),
               .summary = "Schedule the removal of the project's tree after the storage grace "
                          "period (the agents remove it once due).",
               .response_schema = "StorageDeletion",
               .success_status = 202});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/volumes",
               .action = "volumes.get",
               .permission = Permission::kTenantRead,
               .handler = read_tx(get_volumes),
               .summary = "The tenant's storage plan: id range, project volumes, every directory "
                          "with its owner, mode and size limit, and scheduled deletions.",
               .response_schema = "TenantVolumes"});
  r.push_back({.method = "GET",
               .pattern = "/v1/storage/deletions",
               .action = "storage.deletions.list",
               .permission = Permission::kFleetRead,
               .handler = read_tx(list_deletions),
               .query_params = {"limit", "after", "state"},
               .summary = "Storage deletions of every tenant, scheduled and done, with each "
                          "node's confirmation and the nodes still awaited.",
               .response_schema = "StorageDeletion[]"});
  r.push_back({.method = "GET",
               .pattern = "/v1/agent/assignment",
               .action = "node.assignment",
               .access = Access::kNode,
               .handler = read_tx(agent_assignment),
               .summary = "What a node agent enforces: live tenant segments and policies, the "
                          "volume plans of active tenants, and the due storage deletions it has "
                          "to execute.",
               .response_schema = "AgentAssignment"});
  r.push_back({.method = "POST",
               .pattern = "/v1/agent/storage-holdings",
               .action = "node.storage_holding",
               .access = Access::kNode,
               .mutation = true,
               .handler = write_tx(storage_holdings),
               .summary = "A node agent records that it holds the trees of these tenants, before "
                          "it creates them; each such node then confirms their deletion.",
               .request_schema = "StorageHoldings",
               .response_schema = "StorageHoldingsResult"});
  r.push_back({.method = "POST",
               .pattern = "/v1/agent/storage-report",
               .action = "node.storage_report",
               .access = Access::kNode,
               .mutation = true,
               .handler = write_tx(storage_report),
               .summary = "A node agent reports, per tenant tree it holds, whether it is "
                          "encrypted under the tenant's key and its permission audit's findings "
                          "(what the posture report shows).",
               .request_schema = "StorageReport",
               .response_schema = "StorageReportResult"});
  r.push_back({.method = "POST",
               .pattern = "/v1/agent/storage-deletions/{deletion}/done",
               .action = "node.storage_deletion.done",
               .access = Access::kNode,
               .mutation = true,
               .handler = write_tx(deletion_done),
               .summary = "A node agent confirms a due storage deletion of its assignment "
                          "(idempotent); it is done once every node holding the tenant's trees "
                          "has confirmed it.",
               .request_schema = "StorageDeletionDone",
               .response_schema = "StorageDeletion"});
  return r;
}

}  // namespace gp::api
