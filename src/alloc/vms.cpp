// VMs: allocations of vm offerings, one libvirt domain per node they use. The control plane keeps
// the tenant's wishes (desired power state, reboots) and the node agent's reports; the agent
// does the work (agent/vms.h, docs/vms.md).
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "alloc/alloc.h"
#include "alloc/internal.h"
#include "common/crypto.h"
#include "common/env.h"
#include "fleet/fleet.h"
#include "network/records.h"
#include "storage/records.h"
#include "storage/storage.h"
#include "store/record_row.h"
#include "vm/vm.h"

namespace gp::alloc {
namespace {

const std::string kVmColumns = store::columns_of<Vm>();

// What an agent may report of a VM: libvirt's domain states (vm::to_string), "absent" (not
// defined yet) and "failed" (provisioning refused, with the reason).
constexpr std::array<std::string_view, 8> kReportedStates = {
    "running", "shut-off", "paused", "shutting-down", "crashed", "other", "absent", "failed"};

Result<Vm> vm_from(const store::Row& row) { return store::read_row<Vm>(row); }

// In QEMU's locally administered range 52:54:00.
std::string random_mac(const Random& random) {
  const std::string h = hex_encode(random.bytes(3));
  return fmt::format("52:54:00:{}:{}:{}", h.substr(0, 2), h.substr(2, 2), h.substr(4, 2));
}

Result<std::optional<Vm>> find_on_node(store::Tx& tx, const std::string& allocation_id,
                                       const std::string& node_id) {
  auto row = GP_TRY(tx.query_one(
      fmt::format("SELECT {} FROM vms WHERE allocation_id = ? AND node_id = ?", kVmColumns),
      {allocation_id, node_id}));
  if (!row) return std::optional<Vm>{};
  return std::optional<Vm>{GP_TRY(vm_from(*row))};
}

// The VM `id` (or domain) of the tenant, refused (conflict) once its allocation has ended.
Result<Vm> live_vm(store::Tx& tx, const tenancy::TenantScope& scope, std::string_view id) {
  auto found = GP_TRY(find_vm(tx, scope, id));
  if (!found) return fail(Error::not_found(fmt::format("VM {} not found", id)));
  if (found->state == "destroyed")
    return fail(
        Error::conflict(fmt::format("VM {} is destroyed: its allocation has ended", found->id)));
  auto a = GP_TRY(detail::load(tx, found->allocation_id));
  if (!a || !live(a->state))
    return fail(
        Error::conflict(fmt::format("VM {}'s allocation {} has ended; its VM is being destroyed",
                                    found->id, found->allocation_id)));
  return std::move(*found);
}

// What a lookup found; a record the allocation refers to must be there.
template <typename T>
Result<T> required(Result<std::optional<T>> found, std::string_view what, const std::string& id) {
  if (!found) return fail(found.error());
  if (!*found) return fail(Error::internal(fmt::format("{} {} is missing", what, id)));
  return std::move(**found);
}

}  // namespace

Json Vm::to_json() const { return json_of_fields(*this); }

Json Vm::console_json() const {
  return {{"vm", id},
          {"domain", domain},
          {"state", state},
          {"requested_seq", console_seq},
          {"captured_seq", console_captured_seq},
          {"captured_at", console_captured_at ? Json(detail::ts(*console_captured_at)) : Json()},
          {"current", console_captured_seq >= console_seq && console_captured_at.has_value()},
          {"text", console_text}};
}

Result<Page<Vm>> list_vms(store::Tx& tx, const tenancy::TenantScope& scope,
                          const PageRequest& page) {
  std::vector<Vm> items;
  for (const auto& row : GP_TRY(tx.query(
           fmt::format("SELECT {} FROM vms WHERE tenant_id = ? AND id > ? ORDER BY id LIMIT ?",
                       kVmColumns),
           {scope.tenant_id(), page.after.value_or(""), int64_t{page.limit} + 1})))
    items.push_back(GP_TRY(vm_from(row)));
  return make_page(std::move(items), page);
}

Result<std::optional<Vm>> find_vm(store::Tx& tx, const tenancy::TenantScope& scope,
                                  std::string_view id) {
  auto row = GP_TRY(tx.query_one(
      fmt::format("SELECT {} FROM vms WHERE tenant_id = ? AND (id = ? OR domain = ?)", kVmColumns),
      {scope.tenant_id(), std::string(id), std::string(id)}));
  if (!row) return std::optional<Vm>{};
  return std::optional<Vm>{GP_TRY(vm_from(*row))};
}

Result<Vm> vm_action(store::Tx& tx, const Env& w, const tenancy::TenantScope& scope,
                     std::string_view id, std::string_view action) {
  Vm v = GP_TRY(live_vm(tx, scope, id));
  if (action == "start") {
    v.desired = "running";
  } else if (action == "stop") {
    v.desired = "stopped";
  } else if (action == "reboot") {
    if (v.desired != "running")
      return fail(
          Error::conflict(fmt::format("VM {} is stopped; start it instead of rebooting it", v.id)));
    ++v.reboot_seq;
  } else {
    return fail(Error::invalid(
        fmt::format("action: unknown action \"{}\"; one of start, stop, reboot", action)));
  }
  v.updated_at = w.now();
  ++v.version;
  GP_TRY(tx.exec(
      "UPDATE vms SET desired = ?, reboot_seq = ?, updated_at = ?, version = ? WHERE id = ?",
      {v.desired, v.reboot_seq, v.updated_at, v.version, v.id}));
  return v;
}

Result<Vm> vm_console_request(store::Tx& tx, const Env& w, const tenancy::TenantScope& scope,
                              std::string_view id) {
  Vm v = GP_TRY(live_vm(tx, scope, id));
  ++v.console_seq;
  v.updated_at = w.now();
  ++v.version;
  GP_TRY(tx.exec("UPDATE vms SET console_seq = ?, updated_at = ?, version = ? WHERE id = ?",
                 {v.console_seq, v.updated_at, v.version, v.id}));
  return v;
}

Result<Json> vm_assignment(store::Tx& tx, const Env& w, const Allocation& a,
                           const std::string& node_id, bool stopping) {
  if (!a.offering_id || live(a.state) == stopping || a.placement.is_null()) return Json(nullptr);
  auto offering = GP_TRY(find_offering(tx, *a.offering_id));
  if (!offering || offering->delivery != "vm") return Json(nullptr);

  // The GPUs of this node: whole ones are passed through, MIG and shared grants become vGPUs.
  const std::string model = a.placement.value("model", "");
  Json passthrough = Json::array(), vgpus = Json::array();
  int grants = 0;
  for (const auto& g : a.placement.value("gpus", Json::array())) {
    if (g.value("node", "") != node_id) continue;
    ++grants;
    const std::string pci =
        GP_TRY(required(fleet::find_gpu(tx, g.value("gpu", "")), "GPU", g.value("gpu", "")))
            .info.pci_bus_id;
    if (a.request.tier == Tier::kMig || a.request.tier == Tier::kShared) {
      auto type =
          a.request.tier == Tier::kMig
              ? vm::vgpu_for_mig(model, g.contains("mig") ? g["mig"].value("profile", "") : "")
              : vm::vgpu_for_share(model, g.value("milli", 0));
      if (!type) return fail(type.error());
      vgpus.push_back({{"gpu", pci}, {"type", (*type)->name}});
    } else {
      passthrough.push_back(pci);
    }
  }
  if (grants == 0) return Json(nullptr);
  const bool whole = a.request.tier != Tier::kMig && a.request.tier != Tier::kShared;
  const int units = whole ? std::max(1, grants / std::max(1, offering->gpus)) : grants;

  auto existing = GP_TRY(find_on_node(tx, a.id, node_id));
  Vm v;
  if (existing) {
    v = std::move(*existing);
    if (stopping) v.desired = "stopped";
  } else if (stopping) {
    return Json(nullptr);  // never made: nothing to stop
  } else {
    v.id = w.ids.next("vm");
    v.allocation_id = a.id;
    v.node_id = node_id;
    v.tenant_id = a.tenant_id;
    v.project_id = a.project_id;
    v.domain = vm::domain_name(a.id);
    v.uuid = w.random.uuid();
    v.mac = random_mac(w.random);
    v.created_at = v.updated_at = w.now();
    GP_TRY(tx.exec(
        "INSERT INTO vms (id, allocation_id, node_id, tenant_id, project_id, domain, uuid, mac, "
        "desired, reboot_seq, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, "
        "0, 'pending', ?, ?)",
        {v.id, v.allocation_id, v.node_id, v.tenant_id, v.project_id, v.domain, v.uuid, v.mac,
         v.desired, v.created_at, v.updated_at}));
  }
  // The project's volumes, as virtiofs shares tagged by kind, while they are not being deleted;
  // paths are relative to the node's storage root (storage::plan_layout's layout).
  const std::string tenant =
      GP_TRY(required(tenancy::find_tenant(tx, a.tenant_id), "tenant", a.tenant_id)).name;
  Json volumes = Json::array();
  if (auto name = GP_TRY(storage::active_volumes_name(tx, a.tenant_id, a.project_id)))
    for (storage::VolumeKind kind : storage::kAllVolumeKinds) {
      const std::string tag(storage::volume_kind_name(kind));
      volumes.push_back({{"tag", tag}, {"path", fmt::format("{}/{}/{}", tenant, *name, tag)}});
    }
  Json segment = nullptr;
  if (auto s = GP_TRY(network::load_segment(tx, a.tenant_id))) segment = json_of_fields(*s);
  return Json{
      {"id", v.id},
      {"domain", v.domain},
      {"uuid", v.uuid},
      {"mac", v.mac},
      {"tenant", tenant},
      {"project",
       GP_TRY(required(tenancy::find_project(tx, tenancy::TenantScope(a.tenant_id), a.project_id),
                       "project", a.project_id))
           .name},
      {"vcpus", int64_t{offering->vm_vcpus} * units},
      {"memory_mib", offering->vm_memory_mib * units},
      {"desired", v.desired},
      {"reboot_seq", v.reboot_seq},
      {"console_seq", v.console_seq},
      {"console_captured_seq", v.console_captured_seq},
      {"passthrough", passthrough},
      {"vgpus", vgpus},
      {"segment", segment},
      {"volumes", volumes},
      {"ssh_keys", GP_TRY(tenant_ssh_keys(tx, a.tenant_id))}};
}

Result<std::vector<VmReport>> parse_vm_reports(const Json& j) {
  if (!j.is_array()) return fail(Error::invalid("vms: an array is required"));
  if (j.size() > 256) return fail(Error::invalid("vms: at most 256 reports"));
  std::vector<VmReport> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string what = fmt::format("vms[{}]", i);
    if (!j[i].is_object()) return fail(Error::invalid(what + ": an object is required"));
    ObjectReader r(j[i], what);
    VmReport v;
    v.domain = r.string("domain", 64);
    v.state = r.string("state", 32);
    v.error = r.optional_string("error", 2000).value_or("");
    v.addresses = r.optional_string_array("addresses", 16, 64).value_or(std::vector<std::string>{});
    if (const Json* console = r.optional_object("console")) {
      ObjectReader c(*console, what + ".console");
      v.console = VmReport::Console{.seq = c.integer("seq", 1, INT64_MAX),
                                    .text = c.string("text", kMaxConsoleBytes)};
      if (auto done = c.finish(); !done) return fail(done.error());
    }
    if (std::ranges::find(kReportedStates, v.state) == kReportedStates.end())
      r.reject("state",
               "one of running, shut-off, paused, shutting-down, crashed, other, absent, failed");
    GP_TRY_VOID(r.finish());
    out.push_back(std::move(v));
  }
  return out;
}

