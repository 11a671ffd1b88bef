// Allocation records: parsing create requests, the stored forms of requests and placements,
// and the scoped reads.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "alloc/alloc.h"
#include "alloc/internal.h"
#include "common/env.h"
#include "store/record_row.h"

namespace gp::alloc {

namespace {

struct PriorityClass {
  std::string_view name;
  int value;
};
constexpr std::array<PriorityClass, 4> kPriorities = {
    {{"low", 100}, {"normal", 500}, {"high", 900}, {"critical", 1000}}};

// The most units (GPUs, instances, shares or nodes) one request may name, alone or multiplied
// out by gang_members or gpus_per_node; far above any fleet, far below int overflow.
constexpr int64_t kMostPerRequest = 100'000;

// a x b as an int, refused when it passes kMostPerRequest. The product is formed in 64 bits
// before the check: the readers bound each factor, not the product, which overflows an int.
Result<int> allocation_bounded_product(std::string_view what, int64_t a, int64_t b) {
  const int64_t product = a * b;
  if (product > kMostPerRequest) {
    return fail(Error::invalid(fmt::format("{} = {} x {} = {} is absurd (at most {})", what, a, b,
                                           product, kMostPerRequest)));
  }
  return static_cast<int>(product);
}

}  // namespace

std::string_view state_name(State s) { return kAllocationStateNames[static_cast<size_t>(s)]; }

std::optional<State> parse_state(std::string_view s) {
  return parse_enum<State>(s, kAllocationStateNames);
}

namespace detail {

std::string ts(int64_t us) { return format_rfc3339(from_unix_micros(us)); }
std::optional<std::string> ts(const std::optional<int64_t>& us) {
  if (!us) return std::nullopt;
  return ts(*us);
}

std::vector<std::string> read_models(ObjectReader& r, std::string_view key) {
  auto models = r.optional_string_array(key, 8, 64).value_or(std::vector<std::string>{});
  for (const std::string& m : models) {
    if (m.empty()) r.reject(key, "holds an empty model name");
  }
  std::vector<std::string> sorted = models;
  std::ranges::sort(sorted);
  if (std::ranges::adjacent_find(sorted) != sorted.end()) r.reject(key, "names a model twice");
  return models;
}

std::optional<int> priority_of(std::string_view name) {
  for (const auto& p : kPriorities) {
    if (p.name == name) return p.value;
  }
  return std::nullopt;
}

std::string priority_class(int priority) {
  for (const auto& p : kPriorities) {
    if (p.value == priority) return std::string(p.name);
  }
  return std::to_string(priority);
}

Json request_json(const sched::Request& r) {
  Json j = {{"tier", sched::tier_name(r.tier)},
            {"isolation", sched::class_name(r.isolation)},
            {"models", r.models},
            {"count", r.count},
            {"same_node", r.same_node},
            {"same_nvlink_domain", r.same_nvlink_domain},
            {"priority", r.priority},
            {"preemptible", r.preemptible}};
  if (r.node_count) j["node_count"] = r.node_count;
  if (r.gpus_per_node) j["gpus_per_node"] = r.gpus_per_node;
  if (!r.pool.empty()) j["pool"] = r.pool;
  if (!r.mig_profile.empty()) j["mig_profile"] = r.mig_profile;
  if (r.milli) j["milli"] = r.milli;
  return j;
}

Json shape_json(const sched::Request& r) {
  Json shape = request_json(r);
  shape.erase("priority");
  shape.erase("preemptible");
  shape.erase("isolation");
  return shape;
}

Result<sched::Request> request_from(const Json& j) {
  sched::Request r;
  try {
    auto tier = sched::parse_tier(j.at("tier").get<std::string>());
    auto cls = sched::parse_class(j.at("isolation").get<std::string>());
    if (!tier || !cls) return fail(Error::internal("stored request with unknown tier or class"));
    r.tier = *tier;
    r.isolation = *cls;
    r.models = j.at("models").get<std::vector<std::string>>();
    r.count = j.at("count").get<int>();
    r.same_node = j.at("same_node").get<bool>();
    r.same_nvlink_domain = j.at("same_nvlink_domain").get<bool>();
    r.priority = j.at("priority").get<int>();
    r.preemptible = j.at("preemptible").get<bool>();
    r.node_count = j.value("node_count", 0);
    r.gpus_per_node = j.value("gpus_per_node", 0);
    r.pool = j.value("pool", "");
    r.mig_profile = j.value("mig_profile", "");
    r.milli = j.value("milli", 0);
  } catch (const Json::exception& e) {
    return fail(Error::internal(fmt::format("stored request unreadable: {}", e.what())));
  }
  return r;
}

namespace {

Json layout_json(const vocab::Layout& l) {
  Json a = Json::array();
  for (const auto& p : l) a.push_back({{"profile", p.profile}, {"start", p.start}});
  return a;
}

}  // namespace

Json placement_json(const sched::Placement& p, const sched::ClusterState& state) {
  Json gpus = Json::array();
  for (const sched::GpuGrant& g : p.gpus) {
    const auto& gpu = state.gpus()[g.gpu];
    Json e = {{"node", g.node_id},
              {"node_name", state.nodes()[size_t(gpu.node)].name},
              {"gpu", g.gpu_uuid},
              {"index", gpu.index}};
    if (g.mig_instance)
      e["mig"] = {{"profile", g.mig_instance->profile}, {"start", g.mig_instance->start}};
    if (g.milli) e["milli"] = g.milli;
    gpus.push_back(std::move(e));
  }
  Json mode_changes = Json::array();
  for (const auto& c : p.mode_changes)
    mode_changes.push_back({{"gpu", c.gpu_uuid},
                            {"from", sched::gpu_mode_name(c.from)},
                            {"to", sched::gpu_mode_name(c.to)}});
  Json mig_changes = Json::array();
  for (const auto& c : p.mig_changes)
    mig_changes.push_back(
        {{"gpu", c.gpu_uuid}, {"before", layout_json(c.before)}, {"after", layout_json(c.after)}});
  std::vector<std::string> nodes = p.nodes;
  if (nodes.empty()) {
    for (const auto& g : p.gpus) {
      if (std::ranges::find(nodes, g.node_id) == nodes.end()) nodes.push_back(g.node_id);
    }
  }
  // The same nodes by name, for people (ids stay what the placement is keyed by).
  Json node_names = Json::array();
  for (int32_t slot : p.node_slots) node_names.push_back(state.nodes()[size_t(slot)].name);
  if (p.node_slots.empty())
    for (const auto& g : p.gpus) {
      const std::string& name = state.nodes()[size_t(state.gpus()[size_t(g.gpu)].node)].name;
      if (std::ranges::find(node_names, Json(name)) == node_names.end()) node_names.push_back(name);
    }
  Json out = {{"model", p.model},
              {"tier", sched::tier_name(p.tier)},
              {"units", p.units},
              {"gpu_equivalents", vocab::format_units(p.units)},
              {"whole_nodes", !p.nodes.empty()},
              {"nodes", nodes},
              {"node_names", node_names},
              {"gpus", gpus},
              {"mode_changes", mode_changes},
              {"mig_changes", mig_changes}};
  if (!p.reservation.empty()) out["reservation"] = p.reservation;
  return out;
}

Index::Index(const sched::ClusterState& state) {
  for (int32_t i = 0; i < static_cast<int32_t>(state.gpus().size()); ++i)
    gpus.emplace(state.gpus()[i].uuid, i);
  for (int32_t i = 0; i < static_cast<int32_t>(state.nodes().size()); ++i)
    nodes.emplace(state.nodes()[i].id, i);
}

Result<sched::Placement> placement_from(const Json& j, const sched::Request& r,
                                        const sched::ClusterState& state, const Index& index) {
  sched::Placement p;
  try {
    p.tenant = r.tenant;
    p.project = r.project;
    p.tier = r.tier;
    p.model = j.at("model").get<std::string>();
    p.mig_profile = r.mig_profile;
    p.units = j.at("units").get<int64_t>();
    p.priority = r.priority;
    p.preemptible = r.preemptible;
    p.reservation = j.value("reservation", "");
    if (j.at("whole_nodes").get<bool>()) {
      for (const auto& n : j.at("nodes")) {
        auto it = index.nodes.find(n.get<std::string>());
        if (it == index.nodes.end())
          return fail(Error::not_found(fmt::format("node {} is gone", n.get<std::string>())));
        p.nodes.push_back(n.get<std::string>());
        p.node_slots.push_back(it->second);
      }
    }
    for (const auto& g : j.at("gpus")) {
      sched::GpuGrant grant;
      grant.gpu_uuid = g.at("gpu").get<std::string>();
      auto it = index.gpus.find(grant.gpu_uuid);
      if (it == index.gpus.end())
        return fail(Error::not_found(fmt::format("GPU {} is gone", grant.gpu_uuid)));
      grant.gpu = it->second;
      grant.node_id = state.nodes()[state.gpus()[it->second].node].id;
      if (g.contains("mig")) {
        grant.mig_instance = vocab::PlacedInstance{g["mig"].at("profile").get<std::string>(),
                                                   g["mig"].at("start").get<int>()};
      }
      grant.milli = g.value("milli", 0);
      p.gpus.push_back(std::move(grant));
    }
  } catch (const Json::exception& e) {
    return fail(Error::internal(fmt::format("stored placement unreadable: {}", e.what())));
  }
  return p;
}

std::string reason_code(const Error& e) {
  switch (e.code) {
    case ErrorCode::kQuotaExceeded:
      return "quota_exceeded";
    case ErrorCode::kConflict:
      return "insufficient_capacity";
    case ErrorCode::kInvalidArgument:
      return "invalid_request";
    default:
      return std::string(error_code_name(e.code));
  }
}

}  // namespace detail

Json Allocation::to_json() const { return json_of_fields(*this); }

Json Allocation::shape_json() const { return detail::shape_json(request); }

std::string Allocation::priority_class() const { return detail::priority_class(request.priority); }

std::optional<std::string> Allocation::borrowed_gpu_equivalents() const {
  if (borrowed_units == 0) return std::nullopt;
  return vocab::format_units(borrowed_units);
}

Json Event::to_json() const {
  return {{"seq", seq}, {"at", detail::ts(at)},       {"from", from},
          {"to", to},   {"reason_code", reason_code}, {"reason", reason}};
}

Result<NewAllocation> parse_allocation(store::Tx& tx, const Env& w, const Json& body,
                                       const tenancy::Tenant& tenant,
                                       const tenancy::Project& project) {
  ObjectReader r(body, "allocation");
  NewAllocation n;
  n.name = r.optional_string("name", 63).value_or("");
  auto offering_name = r.optional_string("offering", 64);
  auto count = r.optional_integer("count", 1, kMostPerRequest);
  const Json* shape = r.optional_object("shape");
  const Json* constraints = r.optional_object("constraints");
  auto priority = r.optional_string("priority_class", 32);
  auto preemptible = r.optional_bool("preemptible");
  auto end_time = r.optional_string("end_time", 64);
  auto duration = r.optional_integer("duration_seconds", 60, int64_t{366} * 86400);
  GP_TRY_VOID(r.finish());
  if (!n.name.empty()) GP_TRY_VOID(validate_dns_label("name", n.name));
  if (offering_name.has_value() == (shape != nullptr))
    return fail(Error::invalid("give either offering (with count) or shape"));
  if (shape && count) return fail(Error::invalid("count goes inside shape, not beside it"));
  if (end_time && duration)
    return fail(Error::invalid("give end_time or duration_seconds, not both"));

  sched::Request& q = n.request;
  q.tenant = tenant.id;
  q.project = project.id;
  q.isolation = tenant.isolation_class;
  if (offering_name) {
    auto o = GP_TRY(find_offering(tx, *offering_name));
    if (!o) return fail(Error::invalid(fmt::format("unknown offering \"{}\"", *offering_name)));
    n.offering_id = o->id;
    const int units = static_cast<int>(count.value_or(1));
    q.tier = o->tier;
    q.models = o->models;
    q.mig_profile = o->mig_profile;
    q.milli = o->milli;
    const bool node_tier = o->tier == Tier::kDedicatedNode || o->tier == Tier::kDedicatedPool;
    if (node_tier) {
      q.node_count = units;
      q.gpus_per_node = o->gpus;
    }
    q.count =
        node_tier || o->tier == Tier::kDedicatedGpu
            ? GP_TRY(allocation_bounded_product("count x the offering's gpus", units, o->gpus))
            : units;
  } else {
    ObjectReader s(*shape, "shape");
    std::string tier = s.string("tier", 32);
    q.models = detail::read_models(s, "models");
    q.count = static_cast<int>(s.optional_integer("count", 1, kMostPerRequest).value_or(1));
    q.node_count =
        static_cast<int>(s.optional_integer("node_count", 1, kMostPerRequest).value_or(0));
    q.gpus_per_node = static_cast<int>(s.optional_integer("gpus_per_node", 1, 64).value_or(0));
    q.pool = s.optional_string("pool", 64).value_or("");
    q.mig_profile = s.optional_string("mig_profile", 32).value_or("");
    q.milli = static_cast<int>(s.optional_integer("milli", 1, 1000).value_or(0));
    GP_TRY_VOID(s.finish());
    auto t = sched::parse_tier(tier);
    if (!t) return fail(Error::invalid(fmt::format("shape: unknown tier \"{}\"", tier)));
    q.tier = *t;
    if ((q.tier == Tier::kDedicatedNode || q.tier == Tier::kDedicatedPool) && q.count == 1)
      q.count = GP_TRY(allocation_bounded_product("shape: node_count x gpus_per_node", q.node_count,
                                                  q.gpus_per_node));
  }
  if (constraints) {
    ObjectReader c(*constraints, "constraints");
    q.same_node = c.optional_bool("same_node").value_or(false);
    q.same_nvlink_domain = c.optional_bool("same_nvlink_domain").value_or(false);
    auto models = detail::read_models(c, "models");
    auto members = c.optional_integer("gang_members", 1, 1024);
    GP_TRY_VOID(c.finish());
    if (!models.empty()) {
      if (q.models.empty()) {
        q.models = models;
      } else {
        std::vector<std::string> both;
        for (const std::string& m : q.models) {
          if (std::ranges::find(models, m) != models.end()) both.push_back(m);
        }
        if (both.empty())
          return fail(Error::invalid(
              "constraints.models and the offering's models have no GPU model in common"));
        q.models = both;
      }
    }
    if (members && *members > 1) {  // a gang: N members of the shape, all placed or none
      const int64_t m = *members;
      if (q.tier == Tier::kDedicatedNode || q.tier == Tier::kDedicatedPool) {
        q.node_count = GP_TRY(
            allocation_bounded_product("constraints.gang_members x node_count", m, q.node_count));
        q.count = GP_TRY(allocation_bounded_product("gang nodes x gpus_per_node", q.node_count,
                                                    q.gpus_per_node));
      } else {
        q.count =
            GP_TRY(allocation_bounded_product("constraints.gang_members x count", m, q.count));
      }
    }
  }
  if (q.same_node && (q.tier == Tier::kDedicatedNode || q.tier == Tier::kDedicatedPool) &&
      q.node_count > 1)
    return fail(Error::invalid(
        fmt::format("constraints.same_node contradicts {} whole nodes", q.node_count)));
  if (priority) {
    auto p = detail::priority_of(*priority);
    if (!p)
      return fail(Error::invalid(fmt::format(
          "unknown priority_class \"{}\"; one of low, normal, high, critical", *priority)));
    q.priority = *p;
  } else {
    q.priority = *detail::priority_of("normal");
  }
  q.preemptible = preemptible.value_or(false);
  if (end_time) {
    TimePoint t;
    if (!parse_rfc3339(*end_time, &t))
      return fail(Error::invalid("end_time must be an RFC 3339 time"));
    if (to_unix_micros(t) <= w.now()) return fail(Error::invalid("end_time is in the past"));
    n.end_at = to_unix_micros(t);
  } else if (duration) {
    n.end_at = w.now() + *duration * 1'000'000;
  }
  if (n.end_at) q.end = from_unix_micros(*n.end_at);
  return n;
}

namespace {

// The request, stored as its JSON, comes first; the table's columns follow.
const std::string kAllocationColumns = "request, " + store::columns_of<Allocation>();

}  // namespace

namespace detail {

std::string_view allocation_columns() { return kAllocationColumns; }

Result<Allocation> allocation_from(const store::Row& row) {
  Allocation a = GP_TRY(store::read_row<Allocation>(row, 1));
  const Json request = Json::parse(row.text(0), nullptr, false);
  if (request.is_discarded())
    return fail(Error::internal("column request holds text that is not JSON"));
  a.request = GP_TRY(request_from(request));
  a.request.tenant = a.tenant_id;
  a.request.project = a.project_id;
  if (a.end_at) a.request.end = from_unix_micros(*a.end_at);
  return a;
}

Result<void> insert_allocation(store::Tx& tx, const Allocation& a) {
  // The request's priority and preemption have columns of their own too (written, never read).
  static const std::string kInsert =
      fmt::format("INSERT INTO allocations ({}, request, priority, preemptible) VALUES ({},?,?,?)",
                  store::columns_of<Allocation>(), store::placeholders_of<Allocation>());
  store::Params params = store::params_of(a);
  params.insert(params.end(), {request_json(a.request).dump(), int64_t{a.request.priority},
                               int64_t{a.request.preemptible}});
  GP_TRY_VOID(tx.send(kInsert, params));
  return ok();
}

Result<void> insert_first_events(store::Tx& tx, const std::string& id,
                                 std::span<const Event> events) {
  std::string sql =
      "INSERT INTO allocation_events (allocation_id, seq, at, from_state, to_state, reason_code, "
      "reason) VALUES ";
  std::vector<store::Value> params;
  params.reserve(events.size() * 7);
  for (const Event& e : events) {
    sql += params.empty() ? "(?,?,?,?,?,?,?)" : ",(?,?,?,?,?,?,?)";
    params.insert(params.end(), {id, e.seq, e.at, e.from, e.to, e.reason_code, e.reason});
  }
  GP_TRY_VOID(tx.send(sql, params));
  return ok();
}

Result<std::optional<Allocation>> load(store::Tx& tx, const std::string& id) {
  auto row = GP_TRY(tx.query_one(
      fmt::format("SELECT {} FROM allocations WHERE id = ?", allocation_columns()), {id}));
  if (!row) return std::optional<Allocation>{};
  return std::optional<Allocation>(GP_TRY(allocation_from(*row)));
}

}  // namespace detail

Result<std::optional<Allocation>> find_allocation(store::Tx& tx, const tenancy::TenantScope& scope,
                                                  std::string_view id) {
  auto a = GP_TRY(detail::load(tx, std::string(id)));
  if (a && a->tenant_id != scope.tenant_id()) return std::optional<Allocation>{};
  return a;
}

Result<ProjectReferences> project_references(store::Tx& tx, const tenancy::TenantScope& scope,
                                             const std::string& project_id) {
  ProjectReferences refs;
  auto allocations = GP_TRY(tx.query_one(
      "SELECT COUNT(*), COALESCE(SUM(CASE WHEN state IN ('pending','placed','active') THEN 1 "
      "ELSE 0 END), 0) FROM allocations WHERE tenant_id = ? AND project_id = ?",
      {scope.tenant_id(), project_id}));
  refs.allocations = allocations->integer(0);
  refs.live_allocations = allocations->integer(1);
  auto reservations = GP_TRY(
      tx.query_one("SELECT COUNT(*) FROM reservations WHERE tenant_id = ? AND project_id = ?",
                   {scope.tenant_id(), project_id}));
  refs.reservations = reservations->integer(0);
  return refs;
}

Result<Page<Allocation>> list_allocations(store::Tx& tx, const tenancy::TenantScope& scope,
                                          const AllocationFilter& filter, const PageRequest& page) {
  AllocationFilter mine = filter;
  mine.tenant_id = scope.tenant_id();
  return list_all_allocations(tx, mine, page);
}

Result<Json> node_allocation_states(store::Tx& tx, const std::string& node_id) {
  Json out = Json::array();
  for (const auto& row :
       GP_TRY(tx.query("SELECT a.id, a.state FROM allocation_nodes an JOIN allocations a ON a.id = "
                       "an.allocation_id WHERE an.node_id = ? ORDER BY a.id",
                       {node_id})))
    out.push_back(Json::array({row.text(0), row.text(1)}));
  for (const Stop& s : GP_TRY(node_stops(tx, node_id)))
    out.push_back(Json::array({s.allocation_id, "stopping"}));
  return out;
}

Result<std::vector<LivePlacement>> live_placements(store::Tx& tx) {
  std::vector<LivePlacement> out;
  for (const auto& row :
       GP_TRY(tx.query("SELECT tenant_id, project_id, id, placement FROM allocations WHERE "
                       "placement IS NOT NULL AND state IN ('placed', 'active') ORDER BY id"))) {
    out.push_back({.tenant_id = row.text(0),
                   .project_id = row.text(1),
                   .allocation_id = row.text(2),
                   .placement = GP_TRY(parse_json(row.text(3)))});
  }
  return out;
}

Result<std::vector<LiveCount>> count_live_allocations(store::Tx& tx) {
  std::map<std::tuple<std::string, std::string, std::string>, LiveCount> groups;
  for (const auto& row : GP_TRY(
           tx.query("SELECT tenant_id, state, request, created_at FROM allocations WHERE state IN "
                    "('pending', 'placed', 'active')"))) {
    const std::string tier = GP_TRY(parse_json(row.text(2))).value("tier", "");
    LiveCount& c = groups[{row.text(0), row.text(1), tier}];
    if (c.count++ == 0) {
      c = {.tenant_id = row.text(0),
           .state = parse_state(row.text(1)).value_or(State::kPending),
           .tier = tier,
           .count = 1,
           .oldest_created_at = row.integer(3)};
    }
    c.oldest_created_at = std::min(c.oldest_created_at, row.integer(3));
  }
  std::vector<LiveCount> out;
  out.reserve(groups.size());
  for (auto& [key, c] : groups) out.push_back(std::move(c));
  return out;
}

Result<std::map<std::string, int64_t>> count_allocations_by_state(store::Tx& tx) {
  std::map<std::string, int64_t> out;
  for (const auto& row : GP_TRY(tx.query("SELECT state, COUNT(*) FROM allocations GROUP BY state")))
    out[row.text(0)] = row.integer(1);
  return out;
}

Result<Page<Allocation>> list_all_allocations(store::Tx& tx, const AllocationFilter& filter,
                                              const PageRequest& page) {
  std::string sql = fmt::format("SELECT {} FROM allocations WHERE id > ?", kAllocationColumns);
  store::Params params{page.after.value_or("")};
  if (filter.tenant_id) {
    sql += " AND tenant_id = ?";
    params.emplace_back(*filter.tenant_id);
  }
  if (filter.project_id) {
    sql += " AND project_id = ?";
    params.emplace_back(*filter.project_id);
  }
  if (filter.node_id) {
    sql +=
        " AND (id IN (SELECT allocation_id FROM allocation_nodes WHERE node_id = ?) OR id IN "
        "(SELECT allocation_id FROM allocation_stops WHERE node_id = ?))";
    params.emplace_back(*filter.node_id);
    params.emplace_back(*filter.node_id);
  }
  if (filter.state) {
    sql += " AND state = ?";
    params.emplace_back(std::string(state_name(*filter.state)));
  }
  sql += " ORDER BY id LIMIT ?";
  params.emplace_back(int64_t{page.limit} + 1);
  std::vector<Allocation> items;
  for (const auto& row : GP_TRY(tx.query(sql, params)))
    items.push_back(GP_TRY(detail::allocation_from(row)));
  return make_page(std::move(items), page);
}

Result<std::vector<std::string>> allocations_without_events(store::Tx& tx,
                                                            const std::string& tenant_id) {
  std::vector<std::string> out;
  for (const auto& row : GP_TRY(
           tx.query("SELECT a.id FROM allocations a WHERE a.tenant_id = ? AND NOT EXISTS (SELECT "
                    "1 FROM allocation_events e WHERE e.allocation_id = a.id) ORDER BY a.id",
                    {tenant_id})))
    out.push_back(row.text(0));
  return out;
}

Result<std::optional<sla::Failure>> find_failure(store::Tx& tx, const std::string& id) {
  auto row = GP_TRY(tx.query_one(
      "SELECT reason_code, end_at, ended_at FROM allocations WHERE id = ? AND state = 'failed' "
      "AND ended_at IS NOT NULL",
      {id}));
  if (!row) return std::optional<sla::Failure>();
  return std::optional<sla::Failure>(
      sla::Failure{row->text(0), row->opt_integer(1), row->integer(2)});
}

Result<std::vector<std::string>> allocation_node_ids(store::Tx& tx,
                                                     const std::string& allocation_id) {
  std::vector<std::string> out;
  for (const auto& row : GP_TRY(
           tx.query("SELECT node_id FROM allocation_nodes WHERE allocation_id = ? ORDER BY node_id",
                    {allocation_id})))
    out.push_back(row.text(0));
  return out;
}

Result<std::vector<NodeNeighbour>> node_neighbours(store::Tx& tx, const std::string& tenant_id) {
  constexpr std::string_view kLive = "('pending','placed','active')";
  std::vector<NodeNeighbour> out;
  for (const auto& row : GP_TRY(tx.query(
           fmt::format("SELECT n1.node_id, n1.allocation_id, a2.tenant_id FROM allocation_nodes n1 "
                       "JOIN allocations a1 ON a1.id = n1.allocation_id "
                       "JOIN allocation_nodes n2 ON n2.node_id = n1.node_id "
                       "JOIN allocations a2 ON a2.id = n2.allocation_id "
                       "WHERE a1.tenant_id = ? AND a1.state IN {0} AND a2.tenant_id <> ? "
                       "AND a2.state IN {0} ORDER BY n1.node_id, n1.allocation_id",
                       kLive),
           {tenant_id, tenant_id})))
    out.push_back({row.text(0), row.text(1), row.text(2)});
  return out;
}

Result<std::vector<Event>> list_events(store::Tx& tx, const std::string& allocation_id) {
  std::vector<Event> out;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT seq, at, from_state, to_state, reason_code, reason FROM allocation_events "
           "WHERE allocation_id = ? ORDER BY seq",
           {allocation_id})))
    out.push_back(
        {row.integer(0), row.integer(1), row.text(2), row.text(3), row.text(4), row.text(5)});
  return out;
}

}  // namespace gp::alloc
