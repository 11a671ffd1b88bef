// Creating and removing tenant trees on the real filesystem. Every component is opened with
// O_NOFOLLOW relative to its parent's descriptor: a tenant who plants a symlink inside its
// tree cannot make the agent (root) create, chown or delete anything outside it. The top
// directory of each tree records its identity (TreeIdentity), checked before the agent adopts
// an existing directory or removes a tree: a deletion never removes another tree that took the
// same path.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/quota.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "common/files.h"
#include "storage/storage.h"

#ifndef PRJQUOTA
#define PRJQUOTA 2
#endif

namespace gp::storage {
namespace {

Error sys_error(std::string_view what, std::string_view path, int err) {
  return Error::internal(fmt::format("{} {}: {}", what, path, std::strerror(err)));
}

Result<UniqueFd> open_root(const std::filesystem::path& root) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return fail(
        Error::not_found(fmt::format("storage root {}: {}", root.string(), std::strerror(errno))));
  return UniqueFd(fd);
}

// Opens the directory `name` under `parent` without following a symlink.
Result<UniqueFd> open_dir_at(int parent, const std::string& name, std::string_view shown) {
  int fd = ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return UniqueFd(fd);
  int e = errno;
  if (e == ELOOP || e == ENOTDIR)
    return fail(Error::conflict(
        fmt::format("{} is a symlink or not a directory; refusing to use it", shown)));
  if (e == ENOENT) return fail(Error::not_found(fmt::format("{} does not exist", shown)));
  return fail(sys_error("cannot open", shown, e));
}

// Sets a size limit with the filesystem's project quotas: the directory gets the project id
// (inherited by everything created below it) and the project a hard block limit.
SizeLimitOutcome apply_size_limit(int fd, const std::string& path, uint32_t project,
                                  uint64_t bytes) {
  SizeLimitOutcome out{.path = path, .bytes = bytes};
  fsxattr fsx{};
  if (::ioctl(fd, FS_IOC_FSGETXATTR, &fsx) != 0) {
    out.detail = fmt::format("recorded, not enforced: the filesystem has no project ids ({})",
                             std::strerror(errno));
    return out;
  }
  fsx.fsx_projid = project;
  fsx.fsx_xflags |= FS_XFLAG_PROJINHERIT;
  if (::ioctl(fd, FS_IOC_FSSETXATTR, &fsx) != 0) {
    out.detail = fmt::format(
        "recorded, not enforced: cannot set project id {} ({}); ext4 needs the 'project' "
        "feature, XFS the prjquota mount option",
        project, std::strerror(errno));
    return out;
  }
#ifdef SYS_quotactl_fd
  dqblk dq{};
  dq.dqb_bhardlimit = (bytes + 1023) / 1024;  // in 1 KiB quota blocks
  dq.dqb_bsoftlimit = dq.dqb_bhardlimit;
  dq.dqb_valid = QIF_BLIMITS;
  if (::syscall(SYS_quotactl_fd, fd, QCMD(Q_SETQUOTA, PRJQUOTA), project, &dq) != 0) {
    out.detail = fmt::format(
        "recorded, not enforced: project quotas are not on for this filesystem ({}); mount it "
        "with prjquota",
        std::strerror(errno));
    return out;
  }
  out.enforced = true;
  out.detail = fmt::format("project quota {} (hard limit {} KiB)", project, dq.dqb_bhardlimit);
#else
  out.detail = "recorded, not enforced: quotactl_fd is not available on this system";
#endif
  return out;
}

// ---- Recorded identities ----

struct Recorded {
  bool supported = true;  // false: the filesystem has no trusted extended attributes
  std::optional<TreeIdentity> identity;
};

Result<Recorded> read_identity(int fd, std::string_view shown) {
  std::string buf(512, '\0');
  ssize_t n = ::fgetxattr(fd, kIdentityXattr, buf.data(), buf.size());
  if (n < 0) {
    const int e = errno;
    if (e == ENODATA) return Recorded{};
    if (e == ENOTSUP || e == EOPNOTSUPP) return Recorded{.supported = false};
    return fail(sys_error("cannot read the recorded identity of", shown, e));
  }
  buf.resize(static_cast<size_t>(n));
  auto identity = parse_identity(buf);
  if (!identity)
    return fail(Error::conflict(
        fmt::format("{} records an identity that cannot be read ({}); left as it is", shown,
                    identity.error().message)));
  return Recorded{.supported = true, .identity = std::move(*identity)};
}

// Records the identity on an open top directory. False when the filesystem cannot hold it.
Result<bool> record_identity(int fd, const TreeIdentity& identity, std::string_view shown) {
  const std::string text = identity_text(identity);
  if (::fsetxattr(fd, kIdentityXattr, text.data(), text.size(), 0) == 0) return true;
  const int e = errno;
  if (e == ENOTSUP || e == EOPNOTSUPP) return false;
  return fail(sys_error("cannot record the identity of", shown, e));
}

// Calls `each(name)` for every entry of the open directory but "." and "..". The listing reads
// a duplicate descriptor, which shares the offset: it rewinds first, so it may list again.
template <typename F>
Result<void> for_each_entry(int dir, std::string_view shown, F each) {
  int dup = ::fcntl(dir, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return fail(sys_error("cannot read", shown, errno));
  DIR* d = ::fdopendir(dup);
  if (!d) {
    const int e = errno;
    ::close(dup);
    return fail(sys_error("cannot read", shown, e));
  }
  struct DirCloser {
    void operator()(DIR* dir) const { ::closedir(dir); }
  };
  std::unique_ptr<DIR, DirCloser> guard(d);
  ::rewinddir(d);
  std::vector<std::string> names;
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  if (errno != 0) return fail(sys_error("cannot read", shown, errno));
  guard.reset();
  for (const auto& name : names) GP_TRY_VOID(each(name));
  return ok();
}

Result<bool> is_empty_dir(int dir, std::string_view shown) {
  bool empty = true;
  GP_TRY_VOID(for_each_entry(dir, shown, [&](const std::string&) -> Result<void> {
    empty = false;
    return ok();
  }));
  return empty;
}

// Whether an existing top directory may be used as the planned tree: it records the planned
// identity, or (made before identities were recorded, or on a filesystem that cannot record
// them) it records none and its owner is the planned id, or it is an empty root-owned
// directory (this agent's own creation, interrupted before the identity was recorded).
// Returns the reason when it may not; sets *record when the identity should be recorded now.
Result<std::optional<std::string>> refuse_existing(int fd, const struct stat& st,
                                                   const PlannedDir& d, const Recorded& recorded,
                                                   bool* record) {
  *record = false;
  if (recorded.identity) {
    if (*recorded.identity == *d.identity) return std::optional<std::string>{};
    return std::optional<std::string>{
        fmt::format("{} records {}, not the planned {}; left as it is", d.path,
                    to_string(*recorded.identity), to_string(*d.identity))};
  }
  bool ours = st.st_uid == d.uid;
  if (!ours && st.st_uid == 0) ours = GP_TRY(is_empty_dir(fd, d.path));
  if (!ours)
    return std::optional<std::string>{fmt::format(
        "{} records no identity and is owned by uid {}, not the planned {}; left as it is "
        "(docs/storage.md: trees without a recorded identity)",
        d.path, st.st_uid, d.uid)};
  *record = recorded.supported;
  return std::optional<std::string>{};
}

// ---- Removal ----

// Unlinks every entry of `dir` that is not a directory; returns the subdirectories' names.
Result<std::vector<std::string>> unlink_non_directories(int dir, std::string_view shown) {
  std::vector<std::string> subdirs;
  GP_TRY_VOID(for_each_entry(dir, shown, [&](const std::string& name) -> Result<void> {
    struct stat st {};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return ok();
      return fail(sys_error("cannot stat", fmt::format("{}/{}", shown, name), errno));
    }
    if (S_ISDIR(st.st_mode)) {
      subdirs.push_back(name);
    } else if (::unlinkat(dir, name.c_str(), 0) != 0 && errno != ENOENT) {
      return fail(sys_error("cannot remove", fmt::format("{}/{}", shown, name), errno));
    }
    return ok();
  }));
  return subdirs;
}

// How often a directory that filled up again while it was being emptied is emptied once more
// before the removal gives up (and is retried the next round).
constexpr int kMaxRefills = 1000;

// Empties the open directory `top`, at any depth, holding at most three descriptors: it
// descends with openat(O_NOFOLLOW) and climbs back with "..", checking that ".." is the
// directory it came from (device and inode), so a directory moved out of the tree while it is
// being emptied stops the removal instead of leading it elsewhere. Never follows a symlink.
Result<void> empty_directory(int top, const std::string& shown) {
  struct Level {
    std::string name;  // in its parent
    dev_t dev = 0;
    ino_t ino = 0;
    bool listed = false;
    std::vector<std::string> subdirs;  // still to empty and remove
  };
  auto where = [&](const std::vector<Level>& levels) {
    std::string out = shown;
    for (size_t i = 1; i < levels.size(); ++i) out += "/" + levels[i].name;
    return out;
  };
  struct stat st {};
  if (::fstat(top, &st) != 0) return fail(sys_error("cannot stat", shown, errno));
  UniqueFd cur(::fcntl(top, F_DUPFD_CLOEXEC, 0));
  if (cur.get() < 0) return fail(sys_error("cannot read", shown, errno));
  std::vector<Level> levels;
  levels.push_back({.name = "", .dev = st.st_dev, .ino = st.st_ino});
  int refills = 0;
  while (true) {
    Level& level = levels.back();
    if (!level.listed) {
      level.subdirs = GP_TRY(unlink_non_directories(cur.get(), where(levels)));
      level.listed = true;
    }
    if (!level.subdirs.empty()) {
      std::string name = std::move(level.subdirs.back());
      level.subdirs.pop_back();
      int fd = ::openat(cur.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) {
        const int e = errno;
        if (e == ENOENT) continue;
        if (e == ELOOP || e == ENOTDIR) {  // no longer a directory: unlinked like any file
          if (::unlinkat(cur.get(), name.c_str(), 0) != 0 && errno != ENOENT)
            return fail(sys_error("cannot remove", where(levels) + "/" + name, errno));
          continue;
        }
        return fail(sys_error("cannot open", where(levels) + "/" + name, e));
      }
      UniqueFd child(fd);
      if (::fstat(child.get(), &st) != 0)
        return fail(sys_error("cannot stat", where(levels) + "/" + name, errno));
      levels.push_back({.name = std::move(name), .dev = st.st_dev, .ino = st.st_ino});
      cur = std::move(child);
      continue;
    }
    if (levels.size() == 1) return ok();
    // Emptied: climb back to the parent and remove the directory from it.
    const std::string here = where(levels);
    UniqueFd up(::openat(cur.get(), "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (up.get() < 0) return fail(sys_error("cannot open the parent of", here, errno));
    if (::fstat(up.get(), &st) != 0)
      return fail(sys_error("cannot stat the parent of", here, errno));
    const Level& parent = levels[levels.size() - 2];
    if (st.st_dev != parent.dev || st.st_ino != parent.ino)
      return fail(Error::conflict(
          fmt::format("{} was moved out of its parent during the removal; stopped there", here)));
    std::string name = std::move(levels.back().name);
    levels.pop_back();
    cur = std::move(up);
    if (::unlinkat(cur.get(), name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT) continue;
    if ((errno == ENOTEMPTY || errno == EEXIST) && ++refills <= kMaxRefills) {
      levels.back().subdirs.push_back(std::move(name));  // filled up again meanwhile
      continue;
    }
    return fail(sys_error("cannot remove", here, errno));
  }
}

// Removes the tree `name` under `parent` when it is the expected one (see remove_project).
Result<RemoveOutcome> remove_checked(int parent, const std::string& name, const std::string& shown,
                                     const ExpectedTree& expected) {
  int fd = ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) return RemoveOutcome::kAbsent;
    if (e == ELOOP || e == ENOTDIR)
      return fail(Error::conflict(
          fmt::format("{} is a symlink or not a directory; refusing to use it", shown)));
    return fail(sys_error("cannot open", shown, e));
  }
  UniqueFd dir(fd);
  auto recorded = GP_TRY(read_identity(dir.get(), shown));
  if (recorded.identity) {
    if (*recorded.identity != expected.identity) return RemoveOutcome::kReplaced;
  } else {
    struct stat st {};
    if (::fstat(dir.get(), &st) != 0) return fail(sys_error("cannot stat", shown, errno));
    if (!expected.owner || st.st_uid != *expected.owner) {
      // An empty directory holds nothing to lose, whoever's it was.
      if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) == 0) return RemoveOutcome::kRemoved;
      if (errno != ENOTEMPTY && errno != EEXIST)
        return fail(sys_error("cannot remove", shown, errno));
      return fail(Error::conflict(fmt::format(
          "{} records no identity and is owned by uid {}, not {}: it cannot be verified to be "
          "the tree of {}; left as it is (docs/storage.md: trees without a recorded identity)",
          shown, st.st_uid, expected.owner ? std::to_string(*expected.owner) : "a known uid",
          to_string(expected.identity))));
    }
  }
  for (int attempt = 0;; ++attempt) {
    GP_TRY_VOID(empty_directory(dir.get(), shown));
    if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) == 0) return RemoveOutcome::kRemoved;
    if ((errno != ENOTEMPTY && errno != EEXIST) || attempt >= kMaxRefills)
      return fail(sys_error("cannot remove", shown, errno));
  }
}

