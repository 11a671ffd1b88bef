// Storage's rows in the store. See records.h.
#include "storage/records.h"

#include <fmt/format.h>

#include <algorithm>

#include "store/record_row.h"

namespace gp::storage {
namespace {

const std::string kVolumeCols = store::columns_of<StoredVolumes>();

const std::string kDeletionCols = store::columns_of<Deletion>();
Result<Deletion> deletion_from(const store::Row& row) { return store::read_row<Deletion>(row); }

Result<std::vector<Deletion>> deletions_where(store::Tx& tx, std::string_view where,
                                              const store::Params& params) {
  std::vector<Deletion> out;
  for (const auto& row : GP_TRY(tx.query(
           fmt::format("SELECT {} FROM storage_deletions WHERE {}", kDeletionCols, where), params)))
    out.push_back(GP_TRY(deletion_from(row)));
  return out;
}

Result<Deletion> insert_deletion(store::Tx& tx, Deletion d) {
  d.state = DeletionState::kScheduled;
  d.done_at.reset();
  d.done_by.reset();
  GP_TRY(tx.exec(fmt::format("INSERT INTO storage_deletions ({}) VALUES ({})", kDeletionCols,
                             store::placeholders_of<Deletion>()),
                 store::params_of(d)));
  auto stored = GP_TRY(find_deletion(tx, d.id));
  if (!stored) return fail(Error::internal("a storage deletion vanished while it was scheduled"));
  return *stored;
}

}  // namespace

// ---- Id blocks ----

Result<std::optional<IdRange>> load_ids(store::Tx& tx, const std::string& tenant_id) {
  auto row = GP_TRY(tx.query_one(
      "SELECT first_id, count FROM tenant_storage_ids WHERE tenant_id = ?", {tenant_id}));
  if (!row) return std::optional<IdRange>{};
  return std::optional<IdRange>{
      IdRange{static_cast<uint32_t>(row->integer(0)), static_cast<uint32_t>(row->integer(1))}};
}

Result<std::map<std::string, IdRange>> all_ids(store::Tx& tx) {
  std::map<std::string, IdRange> out;
  for (const auto& row :
       GP_TRY(tx.query("SELECT tenant_id, first_id, count FROM tenant_storage_ids")))
    out.emplace(row.text(0), IdRange{static_cast<uint32_t>(row.integer(1)),
                                     static_cast<uint32_t>(row.integer(2))});
  return out;
}

Result<IdRange> ensure_ids(store::Tx& tx, const IdPoolConfig& pool, const std::string& tenant_id,
                           const std::string& tenant_name, int64_t now_micros) {
  if (auto have = GP_TRY(load_ids(tx, tenant_id))) return *have;
  // The other tenants' blocks, each labelled with its tenant's id: this tenant has none (above)
  // and a block is one tenant's, so only the ranges count (a tenant id is never a tenant name).
  std::vector<TenantIds> existing;
  for (const auto& row : GP_TRY(
           tx.query("SELECT tenant_id, first_id, count FROM tenant_storage_ids ORDER BY first_id")))
    existing.push_back(
        {row.text(0),
         {static_cast<uint32_t>(row.integer(1)), static_cast<uint32_t>(row.integer(2))}});
  auto ids = GP_TRY(allocate_ids(pool, existing, tenant_name));
  GP_TRY(tx.exec(
      "INSERT INTO tenant_storage_ids (tenant_id, first_id, count, created_at) VALUES (?,?,?,?)",
      {tenant_id, int64_t{ids.range.first}, int64_t{ids.range.count}, now_micros}));
  return ids.range;
}

// ---- Project volumes ----

Result<SizeLimits> parse_size_limits(const Json& j, std::string_view where) {
  if (!j.is_object()) return fail(Error::invalid(fmt::format("{}: must be an object", where)));
  SizeLimits out;
  for (const auto& [key, value] : j.items()) {
    auto kind = parse_volume_kind(key);
    if (!kind)
      return fail(Error::invalid(fmt::format(
          "{}.{}: unknown volume (datasets, models, checkpoints or scratch)", where, key)));
    if (!value.is_number_integer() || value.get<int64_t>() < kMinSizeLimit ||
        value.get<int64_t>() > kMaxSizeLimit)
      return fail(Error::invalid(
          fmt::format("{}.{}: must be an integer number of bytes, 1 MiB to 2^62", where, key)));
    out.emplace_back(*kind, value.get<uint64_t>());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Json size_limits_json(const SizeLimits& limits) {
  Json j = Json::object();
  for (const auto& [kind, bytes] : limits) j[std::string(volume_kind_name(kind))] = bytes;
  return j;
}

Result<std::vector<StoredVolumes>> load_volumes(store::Tx& tx, const std::string& tenant_id) {
  return store::read_records<StoredVolumes>(
      tx,
      fmt::format("SELECT {} FROM project_volumes WHERE tenant_id = ? ORDER BY project_name, "
                  "project_id",
                  kVolumeCols),
      {tenant_id});
}

TenantVolumes active_volumes(const std::string& tenant_id, const std::string& tenant_name,
                             const IdRange& ids, const std::vector<StoredVolumes>& stored) {
  TenantVolumes tv{.tenant = tenant_name, .ids = ids, .projects = {}, .tenant_id = tenant_id};
  for (const auto& s : stored)
    if (s.state == "active") tv.projects.push_back(s.volumes());
  return tv;
}

Result<void> insert_volumes(store::Tx& tx, const std::string& tenant_id, const ProjectVolumes& v,
                            int64_t now_micros) {
  if (v.generation.empty()) return fail(Error::internal("volumes need a generation"));
  GP_TRY(tx.exec(
      "INSERT INTO project_volumes (tenant_id, project_id, project_name, uid, size_limits, "
      "state, created_at, updated_at, version, generation) VALUES (?,?,?,?,?,'active',?,?,1,?)",
      {tenant_id, v.project_id, v.project, int64_t{v.id}, size_limits_json(v.size_limits).dump(),
       now_micros, now_micros, v.generation}));
  return ok();
}

Result<void> update_size_limits(store::Tx& tx, const std::string& tenant_id,
                                const std::string& project_id, const SizeLimits& limits,
                                int64_t version, int64_t now_micros) {
  auto n = GP_TRY(tx.exec(
      "UPDATE project_volumes SET size_limits = ?, updated_at = ?, version = ? WHERE "
      "tenant_id = ? AND project_id = ? AND version = ? AND state = 'active'",
      {size_limits_json(limits).dump(), now_micros, version + 1, tenant_id, project_id, version}));
  if (n != 1) return fail(Error::conflict("the volumes changed meanwhile; read them again"));
  return ok();
}

Result<std::optional<std::string>> active_volumes_name(store::Tx& tx, const std::string& tenant_id,
                                                       const std::string& project_id) {
  auto row = GP_TRY(tx.query_one(
      "SELECT project_name FROM project_volumes WHERE tenant_id = ? AND project_id = ? AND "
      "state = 'active'",
      {tenant_id, project_id}));
  if (!row) return std::optional<std::string>();
  return std::optional<std::string>(row->text(0));
}

Result<void> check_project_deletable(store::Tx& tx, const std::string& tenant_id,
                                     const std::string& project_id) {
  if (auto name = GP_TRY(active_volumes_name(tx, tenant_id, project_id)))
    return fail(Error::conflict(
        fmt::format("project '{}' has volumes: delete them first (DELETE "
                    ".../projects/{}/volumes schedules its tree for removal), then the project",
                    *name, *name)));
  return ok();
}

// ---- Deletions ----

Result<Deletion> schedule_project_deletion(store::Tx& tx, const std::string& id,
                                           const std::string& tenant_id,
                                           const std::string& tenant_name,
                                           const ProjectVolumes& volumes, const std::string& reason,
                                           const std::string& who, int64_t now_micros,
                                           int64_t due_micros) {
  auto n = GP_TRY(tx.exec(
      "UPDATE project_volumes SET state = 'deleting', updated_at = ?, version = version + 1 "
      "WHERE tenant_id = ? AND project_id = ? AND generation = ? AND state = 'active'",
      {now_micros, tenant_id, volumes.project_id, volumes.generation}));
  if (n != 1) return fail(Error::conflict("the volumes are not active any more"));
  return insert_deletion(tx, {.id = id,
                              .tenant_id = tenant_id,
                              .tenant_name = tenant_name,
                              .project_name = volumes.project,
                              .project_id = volumes.project_id,
                              .generation = volumes.generation,
                              .reason = reason,
                              .requested_by = who,
                              .requested_at = now_micros,
                              .due_at = due_micros});
}

Result<Deletion> schedule_tenant_deletion(store::Tx& tx, const std::string& id,
                                          const std::string& tenant_id,
                                          const std::string& tenant_name, const std::string& reason,
                                          const std::string& who, int64_t now_micros,
                                          int64_t due_micros) {
  GP_TRY(tx.exec(
      "UPDATE project_volumes SET state = 'deleting', updated_at = ?, version = version + 1 "
      "WHERE tenant_id = ? AND state = 'active'",
      {now_micros, tenant_id}));
  auto existing = GP_TRY(deletions_where(
      tx, "tenant_id = ? AND project_name = '' AND state = 'scheduled'", {tenant_id}));
  if (!existing.empty()) return existing.front();
  return insert_deletion(tx, {.id = id,
                              .tenant_id = tenant_id,
                              .tenant_name = tenant_name,
                              .reason = reason,
                              .requested_by = who,
                              .requested_at = now_micros,
                              .due_at = due_micros});
}

Result<std::optional<Deletion>> find_deletion(store::Tx& tx, const std::string& id) {
  auto rows = GP_TRY(deletions_where(tx, "id = ?", {id}));
  if (rows.empty()) return std::optional<Deletion>{};
  return std::optional<Deletion>{std::move(rows.front())};
}

Result<std::vector<Deletion>> list_deletions(store::Tx& tx, const std::string& after,
                                             const std::string& state, int64_t limit) {
  return deletions_where(tx, "id > ? AND (? = '' OR state = ?) ORDER BY id LIMIT ?",
                         {after, state, state, limit});
}

Result<std::vector<Deletion>> scheduled_deletions(store::Tx& tx, const std::string& tenant_id) {
  return deletions_where(tx, "tenant_id = ? AND state = 'scheduled' ORDER BY requested_at, id",
                         {tenant_id});
}

Result<std::vector<Deletion>> due_deletions(store::Tx& tx, int64_t now_micros) {
  return deletions_where(tx, "state = 'scheduled' AND due_at <= ? ORDER BY due_at, id",
                         {now_micros});
}

Result<std::optional<StoredVolumes>> volumes_holding_path(store::Tx& tx,
                                                          const std::string& tenant_id,
                                                          const std::string& project_name,
                                                          const std::string& project_id) {
  return store::read_record<StoredVolumes>(
      tx,
      fmt::format("SELECT {} FROM project_volumes WHERE tenant_id = ? AND project_name = ? AND "
                  "project_id <> ? ORDER BY created_at",
                  kVolumeCols),
      {tenant_id, project_name, project_id});
}

Result<std::optional<uint32_t>> expected_owner(store::Tx& tx, const Deletion& d) {
  std::optional<store::Row> row;
  if (d.whole_tenant())
    row = GP_TRY(
        tx.query_one("SELECT first_id FROM tenant_storage_ids WHERE tenant_id = ?", {d.tenant_id}));
  else if (!d.project_id.empty())
    row = GP_TRY(
        tx.query_one("SELECT uid FROM project_volumes WHERE tenant_id = ? AND project_id = ? AND "
                     "generation = ?",
                     {d.tenant_id, d.project_id, d.generation}));
  if (!row) return std::optional<uint32_t>{};
  return std::optional<uint32_t>{static_cast<uint32_t>(row->integer(0))};
}

Result<std::vector<Confirmation>> confirmations(store::Tx& tx, const std::string& deletion_id) {
  std::vector<Confirmation> out;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT node_id, outcome, detail, confirmed_at FROM storage_deletion_confirmations "
           "WHERE deletion_id = ? ORDER BY confirmed_at, node_id",
           {deletion_id})))
    out.push_back({row.text(0), row.text(1), row.text(2), row.integer(3)});
  return out;
}

