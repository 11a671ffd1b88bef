// Kubernetes: the admission webhook a cluster's ValidatingWebhookConfiguration points at, and
// the tenant bundle (namespaces, quotas, network policies, RBAC, node placement, the webhook
// configuration) rendered from the store. The decisions are policy::review_admission and
// render::render_kubernetes; this file gathers their inputs.
#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "api/router.h"
#include "fleet/fleet.h"
#include "render/render.h"

namespace gp::api {
namespace {

using iam::Permission;
using vocab::Tier;

constexpr Tier kAllTiers[] = {Tier::kDedicatedPool, Tier::kDedicatedNode, Tier::kDedicatedGpu,
                              Tier::kMig, Tier::kShared};

// Every node, grouped by pool id (nodes in no pool are left out).
Result<std::map<std::string, std::vector<fleet::Node>>> nodes_by_pool(store::Tx& tx) {
  std::map<std::string, std::vector<fleet::Node>> out;
  for (auto& n : GP_TRY(all_pages(
           [&](const PageRequest& page) { return fleet::list_nodes(tx, page, std::nullopt); })))
    if (n.pool_id) out[*n.pool_id].push_back(std::move(n));
  for (auto& [_, nodes] : out)
    std::sort(nodes.begin(), nodes.end(),
              [](const auto& a, const auto& b) { return a.info.name < b.info.name; });
  return out;
}

std::vector<Tier> tiers_of(vocab::IsolationClass c) {
  std::vector<Tier> out;
  for (Tier t : kAllTiers)
    if (vocab::class_allows(c, t)) out.push_back(t);
  return out;
}

bool has_tier(const std::vector<Tier>& tiers, Tier t) {
  return std::find(tiers.begin(), tiers.end(), t) != tiers.end();
}

// MIG profiles of the catalog offerings the class allows, sorted and unique; and the smallest
// share (milli-GPU) of its shared offerings, 0 when there is none.
struct CatalogView {
  std::vector<std::string> mig_profiles;
  int min_shared_milli = 0;
};
Result<CatalogView> catalog_for(store::Tx& tx, vocab::IsolationClass c) {
  CatalogView v;
  std::set<std::string> profiles;
  for (const auto& o : GP_TRY(alloc::list_offerings(tx))) {
    if (!vocab::class_allows(c, o.tier)) continue;
    if (o.tier == Tier::kMig && !o.mig_profile.empty()) profiles.insert(o.mig_profile);
    if (o.tier == Tier::kShared && o.milli > 0 &&
        (v.min_shared_milli == 0 || o.milli < v.min_shared_milli))
      v.min_shared_milli = o.milli;
  }
  v.mig_profiles.assign(profiles.begin(), profiles.end());
  return v;
}

// The pool's placement as admission sees it: the labels and taint render puts on its nodes.
policy::PoolPlacement placement_of(const fleet::Pool& pool, const std::string& tenant_name,
                                   const std::vector<fleet::Node>& nodes) {
  policy::PoolPlacement p;
  p.name = pool.name;
  p.node_labels = {{std::string(render::kPoolLabel), pool.name},
                   {std::string(render::kTenantLabel), tenant_name}};
  p.taints.push_back({std::string(render::kTenantLabel), tenant_name, "NoSchedule"});
  for (const auto& n : nodes) p.nodes.push_back(n.info.name);
  return p;
}

// ---- the workload policy (migration 8) ----

constexpr size_t kMaxRegistries = 64;
constexpr size_t kMaxRegistryLength = 255;

// One allow-list entry, "host[:port][/path]", with the host lower-cased. The host must look
// like a registry (a '.', a port or "localhost"): "acme/tools" would be read as a Docker Hub
// repository by every image reference, so it is refused with a hint.
Result<std::string> normalize_registry(size_t index, std::string_view entry) {
  auto bad = [&](std::string_view why) {
    return fail(Error::invalid(fmt::format("allowed_registries[{}]: \"{}\" {}", index,
                                           entry.substr(0, kMaxRegistryLength), why)));
  };
  if (entry.empty()) return bad("is empty");
  if (entry.size() > kMaxRegistryLength)
    return bad(fmt::format("is longer than {} characters", kMaxRegistryLength));
  if (entry.find("://") != std::string_view::npos)
    return bad("has a scheme: write host[:port][/path] without it");
  if (entry.find('@') != std::string_view::npos)
    return bad("has a digest: an allow-list names registries and repositories, not images");
  size_t slash = entry.find('/');
  std::string host(entry.substr(0, slash));
  std::string_view path = slash == std::string_view::npos ? "" : entry.substr(slash + 1);
  std::string port;
  if (auto colon = host.find(':'); colon != std::string::npos) {
    port = host.substr(colon + 1);
    host.resize(colon);
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        port.front() == '0' || std::stoi(port) > 65535)
      return bad("has an invalid port (1-65535)");
  }
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!policy::valid_registry_host(host)) return bad("has an invalid registry host");
  if (host.find('.') == std::string::npos && host != "localhost" && port.empty())
    return bad(
        fmt::format("is not a registry host (write docker.io/{} for a Docker Hub path)", entry));
  std::string out = port.empty() ? host : host + ":" + port;
  if (slash != std::string_view::npos) {
    if (path.empty() || path.back() == '/') return bad("ends with '/'");
    size_t start = 0;
    for (;;) {
      size_t next = path.find('/', start);
      std::string_view comp = path.substr(start, next == path.npos ? path.npos : next - start);
      if (comp.find(':') != std::string_view::npos)
        return bad("has a tag: an allow-list names registries and repositories, not images");
      if (!policy::valid_repository_component(comp))
        return bad(
            fmt::format("has an invalid path component \"{}\" (lower-case letters and "
                        "digits separated by '.', '_' or '-')",
                        comp));
      if (next == path.npos) break;
      start = next + 1;
    }
    out += "/" + std::string(path);
  }
  return out;
}