bool under(const std::string& path, const std::string& top) {
  return path == top ||
         (path.size() > top.size() && path.starts_with(top) && path[top.size()] == '/');
}

}  // namespace

std::string_view remove_outcome_name(RemoveOutcome outcome) {
  switch (outcome) {
    case RemoveOutcome::kRemoved:
      return "removed";
    case RemoveOutcome::kAbsent:
      return "absent";
    case RemoveOutcome::kReplaced:
      return "replaced";
  }
  return "?";
}

Result<CreateReport> create_volumes(const std::filesystem::path& root, const TenantVolumes& v) {
  if (v.tenant_id.empty())
    return fail(Error::invalid(fmt::format("tenant '{}': no tenant id to record", v.tenant)));
  for (const auto& p : v.projects)
    if (p.project_id.empty() || p.generation.empty())
      return fail(Error::invalid(
          fmt::format("project '{}': no project id or generation to record", p.project)));
  auto plan = GP_TRY(plan_layout(v));
  auto root_fd = GP_TRY(open_root(root));
  CreateReport report;
  for (const auto& d : plan) {
    if (std::any_of(report.refused.begin(), report.refused.end(),
                    [&](const RefusedTree& r) { return under(d.path, r.path); }))
      continue;
    // Walk to the parent of the directory, then create or open the directory itself.
    UniqueFd parent(::fcntl(root_fd.get(), F_DUPFD_CLOEXEC, 0));
    std::filesystem::path rel(d.path);
    std::string shown;
    std::vector<std::string> parts;
    for (const auto& c : rel) parts.push_back(c.string());
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      shown += (shown.empty() ? "" : "/") + parts[i];
      parent = GP_TRY(open_dir_at(parent.get(), parts[i], shown));
    }
    bool created = ::mkdirat(parent.get(), parts.back().c_str(), 0700) == 0;
    if (!created && errno != EEXIST) return fail(sys_error("cannot create", d.path, errno));
    auto dir = GP_TRY(open_dir_at(parent.get(), parts.back(), d.path));
    struct stat st {};
    if (::fstat(dir.get(), &st) != 0) return fail(sys_error("cannot stat", d.path, errno));
    if (d.identity) {
      // Recorded before the directory is handed to the tenant's ids.
      auto recorded = GP_TRY(read_identity(dir.get(), d.path));
      bool record = recorded.supported && !recorded.identity;
      if (!created) {
        auto refusal = GP_TRY(refuse_existing(dir.get(), st, d, recorded, &record));
        if (refusal) {
          report.refused.push_back({d.path, std::move(*refusal)});
          continue;
        }
      }
      if (record && !GP_TRY(record_identity(dir.get(), *d.identity, d.path)))
        recorded.supported = false;
      if (!recorded.supported) report.unrecorded.push_back(d.path);
    }
    bool differs = st.st_uid != d.uid || st.st_gid != d.gid || (st.st_mode & 07777) != d.mode;
    if (differs) {
      // chown first: it clears setuid/setgid bits that chmod then sets.
      if (::fchown(dir.get(), d.uid, d.gid) != 0)
        return fail(sys_error("cannot set the owner of", d.path, errno));
      if (::fchmod(dir.get(), d.mode) != 0)
        return fail(sys_error("cannot set the mode of", d.path, errno));
    }
    if (created)
      report.created.push_back(d.path);
    else if (differs)
      report.adjusted.push_back(d.path);
    if (d.size_limit)
      report.size_limits.push_back(
          apply_size_limit(dir.get(), d.path, d.quota_project, *d.size_limit));
  }
  return report;
}

Result<RemoveOutcome> remove_project(const std::filesystem::path& root, std::string_view tenant,
                                     std::string_view project, const ExpectedTree& expected) {
  GP_TRY_VOID(validate_dns_label("tenant", tenant));
  GP_TRY_VOID(validate_dns_label("project", project));
  auto root_fd = GP_TRY(open_root(root));
  auto tenant_fd = open_dir_at(root_fd.get(), std::string(tenant), std::string(tenant));
  if (!tenant_fd && tenant_fd.error().code == ErrorCode::kNotFound) return RemoveOutcome::kAbsent;
  GP_TRY_VOID(tenant_fd);
  return remove_checked(tenant_fd->get(), std::string(project),
                        fmt::format("{}/{}", tenant, project), expected);
}

Result<RemoveOutcome> remove_tenant(const std::filesystem::path& root, std::string_view tenant,
                                    const ExpectedTree& expected) {
  GP_TRY_VOID(validate_dns_label("tenant", tenant));
  auto root_fd = GP_TRY(open_root(root));
  return remove_checked(root_fd.get(), std::string(tenant), std::string(tenant), expected);
}

}  // namespace gp::storage