Result<bool> record_confirmation(store::Tx& tx, const std::string& deletion_id,
                                 const std::string& node_id, const std::string& outcome,
                                 const std::string& detail, int64_t now_micros) {
  if (GP_TRY(tx.query_one("SELECT 1 FROM storage_deletion_confirmations WHERE deletion_id = ? "
                          "AND node_id = ?",
                          {deletion_id, node_id})))
    return false;
  GP_TRY(
      tx.exec("INSERT INTO storage_deletion_confirmations (deletion_id, node_id, outcome, detail, "
              "confirmed_at) VALUES (?,?,?,?,?)",
              {deletion_id, node_id, outcome, detail, now_micros}));
  return true;
}

Result<void> complete_deletion(store::Tx& tx, const Deletion& d, const std::string& node_id,
                               int64_t now_micros) {
  GP_TRY(tx.exec(
      "UPDATE storage_deletions SET state = 'done', done_at = ?, done_by = ? WHERE id = ? AND "
      "state = 'scheduled'",
      {now_micros, node_id, d.id}));
  if (d.whole_tenant()) {
    // The whole tree is gone on every node that held it: the ids may go to another tenant.
    GP_TRY(tx.exec("DELETE FROM project_volumes WHERE tenant_id = ?", {d.tenant_id}));
    GP_TRY(tx.exec("DELETE FROM storage_holders WHERE tenant_id = ?", {d.tenant_id}));
    GP_TRY(tx.exec("DELETE FROM tenant_storage_ids WHERE tenant_id = ?", {d.tenant_id}));
  } else if (!d.project_id.empty()) {
    // That generation only: whatever else carries the name is another tree.
    GP_TRY(tx.exec(
        "DELETE FROM project_volumes WHERE tenant_id = ? AND project_id = ? AND generation = ? "
        "AND state = 'deleting'",
        {d.tenant_id, d.project_id, d.generation}));
  }
  return ok();
}

