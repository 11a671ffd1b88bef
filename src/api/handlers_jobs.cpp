// Jobs: a tenant's work, run as containers on the GPUs of its allocation (docs/jobs.md).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>

#include "api/router.h"
#include "fleet/fleet.h"
#include "jobs/records.h"
#include "policy/policy.h"

namespace gp::api {
namespace {

using iam::Permission;

// The job named in the path, in the path's project; 404 otherwise.
Result<jobs::Job> path_job(Call& call, store::Tx& tx) {
  auto j = GP_TRY(found(jobs::find_job(tx, call.tenant_scope(), call.param("job")), "job"));
  if (j.project_id != call.project->id) return fail(Error::not_found("job not found"));
  return j;
}

// The job with its members, its history and, while it waits, its allocation's reason.
Result<Json> job_detail(store::Tx& tx, const jobs::Job& j) {
  Json out = j.to_json();
  Json members = Json::array(), events = Json::array();
  for (const auto& m : GP_TRY(jobs::list_members(tx, j.id))) members.push_back(m.to_json());
  for (const auto& e : GP_TRY(jobs::list_job_events(tx, j.id))) events.push_back(e.to_json());
  out["members"] = members;
  out["events"] = events;
  out["attempt_history"] = GP_TRY(jobs::list_attempts(tx, j.id));
  if (auto a =
          GP_TRY(alloc::find_allocation(tx, tenancy::TenantScope(j.tenant_id), j.allocation_id)))
    out["allocation"] = {{"id", a->id},
                         {"state", alloc::state_name(a->state)},
                         {"reason_code", a->reason_code},
                         {"reason", a->reason}};
  return out;
}

Result<Mutation> create_job(Api& api, Call& call, store::Tx& tx) {
  auto spec = GP_TRY(jobs::parse_job_spec(*call.body));
  for (const auto& name : spec.secrets)
    if (!GP_TRY(tenant_secret_exists(tx, call.tenant->id, name)))
      return fail(Error::invalid(
          fmt::format("field 'secrets': the tenant has no secret named \"{}\" (create it with POST "
                      "/v1/tenants/{}/secrets)",
                      name, call.tenant->name)));
  auto policy = GP_TRY(tenancy::load_workload_policy(tx, call.tenant->id));
  auto gate = GP_TRY(budget_precheck(api, tx, call.tenant->id, call.project->id));
  auto w = api.env();
  auto j = GP_TRY(
      jobs::submit(tx, w, api.allocs(), spec,
                   {.tenant = *call.tenant,
                    .project = *call.project,
                    .allowed_registries = policy.allowed_registries,
                    .pull_always = policy.require_pull_always ||
                                   policy::class_requires_pull_always(call.tenant->isolation_class),
                    .id_pool = api.isolation().storage_ids,
                    .actor = call.who.id}));
  if (gate) {
    auto a = GP_TRY(
        found(alloc::find_allocation(tx, call.tenant_scope(), j.allocation_id), "allocation"));
    GP_TRY_VOID(budget_admit(api, tx, *gate, a));
  }
  Mutation m;
  m.reply = json_reply(201, GP_TRY(job_detail(tx, j)), j.version);
  m.resource = call.req.path + "/" + j.id;
  m.detail = {{"name", j.spec.name},
              {"image", j.spec.image},
              {"offering", j.spec.offering},
              {"allocation", j.allocation_id},
              {"state", jobs::state_name(j.state)}};
  return m;
}

Result<Reply> list_jobs(Api& api, Call& call, store::Tx& tx) {
  auto page = GP_TRY(page_request(api, call));
  jobs::JobFilter filter;
  if (auto s = call.req.query.find("state"); s != call.req.query.end()) {
    filter.state = jobs::parse_state(s->second);
    if (!filter.state)
      return fail(Error::invalid(
          "state must be one of queued, starting, running, succeeded, failed, cancelled, "
          "preempted"));
  }
  if (call.project) filter.project_id = call.project->id;
  auto p = GP_TRY(jobs::list_jobs(tx, call.tenant_scope(), filter, page));
  return json_reply(200, page_json(p, [](const auto& j) { return j.to_json(); }));
}

Result<Reply> get_job(Api&, Call& call, store::Tx& tx) {
  auto j = GP_TRY(path_job(call, tx));
  return json_reply(200, GP_TRY(job_detail(tx, j)), j.version);
}

// The utilization of the job's GPUs and MIG instances from its start to its end (or now), in at
// most `points` spans per GPU (default 120, at most 1,000).
Result<Reply> get_job_utilization(Api& api, Call& call, store::Tx& tx) {
  auto j = GP_TRY(path_job(call, tx));
  const int points = int(GP_TRY(int_param(call, "points", 1, 1000, 120)));
  Json out = {{"job", j.id}, {"allocation", j.allocation_id}, {"gpus", Json::array()}};
  if (!j.started_at) {
    out["from"] = nullptr;
    out["to"] = nullptr;
    return json_reply(200, out);
  }
  const int64_t from = *j.started_at, to = j.ended_at.value_or(api.env().now()) + 1;
  out["from"] = format_rfc3339(from_unix_micros(from));
  out["to"] = format_rfc3339(from_unix_micros(to));
  auto a =
      GP_TRY(found(alloc::find_allocation(tx, call.tenant_scope(), j.allocation_id), "allocation"));
  const auto node_names = GP_TRY(fleet::node_names(tx));
  for (const auto& g : a.placement.value("gpus", Json::array())) {
    std::string instance;
    if (g.contains("mig") && g["mig"].is_object())
      instance = vocab::instance_label({g["mig"].value("profile", ""), g["mig"].value("start", 0)});
    Json series = Json::array();
    for (const auto& p :
         GP_TRY(fleet::sample_series(tx, g.value("gpu", ""), instance, from, to, points)))
      series.push_back({{"time", format_rfc3339(from_unix_micros(p.time_us))},
                        {"util_pct", p.util_pct},
                        {"mem_used_bytes", p.mem_used_bytes},
                        {"samples", p.samples}});
    auto node = node_names.find(g.value("node", ""));
    out["gpus"].push_back({{"node", node == node_names.end() ? "" : node->second},
                           {"gpu", g.value("gpu", "")},
                           {"instance", instance},
                           {"points", series}});
  }
  return json_reply(200, out);
}

Result<Mutation> cancel_job(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "cancel");
  GP_TRY_VOID(r.finish());
  auto before = GP_TRY(path_job(call, tx));
  GP_TRY_VOID(check_if_match(call, before.version));
  auto j = GP_TRY(
      jobs::cancel(tx, api.env(), api.allocs(), call.tenant_scope(), before.id, call.who.id));
  Mutation m;
  m.reply = json_reply(200, GP_TRY(job_detail(tx, j)), j.version);
  m.detail = {{"name", j.spec.name}, {"state", jobs::state_name(j.state)}, {"reason", j.reason}};
  return m;
}

// Leaves of a member's kept `text` (its byte `start` on) what it wrote from byte `offset` on.
void drop_before(std::string& text, int64_t start, int64_t offset) {
  text.erase(0, static_cast<size_t>(
                    std::clamp<int64_t>(offset - start, 0, static_cast<int64_t>(text.size()))));
}

// Where a followed stream of a job's output stands: the job's state last sent, and for each
// member the offset up to which its output was sent. Written "<state>~<rank>:<offset>,...".
struct FollowCursor {
  std::string state;
  std::map<int64_t, int64_t> offsets;
};

std::string format_cursor(const FollowCursor& c) {
  std::string out = c.state + "~";
  for (const auto& [rank, offset] : c.offsets)
    out += fmt::format("{}{}:{}", out.back() == '~' ? "" : ",", rank, offset);
  return out;
}

Result<FollowCursor> parse_cursor(std::string_view text) {
  const auto bad = [] { return fail(Error::invalid("cursor is not one this server gave")); };
  const size_t tilde = text.find('~');
  if (tilde == std::string_view::npos || !jobs::parse_state(text.substr(0, tilde))) return bad();
  FollowCursor c{std::string(text.substr(0, tilde)), {}};
  std::string_view rest = text.substr(tilde + 1);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t colon = item.find(':');
    int64_t rank = -1, offset = -1;
    if (colon == std::string_view::npos) return bad();
    auto r1 = std::from_chars(item.data(), item.data() + colon, rank);
    auto r2 = std::from_chars(item.data() + colon + 1, item.data() + item.size(), offset);
    if (r1.ec != std::errc() || r1.ptr != item.data() + colon || r2.ec != std::errc() ||
        r2.ptr != item.data() + item.size() || rank < 0 || rank >= jobs::kMaxGangMembers ||
        offset < 0 || !c.offsets.emplace(rank, offset).second)
      return bad();
  }
  return c;
}

