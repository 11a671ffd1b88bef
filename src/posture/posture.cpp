// The controls and the pure evaluator: each control is a check over Facts, required from the
// class DESIGN.md names, reported with what it looked at and what it saw.
#include "posture/posture.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <set>

namespace gp::posture {
namespace {

using IC = IsolationClass;

// What one check found. `available` is false when the facts it needs are not kept yet.
struct Check {
  bool pass = false;
  std::string summary;
  std::string checked;
  Json seen = Json::object();
  bool available = true;
};

using CheckFn = std::function<Check(const Facts&)>;

struct Def {
  Control control;
  CheckFn check;
};

// ---- identity ----

Check api_key_expiry(const Facts& f) {
  Check c;
  c.checked = "every active (unrevoked, unexpired) API key of the tenant has an expiry";
  Json without = Json::array();
  for (const auto& k : f.identity.active_keys)
    if (!k.expires_at) without.push_back({{"id", k.id}, {"name", k.name}, {"owner", k.owner_id}});
  c.seen = {{"active_keys", f.identity.active_keys.size()}, {"without_expiry", without}};
  c.pass = without.empty();
  c.summary = c.pass ? fmt::format("{} active key(s), all expire", f.identity.active_keys.size())
                     : fmt::format("{} active key(s) never expire", without.size());
  return c;
}

bool platform_role(const BindingFact& b) { return b.scope == "platform"; }

Check no_role_escalation(const Facts& f) {
  Check c;
  c.checked =
      "no user or service account of the tenant holds a platform-scope role (platform-admin, "
      "platform-operator, auditor)";
  Json escalated = Json::array();
  for (const auto& b : f.identity.bindings)
    if (platform_role(b) && b.subject_tenant == f.tenant_id)
      escalated.push_back({{"binding", b.id},
                           {"role", b.role},
                           {"subject", fmt::format("{}/{}", b.subject_kind, b.subject_id)}});
  c.seen = {{"bindings", f.identity.bindings.size()}, {"platform_roles", escalated}};
  c.pass = escalated.empty();
  c.summary = c.pass ? fmt::format("{} binding(s), none reach the platform scope",
                                   f.identity.bindings.size())
                     : fmt::format("{} tenant subject(s) hold platform roles", escalated.size());
  return c;
}

Check tenant_boundary(const Facts& f) {
  Check c;
  c.checked =
      "no role binding inside the tenant names another tenant's subject, and no subject of the "
      "tenant is bound inside another tenant";
  Json crossing = Json::array();
  for (const auto& b : f.identity.bindings) {
    if (platform_role(b)) continue;
    bool foreign_subject =
        b.scope_tenant == f.tenant_id && b.subject_tenant && *b.subject_tenant != f.tenant_id;
    bool reaches_out = b.subject_tenant == f.tenant_id && b.scope_tenant != f.tenant_id;
    // The other tenant stays unnamed: the tenant's admins read this report.
    if (foreign_subject)
      crossing.push_back({{"binding", b.id},
                          {"role", b.role},
                          {"subject", fmt::format("{}/{}", b.subject_kind, b.subject_id)},
                          {"problem", "subject of another tenant bound inside this tenant"}});
    if (reaches_out)
      crossing.push_back({{"binding", b.id},
                          {"role", b.role},
                          {"subject", fmt::format("{}/{}", b.subject_kind, b.subject_id)},
                          {"problem", "subject of this tenant bound inside another tenant"}});
  }
  c.seen = {{"bindings", f.identity.bindings.size()}, {"crossing", crossing}};
  c.pass = crossing.empty();
  c.summary = c.pass ? "no binding crosses the tenant boundary"
                     : fmt::format("{} binding(s) cross the tenant boundary", crossing.size());
  return c;
}

// ---- hardware ----

Check tier_minimum(const Facts& f) {
  Check c;
  Tier weakest = vocab::weakest_tier(f.isolation_class);
  c.checked = fmt::format("every live allocation's tier is {} or stronger (class {})",
                          vocab::tier_name(weakest), vocab::class_name(f.isolation_class));
  Json weaker = Json::array();
  for (const auto& a : f.hardware.live)
    if (!vocab::class_allows(f.isolation_class, a.tier))
      weaker.push_back({{"allocation", a.id}, {"tier", vocab::tier_name(a.tier)}});
  c.seen = {{"live_allocations", f.hardware.live.size()},
            {"weakest_allowed", vocab::tier_name(weakest)},
            {"below_minimum", weaker}};
  c.pass = weaker.empty();
  c.summary = c.pass ? fmt::format("{} live allocation(s), all at {} or stronger",
                                   f.hardware.live.size(), vocab::tier_name(weakest))
                     : fmt::format("{} live allocation(s) below {}", weaker.size(),
                                   vocab::tier_name(weakest));
  return c;
}

Check node_exclusive(const Facts& f) {
  Check c;
  Json shared = Json::array();
  for (const auto& s : f.hardware.shared_nodes) {
    Json j = {{"node", s.node}, {"allocation", s.allocation}};
    if (s.other_tenants) j["other_tenants"] = *s.other_tenants;
    shared.push_back(std::move(j));
  }
  if (f.hardware.audience == Audience::kOperator) {
    c.checked = "no node hosting a live allocation of the tenant hosts another tenant's allocation";
    c.seen = {{"live_allocations", f.hardware.live.size()}, {"shared_nodes", shared}};
    c.pass = shared.empty();
    c.summary = c.pass ? "no node is shared with another tenant"
                       : fmt::format("{} node(s) shared with other tenants", shared.size());
    return c;
  }
  // The tenant's view: only the nodes of its node-exclusive allocations, where another tenant
  // is a breach of what the tier promises. Whether a neighbour sits beside an allocation of a
  // tier that shares nodes is not the tenant's to learn (a co-residency oracle); such tiers are
  // hardware.tier-minimum's to judge against the class.
  c.checked =
      "no node holding one of the tenant's node-exclusive allocations (dedicated-node, "
      "dedicated-pool) hosts another tenant's allocation";
  Json may_share = Json::array();
  for (const auto& a : f.hardware.live)
    if (!holds_nodes_alone(a.tier))
      may_share.push_back({{"allocation", a.id}, {"tier", vocab::tier_name(a.tier)}});
  c.seen = {{"live_allocations", f.hardware.live.size()},
            {"on_tiers_that_share_nodes", may_share},
            {"shared_nodes", shared}};
  c.pass = shared.empty();
  c.summary =
      c.pass ? fmt::format("{} live allocation(s) on node-exclusive tiers, none sharing a node",
                           f.hardware.live.size() - may_share.size())
             : fmt::format("{} node(s) of node-exclusive allocations shared with another tenant",
                           shared.size());
  return c;
}

// ---- scheduling / quota ----

Json quota_json(const std::vector<ModelQuotaFact>& models) {
  Json j = Json::object();
  for (const auto& m : models) {
    Json q = {{"nominal_gpus", static_cast<double>(m.nominal) / 7000}};
    q["limit_gpus"] = m.limit ? Json(static_cast<double>(*m.limit) / 7000) : Json(nullptr);
    j[m.model] = q;
  }
  return j;
}

Check tenant_quota(const Facts& f) {
  Check c;
  c.checked = "the tenant has a quota for at least one GPU model";
  c.seen = {{"models", quota_json(f.scheduling.tenant_models)}};
  c.pass = !f.scheduling.tenant_models.empty();
  c.summary = c.pass ? fmt::format("quota set for {} model(s)", f.scheduling.tenant_models.size())
                     : "no tenant quota";
  return c;
}

Check project_quotas(const Facts& f) {
  Check c;
  c.checked = "every project of the tenant has its own quota (a per-project limit)";
  Json without = Json::array();
  for (const auto& p : f.scheduling.projects)
    if (p.models.empty()) without.push_back(p.project);
  c.seen = {{"projects", f.scheduling.projects.size()}, {"without_quota", without}};
  c.pass = without.empty();
  c.summary = c.pass ? fmt::format("{} project(s), each with a quota", f.scheduling.projects.size())
                     : fmt::format("{} project(s) without a quota", without.size());
  return c;
}

// ---- network ----

Check segment(const Facts& f) {
  Check c;
  const auto& n = f.network;
  c.checked =
      "the tenant has a private segment (VNI and CIDR) inside the tenant supernet, overlapping "
      "no other tenant's";
  std::vector<std::string> problems;
  if (!n.segment) {
    problems.push_back("no segment assigned");
  } else {
    c.seen["vni"] = n.segment->vni;
    c.seen["cidr"] = network::to_string(n.segment->cidr);
    if (!n.supernet.contains(n.segment->cidr))
      problems.push_back(fmt::format("{} lies outside the supernet {}",
                                     network::to_string(n.segment->cidr),
                                     network::to_string(n.supernet)));
    for (const auto& o : n.other_segments) {
      // Other tenants stay unnamed: the tenant's admins read this report.
      if (o.cidr.overlaps(n.segment->cidr))
        problems.push_back("CIDR overlaps another tenant's segment");
      if (o.vni == n.segment->vni)
        problems.push_back(fmt::format("VNI {} also used by another tenant", o.vni));
    }
  }
  c.seen["supernet"] = network::to_string(n.supernet);
  c.seen["problems"] = problems;
  c.pass = problems.empty();
  c.summary = c.pass ? fmt::format("segment {} (VNI {})", network::to_string(n.segment->cidr),
                                   n.segment->vni)
                     : fmt::format("{}", fmt::join(problems, "; "));
  return c;
}

Check default_deny(const Facts& f) {
  Check c;
  const auto& n = f.network;
  c.checked =
      "the tenant's policy allows no traffic to or from other tenants: no egress destination or "
      "exposure source inside the tenant supernet (everything else across tenants is dropped)";
  c.seen["policy_stored"] = n.policy_stored;
  if (!n.policy) {
    c.seen["error"] = n.policy_error;
    c.summary = "stored policy unreadable: " + n.policy_error;
    return c;
  }
  auto valid = network::validate_policy(*n.policy, n.supernet);
  c.seen["egress_rules"] = n.policy->egress.size();
  c.seen["exposures"] = n.policy->exposures.size();
  if (!valid) {
    c.seen["error"] = valid.error().message;
    c.summary = "policy opens cross-tenant traffic: " + valid.error().message;
    return c;
  }
  c.pass = true;
  c.summary = n.policy_stored ? "declared policy keeps the default deny across tenants"
                              : "default policy: deny across tenants, no egress, no exposures";
  return c;
}

Check explicit_egress(const Facts& f) {
  Check c;
  const auto& n = f.network;
  c.checked =
      "every egress rule names a protocol and, for tcp/udp, the ports it opens (no allow-all "
      "egress)";
  if (!n.policy) {
    c.seen["error"] = n.policy_error;
    c.summary = "stored policy unreadable: " + n.policy_error;
    return c;
  }
  Json open = Json::array();
  for (const auto& r : n.policy->egress) {
    bool all_ports =
        (r.protocol == network::Protocol::kTcp || r.protocol == network::Protocol::kUdp) &&
        r.ports.empty();
    if (r.protocol == network::Protocol::kAny || all_ports)
      open.push_back({{"destination", network::to_string(r.destination)},
                      {"protocol", network::protocol_name(r.protocol)},
                      {"ports", r.ports.empty() ? "all" : "listed"}});
  }
  c.seen = {{"egress_rules", n.policy->egress.size()}, {"open_rules", open}};
  c.pass = open.empty();
  c.summary = c.pass ? fmt::format("{} egress rule(s), each with protocol and ports",
                                   n.policy->egress.size())
                     : fmt::format("{} egress rule(s) open every port or protocol", open.size());
  return c;
}

Check tls(const Facts& f) {
  Check c;
  c.checked = "the control plane API is served over TLS";
  c.seen = {{"tls", f.network.tls}};
  c.pass = f.network.tls;
  c.summary = c.pass ? "API served over TLS" : "API served over plain HTTP";
  return c;
}

// ---- storage ----

Check private_volumes(const Facts& f) {
  Check c;
  c.checked =
      "every tenant volume is owned by the tenant's uid/gid range and grants nothing to other";
  if (!f.storage.volumes) {
    c.available = false;
    c.summary =
        "not yet available: the control plane keeps no volume records (agents do not create "
        "volumes yet); audit shared trees with `gpuplane storage audit PATH`";
    return c;
  }
  const auto& v = *f.storage.volumes;
  auto in_range = [&](uint32_t id) { return id >= v.ids_first && id - v.ids_first < v.ids_count; };
  Json bad = Json::array();
  for (const auto& vol : v.volumes) {
    std::vector<std::string> why;
    if (vol.mode & 07) why.push_back(fmt::format("mode {:04o} grants other", vol.mode & 07777));
    if (!in_range(vol.uid)) why.push_back(fmt::format("owner {} outside the range", vol.uid));
    if (!in_range(vol.gid)) why.push_back(fmt::format("group {} outside the range", vol.gid));
    if (!why.empty()) bad.push_back({{"path", vol.path}, {"problems", why}});
  }
  c.seen = {{"volumes", v.volumes.size()},
            {"ids", fmt::format("{}-{}", v.ids_first, v.ids_first + v.ids_count - 1)},
            {"violations", bad}};
  c.pass = bad.empty();
  c.summary = c.pass ? fmt::format("{} volume(s), all private", v.volumes.size())
                     : fmt::format("{} volume(s) reachable by others", bad.size());
  return c;
}

// True when the plan has volume directories for the tenant (nodes then hold its trees).
bool has_volumes(const Facts& f) {
  return f.storage.volumes && f.storage.volumes->volumes.size() > 1;  // more than its top dir
}

Check volumes_encrypted(const Facts& f) {
  Check c;
  c.checked =
      "every node holding the tenant's volume tree reports it encrypted under the tenant's own "
      "key (fscrypt), so shredding the key makes the files unreadable";
  if (!has_volumes(f)) {
    c.pass = true;
    c.summary = "no volumes";
    return c;
  }
  Json clear = Json::array();
  for (const auto& t : f.storage.trees)
    if (!t.encrypted) clear.push_back({{"node", t.node}, {"why", t.encryption_detail}});
  c.seen = {{"nodes_reporting", f.storage.trees.size()}, {"in_clear", clear}};
  c.pass = !f.storage.trees.empty() && clear.empty();
  c.summary =
      f.storage.trees.empty() ? "no node has reported the tenant's volume tree yet"
      : c.pass                ? fmt::format("encrypted on {} node(s)", f.storage.trees.size())
               : fmt::format("in clear on {} of {} node(s)", clear.size(), f.storage.trees.size());
  return c;
}

Check tree_audit(const Facts& f) {
  Check c;
  c.checked = fmt::format(
      "each node holding the tenant's volume tree audited its permissions within {} hours and "
      "found nothing another tenant could read, write or reach",
      kMaxTreeAuditAgeUs / (int64_t{3600} * 1'000'000));
  if (!has_volumes(f)) {
    c.pass = true;
    c.summary = "no volumes";
    return c;
  }
  Json nodes = Json::array();
  int64_t findings = 0, oldest = 0;
  for (const auto& t : f.storage.trees) {
    findings += t.finding_count;
    const int64_t age = f.checked_at - t.audited_at;
    oldest = std::max(oldest, age);
    nodes.push_back({{"node", t.node},
                     {"audited_at", format_rfc3339(from_unix_micros(t.audited_at))},
                     {"age_minutes", age / (int64_t{60} * 1'000'000)},
                     {"findings", t.finding_count},
                     {"first_findings", t.findings}});
  }
  c.seen = {{"nodes", nodes}};
  const bool stale = oldest > kMaxTreeAuditAgeUs;
  c.pass = !f.storage.trees.empty() && findings == 0 && !stale;
  c.summary = f.storage.trees.empty() ? "no node has audited the tenant's volume tree yet"
              : findings > 0          ? fmt::format("{} finding(s) on the tenant's trees", findings)
              : stale                 ? fmt::format("the oldest audit is {} hours old",
                                                    oldest / (int64_t{3600} * 1'000'000))
                                      : fmt::format(
                                            "{} node(s) audited, nothing reachable by others; oldest {} "
                                                            "minutes ago",
                                            f.storage.trees.size(), oldest / (int64_t{60} * 1'000'000));
  return c;
}

Check secrets_encrypted(const Facts& f) {
  Check c;
  c.checked =
      "every secret the platform holds for the tenant is sealed with a live data key of the "
      "tenant, bound to the tenant";
  const auto& s = f.storage;
  Json bad = Json::array();
  for (const auto& sec : s.secrets) {
    std::string why;
    if (!s.keyring)
      why = "the tenant has no data key";
    else if (s.keyring->destroyed)
      why = "the tenant's data keys were destroyed";
    else if (std::find(s.keyring->versions.begin(), s.keyring->versions.end(), sec.key_version) ==
             s.keyring->versions.end())
      why = fmt::format("key version {} is not in the tenant's keyring", sec.key_version);
    else if (sec.sealed_for != f.tenant_name)
      why = fmt::format("sealed for \"{}\"", sec.sealed_for);
    if (!why.empty()) bad.push_back({{"secret", sec.name}, {"problem", why}});
  }
  c.seen = {{"secrets", s.secrets.size()}, {"not_sealed", bad}};
  if (s.keyring) c.seen["current_key_version"] = s.keyring->current_version;
  c.pass = bad.empty();
  c.summary =
      c.pass ? fmt::format("{} secret(s), all sealed with the tenant's data key", s.secrets.size())
             : fmt::format("{} secret(s) not sealed with a live tenant key", bad.size());
  return c;
}

Check key_rotation(const Facts& f) {
  Check c;
  c.checked = fmt::format("the tenant's current data key is at most {} days old",
                          kMaxDataKeyAgeUs / (int64_t{24} * 3600 * 1'000'000));
  const auto& k = f.storage.keyring;
  if (!k || k->destroyed) {
    c.pass = true;
    c.seen = {{"keyring", k ? "destroyed" : "none"}};
    c.summary = k ? "keys destroyed (offboarded): nothing to rotate" : "no data key yet";
    return c;
  }
  int64_t age = f.checked_at - k->changed_at;
  int64_t days = age / (int64_t{24} * 3600 * 1'000'000);
  c.seen = {{"current_version", k->current_version},
            {"changed_at", format_rfc3339(from_unix_micros(k->changed_at))},
            {"age_days", days}};
  c.pass = age <= kMaxDataKeyAgeUs;
  c.summary = fmt::format("data key v{} is {} day(s) old", k->current_version, days);
  return c;
}

// ---- workload ----

Check probe(const ProbeFact& p, std::string_view what) {
  Check c;
  c.checked = fmt::format("the tenant's admission policy refuses a pod that {}", what);
  c.seen = {{"denied", p.denied}, {"level", p.level}, {"detail", p.detail}};
  c.pass = p.denied;
  c.summary = p.denied ? fmt::format("refused at {}: {}", p.level, p.detail)
                       : fmt::format("admitted at {}: {}", p.level, p.detail);
  return c;
}

// Issue 24: a container that names its own devices (NVIDIA_VISIBLE_DEVICES=all) gets every GPU
// of its node. The webhook refuses the variable in a pod's env; images and envFrom ConfigMaps
// can still carry it, so on a node the tenant's tier shares with other tenants only the toolkit
// refusing it from unprivileged containers keeps the tenant's GPUs its own. A node that never
// reported, or whose agent could not tell, counts as accepting it (the toolkit default).
Check gpu_device_env(const Facts& f) {
  Check c;
  const auto& w = f.workload;
  c.checked =
      "the tenant's admission policy refuses a pod that selects GPUs through its environment "
      "(NVIDIA_VISIBLE_DEVICES=all, no GPU requested), and every node of the tenant's "
      "allocations on a tier that shares nodes with other tenants keeps its NVIDIA container "
      "toolkit from taking device lists from unprivileged containers' environment";
  Json accepting = Json::array(), nodes = Json::array();
  for (const auto& n : w.node_sharing_gpu_nodes) {
    const auto& rt = n.runtime;
    Json seen_node = {{"node", n.node}};
    if (rt) {
      seen_node["accept_envvar_when_unprivileged"] =
          rt->accepts_env_unprivileged ? Json(*rt->accepts_env_unprivileged) : Json(nullptr);
      seen_node["toolkit_config_state"] = rt->toolkit_config_state;
      seen_node["device_list_strategy"] =
          rt->device_list_strategy.empty() ? Json("unknown") : Json(rt->device_list_strategy);
    }
    nodes.push_back(seen_node);
    if (rt && rt->accepts_env_unprivileged == false) continue;
    std::string problem =
        !rt ? "its agent reports no GPU runtime settings (the toolkit default accepts the variable)"
        : !rt->accepts_env_unprivileged
            ? "its agent cannot tell whether the toolkit accepts the variable: " + rt->detail
        : rt->toolkit_config_state == "absent"
            ? "no toolkit config: the default accepts the variable from unprivileged containers"
            : "the toolkit config sets accept-nvidia-visible-devices-envvar-when-unprivileged = "
              "true";
    accepting.push_back({{"node", n.node}, {"problem", problem}});
  }
  c.seen = {{"probe",
             {{"denied", w.device_env.denied},
              {"level", w.device_env.level},
              {"detail", w.device_env.detail}}},
            {"nodes_shared_by_tier", nodes},
            {"accepting_nodes", accepting}};
  c.pass = w.device_env.denied && accepting.empty();
  std::vector<std::string> parts;
  if (!w.device_env.denied)
    parts.push_back(fmt::format("a pod setting NVIDIA_VISIBLE_DEVICES is admitted at {}: {}",
                                w.device_env.level, w.device_env.detail));
  if (!accepting.empty())
    parts.push_back(fmt::format(
        "{} node(s) the tenant's tiers share with other tenants let a container pick every GPU "
        "by its environment",
        accepting.size()));
  c.summary = c.pass ? fmt::format(
                           "refused at admission; {} node(s) shared by tier, none accepting "
                           "the variable from unprivileged containers",
                           w.node_sharing_gpu_nodes.size())
                     : fmt::format("{}", fmt::join(parts, "; "));
  return c;
}

// ---- metering ----

Check allocation_events(const Facts& f) {
  Check c;
  c.checked = "every allocation of the tenant has its lifecycle events recorded";
  c.seen = {{"allocations", f.metering.allocations},
            {"without_events", f.metering.allocations_without_events}};
  c.pass = f.metering.allocations_without_events.empty();
  c.summary = c.pass ? fmt::format("{} allocation(s), all with events", f.metering.allocations)
                     : fmt::format("{} allocation(s) without events",
                                   f.metering.allocations_without_events.size());
  return c;
}

Check usage_recorded(const Facts& f) {
  Check c;
  c.checked = "every allocation that held resources has usage recorded";
  if (!f.metering.usage) {
    c.available = false;
    c.summary = "not yet available: usage metering is not recorded by this build";
    return c;
  }
  c.seen = {{"without_usage", f.metering.usage->placed_without_usage}};
  c.pass = f.metering.usage->placed_without_usage.empty();
  c.summary = c.pass ? "usage recorded for every placed allocation"
                     : fmt::format("{} placed allocation(s) without usage",
                                   f.metering.usage->placed_without_usage.size());
  return c;
}

// ---- audit ----

Check chain(const Facts& f) {
  Check c;
  c.checked = "the audit trail's hash chain and signed checkpoints verify";
  c.seen = {{"ok", f.audit.chain_ok}, {"records_checked", f.audit.records_checked}};
  if (!f.audit.chain_ok) c.seen["reason"] = f.audit.chain_reason;
  c.pass = f.audit.chain_ok;
  c.summary = c.pass ? fmt::format("the chain verifies, the tenant's {} record(s) in it",
                                   f.audit.records_checked)
                     : "chain does not verify: " + f.audit.chain_reason;
  return c;
}

Check tenant_trail(const Facts& f) {
  Check c;
  c.checked = "the audit trail holds records for the tenant";
  c.seen = {{"tenant_entries", f.audit.tenant_entries}};
  if (f.audit.tenant_entries > 0)
    c.seen["latest"] = format_rfc3339(from_unix_micros(f.audit.latest_tenant_entry_at));
  c.pass = f.audit.tenant_entries > 0;
  c.summary = c.pass ? fmt::format("{} record(s) for the tenant", f.audit.tenant_entries)
                     : "no audit record names the tenant";
  return c;
}

Check request_level(const Facts& f) {
  Check c;
  c.checked = "every request, reads included, is recorded in the audit trail";
  c.seen = {{"reads_audited", f.audit.reads_audited}};
  c.pass = f.audit.reads_audited;
  c.summary = c.pass ? "reads and writes are audited"
                     : "only mutations and denials are audited, not successful reads";
  return c;
}

Check retention(const Facts& f) {
  Check c;
  c.checked = "the audit trail is retained from its first record (nothing pruned)";
  c.seen = {{"oldest_seq", f.audit.oldest_seq}};
  c.pass = f.audit.oldest_seq == 1;
  c.summary = c.pass ? "retained from record 1"
              : f.audit.oldest_seq == 0
                  ? "the trail is empty"
                  : fmt::format("records before {} are gone", f.audit.oldest_seq);
  return c;
}

constexpr std::string_view kEveryClass = "every class (DESIGN.md: the tenant boundary)";
constexpr std::string_view kBenchmarkEvery =
    "every class: multi-tenancy benchmark baseline for a shared platform";

const std::vector<Def>& defs() {
  static const std::vector<Def> kDefs = {
      {{"identity.api-key-expiry", Layer::kIdentity, "API keys expire",
        "a leaked or forgotten key grants access for ever",
        "revoke keys without an expiry and issue new ones with expires_at", IC::kInternal,
        kEveryClass},
       api_key_expiry},
      {{"identity.no-role-escalation", Layer::kIdentity, "Block role escalation",
        "a tenant principal with a platform role reads or changes every tenant",
        "delete the platform-scope bindings of the tenant's users and service accounts",
        IC::kInternal, kBenchmarkEvery, true},
       no_role_escalation},
      {{"identity.tenant-boundary", Layer::kIdentity, "Block access to other tenants' resources",
        "a binding across tenants lets one tenant's principal act inside another",
        "delete role bindings that name subjects of another tenant", IC::kInternal, kBenchmarkEvery,
        true},
       tenant_boundary},
      {{"hardware.tier-minimum", Layer::kHardware, "Allocations meet the class's weakest tier",
        "a weaker tier shares GPU memory, faults or nodes with tenants the class must not meet",
        "release allocations below the class's weakest tier and request an allowed offering",
        IC::kInternal,
        "every class: internal >= shared, standard >= mig, sensitive >= dedicated-gpu, "
        "regulated >= dedicated-node (DESIGN.md)"},
       tier_minimum},
      {{"hardware.node-exclusive", Layer::kHardware, "Dedicated nodes",
        "a co-tenant on the same node reaches the tenant through host-level side channels",
        "move the tenant to dedicated-node or dedicated-pool offerings, or give it its own pool",
        IC::kRegulated, "regulated: dedicated pool or node (DESIGN.md)"},
       node_exclusive},
      {{"scheduling.tenant-quota", Layer::kScheduling, "Require quotas",
        "one tenant without a quota can take the whole fleet (noisy neighbour, denial of service)",
        "set a tenant quota: PUT /v1/tenants/{t}/quota", IC::kInternal, kBenchmarkEvery, true},
       tenant_quota},
      {{"scheduling.project-quotas", Layer::kScheduling, "Require object limits per project",
        "one project exhausts the tenant's quota for every other project",
        "set a quota on every project: PUT /v1/tenants/{t}/projects/{p}/quota", IC::kInternal,
        kBenchmarkEvery, true},
       project_quotas},
      {{"network.segment", Layer::kNetwork, "Private network segment",
        "without its own VNI and CIDR the tenant's traffic mixes with other tenants'",
        "allocate a segment for a tenant created before segments came with the tenant (POST "
        "/v1/tenants/{t}/network/segment); fix overlapping segments",
        IC::kStandard, "standard and above: network default-deny (DESIGN.md)"},
       segment},
      {{"network.default-deny", Layer::kNetwork, "Default deny network across tenants",
        "a rule naming tenant addresses opens one tenant's workloads to another's",
        "remove egress destinations and exposure sources inside the tenant supernet", IC::kStandard,
        "standard and above: network default-deny (DESIGN.md); benchmark", true},
       default_deny},
      {{"network.explicit-egress", Layer::kNetwork, "Explicit egress only",
        "allow-all egress lets a compromised workload exfiltrate data anywhere",
        "replace any-protocol or all-port egress rules with the destinations and ports needed",
        IC::kStandard, "standard and above: network default-deny, explicit egress (DESIGN.md)"},
       explicit_egress},
      {{"network.tls", Layer::kNetwork, "TLS everywhere",
        "credentials and tenant data cross the network in clear text",
        "serve the API behind TLS (a terminating proxy or a TLS listener)", IC::kRegulated,
        "regulated: TLS everywhere (DESIGN.md)"},
       tls},
      {{"storage.private-volumes", Layer::kStorage, "Private storage",
        "another tenant reads or writes the tenant's datasets, models or checkpoints",
        "recreate volumes with the tenant's ids and modes without other bits; run `gpuplane "
        "storage audit`",
        IC::kStandard, "standard and above: private storage (DESIGN.md)"},
       private_volumes},
      {{"storage.volumes-encrypted", Layer::kStorage, "Volumes encrypted per tenant",
        "a stolen disk, a node reused after the tenant left, or root on a node reads the "
        "tenant's files",
        "put the storage root on ext4 made with `mkfs.ext4 -O encrypt` (or `tune2fs -O "
        "encrypt`) and recreate trees made in clear",
        IC::kSensitive, "sensitive and above: encryption at rest (DESIGN.md)"},
       volumes_encrypted},
      {{"storage.permission-audit", Layer::kStorage, "Volume permissions audited",
        "a file made readable by others goes unnoticed until another tenant reads it",
        "fix the reported entries (`gpuplane storage audit PATH` lists them) and check the "
        "agents run with --storage-root",
        IC::kStandard, "standard and above: private storage, permissions audited (DESIGN.md)"},
       tree_audit},
      {{"storage.secrets-encrypted", Layer::kStorage, "Platform-held secrets encrypted per tenant",
        "a database leak exposes the tenant's registry and storage credentials",
        "delete and re-create secrets so they are sealed with the tenant's current data key",
        IC::kSensitive, "sensitive and above: encryption of platform-held secrets (DESIGN.md)"},
       secrets_encrypted},
      {{"storage.data-key-rotation", Layer::kStorage, "Data keys rotated",
        "a long-lived data key widens what one key compromise opens",
        "rotate the tenant's data key and reseal its secrets", IC::kSensitive,
        "sensitive and above: encryption of platform-held secrets (DESIGN.md)"},
       key_rotation},
      {{"workload.block-privileged", Layer::kWorkload, "Block privileged containers",
        "a privileged container controls the node and every tenant on it",
        "admit workloads through the gpuplane webhook at Pod Security baseline or restricted",
        IC::kInternal, kBenchmarkEvery, true},
       [](const Facts& f) { return probe(f.workload.privileged, "runs a privileged container"); }},
      {{"workload.block-host-path", Layer::kWorkload, "Block host path volumes",
        "a hostPath volume reads other tenants' files and the node's credentials",
        "admit workloads through the gpuplane webhook at Pod Security baseline or restricted",
        IC::kInternal, kBenchmarkEvery, true},
       [](const Facts& f) { return probe(f.workload.host_path, "mounts a hostPath volume"); }},
      {{"workload.block-host-namespaces", Layer::kWorkload, "Block host namespaces",
        "host network, PID or IPC namespaces expose other tenants' traffic and processes",
        "admit workloads through the gpuplane webhook at Pod Security baseline or restricted",
        IC::kInternal, kBenchmarkEvery, true},
       [](const Facts& f) {
         return probe(f.workload.host_namespaces, "shares the host's network, PID or IPC");
       }},
      {{"workload.block-host-ports", Layer::kWorkload, "Block host ports",
        "a host port bypasses the tenant's network policy and squats other tenants' ports",
        "admit workloads through the gpuplane webhook at Pod Security baseline or restricted",
        IC::kInternal, kBenchmarkEvery, true},
       [](const Facts& f) { return probe(f.workload.host_ports, "binds a host port"); }},
      {{"workload.block-other-tenant-pools", Layer::kWorkload,
        "Block placement on other tenants' pools",
        "a workload pinned to another tenant's nodes breaks that tenant's dedicated hardware",
        "admit workloads through the gpuplane webhook (tenant.placement rule)", IC::kInternal,
        kBenchmarkEvery, true},
       [](const Facts& f) {
         return probe(f.workload.other_tenant_pool, "selects another tenant's pool");
       }},
      {{"workload.gpu-device-env", Layer::kWorkload, "GPUs only through allocation",
        "a container that sets NVIDIA_VISIBLE_DEVICES=all (in its pod, its image or an envFrom "
        "ConfigMap) gets every GPU of its node, other tenants' included",
        "admit workloads through the gpuplane webhook (tenant.gpuDeviceEnv) and, on every GPU "
        "node tenants share, set accept-nvidia-visible-devices-envvar-when-unprivileged = false "
        "in the NVIDIA container toolkit with the device plugin on volume-mounts or CDI "
        "(docs/kubernetes.md, \"GPU devices\")",
        IC::kInternal, kEveryClass},
       gpu_device_env},
      {{"metering.allocation-events", Layer::kMetering, "Allocations recorded",
        "resources handed out without a record cannot be billed, explained or disputed",
        "investigate allocations without events (a write outside the API)", IC::kInternal,
        kEveryClass},
       allocation_events},
      {{"metering.usage-recorded", Layer::kMetering, "Usage recorded",
        "usage without records cannot be billed or checked against what was received",
        "enable usage metering for the tenant's nodes", IC::kInternal, kEveryClass},
       usage_recorded},
      {{"audit.chain", Layer::kAudit, "Audit chain verifies",
        "an edited or truncated trail hides what happened to the tenant",
        "restore the audit trail from a backup and investigate the first bad record", IC::kInternal,
        kEveryClass},
       chain},
      {{"audit.tenant-trail", Layer::kAudit, "Tenant audit trail present",
        "actions on the tenant leave no trace", "investigate why no record names the tenant",
        IC::kInternal, kEveryClass},
       tenant_trail},
      {{"audit.request-level", Layer::kAudit, "Request-level audit",
        "reads of confidential data leave no trace", "record every request, reads included",
        IC::kSensitive, "sensitive and above: request-level audit (DESIGN.md)"},
       request_level},
      {{"audit.retention", Layer::kAudit, "Audit retention",
        "records needed by a regulator or an investigation are gone",
        "keep the audit trail from its first record; archive rather than prune", IC::kRegulated,
        "regulated: audit retention (DESIGN.md)"},
       retention},
  };
  return kDefs;
}

const std::vector<Control>& control_list() {
  static const std::vector<Control> kList = [] {
    std::vector<Control> out;
    for (const auto& d : defs()) out.push_back(d.control);
    return out;
  }();
  return kList;
}

}  // namespace

std::string_view layer_name(Layer layer) {
  switch (layer) {
    case Layer::kIdentity:
      return "identity";
    case Layer::kHardware:
      return "hardware";
    case Layer::kScheduling:
      return "scheduling";
    case Layer::kNetwork:
      return "network";
    case Layer::kStorage:
      return "storage";
    case Layer::kWorkload:
      return "workload";
    case Layer::kMetering:
      return "metering";
    case Layer::kAudit:
      return "audit";
  }
  return "unknown";
}

std::string_view status_name(Status status) {
  switch (status) {
    case Status::kPass:
      return "pass";
    case Status::kFail:
      return "fail";
    case Status::kNotApplicable:
      return "not_applicable";
  }
  return "unknown";
}

std::span<const Control> controls() { return control_list(); }

const Control* find_control(std::string_view id) {
  for (const auto& c : control_list())
    if (c.id == id) return &c;
  return nullptr;
}

bool required(const Control& control, IsolationClass c) {
  return static_cast<int>(c) >= static_cast<int>(control.required_from);
}

Json ControlResult::to_json() const {
  return {{"id", control->id},
          {"layer", layer_name(control->layer)},
          {"title", control->title},
          {"status", status_name(status)},
          {"required", required},
          {"summary", summary},
          {"evidence", evidence},
          {"threat", control->threat},
          {"remediation", control->remediation},
          {"rule", control->rule},
          {"required_from", vocab::class_name(control->required_from)},
          {"benchmark", control->benchmark}};
}

int Report::count(Status s) const {
  return static_cast<int>(std::count_if(results.begin(), results.end(),
                                        [&](const ControlResult& r) { return r.status == s; }));
}

std::vector<std::string> Report::failing() const {
  std::vector<std::string> out;
  for (const auto& r : results)
    if (r.status == Status::kFail) out.emplace_back(r.control->id);
  return out;
}

Json Report::to_json() const {
  Json layers = Json::array();
  for (int l = 0; l <= static_cast<int>(Layer::kAudit); ++l) {
    Json items = Json::array();
    for (const auto& r : results)
      if (static_cast<int>(r.control->layer) == l) items.push_back(r.to_json());
    layers.push_back({{"layer", layer_name(static_cast<Layer>(l))}, {"controls", items}});
  }
  return {{"tenant", {{"id", tenant_id}, {"name", tenant_name}}},
          {"isolation_class", vocab::class_name(isolation_class)},
          {"checked_at", format_rfc3339(from_unix_micros(checked_at))},
          {"counts",
           {{"pass", count(Status::kPass)},
            {"fail", count(Status::kFail)},
            {"not_applicable", count(Status::kNotApplicable)}}},
          {"failing", failing()},
          {"layers", layers}};
}

Report evaluate(const Facts& facts) {
  Report report{facts.tenant_id, facts.tenant_name, facts.isolation_class, facts.checked_at, {}};
  const std::string checked_at = format_rfc3339(from_unix_micros(facts.checked_at));
  for (const auto& d : defs()) {
    Check c = d.check(facts);
    ControlResult r;
    r.control = find_control(d.control.id);
    r.required = required(d.control, facts.isolation_class);
    if (!r.required) {
      r.status = Status::kNotApplicable;
      r.summary = fmt::format("not required for class {} (required from {}); {}",
                              vocab::class_name(facts.isolation_class),
                              vocab::class_name(d.control.required_from), c.summary);
    } else if (!c.available) {
      r.status = Status::kNotApplicable;
      r.summary = c.summary;
    } else {
      r.status = c.pass ? Status::kPass : Status::kFail;
      r.summary = c.summary;
    }
    r.evidence = {{"checked", c.checked}, {"seen", c.seen}, {"checked_at", checked_at}};
    report.results.push_back(std::move(r));
  }
  return report;
}

Json fleet_matrix(std::span<const Report> reports) {
  Json tenants = Json::array();
  std::map<std::string_view, int> fails;
  for (const auto& r : reports) {
    Json statuses = Json::object();
    for (const auto& c : r.results) {
      statuses[std::string(c.control->id)] = status_name(c.status);
      if (c.status == Status::kFail) ++fails[c.control->id];
    }
    tenants.push_back({{"id", r.tenant_id},
                       {"name", r.tenant_name},
                       {"isolation_class", vocab::class_name(r.isolation_class)},
                       {"fail", r.count(Status::kFail)},
                       {"pass", r.count(Status::kPass)},
                       {"not_applicable", r.count(Status::kNotApplicable)},
                       {"failing", r.failing()},
                       {"controls", statuses}});
  }
  Json cols = Json::array();
  for (const auto& c : control_list())
    cols.push_back({{"id", c.id},
                    {"layer", layer_name(c.layer)},
                    {"title", c.title},
                    {"failing_tenants", fails[c.id]}});
  int failing_tenants = static_cast<int>(std::count_if(
      reports.begin(), reports.end(), [](const Report& r) { return r.count(Status::kFail) > 0; }));
  return {{"controls", cols},
          {"tenants", tenants},
          {"counts", {{"tenants", reports.size()}, {"failing_tenants", failing_tenants}}}};
}

}  // namespace gp::posture
