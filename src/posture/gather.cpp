// The imperative shell of the posture report: reads one tenant's facts from the store inside
// the caller's transaction. Every judgement is left to evaluate(); this file only looks.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "alloc/alloc.h"
#include "fleet/fleet.h"
#include "posture/posture.h"
#include "render/render.h"
#include "storage/storage.h"

namespace gp::posture {
namespace {

constexpr std::string_view kLive = "('pending','placed','active')";

Result<IdentityFacts> gather_identity(store::Tx& tx, const tenancy::Tenant& t, int64_t now) {
  IdentityFacts f;
  auto users = GP_TRY(
      tx.query_one("SELECT COUNT(*) FROM users WHERE tenant_id = ? AND state = 'active'", {t.id}));
  f.users = users ? static_cast<int>(users->integer(0)) : 0;
  auto sas = GP_TRY(tx.query_one(
      "SELECT COUNT(*) FROM service_accounts WHERE tenant_id = ? AND state = 'active'", {t.id}));
  f.service_accounts = sas ? static_cast<int>(sas->integer(0)) : 0;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT id, name, owner_kind, owner_id, expires_at FROM api_keys WHERE tenant_id = ? "
           "AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?) ORDER BY id",
           {t.id, now})))
    f.active_keys.push_back(
        {row.text(0), row.text(1), row.text(2), row.text(3), row.opt_integer(4)});
  // Bindings granted inside the tenant, and bindings anywhere held by the tenant's subjects.
  for (const auto& row : GP_TRY(tx.query(
           "SELECT b.id, b.role, b.tenant_id, b.project_id, b.subject_kind, b.subject_id, "
           "COALESCE(u.tenant_id, s.tenant_id) FROM role_bindings b "
           "LEFT JOIN users u ON b.subject_kind = 'user' AND u.id = b.subject_id "
           "LEFT JOIN service_accounts s ON b.subject_kind = 'service_account' AND s.id = "
           "b.subject_id WHERE b.tenant_id = ? OR u.tenant_id = ? OR s.tenant_id = ? ORDER BY b.id",
           {t.id, t.id, t.id}))) {
    BindingFact b;
    b.id = row.text(0);
    b.role = row.text(1);
    b.scope_tenant = row.opt_text(2);
    b.scope = !b.scope_tenant ? "platform" : row.is_null(3) ? "tenant" : "project";
    b.subject_kind = row.text(4);
    b.subject_id = row.text(5);
    b.subject_tenant = row.opt_text(6);
    f.bindings.push_back(std::move(b));
  }
  return f;
}

Result<std::vector<alloc::Allocation>> all_allocations(store::Tx& tx, const tenancy::Tenant& t) {
  std::vector<alloc::Allocation> out;
  tenancy::TenantScope scope(t.id);
  PageRequest page{.after = std::nullopt, .limit = 1000};
  while (true) {
    auto p = GP_TRY(alloc::list_allocations(tx, scope, {}, page));
    for (auto& a : p.items) out.push_back(std::move(a));
    if (!p.next) break;
    page.after = p.next;
  }
  return out;
}

Result<HardwareFacts> gather_hardware(store::Tx& tx, const tenancy::Tenant& t,
                                      const std::vector<alloc::Allocation>& allocations,
                                      Audience audience) {
  HardwareFacts f;
  f.audience = audience;
  std::set<std::string> exclusive;  // the tenant's live allocations on node-exclusive tiers
  for (const auto& a : allocations)
    if (alloc::live(a.state)) {
      f.live.push_back({a.id, std::string(alloc::state_name(a.state)), a.request.tier});
      if (holds_nodes_alone(a.request.tier)) exclusive.insert(a.id);
    }
  std::map<std::pair<std::string, std::string>, std::set<std::string>> shared;  // -> tenant ids
  for (const auto& row : GP_TRY(tx.query(
           fmt::format("SELECT nd.name, n1.allocation_id, a2.tenant_id FROM allocation_nodes n1 "
                       "JOIN allocations a1 ON a1.id = n1.allocation_id "
                       "JOIN allocation_nodes n2 ON n2.node_id = n1.node_id "
                       "JOIN allocations a2 ON a2.id = n2.allocation_id "
                       "JOIN nodes nd ON nd.id = n1.node_id "
                       "WHERE a1.tenant_id = ? AND a1.state IN {0} AND a2.tenant_id <> ? "
                       "AND a2.state IN {0} ORDER BY nd.name, n1.allocation_id",
                       kLive),
           {t.id, t.id})))
    shared[{row.text(0), row.text(1)}].insert(row.text(2));
  for (auto& [key, tenants] : shared) {
    if (audience == Audience::kOperator)
      f.shared_nodes.push_back({key.first, key.second, static_cast<int>(tenants.size())});
    else if (exclusive.contains(key.second))
      f.shared_nodes.push_back({key.first, key.second, std::nullopt});
  }
  return f;
}

