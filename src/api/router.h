// Private to the api module: the route table and the per-request context handlers receive.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/api.h"
#include "billing/ledger.h"
#include "common/json_out.h"
#include "common/page.h"
#include "tenancy/tenancy.h"

namespace gp::api {

// What a handler answers. `body` is serialized as JSON unless `raw` is set.
struct Reply {
  int status = 200;
  Json body;
  std::optional<std::string> raw;
  std::string content_type = "application/json";
  std::optional<int64_t> etag_version;
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<Hold> hold;  // GET only: hold the request until a change (http.h)
};

// A mutation's outcome: the reply plus what goes into its audit record.
struct Mutation {
  Reply reply;
  // When set, the reply's body as JSON text, built after the commit: outside the store's single
  // writer, where building it would hold every queued write. Built inside when an
  // Idempotency-Key stores it.
  std::function<std::string()> render_body;
  std::string resource;  // audit resource path; the request path when empty
  Json detail = Json::object();
  std::optional<std::string> tenant_id;  // audit tenant when the path names none
  std::optional<std::string> actor;      // audit actor when not the caller (enrolment)
  bool audited = true;  // false only for routine writes with nothing to tell (plain heartbeats)
};

enum class Access {
  kPublic,         // no credential needed
  kAuthenticated,  // any valid credential; the handler checks further
  kPermission,     // `permission` at the route's scope (tenant/project from the path)
  kNode,           // a node agent's own credential; node principals reach nothing else
};

struct Route;

struct Call {
  const HttpRequest& req;
  const Route* route;
  std::map<std::string, std::string> params;  // path parameters
  std::string request_id;
  iam::Principal who;
  std::optional<tenancy::Tenant> tenant;    // resolved {tenant}
  std::optional<tenancy::Project> project;  // resolved {project}
  std::optional<Json> body;                 // parsed JSON body (POST/PATCH)
  // Set with a 429 (kResourceExhausted) or a follower's 503: when to retry, sent as
  // Retry-After. Such refusals are not audited one by one.
  std::chrono::milliseconds retry_after{0};

