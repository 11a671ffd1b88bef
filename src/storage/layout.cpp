// The tenant volume layout: which directories exist, who owns them, with which modes.
#include <fmt/format.h>

#include <set>

#include "storage/storage.h"

namespace gp::storage {

std::string_view volume_kind_name(VolumeKind kind) {
  switch (kind) {
    case VolumeKind::kDatasets:
      return "datasets";
    case VolumeKind::kModels:
      return "models";
    case VolumeKind::kCheckpoints:
      return "checkpoints";
    case VolumeKind::kScratch:
      return "scratch";
  }
  return "?";
}

std::optional<VolumeKind> parse_volume_kind(std::string_view name) {
  for (auto k : kAllVolumeKinds)
    if (volume_kind_name(k) == name) return k;
  return std::nullopt;
}

std::string identity_text(const TreeIdentity& identity) {
  return Json{{"tenant_id", identity.tenant_id},
              {"project_id", identity.project_id},
              {"generation", identity.generation}}
      .dump();
}

Result<TreeIdentity> parse_identity(std::string_view text) {
  auto j = GP_TRY(parse_json(text));
  if (!j.is_object()) return fail(Error::invalid("a tree identity is a JSON object"));
  ObjectReader r(j, "identity");
  TreeIdentity id;
  id.tenant_id = r.string("tenant_id", 128);
  id.project_id = r.optional_string("project_id", 128).value_or("");
  id.generation = r.optional_string("generation", 128).value_or("");
  GP_TRY_VOID(r.finish());
  if (id.tenant_id.empty() || id.project_id.empty() != id.generation.empty())
    return fail(Error::invalid("a tree identity names a tenant, and a project with a generation"));
  return id;
}

std::string to_string(const TreeIdentity& identity) {
  if (identity.project_id.empty()) return fmt::format("tenant {}", identity.tenant_id);
  return fmt::format("tenant {} project {} generation {}", identity.tenant_id, identity.project_id,
                     identity.generation);
}

Result<std::vector<PlannedDir>> plan_layout(const TenantVolumes& v) {
  GP_TRY_VOID(validate_dns_label("tenant", v.tenant));
  if (v.ids.count < 2 || v.ids.first < 1000 || uint64_t{v.ids.first} + v.ids.count - 1 > kMaxId)
    return fail(Error::invalid(
        fmt::format("tenant '{}': id range {}+{} is invalid", v.tenant, v.ids.first, v.ids.count)));
  std::vector<PlannedDir> out;
  out.push_back({.path = v.tenant,
                 .uid = v.ids.first,
                 .gid = v.ids.first,
                 .mode = 0750,
                 .identity = TreeIdentity{.tenant_id = v.tenant_id}});
  std::set<std::string_view> names;
  std::set<uint32_t> ids;
  for (const auto& p : v.projects) {
    GP_TRY_VOID(validate_dns_label("project", p.project));
    if (!names.insert(p.project).second)
      return fail(Error::invalid(fmt::format("project '{}' is listed twice", p.project)));
    if (!v.ids.contains(p.id) || p.id == v.ids.first)
      return fail(Error::invalid(
          fmt::format("project '{}': id {} is not one of the tenant's project ids {}-{}", p.project,
                      p.id, v.ids.first + 1, v.ids.last())));
    if (!ids.insert(p.id).second)
      return fail(
          Error::invalid(fmt::format("project '{}': id {} is used twice", p.project, p.id)));
    std::set<VolumeKind> limited;
    for (const auto& [kind, bytes] : p.size_limits) {
      if (!limited.insert(kind).second)
        return fail(Error::invalid(fmt::format("project '{}': two size limits for {}", p.project,
                                               volume_kind_name(kind))));
      if (bytes < 1024 * 1024)
        return fail(
            Error::invalid(fmt::format("project '{}': size limit for {} must be at least 1 MiB",
                                       p.project, volume_kind_name(kind))));
    }
    std::string base = v.tenant + "/" + p.project;
    out.push_back(
        {.path = base,
         .uid = p.id,
         .gid = p.id,
         .mode = 02770,
         .identity = TreeIdentity{
             .tenant_id = v.tenant_id, .project_id = p.project_id, .generation = p.generation}});
    for (auto kind : kAllVolumeKinds) {
      PlannedDir d{.path = base + "/" + std::string(volume_kind_name(kind)),
                   .uid = p.id,
                   .gid = p.id,
                   .mode = static_cast<mode_t>(kind == VolumeKind::kScratch ? 03770 : 02770),
                   .quota_project = p.id * 4 + static_cast<uint32_t>(kind)};
      for (const auto& [k, bytes] : p.size_limits)
        if (k == kind) d.size_limit = bytes;
      out.push_back(std::move(d));
    }
  }
  return out;
}

}  // namespace gp::storage