Json workload_policy_json(const tenancy::WorkloadPolicy& p, const tenancy::Tenant& t) {
  Json j = json_of_fields(p);
  j["class_requires_pull_always"] = policy::class_requires_pull_always(t.isolation_class);
  return j;
}

// The body of a PUT, validated: every entry well formed, no entry twice (after folding the
// host's case), at most kMaxRegistries; require_pull_always may add to the class's rule but
// never switch it off.
Result<tenancy::WorkloadPolicy> workload_policy_from_body(const Call& call) {
  auto r = body_reader(call, "workload policy");
  const Json* list = r.optional_array("allowed_registries");
  if (list == nullptr && !r.has("allowed_registries"))
    r.reject("allowed_registries", "is required (an empty list allows any registry)");
  auto pull = r.optional_bool("require_pull_always");
  GP_TRY_VOID(r.finish());
  tenancy::WorkloadPolicy p;
  if (list->size() > kMaxRegistries)
    return fail(Error::invalid(
        fmt::format("allowed_registries: {} entries, at most {}", list->size(), kMaxRegistries)));
  std::set<std::string> seen;
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& e = (*list)[i];
    if (!e.is_string())
      return fail(Error::invalid(fmt::format("allowed_registries[{}]: must be a string", i)));
    std::string norm = GP_TRY(normalize_registry(i, e.get_ref<const std::string&>()));
    if (!seen.insert(norm).second)
      return fail(
          Error::invalid(fmt::format("allowed_registries[{}]: \"{}\" is listed twice", i, norm)));
    p.allowed_registries.push_back(std::move(norm));
  }
  const auto cls = call.tenant->isolation_class;
  if (pull && !*pull && policy::class_requires_pull_always(cls))
    return fail(Error::invalid(
        fmt::format("require_pull_always: class {} requires imagePullPolicy Always; a workload "
                    "policy can only tighten it",
                    vocab::class_name(cls))));
  p.require_pull_always = pull.value_or(false);
  return p;
}

Result<Reply> get_workload_policy(Api&, Call& call, store::Tx& tx) {
  auto p = GP_TRY(tenancy::load_workload_policy(tx, call.tenant->id));
  return json_reply(200, workload_policy_json(p, *call.tenant), p.version);
}