  // The scope the route acts at (tenant and project from the path).
  iam::Scope scope() const;
  tenancy::Owner owner() const;  // tenant scope or platform
  tenancy::TenantScope tenant_scope() const;
  std::optional<int64_t> if_match() const;
  const std::string& param(const std::string& name) const { return params.at(name); }
};

// Records a denied, rejected or throttled request in its own transaction (nothing else was
// written).
void audit_failure(Api& api, const Call& call, const Route* route, std::string_view outcome,
                   const Error& e);

// The 429 of a rate limit that refused the call: names the limit, sets call.retry_after.
Error throttled(Call& call, const RateLimiter::Verdict& v, std::string_view what);

using Handler = std::function<Result<Reply>(Api&, Call&)>;
using TxHandler = std::function<Result<Reply>(Api&, Call&, store::Tx&)>;
using MutationHandler = std::function<Result<Mutation>(Api&, Call&, store::Tx&)>;

struct Route {
  std::string method;
  std::string pattern;  // "/v1/tenants/{tenant}/projects/{project}"
  std::string action;   // audit action and OpenAPI operationId: "project.get"
  Access access = Access::kPermission;
  iam::Permission permission = iam::Permission::kTenantRead;
  bool mutation = false;
  bool conditional = false;  // honours If-Match (the resource carries a version / ETag)
  // A write short enough to run on the I/O thread that read it: no password hash, no call out
  // of the process, nothing that waits but its group commit. Only its wait for the disk leaves
  // the thread (Server). Heartbeats say so; every other write runs on the server's writer pool,
  // where many more writes wait together and so share one commit: allocation creates on the I/O
  // threads ran at half their rate at 64 clients, in batches of at most one per I/O thread
  // (docs/benchmarks.md, "Heartbeats on the I/O threads").
  bool inline_write = false;
  Handler handler;
  std::vector<std::string> query_params;  // accepted query parameters
  // OpenAPI description
  std::string summary;
  std::string request_schema;   // component name, "" if none
  std::string response_schema;  // component name ("X" or "X[]" for a page)
  int success_status = 200;
  // Another success the route answers (a PUT that creates answers 201, a draft re-rated 200,
  // ...), with the same body unless other_response_schema names its own.
  std::optional<int> other_success_status;
  std::string other_response_schema;  // other_success_status's component name (a dry run's)
  // `pattern` split at '/', set by the Api once its table is complete (views into `pattern`).
  std::vector<std::string_view> segments;
  // The handler's ReadInSnapshot when it is one (set with `segments`), else null.
  const struct ReadInSnapshot* reader = nullptr;
};

// A read-only handler run in one store read transaction. Api::handle finds it in a route's
// handler and resolves the path's tenant and project in the same transaction, so a read costs
// one snapshot, not one per lookup; called on its own, it opens the transaction itself.
struct ReadInSnapshot {
  TxHandler fn;
  Result<Reply> operator()(Api& api, Call& call) const;
};
// Wraps a read-only handler in a store read transaction (a ReadInSnapshot).
Handler read_tx(TxHandler fn);
// Runs a read in the store's write transaction, so it sees the scheduler's in-memory state and
// the store at the same point (queue and quota views).
Handler serialized_tx(TxHandler fn);
// Runs a mutation in one write transaction together with its audit record and, when the
// request carries an Idempotency-Key, the stored response for replays.
Handler write_tx(MutationHandler fn);
Result<Reply> run_mutation(Api& api, Call& call, const MutationHandler& fn);

// Route tables per area, concatenated by the Api constructor.
std::vector<Route> system_routes();
std::vector<Route> tenancy_routes();
std::vector<Route> identity_routes();
std::vector<Route> fleet_routes();
std::vector<Route> alloc_routes();
std::vector<Route> k8s_routes();
std::vector<Route> network_routes();
std::vector<Route> billing_routes();
std::vector<Route> invoice_routes();  // billing accounts and invoices (handlers_invoices.cpp)
std::vector<Route> posture_routes();
std::vector<Route> usage_routes();
std::vector<Route> sla_routes();
std::vector<Route> oidc_routes();
std::vector<Route> budget_routes();
// The budget hard stop around an allocation create (handlers_budget.cpp). The precheck costs one
// indexed lookup when no budget with a hard stop covers the project (nullopt) and refuses a
// budget already spent; budget_admit refuses a created allocation whose price would take the
// spend over the amount (the caller's transaction then rolls back).
struct BudgetGate {
  std::vector<billing::Budget> stops;
  billing::Spend spend;
};
Result<std::optional<BudgetGate>> budget_precheck(Api& api, store::Tx& tx,
                                                  const std::string& tenant_id,
                                                  const std::string& project_id);
Result<void> budget_admit(Api& api, store::Tx& tx, const BudgetGate& gate,
                          const alloc::Allocation& a);
std::vector<Route> storage_routes();
std::vector<Route> job_routes();
// The tenant's secrets (handlers_network.cpp): whether one exists, and its value, opened with the
// tenant's data key (for the nodes that mount it into a job's members).
Result<bool> tenant_secret_exists(store::Tx& tx, const std::string& tenant_id,
                                  const std::string& name);
Result<std::string> open_tenant_secret(const Api& api, store::Tx& tx, const std::string& tenant_id,
                                       const std::string& name);
// The tenant's first data key, made now unless it has one (or had its keys destroyed): what its
// volume key derives from. Without a master key, nothing is made.
Result<void> ensure_tenant_key(Api& api, store::Tx& tx, const tenancy::Tenant& tenant);
// The key the nodes encrypt the tenant's volume trees with (storage::derive_volume_key); nullopt
// when the tenant has no live data key or the server no master key.
Result<std::optional<std::string>> tenant_volume_key(const Api& api, store::Tx& tx,
                                                     const tenancy::Tenant& tenant);
// Sets the usage gauges (GPU-equivalents held per tenant) from the open usage intervals.
void refresh_usage_gauges(Api& api, store::Tx& tx);
// Whether the caller reads figures counted from every tenant's allocations (the whole queue,
// the platform's use, other tenants on a node): platform principals, who read the fleet. A
// tenant's principals read their own figures only.
bool sees_every_tenant(const Call& call);
// Tenant creation: the tenant's network segment from the configured pool, as {vni, cidr} for
// the audit record (resource_exhausted when the pool has none left).
Result<Json> allocate_tenant_segment(Api& api, store::Tx& tx, const tenancy::Tenant& tenant);
// Offboarding: frees the tenant's network segment and policy; shreds its data keys.
Result<void> release_tenant_network(store::Tx& tx, const std::string& tenant_id);
Result<void> shred_tenant_keys(store::Tx& tx, const tenancy::Tenant& tenant);
// Offboarding: schedules the removal of the tenant's storage tree after the grace period
// (its ids are released once an agent has removed it); "none" when it never had volumes.
// Offboarding: the tenant's final invoice, the current month's draft rated now that its
// allocations are released (finalized with the monthly close). Never blocks offboarding: what
// stops it (e.g. no rate card in force) is reported instead of an invoice id.
Result<Json> draft_final_invoice(Api& api, store::Tx& tx, const tenancy::Tenant& t,
                                 const std::string& who);
Result<Json> schedule_tenant_storage_deletion(Api& api, store::Tx& tx, const tenancy::Tenant& t,
                                              const std::string& who);

// Browser sessions (docs/oidc.md): the session token travels in an HttpOnly cookie, and a
// write authenticated by that cookie must echo the CSRF token (derived from the session token,
// readable by the page from its own cookie) in X-CSRF-Token.
inline constexpr std::string_view kSessionCookie = "gp_session";
inline constexpr std::string_view kCsrfCookie = "gp_csrf";
std::string csrf_token(std::string_view session_token);
// Set-Cookie values: Secure when the API speaks TLS; `ttl` zero clears the cookies.
std::vector<std::pair<std::string, std::string>> session_cookies(const Api& api,
                                                                 std::string_view token,
                                                                 Duration ttl);
Json principal_json(const iam::Principal& p);
// A login's session for `user_id` and its 201 reply: the token in the body, or with `cookie`
// set as cookies (the body then carries the CSRF token instead).
Result<Mutation> login_session(Api& api, store::Tx& tx, const std::string& user_id, bool cookie);

// Helpers for handlers.
Reply json_reply(int status, Json body, std::optional<int64_t> etag = std::nullopt);
Result<PageRequest> page_request(const Api& api, const Call& call);
// Query parameter `name` as an integer from `min` to `max`; `fallback` when absent.
Result<int64_t> int_param(const Call& call, const std::string& name, int64_t min, int64_t max,
                          int64_t fallback);
// Long polls (holds.h): the deadline of a request that may be held, from its `wait` query
// parameter (seconds, 0 to kMaxHoldSeconds) on its first run and kept across its runs; nullopt
// when it must be answered now (no wait asked, or the deadline has passed).
inline constexpr int64_t kMaxHoldSeconds = 60;
Result<std::optional<std::chrono::steady_clock::time_point>> hold_deadline(const Call& call);
// Query parameter `name` as Unix microseconds: an RFC 3339 time or a date (midnight UTC);
// `fallback` when absent.
Result<int64_t> time_param(const Call& call, const std::string& name, int64_t fallback);
// A page's "next": its cursor, or null on the last page.
template <typename T>
Json next_json(const Page<T>& page) {
  return page.next ? Json(*page.next) : Json(nullptr);
}
template <typename T, typename F>
Json page_json(const Page<T>& page, F&& to_json) {
  Json items = Json::array();
  for (const auto& item : page.items) items.push_back(to_json(item));
  return {{"items", std::move(items)}, {"next", next_json(page)}};
}
// The 200 reply of a page of records that describe themselves (common/json_out.h), written
// straight into its text: the same document as page_json, without building it as Json first.
// Only for records without secrets (a raw body is not checked by carries_secret).
template <typename T>
Reply page_reply(const Page<T>& page) {
  JsonText out(256 * (page.items.size() + 1));  // a guess at a page's size: most items are smaller
  out.begin_object();
  out.key("items");
  out.begin_array();
  for (const auto& item : page.items) {
    out.begin_object();
    item.describe(out);
    out.end_object();
  }
  out.end_array();
  out.optional_string("next", page.next);
  out.end_object();
  Reply r;
  r.raw = std::move(out).take();
  return r;
}
// Requires a parsed body; returns a reader for it.
ObjectReader body_reader(const Call& call, std::string_view what);
// The value of a lookup that found something; not_found ("<what> not found") otherwise.
template <typename T>
Result<T> found(Result<std::optional<T>> r, std::string_view what) {
  if (!r) return fail(r.error());
  if (!*r) return fail(Error::not_found(std::string(what) + " not found"));
  return std::move(**r);
}
// Checks a permission at an explicit scope; 404 for hidden, 403 for denied.
Result<void> require(const Call& call, iam::Permission p, const iam::Scope& where);
// 412 when the request's If-Match names another version than `version`.
Result<void> check_if_match(const Call& call, int64_t version);

}  // namespace gp::api
