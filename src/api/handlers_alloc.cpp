// Scheduling: offerings, quotas, allocations, queues and the explanations of why something waits.
#include <fmt/format.h>

#include "api/router.h"
#include "fleet/fleet.h"

namespace gp::api {
namespace {

using iam::Permission;

Json offering_for(const alloc::Offering& o, const tenancy::Tenant& t) {
  Json j = o.to_json();
  j["allowed"] = vocab::class_allows(t.isolation_class, o.tier);
  if (!j["allowed"].get<bool>())
    j["not_allowed_because"] =
        fmt::format("class {} may receive tiers down to {}", vocab::class_name(t.isolation_class),
                    vocab::tier_name(vocab::weakest_tier(t.isolation_class)));
  return j;
}

Result<Mutation> create_offering(Api& api, Call& call, store::Tx& tx) {
  auto o = GP_TRY(alloc::parse_offering(*call.body));
  o = GP_TRY(alloc::create_offering(tx, api.env(), std::move(o)));
  Mutation m;
  m.reply = json_reply(201, o.to_json(), o.version);
  m.resource = "/v1/offerings/" + o.id;
  m.detail = {{"name", o.name}, {"tier", vocab::tier_name(o.tier)}};
  return m;
}

alloc::Service::Audience view_for(const Call& call) {
  return sees_every_tenant(call) ? alloc::Service::Audience::kOperator
                                 : alloc::Service::Audience::kTenant;
}

// The allocation named in the path, in the path's project; 404 otherwise.
Result<alloc::Allocation> path_allocation(Call& call, store::Tx& tx) {
  auto a = GP_TRY(found(alloc::find_allocation(tx, call.tenant_scope(), call.param("allocation")),
                        "allocation"));
  if (a.project_id != call.project->id) return fail(Error::not_found("allocation not found"));
  return a;
}

Result<Mutation> create_allocation(Api& api, Call& call, store::Tx& tx) {
  const bool dry_run = [&] {
    auto q = call.req.query.find("dry_run");
    return q != call.req.query.end() && (q->second == "true" || q->second == "1");
  }();
  if (auto q = call.req.query.find("dry_run"); q != call.req.query.end() && q->second != "true" &&
                                               q->second != "1" && q->second != "false" &&
                                               q->second != "0")
    return fail(Error::invalid("dry_run must be true or false"));
  auto w = api.env();
  auto n = GP_TRY(alloc::parse_allocation(tx, w, *call.body, *call.tenant, *call.project));
  Mutation m;
  // A dry run says what the create would: a spent hard-stop budget refuses both.
  auto gate = GP_TRY(budget_precheck(api, tx, call.tenant->id, call.project->id));
  if (dry_run) {
    m.reply = json_reply(200, GP_TRY(api.allocs().dry_run(tx, n)));
    m.audited = false;  // nothing changed
    return m;
  }
  auto a = GP_TRY(api.allocs().create(tx, w, n, call.who.id));
  if (gate) GP_TRY_VOID(budget_admit(api, tx, *gate, a));
  m.reply = json_reply(201, nullptr, a.version);
  m.resource = call.req.path + "/" + a.id;
  m.detail = {
      {"state", alloc::state_name(a.state)}, {"shape", a.shape_json()}, {"reason", a.reason}};
  if (!a.placement.is_null()) {
    Json gpus = Json::array();
    for (const auto& g : a.placement["gpus"]) gpus.push_back(g["gpu"]);
    m.detail["gpus"] = gpus;
  }
  m.render_body = [a = std::move(a)] { return json_text_of_fields(a); };
  return m;
}

Result<alloc::AllocationFilter> state_filter(const Call& call) {
  alloc::AllocationFilter filter;
  if (auto s = call.req.query.find("state"); s != call.req.query.end()) {
    filter.state = alloc::parse_state(s->second);
    if (!filter.state)
      return fail(Error::invalid(
          "state must be one of pending, placed, active, released, preempted, failed, expired"));
  }
  return filter;
}

Result<Reply> list_allocations(Api& api, Call& call, store::Tx& tx) {
  auto page = GP_TRY(page_request(api, call));
  auto filter = GP_TRY(state_filter(call));
  if (call.project) filter.project_id = call.project->id;
  auto p = GP_TRY(alloc::list_allocations(tx, call.tenant_scope(), filter, page));
  return json_reply(200, page_json(p, [](const auto& a) { return a.to_json(); }));
}

// GET /v1/allocations: every tenant's, for operators (a node's page, "who holds what").
Result<Reply> list_all_allocations(Api& api, Call& call, store::Tx& tx) {
  auto page = GP_TRY(page_request(api, call));
  auto filter = GP_TRY(state_filter(call));
  if (auto t = call.req.query.find("tenant"); t != call.req.query.end())
    filter.tenant_id = GP_TRY(found(tenancy::find_tenant(tx, t->second), "tenant")).id;
  if (auto n = call.req.query.find("node"); n != call.req.query.end())
    filter.node_id = GP_TRY(found(fleet::find_node(tx, n->second), "node")).id;
  auto p = GP_TRY(alloc::list_all_allocations(tx, filter, page));
  return json_reply(200, page_json(p, [](const auto& a) { return a.to_json(); }));
}

Result<Reply> get_allocation(Api&, Call& call, store::Tx& tx) {
  auto a = GP_TRY(path_allocation(call, tx));
  Json j = a.to_json();
  Json events = Json::array();
  for (const auto& e : GP_TRY(alloc::list_events(tx, a.id))) events.push_back(e.to_json());
  j["events"] = events;
  // Where its work is still being stopped (its GPUs pass on once it is gone).
  Json stops = Json::array();
  for (const auto& st : GP_TRY(alloc::allocation_stops(tx, a.id))) stops.push_back(st.to_json());
  j["stopping"] = stops;
  // What it waits for before it starts: its GPUs' planned mode and MIG layout (alloc.h).
  j["configuring"] = GP_TRY(alloc::allocation_configuring(tx, a));
  return json_reply(200, j, a.version);
}

Result<Mutation> release_allocation(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "release");
  std::string reason = r.optional_string("reason", 500).value_or("");
  GP_TRY_VOID(r.finish());
  GP_TRY(path_allocation(call, tx));
  if (reason.empty()) {
    reason = fmt::format("released by {}{}", call.who.name,
                         sees_every_tenant(call) ? " (operator)" : "");
  }
  auto a = GP_TRY(
      api.allocs().release(tx, api.env(), call.tenant_scope(), call.param("allocation"), reason));
  Mutation m;
  m.reply = json_reply(200, a.to_json(), a.version);
  m.detail = {{"reason", a.reason}};
  return m;
}

Result<Mutation> put_tenant_quota(Api& api, Call& call, store::Tx& tx) {
  // Tenants' quotas are the operator's to set; a tenant admin divides them among projects.
  GP_TRY_VOID(require(call, Permission::kQuotaWrite, iam::Scope::platform()));
  auto q = GP_TRY(alloc::parse_tenant_quota(*call.body));
  GP_TRY_VOID(api.allocs().set_tenant_quota(tx, call.tenant->id, q));
  Mutation m;
  m.reply = json_reply(200, GP_TRY(api.allocs().tenant_quota(tx, call.tenant->id)));
  m.detail = *call.body;
  return m;
}

Result<Mutation> put_project_quota(Api& api, Call& call, store::Tx& tx) {
  auto q = GP_TRY(alloc::parse_project_quota(*call.body));
  GP_TRY_VOID(api.allocs().set_project_quota(tx, call.tenant->id, call.project->id, q));
  Mutation m;
  m.reply =
      json_reply(200, GP_TRY(api.allocs().project_quota(tx, call.tenant->id, call.project->id)));
  m.detail = *call.body;
  return m;
}

Result<Mutation> put_platform_quota(Api& api, Call& call, store::Tx& tx) {
  auto limits = GP_TRY(alloc::parse_platform_quota(*call.body));
  GP_TRY_VOID(api.allocs().set_platform_quota(tx, limits));
  Mutation m;
  m.reply = json_reply(200, GP_TRY(api.allocs().platform_quota(tx)));
  m.detail = *call.body;
  return m;
}

Result<Mutation> create_reservation(Api& api, Call& call, store::Tx& tx) {
  auto w = api.env();
  auto n = GP_TRY(alloc::parse_reservation(tx, w, *call.body, *call.tenant, call.tenant_scope()));
  auto r = GP_TRY(api.allocs().reserve(tx, w, n, call.who.id));
  Mutation m;
  m.reply = json_reply(201, r.to_json(), r.version);
  m.resource = call.req.path + "/" + r.id;
  m.detail = {{"state", alloc::reservation_state_name(r.state)},
              {"shape", r.to_json()["shape"]},
              {"start_time", r.to_json()["start_time"]},
              {"end_time", r.to_json()["end_time"]}};
  return m;
}

}  // namespace