// ---- Holders ----

Result<std::vector<std::string>> holders(store::Tx& tx, const std::string& tenant_id) {
  std::vector<std::string> out;
  for (const auto& row :
       GP_TRY(tx.query("SELECT node_id FROM storage_holders WHERE tenant_id = ? ORDER BY node_id",
                       {tenant_id})))
    out.push_back(row.text(0));
  return out;
}

Result<bool> is_holder(store::Tx& tx, const std::string& tenant_id, const std::string& node_id) {
  return GP_TRY(tx.query_one("SELECT 1 FROM storage_holders WHERE tenant_id = ? AND node_id = ?",
                             {tenant_id, node_id}))
      .has_value();
}

Result<bool> record_holder(store::Tx& tx, const std::string& tenant_id, const std::string& node_id,
                           int64_t now_micros) {
  if (GP_TRY(is_holder(tx, tenant_id, node_id))) return false;
  GP_TRY(tx.exec("INSERT INTO storage_holders (tenant_id, node_id, since) VALUES (?,?,?)",
                 {tenant_id, node_id, now_micros}));
  return true;
}

// ---- Tenant keys and secrets ----

namespace {

// A stored keyring. A key made before creation times were recorded is dated by the keyring's
// last change, here where every reader gets it (rotation age, posture, status, rewrap), and
// keeps that date once the keyring is written back.
Result<Keyring> keyring_from_row(std::string_view text, int64_t updated_at) {
  auto ring = GP_TRY(keyring_from_json(GP_TRY(parse_json(text))));
  for (auto& t : ring.tenants)
    for (auto& w : t.versions)
      if (w.created_at == 0) w.created_at = updated_at;
  return ring;
}

}  // namespace