Result<SchedulingFacts> gather_scheduling(store::Tx& tx, const tenancy::Tenant& t) {
  SchedulingFacts f;
  std::map<std::string, std::vector<ModelQuotaFact>> by_project;
  for (const auto& row : GP_TRY(
           tx.query("SELECT project_id, model, nominal, hard_limit FROM quotas WHERE tenant_id = ? "
                    "ORDER BY project_id, model",
                    {t.id})))
    by_project[row.text(0)].push_back({row.text(1), row.integer(2), row.opt_integer(3)});
  f.tenant_models = by_project[""];
  for (const auto& row :
       GP_TRY(tx.query("SELECT id, name FROM projects WHERE tenant_id = ? ORDER BY name", {t.id})))
    f.projects.push_back({row.text(1), by_project[row.text(0)]});
  return f;
}

Result<NetworkFacts> gather_network(store::Tx& tx, const tenancy::Tenant& t,
                                    const GatherOptions& opts) {
  NetworkFacts f;
  f.supernet = opts.supernet;
  f.tls = opts.tls;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT t.id, t.name, s.vni, s.cidr FROM tenant_segments s JOIN tenants t ON t.id = "
           "s.tenant_id ORDER BY t.name"))) {
    auto cidr = network::parse_cidr(row.text(3));
    if (!cidr) return fail(Error::internal("stored segment CIDR unreadable: " + row.text(3)));
    network::Segment s{"", static_cast<uint32_t>(row.integer(2)), *cidr};
    if (row.text(0) == t.id) {
      s.tenant = row.text(1);
      f.segment = s;
    } else {
      f.other_segments.push_back(std::move(s));
    }
  }
  auto row = GP_TRY(
      tx.query_one("SELECT policy FROM tenant_network_policies WHERE tenant_id = ?", {t.id}));
  if (!row) {
    f.policy = network::TenantPolicy{.tenant = t.name};
    return f;
  }
  f.policy_stored = true;
  // Read leniently (checked against the whole IPv4 space) so that evaluate() sees a policy that
  // names tenant addresses instead of an unreadable one.
  auto j = parse_json(row->text(0));
  if (!j) {
    f.policy_error = j.error().message;
    return f;
  }
  auto p = network::policy_from_json(*j, t.name, network::Ipv4Cidr{0xFFFFFFFF, 32});
  if (!p)
    f.policy_error = p.error().message;
  else
    f.policy = std::move(*p);
  return f;
}