Result<Mutation> put_workload_policy(Api& api, Call& call, store::Tx& tx) {
  if (call.tenant->state == tenancy::TenantState::kOffboarding)
    return fail(Error::conflict("tenant is being offboarded and can no longer change"));
  auto next = GP_TRY(workload_policy_from_body(call));
  auto before = GP_TRY(tenancy::load_workload_policy(tx, call.tenant->id));
  GP_TRY_VOID(check_if_match(call, before.version));
  next = GP_TRY(tenancy::save_workload_policy(tx, call.tenant->id, before, std::move(next),
                                              call.who.id, to_unix_micros(api.clock().now())));
  Json added = Json::array(), removed = Json::array();
  const auto& b = before.allowed_registries;
  const auto& a = next.allowed_registries;
  for (const auto& x : a)
    if (std::find(b.begin(), b.end(), x) == b.end()) added.push_back(x);
  for (const auto& x : b)
    if (std::find(a.begin(), a.end(), x) == a.end()) removed.push_back(x);
  Mutation m;
  m.reply = json_reply(200, workload_policy_json(next, *call.tenant), next.version);
  m.detail = {{"version", next.version},
              {"registries_added", added},
              {"registries_removed", removed},
              {"require_pull_always", next.require_pull_always}};
  return m;
}

// Everything admission needs about `tenant`: its namespaces, the tiers and MIG profiles its
// class allows, its own pools and every other tenant's, and its stored workload policy.
Result<policy::TenantAdmissionContext> admission_context(store::Tx& tx,
                                                         const tenancy::Tenant& tenant,
                                                         const std::vector<tenancy::Tenant>& all) {
  policy::TenantAdmissionContext ctx;
  ctx.tenant = tenant.name;
  ctx.isolation_class = tenant.isolation_class;
  for (const auto& p : GP_TRY(tenancy::all_projects(tx, tenancy::TenantScope(tenant.id))))
    if (p.kubernetes_namespace) ctx.namespaces.push_back(*p.kubernetes_namespace);
  ctx.tiers = tiers_of(tenant.isolation_class);
  ctx.mig_profiles = GP_TRY(catalog_for(tx, tenant.isolation_class)).mig_profiles;
  std::map<std::string, std::string> names;  // tenant id -> name
  for (const auto& t : all) names[t.id] = t.name;
  auto nodes = GP_TRY(nodes_by_pool(tx));
  for (const auto& pool : GP_TRY(fleet::list_pools(tx))) {
    if (!pool.tenant_id) continue;  // shared pools are nobody's to guard
    auto owner = names.find(*pool.tenant_id);
    if (owner == names.end()) continue;
    auto placement = placement_of(pool, owner->second, nodes[pool.id]);
    if (*pool.tenant_id == tenant.id)
      ctx.own_pools.push_back(std::move(placement));
    else
      ctx.other_pools.push_back(std::move(placement));
  }
  ctx.require_own_pool = policy::class_requires_own_pool(tenant.isolation_class);
  auto workload = GP_TRY(tenancy::load_workload_policy(tx, tenant.id));
  ctx.allowed_registries = std::move(workload.allowed_registries);
  ctx.require_pull_always =
      policy::class_requires_pull_always(tenant.isolation_class) || workload.require_pull_always;
  return ctx;
}

// The tenant owning namespace `ns`: the one whose project was created with it (stored, unique,
// immutable: nothing another tenant does can change the answer).
Result<std::optional<tenancy::Tenant>> namespace_owner(store::Tx& tx, const std::string& ns,
                                                       const std::vector<tenancy::Tenant>& all) {
  auto project = GP_TRY(tenancy::find_project_by_namespace(tx, ns));
  if (!project) return std::optional<tenancy::Tenant>();
  for (const auto& t : all)
    if (t.id == project->tenant_id) return std::optional<tenancy::Tenant>(t);
  return std::optional<tenancy::Tenant>();
}

