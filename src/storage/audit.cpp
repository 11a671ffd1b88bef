// The permission audit: walks a tenant tree and reports whatever another tenant could read,
// write or reach. The walk goes through directory descriptors (fstatat/openat with O_NOFOLLOW
// relative to the parent), never by path, so nothing a tenant changes while it runs can lead it
// outside the tree. Reads POSIX ACLs straight from their xattrs (the kernel's on-disk format:
// a 4-byte version 2, then 8-byte entries tag/perm/id, little-endian), so no libacl is needed.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>

#include "storage/storage.h"
#include "storage/testing.h"

namespace gp::storage {

std::string_view finding_kind_name(FindingKind kind) {
  switch (kind) {
    case FindingKind::kOtherReadable:
      return "other-readable";
    case FindingKind::kOtherWritable:
      return "other-writable";
    case FindingKind::kOtherExecute:
      return "other-execute";
    case FindingKind::kForeignOwner:
      return "foreign-owner";
    case FindingKind::kForeignGroup:
      return "foreign-group";
    case FindingKind::kAclGrant:
      return "acl-grant";
    case FindingKind::kSetuid:
      return "setuid";
    case FindingKind::kSetgid:
      return "setgid";
    case FindingKind::kSymlinkEscape:
      return "symlink-escape";
    case FindingKind::kHardLinkEscape:
      return "hard-link-escape";
    case FindingKind::kDeviceFile:
      return "device-file";
    case FindingKind::kUnreadable:
      return "unreadable";
  }
  return "?";
}

Json to_json(const Finding& f) {
  return {{"path", f.path}, {"kind", finding_kind_name(f.kind)}, {"detail", f.detail}};
}

namespace {

constexpr uint16_t kAclUserObj = 0x01, kAclUser = 0x02, kAclGroupObj = 0x04, kAclGroup = 0x08,
                   kAclMask = 0x10, kAclOther = 0x20;

struct AclEntry {
  uint16_t tag;
  uint16_t perm;
  uint32_t id;
};

std::string rwx(unsigned perm) {
  return fmt::format("{}{}{}", perm & 4 ? 'r' : '-', perm & 2 ? 'w' : '-', perm & 1 ? 'x' : '-');
}

// Reads one extended attribute of an entry: n bytes, or -1 with errno set.
using XattrGetter = std::function<ssize_t(const char* name, void* buf, size_t size)>;

// nullopt: no ACL of this kind; an error string when the xattr is malformed.
std::optional<std::vector<AclEntry>> read_acl(const XattrGetter& get, const char* name,
                                              std::string* error) {
  std::string buf(4 + 8 * 64, '\0');
  ssize_t n = get(name, buf.data(), buf.size());
  if (n < 0 && errno == ERANGE) {
    n = get(name, nullptr, 0);
    if (n > 0) {
      buf.resize(static_cast<size_t>(n));
      n = get(name, buf.data(), buf.size());
    }
  }
  if (n < 0) {
    if (errno != ENODATA && errno != ENOTSUP && errno != EOPNOTSUPP)
      *error = fmt::format("cannot read {}: {}", name, std::strerror(errno));
    return std::nullopt;
  }
  auto le = [&](size_t off, int bytes) {
    uint32_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(buf[off + i]);
    return v;
  };
  if (n < 4 || (n - 4) % 8 != 0 || le(0, 4) != 2) {
    *error = fmt::format("{} is not a version 2 POSIX ACL", name);
    return std::nullopt;
  }
  std::vector<AclEntry> out;
  for (size_t off = 4; off + 8 <= static_cast<size_t>(n); off += 8)
    out.push_back(
        {static_cast<uint16_t>(le(off, 2)), static_cast<uint16_t>(le(off + 2, 2)), le(off + 4, 4)});
  return out;
}

std::function<void(const std::string&)>& audit_descend_hook() {
  static std::function<void(const std::string&)> hook;
  return hook;
}

// An open directory descriptor, closed when it goes.
class DirFd {
 public:
  explicit DirFd(int fd) : fd_(fd) {}
  DirFd(const DirFd&) = delete;
  DirFd& operator=(const DirFd&) = delete;
  ~DirFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// The path of an entry through its parent's descriptor: resolving it never depends on where
// the parent directory is now, nor on any symlink above it.
std::string fd_path(int dir, const std::string& name) {
  return fmt::format("/proc/self/fd/{}/{}", dir, name);
}

class Auditor {
 public:
  Auditor(std::filesystem::path root, const AuditScope& scope)
      : root_(std::move(root)), scope_(scope) {}

  // Audits the tree whose root is open as `root_fd`.
  void walk_root(int root_fd) {
    struct stat st {};
    if (::fstat(root_fd, &st) != 0) {
      add(".", FindingKind::kUnreadable, fmt::format("cannot stat: {}", std::strerror(errno)));
      return;
    }
    audit_directory(root_fd, ".", st, 0);
  }