bool sees_every_tenant(const Call& call) {
  return iam::authorize(call.who, Permission::kFleetRead, iam::Scope::platform()) ==
         iam::Decision::kAllow;
}

std::vector<Route> alloc_routes() {
  const std::string project = "/v1/tenants/{tenant}/projects/{project}";
  std::vector<Route> r;
  r.push_back({.method = "POST",
               .pattern = "/v1/offerings",
               .action = "offering.create",
               .permission = Permission::kFleetWrite,
               .mutation = true,
               .handler = write_tx(create_offering),
               .summary = "Add an offering to the service catalog: a tier and a shape per unit.",
               .request_schema = "OfferingCreate",
               .response_schema = "Offering",
               .success_status = 201});
  r.push_back({.method = "GET",
               .pattern = "/v1/offerings",
               .action = "offering.list",
               .access = Access::kAuthenticated,
               .handler = read_tx([](Api&, Call&, store::Tx& tx) -> Result<Reply> {
                 Json items = Json::array();
                 for (const auto& o : GP_TRY(alloc::list_offerings(tx)))
                   items.push_back(o.to_json());
                 return json_reply(200, {{"items", items}, {"next", nullptr}});
               }),
               .summary = "The service catalog.",
               .response_schema = "Offering[]"});
  r.push_back({.method = "GET",
               .pattern = "/v1/offerings/{offering}",
               .action = "offering.get",
               .access = Access::kAuthenticated,
               .handler = read_tx([](Api&, Call& call, store::Tx& tx) -> Result<Reply> {
                 auto o =
                     GP_TRY(found(alloc::find_offering(tx, call.param("offering")), "offering"));
                 return json_reply(200, o.to_json(), o.version);
               }),
               .summary = "One offering.",
               .response_schema = "Offering"});
  r.push_back({.method = "DELETE",
               .pattern = "/v1/offerings/{offering}",
               .action = "offering.delete",
               .permission = Permission::kFleetWrite,
               .mutation = true,
               .handler = write_tx([](Api&, Call& call, store::Tx& tx) -> Result<Mutation> {
                 auto o =
                     GP_TRY(found(alloc::find_offering(tx, call.param("offering")), "offering"));
                 GP_TRY_VOID(alloc::delete_offering(tx, o.id));
                 Mutation m;
                 m.reply.status = 204;
                 m.detail = {{"name", o.name}};
                 return m;
               }),
               .summary = "Remove an offering no live allocation uses.",
               .success_status = 204});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/offerings",
               .action = "tenant.offerings",
               .permission = Permission::kTenantRead,
               .handler = read_tx([](Api&, Call& call, store::Tx& tx) -> Result<Reply> {
                 Json items = Json::array();
                 for (const auto& o : GP_TRY(alloc::list_offerings(tx)))
                   items.push_back(offering_for(o, *call.tenant));
                 return json_reply(200, {{"items", items}, {"next", nullptr}});
               }),
               .summary = "The catalog as this tenant sees it: which offerings its class allows.",
               .response_schema = "Offering[]"});
  r.push_back({.method = "GET",
               .pattern = "/v1/quota",
               .action = "quota.platform.get",
               .permission = Permission::kFleetRead,
               .handler = serialized_tx([](Api& api, Call&, store::Tx& tx) -> Result<Reply> {
                 return json_reply(200, GP_TRY(api.allocs().platform_quota(tx)));
               }),
               .summary = "Platform GPU limits per model, with use.",
               .response_schema = "PlatformQuota"});
  r.push_back({.method = "PUT",
               .pattern = "/v1/quota",
               .action = "quota.platform.set",
               .permission = Permission::kQuotaWrite,
               .mutation = true,
               .handler = write_tx(put_platform_quota),
               .summary = "Set platform GPU limits per model (replaces them).",
               .request_schema = "PlatformQuotaSet",
               .response_schema = "PlatformQuota"});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/quota",
               .action = "quota.tenant.get",
               .permission = Permission::kTenantRead,
               .handler = serialized_tx([](Api& api, Call& call, store::Tx& tx) -> Result<Reply> {
                 return json_reply(200, GP_TRY(api.allocs().tenant_quota(tx, call.tenant->id)));
               }),
               .summary = "The tenant's quota per GPU model, cohort and weight, with use.",
               .response_schema = "TenantQuota"});
  r.push_back({.method = "PUT",
               .pattern = "/v1/tenants/{tenant}/quota",
               .action = "quota.tenant.set",
               .permission = Permission::kQuotaWrite,
               .mutation = true,
               .handler = write_tx(put_tenant_quota),
               .summary = "Set the tenant's quota (operators only; replaces it).",
               .request_schema = "TenantQuotaSet",
               .response_schema = "TenantQuota"});
  r.push_back({.method = "GET",
               .pattern = project + "/quota",
               .action = "quota.project.get",
               .permission = Permission::kProjectRead,
               .handler = serialized_tx([](Api& api, Call& call, store::Tx& tx) -> Result<Reply> {
                 return json_reply(200, GP_TRY(api.allocs().project_quota(tx, call.tenant->id,
                                                                          call.project->id)));
               }),
               .summary = "The project's quota per GPU model, with use.",
               .response_schema = "ProjectQuota"});
  r.push_back({.method = "PUT",
               .pattern = project + "/quota",
               .action = "quota.project.set",
               .permission = Permission::kQuotaWrite,
               .mutation = true,
               .handler = write_tx(put_project_quota),
               .summary = "Set the project's share of its tenant's quota (replaces it).",
               .request_schema = "ProjectQuotaSet",
               .response_schema = "ProjectQuota"});
  r.push_back({.method = "POST",
               .pattern = project + "/allocations",
               .action = "allocation.create",
               .permission = Permission::kAllocationWrite,
               .mutation = true,
               .handler = write_tx(create_allocation),
               .query_params = {"dry_run"},
               .summary = "Request GPU capacity: placed now, or pending with the reason. "
                          "`?dry_run=true` answers whether and where, changing nothing.",
               .request_schema = "AllocationCreate",
               .response_schema = "Allocation",
               .success_status = 201,
               .other_success_status = 200,  // the dry run
               .other_response_schema = "AllocationDryRun"});
  r.push_back({.method = "GET",
               .pattern = project + "/allocations",
               .action = "allocation.list",
               .permission = Permission::kAllocationRead,
               .handler = read_tx(list_allocations),
               .query_params = {"limit", "after", "state"},
               .summary = "The project's allocations.",
               .response_schema = "Allocation[]"});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/allocations",
               .action = "allocation.list_tenant",
               .permission = Permission::kAllocationRead,
               .handler = read_tx(list_allocations),
               .query_params = {"limit", "after", "state"},
               .summary = "The tenant's allocations in every project.",
               .response_schema = "Allocation[]"});
  r.push_back({.method = "GET",
               .pattern = project + "/allocations/{allocation}",
               .action = "allocation.get",
               .permission = Permission::kAllocationRead,
               .handler = read_tx(get_allocation),
               .summary = "One allocation with its placement and every transition.",
               .response_schema = "Allocation"});
  r.push_back({.method = "POST",
               .pattern = project + "/allocations/{allocation}/release",
               .action = "allocation.release",
               .permission = Permission::kAllocationWrite,
               .mutation = true,
               .handler = write_tx(release_allocation),
               .summary = "Release a placed allocation or withdraw a pending one.",
               .request_schema = "AllocationRelease",
               .response_schema = "Allocation"});
  r.push_back({.method = "GET",
               .pattern = project + "/allocations/{allocation}/why",
               .action = "allocation.why",
               .permission = Permission::kAllocationRead,
               .handler = serialized_tx([](Api& api, Call& call, store::Tx& tx) -> Result<Reply> {
                 auto a = GP_TRY(path_allocation(call, tx));
                 return json_reply(200, GP_TRY(api.allocs().why(tx, api.env(), a, view_for(call))));
               }),
               .summary = "Why an allocation is where it is: queue position, quota at each "
                          "level, whether the fleet has room, and its history. Tenants' "
                          "principals see the position among the tenant's own waiting "
                          "allocations and no platform use; operators the whole queue's.",
               .response_schema = "AllocationWhy"});
  r.push_back({.method = "POST",
               .pattern = "/v1/tenants/{tenant}/reservations",
               .action = "reservation.create",
               .permission = Permission::kAllocationWrite,
               .mutation = true,
               .handler = write_tx(create_reservation),
               .summary = "Hold capacity of a shape for the tenant during a time window.",
               .request_schema = "ReservationCreate",
               .response_schema = "Reservation",
               .success_status = 201});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/reservations",
               .action = "reservation.list",
               .permission = Permission::kAllocationRead,
               .handler = read_tx([](Api& api, Call& call, store::Tx& tx) -> Result<Reply> {
                 auto page = GP_TRY(page_request(api, call));
                 auto p = GP_TRY(alloc::list_reservations(tx, call.tenant_scope(), page));
                 return json_reply(200, page_json(p, [](const auto& x) { return x.to_json(); }));
               }),
               .query_params = {"limit", "after"},
               .summary = "The tenant's reservations.",
               .response_schema = "Reservation[]"});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/reservations/{reservation}",
               .action = "reservation.get",
               .permission = Permission::kAllocationRead,
               .handler = read_tx([](Api&, Call& call, store::Tx& tx) -> Result<Reply> {
                 auto x = GP_TRY(found(
                     alloc::find_reservation(tx, call.tenant_scope(), call.param("reservation")),
                     "reservation"));
                 return json_reply(200, x.to_json(), x.version);
               }),
               .summary = "One reservation.",
               .response_schema = "Reservation"});
  r.push_back({.method = "POST",
               .pattern = "/v1/tenants/{tenant}/reservations/{reservation}/cancel",
               .action = "reservation.cancel",
               .permission = Permission::kAllocationWrite,
               .mutation = true,
               .handler = write_tx([](Api& api, Call& call, store::Tx& tx) -> Result<Mutation> {
                 auto x = GP_TRY(api.allocs().cancel_reservation(tx, api.env(), call.tenant_scope(),
                                                                 call.param("reservation")));
                 Mutation m;
                 m.reply = json_reply(200, x.to_json(), x.version);
                 return m;
               }),
               .summary = "Cancel a reservation; its held capacity goes back.",
               .response_schema = "Reservation"});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/vms",
               .action = "vm.list",
               .permission = Permission::kAllocationRead,
               .handler = read_tx([](Api& api, Call& call, store::Tx& tx) -> Result<Reply> {
                 auto page = GP_TRY(page_request(api, call));
                 auto p = GP_TRY(alloc::list_vms(tx, call.tenant_scope(), page));
                 return json_reply(200, page_json(p, [](const auto& v) { return v.to_json(); }));
               }),
               .query_params = {"limit", "after"},
               .summary = "The tenant's VMs (allocations of vm offerings, one VM per node): "
                          "desired and reported state, addresses.",
               .response_schema = "Vm[]"});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/vms/{vm}",
               .action = "vm.get",
               .permission = Permission::kAllocationRead,
               .handler = read_tx([](Api&, Call& call, store::Tx& tx) -> Result<Reply> {
                 auto v =
                     GP_TRY(found(alloc::find_vm(tx, call.tenant_scope(), call.param("vm")), "VM"));
                 return json_reply(200, v.to_json(), v.version);
               }),
               .summary = "One VM, by id or domain name.",
               .response_schema = "Vm"});
  r.push_back({.method = "POST",
               .pattern = "/v1/tenants/{tenant}/vms/{vm}/actions",
               .action = "vm.action",
               .permission = Permission::kAllocationWrite,
               .mutation = true,
               .handler = write_tx([](Api& api, Call& call, store::Tx& tx) -> Result<Mutation> {
                 auto r = body_reader(call, "VM action");
                 std::string action = r.string("action", 16);
                 GP_TRY_VOID(r.finish());
                 auto v = GP_TRY(alloc::vm_action(tx, api.env(), call.tenant_scope(),
                                                  call.param("vm"), action));
                 Mutation m;
                 m.reply = json_reply(200, v.to_json(), v.version);
                 m.resource = "/v1/tenants/" + call.tenant->name + "/vms/" + v.id;
                 m.detail = {{"action", action},
                             {"domain", v.domain},
                             {"node", v.node_id},
                             {"allocation", v.allocation_id}};
                 return m;
               }),
               .summary = "Start, stop (ACPI power-off) or reboot a VM; the node's agent "
                          "carries it out at its next heartbeat.",
               .request_schema = "VmAction",
               .response_schema = "Vm"});
  r.push_back({.method = "POST",
               .pattern = "/v1/tenants/{tenant}/vms/{vm}/console",
               .action = "vm.console",
               .permission = Permission::kAllocationWrite,
               .mutation = true,
               .handler = write_tx([](Api& api, Call& call, store::Tx& tx) -> Result<Mutation> {
                 auto v = GP_TRY(alloc::vm_console_request(tx, api.env(), call.tenant_scope(),
                                                           call.param("vm")));
                 Mutation m;
                 m.reply = json_reply(200, v.console_json());
                 m.resource = "/v1/tenants/" + call.tenant->name + "/vms/" + v.id + "/console";
                 m.detail = {{"domain", v.domain},
                             {"node", v.node_id},
                             {"allocation", v.allocation_id},
                             {"requested_seq", v.console_seq}};
                 return m;
               }),
               .summary = "Read the VM's serial console (audited): returns the latest capture "
                          "and asks the node's agent for a fresh one at its next heartbeat "
                          "(`current` once it has answered this request).",
               .response_schema = "VmConsole"});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/vms/{vm}/console",
               .action = "vm.console.get",
               .permission = Permission::kAllocationWrite,  // the same people as the POST
               .handler = read_tx([](Api&, Call& call, store::Tx& tx) -> Result<Reply> {
                 auto v =
                     GP_TRY(found(alloc::find_vm(tx, call.tenant_scope(), call.param("vm")), "VM"));
                 return json_reply(200, v.console_json());
               }),
               .summary = "The latest capture of the VM's serial console, without asking for a "
                          "new one (the CLI polls it after the audited POST).",
               .response_schema = "VmConsole"});
  r.push_back(
      {.method = "GET",
       .pattern = "/v1/tenants/{tenant}/ssh-keys",
       .action = "ssh_keys.get",
       .permission = Permission::kAllocationRead,
       .handler = read_tx([](Api&, Call& call, store::Tx& tx) -> Result<Reply> {
         return json_reply(200, {{"keys", GP_TRY(alloc::tenant_ssh_keys(tx, call.tenant->id))}});
       }),
       .summary = "The SSH public keys written into the tenant's VMs (cloud-init).",
       .response_schema = "SshKeys"});
  r.push_back({.method = "PUT",
               .pattern = "/v1/tenants/{tenant}/ssh-keys",
               .action = "ssh_keys.set",
               .permission = Permission::kAllocationWrite,
               .mutation = true,
               .handler = write_tx([](Api&, Call& call, store::Tx& tx) -> Result<Mutation> {
                 auto keys = GP_TRY(alloc::parse_ssh_keys(*call.body));
                 GP_TRY_VOID(alloc::set_tenant_ssh_keys(tx, call.tenant->id, keys));
                 Mutation m;
                 m.reply = json_reply(200, {{"keys", keys}});
                 // The audit trail names the keys by type and comment, not by their blobs.
                 Json names = Json::array();
                 for (const auto& k : keys) {
                   const auto blob_end = k.find(' ', k.find(' ') + 1);
                   names.push_back(k.substr(0, k.find(' ')) +
                                   (blob_end == std::string::npos ? "" : k.substr(blob_end)));
                 }
                 m.detail = {{"keys", names}};
                 return m;
               }),
               .summary = "Replace the tenant's SSH public keys; VMs defined from now on "
                          "carry them.",
               .request_schema = "SshKeys",
               .response_schema = "SshKeys"});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/queue",
               .action = "queue.tenant",
               .permission = Permission::kAllocationRead,
               .handler = serialized_tx([](Api& api, Call& call, store::Tx& tx) -> Result<Reply> {
                 return json_reply(200, GP_TRY(api.allocs().queue(tx, api.env(), call.tenant->id,
                                                                  view_for(call))));
               }),
               .summary = "The tenant's waiting allocations in queue order, with their place "
                          "among the tenant's own (operators: in the whole queue).",
               .response_schema = "Queue"});
  r.push_back({.method = "GET",
               .pattern = "/v1/allocations",
               .action = "allocation.list_all",
               .permission = Permission::kFleetRead,
               .handler = read_tx(list_all_allocations),
               .query_params = {"limit", "after", "state", "tenant", "node"},
               .summary = "Every tenant's allocations (operators); `node` keeps the live ones on "
                          "that node, `tenant` one tenant's.",
               .response_schema = "Allocation[]"});
  r.push_back({.method = "GET",
               .pattern = "/v1/queue",
               .action = "queue.all",
               .permission = Permission::kFleetRead,
               .handler = serialized_tx([](Api& api, Call&, store::Tx& tx) -> Result<Reply> {
                 return json_reply(200,
                                   GP_TRY(api.allocs().queue(tx, api.env(), "",
                                                             alloc::Service::Audience::kOperator)));
               }),
               .summary = "Every waiting allocation in queue order (operators).",
               .response_schema = "Queue"});
  return r;
}

}  // namespace gp::api
