// The OpenAPI 3 document, generated from the route table so that it cannot drift from the
// router; the component schemas are checked against real responses by tests/api.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "alloc/alloc.h"
#include "api/router.h"
#include "audit/audit.h"
#include "billing/billing.h"
#include "billing/ledger.h"
#include "common/record.h"
#include "fleet/fleet.h"
#include "jobs/records.h"
#include "network/network.h"
#include "sla/standing.h"
#include "storage/records.h"
#include "tenancy/tenancy.h"

namespace gp::api {
namespace {

Json str() { return {{"type", "string"}}; }
Json nstr() { return {{"type", {"string", "null"}}}; }
Json integer() { return {{"type", "integer"}}; }
Json time_str() { return {{"type", "string"}, {"format", "date-time"}}; }
Json ntime() { return {{"type", {"string", "null"}}, {"format", "date-time"}}; }
Json enum_of(std::vector<std::string> v) { return {{"type", "string"}, {"enum", v}}; }
template <size_t N>
Json enum_of(const std::array<std::string_view, N>& names) {
  return enum_of(std::vector<std::string>(names.begin(), names.end()));
}
Json array_of(Json items) { return {{"type", "array"}, {"items", std::move(items)}}; }
// An object whose keys are names the schema does not list (GPU models), each holding `value`.
Json map_of(Json value) { return {{"type", "object"}, {"additionalProperties", std::move(value)}}; }

Json object(Json props, std::vector<std::string> required) {
  return {{"type", "object"},
          {"properties", std::move(props)},
          {"required", std::move(required)},
          {"additionalProperties", false}};
}

// An object with every one of `props` required.
Json object_of(Json props) {
  std::vector<std::string> required;
  for (auto it = props.begin(); it != props.end(); ++it) required.push_back(it.key());
  return object(std::move(props), std::move(required));
}

// `schema` with properties a reply may add (not required).
Json with_optional(Json schema, const Json& props) {
  for (auto it = props.begin(); it != props.end(); ++it) schema["properties"][it.key()] = *it;
  return schema;
}

// `schema` with properties a reply always adds (required).
Json with_required(Json schema, const Json& props) {
  for (auto it = props.begin(); it != props.end(); ++it) {
    schema["properties"][it.key()] = *it;
    schema["required"].push_back(it.key());
  }
  return schema;
}

// What a request may send, from the schema of what the reply shows (schema_of): the same
// properties but those in `drop` (the server sets them), with `required` as the required set.
Json accepting(Json shown, const std::vector<std::string>& required,
               std::initializer_list<std::string_view> drop = {}) {
  for (auto name : drop) shown["properties"].erase(std::string(name));
  shown["required"] = required;
  return shown;
}

Json schema_ref(const std::string& name) { return {{"$ref", "#/components/schemas/" + name}}; }

const std::vector<std::string> kClasses(vocab::kClassNames.begin(), vocab::kClassNames.end());

Json schemas() {
  Json s;
  Json labels = {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}};
  // DELETE's answer adds offboarding, a create with an admin adds admin.
  s["Tenant"] =
      with_optional(schema_of<tenancy::Tenant>(),
                    {{"admin", {{"type", "object"}}}, {"offboarding", {{"type", "object"}}}});
  s["UserCreate"] = object({{"username", str()},
                            {"display_name", str()},
                            {"email", str()},
                            {"password", {{"type", "string"}, {"minLength", 12}}}},
                           {"username"});
  s["TenantCreate"] = object({{"name", str()},
                              {"display_name", str()},
                              {"isolation_class", enum_of(kClasses)},
                              {"labels", labels},
                              {"admin", {{"$ref", "#/components/schemas/UserCreate"}}}},
                             {"name"});
  s["TenantPatch"] = object({{"display_name", str()},
                             {"isolation_class", enum_of(kClasses)},
                             {"state", enum_of({"active", "suspended"})},
                             {"labels", labels}},
                            {});
  s["Project"] = schema_of<tenancy::Project>();
  s["ProjectCreate"] = object({{"name", str()}, {"display_name", str()}}, {"name"});
  s["ProjectPatch"] = object({{"display_name", str()}}, {});
  s["User"] = schema_of<iam::User>();
  s["UserPatch"] = object({{"display_name", str()},
                           {"email", str()},
                           {"password", str()},
                           {"state", enum_of({"active", "disabled"})}},
                          {});
  s["ServiceAccount"] = schema_of<iam::ServiceAccount>();
  s["ServiceAccountCreate"] = object({{"name", str()}, {"description", str()}}, {"name"});
  // A key's state is as of the reply (it expires); its token shows once, at creation.
  s["ApiKey"] = with_optional(
      with_required(schema_of<iam::ApiKey>(),
                    {{"state", enum_of(std::vector<std::string>(iam::kApiKeyStates.begin(),
                                                                iam::kApiKeyStates.end()))}}),
      {{"token", {{"type", "string"}, {"description", "Shown once, at creation."}}}});
  s["ApiKeyCreate"] = object({{"name", str()},
                              {"owner_kind", enum_of({"user", "service_account"})},
                              {"owner_id", str()},
                              {"expires_at", time_str()},
                              {"ttl_seconds", integer()}},
                             {});
  s["RoleBinding"] = schema_of<iam::Binding>();
  std::vector<std::string> roles;
  for (auto r : iam::all_roles()) roles.emplace_back(iam::role_name(r));
  s["RoleBindingCreate"] = object({{"role", enum_of(roles)},
                                   {"subject_kind", enum_of({"user", "service_account"})},
                                   {"subject_id", str()},
                                   {"project", str()}},
                                  {"role", "subject_kind", "subject_id"});
  s["LoginRequest"] =
      object({{"username", str()}, {"password", str()}, {"cookie", {{"type", "boolean"}}}},
             {"username", "password"});
  s["OidcTokenRequest"] = object({{"id_token", str()}}, {"id_token"});
  s["OidcProviders"] =
      object({{"items",
               {{"type", "array"},
                {"items", object({{"name", str()}, {"display_name", str()}, {"login_url", str()}},
                                 {"name", "display_name", "login_url"})}}}},
             {"items"});
  s["Principal"] = object({{"kind", enum_of({"user", "service_account", "node"})},
                           {"id", str()},
                           {"name", str()},
                           {"tenant_id", nstr()},
                           {"credential_id", str()},
                           {"role_bindings", {{"type", "array"}}}},
                          {"kind", "id", "name", "tenant_id", "credential_id", "role_bindings"});
  // token: in the body; csrf_token: a cookie login's (the token is then in the gp_session cookie).
  s["LoginResponse"] = object({{"token", str()},
                               {"csrf_token", str()},
                               {"session_id", str()},
                               {"expires_at", time_str()},
                               {"principal", {{"$ref", "#/components/schemas/Principal"}}}},
                              {"session_id", "expires_at", "principal"});
  s["AuditRecord"] = schema_of<audit::Record>();
  s["AuditVerification"] = object({{"ok", {{"type", "boolean"}}},
                                   {"records_checked", integer()},
                                   {"checkpoints_checked", integer()},
                                   {"first_bad_seq", {{"type", {"integer", "null"}}}},
                                   {"reason", str()},
                                   {"last_seq", integer()},
                                   {"head_hash", str()}},
                                  {"ok", "records_checked", "checkpoints_checked", "first_bad_seq",
                                   "reason", "last_seq", "head_hash"});
  s["PoolCreate"] = object({{"name", str()}, {"tenant", str()}, {"description", str()}}, {"name"});
  s["Pool"] = schema_of<fleet::Pool>();
  s["JoinTokenCreate"] = object({{"pool", str()}, {"ttl_seconds", integer()}}, {});
  s["JoinToken"] = schema_of<fleet::JoinToken>();
  s["NodeAction"] = object({{"reason", str()}, {"deadline_seconds", integer()}}, {});
  s["Gpu"] = schema_of<fleet::Gpu>();
  // A repair's answer: the GPU, out of service now, with the repair it began.
  s["GpuInRepair"] = with_required(s["Gpu"], {{"repair", schema_of<fleet::GpuRepair>()}});
  // A node read with its GPUs adds them.
  s["Node"] = with_optional(schema_of<fleet::Node>(),
                            {{"gpus", {{"type", "array"}, {"items", schema_ref("Gpu")}}}});
  // A GPU's health, its repair (null when none) and every health event of its history.
  Json health_event = object({{"seq", integer()},
                              {"node_id", str()},
                              {"at", time_str()},
                              {"kind", enum_of({"xid", "ecc", "repair", "returned"})},
                              {"detail", str()},
                              {"ecc_uncorrected", integer()}},
                             {"seq", "node_id", "at", "kind", "detail", "ecc_uncorrected"});
  s["GpuHealth"] =
      object({{"gpu", str()},
              {"node_id", str()},
              {"index", integer()},
              {"health", enum_of(fleet::kGpuHealthNames)},
              {"health_reason", str()},
              {"repair", or_null(schema_of<fleet::GpuRepair>())},
              {"events", array_of(health_event)}},
             {"gpu", "node_id", "index", "health", "health_reason", "repair", "events"});
  // A MIG instance as placed on a GPU, and a GPU's whole MIG layout.
  const Json mig_instance = schema_of<vocab::PlacedInstance>();
  const Json layout = array_of(mig_instance);
  // What an agent reports, as fleet::parse_inventory reads it (it refuses any other field); the
  // container toolkit's two settings are null where the agent could not tell.
  Json inventory_node = object({{"name", str()},
                                {"cpu_millis", integer()},
                                {"memory_bytes", integer()},
                                {"rack", str()},
                                {"nvlink_domain", str()},
                                {"labels", labels}},
                               {"name"});
  Json inventory_gpu = object({{"uuid", str()},
                               {"index", integer()},
                               {"model", str()},
                               {"memory_bytes", integer()},
                               {"pci_bus_id", str()},
                               {"numa_node", integer()},
                               {"nvlink_peers", array_of(str())},
                               {"mig_capable", {{"type", "boolean"}}},
                               {"mode", enum_of(vocab::kGpuModeNames)},
                               {"mig_instances", layout},
                               {"health", object({{"xid_errors", array_of(integer())},
                                                  {"ecc_uncorrected", integer()},
                                                  {"diagnostics", str()}},
                                                 {})}},
                              {"uuid", "index", "model", "memory_bytes"});
  Json gpu_runtime =
      object({{"toolkit_config", str()},
              {"toolkit_config_state", enum_of({"read", "absent", "unreadable"})},
              {"accept_envvar_when_unprivileged", {{"type", {"boolean", "null"}}}},
              {"accept_volume_mounts", {{"type", {"boolean", "null"}}}},
              {"device_list_strategy",
               array_of(enum_of({"envvar", "volume-mounts", "cdi-annotations", "cdi-cri"}))},
              {"device_list_strategy_source", enum_of({"flag", "device-plugin-config", "unknown"})},
              {"detail", str()}},
             {"toolkit_config", "toolkit_config_state"});
  s["Inventory"] = object(
      {{"node", inventory_node}, {"gpus", array_of(inventory_gpu)}, {"gpu_runtime", gpu_runtime}},
      {"node"});
  // Per model, its GPUs by health, by use and by mode (fleet::summary); the nodes by state.
  auto counts_by = [](Json names) {
    return Json{{"type", "object"},
                {"propertyNames", std::move(names)},
                {"additionalProperties", integer()}};
  };
  Json model_summary = object_of({{"total", integer()},
                                  {"healthy", integer()},
                                  {"unhealthy", integer()},
                                  {"missing", integer()},
                                  {"allocated", integer()},
                                  {"free", integer()},
                                  {"unavailable", integer()},
                                  {"by_mode", counts_by(enum_of(vocab::kGpuModeNames))}});
  s["FleetSummary"] = object_of({{"gpus_total", integer()},
                                 {"gpus_by_model", map_of(model_summary)},
                                 {"nodes_by_state", counts_by(enum_of(fleet::kNodeStateNames))}});
  s["FleetImport"] = object({{"nodes", {{"type", "array"}}}, {"pool", str()}}, {"nodes"});
  s["Enrollment"] =
      object({{"join_token", str()}, {"inventory", schema_ref("Inventory")}, {"csr", str()}},
             {"join_token", "inventory"});
  s["IssuedCertificate"] =
      object({{"pem", str()}, {"serial", str()}, {"not_after", str()}, {"ca", str()}},
             {"pem", "serial", "not_after", "ca"});
  s["CertificateRequest"] = object({{"csr", str()}}, {"csr"});
  s["Enrolled"] = object({{"node", schema_ref("Node")},
                          {"credential", str()},
                          {"certificate", schema_ref("IssuedCertificate")}},
                         {"node", "credential"});
  s["NodeCertificate"] = schema_of<fleet::NodeCertificate>();
  s["NodeRevoked"] = object({{"node", schema_ref("Node")}, {"certificates_revoked", integer()}},
                            {"node", "certificates_revoked"});
  s["VmReport"] =
      object({{"domain", str()},
              {"state", enum_of({"running", "shut-off", "paused", "shutting-down", "crashed",
                                 "other", "absent", "failed"})},
              {"addresses", {{"type", "array"}, {"items", str()}}},
              {"error", str()},
              {"console", object({{"seq", integer()}, {"text", str()}}, {"seq", "text"})}},
             {"domain", "state"});
  s["Heartbeat"] = object({{"inventory", schema_ref("Inventory")},
                           {"samples", {{"type", "array"}}},
                           {"vms", {{"type", "array"}, {"items", schema_ref("VmReport")}}},
                           {"jobs", {{"type", "array"}, {"items", {{"type", "object"}}}}},
                           {"holding", {{"type", "array"}, {"items", str()}}},
                           {"mig", {{"type", "array"}, {"items", {{"type", "object"}}}}},
                           {"underlay_address", str()},
                           {"inventory_digest", str()}},
                          {});
  s["AssignmentChanges"] =
      object({{"etag", str()}, {"changed", {{"type", "boolean"}}}}, {"etag", "changed"});
  // Scheduling.
  const std::vector<std::string> tiers = {"dedicated-pool", "dedicated-node", "dedicated-gpu",
                                          "mig", "shared"};
  Json strings = {{"type", "array"}, {"items", str()}};
  Json number = {{"type", "number"}};
  Json nnumber = {{"type", {"number", "null"}}};
  Json boolean = {{"type", "boolean"}};
  s["OfferingCreate"] = object(
      {{"name", str()},
       {"tier", enum_of(tiers)},
       {"models", strings},
       {"gpus", integer()},
       {"mig_profile", str()},
       {"milli", integer()},
       {"description", str()},
       {"delivery", enum_of({"container", "vm"})},
       {"vm", object({{"vcpus", integer()}, {"memory_mib", integer()}}, {"vcpus", "memory_mib"})},
       {"container", object({{"cpu_millis", integer()}, {"memory_mib", integer()}}, {})}},
      {"name", "tier"});
  // A tenant's view says whether its class may receive the offering's tier, and why not.
  s["Offering"] = with_optional(schema_of<alloc::Offering>(),
                                {{"allowed", boolean}, {"not_allowed_because", str()}});
  Json model_quota =
      object({{"nominal", number}, {"borrow_limit", nnumber}, {"limit", nnumber}}, {"nominal"});
  Json model_quotas = {{"type", "object"}, {"additionalProperties", model_quota}};
  s["TenantQuotaSet"] = object({{"cohort", str()},
                                {"weight", number},
                                {"models", model_quotas},
                                {"profile_caps", {{"type", "object"}}}},
                               {});
  s["ProjectQuotaSet"] = object({{"models", model_quotas}}, {});
  s["PlatformQuotaSet"] = object(
      {{"models",
        {{"type", "object"}, {"additionalProperties", object({{"limit", number}}, {"limit"})}}}},
      {});
  // A model's quota in GPU equivalents, with its use (alloc::detail::model_quota_json).
  Json used_quota = object({{"nominal", number},
                            {"borrow_limit", nnumber},
                            {"limit", nnumber},
                            {"used", number},
                            {"used_units", integer()},
                            {"borrowed", number}},
                           {"nominal", "borrow_limit", "limit", "used", "used_units", "borrowed"});
  Json used_quotas = map_of(used_quota);
  // Per model, per MIG profile: the tenant's cap on instances and how many it holds.
  Json profile_caps = map_of(map_of(
      object({{"max_instances", integer()}, {"used", integer()}}, {"max_instances", "used"})));
  s["TenantQuota"] = object({{"tenant_id", str()},
                             {"cohort", nstr()},
                             {"weight", number},
                             {"models", used_quotas},
                             {"profile_caps", profile_caps}},
                            {"tenant_id", "cohort", "weight", "models", "profile_caps"});
  s["ProjectQuota"] = object({{"tenant_id", str()}, {"project_id", str()}, {"models", used_quotas}},
                             {"tenant_id", "project_id", "models"});
  // Per model: the fleet's GPUs, their use and the platform's limit (null: none).
  s["PlatformQuota"] =
      object({{"models", map_of(object({{"gpus", integer()}, {"used", number}, {"limit", nnumber}},
                                       {"gpus", "used", "limit"}))}},
             {"models"});
  s["AllocationCreate"] =
      object({{"name", str()},
              {"offering", str()},
              {"count", integer()},
              {"shape", object({{"tier", enum_of(tiers)},
                                {"models", strings},
                                {"count", integer()},
                                {"node_count", integer()},
                                {"gpus_per_node", integer()},
                                {"pool", str()},
                                {"mig_profile", str()},
                                {"milli", integer()}},
                               {"tier"})},
              {"constraints", object({{"same_node", boolean},
                                      {"same_nvlink_domain", boolean},
                                      {"models", strings},
                                      {"gang_members", integer()}},
                                     {})},
              {"priority_class", enum_of({"low", "normal", "high", "critical"})},
              {"preemptible", boolean},
              {"end_time", time_str()},
              {"duration_seconds", integer()}},
             {});
  s["AllocationRelease"] = object({{"reason", str()}}, {});
  // One allocation's read adds its transitions, where its work is still being stopped and what
  // its GPUs wait for before it starts.
  Json event = object({{"seq", integer()},
                       {"at", time_str()},
                       {"from", str()},
                       {"to", str()},
                       {"reason_code", str()},
                       {"reason", str()}},
                      {"seq", "at", "from", "to", "reason_code", "reason"});
  // The scheduler's request as a dry run and a queued allocation show it
  // (alloc::detail::request_json); an allocation's and a reservation's shape is the same less
  // its isolation, priority and preemption (which they show at their top level).
  Json request_shape = object({{"tier", enum_of(tiers)},
                               {"isolation", enum_of(kClasses)},
                               {"models", strings},
                               {"count", integer()},
                               {"same_node", boolean},
                               {"same_nvlink_domain", boolean},
                               {"priority", integer()},
                               {"preemptible", boolean},
                               {"node_count", integer()},
                               {"gpus_per_node", integer()},
                               {"pool", str()},
                               {"mig_profile", str()},
                               {"milli", integer()}},
                              {"tier", "isolation", "models", "count", "same_node",
                               "same_nvlink_domain", "priority", "preemptible"});
  Json shape = request_shape;
  for (const char* shown_above : {"isolation", "priority", "preemptible"}) {
    shape["properties"].erase(shown_above);
    auto& required = shape["required"];
    required.erase(std::find(required.begin(), required.end(), shown_above));
  }
  // Where an allocation was placed (alloc::detail::placement_json): its GPUs, by node, with the
  // MIG instance or the share of each it holds, and the modes and layouts the placement changes.
  Json granted_gpu = object({{"node", str()},
                             {"node_name", str()},
                             {"gpu", str()},
                             {"index", integer()},
                             {"mig", mig_instance},
                             {"milli", integer()}},
                            {"node", "node_name", "gpu", "index"});
  Json placement = object(
      {{"model", str()},
       {"tier", enum_of(tiers)},
       {"units", integer()},
       {"gpu_equivalents", str()},
       {"whole_nodes", boolean},
       {"nodes", strings},
       {"node_names", strings},
       {"gpus", array_of(granted_gpu)},
       {"mode_changes", array_of(object({{"gpu", str()},
                                         {"from", enum_of(vocab::kGpuModeNames)},
                                         {"to", enum_of(vocab::kGpuModeNames)}},
                                        {"gpu", "from", "to"}))},
       {"mig_changes", array_of(object({{"gpu", str()}, {"before", layout}, {"after", layout}},
                                       {"gpu", "before", "after"}))},
       {"reservation", str()}},
      {"model", "tier", "units", "gpu_equivalents", "whole_nodes", "nodes", "node_names", "gpus",
       "mode_changes", "mig_changes"});
  // Where an ended allocation's work is still being stopped (alloc::Stop).
  Json stop = schema_of<alloc::Stop>();
  // A GPU's planned mode and MIG layout (the heartbeat's gpu_plans), and one that its node has
  // not carried out yet (alloc::allocation_configuring): "detail" only where the node said why.
  const Json gpu_plan =
      object({{"gpu", str()}, {"mode", str()}, {"mig_layout", layout}, {"status", str()}},
             {"gpu", "mode", "mig_layout", "status"});
  Json unmet_plan = with_optional(with_required(gpu_plan, {{"node", str()}}), {{"detail", str()}});
  s["Allocation"] =
      with_optional(schema_of<alloc::Allocation>(), {{"events", array_of(event)},
                                                     {"stopping", array_of(stop)},
                                                     {"configuring", array_of(unmet_plan)}});
  s["Allocation"]["properties"]["shape"] = shape;
  s["Allocation"]["properties"]["placement"] = or_null(placement);
  // What a create would do, changing nothing: the shape as the scheduler reads it, and where it
  // would be placed or why not.
  s["AllocationDryRun"] = object({{"dry_run", boolean},
                                  {"would_place", boolean},
                                  {"shape", request_shape},
                                  {"placement", placement},
                                  {"reason_code", str()},
                                  {"reason", str()}},
                                 {"dry_run", "would_place", "shape"});
  // A pending allocation's answer adds its place in the queue, the quota at each level for each
  // model it may use (a level with no quota configured is null; the platform's use shows to
  // operators only) and whether the fleet has room for it now.
  Json level_quota = or_null(used_quota);
  Json model_standing =
      object({{"model", str()},
              {"needs_gpu_equivalents", number},
              {"tenant", level_quota},
              {"project", level_quota},
              {"platform", object({{"limit", nnumber}, {"used", number}}, {"limit"})}},
             {"model", "needs_gpu_equivalents", "tenant", "project", "platform"});
  s["AllocationWhy"] =
      object({{"id", str()},
              {"state", enum_of(alloc::kAllocationStateNames)},
              {"reason_code", str()},
              {"reason", str()},
              {"events", array_of(event)},
              {"queue", object({{"counts", str()},
                                {"position", integer()},
                                {"length", integer()},
                                {"ahead_of_same_tenant", integer()}},
                               {"counts", "position", "length", "ahead_of_same_tenant"})},
              {"quota", array_of(model_standing)},
              {"capacity",
               object({{"fits_now", boolean}, {"note", str()}, {"reason", str()}}, {"fits_now"})}},
             {"id", "state", "reason_code", "reason", "events"});
  Json reservation_create = s["AllocationCreate"];
  reservation_create["properties"]["project"] = str();
  reservation_create["properties"]["start_time"] = time_str();
  reservation_create["required"] = {"project"};
  s["ReservationCreate"] = reservation_create;
  s["Reservation"] = schema_of<alloc::Reservation>();
  s["Reservation"]["properties"]["shape"] = shape;
  s["Vm"] = schema_of<alloc::Vm>();
  const std::vector<std::string> job_states(jobs::kJobStateNames.begin(),
                                            jobs::kJobStateNames.end());
  s["JobCreate"] = object(
      {{"name", str()},
       {"image", str()},
       {"command", strings},
       {"args", strings},
       {"env",
        {{"type", "array"},
         {"items", object({{"name", str()}, {"value", str()}}, {"name", "value"})}}},
       {"offering", str()},
       {"count", integer()},
       {"gang", integer()},
       {"volumes",
        {{"type", "array"},
         {"items", object({{"kind", enum_of({"datasets", "models", "checkpoints", "scratch"})},
                           {"read_only", boolean}},
                          {"kind"})}}},
       {"secrets", strings},
       {"max_duration_seconds", integer()},
       {"restart_policy", enum_of({"never", "on-failure"})},
       {"retries", integer()},
       {"priority_class", enum_of({"low", "normal", "high", "critical"})},
       {"preemptible", boolean}},
      {"name", "image", "offering"});
  s["JobCancel"] = object({}, {});
  // A tenant's network segment (network::Segment).
  const Json segment = schema_of<network::Segment>();
  // The VM an allocation's node is to run (alloc::vm_assignment): its GPUs passed through (by
  // PCI address) or as vGPUs, its tenant's segment (null: none), its project's volumes and the
  // tenant's SSH keys.
  Json assigned_vm = object_of({{"id", str()},
                                {"domain", str()},
                                {"uuid", str()},
                                {"mac", str()},
                                {"tenant", str()},
                                {"project", str()},
                                {"vcpus", integer()},
                                {"memory_mib", integer()},
                                {"desired", str()},
                                {"reboot_seq", integer()},
                                {"console_seq", integer()},
                                {"console_captured_seq", integer()},
                                {"passthrough", array_of(str())},
                                {"vgpus", array_of(object_of({{"gpu", str()}, {"type", str()}}))},
                                {"segment", or_null(segment)},
                                {"volumes", array_of(object_of({{"tag", str()}, {"path", str()}}))},
                                {"ssh_keys", array_of(str())}});
  // An allocation with GPUs on the node (alloc::Service::acknowledge): what waits before it
  // starts, its VM (or why it has none), and, once ended, the stop of its work still held.
  Json assigned_allocation = object({{"id", str()},
                                     {"tenant_id", str()},
                                     {"project_id", str()},
                                     {"state", enum_of(alloc::kAllocationStateNames)},
                                     {"tier", enum_of(tiers)},
                                     {"gpus", array_of(granted_gpu)},
                                     {"waiting_for", array_of(str())},
                                     {"configuring", array_of(str())},
                                     {"vm_error", str()},
                                     {"vm", assigned_vm},
                                     {"stop", stop}},
                                    {"id", "tenant_id", "project_id", "state", "tier", "gpus"});
  // A job member the node runs (jobs::node_assignment), its secrets opened.
  Json name_value = object({{"name", str()}, {"value", str()}}, {"name", "value"});
  // Its place on the tenant's network (jobs' member_network; null: the tenant has no segment,
  // or the member no address yet): its address, its job's rank 0's, its job's members' and the
  // members on other nodes it reaches through their node's underlay address.
  Json member_network =
      object_of({{"vni", integer()},
                 {"cidr", str()},
                 {"address", str()},
                 {"master_addr", str()},
                 {"members", array_of(object_of({{"rank", integer()}, {"address", str()}}))},
                 {"peers", array_of(object_of({{"address", str()}, {"node", str()}}))}});
  Json member_device =
      object({{"gpu", str()}, {"mig", mig_instance}, {"milli", integer()}}, {"gpu"});
  Json assigned_member = object_of(
      {{"job", str()},
       {"name", str()},
       {"tenant_id", str()},
       {"tenant", str()},
       {"project_id", str()},
       {"allocation_id", str()},
       {"rank", integer()},
       {"attempt", integer()},
       {"world_size", integer()},
       {"image", str()},
       {"pull_always", boolean},
       {"allowed_registries", strings},
       {"command", strings},
       {"args", strings},
       {"env", array_of(name_value)},
       {"devices", array_of(member_device)},
       {"ids", object({{"first", integer()}, {"count", integer()}}, {"first", "count"})},
       {"run_as", integer()},
       {"volumes", array_of(object({{"kind", str()}, {"path", str()}, {"read_only", boolean}},
                                   {"kind", "path", "read_only"}))},
       {"limits", object({{"cpu_millis", integer()}, {"memory_bytes", integer()}},
                         {"cpu_millis", "memory_bytes"})},
       {"desired", enum_of({"running", "created", "stopped"})},
       {"stop_grace_seconds", integer()},
       {"log_offset", integer()},
       {"network", or_null(member_network)},
       {"secrets", array_of(name_value)}});
  // What the node is to run: its allocations, the GPU plans it applies, its job members (their
  // secrets opened) and the GPUs in repair it checks.
  Json assignments = object({{"allocations", array_of(assigned_allocation)},
                             {"gpu_plans", array_of(gpu_plan)},
                             {"jobs", array_of(assigned_member)},
                             {"gpu_repairs", array_of(str())}},
                            {"allocations", "gpu_plans", "jobs", "gpu_repairs"});
  s["HeartbeatReply"] = object({{"node", schema_ref("Node")},
                                {"assignments", assignments},
                                {"assignments_etag", str()},
                                {"inventory_digest", nstr()},
                                {"heartbeat_seconds", integer()},
                                {"node_timeout_seconds", integer()}},
                               {"node", "assignments", "assignments_etag", "inventory_digest",
                                "heartbeat_seconds", "node_timeout_seconds"});
  // A job's answer adds its members, its history, its attempts and, while it waits, its
  // allocation's reason.
  Json job_member = object({{"rank", integer()},
                            {"attempt", integer()},
                            {"node_id", str()},
                            {"state", str()},
                            {"exit_code", {{"type", {"integer", "null"}}}},
                            {"oom", boolean},
                            {"failure", nstr()},
                            {"error", nstr()},
                            {"address", nstr()},
                            {"updated_at", time_str()}},
                           {"rank", "attempt", "node_id", "state", "exit_code", "oom", "failure",
                            "error", "address", "updated_at"});
  Json job_event = object(
      {{"seq", integer()}, {"at", time_str()}, {"from", str()}, {"to", str()}, {"reason", str()}},
      {"seq", "at", "from", "to", "reason"});
  Json job_attempt = object(
      {{"attempt", integer()},
       {"allocation_id", str()},
       {"nodes", {{"type", "array"}}},
       {"node_names", strings},
       {"started_at", ntime()},
       {"ended_at", ntime()},
       {"end_reason", str()}},
      {"attempt", "allocation_id", "nodes", "node_names", "started_at", "ended_at", "end_reason"});
  s["Job"] = with_optional(
      schema_of<jobs::Job>(),
      {{"members", {{"type", "array"}, {"items", job_member}}},
       {"events", {{"type", "array"}, {"items", job_event}}},
       {"attempt_history", {{"type", "array"}, {"items", job_attempt}}},
       {"allocation",
        object({{"id", str()},
                {"state", enum_of(std::vector<std::string>(alloc::kAllocationStateNames.begin(),
                                                           alloc::kAllocationStateNames.end()))},
                {"reason_code", str()},
                {"reason", str()}},
               {"id", "state", "reason_code", "reason"})}});
  s["JobLogs"] = object({{"job", str()},
                         {"state", enum_of(job_states)},
                         {"finished", boolean},
                         {"limit_bytes", integer()},
                         {"members", {{"type", "array"}}}},
                        {"job", "state", "finished", "limit_bytes", "members"});
  Json point = object({{"time", time_str()},
                       {"util_pct", {{"type", "number"}}},
                       {"mem_used_bytes", integer()},
                       {"samples", integer()}},
                      {"time", "util_pct", "mem_used_bytes", "samples"});
  Json gpu_series = object({{"node", str()},
                            {"gpu", str()},
                            {"instance", str()},
                            {"points", {{"type", "array"}, {"items", point}}}},
                           {"node", "gpu", "instance", "points"});
  s["JobUtilization"] = object({{"job", str()},
                                {"allocation", str()},
                                {"from", ntime()},
                                {"to", ntime()},
                                {"gpus", {{"type", "array"}, {"items", gpu_series}}}},
                               {"job", "allocation", "from", "to", "gpus"});
  s["VmConsole"] = object({{"vm", str()},
                           {"domain", str()},
                           {"state", str()},
                           {"requested_seq", integer()},
                           {"captured_seq", integer()},
                           {"captured_at", ntime()},
                           {"current", {{"type", "boolean"}}},
                           {"text", str()}},
                          {"vm", "domain", "requested_seq", "captured_seq", "current", "text"});
  s["VmAction"] = object({{"action", enum_of({"start", "stop", "reboot"})}}, {"action"});
  s["SshKeys"] = object({{"keys", strings}}, {"keys"});
  Json queued = object({{"position", integer()},
                        {"id", str()},
                        {"tenant_id", str()},
                        {"project_id", str()},
                        {"priority_class", str()},
                        {"shape", request_shape},
                        {"reason_code", str()},
                        {"reason", str()},
                        {"submitted_at", time_str()},
                        {"fair_share_usage", number}},
                       {"position", "id", "tenant_id", "project_id", "priority_class", "shape",
                        "reason_code", "reason", "submitted_at", "fair_share_usage"});
  s["Queue"] = object({{"counts", str()}, {"items", array_of(queued)}, {"length", integer()}},
                      {"counts", "items", "length"});
  // admission.k8s.io/v1: Kubernetes sends the request (its AdmissionRequest, read in part by
  // policy::review_admission), the webhook answers the response.
  Json admission_cause =
      object({{"reason", str()}, {"message", str()}, {"field", str()}}, {"reason", "message"});
  Json admission_status =
      object({{"status", enum_of({"Failure"})},
              {"code", integer()},
              {"reason", str()},
              {"message", str()},
              {"details", object({{"causes", array_of(admission_cause)}}, {"causes"})}},
             {"status", "code", "reason", "message", "details"});
  // Kubernetes' AdmissionRequest (admission.k8s.io/v1): the object under review, its old
  // version and the operation's options are whatever Kubernetes objects the API server sends.
  Json group_version_kind = object_of({{"group", str()}, {"version", str()}, {"kind", str()}});
  Json group_version_resource =
      object_of({{"group", str()}, {"version", str()}, {"resource", str()}});
  Json kubernetes_object = {{"type", {"object", "null"}}};
  Json admission_request =
      object({{"uid", str()},
              {"kind", group_version_kind},
              {"resource", group_version_resource},
              {"subResource", str()},
              {"requestKind", group_version_kind},
              {"requestResource", group_version_resource},
              {"requestSubResource", str()},
              {"name", str()},
              {"namespace", str()},
              {"operation", enum_of({"CREATE", "UPDATE", "DELETE", "CONNECT"})},
              {"userInfo", object({{"username", str()},
                                   {"uid", str()},
                                   {"groups", array_of(str())},
                                   {"extra", map_of(array_of(str()))}},
                                  {})},
              {"object", kubernetes_object},
              {"oldObject", kubernetes_object},
              {"dryRun", boolean},
              {"options", kubernetes_object}},
             {"uid", "kind", "resource", "operation", "userInfo"});
  s["AdmissionReview"] = object(
      {{"apiVersion", enum_of({"admission.k8s.io/v1"})},
       {"kind", enum_of({"AdmissionReview"})},
       {"request", admission_request},
       {"response", object({{"uid", str()}, {"allowed", boolean}, {"status", admission_status}},
                           {"uid", "allowed"})}},
      {"apiVersion", "kind"});
  // A PUT may leave out either list, and a rule's ports (every port).
  Json policy_set = accepting(schema_of<network::TenantPolicy>(), {});
  policy_set["properties"]["egress"]["items"] =
      accepting(schema_of<network::EgressRule>(), {"destination", "protocol"});
  s["NetworkPolicySet"] = std::move(policy_set);
  s["Segment"] = segment;
  // null: a tenant created before segments came with it
  // The policy as stored and shown (network::TenantPolicy); NetworkPolicySet is what a PUT takes.
  s["TenantNetwork"] = object({{"segment", or_null(s["Segment"])},
                               {"policy", schema_of<network::TenantPolicy>()},
                               {"version", integer()}},
                              {"segment", "policy", "version"});
  s["NodeNftables"] = object({{"node", str()},
                              {"table", str()},
                              {"segments", {{"type", "array"}, {"items", {{"type", "object"}}}}},
                              {"ruleset", str()}},
                             {"node", "table", "segments", "ruleset"});
  s["SecretCreate"] = object(
      {{"name", {{"type", "string"}, {"pattern", "^[A-Za-z0-9_.:-]{1,128}$"}}}, {"value", str()}},
      {"name", "value"});
  s["Secret"] = schema_of<storage::SecretRecord>();
  Json key_version = object({{"version", integer()},
                             {"master_key_id", str()},
                             {"created_at", ntime()},
                             {"secrets", integer()}},
                            {"version", "master_key_id", "created_at", "secrets"});
  Json key_props = {{"state", enum_of({"none", "active", "destroyed"})},
                    {"current_version", {{"type", {"integer", "null"}}}},
                    {"rotated_at", ntime()},
                    {"versions", {{"type", "array"}, {"items", key_version}}}};
  const std::vector<std::string> key_required = {"state", "current_version", "rotated_at",
                                                 "versions"};
  s["TenantKeys"] = object(key_props, key_required);
  key_props["resealed"] = integer();
  s["TenantKeysRotated"] = object(key_props, [&] {
    auto r = key_required;
    r.push_back("resealed");
    return r;
  }());
  s["KeyRotate"] = object(Json::object(), {});
  // A new card: the server numbers its version; a price may give a flat unit price or tiers.
  Json price = accepting(schema_of<billing::Price>(), {});
  price["properties"]["tiers"]["items"] =
      accepting(schema_of<billing::PriceTier>(), {"from_hours", "unit_price_micros"});
  Json card = accepting(schema_of<billing::RateCard>(),
                        {"id", "currency", "effective_from", "prices"}, {"version"});
  card["properties"]["prices"]["items"] = std::move(price);
  s["RateCardCreate"] = std::move(card);
  // As published: the card (billing::rate_card_to_json), who published it and when; a publish
  // adds its warnings.
  s["RateCard"] = with_optional(with_required(schema_of<billing::RateCard>(),
                                              {{"created_by", str()}, {"created_at", time_str()}}),
                                {{"warnings", {{"type", "array"}, {"items", str()}}}});
  s["RateCardVersions"] =
      object({{"id", str()},
              {"latest", schema_ref("RateCard")},
              {"versions", {{"type", "array"}, {"items", schema_ref("RateCard")}}}},
             {"id", "latest", "versions"});
  Json counts = object({{"pass", integer()}, {"fail", integer()}, {"not_applicable", integer()}},
                       {"pass", "fail", "not_applicable"});
  Json statuses = enum_of({"pass", "fail", "not_applicable"});
  Json ids = {{"type", "array"}, {"items", str()}};
  s["PostureControl"] = object(
      {{"id", str()},
       {"layer", str()},
       {"title", str()},
       {"status", statuses},
       {"required", {{"type", "boolean"}}},
       {"summary", str()},
       {"evidence",
        object({{"checked", str()}, {"seen", {{"type", "object"}}}, {"checked_at", time_str()}},
               {"checked", "seen", "checked_at"})},
       {"threat", str()},
       {"remediation", str()},
       {"rule", str()},
       {"required_from", enum_of(kClasses)},
       {"benchmark", {{"type", "boolean"}}}},
      {"id", "layer", "title", "status", "required", "summary", "evidence", "threat", "remediation",
       "rule", "required_from", "benchmark"});
  s["PostureReport"] = object(
      {{"tenant", object({{"id", str()}, {"name", str()}}, {"id", "name"})},
       {"isolation_class", enum_of(kClasses)},
       {"checked_at", time_str()},
       {"counts", counts},
       {"failing", ids},
       {"layers",
        {{"type", "array"},
         {"items",
          object({{"layer", str()},
                  {"controls", {{"type", "array"}, {"items", schema_ref("PostureControl")}}}},
                 {"layer", "controls"})}}}},
      {"tenant", "isolation_class", "checked_at", "counts", "failing", "layers"});
  s["FleetPosture"] = object(
      {{"checked_at", time_str()},
       {"offboarding", {{"type", "array"}, {"items", str()}}},
       {"counts", object({{"tenants", integer()}, {"failing_tenants", integer()}},
                         {"tenants", "failing_tenants"})},
       {"controls",
        {{"type", "array"},
         {"items",
          object(
              {{"id", str()}, {"layer", str()}, {"title", str()}, {"failing_tenants", integer()}},
              {"id", "layer", "title", "failing_tenants"})}}},
       {"tenants",
        {{"type", "array"},
         {"items", object({{"id", str()},
                           {"name", str()},
                           {"isolation_class", enum_of(kClasses)},
                           {"pass", integer()},
                           {"fail", integer()},
                           {"not_applicable", integer()},
                           {"failing", ids},
                           {"controls", {{"type", "object"}, {"additionalProperties", statuses}}}},
                          {"id", "name", "isolation_class", "pass", "fail", "not_applicable",
                           "failing", "controls"})}}}},
      {"checked_at", "counts", "controls", "tenants"});
  s["WorkloadPolicySet"] =
      object({{"allowed_registries", {{"type", "array"}, {"items", str()}, {"maxItems", 64}}},
              {"require_pull_always", {{"type", "boolean"}}}},
             {"allowed_registries"});
  s["WorkloadPolicy"] = with_required(schema_of<tenancy::WorkloadPolicy>(),
                                      {{"class_requires_pull_always", {{"type", "boolean"}}}});
  s["KubernetesPodList"] = {{"type", "object"},
                            {"properties", {{"kind", str()}, {"items", {{"type", "array"}}}}},
                            {"required", {"kind", "items"}}};
  s["PodReconcileReport"] =
      object({{"pods_seen", integer()},
              {"gpu_pods", integer()},
              {"nodes", {{"type", "array"}, {"items", {{"type", "object"}}}}},
              {"unscheduled", {{"type", "array"}, {"items", {{"type", "object"}}}}},
              {"discrepancies", {{"type", "array"}, {"items", {{"type", "object"}}}}}},
             {"pods_seen", "gpu_pods", "nodes", "unscheduled", "discrepancies"});
  // Billing accounts and invoices (handlers_invoices.cpp).
  s["BillingAccountUpdate"] =
      object({{"rate_card", str()},
              {"tax_bps", {{"type", "integer"}, {"minimum", 0}, {"maximum", 10000}}},
              {"prepaid_credit_micros", {{"type", "integer"}, {"minimum", 0}}},
              {"legal_name", {{"type", "string"}, {"maxLength", 200}}},
              {"billing_address", {{"type", "string"}, {"maxLength", 1000}}},
              {"payment_terms_days", {{"type", "integer"}, {"minimum", 0}, {"maximum", 365}}}},
             {});
  // Once stored, an account shows who changed it last, when and its version; the routes add
  // whether its card is in force and its currency, or a warning.
  s["BillingAccount"] = with_optional(
      with_required(schema_of<billing::Account>(), {{"rate_card_in_force", {{"type", "boolean"}}}}),
      {{"currency", str()},
       {"warning", str()},
       {"updated_by", str()},
       {"updated_at", time_str()},
       {"version", integer()}});
  s["InvoiceRequest"] =
      object({{"period", {{"type", "string"}, {"pattern", "^[0-9]{4}-[0-9]{2}$"}}},
              {"start", time_str()},
              {"end", time_str()}},
             {});
  s["InvoiceVoid"] =
      object({{"reason", {{"type", "string"}, {"minLength", 1}, {"maxLength", 500}}}}, {"reason"});
  Json card_ref = schema_of<billing::RateCardRef>();
  Json invoice_states = enum_of(billing::kInvoiceStates);
  // As stored (billing::StoredInvoice::to_json): the invoice with its stored id as "id", its
  // label, and the row's times; a re-issue also shows the label of the invoice it supersedes.
  s["Invoice"] =
      with_optional(with_required(schema_of<billing::Invoice>(), {{"label", str()},
                                                                  {"created_by", str()},
                                                                  {"created_at", time_str()},
                                                                  {"computed_at", time_str()},
                                                                  {"version", integer()}}),
                    {{"supersedes_label", str()}});
  Json summary_props = {{"id", str()},
                        {"label", str()},
                        {"tenant", str()},
                        {"period", str()},
                        {"state", invoice_states},
                        {"revision", integer()},
                        {"currency", str()},
                        {"rate_card", card_ref},
                        {"lines", integer()},
                        {"subtotal_micros", integer()},
                        {"total_micros", integer()},
                        {"total", str()},
                        {"computed_at", time_str()},
                        {"number", nstr()},
                        {"tenant_name", str()},
                        {"supersedes", str()}};
  std::vector<std::string> summary_required = {"id",    "label",    "tenant",      "period",
                                               "state", "revision", "total_micros"};
  s["InvoiceSummary"] = object(summary_props, summary_required);
  Json totals = object({{"subtotal_micros", integer()},
                        {"sla_credit_micros", integer()},
                        {"tax_micros", integer()},
                        {"prepaid_applied_micros", integer()},
                        {"total_micros", integer()},
                        {"lines", integer()}},
                       {"subtotal_micros", "total_micros"});
  s["InvoiceVerification"] = object({{"id", str()},
                                     {"label", str()},
                                     {"state", invoice_states},
                                     {"currency", str()},
                                     {"rate_card", card_ref},
                                     {"matches", {{"type", "boolean"}}},
                                     {"stored", totals},
                                     {"recomputed", totals},
                                     {"usage_records", integer()},
                                     {"differences", {{"type", "array"}, {"items", str()}}}},
                                    {"id", "matches", "stored", "recomputed", "differences"});
  summary_props["outcome"] = enum_of({"created", "refreshed", "reissued", "unchanged"});
  s["InvoiceRun"] = object(
      {{"period", str()},
       {"start", time_str()},
       {"end", time_str()},
       {"drafts", integer()},
       {"created", integer()},
       {"refreshed", integer()},
       {"reissued", integer()},
       {"finalized_unchanged", integer()},
       {"drafts_total_micros", integer()},
       {"items", {{"type", "array"}, {"items", object(summary_props, summary_required)}}}},
      {"period", "drafts", "created", "refreshed", "reissued", "finalized_unchanged", "items"});
  // A PUT names the target and, optionally, the offering and the tiers.
  s["OfferingSlaSet"] = accepting(schema_of<sla::OfferingSla>(), {"target_ppm"});
  // As shown, with the offering's name, the target as a percentage and whether (and by whom and
  // when) it was set; an offering without one has the default tiers.
  s["OfferingSla"] =
      with_required(schema_of<sla::OfferingSla>(), {{"offering_name", str()},
                                                    {"target", str()},
                                                    {"configured", {{"type", "boolean"}}},
                                                    {"updated_by", nstr()},
                                                    {"updated_at", ntime()},
                                                    {"version", integer()}});
  Json sla_row = object(
      {{"tenant_id", str()},
       {"tenant", str()},
       {"offering_id", str()},
       {"offering", str()},
       {"target_ppm", integer()},
       {"target", str()},
       {"availability", str()},
       {"availability_ppm", integer()},
       {"met_target", {{"type", "boolean"}}},
       {"entitled_gpu_hours", {{"type", "number"}}},
       {"downtime_gpu_minutes", {{"type", "number"}}},
       {"entitled_unit_us", str()},
       {"downtime_unit_us", str()},
       {"credit_bps", integer()},
       {"reason", str()}},
      {"tenant_id", "tenant", "offering_id", "offering", "target_ppm", "target", "availability",
       "availability_ppm", "met_target", "entitled_gpu_hours", "downtime_gpu_minutes",
       "entitled_unit_us", "downtime_unit_us", "credit_bps", "reason"});
  s["SlaStanding"] = object({{"period", str()},
                             {"from", time_str()},
                             {"to", time_str()},
                             {"as_of", time_str()},
                             {"items", {{"type", "array"}, {"items", sla_row}}}},
                            {"period", "from", "to", "as_of", "items"});
  // Each interval with its node's name and its seconds inside the range asked for.
  Json downtime = with_required(schema_of<fleet::Downtime>(),
                                {{"node", str()}, {"seconds_in_range", integer()}});
  s["DowntimeList"] = object({{"from", time_str()},
                              {"to", time_str()},
                              {"items", {{"type", "array"}, {"items", downtime}}}},
                             {"from", "to", "items"});
  // Budgets (handlers_budget.cpp).
  Json bps_list = {{"type", "array"}, {"items", integer()}, {"maxItems", 16}};
  s["BudgetPut"] = object({{"amount_micros", {{"type", "integer"}, {"minimum", 1}}},
                           {"thresholds_bps", bps_list},
                           {"hard_stop", {{"type", "boolean"}}}},
                          {"amount_micros"});
  // A budget adds its project's name and its spend this month (null, with spend_error, where
  // it could not be rated).
  s["Budget"] = with_optional(
      with_required(schema_of<billing::StoredBudget>(),
                    {{"project", nstr()}, {"spend_micros", {{"type", {"integer", "null"}}}}}),
      {{"period", str()},
       {"currency", nstr()},
       {"spent_bps", integer()},
       {"percent", {{"type", "number"}}},
       {"spend_error", str()}});
  // The list adds each alert's project name and its month's currency (null when unknown).
  s["BudgetAlert"] =
      with_optional(schema_of<billing::AlertRecord>(), {{"project", nstr()}, {"currency", nstr()}});
  // Tenant storage (handlers_storage.cpp).
  s["VolumesSet"] = object({{"size_limits", JsonForm<storage::SizeLimits>::schema()}}, {});
  const Json project_volumes = schema_of<storage::StoredVolumes>();
  Json dir = object({{"path", str()},
                     {"uid", integer()},
                     {"gid", integer()},
                     {"mode", str()},
                     {"size_limit", integer()},
                     {"quota_project", integer()}},
                    {"path", "uid", "gid", "mode"});
  s["ProjectVolumes"] =
      with_required(project_volumes, {{"tenant", str()}, {"directories", array_of(dir)}});
  Json confirmation =
      object({{"node", str()}, {"outcome", str()}, {"detail", str()}, {"at", time_str()}},
             {"node", "outcome", "detail", "at"});
  // An operator's view adds each node's confirmation and the nodes still awaited.
  s["StorageDeletion"] =
      with_optional(schema_of<storage::Deletion>(),
                    {{"confirmations", {{"type", "array"}, {"items", confirmation}}},
                     {"waiting_for", {{"type", "array"}, {"items", str()}}}});
  s["StorageDeletionDone"] =
      object({{"outcome", enum_of({"removed", "absent", "replaced"})}, {"detail", str()}}, {});
  Json tenant_ids = {{"type", "array"}, {"items", str()}};
  s["StorageHoldings"] = object({{"tenants", tenant_ids}}, {"tenants"});
  Json finding =
      object({{"path", str()}, {"kind", str()}, {"detail", str()}}, {"path", "kind", "detail"});
  Json tree_report =
      object({{"tenant_id", str()},
              {"encrypted", {{"type", "boolean"}}},
              {"encryption_detail", str()},
              {"finding_count", integer()},
              {"findings", {{"type", "array"}, {"items", finding}}}},
             {"tenant_id", "encrypted", "encryption_detail", "finding_count", "findings"});
  s["StorageReport"] =
      object({{"tenants", {{"type", "array"}, {"items", tree_report}}}}, {"tenants"});
  s["StorageReportResult"] =
      object({{"recorded", tenant_ids}, {"refused", tenant_ids}}, {"recorded", "refused"});
  s["StorageHoldingsResult"] =
      object({{"held", tenant_ids}, {"refused", tenant_ids}}, {"held", "refused"});
  // What a node last reported of the tenant's tree, shown with the node's name; its findings are
  // the objects the agent reported (a Json member's schema says only "object").
  Json tree = with_required(schema_of<storage::StorageReport>(), {{"node", str()}});
  tree["properties"]["findings"] = array_of(finding);
  Json id_range = object({{"first", integer()}, {"last", integer()}, {"count", integer()}},
                         {"first", "last", "count"});
  s["TenantVolumes"] =
      object({{"tenant", str()},
              {"ids", or_null(id_range)},
              {"projects", array_of(project_volumes)},
              {"directories", {{"type", "array"}, {"items", dir}}},
              {"deletions", {{"type", "array"}, {"items", schema_ref("StorageDeletion")}}},
              {"trees", array_of(tree)}},
             {"tenant", "ids", "projects", "directories", "deletions"});
  Json objects = {{"type", "array"}, {"items", {{"type", "object"}}}};
  s["AgentAssignment"] = object(
      {{"node", str()},
       {"generated_at", time_str()},
       {"supernet", str()},
       {"segments", objects},
       {"policies", objects},
       {"volumes", objects},
       {"storage_deletions", objects}},
      {"node", "generated_at", "supernet", "segments", "policies", "volumes", "storage_deletions"});
  Json period_row = {{"type", "object"},
                     {"properties",
                      {{"kind", enum_of({"allocation", "event"})},
                       {"period_start", time_str()},
                       {"period_end", time_str()},
                       {"tenant_id", str()},
                       {"project_id", nstr()},
                       {"resource_key", str()},
                       {"offering_id", nstr()},
                       {"allocated_unit_us", str()},
                       {"allocated_gpu_hours", {{"type", "number"}}},
                       {"sampled_gpu_hours", {{"type", "number"}}},
                       {"utilized_gpu_hours", {{"type", "number"}}},
                       {"utilization", {{"type", {"number", "null"}}}},
                       {"intervals", integer()},
                       {"unit", str()},
                       {"quantity", str()},
                       {"events", integer()}}},
                     {"required", {"kind", "period_start", "period_end"}},
                     {"additionalProperties", false}};
  s["Usage"] = object({{"from", time_str()},
                       {"to", time_str()},
                       {"granularity", enum_of({"hour", "day", "month"})},
                       {"group_by", {{"type", "array"}, {"items", str()}}},
                       {"units_per_gpu", integer()},
                       {"rows", {{"type", "array"}, {"items", period_row}}}},
                      {"from", "to", "granularity", "group_by", "units_per_gpu", "rows"});
  s["UsageIngest"] =
      object({{"accepted", integer()},
              {"duplicates", integer()},
              {"rejected", integer()},
              {"results",
               {{"type", "array"},
                {"items", object({{"index", integer()},
                                  {"status", enum_of({"accepted", "duplicate", "rejected"})},
                                  {"id", str()},
                                  {"source", str()},
                                  {"reason", str()}},
                                 {"index", "status"})}}}},
             {"accepted", "duplicates", "rejected", "results"});
  s["OpenApiDocument"] = {{"type", "object"}, {"required", {"openapi", "info", "paths"}}};
  // GET /readyz: `leader` (the leader's URL, "" while none is known) only on a follower.
  s["Readiness"] = object({{"status", enum_of({"ready"})},
                           {"role", enum_of({"leader", "follower"})},
                           {"store", enum_of({"sqlite", "postgres"})},
                           {"leader", str()}},
                          {"status", "role", "store"});
  s["Problem"] = object({{"type", str()},
                         {"title", str()},
                         {"status", integer()},
                         {"detail", str()},
                         {"code", str()},
                         {"request_id", str()}},
                        {"type", "title", "status", "detail", "code", "request_id"});
  return s;
}

Json response_schema(const std::string& name) {
  if (name.ends_with("[]")) {
    std::string item = name.substr(0, name.size() - 2);
    return object({{"items", {{"type", "array"}, {"items", schema_ref(item)}}}, {"next", nstr()}},
                  {"items", "next"});
  }
  return schema_ref(name);
}

}  // namespace