std::string request_string(const Json& review, const char* a, const char* b = nullptr) {
  const Json* j = &review;
  for (const char* k : {"request", a, b}) {
    if (k == nullptr) break;
    if (!j->is_object() || !j->contains(k)) return "";
    j = &(*j)[k];
  }
  return j->is_string() ? j->get<std::string>() : "";
}

Result<Reply> validate_admission(Api& api, Call& call) {
  const Json& review = *call.body;
  std::string ns = GP_TRY(policy::admission_namespace(review));
  std::optional<std::string> expected;
  if (auto q = call.req.query.find("tenant"); q != call.req.query.end()) expected = q->second;

  policy::TenantAdmissionContext ctx;
  std::string owner_id;  // the audited tenant
  GP_TRY_VOID(api.store().read([&](store::Tx& tx) -> Result<void> {
    auto all = GP_TRY(tenancy::all_tenants(tx));
    if (expected) {
      // A per-tenant webhook URL (?tenant=acme): the namespace must be that tenant's.
      auto t = GP_TRY(tenancy::find_tenant(tx, *expected));
      if (!t) return fail(Error::invalid(fmt::format("tenant \"{}\" not found", *expected)));
      ctx = GP_TRY(admission_context(tx, *t, all));
      owner_id = t->id;
      return ok();
    }
    if (auto owner = GP_TRY(namespace_owner(tx, ns, all))) {
      ctx = GP_TRY(admission_context(tx, *owner, all));
      owner_id = owner->id;
      return ok();
    }
    // No tenant: evaluated against a tenant that owns nothing, so every pod-carrying write is
    // refused (tenant.namespace) and deletions still pass.
    ctx.tenant = "(none)";
    return ok();
  }));

  Json response = GP_TRY(policy::review_admission(review, ctx));
  const Json& verdict = response["response"];
  if (!verdict.value("allowed", false)) {
    std::set<std::string> controls;
    for (const auto& cause : verdict["status"]["details"]["causes"]) {
      std::string m = cause.value("message", "");
      controls.insert(m.substr(0, m.find(": ")));
    }
    audit::Entry e;
    e.actor = call.who.id;
    e.tenant_id = owner_id;
    e.action = "admission.deny";
    std::string kind = request_string(review, "kind", "kind");
    std::string name = request_string(review, "name");
    e.resource = fmt::format("/namespaces/{}/{}/{}", ns, kind, name).substr(0, 512);
    e.outcome = "denied";
    e.request_id = call.request_id;
    e.source = call.req.remote;
    e.detail = {{"namespace", ns},
                {"kind", kind},
                {"name", name},
                {"operation", request_string(review, "operation")},
                {"uid", request_string(review, "uid")},
                {"user", request_string(review, "userInfo", "username")},
                {"controls", Json(std::vector<std::string>(controls.begin(), controls.end()))},
                {"message", verdict["status"].value("message", "").substr(0, 2000)}};
    GP_TRY_VOID(api.store().write([&](store::Tx& tx) -> Result<void> {
      GP_TRY_VOID(api.audit().append(tx, e));
      return ok();
    }));
  }
  return json_reply(200, std::move(response));
}

// A tenant's dry check: the verdict the webhook would give on a manifest in one of the
// tenant's namespaces, asked with the tenant's own credential. Nothing was refused in a cluster,
// so a denial here is not audited.
Result<Reply> check_admission(Api&, Call& call, store::Tx& tx) {
  GP_TRY(policy::admission_namespace(*call.body));
  auto all = GP_TRY(tenancy::all_tenants(tx));
  auto ctx = GP_TRY(admission_context(tx, *call.tenant, all));
  return json_reply(200, GP_TRY(policy::review_admission(*call.body, ctx)));
}

// ---- the bundle ----