Result<Keyring> load_keyring(store::Tx& tx, const std::string& tenant_id) {
  auto row = GP_TRY(tx.query_one(
      "SELECT keyring, updated_at FROM tenant_keyrings WHERE tenant_id = ?", {tenant_id}));
  if (!row) return Keyring{};
  return keyring_from_row(row->text(0), row->integer(1));
}

Result<std::optional<KeyringRecord>> load_keyring_record(store::Tx& tx,
                                                         const std::string& tenant_id) {
  auto row = GP_TRY(
      tx.query_one("SELECT keyring, destroyed, updated_at FROM tenant_keyrings WHERE tenant_id = ?",
                   {tenant_id}));
  if (!row) return std::optional<KeyringRecord>();
  return std::optional<KeyringRecord>(
      KeyringRecord{.ring = GP_TRY(keyring_from_row(row->text(0), row->integer(2))),
                    .destroyed = row->integer(1) != 0,
                    .updated_at = row->integer(2)});
}

Result<std::vector<StoredSecret>> load_stored_secrets(store::Tx& tx, const std::string& tenant_id) {
  std::vector<StoredSecret> out;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT name, key_version, sealed FROM tenant_secrets WHERE tenant_id = ? ORDER BY name",
           {tenant_id})))
    out.push_back({row.text(0), row.integer(1), row.text(2)});
  return out;
}

Result<void> save_keyring(store::Tx& tx, const std::string& tenant_id, const Keyring& ring,
                          bool existed, int64_t now_micros) {
  if (ring.tenants.size() != 1) return fail(Error::internal("a tenant keyring holds one tenant"));
  const std::string text = to_json(ring).dump();
  const int64_t destroyed = ring.tenants[0].destroyed ? 1 : 0;
  if (existed)
    GP_TRY(tx.exec(
        "UPDATE tenant_keyrings SET keyring = ?, destroyed = ?, updated_at = ? WHERE tenant_id = ?",
        {text, destroyed, now_micros, tenant_id}));
  else
    GP_TRY(
        tx.exec("INSERT INTO tenant_keyrings (tenant_id, keyring, destroyed, updated_at) VALUES "
                "(?,?,?,?)",
                {tenant_id, text, destroyed, now_micros}));
  return ok();
}