  std::vector<Finding> finish() {
    for (const auto& [key, links] : links_) {
      if (links.paths.size() >= links.nlink) continue;
      for (const auto& p : links.paths)
        add(p, FindingKind::kHardLinkEscape,
            fmt::format("{} of its {} hard links are outside the tree",
                        links.nlink - links.paths.size(), links.nlink));
    }
    std::sort(findings_.begin(), findings_.end(), [](const Finding& a, const Finding& b) {
      return std::tie(a.path, a.kind) < std::tie(b.path, b.kind);
    });
    return std::move(findings_);
  }

 private:
  static std::string child_rel(const std::string& rel, const std::string& name) {
    return rel == "." ? name : fmt::format("{}/{}", rel, name);
  }

  // Checks the open directory `dir` (at `rel`, looked at as `st`) and walks what it holds.
  void audit_directory(int dir, const std::string& rel, const struct stat& st, int depth) {
    check(rel, st, [dir](const char* name, void* buf, size_t size) {
      return ::fgetxattr(dir, name, buf, size);
    });
    std::vector<std::string> names;
    int dup = ::fcntl(dir, F_DUPFD_CLOEXEC, 0);
    DIR* d = dup < 0 ? nullptr : ::fdopendir(dup);
    if (!d) {
      add(rel, FindingKind::kUnreadable, fmt::format("cannot list: {}", std::strerror(errno)));
      if (dup >= 0) ::close(dup);
      return;
    }
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(std::move(name));
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto& name : names) audit_entry(dir, name, child_rel(rel, name), depth + 1);
  }

  // One entry of the open directory `parent`, never followed if it is a symlink.
  void audit_entry(int parent, const std::string& name, const std::string& rel, int depth) {
    struct stat st {};
    if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      add(rel, FindingKind::kUnreadable, fmt::format("cannot stat: {}", std::strerror(errno)));
      return;
    }
    if (!S_ISDIR(st.st_mode)) {
      check(rel, st, [path = fd_path(parent, name)](const char* attr, void* buf, size_t size) {
        return ::lgetxattr(path.c_str(), attr, buf, size);
      });
      if (S_ISLNK(st.st_mode)) check_symlink(parent, name, rel);
      return;
    }
    if (depth > kMaxAuditDepth) {
      add(rel, FindingKind::kUnreadable,
          fmt::format("deeper than {} levels: not audited", kMaxAuditDepth));
      return;
    }
    if (const auto& hook = audit_descend_hook()) hook(rel);
    // The entry is opened, never followed, and what is audited is what was opened: a directory
    // swapped for a symlink (or anything else) since the fstatat above is reported, not walked.
    int fd = ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      const int e = errno;
      add(rel, FindingKind::kUnreadable,
          e == ELOOP || e == ENOTDIR
              ? std::string("changed during the audit: no longer a directory; not followed")
              : fmt::format("cannot open: {}", std::strerror(e)));
      return;
    }
    DirFd dir(fd);
    struct stat opened {};
    if (::fstat(dir.get(), &opened) != 0) {
      add(rel, FindingKind::kUnreadable, fmt::format("cannot stat: {}", std::strerror(errno)));
      return;
    }
    audit_directory(dir.get(), rel, opened, depth);
  }
  bool own_uid(uint32_t id) const { return id == 0 || scope_.uids.contains(id); }
  bool own_gid(uint32_t id) const { return id == 0 || scope_.gids.contains(id); }
  void add(const std::string& rel, FindingKind kind, std::string detail) {
    findings_.push_back({rel, kind, std::move(detail)});
  }

  void check(const std::string& rel, const struct stat& st, const XattrGetter& xattr) {
    if (!own_uid(st.st_uid))
      add(rel, FindingKind::kForeignOwner,
          fmt::format("owned by uid {}, outside the tenant's {}-{}", st.st_uid, scope_.uids.first,
                      scope_.uids.last()));
    if (S_ISLNK(st.st_mode)) {
      count_links(rel, st);
      return;
    }
    const bool dir = S_ISDIR(st.st_mode);
    const mode_t m = st.st_mode;
    if (!own_gid(st.st_gid))
      add(rel, FindingKind::kForeignGroup,
          fmt::format("group {} (outside the tenant's {}-{}) has {}", st.st_gid, scope_.gids.first,
                      scope_.gids.last(), rwx((m >> 3) & 7)));
    if (m & S_IROTH)
      add(rel, FindingKind::kOtherReadable,
          dir ? "other may list this directory" : "other may read this file");
    if (m & S_IWOTH)
      add(rel, FindingKind::kOtherWritable,
          dir ? "other may create and delete entries here" : "other may write this file");
    if (m & S_IXOTH)
      add(rel, FindingKind::kOtherExecute,
          dir ? "other may traverse this directory" : "other may execute this file");
    if (!dir && (m & S_ISUID))
      add(rel, FindingKind::kSetuid, fmt::format("setuid file owned by uid {}", st.st_uid));
    if (!dir && (m & S_ISGID))
      add(rel, FindingKind::kSetgid, fmt::format("setgid file of group {}", st.st_gid));
    if (S_ISCHR(m) || S_ISBLK(m))
      add(rel, FindingKind::kDeviceFile,
          fmt::format("{} device {}:{}", S_ISCHR(m) ? "character" : "block", major(st.st_rdev),
                      minor(st.st_rdev)));
    check_acl(rel, xattr, "system.posix_acl_access", "ACL");
    if (dir) check_acl(rel, xattr, "system.posix_acl_default", "default ACL (inherited)");
    if (!dir) count_links(rel, st);
  }

