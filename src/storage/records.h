// Storage's rows in the store (migrations 4, 13 and 21), read and written only here: each
// tenant's id block, its projects' volumes (with the generation that tells one set of volumes
// from the next under the same name), the deletions the agents execute once due, the nodes that
// hold a tenant's trees, each node's confirmation of a deletion, and each tenant's keyring and
// sealed secrets. Everything is keyed by identity
// (tenant id, project id, generation), never by name. Functions over the caller's transaction.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/record.h"
#include "common/result.h"
#include "storage/keys.h"
#include "storage/storage.h"
#include "store/store.h"

namespace gp::storage {

// ---- Id blocks ----

Result<std::optional<IdRange>> load_ids(store::Tx& tx, const std::string& tenant_id);
// Every tenant's block, by tenant id.
Result<std::map<std::string, IdRange>> all_ids(store::Tx& tx);
// The tenant's block, allocated from `pool` on first use.
Result<IdRange> ensure_ids(store::Tx& tx, const IdPoolConfig& pool, const std::string& tenant_id,
                           const std::string& tenant_name, int64_t now_micros);

// ---- Project volumes ----

using SizeLimits = std::vector<std::pair<VolumeKind, uint64_t>>;
// Size limits: at least 1 MiB (what the layout accepts), below 2^62 bytes so they fit a signed
// 64-bit JSON integer anywhere.
inline constexpr int64_t kMinSizeLimit = int64_t{1} << 20;
inline constexpr int64_t kMaxSizeLimit = int64_t{1} << 62;
// Strict: every key a volume kind, every value an integer number of bytes in range. Sorted.
Result<SizeLimits> parse_size_limits(const Json& j, std::string_view where);
Json size_limits_json(const SizeLimits& limits);

// One generation of a project's volumes, as stored and shown (Fields below).
struct StoredVolumes {
  std::string project_id;
  std::string project;  // the project's name: its tree is <tenant>/<project>
  uint32_t uid = 0;     // the project's uid and gid (ProjectVolumes::id)
  SizeLimits size_limits;
  std::string state;  // "active" | "deleting" (until its deletion is done)
  int64_t version = 0;
  std::string generation;
  // The volumes as the layout plans them.
  ProjectVolumes volumes() const {
    return {.project = project,
            .id = uid,
            .size_limits = size_limits,
            .project_id = project_id,
            .generation = generation};
  }
};
Result<std::vector<StoredVolumes>> load_volumes(store::Tx& tx, const std::string& tenant_id);
// The tenant's active volumes as the layout sees them.
TenantVolumes active_volumes(const std::string& tenant_id, const std::string& tenant_name,
                             const IdRange& ids, const std::vector<StoredVolumes>& stored);
// A new generation of a project's volumes (version 1, active).
Result<void> insert_volumes(store::Tx& tx, const std::string& tenant_id,
                            const ProjectVolumes& volumes, int64_t now_micros);
// Sets the limits of the active volumes at `version`, making them version + 1.
Result<void> update_size_limits(store::Tx& tx, const std::string& tenant_id,
                                const std::string& project_id, const SizeLimits& limits,
                                int64_t version, int64_t now_micros);
// The name of the project's active volumes (the directory of their tree under the tenant's),
// or nullopt while it has none.
Result<std::optional<std::string>> active_volumes_name(store::Tx& tx, const std::string& tenant_id,
                                                       const std::string& project_id);
// Conflict while the project has active volumes: deleting it would leave its tree on every node
// with no way to address it, and a new project under the same name would take its path. Volumes
// being deleted do not block it: their deletion is keyed by the project's id.
Result<void> check_project_deletable(store::Tx& tx, const std::string& tenant_id,
                                     const std::string& project_id);

// ---- Deletions ----

// A deletion is scheduled until every node holding the tree has removed it.
enum class DeletionState : uint8_t { kScheduled, kDone };

struct Deletion {
  std::string id;
  std::string tenant_id;
  std::string tenant_name;
  std::string project_name;  // empty: the whole tenant tree
  std::string project_id;    // the tree's identity (empty for a tenant tree, or a deletion
  std::string generation;    // scheduled before identities whose owner could not be told)
  std::string reason;
  std::string requested_by;
  int64_t requested_at = 0;
  int64_t due_at = 0;
  DeletionState state = DeletionState::kScheduled;
  std::optional<int64_t> done_at;
  std::optional<std::string> done_by;