Result<StorageFacts> gather_storage(store::Tx& tx, const tenancy::Tenant& t) {
  StorageFacts f;
  auto row = GP_TRY(tx.query_one(
      "SELECT keyring, destroyed, updated_at FROM tenant_keyrings WHERE tenant_id = ?", {t.id}));
  if (row) {
    auto ring = GP_TRY(storage::keyring_from_json(GP_TRY(parse_json(row->text(0)))));
    KeyringFact k;
    k.destroyed = row->integer(1) != 0;
    k.changed_at = row->integer(2);
    for (const auto& tk : ring.tenants) {
      k.destroyed = k.destroyed || tk.destroyed;
      k.current_version = tk.current_version;
      for (const auto& v : tk.versions) k.versions.push_back(v.version);
    }
    f.keyring = std::move(k);
  }
  for (const auto& s : GP_TRY(tx.query(
           "SELECT name, key_version, sealed FROM tenant_secrets WHERE tenant_id = ? ORDER BY name",
           {t.id}))) {
    SecretFact sf{s.text(0), static_cast<uint32_t>(s.integer(1)), ""};
    // An unreadable ciphertext record reads as sealed for nobody: evaluate() reports it.
    if (auto j = parse_json(s.text(2)))
      if (auto sealed = storage::sealed_secret_from_json(*j)) sf.sealed_for = sealed->tenant;
    f.secrets.push_back(std::move(sf));
  }
  // Volumes as the control plane plans them: the agents create exactly this tree (owners and
  // modes), and `gpuplane storage audit` checks what is really on disk.
  VolumeFacts v;
  if (auto ids = GP_TRY(tx.query_one(
          "SELECT first_id, count FROM tenant_storage_ids WHERE tenant_id = ?", {t.id}))) {
    v.ids_first = static_cast<uint32_t>(ids->integer(0));
    v.ids_count = static_cast<uint32_t>(ids->integer(1));
    storage::TenantVolumes tv{.tenant = t.name, .ids = {v.ids_first, v.ids_count}, .projects = {}};
    for (const auto& p : GP_TRY(tx.query("SELECT project_name, uid FROM project_volumes WHERE "
                                         "tenant_id = ? AND state = 'active' ORDER BY project_name",
                                         {t.id}))) {
      tv.projects.push_back(
          {.project = p.text(0), .id = static_cast<uint32_t>(p.integer(1)), .size_limits = {}});
    }
    if (auto plan = storage::plan_layout(tv)) {
      for (const auto& d : *plan)
        v.volumes.push_back({d.path, uint32_t(d.uid), uint32_t(d.gid), uint32_t(d.mode)});
    } else {
      // A stored id the layout refuses (outside the range): show it as it is stored.
      for (const auto& p : tv.projects)
        v.volumes.push_back({t.name + "/" + p.project, p.id, p.id, 02770});
    }
  }
  f.volumes = std::move(v);
  return f;
}

// ---- workload: probes through the admission policy the webhook applies ----

Json probe_pod(const std::string& ns) {
  Json container = {{"name", "probe"},
                    {"image", "registry.invalid/posture-probe:1"},
                    {"imagePullPolicy", "Always"},
                    {"securityContext",
                     {{"allowPrivilegeEscalation", false},
                      {"runAsNonRoot", true},
                      {"capabilities", {{"drop", Json::array({"ALL"})}}},
                      {"seccompProfile", {{"type", "RuntimeDefault"}}}}}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", "posture-probe"}, {"namespace", ns}}},
          {"spec", {{"containers", Json::array({container})}}}};
}

ProbeFact run_probe(const Json& pod, const std::string& ns,
                    const policy::TenantAdmissionContext& ctx,
                    std::initializer_list<std::string_view> controls) {
  auto verdict = policy::admit_object(pod, ns, ctx);
  ProbeFact p;
  p.level = fmt::format("{} {}", policy::pod_security_level_name(ctx.level),
                        policy::pod_security_version_name(ctx.version));
  std::vector<std::string> hits;
  for (const auto& v : verdict.violations)
    if (std::find(controls.begin(), controls.end(), v.control) != controls.end())
      hits.push_back(fmt::format("{} ({})", v.control, v.reason));
  p.denied = !verdict.allowed && !hits.empty();
  if (p.denied) {
    p.detail = fmt::format("{}", fmt::join(hits, ", "));
  } else {
    p.detail = verdict.allowed ? "admitted" : "refused only for unrelated reasons";
  }
  return p;
}

// The nodes of the tenant's live allocations on tiers that share nodes with other tenants
// (everything but dedicated-node and dedicated-pool), each with its agent's GPU runtime report.
// Whether a neighbour is there right now is not asked: the report must not tell (co-residency),
// and a node the tier may share needs the toolkit setting before the neighbour arrives.
Result<std::vector<SharedGpuNodeFact>> gather_node_sharing_gpu_nodes(
    store::Tx& tx, const std::vector<alloc::Allocation>& allocations) {
  std::set<std::string> node_ids;
  for (const auto& a : allocations)
    if (alloc::live(a.state) && !holds_nodes_alone(a.request.tier))
      for (const auto& row :
           GP_TRY(tx.query("SELECT node_id FROM allocation_nodes WHERE allocation_id = ?", {a.id})))
        node_ids.insert(row.text(0));
  std::vector<SharedGpuNodeFact> out;
  for (const auto& id : node_ids) {
    auto node = GP_TRY(fleet::find_node(tx, id));
    if (!node) continue;
    out.push_back({node->info.name, node->gpu_runtime});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.node < b.node; });
  return out;
}

