// Tenant networks (segment, policy, a node's nftables ruleset) and tenant secrets, sealed with
// the tenant's data key and never returned. The pure rules live in gp_network and gp_storage;
// their rows are kept by gp_network_records and gp_storage_records.
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "api/network_state.h"
#include "api/router.h"
#include "fleet/fleet.h"
#include "network/records.h"
#include "storage/records.h"

namespace gp::api {
namespace {

using iam::Permission;

constexpr size_t kMaxSecretBytes = 64 << 10;

// ---- Network state in the store ----

// The tenant's name in place of its id (the core names tenants), for the items of tenants that
// still exist; sorted by name, as the ruleset is rendered.
template <typename T, typename GetId>
std::vector<T> named_by_tenant(const std::unordered_map<std::string, std::string>& names,
                               std::vector<T> items, GetId id_of) {
  std::erase_if(items, [&](T& item) { return !names.contains(id_of(item)); });
  for (T& item : items) id_of(item) = names.at(id_of(item));
  std::ranges::sort(items, {}, id_of);
  return items;
}

std::string& segment_tenant(network::Segment& s) { return s.tenant; }

// Every live segment, named by tenant name.
Result<std::vector<network::Segment>> load_segments(store::Tx& tx) {
  // Names read in one query, not one per tenant: the agents' assignments read them.
  return named_by_tenant(GP_TRY(tenancy::tenant_names(tx)), GP_TRY(network::load_segments(tx)),
                         segment_tenant);
}

// The tenant's segment; nullopt when it has none (a tenant created before segments were
// allocated at creation, or one being offboarded). Reads only.
Result<std::optional<network::Segment>> find_segment(store::Tx& tx, const tenancy::Tenant& t) {
  auto seg = GP_TRY(network::load_segment(tx, t.id));
  if (seg) seg->tenant = t.name;
  return seg;
}

// The tenant's segment, allocated from the configured pool when it has none. Writes: only for
// mutations, whose audit record tells what `allocated` says.
Result<network::Segment> ensure_segment(Api& api, store::Tx& tx, const tenancy::Tenant& t,
                                        bool* allocated) {
  *allocated = false;
  if (auto seg = GP_TRY(find_segment(tx, t))) return *seg;
  if (t.state == tenancy::TenantState::kOffboarding)
    return fail(Error::conflict("tenant is being offboarded: its segment was released"));
  const auto existing = GP_TRY(load_segments(tx));
  auto seg = GP_TRY(network::allocate_segment(api.isolation().segments, existing, t.name));
  GP_TRY_VOID(
      network::insert_segment(tx, {t.id, seg.vni, seg.cidr}, to_unix_micros(api.clock().now())));
  *allocated = true;
  return seg;
}

struct StoredPolicy {
  network::TenantPolicy policy;
  int64_t version = 0;  // 0: never set (the default policy: no egress, no exposures)
};

Result<StoredPolicy> load_policy(Api& api, store::Tx& tx, const tenancy::Tenant& t) {
  auto stored = GP_TRY(network::load_policy(tx, t.id));
  if (!stored) return StoredPolicy{network::TenantPolicy{.tenant = t.name}, 0};
  auto p =
      GP_TRY(network::policy_from_json(stored->policy, t.name, api.isolation().segments.supernet));
  return StoredPolicy{std::move(p), stored->version};
}

// The policy as the API reads and writes it: the tenant comes from the path, never the body.
Json policy_body(const network::TenantPolicy& p) { return json_of_fields(p); }

Json network_json(const std::optional<network::Segment>& seg, const StoredPolicy& p) {
  return {{"segment", seg ? json_of_fields(*seg) : Json(nullptr)},
          {"policy", policy_body(p.policy)},
          {"version", p.version}};
}

// What a policy change did: the rules added and removed, per list.
Json policy_diff(const Json& before, const Json& after) {
  Json diff = Json::object();
  for (const char* list : {"egress", "exposures"}) {
    Json added = Json::array(), removed = Json::array();
    const Json& b = before.at(list);
    const Json& a = after.at(list);
    for (const auto& rule : a)
      if (std::find(b.begin(), b.end(), rule) == b.end()) added.push_back(rule);
    for (const auto& rule : b)
      if (std::find(a.begin(), a.end(), rule) == a.end()) removed.push_back(rule);
    diff[list] = {{"added", added}, {"removed", removed}};
  }
  return diff;
}

// A read: a tenant without a segment reads null (POST .../network/segment allocates one).
Result<Reply> get_network(Api& api, Call& call, store::Tx& tx) {
  auto seg = GP_TRY(find_segment(tx, *call.tenant));
  auto p = GP_TRY(load_policy(api, tx, *call.tenant));
  return json_reply(200, network_json(seg, p), p.version);
}

// For a tenant that has no segment yet (one created before segments came with the tenant);
// conflict when it has one.
Result<Mutation> allocate_segment(Api& api, Call& call, store::Tx& tx) {
  if (call.tenant->state == tenancy::TenantState::kOffboarding)
    return fail(Error::conflict("tenant is being offboarded and can no longer change"));
  if (auto seg = GP_TRY(find_segment(tx, *call.tenant)))
    return fail(Error::conflict(fmt::format("tenant already has segment VNI {} {}", seg->vni,
                                            network::to_string(seg->cidr))));
  bool allocated = false;
  auto seg = GP_TRY(ensure_segment(api, tx, *call.tenant, &allocated));
  Mutation m;
  m.reply = json_reply(201, json_of_fields(seg));
  m.detail = json_of_fields(seg);
  return m;
}

Result<Mutation> put_policy(Api& api, Call& call, store::Tx& tx) {
  if (call.tenant->state == tenancy::TenantState::kOffboarding)
    return fail(Error::conflict("tenant is being offboarded and can no longer change"));
  auto next = GP_TRY(
      network::policy_from_json(*call.body, call.tenant->name, api.isolation().segments.supernet));
  bool allocated = false;
  auto seg = GP_TRY(ensure_segment(api, tx, *call.tenant, &allocated));
  auto before = GP_TRY(load_policy(api, tx, *call.tenant));
  GP_TRY_VOID(check_if_match(call, before.version));
  Json after_json = policy_body(next);
  StoredPolicy after{std::move(next), before.version + 1};
  GP_TRY_VOID(network::save_policy(tx, call.tenant->id, after_json, after.version,
                                   to_unix_micros(api.clock().now())));
  Mutation m;
  m.reply = json_reply(200, network_json(seg, after), after.version);
  m.detail = {{"version", after.version},
              {"diff", policy_diff(policy_body(before.policy), after_json)}};
  if (allocated) m.detail["segment_allocated"] = json_of_fields(seg);
  return m;
}

Result<Reply> node_nftables(Api& api, Call& call, store::Tx& tx) {
  auto node = GP_TRY(found(fleet::find_node(tx, call.param("node")), "node"));
  auto state = GP_TRY(node_net_state(api, tx));
  auto ruleset = GP_TRY(network::render_nftables(state));
  Json segments = Json::array();
  for (const auto& s : state.segments) {
    Json j = json_of_fields(s);
    j["tenant"] = s.tenant;
    segments.push_back(j);
  }
  return json_reply(200,
                    {{"node", node.id},
                     {"table", fmt::format("{} {}", network::kTableFamily, network::kTableName)},
                     {"segments", segments},
                     {"ruleset", ruleset}});
}

// ---- Keys and secrets in the store ----

// Checked by require_master_key.
std::span<const storage::MasterKey> master_keys(const Api& api) {
  return api.isolation().master_keys;
}

Result<void> require_master_key(const Api& api) {
  if (api.isolation().master_keys.empty())
    return fail(ErrorCode::kUnavailable, "no master key is configured: secrets are unavailable");
  return ok();
}

Result<Mutation> create_secret(Api& api, Call& call, store::Tx& tx) {
  GP_TRY_VOID(require_master_key(api));
  auto r = body_reader(call, "secret");
  std::string name = r.string("name", 128);
  std::string value = r.string("value", kMaxSecretBytes);
  GP_TRY_VOID(r.finish());
  GP_TRY_VOID(storage::validate_secret_name(name));  // before anything is created
  if (value.empty()) return fail(Error::invalid("value: must not be empty"));
  const auto& t = *call.tenant;
  const int64_t now = to_unix_micros(api.clock().now());
  GP_TRY_VOID(ensure_tenant_key(api, tx, t));
  auto ring = GP_TRY(storage::load_keyring(tx, t.id));
  auto sealed =
      GP_TRY(storage::seal_secret(ring, master_keys(api), t.name, name, value, api.random()));
  if (GP_TRY(storage::secret_exists(tx, t.id, name)))
    return fail(Error::conflict(fmt::format("a secret named '{}' already exists", name)));
  const storage::SecretRecord record{name, sealed.key_version, call.who.id, now};
  GP_TRY_VOID(storage::insert_secret(tx, t.id, sealed, record));
  Mutation m;
  m.reply = json_reply(201, json_of_fields(record));
  m.resource = call.req.path + "/" + name;
  m.reply.headers.emplace_back("Location", m.resource);
  m.detail = {{"name", name}, {"key_version", sealed.key_version}};
  return m;
}

Result<Reply> list_secrets(Api& api, Call& call, store::Tx& tx) {
  auto page = GP_TRY(page_request(api, call));
  auto secrets =
      make_page(GP_TRY(storage::list_secrets(tx, call.tenant->id, page.after.value_or(""),
                                             int64_t{page.limit} + 1)),
                page, [](const storage::SecretRecord& s) { return s.name; });
  return json_reply(200, page_json(secrets, json_of_fields<storage::SecretRecord>));
}

Result<Mutation> delete_named_secret(Call& call, store::Tx& tx, const std::string& name) {
  if (!GP_TRY(storage::delete_secret(tx, call.tenant->id, name)))
    return fail(Error::not_found("secret not found"));
  Mutation m;
  m.reply.status = 204;
  m.detail = {{"name", name}};
  return m;
}

Result<Mutation> delete_secret(Api&, Call& call, store::Tx& tx) {
  return delete_named_secret(call, tx, call.param("secret"));
}

// The name in the query: secrets stored with a "/" in their name (allowed before the naming
// rule of storage::validate_secret_name) cannot be named in the path, which is decoded before
// it is routed.
Result<Mutation> delete_secret_by_query(Api&, Call& call, store::Tx& tx) {
  auto q = call.req.query.find("name");
  if (q == call.req.query.end() || q->second.empty())
    return fail(Error::invalid("name: required, the name of the secret to delete"));
  return delete_named_secret(call, tx, q->second);
}

// ---- Data key rotation ----

Json time_or_null(int64_t micros) {
  return micros == 0 ? Json(nullptr) : Json(format_rfc3339(from_unix_micros(micros)));
}

Json key_status_json(const storage::TenantKeyStatus& s) {
  Json versions = Json::array();
  for (const auto& v : s.versions)
    versions.push_back({{"version", v.version},
                        {"master_key_id", v.master_key_id},
                        {"created_at", time_or_null(v.created_at)},
                        {"secrets", v.secrets}});
  return {{"state", !s.exists     ? "none"
                    : s.destroyed ? "destroyed"
                                  : "active"},
          {"current_version", s.current_version == 0 ? Json(nullptr) : Json(s.current_version)},
          {"rotated_at", time_or_null(s.destroyed ? 0 : s.rotated_at)},
          {"versions", versions}};
}

Result<Reply> get_keys(Api&, Call& call, store::Tx& tx) {
  return json_reply(200, key_status_json(GP_TRY(storage::tenant_key_status(tx, call.tenant->id))));
}

Result<Mutation> rotate_keys(Api& api, Call& call, store::Tx& tx) {
  GP_TRY_VOID(require_master_key(api));
  auto r = body_reader(call, "key rotation");  // an empty object: nothing to choose
  GP_TRY_VOID(r.finish());
  const auto& t = *call.tenant;
  auto rotation = GP_TRY(storage::rotate_tenant_key(tx, t.id, t.name, master_keys(api),
                                                    api.random(), api.env().now()));
  Json body = key_status_json(GP_TRY(storage::tenant_key_status(tx, t.id)));
  body["resealed"] = rotation.resealed;
  Mutation m;
  m.reply = json_reply(200, body);
  m.detail = {{"version", rotation.version}, {"resealed", rotation.resealed}};
  return m;
}

}  // namespace

Result<int> Api::key_rotation_sweep(Duration max_age) {
  if (isolation().master_keys.empty()) return 0;
  const int64_t now = env().now();
  const int64_t before =
      now - std::chrono::duration_cast<std::chrono::microseconds>(max_age).count();
  int rotated = 0;
  GP_TRY_VOID(store().write([&](store::Tx& tx) -> Result<void> {
    for (const auto& [id, name] : GP_TRY(storage::tenants_with_keys_older_than(tx, before))) {
      auto r = GP_TRY(storage::rotate_tenant_key(tx, id, name, master_keys(*this), random(), now));
      audit::Entry e{
          "system",     id,
          "key.rotate", "/v1/tenants/" + id + "/keys/rotate",
          "success",    "key rotation age",
          "local",      {{"version", r.version}, {"resealed", r.resealed}, {"automatic", true}}};
      GP_TRY_VOID(audit().append(tx, e));
      ++rotated;
    }
    return ok();
  }));
  return rotated;
}

Result<network::NodeNetState> node_net_state(Api& api, store::Tx& tx) {
  const auto names = GP_TRY(tenancy::tenant_names(tx));
  network::NodeNetState state;
  state.segments = named_by_tenant(names, GP_TRY(network::load_segments(tx)), segment_tenant);
  using TenantPolicyJson = std::pair<std::string, Json>;
  for (const auto& [name, j] :
       named_by_tenant(names, GP_TRY(network::load_policies_with_segments(tx)),
                       [](TenantPolicyJson& p) -> std::string& { return p.first; }))
    state.policies.push_back(
        GP_TRY(network::policy_from_json(j, name, api.isolation().segments.supernet)));
  return state;
}

Result<bool> tenant_secret_exists(store::Tx& tx, const std::string& tenant_id,
                                  const std::string& name) {
  return storage::secret_exists(tx, tenant_id, name);
}

Result<std::string> open_tenant_secret(const Api& api, store::Tx& tx, const std::string& tenant_id,
                                       const std::string& name) {
  GP_TRY_VOID(require_master_key(api));
  auto sealed = GP_TRY(storage::load_sealed_secret(tx, tenant_id, name));
  if (!sealed) return fail(Error::not_found(fmt::format("secret {} not found", name)));
  auto ring = GP_TRY(storage::load_keyring(tx, tenant_id));
  return storage::open_secret(ring, master_keys(api), *sealed);
}

Result<void> ensure_tenant_key(Api& api, store::Tx& tx, const tenancy::Tenant& tenant) {
  if (master_keys(api).empty()) return ok();
  auto ring = GP_TRY(storage::load_keyring(tx, tenant.id));
  if (!ring.tenants.empty()) return ok();
  const int64_t now = api.env().now();
  GP_TRY_VOID(
      storage::create_tenant_key(ring, tenant.name, master_keys(api).front(), api.random(), now));
  return storage::save_keyring(tx, tenant.id, ring, false, now);
}

Result<std::optional<std::string>> tenant_volume_key(const Api& api, store::Tx& tx,
                                                     const tenancy::Tenant& tenant) {
  if (master_keys(api).empty()) return std::optional<std::string>();
  auto ring = GP_TRY(storage::load_keyring(tx, tenant.id));
  if (ring.tenants.empty() || ring.tenants[0].destroyed) return std::optional<std::string>();
  return std::optional<std::string>(
      GP_TRY(storage::derive_volume_key(ring, master_keys(api), tenant.name)));
}

Result<Json> allocate_tenant_segment(Api& api, store::Tx& tx, const tenancy::Tenant& tenant) {
  bool allocated = false;
  return json_of_fields(GP_TRY(ensure_segment(api, tx, tenant, &allocated)));
}

Result<void> release_tenant_network(store::Tx& tx, const std::string& tenant_id) {
  return network::release_tenant(tx, tenant_id);
}

// Stamped with the tenant's own last change: its offboarding, in the same transaction.
Result<void> shred_tenant_keys(store::Tx& tx, const tenancy::Tenant& tenant) {
  auto ring = GP_TRY(storage::load_keyring(tx, tenant.id));
  const bool existed = !ring.tenants.empty();
  if (existed) {
    if (ring.tenants[0].destroyed) return ok();  // already shredded
    GP_TRY_VOID(storage::destroy_tenant_keys(ring, tenant.name));
  } else {
    // Never had a key: record it as destroyed so none is ever created under this tenant.
    ring.tenants.push_back({.tenant = tenant.name, .destroyed = true});
  }
  return storage::save_keyring(tx, tenant.id, ring, existed, tenant.updated_at);
}

std::vector<Route> network_routes() {
  const std::string tenant = "/v1/tenants/{tenant}";
  std::vector<Route> r;
  r.push_back({.method = "GET",
               .pattern = tenant + "/network",
               .action = "network.get",
               .permission = Permission::kTenantRead,
               .handler = serialized_tx(get_network),
               .summary = "The tenant's network segment (VNI and CIDR, allocated when the "
                          "tenant is created; null for a tenant that has none) and its policy: "
                          "declared egress and exposures.",
               .response_schema = "TenantNetwork"});
  r.push_back({.method = "POST",
               .pattern = tenant + "/network/segment",
               .action = "network.segment.allocate",
               .permission = Permission::kIdentityWrite,
               .mutation = true,
               .handler = write_tx(allocate_segment),
               .summary = "Allocate the tenant's segment from the pool, for a tenant created "
                          "before segments came with the tenant (409 when it has one).",
               .response_schema = "Segment",
               .success_status = 201});
  r.push_back({.method = "PUT",
               .pattern = tenant + "/network/policy",
               .action = "network.policy.set",
               .permission = Permission::kIdentityWrite,
               .mutation = true,
               .conditional = true,
               .handler = write_tx(put_policy),
               .summary = "Replace the tenant's egress rules and exposures (never addresses of the "
                          "tenant supernet); audited with the rules added and removed.",
               .request_schema = "NetworkPolicySet",
               .response_schema = "TenantNetwork"});
  r.push_back({.method = "GET",
               .pattern = "/v1/nodes/{node}/nftables",
               .action = "network.nftables",
               .permission = Permission::kFleetRead,
               .handler = read_tx(node_nftables),
               .summary = "The nftables ruleset (table inet gpuplane) the node enforces for the "
                          "stored tenant segments and policies.",
               .response_schema = "NodeNftables"});
  r.push_back({.method = "POST",
               .pattern = tenant + "/secrets",
               .action = "secret.create",
               .permission = Permission::kIdentityWrite,
               .mutation = true,
               .handler = write_tx(create_secret),
               .summary = "Store a secret sealed with the tenant's data key. Write-only: the value "
                          "is never returned.",
               .request_schema = "SecretCreate",
               .response_schema = "Secret",
               .success_status = 201});
  r.push_back({.method = "GET",
               .pattern = tenant + "/secrets",
               .action = "secret.list",
               .permission = Permission::kIdentityRead,
               .handler = read_tx(list_secrets),
               .query_params = {"limit", "after"},
               .summary = "The tenant's secrets (names and key versions, never values).",
               .response_schema = "Secret[]"});
  r.push_back({.method = "GET",
               .pattern = tenant + "/secrets/{secret}",
               .action = "secret.get",
               .permission = Permission::kIdentityRead,
               .handler = read_tx([](Api&, Call& call, store::Tx& tx) -> Result<Reply> {
                 auto secret = GP_TRY(found(
                     storage::find_secret(tx, call.tenant->id, call.param("secret")), "secret"));
                 return json_reply(200, json_of_fields(secret));
               }),
               .summary = "One secret's metadata (never its value).",
               .response_schema = "Secret"});
  r.push_back({.method = "DELETE",
               .pattern = tenant + "/secrets",
               .action = "secret.delete",
               .permission = Permission::kIdentityWrite,
               .mutation = true,
               .handler = write_tx(delete_secret_by_query),
               .query_params = {"name"},
               .summary = "Delete the secret named in the query (?name=NAME), for names no path "
                          "can carry: secrets stored with a \"/\" in their name before names "
                          "were restricted.",
               .success_status = 204});
  r.push_back({.method = "GET",
               .pattern = tenant + "/keys",
               .action = "key.get",
               .permission = Permission::kIdentityRead,
               .handler = read_tx(get_keys),
               .summary = "The tenant's data key versions: which master key wraps each, when it "
                          "was made and how many secrets it seals (never key material).",
               .response_schema = "TenantKeys"});
  r.push_back({.method = "POST",
               .pattern = tenant + "/keys/rotate",
               .action = "key.rotate",
               .permission = Permission::kIdentityWrite,
               .mutation = true,
               .handler = write_tx(rotate_keys),
               .summary = "Make a new data key version current and reseal every secret under it "
                          "(the first key, for a tenant that has none); older versions stay to "
                          "open what they encrypted. 409 once the keys were destroyed.",
               .request_schema = "KeyRotate",
               .response_schema = "TenantKeysRotated"});
  r.push_back({.method = "DELETE",
               .pattern = tenant + "/secrets/{secret}",
               .action = "secret.delete",
               .permission = Permission::kIdentityWrite,
               .mutation = true,
               .handler = write_tx(delete_secret),
               .summary = "Delete a secret.",
               .success_status = 204});
  return r;
}

}  // namespace gp::api
