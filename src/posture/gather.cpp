// The imperative shell of the posture report: reads one tenant's facts from the store inside
// the caller's transaction. Every judgement is left to evaluate(); this file only looks.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "alloc/alloc.h"
#include "fleet/fleet.h"
#include "metering/metering.h"
#include "network/records.h"
#include "posture/posture.h"
#include "render/render.h"
#include "storage/records.h"

namespace gp::posture {
namespace {

Result<IdentityFacts> gather_identity(store::Tx& tx, const tenancy::Tenant& t, int64_t now) {
  const tenancy::TenantIdentities ids = GP_TRY(tenancy::tenant_identities(tx, t.id, now));
  IdentityFacts f;
  f.users = ids.active_users;
  f.service_accounts = ids.active_service_accounts;
  for (const auto& k : ids.live_keys)
    f.active_keys.push_back({k.id, k.name, k.owner_kind, k.owner_id, k.expires_at});
  for (const auto& [binding, subject_tenant] : ids.bindings) {
    BindingFact b;
    b.id = binding.id;
    b.role = binding.role;
    b.scope_tenant = binding.tenant_id;
    b.scope = !b.scope_tenant ? "platform" : !binding.project_id ? "tenant" : "project";
    b.subject_kind = binding.subject_kind;
    b.subject_id = binding.subject_id;
    b.subject_tenant = subject_tenant;
    f.bindings.push_back(std::move(b));
  }
  return f;
}

Result<std::vector<alloc::Allocation>> all_allocations(store::Tx& tx, const tenancy::Tenant& t) {
  const tenancy::TenantScope scope(t.id);
  return all_pages(
      [&](const PageRequest& page) { return alloc::list_allocations(tx, scope, {}, page); }, 1000);
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
  // (node name, the tenant's allocation) -> the other tenants' ids
  std::map<std::pair<std::string, std::string>, std::set<std::string>> shared;
  const auto node_names = GP_TRY(fleet::node_names(tx));
  for (const auto& n : GP_TRY(alloc::node_neighbours(tx, t.id))) {
    const auto name = node_names.find(n.node_id);
    if (name == node_names.end()) continue;  // as the join with nodes left it out
    shared[{name->second, n.allocation_id}].insert(n.other_tenant_id);
  }
  for (auto& [key, tenants] : shared) {
    if (audience == Audience::kOperator)
      f.shared_nodes.push_back({key.first, key.second, static_cast<int>(tenants.size())});
    else if (exclusive.contains(key.second))
      f.shared_nodes.push_back({key.first, key.second, std::nullopt});
  }
  return f;
}

Result<SchedulingFacts> gather_scheduling(store::Tx& tx, const tenancy::Tenant& t) {
  const auto facts = [](const std::map<std::string, alloc::ModelQuota>& models) {
    std::vector<ModelQuotaFact> out;
    out.reserve(models.size());
    for (const auto& [model, q] : models) out.push_back({model, q.nominal, q.limit});
    return out;
  };
  SchedulingFacts f;
  f.tenant_models = facts(GP_TRY(alloc::load_tenant_quota(tx, t.id)).models);
  auto projects = GP_TRY(tenancy::all_projects(tx, tenancy::TenantScope(t.id)));
  std::ranges::sort(projects, {}, &tenancy::Project::name);
  for (const auto& p : projects)
    f.projects.push_back({p.name, facts(GP_TRY(alloc::load_project_quota(tx, t.id, p.id)).models)});
  return f;
}

Result<NetworkFacts> gather_network(store::Tx& tx, const tenancy::Tenant& t,
                                    const GatherOptions& opts) {
  NetworkFacts f;
  f.supernet = opts.supernet;
  f.tls = opts.tls;
  // Other tenants' segments are shown without their tenant, in the order of their addresses.
  for (network::Segment& s : GP_TRY(network::load_segments(tx))) {
    if (s.tenant == t.id) {
      s.tenant = t.name;
      f.segment = std::move(s);
    } else {
      s.tenant.clear();
      f.other_segments.push_back(std::move(s));
    }
  }
  std::ranges::sort(f.other_segments, {}, [](const network::Segment& s) {
    return std::pair(s.cidr.network, s.cidr.prefix);
  });
  auto stored = GP_TRY(network::load_policy(tx, t.id));
  if (!stored) {
    f.policy = network::TenantPolicy{.tenant = t.name};
    return f;
  }
  f.policy_stored = true;
  // Read leniently (checked against the whole IPv4 space) so that evaluate() sees a policy that
  // names tenant addresses instead of an unreadable one.
  auto p = network::policy_from_json(stored->policy, t.name, network::Ipv4Cidr{0xFFFFFFFF, 32});
  if (!p)
    f.policy_error = p.error().message;
  else
    f.policy = std::move(*p);
  return f;
}

Result<StorageFacts> gather_storage(store::Tx& tx, const tenancy::Tenant& t) {
  StorageFacts f;
  if (auto record = GP_TRY(storage::load_keyring_record(tx, t.id))) {
    KeyringFact k;
    k.destroyed = record->destroyed;
    k.changed_at = record->updated_at;
    for (const auto& tk : record->ring.tenants) {
      k.destroyed = k.destroyed || tk.destroyed;
      k.current_version = tk.current_version;
      for (const auto& v : tk.versions) k.versions.push_back(v.version);
      // The current key's own creation: a master-key rewrap changes the row, not the key.
      k.changed_at = storage::current_key_created_at(tk);
    }
    f.keyring = std::move(k);
  }
  for (const auto& s : GP_TRY(storage::load_stored_secrets(tx, t.id))) {
    SecretFact sf{s.name, static_cast<uint32_t>(s.key_version), ""};
    // An unreadable ciphertext record reads as sealed for nobody: evaluate() reports it.
    if (auto j = parse_json(s.sealed))
      if (auto sealed = storage::sealed_secret_from_json(*j)) sf.sealed_for = sealed->tenant;
    f.secrets.push_back(std::move(sf));
  }
  // Volumes as the control plane plans them: the agents create exactly this tree (owners and
  // modes), and `gpuplane storage audit` checks what is really on disk.
  VolumeFacts v;
  if (auto ids = GP_TRY(storage::load_ids(tx, t.id))) {
    v.ids_first = ids->first;
    v.ids_count = ids->count;
    storage::TenantVolumes tv{.tenant = t.name, .ids = *ids, .projects = {}};
    for (const auto& stored : GP_TRY(storage::load_volumes(tx, t.id)))
      if (stored.state == "active")
        tv.projects.push_back({.project = stored.project, .id = stored.uid, .size_limits = {}});
    std::ranges::sort(tv.projects, {}, &storage::ProjectVolumes::project);
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
  auto reports = GP_TRY(storage::storage_reports(tx, t.id));
  const auto names = reports.empty() ? std::unordered_map<std::string, std::string>{}
                                     : GP_TRY(fleet::node_names(tx));
  for (auto& r : reports)
    f.trees.push_back({.node = names.contains(r.node_id) ? names.at(r.node_id) : r.node_id,
                       .encrypted = r.encrypted,
                       .encryption_detail = std::move(r.encryption_detail),
                       .finding_count = r.finding_count,
                       .findings = std::move(r.findings),
                       .audited_at = r.audited_at});
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
      for (std::string& id : GP_TRY(alloc::allocation_node_ids(tx, a.id)))
        node_ids.insert(std::move(id));
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
    if (vocab::class_allows(t.isolation_class, tier)) ctx.tiers.push_back(tier);
  ctx.require_pull_always = policy::class_requires_pull_always(t.isolation_class);
  // The probes run in a namespace of the tenant's, so only the rule under test can refuse them.
  const std::string ns = t.name + "-posture-probe";
  ctx.namespaces.push_back(ns);
  // Other tenants' pools, as the webhook sees them; a stand-in when there is none, so the rule
  // is still exercised.
  const auto tenant_names = GP_TRY(tenancy::tenant_names(tx));
  auto pools = GP_TRY(fleet::list_pools(tx));
  std::ranges::sort(pools, {}, &fleet::Pool::name);
  for (const fleet::Pool& pool : pools) {
    const auto owner = pool.tenant_id ? tenant_names.find(*pool.tenant_id) : tenant_names.end();
    if (owner == tenant_names.end() || owner->first == t.id) continue;
    policy::PoolPlacement pp;
    pp.name = pool.name;
    pp.node_labels = {{std::string(render::kPoolLabel), pool.name},
                      {std::string(render::kTenantLabel), owner->second}};
    pp.taints.push_back({std::string(render::kTenantLabel), owner->second, "NoSchedule"});
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
  f.allocations_without_events = GP_TRY(alloc::allocations_without_events(tx, t.id));
  // Metering keeps one open usage interval for every allocation that holds resources.
  UsageFacts usage;
  const auto open = GP_TRY(metering::allocations_with_open_usage(tx, t.id));
  for (const auto& a : allocations)  // in id order
    if ((a.state == alloc::State::kPlaced || a.state == alloc::State::kActive) &&
        !open.contains(a.id))
      usage.placed_without_usage.push_back(a.id);
  f.usage = std::move(usage);
  return f;
}

Result<AuditFacts> gather_audit(store::Tx& tx, const tenancy::Tenant& t, const GatherOptions& opts,
                                const ChainState& chain) {
  AuditFacts f;
  f.chain_ok = chain.verified && chain.report.ok;
  f.chain_reason = !chain.verified ? "no audit verification key available" : chain.report.reason;
  f.oldest_seq = chain.oldest_seq;
  const audit::TenantTrail trail = GP_TRY(audit::tenant_trail(tx, t.id));
  f.tenant_entries = trail.entries;
  f.latest_tenant_entry_at = trail.latest_at;
  // The whole chain is verified, but the report counts the tenant's own records in it: the
  // trail's total is a count of every other tenant's activity.
  f.records_checked = f.chain_ok ? f.tenant_entries : 0;
  f.reads_audited = opts.reads_audited;
  return f;
}

}  // namespace

Result<ChainState> check_chain(store::Tx& tx, const audit::Verifier* verifier) {
  ChainState c;
  c.oldest_seq = GP_TRY(audit::oldest_seq(tx));
  if (verifier == nullptr) return c;
  c.report = GP_TRY(audit::verify_chain(tx, *verifier));
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