Result<WorkloadFacts> gather_workload(store::Tx& tx, const tenancy::Tenant& t,
                                      const std::vector<alloc::Allocation>& allocations) {
  policy::TenantAdmissionContext ctx;  // the webhook's defaults: Pod Security restricted, latest
  ctx.tenant = t.name;
  ctx.isolation_class = t.isolation_class;
  for (Tier tier :
       {Tier::kDedicatedPool, Tier::kDedicatedNode, Tier::kDedicatedGpu, Tier::kMig, Tier::kShared})
    if (policy::class_allows(t.isolation_class, tier)) ctx.tiers.push_back(tier);
  ctx.require_pull_always = policy::class_requires_pull_always(t.isolation_class);
  // The probes run in a namespace of the tenant's, so only the rule under test can refuse them.
  const std::string ns = t.name + "-posture-probe";
  ctx.namespaces.push_back(ns);
  // Other tenants' pools, as the webhook sees them; a stand-in when there is none, so the rule
  // is still exercised.
  for (const auto& row : GP_TRY(
           tx.query("SELECT p.name, t.name FROM pools p JOIN tenants t ON t.id = p.tenant_id WHERE "
                    "p.tenant_id <> ? ORDER BY p.name",
                    {t.id}))) {
    policy::PoolPlacement pp;
    pp.name = row.text(0);
    pp.node_labels = {{std::string(render::kPoolLabel), row.text(0)},
                      {std::string(render::kTenantLabel), row.text(1)}};
    pp.taints.push_back({std::string(render::kTenantLabel), row.text(1), "NoSchedule"});
    ctx.other_pools.push_back(std::move(pp));
  }
  bool stand_in = ctx.other_pools.empty();
  if (stand_in)
    ctx.other_pools.push_back({"(another tenant's pool)",
                               {{std::string(render::kPoolLabel), "posture-other-pool"}},
                               {},
                               {}});

  WorkloadFacts f;
  Json pod = probe_pod(ns);
  pod["spec"]["containers"][0]["securityContext"]["privileged"] = true;
  f.privileged = run_probe(pod, ns, ctx, {"privileged"});

  pod = probe_pod(ns);
  pod["spec"]["volumes"] = Json::array({{{"name", "host"}, {"hostPath", {{"path", "/"}}}}});
  f.host_path = run_probe(pod, ns, ctx, {"hostPathVolumes", "restrictedVolumes"});

  pod = probe_pod(ns);
  pod["spec"]["hostNetwork"] = true;
  pod["spec"]["hostPID"] = true;
  pod["spec"]["hostIPC"] = true;
  f.host_namespaces = run_probe(pod, ns, ctx, {"hostNamespaces"});

  pod = probe_pod(ns);
  pod["spec"]["containers"][0]["ports"] = Json::array({{{"containerPort", 80}, {"hostPort", 80}}});
  f.host_ports = run_probe(pod, ns, ctx, {"hostPorts"});

  pod = probe_pod(ns);
  const auto& target = ctx.other_pools.front().node_labels.front();
  pod["spec"]["nodeSelector"] = {{target.first, target.second}};
  f.other_tenant_pool = run_probe(pod, ns, ctx, {"tenant.placement"});
  if (stand_in) f.other_tenant_pool.detail += " (no other tenant owns a pool: probed a stand-in)";

  // The issue 24 pod: no GPU requested, every GPU of the node asked for through the runtime.
  pod = probe_pod(ns);
  pod["spec"]["containers"][0]["env"] =
      Json::array({{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}}});
  f.device_env = run_probe(pod, ns, ctx, {"tenant.gpuDeviceEnv"});
  f.node_sharing_gpu_nodes = GP_TRY(gather_node_sharing_gpu_nodes(tx, allocations));
  return f;
}