// The most GPU-equivalents a quota document ({"models": {"H200": {nominal, borrow_limit,
// limit}}}) lets its holder use at once: per model the limit, else nominal plus what it may
// borrow (nominal alone when borrowing is unbounded: the cluster cap then follows the
// guarantee), summed over models.
double ceiling_gpus(const Json& quota) {
  double total = 0;
  if (!quota.contains("models")) return 0;
  for (const auto& [_, m] : quota["models"].items()) {
    if (m.contains("limit") && m["limit"].is_number())
      total += m["limit"].get<double>();
    else if (m.contains("borrow_limit") && m["borrow_limit"].is_number())
      total += m.value("nominal", 0.0) + m["borrow_limit"].get<double>();
    else
      total += m.value("nominal", 0.0);
  }
  return total;
}

// Compute slices of a MIG profile ("3g.71gb" -> 3); 0 when the name does not say.
int profile_slices(const std::string& profile) {
  int n = 0;
  size_t i = 0;
  while (i < profile.size() && std::isdigit(static_cast<unsigned char>(profile[i])) && n < 100)
    n = n * 10 + (profile[i++] - '0');
  return i < profile.size() && profile[i] == 'g' ? n : 0;
}

// The Kubernetes quota of a project holding `gpus` GPU-equivalents: whole GPUs, MIG instances
// of each profile (7 compute slices per GPU) and time-sliced shares, for the tiers allowed.
render::ProjectQuota cluster_quota(double gpus, const std::vector<Tier>& tiers,
                                   const CatalogView& catalog) {
  constexpr double kEps = 1e-9;
  render::ProjectQuota q;
  if (has_tier(tiers, Tier::kDedicatedGpu) || has_tier(tiers, Tier::kDedicatedNode) ||
      has_tier(tiers, Tier::kDedicatedPool))
    q.gpus = static_cast<int64_t>(std::floor(gpus + kEps));
  if (has_tier(tiers, Tier::kMig))
    for (const auto& p : catalog.mig_profiles)
      if (int s = profile_slices(p); s > 0)
        q.mig[p] = static_cast<int64_t>(std::floor(gpus * 7 / s + kEps));
  if (has_tier(tiers, Tier::kShared) && catalog.min_shared_milli > 0)
    q.shared_gpus = static_cast<int64_t>(std::floor(gpus * 1000 / catalog.min_shared_milli + kEps));
  return q;
}