Result<Json> apply_vm_reports(store::Tx& tx, const Env& w, const std::string& node_id,
                              const std::vector<VmReport>& reports) {
  Json changes = Json::array();
  const int64_t now = w.now();
  for (const auto& row : GP_TRY(tx.query(
           fmt::format(
               "SELECT {}, (SELECT state FROM allocations a WHERE a.id = vms.allocation_id) "
               "FROM vms WHERE node_id = ? AND state <> 'destroyed' ORDER BY id",
               kVmColumns),
           {node_id}))) {
    Vm v = GP_TRY(vm_from(row));
    const bool ended = !parse_state(row.text(20)).transform(live).value_or(false);
    auto it = std::ranges::find(reports, v.domain, &VmReport::domain);
    std::string state = v.state, error = v.error;
    std::vector<std::string> addresses = v.addresses;
    if (it != reports.end()) {
      state = it->state;
      error = it->error;
      addresses = it->addresses;
    } else if (ended) {
      // The node was told the allocation ended and no longer reports its VM: torn down.
      state = "destroyed";
      error.clear();
      addresses.clear();
    } else {
      continue;  // assigned since the agent's last round
    }
    // A capture answers the newest request it knew of; an older one than the VM holds is stale.
    if (it != reports.end() && it->console && it->console->seq > v.console_captured_seq &&
        it->console->seq <= v.console_seq)
      GP_TRY(tx.exec(
          "UPDATE vms SET console_captured_seq = ?, console_captured_at = ?, console_text = ? "
          "WHERE id = ?",
          {it->console->seq, now, it->console->text, v.id}));
    if (state == v.state && error == v.error && addresses == v.addresses) continue;
    GP_TRY(tx.exec(
        "UPDATE vms SET state = ?, error = ?, addresses = ?, updated_at = ?, version = version + "
        "1 WHERE id = ?",
        {state, error, Json(addresses).dump(), now, v.id}));
    if (state != v.state) {
      Json c = {{"vm", v.id}, {"domain", v.domain}, {"from", v.state}, {"to", state}};
      if (!error.empty()) c["error"] = error;
      changes.push_back(std::move(c));
    }
  }
  return changes;
}

