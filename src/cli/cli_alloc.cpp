// Scheduling commands: offerings, quotas, allocations, `why` and the queue.
#include <fmt/format.h>

#include <iostream>

#include "cli/client.h"

namespace gp::cli {
namespace {

void add_offering(CLI::App& app, ClientConfig& c, int* rc) {
  auto* o = app.add_subcommand("offering", "The service catalog");
  o->require_subcommand(1);
  auto body = std::make_shared<Json>(Json::object());
  auto* create = o->add_subcommand("create", "Add an offering");
  field<std::string>(create, body, "name", "name", "Offering name, e.g. h200-1x", true);
  field<std::string>(create, body, "--tier", "tier",
                     "dedicated-pool | dedicated-node | dedicated-gpu | mig | shared", true);
  field<std::vector<std::string>>(create, body, "--model", "models", "Allowed GPU model(s)");
  field<int64_t>(create, body, "--gpus", "gpus", "GPUs per unit (per node for node tiers)");
  field<std::string>(create, body, "--mig-profile", "mig_profile", "MIG profile (tier mig)");
  field<int64_t>(create, body, "--milli", "milli", "Milli-GPU per share (tier shared)");
  field<std::string>(create, body, "--description", "description", "Description");
  field<std::string>(create, body, "--delivery", "delivery", "container (default) | vm");
  struct VmShape {
    int64_t vcpus = 0, memory_mib = 0;
  };
  auto vm = std::make_shared<VmShape>();
  create->add_option("--vm-vcpus", vm->vcpus, "vCPUs per unit (delivery vm)");
  create->add_option("--vm-memory-mib", vm->memory_mib, "Memory per unit in MiB (delivery vm)");
  struct ContainerShape {
    int64_t cpu_millis = 0, memory_mib = 0;
  };
  auto ct = std::make_shared<ContainerShape>();
  create->add_option("--cpu-millis", ct->cpu_millis,
                     "CPU per unit in millicores (delivery container; default: the node's share)");
  create->add_option("--memory-mib", ct->memory_mib,
                     "Memory per unit in MiB (delivery container; default: the node's share)");
  on_run(create, rc, [&c, body, vm, ct] {
    if (vm->vcpus != 0 || vm->memory_mib != 0)
      (*body)["vm"] = {{"vcpus", vm->vcpus}, {"memory_mib", vm->memory_mib}};
    if (ct->cpu_millis != 0 || ct->memory_mib != 0) {
      (*body)["container"] = Json::object();
      if (ct->cpu_millis != 0) (*body)["container"]["cpu_millis"] = ct->cpu_millis;
      if (ct->memory_mib != 0) (*body)["container"]["memory_mib"] = ct->memory_mib;
    }
    auto r = call(c, "POST", "/v1/offerings", *body);
    if (r) print(c, *r, {});
    return r.has_value();
  });
  auto tenant = std::make_shared<std::string>();
  auto* list = o->add_subcommand("list", "List offerings (as a tenant sees them with --tenant)");
  list->add_option("--tenant", *tenant, "Show which the tenant's class allows");
  on_run(list, rc, [&c, tenant] {
    auto r = call(
        c, "GET",
        tenant->empty() ? "/v1/offerings" : "/v1/tenants/" + url_encode(*tenant) + "/offerings");
    if (r)
      print(c, *r,
            tenant->empty() ? std::vector<std::string>{"name", "tier", "models", "gpus",
                                                       "mig_profile", "milli", "delivery"}
                            : std::vector<std::string>{"name", "tier", "models", "allowed",
                                                       "not_allowed_because"});
    return r.has_value();
  });
  auto id = std::make_shared<std::string>();
  auto* del = o->add_subcommand("delete", "Remove an offering");
  del->add_option("name", *id, "Offering id or name")->required();
  on_run(del, rc,
         [&c, id] { return call(c, "DELETE", "/v1/offerings/" + url_encode(*id)).has_value(); });
}

// A quota as `quota get` and `quota set` show it: one row per GPU model.
void print_quota(const ClientConfig& c, const Json& q) {
  if (c.output == "json") {
    print(c, q, {});
    return;
  }
  std::vector<Json> rows;
  for (const auto& [model, v] : q["models"].items()) {
    Json row = v;
    row["model"] = model;
    rows.push_back(row);
  }
  if (q.contains("cohort"))
    std::cout << fmt::format("cohort: {}  weight: {}\n", cell(q["cohort"]), cell(q["weight"]));
  print_table(rows, {"model", "nominal", "borrow_limit", "limit", "used", "borrowed"});
}

void add_quota(CLI::App& app, ClientConfig& c, int* rc) {
  auto* q = app.add_subcommand("quota", "Quota per GPU model: platform, tenant, project");
  q->require_subcommand(1);
  auto where = std::make_shared<Where>();
  auto* get = q->add_subcommand("get", "Show quota and use");
  where->add(get, false);
  on_run(get, rc, [&c, where] {
    auto r =
        call(c, "GET",
             (where->project.empty() ? where->tenant_path() : where->project_path()) + "/quota");
    if (r) print_quota(c, *r);
    return r.has_value();
  });
  struct SetArgs {
    Where where;
    std::string model, cohort;
    double nominal = 0;
    std::optional<double> borrow_limit, limit, weight;
  };
  auto a = std::make_shared<SetArgs>();
  auto* set = q->add_subcommand("set", "Set one model's quota (keeps the other models)");
  a->where.add(set, false);
  set->add_option("--model", a->model, "GPU model, e.g. H200")->required();
  set->add_option("--nominal", a->nominal, "Guaranteed GPU-equivalents")->required();
  set->add_option("--borrow-limit", a->borrow_limit, "GPU-equivalents it may borrow above nominal");
  set->add_option("--limit", a->limit, "Hard cap in GPU-equivalents");
  set->add_option("--cohort", a->cohort, "Cohort whose members lend idle quota (tenants)");
  set->add_option("--weight", a->weight, "Fair-share weight (tenants)");
  on_run(set, rc, [&c, a] {
    const std::string path =
        (a->where.project.empty() ? a->where.tenant_path() : a->where.project_path()) + "/quota";
    auto current = call(c, "GET", path);
    if (!current) return false;
    Json body = {{"models", Json::object()}};
    for (const auto& [model, v] : (*current)["models"].items())
      body["models"][model] = {
          {"nominal", v["nominal"]}, {"borrow_limit", v["borrow_limit"]}, {"limit", v["limit"]}};
    Json m = {{"nominal", a->nominal}};
    if (a->borrow_limit) m["borrow_limit"] = *a->borrow_limit;
    if (a->limit) m["limit"] = *a->limit;
    body["models"][a->model] = m;
    if (a->where.project.empty()) {
      if (!(*current)["cohort"].is_null()) body["cohort"] = (*current)["cohort"];
      body["weight"] = (*current)["weight"];
      if (!a->cohort.empty()) body["cohort"] = a->cohort;
      if (a->weight) body["weight"] = *a->weight;
      Json caps = Json::object();
      for (const auto& [model, profiles] : (*current)["profile_caps"].items())
        for (const auto& [profile, v] : profiles.items()) caps[model][profile] = v["max_instances"];
      body["profile_caps"] = caps;
    }
    auto r = call(c, "PUT", path, body);
    if (r) print_quota(c, *r);
    return r.has_value();
  });
}

// The one-line story of an allocation.
// A placement's nodes by name (ids for placements stored before names were kept).
std::string placement_nodes(const Json& placement) {
  return cell(placement.value("node_names", placement.value("nodes", Json::array())));
}

std::string summary_line(const Json& a) {
  std::string where;
  if (a["placement"].is_object()) {
    where =
        fmt::format(" on {} x {} ({})", a["placement"]["gpus"].size(),
                    a["placement"]["model"].get<std::string>(), placement_nodes(a["placement"]));
  }
  return fmt::format(
      "{} {}{}{}", a["id"].get<std::string>(), a["state"].get<std::string>(), where,
      a["reason"].get<std::string>().empty() ? "" : ": " + a["reason"].get<std::string>());
}

void add_allocation(CLI::App& app, ClientConfig& c, int* rc) {
  auto* al = app.add_subcommand("allocation", "Request, list and release GPU capacity");
  al->require_subcommand(1);
  struct CreateArgs {
    Where where;
    std::string offering, tier, mig_profile, priority, name, end_time;
    int64_t count = 0, node_count = 0, gpus_per_node = 0, milli = 0, duration = 0, gang = 0;
    std::vector<std::string> models;
    bool preemptible = false, same_node = false, same_nvlink = false, dry_run = false;
  };
  auto a = std::make_shared<CreateArgs>();
  auto* create = al->add_subcommand("create", "Request GPU capacity");
  a->where.add(create, true);
  create->add_option("--offering", a->offering, "Offering name");
  create->add_option("--count", a->count, "Units of the offering (or GPUs/instances/shares)");
  create->add_option("--tier", a->tier, "Explicit shape: tier instead of an offering");
  create->add_option("--node-count", a->node_count, "Explicit shape: whole nodes");
  create->add_option("--gpus-per-node", a->gpus_per_node, "Explicit shape: GPUs per node");
  create->add_option("--mig-profile", a->mig_profile, "Explicit shape: MIG profile");
  create->add_option("--milli", a->milli, "Explicit shape: milli-GPU per share");
  create->add_option("--model", a->models, "Allowed GPU model(s)");
  create->add_option("--priority", a->priority, "low | normal | high | critical");
  create->add_flag("--preemptible", a->preemptible, "May be preempted by higher priority");
  create->add_flag("--same-node", a->same_node, "All GPUs on one node");
  create->add_flag("--same-nvlink-domain", a->same_nvlink, "All GPUs in one NVLink domain");
  create->add_option("--gang", a->gang, "Members of a gang placed all or nothing");
  create->add_option("--duration", a->duration, "Seconds until it expires");
  create->add_option("--end-time", a->end_time, "RFC 3339 time it expires");
  create->add_option("--name", a->name, "A name for it");
  create->add_flag("--dry-run", a->dry_run, "Only say whether and where it would be placed");
  on_run(create, rc, [&c, a] {
    Json body = Json::object();
    if (!a->offering.empty()) {
      body["offering"] = a->offering;
      if (a->count) body["count"] = a->count;
    } else {
      Json shape = {{"tier", a->tier}};
      if (a->count) shape["count"] = a->count;
      if (a->node_count) shape["node_count"] = a->node_count;
      if (a->gpus_per_node) shape["gpus_per_node"] = a->gpus_per_node;
      if (!a->mig_profile.empty()) shape["mig_profile"] = a->mig_profile;
      if (a->milli) shape["milli"] = a->milli;
      if (!a->models.empty()) shape["models"] = a->models;
      body["shape"] = shape;
    }
    Json constraints = Json::object();
    if (a->same_node) constraints["same_node"] = true;
    if (a->same_nvlink) constraints["same_nvlink_domain"] = true;
    if (a->gang) constraints["gang_members"] = a->gang;
    if (!a->offering.empty() && !a->models.empty()) constraints["models"] = a->models;
    if (!constraints.empty()) body["constraints"] = constraints;
    if (!a->priority.empty()) body["priority_class"] = a->priority;
    if (a->preemptible) body["preemptible"] = true;
    if (a->duration) body["duration_seconds"] = a->duration;
    if (!a->end_time.empty()) body["end_time"] = a->end_time;
    if (!a->name.empty()) body["name"] = a->name;
    auto r =
        call(c, "POST",
             a->where.project_path() + "/allocations" + (a->dry_run ? "?dry_run=true" : ""), body);
    if (!r) return false;
    if (c.output == "json") {
      print(c, *r, {});
    } else if (a->dry_run) {
      std::cout << ((*r)["would_place"].get<bool>()
                        ? fmt::format("would be placed on {} x {} ({})\n",
                                      (*r)["placement"]["gpus"].size(),
                                      (*r)["placement"]["model"].get<std::string>(),
                                      placement_nodes((*r)["placement"]))
                        : fmt::format("would wait: {} ({})\n", (*r)["reason"].get<std::string>(),
                                      (*r)["reason_code"].get<std::string>()));
    } else {
      std::cout << summary_line(*r) << "\n";
    }
    return true;
  });
  auto lw = std::make_shared<Where>();
  auto state = std::make_shared<std::string>();
  auto* list = al->add_subcommand("list", "List allocations of a tenant or project");
  lw->add(list, false);
  list->add_option("--state", *state, "Only this state");
  on_run(list, rc, [&c, lw, state] {
    std::string target =
        (lw->project.empty() ? lw->tenant_path() : lw->project_path()) + "/allocations?limit=1000";
    if (!state->empty()) target += "&state=" + url_encode(*state);
    auto r = call(c, "GET", target);
    if (r)
      print(c, *r,
            {"id", "name", "project_id", "state", "priority_class", "shape", "reason_code",
             "created_at"});
    return r.has_value();
  });
  auto one = std::make_shared<Where>();
  auto id = std::make_shared<std::string>();
  auto reason = std::make_shared<std::string>();
  auto* get = al->add_subcommand("get", "One allocation with its history");
  one->add(get, true);
  get->add_option("id", *id, "Allocation id")->required();
  on_run(get, rc, [&c, one, id] {
    auto r = call(c, "GET", one->project_path() + "/allocations/" + url_encode(*id));
    if (!r) return false;
    if (c.output == "json") {
      print(c, *r, {});
      return true;
    }
    std::cout << summary_line(*r) << "\n\n";
    print_table(std::vector<Json>((*r)["events"].begin(), (*r)["events"].end()),
                {"at", "from", "to", "reason_code", "reason"});
    return true;
  });
  auto* rel = al->add_subcommand("release", "Release (or withdraw) an allocation");
  one->add(rel, true);
  rel->add_option("id", *id, "Allocation id")->required();
  rel->add_option("--reason", *reason, "Why");
  on_run(rel, rc, [&c, one, id, reason] {
    Json body = Json::object();
    if (!reason->empty()) body["reason"] = *reason;
    auto r =
        call(c, "POST", one->project_path() + "/allocations/" + url_encode(*id) + "/release", body);
    if (r) std::cout << summary_line(*r) << "\n";
    return r.has_value();
  });
}

void add_why(CLI::App& app, ClientConfig& c, int* rc) {
  auto where = std::make_shared<Where>();
  auto id = std::make_shared<std::string>();
  auto* why = app.add_subcommand("why", "Why an allocation waits (or is where it is)");
  where->add(why, true);
  why->add_option("allocation", *id, "Allocation id")->required();
  on_run(why, rc, [&c, where, id] {
    auto r = call(c, "GET", where->project_path() + "/allocations/" + url_encode(*id) + "/why");
    if (!r) return false;
    if (c.output == "json") {
      print(c, *r, {});
      return true;
    }
    const Json& w = *r;
    std::cout << fmt::format("{} is {}", w["id"].get<std::string>(), w["state"].get<std::string>());
    if (!w["reason"].get<std::string>().empty())
      std::cout << fmt::format(" ({}): {}", w["reason_code"].get<std::string>(),
                               w["reason"].get<std::string>());
    std::cout << "\n";
    if (w.contains("queue"))
      std::cout << fmt::format("queue: position {} of {} {} ({} of its own tenant ahead)\n",
                               cell(w["queue"]["position"]), cell(w["queue"]["length"]),
                               w["queue"].value("counts", "waiting allocations"),
                               cell(w["queue"]["ahead_of_same_tenant"]));
    if (w.contains("capacity"))
      std::cout << "capacity: "
                << (w["capacity"]["fits_now"].get<bool>()
                        ? w["capacity"]["note"].get<std::string>()
                        : "no room now: " + w["capacity"]["reason"].get<std::string>())
                << "\n";
    if (w.contains("quota")) {
      std::vector<Json> rows;
      for (const auto& q : w["quota"]) {
        auto level = [&](const char* name) {
          const Json& l = q[name];
          if (l.is_null()) return std::string("-");
          return fmt::format("{} used of {} nominal{}", cell(l["used"]), cell(l["nominal"]),
                             l["limit"].is_null() ? "" : ", limit " + cell(l["limit"]));
        };
        rows.push_back(
            {{"model", q["model"]},
             {"needs", q["needs_gpu_equivalents"]},
             {"project", level("project")},
             {"tenant", level("tenant")},
             // "used" is the operators' only: it counts every tenant's use.
             {"platform", q["platform"].contains("used")
                              ? fmt::format("{} used, limit {}", cell(q["platform"]["used"]),
                                            cell(q["platform"]["limit"]))
                              : fmt::format("limit {}", cell(q["platform"]["limit"]))}});
      }
      std::cout << "\n";
      print_table(rows, {"model", "needs", "project", "tenant", "platform"});
    }
    return true;
  });
}

void add_reservation(CLI::App& app, ClientConfig& c, int* rc) {
  auto* rs = app.add_subcommand("reservation", "Hold capacity for a tenant during a window");
  rs->require_subcommand(1);
  struct Args {
    std::string tenant, project, offering, start, end;
    int64_t count = 0, duration = 0;
  };
  auto a = std::make_shared<Args>();
  auto* create = rs->add_subcommand("create", "Reserve units of an offering");
  create->add_option("--tenant", a->tenant, "Tenant")->envname("GPUPLANE_TENANT")->required();
  create->add_option("--project", a->project, "Project charged")
      ->envname("GPUPLANE_PROJECT")
      ->required();
  create->add_option("--offering", a->offering, "Offering")->required();
  create->add_option("--count", a->count, "Units");
  create->add_option("--start", a->start, "RFC 3339 start (default now)");
  create->add_option("--end", a->end, "RFC 3339 end");
  create->add_option("--duration", a->duration, "Seconds from the start");
  on_run(create, rc, [&c, a] {
    Json body = {{"project", a->project}, {"offering", a->offering}};
    if (a->count) body["count"] = a->count;
    if (!a->start.empty()) body["start_time"] = a->start;
    if (!a->end.empty()) body["end_time"] = a->end;
    if (a->duration) body["duration_seconds"] = a->duration;
    auto r = call(c, "POST", "/v1/tenants/" + url_encode(a->tenant) + "/reservations", body);
    if (r) print(c, *r, {});
    return r.has_value();
  });
  auto tenant = std::make_shared<std::string>();
  auto* list = rs->add_subcommand("list", "A tenant's reservations");
  list->add_option("--tenant", *tenant, "Tenant")->envname("GPUPLANE_TENANT")->required();
  on_run(list, rc, [&c, tenant] {
    auto r = call(c, "GET", "/v1/tenants/" + url_encode(*tenant) + "/reservations");
    if (r) print(c, *r, {"id", "state", "shape", "start_time", "end_time", "reason"});
    return r.has_value();
  });
  auto id = std::make_shared<std::string>();
  auto* cancel = rs->add_subcommand("cancel", "Cancel a reservation");
  cancel->add_option("--tenant", *tenant, "Tenant")->envname("GPUPLANE_TENANT")->required();
  cancel->add_option("id", *id, "Reservation id")->required();
  on_run(cancel, rc, [&c, tenant, id] {
    auto r =
        call(c, "POST",
             "/v1/tenants/" + url_encode(*tenant) + "/reservations/" + url_encode(*id) + "/cancel");
    if (r) print(c, *r, {});
    return r.has_value();
  });
}

void add_queue(CLI::App& app, ClientConfig& c, int* rc) {
  auto tenant = std::make_shared<std::string>();
  auto* q = app.add_subcommand("queue", "Waiting allocations in queue order");
  q->add_option("--tenant", *tenant, "Only this tenant's (else the whole queue: operators)");
  on_run(q, rc, [&c, tenant] {
    auto r = call(c, "GET",
                  tenant->empty() ? "/v1/queue" : "/v1/tenants/" + url_encode(*tenant) + "/queue");
    if (r)
      print(c, *r,
            {"position", "id", "tenant_id", "project_id", "priority_class", "shape", "reason_code",
             "submitted_at"});
    return r.has_value();
  });
}

}  // namespace

void add_alloc_commands(CLI::App& app, ClientConfig& c, int* rc) {
  add_offering(app, c, rc);
  add_quota(app, c, rc);
  add_allocation(app, c, rc);
  add_why(app, c, rc);
  add_reservation(app, c, rc);
  add_queue(app, c, rc);
}

}  // namespace gp::cli