// How long a followed stream may go without a line: at most this, a line with the job's state
// (a keep-alive for proxies and for the client to see that the stream lives).
constexpr std::chrono::seconds kFollowKeepAlive{15};

// GET .../logs?follow=true[&tail=N][&rank=R][&cursor=C]: the output as it comes, streamed as
// NDJSON (Hold::next_target): a line per piece of a member's output ({rank, start, end, text}),
// a line with the job's state ({job, state, finished, cursor}) first, when it changes, when
// nothing else came for kFollowKeepAlive, and last, when the job has finished and the stream
// ends. A client that lost the stream passes the last `cursor` it was given to go on from there.
Result<Reply> follow_job_logs(Api& api, Call& call, int tail, int64_t rank) {
  for (const char* p : {"since", "wait"})
    if (call.req.query.contains(p))
      return fail(Error::invalid(fmt::format("follow cannot be combined with {}", p)));
  std::optional<FollowCursor> cursor;
  if (auto c = call.req.query.find("cursor"); c != call.req.query.end())
    cursor = GP_TRY(parse_cursor(c->second));
  FollowCursor next;
  // Taken before the read, so that output arriving in between wakes the next part.
  auto watch = api.holds().watch("job:" + call.param("job"));
  std::string out;
  bool finished = false, output = false;
  std::string job_id;
  GP_TRY_VOID(api.store().read([&](store::Tx& tx) -> Result<void> {
    auto j = GP_TRY(path_job(call, tx));
    job_id = j.id;
    next.state = jobs::state_name(j.state);
    finished = jobs::finished(j.state);
    for (auto& m : GP_TRY(jobs::job_logs(tx, j.id))) {
      if (rank >= 0 && m.rank != rank) continue;
      std::string text = std::move(m.text);
      if (!cursor)
        text = jobs::tail_lines(text, tail);  // the first part: the last `tail` lines, or all
      else if (auto at = cursor->offsets.find(m.rank); at != cursor->offsets.end())
        drop_before(text, m.start, at->second);
      next.offsets[m.rank] = m.end;
      if (text.empty()) continue;
      output = true;
      out += Json{{"rank", m.rank},
                  {"start", m.end - static_cast<int64_t>(text.size())},
                  {"end", m.end},
                  {"text", text}}
                 .dump() +
             "\n";
    }
    return ok();
  }));
  if (!cursor || cursor->state != next.state || finished || !output)
    out += Json{{"job", job_id},
                {"state", next.state},
                {"finished", finished},
                {"cursor", format_cursor(next)}}
               .dump() +
           "\n";
  Reply reply;
  reply.raw = std::move(out);
  reply.content_type = "application/x-ndjson";
  if (!finished) {
    std::string target =
        fmt::format("{}?follow=true&cursor={}", call.req.path, format_cursor(next));
    if (rank >= 0) target += fmt::format("&rank={}", rank);
    reply.hold = Hold{std::move(watch), std::chrono::steady_clock::now() + kFollowKeepAlive,
                      std::move(target)};
  }
  return reply;
}

