// Tenant storage volumes (a uid/gid range per tenant, a directory tree per project, optional
// size limits), the deletions offboarding and volume removal schedule after a grace period,
// and the node agent's assignment: everything a node enforces (tenant segments and policies,
// volume plans, due deletions). The pure rules live in gp_storage and gp_network; this file
// keeps their state in the store (migration 13).
#include <fmt/format.h>

#include <algorithm>

#include "api/router.h"

namespace gp::api {
namespace {

using iam::Permission;

// Size limits: at least 1 MiB (what the storage core accepts), below 2^62 bytes so they fit a
// signed 64-bit JSON integer anywhere.
constexpr int64_t kMinSizeLimit = int64_t{1} << 20;
constexpr int64_t kMaxSizeLimit = int64_t{1} << 62;

// ---- Tenant id ranges ----

Result<std::vector<storage::TenantIds>> load_id_ranges(store::Tx& tx) {
  std::vector<storage::TenantIds> out;
  for (const auto& row :
       GP_TRY(tx.query("SELECT t.name, s.first_id, s.count FROM tenant_storage_ids s JOIN tenants "
                       "t ON t.id = s.tenant_id ORDER BY s.first_id")))
    out.push_back({row.text(0),
                   {static_cast<uint32_t>(row.integer(1)), static_cast<uint32_t>(row.integer(2))}});
  return out;
}

Result<std::optional<storage::IdRange>> load_ids(store::Tx& tx, const std::string& tenant_id) {
  auto row = GP_TRY(tx.query_one(
      "SELECT first_id, count FROM tenant_storage_ids WHERE tenant_id = ?", {tenant_id}));
  if (!row) return std::optional<storage::IdRange>{};
  return std::optional<storage::IdRange>{storage::IdRange{static_cast<uint32_t>(row->integer(0)),
                                                          static_cast<uint32_t>(row->integer(1))}};
}

// The tenant's range, allocated from the configured pool on first use.
Result<storage::IdRange> ensure_ids(Api& api, store::Tx& tx, const tenancy::Tenant& t) {
  if (auto have = GP_TRY(load_ids(tx, t.id))) return *have;
  auto existing = GP_TRY(load_id_ranges(tx));
  auto ids = GP_TRY(storage::allocate_ids(api.isolation().storage_ids, existing, t.name));
  GP_TRY(tx.exec(
      "INSERT INTO tenant_storage_ids (tenant_id, first_id, count, created_at) VALUES (?,?,?,?)",
      {t.id, int64_t{ids.range.first}, int64_t{ids.range.count},
       to_unix_micros(api.clock().now())}));
  return ids.range;
}

// ---- Project volumes ----

struct StoredVolumes {
  std::string project_id;
  storage::ProjectVolumes volumes;
  std::string state;  // "active" | "deleting"
  int64_t version = 0;
};

Json limits_json(const std::vector<std::pair<storage::VolumeKind, uint64_t>>& limits) {
  Json j = Json::object();
  for (const auto& [kind, bytes] : limits) j[std::string(storage::volume_kind_name(kind))] = bytes;
  return j;
}

// Strict: every key a volume kind, every value a positive integer number of bytes.
Result<std::vector<std::pair<storage::VolumeKind, uint64_t>>> parse_limits(const Json& j,
                                                                           std::string_view where) {
  if (!j.is_object()) return fail(Error::invalid(fmt::format("{}: must be an object", where)));
  std::vector<std::pair<storage::VolumeKind, uint64_t>> out;
  for (const auto& [key, value] : j.items()) {
    auto kind = storage::parse_volume_kind(key);
    if (!kind)
      return fail(Error::invalid(fmt::format(
          "{}.{}: unknown volume (datasets, models, checkpoints or scratch)", where, key)));
    if (!value.is_number_integer() || value.get<int64_t>() < kMinSizeLimit ||
        value.get<int64_t>() > kMaxSizeLimit)
      return fail(Error::invalid(
          fmt::format("{}.{}: must be an integer number of bytes, 1 MiB to 2^62", where, key)));
    out.emplace_back(*kind, value.get<uint64_t>());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::vector<StoredVolumes>> load_volumes(store::Tx& tx, const std::string& tenant_id) {
  std::vector<StoredVolumes> out;
  for (const auto& row :
       GP_TRY(tx.query("SELECT project_id, project_name, uid, size_limits, state, version FROM "
                       "project_volumes WHERE tenant_id = ? ORDER BY project_name",
                       {tenant_id}))) {
    StoredVolumes v;
    v.project_id = row.text(0);
    v.volumes.project = row.text(1);
    v.volumes.id = static_cast<uint32_t>(row.integer(2));
    v.volumes.size_limits = GP_TRY(parse_limits(GP_TRY(parse_json(row.text(3))), "size_limits"));
    v.state = row.text(4);
    v.version = row.integer(5);
    out.push_back(std::move(v));
  }
  return out;
}

// The tenant's active volumes as the storage core sees them.
storage::TenantVolumes tenant_volumes(const std::string& tenant_name, const storage::IdRange& ids,
                                      const std::vector<StoredVolumes>& stored) {
  storage::TenantVolumes tv{.tenant = tenant_name, .ids = ids, .projects = {}};
  for (const auto& s : stored)
    if (s.state == "active") tv.projects.push_back(s.volumes);
  return tv;
}

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

Json project_json(const StoredVolumes& s) {
  return {{"project", s.volumes.project},
          {"project_id", s.project_id},
          {"uid", s.volumes.id},
          {"gid", s.volumes.id},
          {"size_limits", limits_json(s.volumes.size_limits)},
          {"state", s.state},
          {"version", s.version}};
}

constexpr std::string_view kDeletionCols =
    "id, tenant_id, tenant_name, project_name, reason, requested_by, requested_at, due_at, state, "
    "done_at, done_by";

Json deletion_json(const store::Row& row) {
  return {{"id", row.text(0)},
          {"tenant_id", row.text(1)},
          {"tenant", row.text(2)},
          {"project", row.text(3)},
          {"path", row.text(3).empty() ? row.text(2) : row.text(2) + "/" + row.text(3)},
          {"reason", row.text(4)},
          {"requested_by", row.text(5)},
          {"requested_at", format_rfc3339(from_unix_micros(row.integer(6)))},
          {"due_at", format_rfc3339(from_unix_micros(row.integer(7)))},
          {"state", row.text(8)},
          {"done_at",
           row.is_null(9) ? Json(nullptr) : Json(format_rfc3339(from_unix_micros(row.integer(9))))},
          {"done_by", row.is_null(10) ? Json(nullptr) : Json(row.text(10))}};
}

Result<store::Row> schedule_deletion(Api& api, store::Tx& tx, const tenancy::Tenant& t,
                                     const std::string& project, const std::string& reason,
                                     const std::string& who) {
  const std::string id = api.ids().next("sdel");
  const auto now = api.clock().now();
  GP_TRY(
      tx.exec("INSERT INTO storage_deletions (id, tenant_id, tenant_name, project_name, reason, "
              "requested_by, requested_at, due_at, state) VALUES (?,?,?,?,?,?,?,?,'scheduled')",
              {id, t.id, t.name, project, reason, who, to_unix_micros(now),
               to_unix_micros(now + api.isolation().storage_grace)}));
  return found(
      tx.query_one(fmt::format("SELECT {} FROM storage_deletions WHERE id = ?", kDeletionCols),
                   {id}),
      "storage deletion");
}

Result<Json> scheduled_deletions(store::Tx& tx, const std::string& tenant_id) {
  Json out = Json::array();
  for (const auto& row : GP_TRY(
           tx.query(fmt::format("SELECT {} FROM storage_deletions WHERE tenant_id = ? AND state = "
                                "'scheduled' ORDER BY requested_at, id",
                                kDeletionCols),
                    {tenant_id})))
    out.push_back(deletion_json(row));
  return out;
}

// The tenant's plan: its id range, its projects and every directory the agents create.
Result<Reply> get_volumes(Api&, Call& call, store::Tx& tx) {
  const auto& t = *call.tenant;
  auto ids = GP_TRY(load_ids(tx, t.id));
  auto stored = GP_TRY(load_volumes(tx, t.id));
  Json projects = Json::array();
  for (const auto& s : stored) projects.push_back(project_json(s));
  Json dirs = Json::array();
  if (ids && t.state != tenancy::TenantState::kOffboarding)
    for (const auto& d : GP_TRY(storage::plan_layout(tenant_volumes(t.name, *ids, stored))))
      dirs.push_back(dir_json(d));
  return json_reply(200, {{"tenant", t.name},
                          {"ids", ids ? ids_json(*ids) : Json(nullptr)},
                          {"projects", projects},
                          {"directories", dirs},
                          {"deletions", GP_TRY(scheduled_deletions(tx, t.id))}});
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
  auto limits = limits_j ? GP_TRY(parse_limits(*limits_j, "size_limits"))
                         : std::vector<std::pair<storage::VolumeKind, uint64_t>>{};

  auto ids = GP_TRY(ensure_ids(api, tx, t));
  auto stored = GP_TRY(load_volumes(tx, t.id));
  auto it = std::find_if(stored.begin(), stored.end(),
                         [&](const StoredVolumes& s) { return s.project_id == p.id; });
  const bool created = it == stored.end();
  if (!created && it->state != "active")
    return fail(Error::conflict(
        "the project's volumes are scheduled for deletion; set them again once it is done"));
  GP_TRY_VOID(check_if_match(call, created ? 0 : it->version));
  const int64_t now = to_unix_micros(api.clock().now());
  StoredVolumes next;
  if (created) {
    std::vector<storage::ProjectVolumes> all;
    for (const auto& s : stored) all.push_back(s.volumes);  // deleting ones keep their ids
    next.project_id = p.id;
    next.volumes = {.project = p.name,
                    .id = GP_TRY(storage::allocate_project_id(ids, all)),
                    .size_limits = limits};
    next.state = "active";
    next.version = 1;
    stored.push_back(next);
  } else {
    it->volumes.size_limits = limits;
    it->version += 1;
    next = *it;
  }
  // The core checks names and ids before anything is stored.
  auto plan = GP_TRY(storage::plan_layout(tenant_volumes(t.name, ids, stored)));
  const std::string limits_text = limits_json(limits).dump();
  if (created)
    GP_TRY(tx.exec(
        "INSERT INTO project_volumes (tenant_id, project_id, project_name, uid, size_limits, "
        "state, created_at, updated_at, version) VALUES (?,?,?,?,?,'active',?,?,1)",
        {t.id, p.id, p.name, int64_t{next.volumes.id}, limits_text, now, now}));
  else
    GP_TRY(
        tx.exec("UPDATE project_volumes SET size_limits = ?, updated_at = ?, version = ? WHERE "
                "tenant_id = ? AND project_id = ? AND version = ?",
                {limits_text, now, next.version, t.id, p.id, next.version - 1}));
  Json body = project_json(next);
  body["tenant"] = t.name;
  body["directories"] = Json::array();
  const std::string prefix = t.name + "/" + p.name;
  for (const auto& d : plan)
    if (d.path == prefix || d.path.starts_with(prefix + "/"))
      body["directories"].push_back(dir_json(d));
  Mutation m;
  m.reply = json_reply(200, body, next.version);
  m.detail = {{"project", p.name},
              {"uid", next.volumes.id},
              {"size_limits", limits_json(limits)},
              {"created", created}};
  return m;
}

Result<Mutation> delete_volumes(Api& api, Call& call, store::Tx& tx) {
  const auto& t = *call.tenant;
  const auto& p = *call.project;
  auto stored = GP_TRY(load_volumes(tx, t.id));
  auto it = std::find_if(stored.begin(), stored.end(), [&](const StoredVolumes& s) {
    return s.project_id == p.id && s.state == "active";
  });
  if (it == stored.end()) return fail(Error::not_found("volumes not found"));
  GP_TRY_VOID(check_if_match(call, it->version));
  GP_TRY(tx.exec(
      "UPDATE project_volumes SET state = 'deleting', updated_at = ?, version = version + 1 "
      "WHERE tenant_id = ? AND project_id = ?",
      {to_unix_micros(api.clock().now()), t.id, p.id}));
  auto row = GP_TRY(
      schedule_deletion(api, tx, t, it->volumes.project, "project volumes deleted", call.who.id));
  Mutation m;
  m.reply = json_reply(202, deletion_json(row));
  m.detail = {
      {"project", p.name}, {"deletion", row.text(0)}, {"due_at", deletion_json(row)["due_at"]}};
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
  auto rows = GP_TRY(tx.query(
      fmt::format("SELECT {} FROM storage_deletions WHERE id > ? AND (? = '' OR state = ?) ORDER "
                  "BY id LIMIT ?",
                  kDeletionCols),
      {page.after.value_or(""), state, state, int64_t{page.limit} + 1}));
  Json items = Json::array();
  Json next = nullptr;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i == size_t(page.limit)) {
      next = rows[i - 1].text(0);
      break;
    }
    items.push_back(deletion_json(rows[i]));
  }
  return json_reply(200, {{"items", items}, {"next", next}});
}

// ---- The agent's assignment ----

Result<Reply> agent_assignment(Api& api, Call& call, store::Tx& tx) {
  const auto& supernet = api.isolation().segments.supernet;
  Json segments = Json::array();
  for (const auto& row : GP_TRY(
           tx.query("SELECT t.name, s.vni, s.cidr FROM tenant_segments s JOIN tenants t ON t.id = "
                    "s.tenant_id ORDER BY t.name")))
    segments.push_back({{"tenant", row.text(0)}, {"vni", row.integer(1)}, {"cidr", row.text(2)}});
  Json policies = Json::array();
  for (const auto& row : GP_TRY(tx.query(
           "SELECT t.name, p.policy FROM tenant_network_policies p JOIN tenants t ON t.id = "
           "p.tenant_id JOIN tenant_segments s ON s.tenant_id = p.tenant_id ORDER BY t.name"))) {
    // Re-validated, so a node never receives a policy the core would not render.
    auto policy =
        GP_TRY(network::policy_from_json(GP_TRY(parse_json(row.text(1))), row.text(0), supernet));
    Json body = network::to_json(policy);
    body.erase("tenant");
    policies.push_back({{"tenant", row.text(0)}, {"policy", body}});
  }
  Json volumes = Json::array();
  for (const auto& row : GP_TRY(tx.query(
           "SELECT t.id, t.name, s.first_id, s.count FROM tenant_storage_ids s JOIN tenants t ON "
           "t.id = s.tenant_id WHERE t.state <> 'offboarding' ORDER BY t.name"))) {
    storage::IdRange ids{static_cast<uint32_t>(row.integer(2)),
                         static_cast<uint32_t>(row.integer(3))};
    auto tv = tenant_volumes(row.text(1), ids, GP_TRY(load_volumes(tx, row.text(0))));
    if (tv.projects.empty()) continue;
    Json projects = Json::array();
    for (const auto& p : tv.projects)
      projects.push_back(
          {{"project", p.project}, {"id", p.id}, {"size_limits", limits_json(p.size_limits)}});
    volumes.push_back({{"tenant", tv.tenant},
                       {"ids", {{"first", ids.first}, {"count", ids.count}}},
                       {"projects", projects}});
  }
  Json deletions = Json::array();
  for (const auto& row : GP_TRY(tx.query(
           fmt::format("SELECT {} FROM storage_deletions WHERE state = 'scheduled' AND due_at <= "
                       "? ORDER BY due_at, id",
                       kDeletionCols),
           {to_unix_micros(api.clock().now())}))) {
    Json d = deletion_json(row);
    deletions.push_back({{"id", d["id"]},
                         {"tenant", d["tenant"]},
                         {"project", d["project"]},
                         {"due_at", d["due_at"]}});
  }
  return json_reply(200, {{"node", call.who.id},
                          {"generated_at", format_rfc3339(api.clock().now())},
                          {"supernet", network::to_string(supernet)},
                          {"segments", segments},
                          {"policies", policies},
                          {"volumes", volumes},
                          {"storage_deletions", deletions}});
}

Result<Mutation> deletion_done(Api& api, Call& call, store::Tx& tx) {
  if (call.body) {
    auto r = body_reader(call, "deletion report");
    auto detail = r.optional_string("detail", 1024);
    GP_TRY_VOID(r.finish());
  }
  const std::string sql =
      fmt::format("SELECT {} FROM storage_deletions WHERE id = ?", kDeletionCols);
  auto row = GP_TRY(found(tx.query_one(sql, {call.param("deletion")}), "storage deletion"));
  Mutation m;
  m.tenant_id = row.text(1);
  if (row.text(8) == "done") {  // a retried acknowledgement changes nothing
    m.reply = json_reply(200, deletion_json(row));
    m.audited = false;
    return m;
  }
  const auto now = api.clock().now();
  if (row.integer(7) > to_unix_micros(now))
    return fail(Error::conflict(fmt::format("the deletion is not due before {}",
                                            deletion_json(row)["due_at"].get<std::string>())));
  GP_TRY(tx.exec(
      "UPDATE storage_deletions SET state = 'done', done_at = ?, done_by = ? WHERE id = ? AND "
      "state = 'scheduled'",
      {to_unix_micros(now), call.who.id, row.text(0)}));
  const std::string& tenant_id = row.text(1);
  if (row.text(3).empty()) {
    // The whole tree is gone: the tenant's ids may go to another tenant.
    GP_TRY(tx.exec("DELETE FROM project_volumes WHERE tenant_id = ?", {tenant_id}));
    GP_TRY(tx.exec("DELETE FROM tenant_storage_ids WHERE tenant_id = ?", {tenant_id}));
  } else {
    GP_TRY(
        tx.exec("DELETE FROM project_volumes WHERE tenant_id = ? AND project_name = ? AND state = "
                "'deleting'",
                {tenant_id, row.text(3)}));
  }
  m.reply = json_reply(
      200, deletion_json(GP_TRY(found(tx.query_one(sql, {row.text(0)}), "storage deletion"))));
  m.detail = {
      {"tenant", row.text(2)}, {"project", row.text(3)}, {"ids_released", row.text(3).empty()}};
  return m;
}

}  // namespace

Result<Json> schedule_tenant_storage_deletion(Api& api, store::Tx& tx, const tenancy::Tenant& t,
                                              const std::string& who) {
  if (!GP_TRY(load_ids(tx, t.id))) return Json("none");  // never had volumes
  GP_TRY(tx.exec("UPDATE project_volumes SET state = 'deleting' WHERE tenant_id = ?", {t.id}));
  auto existing = GP_TRY(tx.query_one(
      fmt::format("SELECT {} FROM storage_deletions WHERE tenant_id = ? AND project_name = '' AND "
                  "state = 'scheduled'",
                  kDeletionCols),
      {t.id}));
  auto row =
      existing ? *existing : GP_TRY(schedule_deletion(api, tx, t, "", "tenant offboarded", who));
  Json d = deletion_json(row);
  return Json{{"deletion", d["id"]}, {"due_at", d["due_at"]}};
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
               .summary = "Storage deletions of every tenant, scheduled and done.",
               .response_schema = "StorageDeletion[]"});
  r.push_back({.method = "GET",
               .pattern = "/v1/agent/assignment",
               .action = "node.assignment",
               .access = Access::kNode,
               .handler = read_tx(agent_assignment),
               .summary = "What a node agent enforces: live tenant segments and policies, the "
                          "volume plans of active tenants, and storage deletions that are due.",
               .response_schema = "AgentAssignment"});
  r.push_back({.method = "POST",
               .pattern = "/v1/agent/storage-deletions/{deletion}/done",
               .action = "node.storage_deletion.done",
               .access = Access::kNode,
               .mutation = true,
               .handler = write_tx(deletion_done),
               .summary = "A node agent reports a due storage deletion executed (idempotent).",
               .request_schema = "StorageDeletionDone",
               .response_schema = "StorageDeletion"});
  return r;
}

}  // namespace gp::api