bool dns_label(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// Labels all of a pool's nodes carry, less those the kubelet or gpuplane own.
std::map<std::string, std::string> common_labels(const std::vector<fleet::Node>& nodes) {
  std::map<std::string, std::string> out;
  if (nodes.empty()) return out;
  for (const auto& [k, v] : nodes.front().info.labels) {
    auto slash = k.find('/');
    std::string prefix = slash == std::string::npos ? "" : k.substr(0, slash);
    if (prefix.ends_with("kubernetes.io") || prefix.ends_with("k8s.io") ||
        prefix.ends_with("gpuplane.io"))
      continue;
    bool everywhere = std::all_of(nodes.begin(), nodes.end(), [&](const fleet::Node& n) {
      auto it = n.info.labels.find(k);
      return it != n.info.labels.end() && it->second == v;
    });
    if (everywhere) out[k] = v;
  }
  return out;
}

Result<std::string> webhook_base(const Call& call) {
  if (auto q = call.req.query.find("webhook_url"); q != call.req.query.end()) return q->second;
  auto host = call.req.header("host");
  if (!host || host->empty())
    return fail(Error::invalid("no Host header: pass ?webhook_url=https://host[:port]"));
  return "https://" + std::string(*host);
}

// `?ca_bundle=`: what the API server verifies gpuplane's certificate with, as Kubernetes'
// `caBundle` carries it (base64 of PEM certificates). Each certificate must parse.
Result<std::string> ca_bundle(const Call& call) {
  auto q = call.req.query.find("ca_bundle");
  if (q == call.req.query.end()) return std::string();
  const std::string& b64 = q->second;
  const Error bad = Error::invalid("ca_bundle must be the base64 of PEM certificates");
  if (b64.empty() || b64.size() > 16384 || b64.size() % 4 != 0) return fail(bad);
  std::string pem(b64.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(pem.data()),
                          reinterpret_cast<const unsigned char*>(b64.data()), int(b64.size()));
  if (n < 0) return fail(bad);
  pem.resize(size_t(n));
  while (!pem.empty() && pem.back() == '\0') pem.pop_back();  // the decoder counts padding
  BIO* bio = BIO_new_mem_buf(pem.data(), int(pem.size()));
  int certs = 0;
  while (X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    X509_free(x);
    ++certs;
  }
  BIO_free(bio);
  ERR_clear_error();  // the end of the input reads as "no start line"
  if (certs == 0 || pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos)
    return fail(Error::invalid("ca_bundle holds no PEM certificate that parses"));
  return b64;
}

Result<render::TenantBundleInput> bundle_input(Api& api, Call& call, store::Tx& tx) {
  const tenancy::Tenant& t = *call.tenant;
  render::TenantBundleInput in;
  in.tenant = t.name;
  in.isolation_class = t.isolation_class;
  in.tiers = tiers_of(t.isolation_class);
  auto catalog = GP_TRY(catalog_for(tx, t.isolation_class));
  in.mig_profiles = catalog.mig_profiles;
  in.webhook.base_url = GP_TRY(webhook_base(call));
  in.webhook.ca_bundle = GP_TRY(ca_bundle(call));

  auto projects = GP_TRY(tenancy::all_projects(tx, tenancy::TenantScope(t.id)));
  std::sort(projects.begin(), projects.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  const double tenant_gpus = ceiling_gpus(GP_TRY(api.allocs().tenant_quota(tx, t.id)));
  std::map<std::string, size_t> by_name;  // project name -> position in in.projects
  std::erase_if(projects, [&](const tenancy::Project& p) {
    if (p.kubernetes_namespace) return false;
    // No namespace of its own: left out of the bundle, and the header says why.
    auto ns = render::project_namespace(t.name, p.name);
    in.notes.push_back(
        ns ? fmt::format("project {} is left out: its namespace {} belongs to an older project "
                         "(docs/kubernetes.md, \"Namespaces\")",
                         p.name, *ns)
           : fmt::format("project {} is left out: {}", p.name, ns.error().message));
    return true;
  });
  for (const auto& p : projects) {
    Json pq = GP_TRY(api.allocs().project_quota(tx, t.id, p.id));
    // A project without its own share may use the whole tenant quota.
    bool own = pq.contains("models") && !pq["models"].empty();
    render::Project rp;
    rp.name = p.name;
    rp.quota = cluster_quota(own ? ceiling_gpus(pq) : tenant_gpus, in.tiers, catalog);
    by_name[p.name] = in.projects.size();
    in.projects.push_back(std::move(rp));
  }

  auto nodes = GP_TRY(nodes_by_pool(tx));
  std::vector<fleet::Pool> pools = GP_TRY(fleet::list_pools(tx));
  std::sort(pools.begin(), pools.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& pool : pools) {
    if (pool.tenant_id != t.id) continue;
    render::Pool rp;
    rp.name = pool.name;
    rp.node_labels = common_labels(nodes[pool.id]);
    for (const auto& n : nodes[pool.id]) rp.nodes.push_back(n.info.name);
    in.pools.push_back(std::move(rp));
  }

  // gpuplane users are Kubernetes users "<tenant>/<username>" (the login name the cluster's
  // OIDC issuer asserts); gpuplane service accounts become ServiceAccounts of the namespaces
  // they are bound in. Disabled subjects get nothing.
  const std::vector<tenancy::Binding> bindings = GP_TRY(all_pages(
      [&](const PageRequest& page) { return tenancy::list_bindings(tx, call.owner(), page); }));
  std::map<std::string, std::string> project_names;
  for (const auto& p : projects) project_names[p.id] = p.name;
  for (const auto& b : bindings) {
    std::vector<std::string> where;  // project names; empty: the whole tenant
    if (b.project_id) {
      auto it = project_names.find(*b.project_id);
      if (it == project_names.end()) continue;
      where.push_back(it->second);
    }
    if (b.subject_kind == "user") {
      auto u = GP_TRY(tenancy::find_user(tx, call.owner(), b.subject_id));
      if (!u || u->state != "active") continue;
      in.role_bindings.push_back({.role = b.role,
                                  .subject_kind = "User",
                                  .subject = t.name + "/" + u->username,
                                  .project = where.empty() ? "" : where.front()});
    } else if (b.subject_kind == "service_account") {
      auto sa = GP_TRY(tenancy::find_service_account(tx, call.owner(), b.subject_id));
      if (!sa || sa->state != "active" || !dns_label(sa->name) || sa->name == "default") continue;
      if (where.empty())
        for (const auto& p : projects) where.push_back(p.name);
      for (const auto& pname : where) {
        auto& sas = in.projects[by_name[pname]].service_accounts;
        if (std::find(sas.begin(), sas.end(), sa->name) == sas.end()) sas.push_back(sa->name);
        in.role_bindings.push_back({.role = b.role,
                                    .subject_kind = "ServiceAccount",
                                    .subject = sa->name,
                                    .project = pname});
      }
    }
  }
  for (auto& p : in.projects) std::sort(p.service_accounts.begin(), p.service_accounts.end());
  std::sort(in.role_bindings.begin(), in.role_bindings.end(), [](const auto& a, const auto& b) {
    return std::tie(a.role, a.subject_kind, a.subject, a.project) <
           std::tie(b.role, b.subject_kind, b.subject, b.project);
  });
  in.role_bindings.erase(std::unique(in.role_bindings.begin(), in.role_bindings.end(),
                                     [](const auto& a, const auto& b) {
                                       return a.role == b.role &&
                                              a.subject_kind == b.subject_kind &&
                                              a.subject == b.subject && a.project == b.project;
                                     }),
                         in.role_bindings.end());
  return in;
}

Result<Reply> render_bundle(Api& api, Call& call, store::Tx& tx) {
  auto in = GP_TRY(bundle_input(api, call, tx));
  Reply r;
  r.raw = GP_TRY(render::render_kubernetes(in));
  r.content_type = "application/yaml";
  return r;
}

// ---- reconcile: the cluster's GPU pods against the fleet's allocations ----

// What each tenant holds per node (Kubernetes node name), from the placements of placed and
// active allocations: whole GPUs, MIG instances by profile, time-sliced shares (one slot per
// granted share).
Result<std::vector<fleet::NodeHolding>> node_holdings(store::Tx& tx,
                                                      const std::vector<tenancy::Tenant>& all) {
  std::map<std::string, std::string> tenant_names;
  for (const auto& t : all) tenant_names[t.id] = t.name;
  const auto node_names = GP_TRY(fleet::node_names(tx));
  std::map<std::pair<std::string, std::string>, fleet::NodeHolding> by;  // (tenant, node)
  for (const auto& live : GP_TRY(alloc::live_placements(tx))) {
    const Json& placement = live.placement;
    auto tn = tenant_names.find(live.tenant_id);
    if (tn == tenant_names.end()) continue;
    if (!placement.contains("gpus") || !placement["gpus"].is_array())
      return fail(Error::internal("stored placement without gpus"));
    for (const auto& g : placement["gpus"]) {
      auto nn = node_names.find(g.value("node", ""));
      std::string node = nn == node_names.end() ? g.value("node", "") : nn->second;
      auto& h = by[{tn->second, node}];
      h.tenant = tn->second;
      h.node = node;
      if (g.contains("mig") && g["mig"].is_object())
        ++h.mig[g["mig"].value("profile", "")];
      else if (g.contains("milli"))
        ++h.shared;
      else
        ++h.whole_gpus;
    }
  }
  std::vector<fleet::NodeHolding> out;
  out.reserve(by.size());
  for (auto& [_, h] : by) out.push_back(std::move(h));
  return out;
}

Result<Reply> reconcile_kubernetes_pods(Api&, Call& call, store::Tx& tx) {
  if (!call.body) return fail(Error::invalid("body: expected `kubectl get pods -A -o json`"));
  fleet::PodReconcileInput in;
  in.pods = &*call.body;
  auto all = GP_TRY(tenancy::all_tenants(tx));
  // Namespace owners, as stored with each project (unique across the platform).
  for (const auto& t : all)
    for (const auto& p : GP_TRY(tenancy::all_projects(tx, tenancy::TenantScope(t.id))))
      if (p.kubernetes_namespace) in.namespace_tenants[*p.kubernetes_namespace] = t.name;
  in.holdings = GP_TRY(node_holdings(tx, all));
  auto report = GP_TRY(fleet::reconcile_pods(in));
  return json_reply(200, fleet::to_json(report));
}

}  // namespace

std::vector<Route> k8s_routes() {
  std::vector<Route> r;
  r.push_back({.method = "POST",
               .pattern = std::string(render::kAdmissionPath),
               .action = "admission.review",
               .permission = Permission::kAdmissionReview,
               .handler = validate_admission,
               .query_params = {"tenant"},
               .summary = "Kubernetes validating admission webhook: answers an "
                          "admission.k8s.io/v1 AdmissionReview (200 allowed or denied, 400 for "
                          "a malformed review). The tenant is the one owning the namespace, or "
                          "`?tenant=` for a per-tenant webhook. Denials are audited as "
                          "admission.deny.",
               .request_schema = "AdmissionReview",
               .response_schema = "AdmissionReview"});
  r.push_back({.method = "POST",
               .pattern = "/v1/tenants/{tenant}/admission/check",
               .action = "admission.check",
               .permission = Permission::kTenantRead,
               .handler = read_tx(check_admission),
               .summary = "A dry check for the tenant: the verdict the admission webhook would "
                          "give on an AdmissionReview in one of the tenant's namespaces (a "
                          "namespace of another tenant is denied). Changes nothing; a denial is "
                          "not audited.",
               .request_schema = "AdmissionReview",
               .response_schema = "AdmissionReview"});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/render/kubernetes",
               .action = "tenant.render.kubernetes",
               .permission = Permission::kTenantRead,
               .handler = serialized_tx(render_bundle),
               .query_params = {"webhook_url", "ca_bundle"},
               .summary = "The tenant's Kubernetes bundle as multi-document YAML "
                          "(application/yaml): namespaces, quotas, limit ranges, network "
                          "policies, service accounts, RBAC, node placement and the admission "
                          "webhook at `webhook_url` (default https://<Host>)."});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/workload-policy",
               .action = "workload.policy.get",
               .permission = Permission::kTenantRead,
               .handler = read_tx(get_workload_policy),
               .summary = "The tenant's workload policy: the registries its images may come "
                          "from (empty: any) and whether every container must pull Always on "
                          "top of what its class requires. Version 0: never set.",
               .response_schema = "WorkloadPolicy"});
  r.push_back({.method = "PUT",
               .pattern = "/v1/tenants/{tenant}/workload-policy",
               .action = "workload.policy.set",
               .permission = Permission::kQuotaWrite,
               .mutation = true,
               .conditional = true,
               .handler = write_tx(put_workload_policy),
               .summary = "Replace the tenant's workload policy: `allowed_registries` "
                          "(host[:port][/path], at most 64, no duplicates) and "
                          "`require_pull_always` (may tighten the class's rule, never loosen "
                          "it). Platform operators and tenant admins; audited with the "
                          "registries added and removed. The admission webhook applies it.",
               .request_schema = "WorkloadPolicySet",
               .response_schema = "WorkloadPolicy"});
  r.push_back({.method = "POST",
               .pattern = "/v1/fleet/reconcile/kubernetes-pods",
               .action = "fleet.reconcile.pods",
               .permission = Permission::kFleetRead,
               .handler = read_tx(reconcile_kubernetes_pods),
               .summary = "Reconcile `kubectl get pods -A -o json` against the allocations: "
                          "per node the Running and Pending pods requesting GPUs, their "
                          "tenants, and discrepancies (a tenant's pods on a node only others "
                          "hold, GPU pods on unallocated nodes, more requested than held, GPU "
                          "pods in namespaces no tenant owns). Changes nothing.",
               .request_schema = "KubernetesPodList",
               .response_schema = "PodReconcileReport"});
  return r;
}

}  // namespace gp::api