// GET .../logs?tail=N&rank=R&since=S&wait=W: each member's kept output (or member R's), its
// last N lines, or what it wrote from byte S on (a follower passes the `end` it was given). With
// `since` and `wait`, a request that finds nothing new while the job runs is held (holds.h)
// until the job reports output or changes state, or W seconds have passed.
Result<Reply> get_job_logs(Api& api, Call& call) {
  const int tail = static_cast<int>(GP_TRY(int_param(call, "tail", 0, 100000, 0)));
  const int64_t rank = GP_TRY(int_param(call, "rank", -1, jobs::kMaxGangMembers - 1, -1));
  if (auto f = call.req.query.find("follow"); f != call.req.query.end()) {
    if (f->second != "true" && f->second != "false")
      return fail(Error::invalid("follow must be true or false"));
    if (f->second == "true") return follow_job_logs(api, call, tail, rank);
  }
  if (call.req.query.contains("cursor"))
    return fail(Error::invalid("cursor goes with follow=true"));
  const int64_t since = GP_TRY(int_param(call, "since", -1, int64_t{1} << 50, -1));
  const auto until = GP_TRY(hold_deadline(call));
  // Taken before the read, so that output arriving in between ends the hold.
  auto watch = until ? api.holds().watch("job:" + call.param("job")) : nullptr;
  Reply reply;
  bool fresh = false;  // something to tell a follower: new output, or the job has finished
  GP_TRY_VOID(api.store().read([&](store::Tx& tx) -> Result<void> {
    auto j = GP_TRY(path_job(call, tx));
    fresh = jobs::finished(j.state);
    Json items = Json::array();
    for (auto& m : GP_TRY(jobs::job_logs(tx, j.id))) {
      if (rank >= 0 && m.rank != rank) continue;
      std::string text = std::move(m.text);
      if (since >= 0) drop_before(text, m.start, since);
      text = jobs::tail_lines(text, tail);
      fresh = fresh || !text.empty();
      items.push_back({{"rank", m.rank},
                       {"start", m.end - static_cast<int64_t>(text.size())},
                       {"end", m.end},
                       {"dropped_before", m.start},
                       {"text", text}});
    }
    reply = json_reply(200, {{"job", j.id},
                             {"state", jobs::state_name(j.state)},
                             {"finished", jobs::finished(j.state)},
                             {"limit_bytes", jobs::kMaxLogBytes},
                             {"members", items}});
    return ok();
  }));
  if (until && since >= 0 && !fresh) reply.hold = Hold{std::move(watch), *until};
  return reply;
}

}  // namespace