Result<std::vector<std::string>> parse_ssh_keys(const Json& body) {
  ObjectReader r(body, "ssh keys");
  auto keys = r.optional_string_array("keys", vm::kMaxSshKeys, vm::kMaxSshKeyBytes);
  if (!keys && !r.has("keys")) r.reject("keys", "required: a list of OpenSSH public key lines");
  GP_TRY_VOID(r.finish());
  for (size_t i = 0; i < keys->size(); ++i) GP_TRY_VOID(vm::check_ssh_public_key((*keys)[i], i));
  std::vector<std::string> sorted = *keys;
  std::ranges::sort(sorted);
  if (std::ranges::adjacent_find(sorted) != sorted.end())
    return fail(Error::invalid("keys: a key is listed twice"));
  return *keys;
}

Result<std::vector<std::string>> tenant_ssh_keys(store::Tx& tx, const std::string& tenant_id) {
  std::vector<std::string> keys;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT public_key FROM tenant_ssh_keys WHERE tenant_id = ? ORDER BY seq", {tenant_id})))
    keys.push_back(row.text(0));
  return keys;
}

Result<void> set_tenant_ssh_keys(store::Tx& tx, const std::string& tenant_id,
                                 const std::vector<std::string>& keys) {
  GP_TRY(tx.exec("DELETE FROM tenant_ssh_keys WHERE tenant_id = ?", {tenant_id}));
  for (size_t i = 0; i < keys.size(); ++i)
    GP_TRY(tx.exec("INSERT INTO tenant_ssh_keys (tenant_id, seq, public_key) VALUES (?, ?, ?)",
                   {tenant_id, static_cast<int64_t>(i), keys[i]}));
  return ok();
}

}  // namespace gp::alloc