namespace {
const std::string kSecretColumns = store::columns_of<SecretRecord>();
Result<SecretRecord> secret_from(const store::Row& row) {
  return store::read_row<SecretRecord>(row);
}
}  // namespace

Result<bool> secret_exists(store::Tx& tx, const std::string& tenant_id, const std::string& name) {
  return GP_TRY(tx.query_one("SELECT 1 FROM tenant_secrets WHERE tenant_id = ? AND name = ?",
                             {tenant_id, name}))
      .has_value();
}

Result<void> insert_secret(store::Tx& tx, const std::string& tenant_id, const SealedSecret& sealed,
                           const SecretRecord& record) {
  GP_TRY(
      tx.exec("INSERT INTO tenant_secrets (tenant_id, name, key_version, sealed, created_by, "
              "created_at) VALUES (?,?,?,?,?,?)",
              {tenant_id, record.name, int64_t{sealed.key_version}, to_json(sealed).dump(),
               record.created_by, record.created_at}));
  return ok();
}

Result<std::optional<SecretRecord>> find_secret(store::Tx& tx, const std::string& tenant_id,
                                                const std::string& name) {
  auto row = GP_TRY(tx.query_one(
      fmt::format("SELECT {} FROM tenant_secrets WHERE tenant_id = ? AND name = ?", kSecretColumns),
      {tenant_id, name}));
  if (!row) return std::optional<SecretRecord>();
  return std::optional<SecretRecord>(GP_TRY(secret_from(*row)));
}

Result<std::vector<SecretRecord>> list_secrets(store::Tx& tx, const std::string& tenant_id,
                                               const std::string& after, int64_t limit) {
  std::vector<SecretRecord> out;
  for (const auto& row : GP_TRY(tx.query(
           fmt::format("SELECT {} FROM tenant_secrets WHERE tenant_id = ? AND name > ? ORDER BY "
                       "name LIMIT ?",
                       kSecretColumns),
           {tenant_id, after, limit})))
    out.push_back(GP_TRY(secret_from(row)));
  return out;
}

Result<bool> delete_secret(store::Tx& tx, const std::string& tenant_id, const std::string& name) {
  return GP_TRY(tx.exec("DELETE FROM tenant_secrets WHERE tenant_id = ? AND name = ?",
                        {tenant_id, name})) > 0;
}

Result<std::optional<SealedSecret>> load_sealed_secret(store::Tx& tx, const std::string& tenant_id,
                                                       const std::string& name) {
  auto row = GP_TRY(tx.query_one(
      "SELECT sealed FROM tenant_secrets WHERE tenant_id = ? AND name = ?", {tenant_id, name}));
  if (!row) return std::optional<SealedSecret>();
  return std::optional<SealedSecret>(
      GP_TRY(sealed_secret_from_json(GP_TRY(parse_json(row->text(0))))));
}

// ---- Storage reports ----

namespace {
const std::string kReportColumns = store::columns_of<StorageReport>();
const std::string kReportUpsert = fmt::format(
    "INSERT INTO storage_reports ({}) VALUES ({}) ON CONFLICT (tenant_id, node_id) DO UPDATE SET "
    "{}",
    kReportColumns, store::placeholders_of<StorageReport>(),
    store::updates_of<StorageReport>({"tenant_id", "node_id"}));
}  // namespace

Result<void> save_storage_report(store::Tx& tx, const StorageReport& r) {
  GP_TRY(tx.exec(kReportUpsert, store::params_of(r)));
  return ok();
}

Result<std::vector<StorageReport>> storage_reports(store::Tx& tx, const std::string& tenant_id) {
  return store::read_records<StorageReport>(
      tx,
      fmt::format("SELECT {} FROM storage_reports WHERE tenant_id = ? ORDER BY node_id",
                  kReportColumns),
      {tenant_id});
}

// ---- Key rotation ----