Result<MeteringFacts> gather_metering(store::Tx& tx, const tenancy::Tenant& t,
                                      const std::vector<alloc::Allocation>& allocations) {
  MeteringFacts f;
  f.allocations = static_cast<int64_t>(allocations.size());
  for (const auto& row : GP_TRY(
           tx.query("SELECT a.id FROM allocations a WHERE a.tenant_id = ? AND NOT EXISTS (SELECT "
                    "1 FROM allocation_events e WHERE e.allocation_id = a.id) ORDER BY a.id",
                    {t.id})))
    f.allocations_without_events.push_back(row.text(0));
  // Metering keeps one open usage interval for every allocation that holds resources.
  UsageFacts usage;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT a.id FROM allocations a WHERE a.tenant_id = ? AND a.state IN ('placed', "
           "'active') AND NOT EXISTS (SELECT 1 FROM usage_intervals u WHERE u.allocation_id = "
           "a.id AND u.end_us IS NULL) ORDER BY a.id",
           {t.id})))
    usage.placed_without_usage.push_back(row.text(0));
  f.usage = std::move(usage);
  return f;
}

Result<AuditFacts> gather_audit(store::Tx& tx, const tenancy::Tenant& t, const GatherOptions& opts,
                                const ChainState& chain) {
  AuditFacts f;
  f.chain_ok = chain.verified && chain.report.ok;
  f.chain_reason = !chain.verified ? "no audit verification key available" : chain.report.reason;
  f.oldest_seq = chain.oldest_seq;
  auto row = GP_TRY(tx.query_one(
      "SELECT COUNT(*), COALESCE(MAX(time_us), 0) FROM audit_log WHERE tenant_id = ?", {t.id}));
  if (row) {
    f.tenant_entries = row->integer(0);
    f.latest_tenant_entry_at = row->integer(1);
  }
  // The whole chain is verified, but the report counts the tenant's own records in it: the
  // trail's total is a count of every other tenant's activity.
  f.records_checked = f.chain_ok ? f.tenant_entries : 0;
  f.reads_audited = opts.reads_audited;
  return f;
}

}  // namespace

Result<ChainState> check_chain(store::Tx& tx, const audit::Verifier* verifier) {
  ChainState c;
  auto oldest = GP_TRY(tx.query_one("SELECT COALESCE(MIN(seq), 0) FROM audit_log"));
  c.oldest_seq = oldest ? oldest->integer(0) : 0;
  if (verifier == nullptr) return c;
  // Storage order (rowid), not seq order, as audit::verify_store reads it, so reordered rows show.
  std::vector<audit::Record> records;
  for (const auto& row : GP_TRY(
           tx.query("SELECT seq, time_us, actor, tenant_id, action, resource, outcome, "
                    "request_id, source, detail, prev_hash, hash FROM audit_log ORDER BY rowid"))) {
    audit::Record r;
    r.seq = row.integer(0);
    r.time_us = row.integer(1);
    r.actor = row.text(2);
    r.tenant_id = row.text(3);
    r.action = row.text(4);
    r.resource = row.text(5);
    r.outcome = row.text(6);
    r.request_id = row.text(7);
    r.source = row.text(8);
    r.detail = row.text(9);
    r.prev_hash = row.text(10);
    r.hash = row.text(11);
    records.push_back(std::move(r));
  }
  std::vector<audit::Checkpoint> checkpoints;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT seq, hash, time_us, key_id, signature FROM audit_checkpoints ORDER BY seq")))
    checkpoints.push_back({row.integer(0), row.text(1), row.integer(2), row.text(3), row.text(4)});
  c.report = audit::verify(records, checkpoints, *verifier);
  c.verified = true;
  return c;
}

Result<Facts> gather(store::Tx& tx, const tenancy::Tenant& tenant, const GatherOptions& opts,
                     const ChainState& chain) {
  Facts f;
  f.tenant_id = tenant.id;
  f.tenant_name = tenant.name;
  f.isolation_class = tenant.isolation_class;
  f.state = std::string(tenancy::state_name(tenant.state));
  f.checked_at = opts.now;
  f.identity = GP_TRY(gather_identity(tx, tenant, opts.now));
  auto allocations = GP_TRY(all_allocations(tx, tenant));
  f.hardware = GP_TRY(gather_hardware(tx, tenant, allocations, opts.audience));
  f.scheduling = GP_TRY(gather_scheduling(tx, tenant));
  f.network = GP_TRY(gather_network(tx, tenant, opts));
  f.storage = GP_TRY(gather_storage(tx, tenant));
  f.workload = GP_TRY(gather_workload(tx, tenant, allocations));
  f.metering = GP_TRY(gather_metering(tx, tenant, allocations));
  f.audit = GP_TRY(gather_audit(tx, tenant, opts, chain));
  return f;
}

}  // namespace gp::posture