Json Api::openapi() const {
  Json paths = Json::object();
  for (const auto& r : routes_) {
    Json op;
    op["operationId"] = fmt::format("{}:{}", r.action, r.pattern);
    op["summary"] = r.summary;
    Json params = Json::array();
    for (size_t p = r.pattern.find('{'); p != std::string::npos; p = r.pattern.find('{', p + 1)) {
      auto end = r.pattern.find('}', p);
      params.push_back({{"name", r.pattern.substr(p + 1, end - p - 1)},
                        {"in", "path"},
                        {"required", true},
                        {"schema", str()}});
    }
    for (const auto& q : r.query_params)
      params.push_back({{"name", q}, {"in", "query"}, {"required", false}, {"schema", str()}});
    if (r.mutation && r.method == "POST")
      params.push_back(
          {{"name", "Idempotency-Key"}, {"in", "header"}, {"required", false}, {"schema", str()}});
    if (r.conditional)
      params.push_back(
          {{"name", "If-Match"}, {"in", "header"}, {"required", false}, {"schema", str()}});
    if (!params.empty()) op["parameters"] = params;
    if (!r.request_schema.empty())
      op["requestBody"] = {
          {"required", true},
          {"content", {{"application/json", {{"schema", schema_ref(r.request_schema)}}}}}};
    Json ok_resp = {{"description", "Success"}};
    if (!r.response_schema.empty())
      ok_resp["content"] = {{"application/json", {{"schema", response_schema(r.response_schema)}}}};
    Json problem = {
        {"description", "Error"},
        {"content", {{"application/problem+json", {{"schema", schema_ref("Problem")}}}}}};
    op["responses"] = {{std::to_string(r.success_status), ok_resp}, {"default", problem}};
    if (r.other_success_status) {
      Json other_resp = ok_resp;
      if (!r.other_response_schema.empty())
        other_resp["content"] = {
            {"application/json", {{"schema", response_schema(r.other_response_schema)}}}};
      op["responses"][std::to_string(*r.other_success_status)] = other_resp;
    }
    if (r.access == Access::kPublic)
      op["security"] = Json::array();
    else
      op["x-gpuplane-permission"] = r.access == Access::kPermission
                                        ? std::string(iam::permission_name(r.permission))
                                        : std::string("authenticated");
    std::string method = r.method;
    std::transform(method.begin(), method.end(), method.begin(), ::tolower);
    paths[r.pattern][method] = op;
  }
  return {{"openapi", "3.1.0"},
          {"info", {{"title", "gpuplane API"}, {"version", "0.1.0"}}},
          {"paths", paths},
          {"components",
           {{"schemas", schemas()},
            {"securitySchemes", {{"bearer", {{"type", "http"}, {"scheme", "bearer"}}}}}}},
          {"security", {{{"bearer", Json::array()}}}}};
}

}  // namespace gp::api