Result<TenantKeyStatus> tenant_key_status(store::Tx& tx, const std::string& tenant_id) {
  TenantKeyStatus status;
  auto record = GP_TRY(load_keyring_record(tx, tenant_id));
  if (!record) return status;
  status.exists = true;
  status.destroyed = record->destroyed;
  if (record->ring.tenants.empty()) return status;
  const auto& t = record->ring.tenants[0];
  status.destroyed = status.destroyed || t.destroyed;
  status.current_version = t.current_version;
  status.rotated_at = current_key_created_at(t);
  std::map<int64_t, int64_t> sealed;
  for (const auto& s : GP_TRY(load_stored_secrets(tx, tenant_id))) ++sealed[s.key_version];
  for (const auto& w : t.versions)
    status.versions.push_back({.version = w.version,
                               .master_key_id = w.master_key_id,
                               .created_at = w.created_at,
                               .secrets = sealed[w.version]});
  return status;
}

Result<Rotation> rotate_tenant_key(store::Tx& tx, const std::string& tenant_id,
                                   std::string_view tenant_name, std::span<const MasterKey> masters,
                                   const Random& random, int64_t now_micros) {
  if (masters.empty()) return fail(Error::internal("rotation needs the current master key"));
  auto ring = GP_TRY(load_keyring(tx, tenant_id));
  const bool existed = !ring.tenants.empty();
  if (existed && ring.tenants[0].destroyed)
    return fail(Error::conflict(fmt::format(
        "tenant '{}' had its data keys destroyed (offboarded): nothing to rotate", tenant_name)));
  Rotation r;
  if (!existed) {
    GP_TRY_VOID(create_tenant_key(ring, tenant_name, masters.front(), random, now_micros));
    r.version = 1;
  } else {
    r.version = GP_TRY(rotate_data_key(ring, tenant_name, masters.front(), random, now_micros));
  }
  GP_TRY_VOID(save_keyring(tx, tenant_id, ring, existed, now_micros));
  for (const auto& stored : GP_TRY(load_stored_secrets(tx, tenant_id))) {
    auto sealed = GP_TRY(sealed_secret_from_json(GP_TRY(parse_json(stored.sealed))));
    if (!needs_reseal(ring, sealed)) continue;
    auto fresh = GP_TRY(reseal_secret(ring, masters, sealed, random));
    GP_TRY(tx.exec(
        "UPDATE tenant_secrets SET key_version = ?, sealed = ? WHERE tenant_id = ? AND name = ?",
        {int64_t{fresh.key_version}, to_json(fresh).dump(), tenant_id, stored.name}));
    ++r.resealed;
  }
  return r;
}

namespace {

// Every live keyring: tenant id and the parsed ring.
Result<std::vector<std::pair<std::string, TenantKeys>>> live_keyrings(store::Tx& tx) {
  std::vector<std::pair<std::string, TenantKeys>> out;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT tenant_id, keyring, updated_at FROM tenant_keyrings WHERE destroyed = 0 "
           "ORDER BY tenant_id"))) {
    auto ring = GP_TRY(keyring_from_row(row.text(1), row.integer(2)));
    if (ring.tenants.size() != 1 || ring.tenants[0].destroyed) continue;
    out.emplace_back(row.text(0), std::move(ring.tenants[0]));
  }
  return out;
}

}  // namespace

Result<std::vector<std::pair<std::string, std::string>>> tenants_with_keys_older_than(
    store::Tx& tx, int64_t before_micros) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [id, t] : GP_TRY(live_keyrings(tx)))
    if (current_key_created_at(t) < before_micros) out.emplace_back(id, t.tenant);
  return out;
}

Result<std::vector<std::string>> keyrings_not_wrapped_by(store::Tx& tx,
                                                         const std::string& master_key_id) {
  std::vector<std::string> out;
  for (const auto& [id, t] : GP_TRY(live_keyrings(tx)))
    if (std::any_of(t.versions.begin(), t.versions.end(),
                    [&](const WrappedDataKey& w) { return w.master_key_id != master_key_id; }))
      out.push_back(id);
  return out;
}

Result<size_t> rewrap_tenant_keyring(store::Tx& tx, const std::string& tenant_id,
                                     std::span<const MasterKey> from, const MasterKey& to,
                                     const Random& random, int64_t now_micros) {
  // Each key keeps its creation time (keyring_from_row dates old ones before the row's change
  // time moves on), so a rewrap never looks like a rotation.
  auto ring = GP_TRY(load_keyring(tx, tenant_id));
  if (ring.tenants.empty()) return size_t{0};
  const size_t n = GP_TRY(rewrap_all(ring, from, to, random));
  if (n > 0) GP_TRY_VOID(save_keyring(tx, tenant_id, ring, true, now_micros));
  return n;
}

}  // namespace gp::storage