std::vector<Route> job_routes() {
  const std::string jobs_path = "/v1/tenants/{tenant}/projects/{project}/jobs";
  std::vector<Route> r;
  r.push_back({.method = "POST",
               .pattern = jobs_path,
               .action = "job.create",
               .permission = Permission::kAllocationWrite,
               .mutation = true,
               .handler = write_tx(create_job),
               .summary = "Submit a job: its allocation is queued or placed by the scheduler, "
                          "and the nodes run its containers inside the tenant's boundaries.",
               .request_schema = "JobCreate",
               .response_schema = "Job",
               .success_status = 201});
  r.push_back({.method = "GET",
               .pattern = jobs_path,
               .action = "job.list",
               .permission = Permission::kAllocationRead,
               .handler = read_tx(list_jobs),
               .query_params = {"limit", "after", "state"},
               .summary = "The project's jobs.",
               .response_schema = "Job[]"});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/jobs",
               .action = "job.list_tenant",
               .permission = Permission::kAllocationRead,
               .handler = read_tx(list_jobs),
               .query_params = {"limit", "after", "state"},
               .summary = "The tenant's jobs in every project.",
               .response_schema = "Job[]"});
  r.push_back({.method = "GET",
               .pattern = jobs_path + "/{job}",
               .action = "job.get",
               .permission = Permission::kAllocationRead,
               .handler = read_tx(get_job),
               .summary = "One job: its state and reason, its members, its history and its "
                          "allocation.",
               .response_schema = "Job"});
  r.push_back({.method = "POST",
               .pattern = jobs_path + "/{job}/cancel",
               .action = "job.cancel",
               .permission = Permission::kAllocationWrite,
               .mutation = true,
               .conditional = true,
               .handler = write_tx(cancel_job),
               .summary = "Cancel a job: a queued one ends at once; a running one is stopped "
                          "(SIGTERM, SIGKILL after the grace period) and ends when its "
                          "containers have.",
               .request_schema = "JobCancel",
               .response_schema = "Job"});
  r.push_back({.method = "GET",
               .pattern = jobs_path + "/{job}/utilization",
               .action = "job.utilization",
               .permission = Permission::kAllocationRead,
               .handler = read_tx(get_job_utilization),
               .query_params = {"points"},
               .summary = "The job's GPUs and MIG instances from its start to its end (or now): "
                          "mean utilization and the most memory used per span, at most `points` "
                          "spans per GPU (default 120), from the samples their nodes reported.",
               .response_schema = "JobUtilization"});
  r.push_back({.method = "GET",
               .pattern = jobs_path + "/{job}/logs",
               .action = "job.logs",
               .permission = Permission::kAllocationRead,
               .handler = get_job_logs,
               .query_params = {"tail", "rank", "since", "wait", "follow", "cursor"},
               .summary = "A job's output, per member: the last `tail` lines, or from byte "
                          "`since` on (a follower passes back each member's `end`, with `wait` "
                          "to be answered as soon as there is more); with follow=true, streamed "
                          "as NDJSON while the job runs (a line per piece of output, a line with "
                          "the job's state and a `cursor` to resume from).",
               .response_schema = "JobLogs"});
  return r;
}

}  // namespace gp::api