  bool whole_tenant() const { return project_name.empty(); }
  TreeIdentity identity() const { return {tenant_id, project_id, generation}; }
  // The tree's path under the storage root: "<tenant>" or "<tenant>/<project>".
  std::string path() const {
    return whole_tenant() ? tenant_name : tenant_name + "/" + project_name;
  }
};

struct Confirmation {
  std::string node_id;
  std::string outcome;  // remove_outcome_name
  std::string detail;
  int64_t at = 0;
};

// Schedules the project's volumes (and marks them deleting), keyed by their identity.
Result<Deletion> schedule_project_deletion(store::Tx& tx, const std::string& id,
                                           const std::string& tenant_id,
                                           const std::string& tenant_name,
                                           const ProjectVolumes& volumes, const std::string& reason,
                                           const std::string& who, int64_t now_micros,
                                           int64_t due_micros);
// Schedules the whole tenant tree (every volume marked deleting), or returns the one already
// scheduled.
Result<Deletion> schedule_tenant_deletion(store::Tx& tx, const std::string& id,
                                          const std::string& tenant_id,
                                          const std::string& tenant_name, const std::string& reason,
                                          const std::string& who, int64_t now_micros,
                                          int64_t due_micros);
Result<std::optional<Deletion>> find_deletion(store::Tx& tx, const std::string& id);
// Every tenant's, by id after `after`; `state` empty for all. At most `limit`.
Result<std::vector<Deletion>> list_deletions(store::Tx& tx, const std::string& after,
                                             const std::string& state, int64_t limit);
Result<std::vector<Deletion>> scheduled_deletions(store::Tx& tx, const std::string& tenant_id);
// Scheduled and due at `now`, oldest first.
Result<std::vector<Deletion>> due_deletions(store::Tx& tx, int64_t now_micros);
// Another generation's volumes (of an earlier project under the same name) that still hold
// the path <tenant>/<name>: its tree is not removed yet.
Result<std::optional<StoredVolumes>> volumes_holding_path(store::Tx& tx,
                                                          const std::string& tenant_id,
                                                          const std::string& project_name,
                                                          const std::string& project_id);
// The uid the deleted tree's top directory was created with (the project's id, or the tenant's
// first id); nullopt when the volumes are no longer known.
Result<std::optional<uint32_t>> expected_owner(store::Tx& tx, const Deletion& d);

Result<std::vector<Confirmation>> confirmations(store::Tx& tx, const std::string& deletion_id);
// False when the node had confirmed it already (nothing changes).
Result<bool> record_confirmation(store::Tx& tx, const std::string& deletion_id,
                                 const std::string& node_id, const std::string& outcome,
                                 const std::string& detail, int64_t now_micros);
// Marks the deletion done and lets go of what its tree held: a project's volumes row (that
// generation only), or for the whole tenant every volume, the node holdings and the id block
// (which may then go to another tenant).
Result<void> complete_deletion(store::Tx& tx, const Deletion& d, const std::string& node_id,
                               int64_t now_micros);

// ---- Nodes holding a tenant's trees ----
// A node records that it holds a tenant's trees before it creates them; every such node then
// has to confirm a deletion of them (docs/storage.md).

Result<std::vector<std::string>> holders(store::Tx& tx, const std::string& tenant_id);
Result<bool> is_holder(store::Tx& tx, const std::string& tenant_id, const std::string& node_id);
// False when it was recorded already.
Result<bool> record_holder(store::Tx& tx, const std::string& tenant_id, const std::string& node_id,
                           int64_t now_micros);

// ---- Tenant keys and secrets (migration 4) ----

// The tenant's keyring row as a one-tenant Keyring (empty when it has none yet).
Result<Keyring> load_keyring(store::Tx& tx, const std::string& tenant_id);
// The tenant's keyring row as stored, with its destroyed flag and when it last changed (nullopt
// when it has none yet): what the posture report reads.
struct KeyringRecord {
  Keyring ring;
  bool destroyed = false;
  int64_t updated_at = 0;  // unix micros
};
Result<std::optional<KeyringRecord>> load_keyring_record(store::Tx& tx,
                                                         const std::string& tenant_id);
// Writes the tenant's one-tenant keyring: a new row unless `existed`.
Result<void> save_keyring(store::Tx& tx, const std::string& tenant_id, const Keyring& ring,
                          bool existed, int64_t now_micros);

// A secret as it may be shown: never its value, sealed or not.
struct SecretRecord {
  std::string name;
  int64_t key_version = 0;
  std::string created_by;
  int64_t created_at = 0;  // unix micros
};
Result<bool> secret_exists(store::Tx& tx, const std::string& tenant_id, const std::string& name);
Result<void> insert_secret(store::Tx& tx, const std::string& tenant_id, const SealedSecret& sealed,
                           const SecretRecord& record);
Result<std::optional<SecretRecord>> find_secret(store::Tx& tx, const std::string& tenant_id,
                                                const std::string& name);
// At most `limit` secrets named after `after`, by name.
Result<std::vector<SecretRecord>> list_secrets(store::Tx& tx, const std::string& tenant_id,
                                               const std::string& after, int64_t limit);
// Every secret of the tenant, by name, with its sealed form as stored (JSON text, left unread:
// the posture report names a record it cannot read instead of failing).
struct StoredSecret {
  std::string name;
  int64_t key_version = 0;
  std::string sealed;
};
Result<std::vector<StoredSecret>> load_stored_secrets(store::Tx& tx, const std::string& tenant_id);
// False when there was none of that name.
Result<bool> delete_secret(store::Tx& tx, const std::string& tenant_id, const std::string& name);
Result<std::optional<SealedSecret>> load_sealed_secret(store::Tx& tx, const std::string& tenant_id,
                                                       const std::string& name);

// ---- What the nodes report of the trees they hold (migration 34) ----

// Shown without its node and tenant (Fields<StorageReport> below): a reply about the tenant names
// the node.
struct StorageReport {
  std::string node_id;
  std::string tenant_id;
  bool encrypted = false;
  std::string encryption_detail;  // under which key, or why the tree is in clear
  int64_t finding_count = 0;      // the permission audit's findings
  Json findings = Json::array();  // the first kMaxReportedFindings, as storage::to_json(Finding)
  int64_t audited_at = 0;         // unix micros, when the control plane received it
};
// Replaces the node's last report of the tenant's tree.
Result<void> save_storage_report(store::Tx& tx, const StorageReport& report);
// Every node's last report of the tenant's trees, by node.
Result<std::vector<StorageReport>> storage_reports(store::Tx& tx, const std::string& tenant_id);

// ---- Key rotation ----

// One data key version as an operator may see it: never key material.
struct KeyVersionStatus {
  uint32_t version = 0;
  std::string master_key_id;  // the master key that wraps it
  int64_t created_at = 0;     // unix micros (made before they were kept: the keyring's change)
  int64_t secrets = 0;        // secrets sealed under it
};
struct TenantKeyStatus {
  bool exists = false;  // the tenant has (or had) a keyring
  bool destroyed = false;
  uint32_t current_version = 0;
  int64_t rotated_at = 0;  // when the current version was made; 0 without one
  std::vector<KeyVersionStatus> versions;
};
Result<TenantKeyStatus> tenant_key_status(store::Tx& tx, const std::string& tenant_id);

struct Rotation {
  uint32_t version = 0;  // the new current version
  int64_t resealed = 0;  // secrets moved onto it
};
// Makes a new data key version current (the first one for a tenant that has none) and reseals
// every secret of the tenant under it, in the caller's transaction: all or nothing. Older
// versions stay in the keyring (they still open what was sealed or derived under them).
// Errors: conflict when the tenant's keys were destroyed (offboarded); whatever
// opening a secret reports (a secret that no master key opens stops the rotation).
Result<Rotation> rotate_tenant_key(store::Tx& tx, const std::string& tenant_id,
                                   std::string_view tenant_name, std::span<const MasterKey> masters,
                                   const Random& random, int64_t now_micros);

// Tenants (id, name) whose current data key was made before `before_micros` and that are not
// destroyed: what an automatic rotation age selects.
Result<std::vector<std::pair<std::string, std::string>>> tenants_with_keys_older_than(
    store::Tx& tx, int64_t before_micros);

// Master key rewrap, one tenant per transaction so that an interrupted run keeps what it did.
// The tenants holding a data key wrapped by a master other than `master_key_id`.
Result<std::vector<std::string>> keyrings_not_wrapped_by(store::Tx& tx,
                                                         const std::string& master_key_id);
// Rewraps the tenant's data keys under `to` (storage::rewrap_all); returns how many.
Result<size_t> rewrap_tenant_keyring(store::Tx& tx, const std::string& tenant_id,
                                     std::span<const MasterKey> from, const MasterKey& to,
                                     const Random& random, int64_t now_micros);

}  // namespace gp::storage

