#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/crypto.h"
#include "common/env.h"
#include "fleet/fleet.h"
#include "iam/iam.h"
#include "store/record_row.h"

namespace gp::fleet {
namespace {

using store::Null;
using store::Row;

Json layout_json(const vocab::Layout& l) {
  Json a = Json::array();
  for (const auto& p : l) a.push_back({{"profile", p.profile}, {"start", p.start}});
  return a;
}
vocab::Layout layout_from(const std::string& text) {
  vocab::Layout l;
  Json j = Json::parse(text, nullptr, false);
  if (j.is_array())
    for (const auto& p : j) l.push_back({p.value("profile", ""), p.value("start", 0)});
  return l;
}

}  // namespace

Json Node::to_json() const { return json_of_fields(*this); }

// ---------------- pools ----------------

namespace {
const std::string kPoolCols = store::columns_of<Pool>();
Result<Pool> pool_from(const Row& r) { return store::read_row<Pool>(r); }
}  // namespace

Result<Pool> create_pool(store::Tx& tx, const Env& w, const std::string& name,
                         const std::optional<std::string>& tenant_id,
                         const std::string& description) {
  GP_TRY_VOID(validate_dns_label("name", name));
  Pool p{w.ids.next("pool"), name, tenant_id, description, w.now(), 1};
  auto r = tx.exec(
      fmt::format("INSERT INTO pools ({}) VALUES ({})", kPoolCols, store::placeholders_of<Pool>()),
      store::params_of(p));
  if (!r && r.error().code == ErrorCode::kConflict)
    return fail(Error::conflict(fmt::format("a pool named '{}' already exists", name)));
  // The tenants are tenancy's (the caller resolves the name it was given); the pool's foreign
  // key is what refuses an id no tenant has, and the only constraint that can be violated here.
  if (!r && r.error().code == ErrorCode::kInvalidArgument && tenant_id)
    return fail(Error::invalid(fmt::format("tenant {} not found", *tenant_id)));
  GP_TRY_VOID(r);
  return p;
}

Result<std::optional<Pool>> find_pool(store::Tx& tx, std::string_view key) {
  auto row = GP_TRY(tx.query_one(fmt::format("SELECT {} FROM pools WHERE {} = ?", kPoolCols,
                                             key.starts_with("pool_") ? "id" : "name"),
                                 {std::string(key)}));
  if (!row) return std::optional<Pool>();
  return std::optional<Pool>(GP_TRY(pool_from(*row)));
}

Result<std::vector<Pool>> list_pools(store::Tx& tx) {
  auto rows = GP_TRY(tx.query(fmt::format("SELECT {} FROM pools ORDER BY name", kPoolCols)));
  std::vector<Pool> out;
  for (const auto& r : rows) out.push_back(GP_TRY(pool_from(r)));
  return out;
}

Result<void> delete_pool(store::Tx& tx, const std::string& id) {
  auto n = GP_TRY(
      tx.query_one("SELECT COUNT(*) FROM nodes WHERE pool_id = ? AND state != 'retired'", {id}));
  if (n->integer(0) > 0)
    return fail(Error::conflict(fmt::format("pool still has {} nodes", n->integer(0))));
  GP_TRY_VOID(tx.exec("UPDATE nodes SET pool_id = NULL WHERE pool_id = ?", {id}));
  GP_TRY_VOID(tx.exec("UPDATE join_tokens SET pool_id = NULL WHERE pool_id = ?", {id}));
  auto d = GP_TRY(tx.exec("DELETE FROM pools WHERE id = ?", {id}));
  if (d == 0) return fail(Error::not_found("pool not found"));
  return ok();
}

// ---------------- nodes ----------------

namespace {
constexpr std::string_view kNodeCols =
    "id, name, pool_id, state, cordoned, state_reason, cpu_millis, memory_bytes, rack, "
    "nvlink_domain, labels, source, last_heartbeat, created_at, updated_at, version, "
    "gpu_runtime, drain_deadline";
// Read after kNodeCols: the node's pool by name.
constexpr std::string_view kPoolNameCol = "(SELECT p.name FROM pools p WHERE p.id = nodes.pool_id)";
// The stored GPU runtime report; one that no longer parses reads as never reported.
std::optional<GpuRuntime> gpu_runtime_from(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  auto j = parse_json(*text);
  if (!j) return std::nullopt;
  auto g = parse_gpu_runtime(*j);
  return g ? std::optional<GpuRuntime>(std::move(*g)) : std::nullopt;
}
store::Value gpu_runtime_value(const std::optional<GpuRuntime>& g) {
  if (!g) return Null{};
  return to_json(*g).dump();
}
Node node_from(const Row& r) {
  Node n;
  n.id = r.text(0);
  n.info.name = r.text(1);
  n.pool_id = r.opt_text(2);
  n.state = parse_node_state(r.text(3)).value_or(NodeState::kFailed);
  n.cordoned = r.integer(4) != 0;
  n.state_reason = r.text(5);
  n.info.cpu_millis = r.integer(6);
  n.info.memory_bytes = r.integer(7);
  n.info.rack = r.text(8);
  n.info.nvlink_domain = r.text(9);
  Json labels = Json::parse(r.text(10), nullptr, false);
  if (labels.is_object())
    for (auto it = labels.begin(); it != labels.end(); ++it)
      n.info.labels[it.key()] = it->get<std::string>();
  n.source = r.text(11);
  n.last_heartbeat = r.opt_integer(12);
  n.created_at = r.integer(13);
  n.updated_at = r.integer(14);
  n.version = r.integer(15);
  n.gpu_runtime = gpu_runtime_from(r.opt_text(16));
  n.drain_deadline = r.opt_integer(17);
  n.pool_name = r.opt_text(18);
  return n;
}

Result<Node> load_node(store::Tx& tx, const std::string& id) {
  auto row = GP_TRY(tx.query_one(
      fmt::format("SELECT {}, {} FROM nodes WHERE id = ?", kNodeCols, kPoolNameCol), {id}));
  if (!row) return fail(Error::not_found("node not found"));
  return node_from(*row);
}

// Every node state change goes through here, so downtime opens and closes with it.
Result<void> save_state(store::Tx& tx, const Env& w, Node& n, NodeState s, std::string reason) {
  const NodeState before = n.state;
  n.state = s;
  n.state_reason = std::move(reason);
  n.updated_at = w.now();
  ++n.version;
  // A deadline belongs to one drain: any other state drops it.
  if (s != NodeState::kDraining) n.drain_deadline.reset();
  GP_TRY_VOID(tx.exec(
      "UPDATE nodes SET state=?, state_reason=?, updated_at=?, version=?, drain_deadline=?, "
      "inventory_digest=NULL WHERE id=?",
      {std::string(node_state_name(s)), n.state_reason, n.updated_at, n.version,
       store::opt(n.drain_deadline), n.id}));
  if (s == NodeState::kFailed && before != NodeState::kFailed)
    GP_TRY_VOID(open_downtime(tx, n.id, "", n.state_reason, n.updated_at));
  // Repairing a failed node (failed -> maintenance) keeps the outage going: it ends when the
  // node is ready for work again, or retired.
  if ((s == NodeState::kReady || s == NodeState::kRetired) && before != s)
    GP_TRY_VOID(close_downtime(tx, n.id, "", n.updated_at));
  return ok();
}

Result<Node> insert_node(store::Tx& tx, const Env& w, const Inventory& inv,
                         const std::optional<std::string>& pool_id, NodeState state,
                         const std::string& source, store::Value credential_hash, std::string id) {
  Node n;
  n.id = std::move(id);
  n.info = inv.node;
  n.pool_id = pool_id;
  if (pool_id)
    if (auto row = GP_TRY(tx.query_one("SELECT name FROM pools WHERE id = ?", {*pool_id})))
      n.pool_name = row->text(0);
  n.state = state;
  n.source = source;
  n.created_at = n.updated_at = w.now();
  if (source == "agent") n.last_heartbeat = n.created_at;
  auto r = tx.exec(
      fmt::format("INSERT INTO nodes ({}, credential_hash) VALUES "
                  "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,NULL,?)",
                  kNodeCols),
      {n.id, n.info.name, store::opt(n.pool_id), std::string(node_state_name(n.state)), int64_t(0),
       std::string(), n.info.cpu_millis, n.info.memory_bytes, n.info.rack, n.info.nvlink_domain,
       Json(n.info.labels).dump(), n.source, store::opt(n.last_heartbeat), n.created_at,
       n.updated_at, n.version, gpu_runtime_value(n.gpu_runtime), std::move(credential_hash)});
  if (!r && r.error().code == ErrorCode::kConflict)
    return fail(Error::conflict(fmt::format("a node named '{}' is already enrolled", n.info.name)));
  GP_TRY_VOID(r);
  return n;
}

}  // namespace

Result<std::optional<Node>> find_node(store::Tx& tx, std::string_view key) {
  auto row = GP_TRY(tx.query_one(fmt::format("SELECT {}, {} FROM nodes WHERE {} = ?", kNodeCols,
                                             kPoolNameCol, key.starts_with("nod_") ? "id" : "name"),
                                 {std::string(key)}));
  if (!row) return std::optional<Node>();
  return std::optional<Node>(node_from(*row));
}

Result<Page<Node>> list_nodes(store::Tx& tx, const PageRequest& page,
                              const std::optional<NodeState>& state) {
  store::Params params{page.after.value_or("")};
  std::string where = "id > ?";
  if (state) {
    where += " AND state = ?";
    params.push_back(std::string(node_state_name(*state)));
  }
  params.push_back(int64_t(page.limit) + 1);
  auto rows = GP_TRY(tx.query(fmt::format("SELECT {}, {} FROM nodes WHERE {} ORDER BY id LIMIT ?",
                                          kNodeCols, kPoolNameCol, where),
                              params));
  std::vector<Node> out;
  for (const auto& r : rows) out.push_back(node_from(r));
  return make_page(std::move(out), page);
}

Result<std::unordered_map<std::string, std::string>> node_names(store::Tx& tx) {
  std::unordered_map<std::string, std::string> names;
  for (const auto& r : GP_TRY(tx.query("SELECT id, name FROM nodes")))
    names.emplace(r.text(0), r.text(1));
  return names;
}

Result<Node> apply_action(store::Tx& tx, const Env& w, const std::string& node_id,
                          NodeAction action, const std::string& reason,
                          std::optional<int64_t> drain_deadline) {
  Node n = GP_TRY(load_node(tx, node_id));
  if (drain_deadline && action != NodeAction::kDrain)
    return fail(Error::invalid("a deadline is for a drain only"));
  // A drain stays `draining` while allocations are on the node; alloc::Service completes it.
  NodeState next = GP_TRY(transition(n.state, action));
  if (action == NodeAction::kDrain) n.drain_deadline = drain_deadline;
  GP_TRY_VOID(save_state(tx, w, n, next, reason));
  if (next == NodeState::kRetired) {
    GP_TRY_VOID(revoke_node(tx, w, n.id, "node retired"));
    GP_TRY_VOID(tx.exec("UPDATE gpus SET present = 0 WHERE node_id = ?", {n.id}));
    // A retired node's GPUs owe no service any more.
    for (const auto& r : GP_TRY(tx.query("SELECT gpu_uuid FROM downtime_intervals WHERE node_id "
                                         "= ? AND gpu_uuid <> '' AND end_us IS NULL",
                                         {n.id})))
      GP_TRY_VOID(close_downtime(tx, n.id, r.text(0), n.updated_at));
  }
  return n;
}

Result<std::vector<Node>> overdue_drains(store::Tx& tx, int64_t now) {
  std::vector<Node> out;
  for (const auto& r : GP_TRY(tx.query(
           fmt::format(
               "SELECT {}, {} FROM nodes WHERE state = 'draining' AND drain_deadline IS NOT "
               "NULL AND drain_deadline <= ? ORDER BY id",
               kNodeCols, kPoolNameCol),
           {now})))
    out.push_back(node_from(r));
  return out;
}

Result<std::vector<Node>> draining_nodes(store::Tx& tx) {
  std::vector<Node> out;
  for (const auto& r :
       GP_TRY(tx.query(fmt::format("SELECT {}, {} FROM nodes WHERE state = 'draining' ORDER BY id",
                                   kNodeCols, kPoolNameCol))))
    out.push_back(node_from(r));
  return out;
}

Result<bool> all_heard_since(store::Tx& tx, const std::vector<std::string>& node_ids,
                             int64_t since) {
  if (node_ids.empty()) return true;
  store::Params params(node_ids.begin(), node_ids.end());
  params.emplace_back(since);
  std::string marks(node_ids.size() * 2 - 1, ',');
  for (size_t i = 0; i < marks.size(); i += 2) marks[i] = '?';
  auto row = GP_TRY(tx.query_one(
      fmt::format("SELECT COUNT(*) FROM nodes WHERE id IN ({}) AND (last_heartbeat IS NULL OR "
                  "last_heartbeat < ?)",
                  marks),
      params));
  return row->integer(0) == 0;
}

Result<std::vector<SchedulerNode>> scheduler_nodes(store::Tx& tx) {
  std::vector<SchedulerNode> out;
  for (const auto& r : GP_TRY(tx.query(
           "SELECT n.id, n.name, COALESCE(n.pool_id, ''), COALESCE(p.name, ''), "
           "COALESCE(p.tenant_id, ''), n.state, n.cordoned, n.rack, n.nvlink_domain FROM nodes n "
           "LEFT JOIN pools p ON p.id = n.pool_id WHERE n.state <> 'retired' ORDER BY n.name"))) {
    const auto state = parse_node_state(r.text(5));
    out.push_back({.id = r.text(0),
                   .name = r.text(1),
                   .pool_id = r.text(2),
                   .pool_name = r.text(3),
                   .pool_tenant_id = r.text(4),
                   .rack = r.text(7),
                   .nvlink_domain = r.text(8),
                   .schedulable = state && schedulable(*state) && r.integer(6) == 0});
  }
  return out;
}

Result<Node> set_cordoned(store::Tx& tx, const Env& w, const std::string& node_id, bool cordon) {
  Node n = GP_TRY(load_node(tx, node_id));
  if (n.state == NodeState::kRetired) return fail(Error::conflict("node is retired"));
  n.cordoned = cordon;
  n.updated_at = w.now();
  ++n.version;
  GP_TRY_VOID(tx.exec("UPDATE nodes SET cordoned=?, updated_at=?, version=? WHERE id=?",
                      {int64_t(cordon), n.updated_at, n.version, n.id}));
  return n;
}

// ---------------- GPUs ----------------

namespace {
constexpr std::string_view kGpuCols =
    "uuid, node_id, idx, model, product, memory_bytes, pci_bus_id, numa_node, nvlink_peers, "
    "mig_capable, mode, mig_layout, health, health_reason";
Gpu gpu_from(const Row& r) {
  Gpu g;
  g.info.uuid = r.text(0);
  g.node_id = r.text(1);
  g.info.index = int(r.integer(2));
  g.info.model = r.text(3);
  g.info.product = r.text(4);
  g.info.memory_bytes = r.integer(5);
  g.info.pci_bus_id = r.text(6);
  g.info.numa_node = int(r.integer(7));
  Json peers = Json::parse(r.text(8), nullptr, false);
  if (peers.is_array())
    for (const auto& p : peers) g.info.nvlink_peers.push_back(p.get<std::string>());
  g.info.mig_capable = r.integer(9) != 0;
  g.info.mode = parse_gpu_mode(r.text(10)).value_or(GpuMode::kWhole);
  g.info.mig_instances = layout_from(r.text(11));
  g.health = r.text(12);
  g.health_reason = r.text(13);
  return g;
}
}  // namespace

Result<std::vector<Gpu>> list_gpus(store::Tx& tx, const std::optional<std::string>& node_id) {
  std::vector<Row> rows;
  if (node_id)
    rows = GP_TRY(tx.query(
        fmt::format("SELECT {} FROM gpus WHERE node_id = ? AND present = 1 ORDER BY idx", kGpuCols),
        {*node_id}));
  else
    rows = GP_TRY(tx.query(
        fmt::format("SELECT {} FROM gpus WHERE present = 1 ORDER BY node_id, idx", kGpuCols)));
  std::vector<Gpu> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(gpu_from(r));
  return out;
}

Result<std::optional<Gpu>> find_gpu(store::Tx& tx, const std::string& uuid) {
  auto row =
      GP_TRY(tx.query_one(fmt::format("SELECT {} FROM gpus WHERE uuid = ?", kGpuCols), {uuid}));
  if (!row) return std::optional<Gpu>();
  return std::optional<Gpu>(gpu_from(*row));
}

Result<std::map<std::string, std::string, std::less<>>> gpu_nodes(store::Tx& tx) {
  std::map<std::string, std::string, std::less<>> out;
  for (const auto& r : GP_TRY(tx.query("SELECT uuid, node_id FROM gpus")))
    out[r.text(0)] = r.text(1);
  return out;
}

Result<Node> apply_inventory(store::Tx& tx, const Env& w, const std::string& node_id,
                             const Inventory& inv) {
  Node n = GP_TRY(load_node(tx, node_id));
  if (inv.node.name != n.info.name)
    return fail(Error::invalid(
        fmt::format("inventory is for node '{}', this is node '{}'", inv.node.name, n.info.name)));
  // A GPU lives in one node: refuse the whole report if any GPU belongs to another live node.
  for (const auto& g : inv.gpus) {
    auto owner = GP_TRY(tx.query_one(
        "SELECT g.node_id, n.name FROM gpus g JOIN nodes n ON n.id = g.node_id "
        "WHERE g.uuid = ? AND g.node_id != ? AND g.present = 1 AND n.state != 'retired'",
        {g.uuid, n.id}));
    if (owner)
      return fail(Error::conflict(
          fmt::format("GPU {} is registered to node {}: retire that node before moving the GPU",
                      g.uuid, owner->text(1))));
  }
  int64_t now = w.now();
  std::set<std::string> reported;
  for (const auto& g : inv.gpus) {
    reported.insert(g.uuid);
    std::string health = g.health.healthy() ? "healthy" : "unhealthy";
    // Unhealthy stays unhealthy until an operator clears it: a GPU that threw an XID and then
    // reported clean is not trusted again automatically.
    auto prev = GP_TRY(
        tx.query_one("SELECT health, health_reason, node_id FROM gpus WHERE uuid = ?", {g.uuid}));
    std::string reason = g.health.reason();
    GP_TRY_VOID(record_health_report(tx, n.id, g, now));
    const auto repair = GP_TRY(find_repair(tx, g.uuid));
    if (repair && health == "healthy" && !g.health.diagnostics.empty()) {
      // The first clean report of the agent's repair check (DCGM's diagnostics where the node
      // has DCGM): back in service.
      GP_TRY_VOID(end_repair(tx, g.uuid, n.id, now));
    } else if (repair) {
      health = "unhealthy";
      if (reason.empty()) reason = "waiting for the node's health check";
      reason.insert(0, "in repair: ");
    } else if (prev && prev->text(0) == "unhealthy" && health == "healthy") {
      health = "unhealthy";
      reason = prev->text(1);
    }
    // Downtime of this GPU: opens when it stops being healthy, closes when it is healthy again.
    const bool was_healthy = !prev || prev->text(2) != n.id || prev->text(0) == "healthy";
    if (was_healthy && health != "healthy")
      GP_TRY_VOID(open_downtime(
          tx, n.id, g.uuid, reason.empty() ? health : fmt::format("{}: {}", health, reason), now));
    else if (!was_healthy && health == "healthy")
      GP_TRY_VOID(close_downtime(tx, n.id, g.uuid, now));
    // An upsert, not a delete and insert: other tables (the scheduler's GPU plans) refer to it.
    GP_TRY_VOID(tx.exec(
        fmt::format(
            "INSERT INTO gpus ({}, present, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,1,?) "
            "ON CONFLICT (uuid) DO UPDATE SET node_id = excluded.node_id, idx = excluded.idx, "
            "model = excluded.model, product = excluded.product, memory_bytes = "
            "excluded.memory_bytes, pci_bus_id = excluded.pci_bus_id, numa_node = "
            "excluded.numa_node, nvlink_peers = excluded.nvlink_peers, mig_capable = "
            "excluded.mig_capable, mode = excluded.mode, mig_layout = excluded.mig_layout, "
            "health = excluded.health, health_reason = excluded.health_reason, present = 1, "
            "updated_at = excluded.updated_at",
            kGpuCols),
        {g.uuid, n.id, int64_t(g.index), g.model, g.product, g.memory_bytes, g.pci_bus_id,
         int64_t(g.numa_node), Json(g.nvlink_peers).dump(), int64_t(g.mig_capable),
         std::string(gpu_mode_name(g.mode)), layout_json(g.mig_instances).dump(), health, reason,
         now}));
  }
  auto existing =
      GP_TRY(tx.query("SELECT uuid, health FROM gpus WHERE node_id = ? AND present = 1", {n.id}));
  for (const auto& r : existing)
    if (!reported.contains(r.text(0))) {
      GP_TRY_VOID(tx.exec(
          "UPDATE gpus SET health='missing', health_reason='no longer reported by the node', "
          "updated_at=? WHERE uuid=?",
          {now, r.text(0)}));
      if (r.text(1) == "healthy")
        GP_TRY_VOID(
            open_downtime(tx, n.id, r.text(0), "missing: no longer reported by the node", now));
    }
  n.info = inv.node;
  n.gpu_runtime = inv.gpu_runtime;
  n.updated_at = now;
  GP_TRY_VOID(
      tx.exec("UPDATE nodes SET cpu_millis=?, memory_bytes=?, rack=?, nvlink_domain=?, labels=?, "
              "gpu_runtime=?, updated_at=? WHERE id=?",
              {n.info.cpu_millis, n.info.memory_bytes, n.info.rack, n.info.nvlink_domain,
               Json(n.info.labels).dump(), gpu_runtime_value(n.gpu_runtime), now, n.id}));
  return n;
}

Result<Enrolled> enroll(store::Tx& tx, const Env& w, std::string_view join_token,
                        const Inventory& inv) {
  auto parsed = iam::parse_token(join_token);
  if (!parsed || !parsed->id.starts_with("jtk_"))
    return fail(Error::unauthenticated("malformed join token"));
  auto row = GP_TRY(
      tx.query_one("SELECT secret_hash, expires_at, used_at, pool_id FROM join_tokens WHERE id = ?",
                   {parsed->id}));
  if (!row || !constant_time_equal(row->text(0), iam::hash_secret(parsed->secret)))
    return fail(Error::unauthenticated("unknown join token"));
  if (!row->is_null(2)) return fail(Error::unauthenticated("join token has already been used"));
  if (row->integer(1) <= w.now()) return fail(Error::unauthenticated("join token has expired"));
  auto issued = iam::issue_token(w.ids.next("nod"), w.random);
  Node n = GP_TRY(insert_node(tx, w, inv, row->opt_text(3), NodeState::kEnrolling, "agent",
                              issued.secret_hash, issued.id));
  GP_TRY_VOID(apply_inventory(tx, w, n.id, inv));
  NodeState ready = GP_TRY(transition(n.state, NodeAction::kActivate));
  GP_TRY_VOID(save_state(tx, w, n, ready, "enrolled"));
  GP_TRY_VOID(tx.exec("UPDATE join_tokens SET used_at = ?, node_id = ? WHERE id = ?",
                      {w.now(), n.id, parsed->id}));
  return Enrolled{std::move(n), std::move(issued.token)};
}

Result<Node> import_node(store::Tx& tx, const Env& w, const Inventory& inv,
                         const std::optional<std::string>& pool_id, bool ready) {
  Node n = GP_TRY(insert_node(tx, w, inv, pool_id, NodeState::kEnrolling, "kubernetes", Null{},
                              w.ids.next("nod")));
  GP_TRY_VOID(apply_inventory(tx, w, n.id, inv));
  GP_TRY_VOID(
      save_state(tx, w, n, ready ? NodeState::kReady : NodeState::kMaintenance,
                 ready ? "imported" : "imported: not ready or unschedulable in Kubernetes"));
  return n;
}

Result<JoinToken> create_join_token(store::Tx& tx, const Env& w,
                                    const std::optional<std::string>& pool_id,
                                    const std::string& created_by, Duration ttl) {
  auto issued = iam::issue_token(w.ids.next("jtk"), w.random);
  JoinToken t{.id = issued.id,
              .token = std::move(issued.token),
              .secret_hash = issued.secret_hash,
              .pool_id = pool_id,
              .created_by = created_by,
              .created_at = w.now(),
              .expires_at = w.now() + ttl.count()};
  static const std::string kInsert =
      fmt::format("INSERT INTO join_tokens ({}) VALUES ({})", store::columns_of<JoinToken>(),
                  store::placeholders_of<JoinToken>());
  GP_TRY_VOID(tx.exec(kInsert, store::params_of(t)));
  return t;
}

Result<bool> inventory_unchanged(store::Tx& tx, const Env& w, const std::string& node_id,
                                 std::string_view digest) {
  auto row = GP_TRY(tx.query_one(
      "SELECT inventory_digest, inventory_applied_at FROM nodes WHERE id = ?", {node_id}));
  if (!row || row->is_null(0) || row->is_null(1) || row->text(0) != digest) return false;
  return w.now() - row->integer(1) <
         std::chrono::duration_cast<std::chrono::microseconds>(kInventoryResync).count();
}

Result<void> record_inventory_digest(store::Tx& tx, const Env& w, const std::string& node_id,
                                     std::string_view digest) {
  GP_TRY(tx.exec("UPDATE nodes SET inventory_digest = ?, inventory_applied_at = ? WHERE id = ?",
                 {std::string(digest), w.now(), node_id}));
  return ok();
}

Result<Node> heartbeat(store::Tx& tx, const Env& w, const std::string& node_id) {
  Node n = GP_TRY(load_node(tx, node_id));
  if (n.state == NodeState::kRetired) return fail(Error::unauthenticated("node is retired"));
  n.last_heartbeat = w.now();
  GP_TRY_VOID(
      tx.exec("UPDATE nodes SET last_heartbeat = ? WHERE id = ?", {*n.last_heartbeat, n.id}));
  if (n.state == NodeState::kFailed && n.state_reason == "missed heartbeats")
    GP_TRY_VOID(save_state(tx, w, n, GP_TRY(transition(n.state, NodeAction::kRecover)),
                           "heartbeats resumed"));
  return n;
}

Result<void> record_underlay_address(store::Tx& tx, const std::string& node_id,
                                     const std::string& address) {
  GP_TRY(
      tx.exec("UPDATE nodes SET underlay_address = ? WHERE id = ? AND (underlay_address IS "
              "NULL OR underlay_address <> ?)",
              {address, node_id, address}));
  return ok();
}

Result<std::optional<std::string>> underlay_address(store::Tx& tx, const std::string& node_id) {
  auto row = GP_TRY(tx.query_one("SELECT underlay_address FROM nodes WHERE id = ?", {node_id}));
  if (!row || row->is_null(0)) return std::optional<std::string>{};
  return std::optional<std::string>{row->text(0)};
}

namespace {

// The newest of the report's samples of each GPU and instance replaces the stored reading, unless
// that one is newer still (a report delayed behind a later one). One statement per 64 readings;
// a reading appears once per statement, as PostgreSQL's ON CONFLICT requires.
Result<void> record_telemetry(store::Tx& tx, const std::string& node_id,
                              const std::vector<Sample>& samples) {
  std::map<std::pair<std::string, std::string>, const Sample*> newest;
  for (const Sample& s : samples) {
    auto& slot = newest[{s.gpu_uuid, s.instance}];
    if (!slot || s.time_us >= slot->time_us) slot = &s;
  }
  constexpr size_t kRowsPerStatement = 64;
  constexpr std::string_view kRow = "(?,?,?,?,?,?,?,?,?,?,?,?,?)";
  auto it = newest.begin();
  while (it != newest.end()) {
    std::string sql =
        "INSERT INTO gpu_telemetry (gpu_uuid, instance, node_id, time_us, util_pct, "
        "mem_used_bytes, mem_total_bytes, power_mw, energy_mj, temperature_c, sm_clock_mhz, "
        "ecc_corrected, ecc_uncorrected) VALUES ";
    store::Params args;
    for (size_t rows = 0; rows < kRowsPerStatement && it != newest.end(); ++rows, ++it) {
      const Sample& s = *it->second;
      if (rows > 0) sql += ',';
      sql += kRow;
      args.insert(args.end(), {s.gpu_uuid, s.instance, node_id, s.time_us, int64_t(s.util_pct),
                               s.mem_used_bytes, s.mem_total_bytes, s.power_mw, s.energy_mj,
                               int64_t(s.temperature_c), int64_t(s.sm_clock_mhz), s.ecc_corrected,
                               s.ecc_uncorrected});
    }
    sql +=
        " ON CONFLICT (gpu_uuid, instance) DO UPDATE SET node_id = excluded.node_id, time_us = "
        "excluded.time_us, util_pct = excluded.util_pct, mem_used_bytes = "
        "excluded.mem_used_bytes, mem_total_bytes = excluded.mem_total_bytes, power_mw = "
        "excluded.power_mw, energy_mj = excluded.energy_mj, temperature_c = "
        "excluded.temperature_c, sm_clock_mhz = excluded.sm_clock_mhz, ecc_corrected = "
        "excluded.ecc_corrected, ecc_uncorrected = excluded.ecc_uncorrected WHERE "
        "excluded.time_us >= gpu_telemetry.time_us";
    GP_TRY_VOID(tx.exec(sql, args));
  }
  return ok();
}

}  // namespace

Result<std::vector<Sample>> parse_samples(const Json& j, const Env& w) {
  constexpr int64_t kMaxBytes = int64_t(1) << 50;
  if (!j.is_array()) return fail(Error::invalid("samples must be an array"));
  if (j.size() > 10000) return fail(Error::invalid("at most 10000 samples per report"));
  std::vector<Sample> out;
  for (size_t i = 0; i < j.size(); ++i) {
    ObjectReader r(j[i], fmt::format("samples[{}]", i));
    Sample s;
    s.gpu_uuid = r.string("gpu_uuid", 96);
    s.instance = r.optional_string("instance", 32).value_or("");
    auto t = r.optional_string("time", 40);
    s.util_pct = int(r.optional_integer("util_pct", -1, 100).value_or(-1));
    s.mem_used_bytes = r.optional_integer("mem_used_bytes", 0, kMaxBytes).value_or(0);
    s.mem_total_bytes = r.optional_integer("mem_total_bytes", -1, kMaxBytes).value_or(-1);
    s.power_mw = r.optional_integer("power_mw", -1, int64_t(1) << 32).value_or(-1);
    s.energy_mj = r.optional_integer("energy_mj", -1, int64_t(1) << 62).value_or(-1);
    s.temperature_c = int(r.optional_integer("temperature_c", -1, 200).value_or(-1));
    s.sm_clock_mhz = int(r.optional_integer("sm_clock_mhz", -1, 100000).value_or(-1));
    s.ecc_corrected = r.optional_integer("ecc_corrected", -1, int64_t(1) << 62).value_or(-1);
    s.ecc_uncorrected = r.optional_integer("ecc_uncorrected", -1, int64_t(1) << 62).value_or(-1);
    GP_TRY_VOID(r.finish());
    TimePoint tp = w.clock.now();
    if (t && !parse_rfc3339(*t, &tp))
      return fail(Error::invalid(fmt::format("samples[{}].time is not RFC 3339", i)));
    if (tp > w.clock.now() + std::chrono::minutes(5))
      return fail(Error::invalid(fmt::format("samples[{}].time is in the future", i)));
    s.time_us = to_unix_micros(tp);
    out.push_back(std::move(s));
  }
  return out;
}

Result<int64_t> record_samples(store::Tx& tx, const std::string& node_id,
                               const std::vector<Sample>& samples) {
  std::set<std::string> own;
  for (const auto& r :
       GP_TRY(tx.query("SELECT uuid FROM gpus WHERE node_id = ? AND present = 1", {node_id})))
    own.insert(r.text(0));
  for (const auto& s : samples)
    if (!own.contains(s.gpu_uuid))
      return fail(
          Error::invalid(fmt::format("sample for GPU {} that is not on this node", s.gpu_uuid)));
  // A node's report is one statement per 64 samples: a heartbeat carries one per GPU, and
  // one multi-row INSERT costs about what one row's does.
  constexpr size_t kRowsPerStatement = 64;
  for (size_t first = 0; first < samples.size(); first += kRowsPerStatement) {
    const size_t rows = std::min(kRowsPerStatement, samples.size() - first);
    std::string sql =
        "INSERT INTO gpu_samples (gpu_uuid, instance, time_us, util_pct, mem_used_bytes) VALUES ";
    store::Params args;
    args.reserve(rows * 5);
    for (size_t i = first; i < first + rows; ++i) {
      const Sample& s = samples[i];
      sql += i == first ? "(?,?,?,?,?)" : ",(?,?,?,?,?)";
      args.insert(args.end(),
                  {s.gpu_uuid, s.instance, s.time_us, int64_t(s.util_pct), s.mem_used_bytes});
    }
    GP_TRY_VOID(tx.exec(sql, args));
  }
  GP_TRY_VOID(record_telemetry(tx, node_id, samples));
  return int64_t(samples.size());
}

Result<std::vector<SeriesPoint>> sample_series(store::Tx& tx, const std::string& gpu_uuid,
                                               const std::string& instance, int64_t from_us,
                                               int64_t to_us, int buckets) {
  if (to_us <= from_us || buckets < 1) return std::vector<SeriesPoint>{};
  const int64_t span = std::max<int64_t>(1, (to_us - from_us + buckets - 1) / buckets);
  std::map<int64_t, SeriesPoint> by_bucket;
  double util_sum = 0;
  int64_t util_bucket = -1;
  int util_n = 0;
  auto close = [&] {
    if (util_bucket >= 0 && util_n > 0) by_bucket[util_bucket].util_pct = util_sum / util_n;
    util_sum = 0;
    util_n = 0;
  };
  for (const auto& r : GP_TRY(tx.query(
           "SELECT time_us, util_pct, mem_used_bytes FROM gpu_samples WHERE gpu_uuid = ? AND "
           "instance = ? AND time_us >= ? AND time_us < ? ORDER BY time_us",
           {gpu_uuid, instance, from_us, to_us}))) {
    const int64_t b = (r.integer(0) - from_us) / span;
    if (b != util_bucket) close();
    util_bucket = b;
    SeriesPoint& p = by_bucket[b];
    p.time_us = from_us + b * span;
    p.mem_used_bytes = std::max(p.mem_used_bytes, r.integer(2));
    ++p.samples;
    if (r.integer(1) >= 0) {
      util_sum += double(r.integer(1));
      ++util_n;
    }
  }
  close();
  std::vector<SeriesPoint> out;
  out.reserve(by_bucket.size());
  for (auto& [b, p] : by_bucket) out.push_back(p);
  return out;
}

Result<UtilizationSum> utilization_sum(store::Tx& tx, const std::string& gpu_uuid,
                                       const std::string& instance, int64_t from_us,
                                       int64_t to_us) {
  auto row = GP_TRY(tx.query_one(
      "SELECT COUNT(*), COALESCE(SUM(util_pct), 0) FROM gpu_samples WHERE gpu_uuid = ? AND "
      "instance = ? AND time_us >= ? AND time_us < ? AND util_pct >= 0",
      {gpu_uuid, instance, from_us, to_us}));
  return UtilizationSum{row->integer(0), row->integer(1)};
}

Result<std::vector<Telemetry>> latest_telemetry(store::Tx& tx) {
  std::vector<Telemetry> out;
  for (const auto& r : GP_TRY(tx.query(
           "SELECT t.node_id, t.gpu_uuid, t.instance, t.time_us, t.util_pct, t.mem_used_bytes, "
           "t.mem_total_bytes, t.power_mw, t.energy_mj, t.temperature_c, t.sm_clock_mhz, "
           "t.ecc_corrected, t.ecc_uncorrected FROM gpu_telemetry t JOIN gpus g ON g.uuid = "
           "t.gpu_uuid AND g.node_id = t.node_id AND g.present = 1 "
           "ORDER BY t.node_id, t.gpu_uuid, t.instance"))) {
    out.push_back({.node_id = r.text(0),
                   .sample = {.gpu_uuid = r.text(1),
                              .instance = r.text(2),
                              .time_us = r.integer(3),
                              .util_pct = int(r.integer(4)),
                              .mem_used_bytes = r.integer(5),
                              .mem_total_bytes = r.integer(6),
                              .power_mw = r.integer(7),
                              .energy_mj = r.integer(8),
                              .temperature_c = int(r.integer(9)),
                              .sm_clock_mhz = int(r.integer(10)),
                              .ecc_corrected = r.integer(11),
                              .ecc_uncorrected = r.integer(12)}});
  }
  return out;
}

Result<std::vector<Node>> sweep_missed_heartbeats(store::Tx& tx, const Env& w, Duration timeout) {
  auto rows = GP_TRY(tx.query(
      fmt::format(
          "SELECT {}, {} FROM nodes WHERE source = 'agent' AND state IN ('ready', 'draining', "
          "'enrolling') AND last_heartbeat < ?",
          kNodeCols, kPoolNameCol),
      {w.now() - timeout.count()}));
  std::vector<Node> failed;
  for (const auto& r : rows) {
    Node n = node_from(r);
    GP_TRY_VOID(
        save_state(tx, w, n, GP_TRY(transition(n.state, NodeAction::kFail)), "missed heartbeats"));
    failed.push_back(std::move(n));
  }
  return failed;
}

Result<Json> summary(store::Tx& tx, const std::set<std::string>& held) {
  Json by_model = Json::object();
  int64_t total = 0;
  for (const auto& r : GP_TRY(tx.query(
           "SELECT g.uuid, g.model, g.mode, g.health, n.state FROM gpus g JOIN nodes n ON n.id = "
           "g.node_id WHERE g.present = 1 AND n.state != 'retired'"))) {
    Json& m = by_model[r.text(1)];
    if (m.is_null())
      m = {{"total", 0},     {"healthy", 0}, {"unhealthy", 0},           {"missing", 0},
           {"allocated", 0}, {"free", 0},    {"by_mode", Json::object()}};
    ++total;
    m["total"] = m["total"].get<int64_t>() + 1;
    m[r.text(3)] = m.value(r.text(3), int64_t(0)) + 1;
    m["by_mode"][r.text(2)] = m["by_mode"].value(r.text(2), int64_t(0)) + 1;
    // Allocated: GPUs a live allocation holds, whole or in part (a MIG instance or a share).
    // Free: healthy GPUs on ready nodes that nothing holds.
    if (held.contains(r.text(0)))
      m["allocated"] = m["allocated"].get<int64_t>() + 1;
    else if (r.text(3) == "healthy" && r.text(4) == "ready")
      m["free"] = m["free"].get<int64_t>() + 1;
  }
  // Unavailable: neither free nor held (unhealthy, or on a node that is not ready), so that
  // total = free + allocated + unavailable.
  for (auto& [model, m] : by_model.items())
    m["unavailable"] =
        m["total"].get<int64_t>() - m["free"].get<int64_t>() - m["allocated"].get<int64_t>();
  Json nodes = Json::object();
  for (const auto& r : GP_TRY(tx.query("SELECT state, COUNT(*) FROM nodes GROUP BY state")))
    nodes[r.text(0)] = r.integer(1);
  return Json{{"gpus_total", total}, {"gpus_by_model", by_model}, {"nodes_by_state", nodes}};
}

}  // namespace gp::fleet