  void check_acl(const std::string& rel, const XattrGetter& get, const char* xattr,
                 std::string_view label) {
    std::string error;
    auto acl = read_acl(get, xattr, &error);
    if (!error.empty()) add(rel, FindingKind::kUnreadable, error);
    if (!acl) return;
    unsigned mask = 7;
    for (const auto& e : *acl)
      if (e.tag == kAclMask) mask = e.perm & 7;
    for (const auto& e : *acl) {
      unsigned effective = e.perm & 7;
      if (e.tag == kAclUser || e.tag == kAclGroup) effective &= mask;
      if (effective == 0) continue;
      if (e.tag == kAclUser && !own_uid(e.id))
        add(rel, FindingKind::kAclGrant,
            fmt::format("{} grants user {} {}", label, e.id, rwx(effective)));
      else if (e.tag == kAclGroup && !own_gid(e.id))
        add(rel, FindingKind::kAclGrant,
            fmt::format("{} grants group {} {}", label, e.id, rwx(effective)));
      else if (e.tag == kAclOther && std::string_view(xattr) == "system.posix_acl_default")
        add(rel, FindingKind::kAclGrant,
            fmt::format("{} gives other {} on new entries", label, rwx(effective)));
    }
    (void)kAclUserObj;
    (void)kAclGroupObj;
  }

  void check_symlink(int parent, const std::string& name, const std::string& rel) {
    std::string target(PATH_MAX, '\0');
    ssize_t n = ::readlinkat(parent, name.c_str(), target.data(), target.size());
    if (n < 0) {
      add(rel, FindingKind::kUnreadable,
          fmt::format("cannot read the link: {}", std::strerror(errno)));
      return;
    }
    target.resize(static_cast<size_t>(n));
    // Where the kernel would land: every link along the way resolved, missing tails kept. A
    // relative target starts from the link's directory as it was opened.
    std::error_code ec;
    const std::filesystem::path from = target.starts_with('/') ? target : fd_path(parent, target);
    auto resolved = std::filesystem::weakly_canonical(from, ec);
    if (ec) {
      add(rel, FindingKind::kSymlinkEscape,
          fmt::format("-> {} cannot be resolved ({}); it may leave the tree", target,
                      ec.message()));
      return;
    }
    auto inside = resolved.lexically_relative(root_);
    if (inside.empty() || *inside.begin() == "..")
      add(rel, FindingKind::kSymlinkEscape,
          fmt::format("-> {} resolves to {}, outside the tree", target, resolved.string()));
  }

  void count_links(const std::string& rel, const struct stat& st) {
    if (st.st_nlink <= 1) return;
    auto& l = links_[{st.st_dev, st.st_ino}];
    l.nlink = st.st_nlink;
    l.paths.push_back(rel);
  }

  struct Links {
    nlink_t nlink = 0;
    std::vector<std::string> paths;
  };

  std::filesystem::path root_;
  AuditScope scope_;
  std::vector<Finding> findings_;
  std::map<std::pair<dev_t, ino_t>, Links> links_;
};

}  // namespace

namespace testing {
void set_audit_descend_hook(std::function<void(const std::string& rel)> hook) {
  audit_descend_hook() = std::move(hook);
}
}  // namespace testing

Result<std::vector<Finding>> audit_tree(const std::filesystem::path& tree,
                                        const AuditScope& scope) {
  std::error_code ec;
  auto root = std::filesystem::canonical(tree, ec);
  if (ec) return fail(Error::not_found(fmt::format("{}: {}", tree.string(), ec.message())));
  if (!std::filesystem::is_directory(root, ec))
    return fail(Error::invalid(fmt::format("{} is not a directory", tree.string())));
  if (scope.uids.count == 0 || scope.gids.count == 0)
    return fail(Error::invalid("the audit scope needs at least one uid and one gid"));
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return fail(Error::invalid(fmt::format("{}: {}", tree.string(), std::strerror(errno))));
  DirFd root_fd(fd);
  Auditor a(root, scope);
  a.walk_root(root_fd.get());
  return a.finish();
}

}  // namespace gp::storage