namespace gp {

// Each storage::DeletionState's name, at its value's index.
inline constexpr std::array<std::string_view, 2> kDeletionStates = {"scheduled", "done"};

// Size limits show as an object keyed by volume kind, and are stored as its text.
template <>
struct JsonForm<storage::SizeLimits> {
  static Json json(const storage::SizeLimits& limits) { return storage::size_limits_json(limits); }
  static Result<storage::SizeLimits> parse(const Json& j) {
    return storage::parse_size_limits(j, "size_limits");
  }
  static Json schema() {
    Json kinds = Json::array();
    for (auto kind : storage::kAllVolumeKinds) kinds.push_back(storage::volume_kind_name(kind));
    return {{"type", "object"},
            {"propertyNames", {{"type", "string"}, {"enum", kinds}}},
            {"additionalProperties", {{"type", "integer"}, {"minimum", storage::kMinSizeLimit}}}};
  }
};

// The one description of a project's volumes: their row, their JSON and their schema
// (common/record.h). The gid is the uid.
template <>
struct Fields<storage::StoredVolumes> {
  using V = storage::StoredVolumes;
  static constexpr std::string_view kStates[] = {"active", "deleting"};
  static constexpr auto list = std::tuple{
      Field{"project_id", &V::project_id},
      Field{"project", &V::project, "project_name"},
      Field{"uid", &V::uid},
      Derived<V, int64_t>{"gid", [](const V& v) -> int64_t { return v.uid; }},
      Field{"size_limits", &V::size_limits},
      Field{"state", &V::state, {}, Form::kEnum, kStates},
      Field{"version", &V::version},
      Field{"generation", &V::generation},
  };
};

// The one description of a storage deletion: its row, its JSON and its schema (common/record.h).
// Its tenant and project show by the names their tree had ("tenant", "project").
template <>
struct Fields<storage::Deletion> {
  using D = storage::Deletion;
  static constexpr auto list = std::tuple{
      Field{"id", &D::id},
      Field{"tenant_id", &D::tenant_id},
      Field{"tenant", &D::tenant_name, "tenant_name"},
      Field{"project", &D::project_name, "project_name"},
      Field{"project_id", &D::project_id},
      Field{"generation", &D::generation},
      Derived<D>{"path", [](const D& d) { return d.path(); }},
      Field{"reason", &D::reason},
      Field{"requested_by", &D::requested_by},
      Field{"requested_at", &D::requested_at, {}, Form::kTime},
      Field{"due_at", &D::due_at, {}, Form::kTime},
      Field{"state", &D::state, {}, Form::kEnum, kDeletionStates},
      Field{"done_at", &D::done_at, {}, Form::kTime},
      Field{"done_by", &D::done_by},
  };
};

// The one description of what a node last reported of a tenant's tree: its row, its JSON and its
// schema (common/record.h). The findings are a JSON array of objects (storage::to_json(Finding)).
template <>
struct Fields<storage::StorageReport> {
  using S = storage::StorageReport;
  static constexpr auto list = std::tuple{
      Field{"node_id", &S::node_id, {}, Form::kPlain, {}, Shown::kStoredOnly},
      Field{"tenant_id", &S::tenant_id, {}, Form::kPlain, {}, Shown::kStoredOnly},
      Field{"encrypted", &S::encrypted},
      Field{"encryption_detail", &S::encryption_detail},
      Field{"finding_count", &S::finding_count},
      Field{"findings", &S::findings},
      Field{"audited_at", &S::audited_at, {}, Form::kTime},
  };
};

// The one description of a secret's record: its row, its JSON and its schema (common/record.h).
template <>
struct Fields<storage::SecretRecord> {
  using S = storage::SecretRecord;
  static constexpr auto list = std::tuple{
      Field{"name", &S::name},
      Field{"key_version", &S::key_version},
      Field{"created_by", &S::created_by},
      Field{"created_at", &S::created_at, {}, Form::kTime},
  };
};

}  // namespace gp
