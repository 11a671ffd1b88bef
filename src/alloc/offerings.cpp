// Offerings: the operator's service catalog, each a tier and a shape per unit.
#include <fmt/format.h>

#include "alloc/alloc.h"
#include "alloc/internal.h"
#include "common/env.h"
#include "sla/standing.h"
#include "store/record_row.h"
#include "vm/vm.h"

namespace gp::alloc {

namespace {

// The vGPU type one unit of a mig or shared offering is on `model`, delivered as a VM.
Result<const vm::VgpuType*> vgpu_of(const Offering& o, const std::string& model) {
  return o.tier == Tier::kMig ? vm::vgpu_for_mig(model, o.mig_profile)
                              : vm::vgpu_for_share(model, o.milli);
}

}  // namespace

std::optional<Json> Offering::vm_json() const {
  if (delivery != "vm") return std::nullopt;
  Json types = Json::object();
  if (tier == Tier::kMig || tier == Tier::kShared)
    for (const std::string& m : models)
      if (auto t = vgpu_of(*this, m)) types[m] = (*t)->name;
  return Json{{"vcpus", vm_vcpus}, {"memory_mib", vm_memory_mib}, {"vgpu_types", types}};
}

std::optional<Json> Offering::container_json() const {
  if (delivery != "container" || (unit_cpu_millis <= 0 && unit_memory_mib <= 0))
    return std::nullopt;
  return Json{{"cpu_millis", unit_cpu_millis}, {"memory_mib", unit_memory_mib}};
}

Json Offering::to_json() const { return json_of_fields(*this); }

namespace {

// delivery and, for "vm", the VM's shape per unit; MIG and shared units need a vGPU type on every
// model the offering names.
Result<void> parse_delivery(Offering& o, const Json* shape, const Json* container) {
  if (o.delivery == "container") {
    if (shape) return fail(Error::invalid("vm applies to delivery vm, not container"));
    if (container) {
      ObjectReader r(*container, "container");
      o.unit_cpu_millis = r.optional_integer("cpu_millis", 1, int64_t{1} << 30).value_or(0);
      o.unit_memory_mib = r.optional_integer("memory_mib", 16, int64_t{16} << 20).value_or(0);
      GP_TRY_VOID(r.finish());
    }
    return ok();
  }
  if (container) return fail(Error::invalid("container applies to delivery container, not vm"));
  if (o.delivery != "vm")
    return fail(
        Error::invalid(fmt::format("unknown delivery \"{}\"; one of container, vm", o.delivery)));
  if (!shape) return fail(Error::invalid("a vm offering needs vm: {vcpus, memory_mib}"));
  ObjectReader r(*shape, "vm");
  o.vm_vcpus = static_cast<int>(r.integer("vcpus", 1, 1024));
  o.vm_memory_mib = r.integer("memory_mib", 256, int64_t{16} << 20);
  GP_TRY_VOID(r.finish());
  if (o.tier == Tier::kMig || o.tier == Tier::kShared) {
    if (o.models.empty())
      return fail(Error::invalid("a vm offering of tier mig or shared needs its GPU models"));
    for (const std::string& m : o.models) GP_TRY(vgpu_of(o, m));
  }
  return ok();
}

}  // namespace

Result<Offering> parse_offering(const Json& body) {
  ObjectReader r(body, "offering");
  Offering o;
  o.name = r.string("name", 63);
  std::string tier = r.string("tier", 32);
  o.models = detail::read_models(r, "models");
  auto gpus = r.optional_integer("gpus", 1, 64);
  o.mig_profile = r.optional_string("mig_profile", 32).value_or("");
  o.milli = static_cast<int>(r.optional_integer("milli", 1, 1000).value_or(0));
  o.description = r.optional_string("description", 500).value_or("");
  o.delivery = r.optional_string("delivery", 16).value_or("container");
  const Json* vm_shape = r.optional_object("vm");
  const Json* container_shape = r.optional_object("container");
  GP_TRY_VOID(r.finish());
  GP_TRY_VOID(validate_dns_label("name", o.name));
  auto t = sched::parse_tier(tier);
  if (!t) {
    return fail(Error::invalid(fmt::format(
        "unknown tier \"{}\"; one of dedicated-pool, dedicated-node, dedicated-gpu, mig, shared",
        tier)));
  }
  o.tier = *t;
  const bool gpu_tier = o.tier == Tier::kDedicatedGpu || o.tier == Tier::kDedicatedNode ||
                        o.tier == Tier::kDedicatedPool;
  if (gpus && !gpu_tier) {
    return fail(Error::invalid(fmt::format("gpus applies to dedicated tiers, not {}", tier)));
  }
  o.gpus = gpu_tier ? static_cast<int>(gpus.value_or(o.tier == Tier::kDedicatedGpu ? 1 : 8)) : 0;
  if (o.tier == Tier::kMig) {
    if (o.mig_profile.empty()) return fail(Error::invalid("a mig offering needs mig_profile"));
    if (o.models.empty()) return fail(Error::invalid("a mig offering needs its GPU models"));
    for (const std::string& m : o.models) {
      const vocab::MigCatalog* catalog = GP_TRY(vocab::mig_catalog(m));
      if (!catalog->find(o.mig_profile)) {
        return fail(Error::invalid(fmt::format("{} has no MIG profile \"{}\"", m, o.mig_profile)));
      }
    }
  } else if (!o.mig_profile.empty()) {
    return fail(Error::invalid(fmt::format("mig_profile applies to tier mig, not {}", tier)));
  }
  if (o.tier == Tier::kShared && o.milli == 0) {
    return fail(Error::invalid("a shared offering needs milli (1..1000 per share)"));
  }
  if (o.tier != Tier::kShared && o.milli != 0) {
    return fail(Error::invalid(fmt::format("milli applies to tier shared, not {}", tier)));
  }
  GP_TRY_VOID(parse_delivery(o, vm_shape, container_shape));
  return o;
}

namespace {

const std::string kOfferingColumns = store::columns_of<Offering>();
Result<Offering> offering_from(const store::Row& row) { return store::read_row<Offering>(row); }

}  // namespace

Result<Offering> create_offering(store::Tx& tx, const Env& w, Offering o) {
  o.id = w.ids.next("off");
  o.created_at = w.now();
  o.version = 1;
  auto r = tx.exec(fmt::format("INSERT INTO offerings ({}) VALUES ({})", kOfferingColumns,
                               store::placeholders_of<Offering>()),
                   store::params_of(o));
  if (!r) {
    if (r.error().code == ErrorCode::kConflict)
      return fail(Error::conflict(fmt::format("an offering named {} exists", o.name)));
    return fail(r.error());
  }
  return o;
}

Result<std::optional<Offering>> find_offering(store::Tx& tx, std::string_view id_or_name) {
  auto row = GP_TRY(tx.query_one(
      fmt::format("SELECT {} FROM offerings WHERE id = ? OR name = ?", kOfferingColumns),
      {std::string(id_or_name), std::string(id_or_name)}));
  if (!row) return std::optional<Offering>{};
  return std::optional<Offering>(GP_TRY(offering_from(*row)));
}

Result<std::vector<Offering>> list_offerings(store::Tx& tx) {
  std::vector<Offering> out;
  for (const auto& row :
       GP_TRY(tx.query(fmt::format("SELECT {} FROM offerings ORDER BY name", kOfferingColumns))))
    out.push_back(GP_TRY(offering_from(row)));
  return out;
}

Result<std::map<std::string, std::string, std::less<>>> offering_names(store::Tx& tx) {
  std::map<std::string, std::string, std::less<>> out;
  for (const auto& row : GP_TRY(tx.query("SELECT id, name FROM offerings")))
    out.emplace(row.text(0), row.text(1));
  return out;
}

Result<void> delete_offering(store::Tx& tx, const std::string& id) {
  auto inuse =
      GP_TRY(tx.query_one("SELECT COUNT(*) FROM allocations WHERE offering_id = ? AND state IN "
                          "('pending','placed','active')",
                          {id}));
  if (inuse->integer(0) > 0) {
    return fail(Error::conflict(
        fmt::format("the offering is used by {} live allocation(s)", inuse->integer(0))));
  }
  // Ended allocations keep their history; they drop the reference.
  GP_TRY(tx.exec("UPDATE allocations SET offering_id = NULL WHERE offering_id = ?", {id}));
  GP_TRY_VOID(sla::delete_offering_sla(tx, id));
  GP_TRY(tx.exec("DELETE FROM offerings WHERE id = ?", {id}));
  return ok();
}

}  // namespace gp::alloc
