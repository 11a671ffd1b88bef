// Storage: each tenant's volumes (datasets, models, checkpoints, scratch) under a shared root,
// one tree per tenant and project, owned by ids from the tenant's own uid/gid range with modes
// that deny every other tenant; the permission audit that proves it; and per-tenant data keys
// for the secrets the platform holds (keys.h). Id allocation and layout planning are pure; the
// create/remove/audit functions are the agent's filesystem calls. Public header of the module.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/result.h"
#include "storage/keys.h"

namespace gp::storage {

// ---- uid/gid ranges ----
// A tenant owns a block of ids, used both as uids and as gids: the first is the tenant's own
// (its top directory, its group every member has), the next ones go to its projects.

// Ids stay below 2^30 so that every volume gets its own project-quota id (id * 4 + kind).
constexpr uint32_t kMaxId = (uint32_t{1} << 30) - 1;

struct IdPoolConfig {
  uint32_t first = 1'000'000;    // above any distribution's system and login users
  uint32_t last = kMaxId;        // inclusive
  uint32_t block_size = 65'536;  // ids per tenant
};
Result<void> validate(const IdPoolConfig& config);

struct IdRange {
  uint32_t first = 0;
  uint32_t count = 0;
  uint32_t last() const { return first + count - 1; }
  bool contains(uint32_t id) const { return id >= first && id - first < count; }
  bool operator==(const IdRange&) const = default;
};

struct TenantIds {
  std::string tenant;
  IdRange range;
  bool operator==(const TenantIds&) const = default;
};

// The lowest free block (aligned to block_size from `first`) overlapping no existing range.
// Errors: invalid config/name, conflict when the tenant has a range, resource_exhausted.
Result<TenantIds> allocate_ids(const IdPoolConfig& config, std::span<const TenantIds> existing,
                               std::string_view tenant);
Result<std::vector<TenantIds>> release_ids(std::span<const TenantIds> existing,
                                           std::string_view tenant);

// ---- Tree identity ----
// Who a tree on disk belongs to, by identity and never by name: the tenant's id and, for a
// project's tree, the project's id and the generation of its volumes (a fresh value each time
// the volumes are created, so volumes deleted and set again, or a project deleted and created
// again under the same name, are another tree). The agent records it on the top directory of
// each tree it creates, in an extended attribute of the trusted namespace (only a process with
// CAP_SYS_ADMIN can read or write those: a tenant can neither forge nor remove it), and compares
// it before it adopts an existing directory or removes a tree.

inline constexpr const char* kIdentityXattr = "trusted.gpuplane.identity";

struct TreeIdentity {
  std::string tenant_id;
  std::string project_id;  // empty on a tenant's top directory
  std::string generation;  // empty on a tenant's top directory
  bool operator==(const TreeIdentity&) const = default;
};
std::string identity_text(const TreeIdentity& identity);  // the attribute's value (JSON)
Result<TreeIdentity> parse_identity(std::string_view text);
std::string to_string(const TreeIdentity& identity);  // for messages

// ---- Layout ----

enum class VolumeKind : uint8_t { kDatasets, kModels, kCheckpoints, kScratch };
std::string_view volume_kind_name(VolumeKind kind);  // "datasets", ...
std::optional<VolumeKind> parse_volume_kind(std::string_view name);
constexpr VolumeKind kAllVolumeKinds[] = {VolumeKind::kDatasets, VolumeKind::kModels,
                                          VolumeKind::kCheckpoints, VolumeKind::kScratch};

struct ProjectVolumes {
  std::string project;
  uint32_t id = 0;  // the project's uid and gid, inside the tenant's range (not its first id)
  // Size limit per volume kind, in bytes; absent means unlimited.
  std::vector<std::pair<VolumeKind, uint64_t>> size_limits;
  // Identity of the tree (TreeIdentity); create_volumes needs both, planning alone does not.
  std::string project_id;
  std::string generation;
};

struct TenantVolumes {
  std::string tenant;
  IdRange ids;
  std::vector<ProjectVolumes> projects;
  std::string tenant_id;  // identity of the tenant's tree; create_volumes needs it
};

// The next free project id in the tenant's range (never the tenant's own first id).
Result<uint32_t> allocate_project_id(const IdRange& tenant_ids,
                                     std::span<const ProjectVolumes> existing);

// One directory to create, relative to the storage root.
struct PlannedDir {
  std::string path;  // "acme", "acme/vision", "acme/vision/datasets"
  uid_t uid = 0;
  gid_t gid = 0;
  mode_t mode = 0;
  std::optional<uint64_t> size_limit;  // volumes only
  uint32_t quota_project = 0;          // project-quota id for the size limit: id * 4 + kind
  // Set on the top directory of a tree (the tenant's, each project's): what is recorded there.
  std::optional<TreeIdentity> identity;
};

// <root>/<tenant>            tenant uid:gid        0750
// <root>/<tenant>/<project>  project uid:gid       2770 (setgid: new files keep the group)
//   datasets models checkpoints                    2770
//   scratch                                        3770 (+ sticky: members keep their files)
// "other" never has any bit; only the tenant's own ids own anything.
Result<std::vector<PlannedDir>> plan_layout(const TenantVolumes& volumes);

// ---- Creating and removing (real filesystem calls) ----

// What happened to one size limit: enforced by a project quota, or recorded only.
struct SizeLimitOutcome {
  std::string path;
  uint64_t bytes = 0;
  bool enforced = false;
  std::string detail;  // how it is enforced, or why it could not be
};

// A tree create_volumes left alone: an existing top directory that is not the planned tree.
struct RefusedTree {
  std::string path;
  std::string reason;
};

struct CreateReport {
  std::vector<std::string> created;   // directories made now
  std::vector<std::string> adjusted;  // directories that existed, owner/mode set again
  std::vector<SizeLimitOutcome> size_limits;
  // Trees not touched, with everything planned below them: a top directory that records
  // another identity, or records none and is not owned by the planned id (docs/storage.md).
  std::vector<RefusedTree> refused;
  // Top directories whose identity could not be recorded: the filesystem has no trusted
  // extended attributes (NFS, for one). Removal then relies on the owner alone.
  std::vector<std::string> unrecorded;
};

// Creates (or reconciles) the planned tree under `root` (which must exist and be a directory).
// Every path component is opened with O_NOFOLLOW relative to its parent, so a symlink planted
// in the tree can never redirect the agent outside it. A new top directory gets its identity
// before it is handed to the tenant's ids; an existing one is used only when it records the
// planned identity, or (made before identities were recorded) records none and is owned by the
// planned id, or is an empty root-owned directory (a creation that was interrupted): it then
// gets the identity recorded. Size limits use the filesystem's project quotas when it has
// them (ext4/XFS with project quota on), else are reported.
Result<CreateReport> create_volumes(const std::filesystem::path& root,
                                    const TenantVolumes& volumes);

// What a removal expects to find at the path: the identity of the tree the deletion was
// scheduled for, and the uid its top directory was created with (absent when unknown).
struct ExpectedTree {
  TreeIdentity identity;
  std::optional<uint32_t> owner;
};

enum class RemoveOutcome : uint8_t {
  kRemoved,   // the tree was the expected one and is gone
  kAbsent,    // nothing at the path
  kReplaced,  // the path holds a tree recording another identity: left untouched, and the
              // expected tree is not there
};
std::string_view remove_outcome_name(RemoveOutcome outcome);  // "removed", "absent", "replaced"

// Removes <root>/<tenant>/<project>, or <root>/<tenant> with every project, when the tree there
// is the expected one: it records the expected identity, or records none and its top directory
// is owned by expected.owner, or is empty. Anything else is never touched: another recorded
// identity is kReplaced; no identity and another owner is a conflict (it cannot be verified;
// docs/storage.md says what an operator does). Never follows a symlink, and uses a bounded
// number of descriptors whatever the depth of the tree (it climbs back with "..", checking that
// it reaches the directory it came from).
Result<RemoveOutcome> remove_project(const std::filesystem::path& root, std::string_view tenant,
                                     std::string_view project, const ExpectedTree& expected);
Result<RemoveOutcome> remove_tenant(const std::filesystem::path& root, std::string_view tenant,
                                    const ExpectedTree& expected);

// ---- Permission audit ----

enum class FindingKind : uint8_t {
  kOtherReadable,   // "other" may read (or list) it
  kOtherWritable,   // "other" may write it
  kOtherExecute,    // "other" may traverse the directory (reach names beneath) or run the file
  kForeignOwner,    // owned by a uid outside the tenant's range
  kForeignGroup,    // group outside the tenant's range
  kAclGrant,        // a POSIX ACL entry grants a user or group outside the tenant's range
  kSetuid,          // setuid file
  kSetgid,          // setgid file (setgid directories only pass the group down: fine)
  kSymlinkEscape,   // a symlink whose target lies outside the tree
  kHardLinkEscape,  // a file with hard links outside the tree
  kDeviceFile,      // character or block device
  kUnreadable,      // the audit could not read it (reported, never silently skipped)
};
std::string_view finding_kind_name(FindingKind kind);  // "other-readable", ...

struct Finding {
  std::string path;  // relative to the audited tree ("." for its root)
  FindingKind kind;
  std::string detail;
};

struct AuditScope {
  // Ids that belong to the tenant; root (0) always counts as the platform's own.
  IdRange uids;
  IdRange gids;
};

// Deeper directories are not walked; each is reported (unreadable) instead.
inline constexpr int kMaxAuditDepth = 128;

// Walks `tree` without following symlinks and reports every entry another tenant could read,
// write or reach. The walk never goes by path: each entry is looked at with fstatat and each
// directory opened with openat(O_NOFOLLOW | O_DIRECTORY) relative to its parent's descriptor,
// so a tenant who swaps a directory for a symlink while the audit runs cannot make it list
// anything outside the tree (the entry is reported as changed instead). Depth is bounded by
// kMaxAuditDepth (one descriptor per level). It reports: mode bits for other, ownership outside the
// scope, ACL entries (system.posix_acl_access / _default) naming ids outside it, setuid/setgid
// files, symlinks and hard links leaving the tree, device files. Sorted by path, then kind.
Result<std::vector<Finding>> audit_tree(const std::filesystem::path& tree, const AuditScope& scope);
Json to_json(const Finding& finding);
// Findings a node reports per tree (POST /v1/agent/storage-report); the count is always the whole.
inline constexpr size_t kMaxReportedFindings = 100;

}  // namespace gp::storage
