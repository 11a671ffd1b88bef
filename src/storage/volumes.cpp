// Creating and removing tenant trees on the real filesystem. Every component is opened with
// O_NOFOLLOW relative to its parent's descriptor: a tenant who plants a symlink inside its
// tree cannot make the agent (root) create, chown or delete anything outside it.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/quota.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "storage/storage.h"

#ifndef PRJQUOTA
#define PRJQUOTA 2
#endif

namespace gp::storage {
namespace {

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

Error sys_error(std::string_view what, std::string_view path, int err) {
  return Error::internal(fmt::format("{} {}: {}", what, path, std::strerror(err)));
}

Result<Fd> open_root(const std::filesystem::path& root) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return fail(
        Error::not_found(fmt::format("storage root {}: {}", root.string(), std::strerror(errno))));
  return Fd(fd);
}

// Opens the directory `name` under `parent` without following a symlink.
Result<Fd> open_dir_at(int parent, const std::string& name, std::string_view shown) {
  int fd = ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return Fd(fd);
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

// Removes everything inside the open directory `dir` without following symlinks.
Result<void> remove_contents(int dir, const std::string& shown) {
  int dup = ::fcntl(dir, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return fail(sys_error("cannot read", shown, errno));
  DIR* d = ::fdopendir(dup);
  if (!d) {
    ::close(dup);
    return fail(sys_error("cannot read", shown, errno));
  }
  struct DirCloser {
    void operator()(DIR* dir) const { ::closedir(dir); }
  };
  std::unique_ptr<DIR, DirCloser> guard(d);
  std::vector<std::pair<std::string, bool>> entries;  // name, is a directory
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return fail(sys_error("cannot stat", fmt::format("{}/{}", shown, name), errno));
    entries.emplace_back(name, S_ISDIR(st.st_mode));
  }
  for (const auto& [name, is_dir] : entries) {
    std::string child = fmt::format("{}/{}", shown, name);
    if (is_dir) {
      auto sub = GP_TRY(open_dir_at(dir, name, child));
      GP_TRY_VOID(remove_contents(sub.get(), child));
    }
    if (::unlinkat(dir, name.c_str(), is_dir ? AT_REMOVEDIR : 0) != 0)
      return fail(sys_error("cannot remove", child, errno));
  }
  return ok();
}

Result<void> remove_dir_at(int parent, const std::string& name, const std::string& shown) {
  auto dir = GP_TRY(open_dir_at(parent, name, shown));
  GP_TRY_VOID(remove_contents(dir.get(), shown));
  if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) != 0)
    return fail(sys_error("cannot remove", shown, errno));
  return ok();
}

}  // namespace

Result<CreateReport> create_volumes(const std::filesystem::path& root, const TenantVolumes& v) {
  auto plan = GP_TRY(plan_layout(v));
  auto root_fd = GP_TRY(open_root(root));
  CreateReport report;
  for (const auto& d : plan) {
    // Walk to the parent of the directory, then create or open the directory itself.
    Fd parent(::fcntl(root_fd.get(), F_DUPFD_CLOEXEC, 0));
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

Result<void> remove_project(const std::filesystem::path& root, std::string_view tenant,
                            std::string_view project) {
  GP_TRY_VOID(validate_dns_label("tenant", tenant));
  GP_TRY_VOID(validate_dns_label("project", project));
  auto root_fd = GP_TRY(open_root(root));
  auto tenant_fd = GP_TRY(open_dir_at(root_fd.get(), std::string(tenant), std::string(tenant)));
  return remove_dir_at(tenant_fd.get(), std::string(project),
                       fmt::format("{}/{}", tenant, project));
}

Result<void> remove_tenant(const std::filesystem::path& root, std::string_view tenant) {
  GP_TRY_VOID(validate_dns_label("tenant", tenant));
  auto root_fd = GP_TRY(open_root(root));
  return remove_dir_at(root_fd.get(), std::string(tenant), std::string(tenant));
}

}  // namespace gp::storage
